"""AppTest: quantized files through the existing sources. A ``.gguf`` (or a GPTQ folder)
inside the allowed roots lists every tensor with its stored type, shape and bytes; the
explorer shows what the file stores and, given the original, the file's error beside the
lab's round-to-nearest; the whole-model page reports every tensor and the mix; hostile
files give a message and the page keeps working."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from markdown_text import plain
from quantized_app import EXPLORER, MODEL, VIEWS, new_app, no_errors
from safetensors.torch import save_file
from streamlit.proto.Block_pb2 import Block as BlockProto
from streamlit.testing.v1 import AppTest

from dashboard.services.display.errors import ERROR_FORMAT
from dashboard.services.model.roots import ROOTS_ENV
from dashboard.services.sources.choice import SourceKind
from tests.core.quantized_files import (
    GGML,
    pack_gptq,
    prefixed,
    random_int_layer,
    write_folder,
    write_gguf,
)

pytestmark = pytest.mark.slow

GEN = torch.Generator().manual_seed(0)
UP = torch.randn(64, 256, generator=GEN)
DOWN = torch.randn(256, 64, generator=GEN)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GGUF made from an original folder (llama names), both inside the roots."""
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    original = tmp_path / "orig"
    original.mkdir()
    save_file(
        {"model.layers.0.mlp.up_proj.weight": UP, "model.layers.0.mlp.down_proj.weight": DOWN},
        str(original / "model.safetensors"),
    )
    write_gguf(
        tmp_path / "tiny-Q8_0.gguf",
        {
            "blk.0.ffn_up.weight": (gguf.quants.quantize(UP.numpy(), GGML.Q8_0), GGML.Q8_0),
            "blk.0.ffn_down.weight": (gguf.quants.quantize(DOWN.numpy(), GGML.Q4_0), GGML.Q4_0),
        },
        metadata={"llama.block_count": 1},
    )
    return tmp_path


def column_formats(frame_element) -> dict[str, str]:
    """Each configured column's number format, from the dataframe element's proto."""
    config = json.loads(frame_element.proto.columns or "{}")
    return {
        name.removeprefix("col:"): fmt
        for name, col in config.items()
        if (fmt := (col.get("type_config") or {}).get("format")) is not None
    }


def stored_row(at: AppTest):
    """The block holding the quantized view's "Stored type" metric (key ``qf_stored``)."""

    def find(node):
        for child in getattr(node, "children", {}).values():
            proto = getattr(child, "proto", None)
            if isinstance(proto, BlockProto) and proto.id.endswith("qf_stored"):
                return child
            if (found := find(child)) is not None:
                return found
        return None

    row = find(at.main)
    assert row is not None, "no qf_stored block"
    return row


