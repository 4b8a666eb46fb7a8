"""dashboard.services.display.options: select box options that fit the sidebar."""

from __future__ import annotations

import pytest

from dashboard.services.display.options import (
    ELLIPSIS,
    MIN_NAME_CHARS,
    OPTION_CHARS,
    fit_name,
    option_labels,
)


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("token_embd.weight", "token_embd.weight"),
        ("encoder.layer.0.attention.self.query.weight", "…0.attention.self.query.weight"),
        ("model.layers.10.self_attn.q_proj.weight", "…10.self_attn.q_proj.weight"),
        ("encoder.layer.10.attention.output.LayerNorm.weight", "…layer.10.…LayerNorm.weight"),
        ("a_very_long_name_without_any_dots_at_all_here", "a_very_long…y_dots_at_all_here"),
    ],
)
def test_fit_name_keeps_the_layer_number_and_the_end(name: str, short: str) -> None:
    assert fit_name(name) == short
    assert len(short) <= OPTION_CHARS
    assert (ELLIPSIS in short) is (len(name) > OPTION_CHARS)


def test_option_labels_keep_the_tag_and_tell_names_apart() -> None:
    names = [f"model.layers.{i}.self_attn.{k}_proj.weight" for i in range(32) for k in "qkvo"]
    labels = option_labels(names, lambda n: "Q4_K")
    assert all(label.endswith("  Q4_K") for label in labels.values())
    assert len(set(labels.values())) == len(names)
    short = option_labels(names)
    assert all(len(v) <= OPTION_CHARS for v in short.values())
    assert len(set(short.values())) == len(names)
    with pytest.raises(ValueError, match="at least 8"):
        fit_name("x" * 20, 4)


@pytest.mark.parametrize("tag", ["GPTQ int4 g128 act-order", "NF4 + double quant"])
def test_a_tag_too_long_for_the_box_is_left_out(tag: str) -> None:
    """Such a tag left the name 8 characters and the box still cut the tag off
    ("qua…NF4_DQ  NF4 + double qua"); the caption under the box has the whole line."""
    names = ["model.layers.0.mlp.down_proj.weight", "quantized_NF4_DQ"]
    labels = option_labels(names, lambda n: tag)
    assert labels == {
        "model.layers.0.mlp.down_proj.weight": "…layers.0.mlp.down_proj.weight",
        "quantized_NF4_DQ": "quantized_NF4_DQ",
    }
    assert all(len(v) <= OPTION_CHARS for v in labels.values())
    # a tag that leaves the name MIN_NAME_CHARS is kept
    kept = option_labels(names, lambda n: "x" * (OPTION_CHARS - MIN_NAME_CHARS - 2))
    assert all(v.endswith("  " + "x" * 16) for v in kept.values())
