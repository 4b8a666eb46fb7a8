"""Tensor sources and their URL state: synthetic draws, the teaching examples, source and
explorer-view query parameters."""

from __future__ import annotations

import pytest
import torch

from dashboard.services.activations.sentences import RangeMode, SentenceSet
from dashboard.services.display.reduce import Reduction
from dashboard.services.sources.choice import (
    ActivationSource,
    ExampleSource,
    FolderSource,
    ModelSource,
    SyntheticSource,
    UploadSource,
)
from dashboard.services.sources.examples import Example, example_tensor
from dashboard.services.sources.synthetic import Distribution, SyntheticSpec, make_synthetic
from dashboard.services.state.source import (
    has_own_sentences,
    source_from_query,
    source_to_query,
)

# --- sources -------------------------------------------------------------------------


@pytest.mark.parametrize("dist", list(Distribution), ids=lambda d: d.value)
def test_synthetic_is_reproducible_and_shaped(dist: Distribution) -> None:
    spec = SyntheticSpec(dist, rows=20, cols=30, seed=7)
    a, b = make_synthetic(spec), make_synthetic(spec)
    assert a.shape == (20, 30)
    assert torch.equal(a, b)
    assert not torch.equal(a, make_synthetic(SyntheticSpec(dist, rows=20, cols=30, seed=8)))


def test_outlier_channel_is_scaled() -> None:
    base = make_synthetic(SyntheticSpec(rows=50, cols=8, seed=1))
    spiked = make_synthetic(SyntheticSpec(rows=50, cols=8, seed=1, outlier_channel=3))
    assert torch.allclose(spiked[:, 3], base[:, 3] * 20.0)
    assert torch.equal(spiked[:, :3], base[:, :3])