def frame(at: AppTest, column: str):
    """The first dataframe on the page with ``column``."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _open(at: AppTest, path: Path) -> AppTest:
    at.run()
    at.selectbox(key="src_kind").set_value(SourceKind.FOLDER).run()
    if at.selectbox(key="src_folder").options:
        at.selectbox(key="src_folder").set_value("").run()
    at.text_input(key="src_folder_path").set_value(str(path)).run()
    return at


def test_a_gguf_in_a_root_lists_its_tensors_and_shows_what_is_stored(root: Path) -> None:
    at = _open(new_app(EXPLORER), root / "tiny-Q8_0.gguf")
    no_errors(at)
    picker = at.selectbox(key="src_folder_tensor")
    assert picker.options == [  # header order, as llama.cpp lists them; the type kept
        "blk.0.ffn_up.weight  Q8_0",
        "blk.0.ffn_down.weight  Q4_0",
    ]
    # the picked one's whole line under the box (the sidebar cut it off)
    captions = [plain(c.value) for c in at.sidebar.caption]
    assert "blk.0.ffn_up.weight · Q8_0 · [64, 256] · 17.4 kB" in captions, captions
    picker.set_value("blk.0.ffn_up.weight").run()
    no_errors(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Stored type"] == "Q8_0" and metrics["Bits per weight, as stored"] == "8.5"
    assert any("No original given" in plain(c.value) for c in at.caption)
    assert any("As the lab models it: Q8_0 (int8 sym g32" in plain(c.value) for c in at.caption)
    assert at.query_params["src"] == "folder"
    assert at.query_params["tensor"] == "blk.0.ffn_up.weight"


def test_the_original_gives_the_files_error_beside_the_labs_rtn(root: Path) -> None:
    at = _open(new_app(EXPLORER), root / "tiny-Q8_0.gguf")
    at.selectbox(key="src_folder_tensor").set_value("blk.0.ffn_up.weight").run()
    at.radio(key="qf_orig").set_value("folder").run()
    at.text_input(key="qf_orig_path").set_value(str(root / "orig")).run()
    no_errors(at)
    table = frame(at, "quantization")
    assert list(table["quantization"]) == [
        "the file (Q8_0)",
        "the lab's round-to-nearest, same format",
    ]
    # made by the gguf package's reference Q8_0: the lab's llama.cpp recipe rounds the same
    assert table["mse"].iloc[0] == table["mse"].iloc[1] > 0
    # errors at three significant digits: Streamlit's default 4 decimals wrote 0.000002
    (element,) = [d for d in at.dataframe if "quantization" in d.value.columns]
    formats = column_formats(element)
    assert formats == {"mse": ERROR_FORMAT, "rmse": ERROR_FORMAT, "max |error|": ERROR_FORMAT}


def test_a_link_reopens_the_files_tensor(root: Path) -> None:
    at = new_app(
        EXPLORER, src="folder", folder=str(root / "tiny-Q8_0.gguf"), tensor="blk.0.ffn_down.weight"
    ).run()
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Stored type"] == "Q4_0"


def test_a_gptq_folder_is_a_source_too(root: Path) -> None:
    rng = np.random.default_rng(0)
    layer = random_int_layer(rng, 32, 64, 4, 32, act_order=True)
    config = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True}
    parts = prefixed("model.layers.0.mlp.up_proj", pack_gptq(layer, 4, v1=True))
    write_folder(root / "gptq", parts, config)
    at = _open(new_app(EXPLORER), root / "gptq")
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Stored type"] == "GPTQ int4 g32 act-order"
    assert any("act-order" in plain(c.value) for c in [*at.caption, *at.info])
    # the stored type, bytes and bits: a row that wraps, each metric its text's width; in
    # a third of the page "GPTQ int4 g32 act-order" was cut off ("GPTQ int4 g128 a…")
    row = stored_row(at)
    assert row.proto.flex_container.direction == BlockProto.FlexContainer.Direction.HORIZONTAL
    assert row.proto.flex_container.wrap
    labels = [m.label for m in row.get("metric")]
    assert labels == ["Stored type", "Bytes in the file", "Bits per weight, as stored"]
    # the file's bits (4.281: g_idx too) against the layout's sum below (4.156) had no
    # reason given: g_idx is 64 int32 = 256 bytes beyond the codes and scales
    captions = [plain(c.value) for c in at.caption]
    assert any("are 256 more than the codes and scales" in c and "g_idx" in c for c in captions)
    # its config is named by its description: said once, not "int4 asym g32 (int4 asym g32)"
    (modelled,) = [plain(c.value) for c in at.caption if "As the lab models it" in c.value]
    assert "(" not in modelled, modelled


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"GGML" + b"\0" * 40, "is not a GGUF file"),
        (b"GGUF\x03\0\0\0" + (2**60).to_bytes(8, "little") + b"\0" * 16, "claims"),
    ],
    ids=["bad-magic", "huge-count"],
)
def test_hostile_files_say_why_and_the_page_keeps_working(
    root: Path, content: bytes, message: str
) -> None:
    bad = root / "bad.gguf"
    bad.write_bytes(content)
    at = _open(new_app(EXPLORER), root / "tiny-Q8_0.gguf")
    no_errors(at)
    at.text_input(key="src_folder_path").set_value(str(bad)).run()
    assert not at.exception
    assert any(message in plain(e.value) and "bad.gguf" in plain(e.value) for e in at.error)
    # the previous tensor is still shown
    assert {m.label: m.value for m in at.metric}["Stored type"] in ("Q4_0", "Q8_0")


def test_whole_model_page_reports_every_tensor_and_the_mix(root: Path) -> None:
    at = new_app(MODEL).run()
    at.radio(key="m_source").set_value("folder").run()
    if at.selectbox(key="m_folder").options:
        at.selectbox(key="m_folder").set_value("").run()
    at.text_input(key="m_folder_path").set_value(str(root / "tiny-Q8_0.gguf")).run()
    no_errors(at)
    mix = frame(at, "share of bytes")
    assert list(mix["type"]) == ["Q8_0", "Q4_0"] and list(mix["tensors"]) == [1, 1]
    at.radio(key="qm_orig").set_value("folder").run()
    at.text_input(key="qm_orig_path").set_value(str(root / "orig")).run()
    no_errors(at)
    report = frame(at, "original")
    assert set(report["original"]) == {
        "model.layers.0.mlp.up_proj.weight",
        "model.layers.0.mlp.down_proj.weight",
    }
    assert (report["mse"] > 0).all()
    (element,) = [d for d in at.dataframe if "original" in d.value.columns]
    formats = column_formats(element)
    assert formats["mse"] == formats["rtn_mse"] == ERROR_FORMAT, formats
    # the errors first, before the long original names (past the edge at 1100 px), and
    # the mix's table on a row of its own (its last columns were cut off in two fifths)
    assert list(report.columns[:6]) == ["name", "type", "mse", "sqnr_db", "rtn_mse", "rtn_sqnr_db"]
    in_columns = [list(d.value.columns) for col in at.columns for d in col.dataframe]
    assert not any("share of bytes" in c for c in in_columns), in_columns


def test_a_folder_with_an_unknown_quantization_config_says_which(root: Path) -> None:
    rng = np.random.default_rng(0)
    parts = prefixed(
        "model.layers.0.mlp.up_proj", pack_gptq(random_int_layer(rng, 8, 32, 4, 32), 4, True)
    )
    write_folder(root / "hqq", parts, {"quant_method": "hqq", "nbits": 4})
    at = _open(new_app(EXPLORER), root / "tiny-Q8_0.gguf")
    at.text_input(key="src_folder_path").set_value(str(root / "hqq")).run()
    assert not at.exception
    assert any("quant_method 'hqq'" in plain(e.value) for e in at.error)
    assert {m.label: m.value for m in at.metric}["Stored type"] in ("Q4_0", "Q8_0")


def test_a_tensor_stored_as_floats_is_explored_like_any_float_tensor(root: Path) -> None:
    """GGUF's F32 norm has no codes of the file's own: the page used to say "the values are
    shown" and then drew nothing. Its values are quantized under a scheme picked here."""
    norm = torch.randn(256, generator=torch.Generator().manual_seed(3))
    write_gguf(
        root / "norm.gguf",
        {
            "blk.0.ffn_up.weight": (gguf.quants.quantize(UP.numpy(), GGML.Q8_0), GGML.Q8_0),
            "output_norm.weight": (norm.numpy(), None),
        },
    )
    at = new_app(
        EXPLORER, src="folder", folder=str(root / "norm.gguf"), tensor="output_norm.weight"
    ).run()
    no_errors(at)
    infos = [plain(i.value) for i in at.info]
    assert not any("Only the values are shown" in i for i in infos), infos
    assert any("Stored unquantized (F32)" in i for i in infos), infos
    at.selectbox(key="q_preset").set_value("Q8_0").run()
    no_errors(at)
    assert at.query_params["preset"] == "Q8_0"
    assert at.query_params["tensor"] == "output_norm.weight"
    assert len(at.get("plotly_chart")) + len(at.get("custom_component")) > 0


