"""dashboard.services.display.options: select box options that fit the sidebar."""

from __future__ import annotations

import pytest

from dashboard.services.display.options import ELLIPSIS, OPTION_CHARS, fit_name, option_labels


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