def test_outliers_fraction_roughly_respected() -> None:
    x = make_synthetic(
        SyntheticSpec(Distribution.OUTLIERS, 200, 200, outlier_fraction=0.01, outlier_magnitude=50)
    )
    n = int((x.abs() == 50).sum())
    # Binomial(40000, 0.01): mean 400, sd ~20; 6 sd either side.
    assert 280 <= n <= 520


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rows": 0}, "rows and cols must be in 1..16384"),
        ({"cols": 16_385, "rows": 1}, "rows and cols must be in 1..16384"),
        ({"seed": -1}, "seed=-1 must be in"),
        ({"seed": 2**31}, "seed=2147483648 must be in"),
        ({"rows": 10000, "cols": 10000}, "exceeds the limit"),
        ({"outlier_fraction": 0.9}, "outlier_fraction"),
        ({"outlier_channel": 999}, "outlier_channel"),
    ],
)
def test_synthetic_spec_rejects_bad_values(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SyntheticSpec(**kwargs)


def test_examples_match_the_teaching_material() -> None:
    assert example_tensor(Example.COURSE_3X3)[0, 2] == pytest.approx(728.6)
    assert example_tensor(Example.VECTOR_10).shape == (10,)
    assert example_tensor(Example.RANDOM_4X4).shape == (4, 4)


# --- source URL state ----------------------------------------------------------------

DEFAULT = SyntheticSource(SyntheticSpec())


@pytest.mark.parametrize(
    "choice",
    [
        SyntheticSource(SyntheticSpec(Distribution.OUTLIERS, 64, 32, 5, 0.01, 30.0, 4)),
        SyntheticSource(SyntheticSpec(Distribution.LAPLACE, 7, 9, 2)),
        ExampleSource(Example.VECTOR_10),
        ModelSource("encoder.layer.3.output.dense.weight"),
        ActivationSource(),
        ActivationSource("pooler.dense", ranges=RangeMode.STATIC),
    ],
    ids=repr,
)
def test_source_round_trips_through_query(choice) -> None:
    assert source_from_query(source_to_query(choice), DEFAULT) == choice


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"src": "pickle"}, "src"),
        ({"src": "synthetic", "rows": "99999"}, "rows"),
        ({"src": "synthetic", "rows": "1e3"}, "rows"),
        ({"src": "synthetic", "dist": "cauchy"}, "dist"),
        ({"src": "synthetic", "rows": "9" * 500}, "characters"),
        ({"src": "model", "tensor": "a;rm -rf /"}, "tensor"),
        ({"src": "upload"}, "upload"),
        ({"src": "act", "layer": "encoder/../x"}, "layer"),
        ({"src": "act", "ranges": "sometimes"}, "ranges"),
        ({"src": "act", "sents": "Hello world"}, "sents"),
    ],
)
def test_tampered_source_query_raises(params: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        source_from_query(params, DEFAULT)


@pytest.mark.parametrize("empty", [{}, {"tensor": ""}], ids=["absent", "empty"])
def test_a_model_or_folder_link_without_a_tensor_opens_at_the_first(empty: dict) -> None:
    """``?src=folder&folder=...`` alone: the parser refused it ("tensor=None is not a valid
    tensor name") and the picker stood a placeholder name in to get past it."""
    model = source_from_query({"src": "model", **empty}, DEFAULT)
    folder = source_from_query({"src": "folder", "folder": "/m/tiny", **empty}, DEFAULT)
    assert model == ModelSource(None) and folder == FolderSource("/m/tiny", None)
    # back to a link that names no tensor either
    assert source_to_query(model) == {"src": "model"}
    assert source_to_query(folder) == {"src": "folder", "folder": "/m/tiny"}
    for choice in (model, folder):
        assert source_from_query(source_to_query(choice), DEFAULT) == choice


@pytest.mark.parametrize("name", ["a b", "a;rm -rf /", "../w", "w\u00e9"])
def test_a_bad_tensor_name_is_refused_as_before(name: str) -> None:
    for params in ({"src": "model"}, {"src": "folder", "folder": "/m"}):
        with pytest.raises(ValueError, match=r"tensor=.* is not a valid tensor name"):
            source_from_query({**params, "tensor": name}, DEFAULT)
    with pytest.raises(ValueError, match="folder=None is not a folder path"):
        source_from_query({"src": "folder", "tensor": "w"}, DEFAULT)


def test_upload_has_no_url_form() -> None:
    assert source_to_query(UploadSource("id", "w.npy", None)) == {"src": "upload"}


def test_own_sentences_do_not_travel_in_links() -> None:
    """The user's text is not put in the URL: ``sents=own`` says so, and the link opens
    with the bundled sentences (the picker then warns)."""
    own = ActivationSource("pooler.dense", SentenceSet(("my own text", "and more")))
    query = source_to_query(own)
    assert query == {"src": "act", "layer": "pooler.dense", "sents": "own"}
    assert "my own text" not in " ".join(query.values())
    assert has_own_sentences(query)
    restored = source_from_query(query, DEFAULT)
    assert restored == ActivationSource("pooler.dense")
    assert restored.sentences.is_bundled
    assert not has_own_sentences(source_to_query(restored))


def test_activation_query_defaults_to_the_first_query_layer() -> None:
    assert source_from_query({"src": "act"}, DEFAULT) == ActivationSource()
    assert ActivationSource().layer == "encoder.layer.0.attention.self.query"


def test_missing_source_gives_default() -> None:
    assert source_from_query({"bits": "4"}, DEFAULT) is DEFAULT


# --- view URL state ------------------------------------------------------------------


def test_view_state_round_trip_and_defaults() -> None:
    from dashboard.services.state.view import ViewState, view_from_query, view_to_query

    view = ViewState(Reduction.MAX_ABS, False, 100, 7, 64, 12)
    assert view_from_query(view_to_query(view)) == view
    assert view_to_query(ViewState()) == {}
    assert view_from_query({"bits": "4"}) == ViewState()


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"red": "median"}, "red"),
        ({"bnd": "yes"}, "bnd"),
        ({"zs": "1000"}, "zs"),
        ({"zr": "-1"}, "zr"),
        ({"blk": "9" * 40}, "blk"),
    ],
)
def test_view_state_rejects_tampering(params: dict, match: str) -> None:
    from dashboard.services.state.view import view_from_query

    with pytest.raises(ValueError, match=match):
        view_from_query(params)