def test_a_tensor_stored_as_f16_is_captioned_with_its_stored_type(root: Path) -> None:
    """A GGUF's F16 tensor is read as float32: the caption said only "float32", as if the
    file held float32 values; an F32 tensor's caption stays as it was."""
    norm = torch.randn(256, generator=torch.Generator().manual_seed(3))
    write_gguf(
        root / "halves.gguf",
        {
            "output_norm.weight": (norm.numpy(), None),
            "token_embd.weight": (norm.reshape(8, 32).numpy().astype(np.float16), None),
        },
    )
    captions = {}
    for name in ("token_embd.weight", "output_norm.weight"):
        at = new_app(EXPLORER, src="folder", folder=str(root / "halves.gguf"), tensor=name)
        at.run()
        no_errors(at)
        captions[name] = next(
            c for c in (plain(c.value) for c in at.caption) if f"{name} · shape" in c
        )
    assert captions["token_embd.weight"].endswith("stored as F16, read as float32"), captions
    assert captions["output_norm.weight"].endswith("· float32"), captions


def test_a_link_to_a_file_without_a_tensor_opens_its_first_tensor(root: Path) -> None:
    """``?src=folder&folder=…`` alone (a file shared by its path) used to be refused as
    "tensor=None is not a valid tensor name" and fall back to the synthetic tensor."""
    at = new_app(EXPLORER, src="folder", folder=str(root / "tiny-Q8_0.gguf")).run()
    no_errors(at)
    assert not any("tensor=None" in plain(w.value) for w in at.warning)
    assert at.selectbox(key="src_folder_tensor").value == "blk.0.ffn_up.weight"
    assert {m.label: m.value for m in at.metric}["Stored type"] == "Q8_0"
    assert at.query_params["tensor"] == "blk.0.ffn_up.weight"


