"""capture_linear_inputs on small models whose linear inputs are known by hand."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from quant_core import PerChannel, PerGroup, PerTensor, QuantConfig, quantize
from quant_core.activations import ActivationGranularity, feature_absmax, outlier_features
from quant_core.capture import ActivationCapture, capture_linear_inputs


class _Block(nn.Module):
    """q, k and v read one tensor (as in attention); then a two-layer MLP; a 2-D head on
    the first token (as BERT's pooler)."""

    def __init__(self, gen: torch.Generator) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
        self.up, self.down = nn.Linear(4, 6), nn.Linear(6, 4, bias=False)
        self.head = nn.Linear(4, 3)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.q(x) + self.k(x) * self.v(x)
        h = self.down(torch.relu(self.up(h)))
        return self.head(h[:, 0])


def _by_hand(model: _Block, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every linear input of ``model(x)`` computed with the same ops, in full."""
    h = model.q(x) + model.k(x) * model.v(x)
    r = torch.relu(model.up(h))
    d = model.down(r)
    return {"q": x, "k": x, "v": x, "up": h, "down": r, "head": d[:, 0]}


@pytest.fixture
def block(gen: torch.Generator) -> _Block:
    return _Block(gen)


def test_capture_keeps_the_real_tokens_of_each_layer(block, gen):
    x = torch.randn(3, 5, 4, generator=gen)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    with torch.inference_mode():
        cap = capture_linear_inputs(block, lambda: block(x), token_mask=mask)
        full = _by_hand(block, x)
    assert isinstance(cap, ActivationCapture)
    assert cap.layer_names == ("q", "k", "v", "up", "down", "head")
    keep = mask.bool()
    for name in ("q", "k", "v", "up", "down"):
        assert cap[name].shape == (9, full[name].shape[-1])  # 3 + 5 + 1 real tokens
        assert torch.equal(cap[name], full[name][keep])  # the same ops: bit for bit
    assert torch.equal(cap["head"], full["head"])  # 2-D input: kept whole, one row each
    assert cap.seconds > 0


def test_capture_is_an_ordinary_cpu_float32_tensor(block, gen):
    x = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64)
    block = block.double()
    with torch.inference_mode():
        cap = capture_linear_inputs(block, lambda: block(x))
    t = cap["up"]
    assert t.dtype == torch.float32 and t.device.type == "cpu" and not t.is_inference()
    t.mul_(2)  # in place outside inference mode: allowed on the copy


def test_shared_inputs_are_stored_once_and_counted_once(block, gen):
    x = torch.randn(2, 3, 4, generator=gen)
    cap = capture_linear_inputs(block, lambda: block(x))
    assert cap["q"] is cap["k"] is cap["v"]
    # q/k/v: 6x4, up: 6x4, down: 6x6, head: 2x4 float32 values
    assert cap.nbytes == 4 * (6 * 4 + 6 * 4 + 6 * 6 + 2 * 4)


def test_capture_joins_repeated_calls_and_removes_its_hooks(block, gen):
    a, b = torch.randn(1, 2, 4, generator=gen), torch.randn(1, 3, 4, generator=gen)

    def run() -> None:
        block(a)
        block(b)

    cap = capture_linear_inputs(block, run, layers=["up"])
    assert cap.layer_names == ("up",)
    expected = torch.cat([_by_hand(block, a)["up"][0], _by_hand(block, b)["up"][0]])
    assert torch.equal(cap["up"], expected)
    assert all(not m._forward_pre_hooks for m in block.modules())


def test_hooks_are_removed_when_the_run_fails(block, gen):
    def run() -> None:
        block(torch.randn(2, 3, 4, generator=gen))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        capture_linear_inputs(block, run)
    assert all(not m._forward_pre_hooks for m in block.modules())


def test_a_mask_that_does_not_fit_the_input_is_a_value_error(block, gen):
    x = torch.randn(2, 3, 4, generator=gen)
    with pytest.raises(ValueError, match=r"token_mask shape \(2, 4\)"):
        capture_linear_inputs(
            block, lambda: block(x), token_mask=torch.ones(2, 4, dtype=torch.bool)
        )
    assert all(not m._forward_pre_hooks for m in block.modules())


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"layers": ["relu"]}, ValueError, "no layer named 'relu'"),
        ({"layers": [""]}, ValueError, "'' is a _Block, not an nn.Linear"),
        ({"layers": "q"}, TypeError, "not a bare string"),
        ({"layers": []}, ValueError, "layers is empty"),
        ({"token_mask": torch.ones(2, 3)}, TypeError, "bool or integer tensor, got torch.float32"),
        ({"token_mask": torch.ones(6, dtype=torch.bool)}, ValueError, r"2-D \[batch, seq\]"),
        ({"token_mask": [[1, 1, 1]]}, TypeError, "token_mask must be a torch.Tensor"),
    ],
)
def test_bad_capture_arguments_name_the_value(block, gen, kwargs, error, match):
    x = torch.randn(2, 3, 4, generator=gen)
    with pytest.raises(error, match=match):
        capture_linear_inputs(block, lambda: block(x), **kwargs)


def test_bad_module_run_and_layers_that_never_ran(block, gen):
    with pytest.raises(TypeError, match=r"module must be a torch\.nn\.Module, got str"):
        capture_linear_inputs("model", lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="run must be a callable"):
        capture_linear_inputs(block, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"has no nn.Linear layer"):
        capture_linear_inputs(nn.ReLU(), lambda: None)
    with pytest.raises(ValueError, match=r"never ran.*'head'"):
        capture_linear_inputs(block, lambda: block.up(torch.ones(1, 4)), layers=["up", "head"])


def test_feature_absmax_and_outliers_by_hand():
    x = torch.tensor([[1.0, -2.0, 0.5, 30.0], [-1.5, 1.0, 0.25, -40.0]])
    assert torch.equal(feature_absmax(x), torch.tensor([1.5, 2.0, 0.5, 40.0]))
    # median of [0.5, 1.5, 2, 40] is 1.5 (torch takes the lower middle): 40 > 6 * 1.5
    assert outlier_features(x).tolist() == [3]
    assert outlier_features(x, factor=30.0).tolist() == []
    with pytest.raises(ValueError, match=r"2-D \[tokens, features\].*\(8,\)"):
        feature_absmax(torch.ones(8))
    with pytest.raises(ValueError, match="factor=1 must be > 1"):
        outlier_features(x, factor=1)
    with pytest.raises(TypeError, match="factor must be a number"):
        outlier_features(x, factor="6")  # type: ignore[arg-type]


def test_activation_granularity_names_and_round_trip():
    g = ActivationGranularity
    assert g.PER_TENSOR.granularity == PerTensor()
    assert g.PER_TOKEN.granularity == PerChannel(axis=0)
    assert g.PER_FEATURE.granularity == PerChannel(axis=1)
    assert [m.label for m in g] == [
        "per-tensor",
        "per-token (one scale per row)",
        "per-channel (per feature)",
    ]
    for member in g:
        assert g.of(member.granularity) is member
    assert g.of(PerChannel(axis=-1)) is g.PER_FEATURE
    assert [m.allows_static for m in g] == [True, False, True]
    x = torch.randn(5, 3)  # the scale shapes the docstring promises
    shapes = [tuple(quantize(x, QuantConfig(granularity=m.granularity)).scale.shape) for m in g]
    assert shapes == [(), (5,), (3,)]
    with pytest.raises(ValueError, match="has no activation name"):
        g.of(PerGroup(4))
    with pytest.raises(ValueError, match="has no activation name"):
        g.of(PerChannel(axis=2))