def test_switching_files_falls_back_to_the_new_files_tensor_without_a_warning(
    root: Path,
) -> None:
    """The tensor picked in one file is not "missing" from the next file the user opens:
    that warning is for a link naming a tensor its file lacks."""
    rng = np.random.default_rng(0)
    parts = prefixed(
        "model.layers.0.mlp.up_proj", pack_gptq(random_int_layer(rng, 32, 64, 4, 32), 4, True)
    )
    write_folder(root / "gptq", parts, {"quant_method": "gptq", "bits": 4, "group_size": 32})
    at = _open(new_app(EXPLORER), root / "tiny-Q8_0.gguf")
    at.selectbox(key="src_folder_tensor").set_value("blk.0.ffn_down.weight").run()
    at.text_input(key="src_folder_path").set_value(str(root / "gptq")).run()
    no_errors(at)
    assert not [plain(w.value) for w in at.warning]
    assert at.selectbox(key="src_folder_tensor").value == "model.layers.0.mlp.up_proj.weight"


def test_a_link_naming_a_tensor_its_file_lacks_says_so_once_escaped(root: Path) -> None:
    """The warning's name was escaped twice: the page showed ``blk\\.9\\.nothing``."""
    at = new_app(
        EXPLORER, src="folder", folder=str(root / "tiny-Q8_0.gguf"), tensor="blk.9.nothing_x"
    ).run()
    no_errors(at)
    warnings = [plain(w.value) for w in at.warning]
    assert "Tensor 'blk.9.nothing_x' is not in this file." in warnings, warnings


def test_the_whole_model_pages_link_keeps_its_model_folder(root: Path) -> None:
    """A model folder picked on the Whole model page went into no link: a reload or a
    shared address showed the bundled model."""
    gguf_path = str(root / "tiny-Q8_0.gguf")
    at = new_app(MODEL).run()
    at.radio(key="m_source").set_value("folder").run()
    if at.selectbox(key="m_folder").options:
        at.selectbox(key="m_folder").set_value("").run()
    at.text_input(key="m_folder_path").set_value(gguf_path).run()
    no_errors(at)
    assert at.query_params["m.src"] == "folder"
    assert at.query_params["m.folder"] == gguf_path
    # the link reopens it
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": gguf_path}).run()
    no_errors(at)
    assert at.radio(key="m_source").value == "folder"
    assert list(frame(at, "share of bytes")["type"]) == ["Q8_0", "Q4_0"]
    # a path outside the roots is refused as a typed one is
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": "/etc/passwd"}).run()
    assert not at.exception
    assert any("outside the allowed folders" in plain(e.value) for e in at.error)


def test_ab_on_a_quantized_files_tensor_says_its_values_are_already_quantized(
    root: Path,
) -> None:
    """Q8_0 against Q8_0's own dequantized values is exact: the page said "float32" and
    "exact: better on both" with nothing saying the values were the file's Q8_0 ones."""
    at = new_app(
        str(VIEWS / "ab.py"),
        src="folder",
        folder=str(root / "tiny-Q8_0.gguf"),
        tensor="blk.0.ffn_up.weight",
        **{"a.preset": "Q8_0", "b.preset": "Q4_0"},
    ).run()
    no_errors(at)
    captions = [plain(c.value) for c in at.caption]
    assert "stored as Q8_0, dequantized to float32" in captions[0], captions
    assert any("already quantized (Q8_0)" in c for c in captions), captions


def test_the_labs_export_names_its_format_as_the_picker_does(root: Path) -> None:
    """The explorer's export of a shipped format, opened again: "Stored type" said the
    registry key (NF4_DQ) where the scheme picker and the export's caption say "NF4 +
    double quant"."""
    from dashboard.services.explorer import exports
    from dashboard.services.explorer.explore import explore
    from quant_core import QuantConfig

    exp = explore(UP, QuantConfig.from_name("NF4_DQ"))
    (root / "up-nf4.safetensors").write_bytes(exports.quantized_safetensors(exp))
    at = new_app(EXPLORER, src="folder", folder=str(root / "up-nf4.safetensors")).run()
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Stored type"] == "NF4 + double quant"
    captions = [plain(c.value) for c in [*at.caption, *at.sidebar.caption]]
    assert any("stored as NF4 + double quant" in c for c in captions), captions
    assert any(c.startswith("up-nf4 · NF4 + double quant · [64, 256]") for c in captions)
    assert any("Quantization Lab export: NF4 + double quant," in plain(i.value) for i in at.info)
    assert any(c.startswith("As the lab models it: NF4 + double quant (nf4") for c in captions)
    assert not any("NF4_DQ" in c for c in captions), captions
