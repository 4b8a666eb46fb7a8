"""Hostile quantized files: truncated, a lying header, offsets out of range, huge declared
shapes or counts, unknown types, non-regular files. Each is a ``QuantizedFileError``
naming the file (and the tensor) and the problem, raised before anything large is
allocated; random corruptions give that error or a file that still reads, never another
exception."""

from __future__ import annotations

import json
import os
import struct
import threading

import gguf
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from quantized_files import (
    GGML,
    pack_compressed,
    pack_gptq,
    prefixed,
    random_int_layer,
    random_signed_layer,
    write_folder,
    write_gguf,
)
from safetensors.torch import save

from quant_core.files import QuantizedFileError, open_quantized, open_quantized_bytes
from quant_core.files.gguf_header import GGUFArray

MODULE = "model.layers.0.mlp.up_proj"


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def raw_gguf(
    tensors: list[tuple[str, tuple[int, ...], int, int]],
    data: bytes,
    kv: bytes = b"",
    n_kv: int = 0,
    n_tensors: int | None = None,
    magic: bytes = b"GGUF",
    version: int = 3,
) -> bytes:
    """A GGUF file written by hand: ``tensors`` as (name, dims innermost first, type id,
    offset); ``kv`` the encoded metadata entries, ``n_kv`` of them."""
    head = magic + struct.pack(
        "<IQQ", version, len(tensors) if n_tensors is None else n_tensors, n_kv
    )
    head += kv
    for name, dims, type_id, offset in tensors:
        head += _s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        head += struct.pack("<IQ", type_id, offset)
    head += b"\0" * (-len(head) % 32)
    return head + data


F32 = int(GGML.F32)
GOOD = [("w", (8, 2), F32, 0)]
GOOD_DATA = np.arange(16, dtype=np.float32).tobytes()


def _open(tmp_path, raw: bytes, name: str = "m.gguf"):
    path = tmp_path / name
    path.write_bytes(raw)
    return open_quantized(path)


def test_the_hand_written_file_is_valid(tmp_path):
    f = _open(tmp_path, raw_gguf(GOOD, GOOD_DATA))
    assert torch.equal(f.load("w").dequantize(), torch.arange(16.0).reshape(2, 8))
    reader = gguf.GGUFReader(tmp_path / "m.gguf")
    assert reader.tensors[0].name == "w"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            raw_gguf(GOOD, GOOD_DATA, magic=b"GGML"),
            r"m\.gguf is not a GGUF file: it starts with b'GGML'",
        ),
        (b"GGUF\x03\x00", r"m\.gguf is not a GGUF file: 6 bytes"),
        (raw_gguf(GOOD, GOOD_DATA, version=1), "GGUF version 1 is not read"),
        (raw_gguf(GOOD, GOOD_DATA, version=3 << 24), "big-endian"),
        (raw_gguf(GOOD, GOOD_DATA[:-4]), r"tensor 'w' .* ends past the end of the file"),
        (raw_gguf([("w", (8, 2), F32, 4096)], GOOD_DATA), r"tensor 'w' .* ends past the end"),
        (raw_gguf([("w", (2**40, 2**20), F32, 0)], GOOD_DATA), r"tensor 'w' .* ends past the end"),
        (raw_gguf([("w", (8, 2), 99, 0)], GOOD_DATA), "tensor 'w' has unknown ggml type id 99"),
        (raw_gguf([("w", (), F32, 0)], GOOD_DATA), "tensor 'w' has 0 dimensions"),
        (raw_gguf([("w", (1,) * 5, F32, 0)], GOOD_DATA), "tensor 'w' has 5 dimensions"),
        (raw_gguf([("w", (8, 0), F32, 0)], GOOD_DATA), "tensor 'w' has an empty dimension"),
        (raw_gguf([("w", (8, 1), F32, 4)], GOOD_DATA), "not a multiple of the alignment"),
        (
            raw_gguf([("w", (30, 1), int(GGML.Q4_0), 0)], GOOD_DATA),
            "blocks of 32 values, but its rows hold 30",
        ),
        (
            raw_gguf([("w", (8, 1), F32, 0), ("w", (8, 1), F32, 32)], GOOD_DATA * 4),
            "lists tensor 'w' twice",
        ),
        (
            raw_gguf([("a", (8, 2), F32, 0), ("b", (8, 1), F32, 32)], GOOD_DATA * 4),
            "tensors 'a' and 'b' share bytes",
        ),
        (raw_gguf(GOOD, GOOD_DATA, n_tensors=2**60), "claims 1,152,921,504,606,846,976 tensor"),
        (raw_gguf(GOOD, GOOD_DATA, n_kv=2**40), "1,099,511,627,776 metadata entries"),
        (
            raw_gguf(GOOD, GOOD_DATA, kv=_s("k") + struct.pack("<IIQ", 9, 0, 2**40), n_kv=1),
            r"metadata 'k' claims 1,099,511,627,776 items of 1 bytes",
        ),
        (
            raw_gguf(GOOD, GOOD_DATA, kv=_s("k") + struct.pack("<IIQ", 9, 8, 2**40), n_kv=1),
            r"metadata 'k' claims 1,099,511,627,776 items",
        ),
        (
            raw_gguf(GOOD, GOOD_DATA, kv=_s("k") + struct.pack("<IQ", 8, 2**60), n_kv=1),
            r"metadata 'k' claims a string of 1,152,921,504,606,846,976 bytes",
        ),
        (
            raw_gguf(GOOD, GOOD_DATA, kv=struct.pack("<Q", 2**62) + b"k", n_kv=1),
            "the key of metadata entry 1 of 1 claims a string",
        ),
        (
            raw_gguf(GOOD, GOOD_DATA, kv=_s("k") + struct.pack("<I", 77), n_kv=1),
            "metadata 'k' has unknown value type 77",
        ),
        (
            raw_gguf(
                GOOD, GOOD_DATA, kv=_s("general.alignment") + struct.pack("<II", 4, 24), n_kv=1
            ),
            "general.alignment 24 is not a positive power of two",
        ),
        (
            raw_gguf(
                GOOD, GOOD_DATA, kv=_s("general.alignment") + struct.pack("<IB", 7, 1), n_kv=1
            ),
            "general.alignment True is not a positive power of two",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_hostile_gguf_headers(tmp_path, raw, message):
    with pytest.raises(QuantizedFileError, match=message):
        _open(tmp_path, raw)


def test_a_huge_array_claim_is_refused_where_gguf_reader_would_loop(tmp_path):
    """``gguf.GGUFReader`` walks a claimed 2^40-item array past the file's end without
    advancing (empty reads); the bounded reader refuses it at once."""
    raw = raw_gguf(GOOD, GOOD_DATA, kv=_s("k") + struct.pack("<IIQ", 9, 0, 2**40), n_kv=1)
    done = threading.Event()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            _open(tmp_path, raw)
        except BaseException as err:
            errors.append(err)
        done.set()

    threading.Thread(target=work, daemon=True).start()
    assert done.wait(10)
    assert isinstance(errors[0], QuantizedFileError)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_corrupted_gguf_reads_or_says_why(tmp_path, data):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    path = tmp_path / "base.gguf"
    if not path.exists():
        write_gguf(
            path,
            {
                "a": (gguf.quants.quantize(x, GGML.Q4_0), GGML.Q4_0),
                "b": (x[0], None),
                "c": (gguf.quants.quantize(x, GGML.Q8_0), GGML.Q8_0),
            },
            metadata={"general.name": "x", "llama.block_count": 1, "arr": [1, 2, 3]},
        )
    raw = bytearray(path.read_bytes())
    cut = data.draw(st.integers(0, len(raw)))
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)), max_size=4)
    )
    for pos, value in flips:
        raw[pos] = value
    raw = bytes(raw[:cut]) if data.draw(st.booleans()) else bytes(raw)
    try:
        f = open_quantized_bytes(raw, "fuzz.gguf")
        for t in f.tensors:
            f.load(t.name, max_elements=2**20)
    except QuantizedFileError as err:
        assert "fuzz.gguf" in str(err) or "tensor" in str(err)


def test_truncation_is_named(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "t.gguf"
    write_gguf(
        path,
        {
            "blk.0.w": (
                gguf.quants.quantize(rng.standard_normal((8, 64)).astype(np.float32), GGML.Q8_0),
                GGML.Q8_0,
            )
        },
    )
    raw = path.read_bytes()
    for cut in (3, 30, len(raw) // 2, len(raw) - 1):
        path.write_bytes(raw[:cut])
        with pytest.raises(QuantizedFileError, match=r"t\.gguf") as err:
            open_quantized(path)
        assert any(w in str(err.value) for w in ("truncated", "past the end", "too short"))


# -- safetensors folders ------------------------------------------------------------------


def _gptq_folder(tmp_path, shards=1):
    rng = np.random.default_rng(0)
    layer = random_int_layer(rng, 32, 64, 4, 32)
    config = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": False}
    write_folder(tmp_path, prefixed(MODULE, pack_gptq(layer, 4, v1=True)), config, shards=shards)
    return layer


def _header(raw: bytes) -> tuple[dict, bytes]:
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def _with_header(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data


def test_truncated_shard_names_the_shard(tmp_path):
    _gptq_folder(tmp_path)
    path = tmp_path / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(
        QuantizedFileError, match=r"model\.safetensors: tensor '.*' ends at data byte"
    ):
        open_quantized(tmp_path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda h, d: (None, (2**40).to_bytes(8, "little") + b"{}"),
            "over the 100,000,000-byte limit",
        ),
        (
            lambda h, d: (None, (5000).to_bytes(8, "little") + b"{}"),
            "its header length says 5,000 bytes",
        ),
        (
            lambda h, d: (
                {**h, "x": {"dtype": "F32", "shape": [2], "data_offsets": [10**9, 10**9 + 8]}},
                d,
            ),
            "'x' leaves .* unused bytes",
        ),
        (
            lambda h, d: (
                {**h, "x": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 8]}},
                d,
            ),
            r"'x': shape \[1099511627776, 1099511627776\] of F32 takes",
        ),
        (
            lambda h, d: ({**h, "x": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}, d),
            "dtype 'F4', which is not read here",
        ),
    ],
    ids=[
        "huge-header",
        "lying-length",
        "offsets-out",
        "huge-shape",
        "unknown-dtype",
    ],
)
def test_hostile_safetensors_headers(tmp_path, edit, message):
    _gptq_folder(tmp_path)
    path = tmp_path / "model.safetensors"
    header, data = _header(path.read_bytes())
    new_header, new_data = edit(header, data)
    path.write_bytes(new_data if new_header is None else _with_header(new_header, new_data))
    with pytest.raises(QuantizedFileError, match=message) as err:
        open_quantized(tmp_path)
    assert "model.safetensors" in str(err.value)


def test_parts_that_disagree_name_the_weight(tmp_path):
    rng = np.random.default_rng(0)
    parts = pack_gptq(random_int_layer(rng, 32, 64, 4, 32), 4, v1=True)
    parts["qzeros"] = parts["qzeros"][:1]  # one group of zero points for two of scales
    config = {"quant_method": "gptq", "bits": 4, "group_size": 32}
    write_folder(tmp_path, prefixed(MODULE, parts), config)
    with pytest.raises(QuantizedFileError, match=rf"weight '{MODULE}.weight': .*qzeros.* \[2, 4\]"):
        open_quantized(tmp_path)


def test_a_g_idx_out_of_range_is_named_at_load(tmp_path):
    rng = np.random.default_rng(0)
    parts = pack_gptq(random_int_layer(rng, 32, 64, 4, 32), 4, v1=True)
    parts["g_idx"] = parts["g_idx"] + 5
    write_folder(
        tmp_path, prefixed(MODULE, parts), {"quant_method": "gptq", "bits": 4, "group_size": 32}
    )
    f = open_quantized(tmp_path)
    with pytest.raises(
        QuantizedFileError, match=r"g_idx names groups 5\.\.6, outside the 2 groups"
    ):
        f.load(MODULE + ".weight")


def test_bitsandbytes_quant_state_that_lies(tmp_path):
    from quantized_files import bnb_state_dict

    sd = bnb_state_dict(torch.randn(16, 128), MODULE)
    key = f"{MODULE}.weight.quant_state.bitsandbytes__nf4"
    state = json.loads(bytes(sd[key].tolist()))
    state["shape"] = [2**20, 2**20]
    sd[key] = torch.tensor(list(json.dumps(state).encode()), dtype=torch.uint8)
    write_folder(tmp_path / "a", sd, None)
    with pytest.raises(QuantizedFileError, match=r"1,099,511,627,776 4-bit codes take"):
        open_quantized(tmp_path / "a")
    sd[key] = torch.tensor(list(b"{not json"), dtype=torch.uint8)
    write_folder(tmp_path / "b", sd, None)
    with pytest.raises(QuantizedFileError, match="its quant state is not JSON"):
        open_quantized(tmp_path / "b")


def test_index_that_lies(tmp_path):
    _gptq_folder(tmp_path, shards=2)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "model-00002-of-00002.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(
        QuantizedFileError, match=r"maps to model-00002-of-00002\.safetensors|does not hold it"
    ):
        open_quantized(tmp_path)
    index["weight_map"][first] = "../elsewhere.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(QuantizedFileError, match=r"not a \.safetensors file beside the index"):
        open_quantized(tmp_path)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors.index.json"])
def test_json_beside_the_weights_that_is_not_json(tmp_path, monkeypatch, name):
    """``config.json`` and the shard index are read whole only under their size limit, and
    bytes that are not UTF-8 JSON, or JSON nested past the parser's recursion limit, name
    the file (``access.read_json``, the one read both use)."""
    from quant_core.files import hf_config, hf_folder

    _gptq_folder(tmp_path, shards=2)
    path = tmp_path / name
    path.write_bytes(b"\xff\xfe{")
    with pytest.raises(QuantizedFileError, match=rf"{name} is not valid JSON \("):
        open_quantized(tmp_path)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(QuantizedFileError, match=rf"{name} is not valid JSON \("):
        open_quantized(tmp_path)
    path.write_text(json.dumps({"pad": "x" * 100}))
    limit = "MAX_CONFIG_BYTES" if name == "config.json" else "MAX_INDEX_BYTES"
    monkeypatch.setattr(hf_config if name == "config.json" else hf_folder, limit, 50)
    size = path.stat().st_size
    with pytest.raises(QuantizedFileError, match=rf"{name} is {size:,} bytes, over the 50-byte"):
        open_quantized(tmp_path)


def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(QuantizedFileError, match=r"model\.safetensors is a named pipe \(FIFO\)"):
        open_quantized(tmp_path / "model.safetensors")
    os.mkfifo(tmp_path / "x.gguf")
    with pytest.raises(QuantizedFileError, match=r"x\.gguf is a named pipe"):
        open_quantized(tmp_path / "x.gguf")


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_corrupted_safetensors_uploads_read_or_say_why(data):
    rng = np.random.default_rng(1)
    base = save(prefixed(MODULE, pack_gptq(random_int_layer(rng, 16, 64, 4, 32), 4, v1=True)))
    raw = bytearray(base)
    for pos, value in data.draw(
        st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)), max_size=4)
    ):
        raw[pos] = value
    cut = data.draw(st.integers(0, len(raw)))
    try:
        f = open_quantized_bytes(bytes(raw[:cut]), "fuzz.safetensors")
        for t in f.tensors:
            f.load(t.name, max_elements=2**20)
    except QuantizedFileError:
        pass


# -- found by fuzzing (issue 26): each was another exception type before ------------------------


@pytest.mark.parametrize("dtype", [["F32"], {"F32": 1}], ids=["list", "object"])
def test_a_dtype_that_is_not_text_is_named(tmp_path, dtype):
    """A list or an object as ``dtype`` made the ``dtype in DTYPES`` lookup a TypeError."""
    _gptq_folder(tmp_path)
    path = tmp_path / "model.safetensors"
    header, data = _header(path.read_bytes())
    header[f"{MODULE}.scales"]["dtype"] = dtype
    path.write_bytes(_with_header(header, data))
    with pytest.raises(
        QuantizedFileError, match=rf"model\.safetensors: tensor '{MODULE}\.scales' has dtype"
    ):
        open_quantized(tmp_path)


@pytest.mark.parametrize(
    ("part", "shape"),
    [
        ("quant_map", [1, 4, 4]),
        ("quant_map", [16, 1]),
        ("nested_quant_map", [1, 256]),
        ("quant_state.bitsandbytes__nf4", [1, -1]),
    ],
)
def test_bitsandbytes_code_tables_of_another_shape_decode_the_same(tmp_path, part, shape):
    """``quant_map`` (16 values) and ``nested_quant_map`` (256) are indexed by code; a header
    giving them another shape over the same bytes indexed their first dimension (an
    IndexError at load). The quant state's JSON bytes as ``[1, n]`` made ``bytes()`` of a
    nested list a TypeError. Their values are what counts, flattened."""
    from quantized_files import bnb_state_dict

    sd = bnb_state_dict(torch.randn(16, 128, generator=torch.Generator().manual_seed(0)), MODULE)
    write_folder(tmp_path / "a", sd, None)
    want = open_quantized(tmp_path / "a").load(MODULE + ".weight").dequantize()
    sd[f"{MODULE}.weight.{part}"] = sd[f"{MODULE}.weight.{part}"].reshape(shape)
    write_folder(tmp_path / "b", sd, None)
    got = open_quantized(tmp_path / "b").load(MODULE + ".weight").dequantize()
    assert torch.equal(got, want)


def test_a_gguf_type_nothing_decodes_names_the_file(tmp_path):
    """Q8_1 (llama.cpp's intermediate type) is listed but neither the lab nor the gguf
    package decodes it: the message names the file as well as the tensor."""
    raw = raw_gguf([("w", (32, 2), int(GGML.Q8_1), 0)], bytes(2 * 36 * 4))
    f = _open(tmp_path, raw)
    with pytest.raises(QuantizedFileError, match=r"m\.gguf: tensor 'w' is Q8_1, which neither"):
        f.load("w")


def _two_group_ct_config(targets: list[str]) -> dict:
    weights = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group"}
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "group_0": {"targets": targets, "weights": {**weights, "group_size": 32}},
            "group_1": {"targets": ["Linear"], "weights": {**weights, "group_size": 64}},
        },
    }


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("re:(.*)*X", "it nests repeats"),
        ("re:(?:.|.)*X", "it repeats an alternation"),
        ("re:.*.*.*.*X", "more than 3 unbounded repeats"),
        ("re:(a)\\1", "it uses a backreference"),
        ("re:" + "a" * 2000, "2,000 characters"),
    ],
    ids=["nested", "alternation", "four-stars", "backref", "long"],
)
def test_a_target_regex_that_backtracks_for_ever_is_refused(tmp_path, target, message):
    """compressed-tensors' ``re:`` targets are matched with Python's ``re`` against every
    packed module's name, with no time limit: ``(.*)*X`` takes seconds on a 24-character
    name and hours on ``model.layers.10.self_attn.q_proj``. Refused when the config is
    read (the module here is short, so that the unfixed reader is quick to fail this)."""
    layer = random_signed_layer(np.random.default_rng(0), 8, 64, 4, 32, symmetric=True)
    write_folder(
        tmp_path,
        prefixed("m.q", pack_compressed(layer, 4)),
        _two_group_ct_config([target, "Linear"]),
    )
    with pytest.raises(
        QuantizedFileError, match=rf"config\.json group 'group_0': target .* is refused: {message}"
    ):
        open_quantized(tmp_path)


def test_a_module_name_too_long_for_target_regexes_is_refused(tmp_path):
    """With several config groups each packed module's name is matched against ``re:``
    targets; a header's names are unbounded, and ``.*.*.*`` costs the cube of the name's
    length: names over 256 characters are refused there."""
    layer = random_signed_layer(np.random.default_rng(0), 8, 64, 4, 32, symmetric=True)
    module = "model." + "x" * 300
    write_folder(
        tmp_path,
        prefixed(module, pack_compressed(layer, 4)),
        _two_group_ct_config(["re:.*\\.q_proj$"]),
    )
    with pytest.raises(
        QuantizedFileError, match=r"model\.safetensors: weight .*a module name of 306 characters"
    ):
        open_quantized(tmp_path)


def _kv_u8(i: int) -> bytes:
    return _s(f"k{i:x}") + struct.pack("<IB", 0, 1)


def test_a_header_of_many_metadata_entries_is_refused_at_once(tmp_path):
    """Each metadata entry is a Python key and value: 17-byte entries made a 17 MB file
    1,000,000 of them (6 to 12 s, 120 MB held), a 200 MB upload minutes and gigabytes.
    Over 65,536 (real files list under 100) the count is refused before any is read."""
    n = 70_000
    raw = raw_gguf(GOOD, GOOD_DATA, kv=b"".join(_kv_u8(i) for i in range(n)), n_kv=n)
    with pytest.raises(QuantizedFileError, match=r"m\.gguf lists 70,000 metadata entries"):
        _open(tmp_path, raw)


def _array(item: int, items: list[bytes]) -> bytes:
    return struct.pack("<IQ", item, len(items)) + b"".join(items)


def test_nested_short_arrays_keep_a_bounded_number_of_items(tmp_path):
    """Arrays of at most 64 items keep their values; nested three deep, one 300 kB entry
    kept 64^3 = 262,144 values (16 such entries: 4 s and 47 MB for a 4.8 MB file). The
    header keeps 65,536 items in all; the rest is walked and summarised."""
    top = _array(9, [_array(9, [_array(0, [b"\1"] * 64)] * 64)] * 64)
    kv = b"".join(_s(f"k{i}") + struct.pack("<I", 9) + top for i in range(3))
    f = _open(tmp_path, raw_gguf(GOOD, GOOD_DATA, kv=kv, n_kv=3))

    def kept(value) -> int:
        if not isinstance(value, GGUFArray) or value.values is None:
            return 0
        return sum(kept(v) if isinstance(v, GGUFArray) else 1 for v in value.values)

    assert [f.metadata[f"k{i}"].count for i in range(3)] == [64, 64, 64]
    assert 0 < sum(kept(f.metadata[f"k{i}"]) for i in range(3)) <= 65_536
    assert torch.equal(f.load("w").dequantize(), torch.arange(16.0).reshape(2, 8))


def test_arrays_of_arrays_walked_one_by_one_are_bounded(tmp_path):
    """An array of arrays is walked item by item (a Python call each); 12-byte empty
    arrays would be 17 million calls in a 200 MB upload (2^20 of them: 9 s). Over 2^16 is
    refused."""
    n = (1 << 16) + 1
    kv = _s("k") + struct.pack("<IIQ", 9, 9, n) + struct.pack("<IQ", 0, 0) * n
    with pytest.raises(QuantizedFileError, match=r"metadata 'k' nests more than 65,536 arrays"):
        _open(tmp_path, raw_gguf(GOOD, GOOD_DATA, kv=kv, n_kv=1))


def test_a_gguf_listing_too_many_tensors_is_refused_before_reading_them(tmp_path):
    """Each listed tensor costs Python objects (1,000,000, the old limit: some 25 s and
    550 MB); real files list a few thousand at most."""
    raw = raw_gguf([], b"\0" * (24 * 100_001), n_tensors=100_001)
    with pytest.raises(QuantizedFileError, match=r"m\.gguf lists 100,001 tensors; the limit"):
        _open(tmp_path, raw)


def test_a_safetensors_header_of_too_many_tensors_is_refused_while_parsing(tmp_path):
    """1,000,000 tensors fit the 100 MB header limit and took over a minute (60 us of
    Python each) and 900 MB; the JSON parse stops past 100,000."""
    n = 100_001
    header = {f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(n)}
    path = tmp_path / "x.safetensors"
    path.write_bytes(_with_header(header, bytes(n)))
    with pytest.raises(QuantizedFileError, match=r"x\.safetensors lists 100,001 tensors"):
        open_quantized(path)
    header[""] = {"dtype": "U8", "shape": [0], "data_offsets": [n, n]}  # one object more
    path.write_bytes(_with_header(header, bytes(n)))
    with pytest.raises(QuantizedFileError, match=r"more than 100,002 JSON objects"):
        open_quantized(path)


def test_a_safetensors_metadata_of_too_many_entries_is_refused(tmp_path):
    """``__metadata__`` is kept as the file's metadata: 2,000,000 entries took 12 s and
    held 360 MB."""
    meta = {f"k{i}": "" for i in range(65_537)}
    path = tmp_path / "x.safetensors"
    path.write_bytes(_with_header({"__metadata__": meta}, b""))
    with pytest.raises(QuantizedFileError, match=r"x\.safetensors: __metadata__ holds 65,537"):
        open_quantized(path)


@pytest.mark.parametrize("value", [0, False, "", [], 1, "x", [["a", "b"]]])
def test_a_safetensors_metadata_that_is_not_an_object_is_refused(tmp_path, value):
    """``"__metadata__": 0`` (or ``false``, ``""``, ``[]``) was read as no metadata; the
    safetensors library refuses it ("expected a map"). ``null`` is the library's none."""
    path = tmp_path / "x.safetensors"
    path.write_bytes(_with_header({"__metadata__": value}, b""))
    with pytest.raises(QuantizedFileError, match=r"x\.safetensors: .*__metadata__ must map text"):
        open_quantized(path)


def test_a_safetensors_metadata_of_null_is_none():
    from quant_core.files.access import Blob
    from quant_core.files.safetensors_header import read_header

    raw = _with_header({"__metadata__": None}, b"")
    assert dict(read_header(Blob("x.safetensors", len(raw), data=raw)).metadata) == {}


def test_a_gguf_tensor_of_an_empty_name_is_refused(tmp_path):
    """A tensor named "" was listed as a tensor nothing could pick or map to a module."""
    tensors = [("w", (8, 2), F32, 0), ("", (8,), F32, 64)]
    data = GOOD_DATA + np.zeros(8, dtype=np.float32).tobytes()
    message = r"^m\.gguf: tensor 2 of the 2 the header lists has an empty name"
    with pytest.raises(QuantizedFileError, match=message):
        _open(tmp_path, raw_gguf(tensors, data))


@pytest.mark.parametrize("key_end", ["", "\\\\"])
def test_a_header_of_one_huge_object_is_refused_before_it_is_parsed(tmp_path, key_end):
    """The object hook sees an object only once it is built: 2,000,000 keys (26 MB) took
    1.4 s, twice the largest real header. More keys than a real header holds strings
    (``MAX_STRINGS``) are refused from byte counts, before the parse. Keys that end in a
    backslash (``"k0\\\\"``: the closing quote follows a backslash) count whole: the
    first bound took every quote after a backslash for an escaped one and counted them
    half, so 700,000 of them reached the parse."""
    n = 700_000
    text = ("{" + ",".join(f'"k{i}{key_end}":0' for i in range(n)) + "}").encode()
    path = tmp_path / "x.safetensors"
    path.write_bytes(len(text).to_bytes(8, "little") + text)
    message = r"x\.safetensors: corrupt safetensors header: it holds at least 700,000 JSON str"
    with pytest.raises(QuantizedFileError, match=message):
        open_quantized(path)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='"\\:{}[],ab\u00e9\U0001f600'),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet='"\\ab\u00e9', max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


def _strings(value: object) -> int:
    if isinstance(value, str):
        return 1
    if isinstance(value, list):
        return sum(map(_strings, value))
    if isinstance(value, dict):
        return len(value) + sum(map(_strings, value.values()))
    return 0


@settings(max_examples=300, deadline=None)
@given(value=_JSON, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_the_string_count_bound_holds_for_any_json(value, ascii_only, indent):
    """``_string_count`` is the true count for valid JSON: it never refuses what the parse
    would keep, and keys ending in an escaped backslash (whose closing quote follows a
    backslash) no longer halve it."""
    from quant_core.files.safetensors_header import _string_count

    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode()
    bound, true = _string_count(text), _strings(value)
    assert bound == true


# -- found by mutation fuzzing (one hand-made file per defect class) ------------------------


def test_a_weight_that_lies_in_a_sharded_folder_names_its_shard(tmp_path):
    """The message named "2 shards" instead of a file: the shard holding the weight's
    parts is named."""
    _gptq_folder(tmp_path, shards=2)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    shard = index["weight_map"][f"{MODULE}.scales"]
    path = tmp_path / shard
    header, data = _header(path.read_bytes())
    header[f"{MODULE}.scales"]["shape"] = [64]  # [2, 32] of F16: the same bytes
    path.write_bytes(_with_header(header, data))
    message = rf"^model-0000[12]-of-00002\.safetensors( and \S+)?: weight '{MODULE}.weight': "
    with pytest.raises(QuantizedFileError, match=message + ".*scales' is F16 \\[64\\]") as err:
        open_quantized(tmp_path)
    assert shard in str(err.value)


def test_a_two_level_export_without_its_scale_tensor_is_named(tmp_path):
    """A version 1 export of a two-level format (or a version 2 one relabelled version 1)
    without ``scale``: a ``KeyError: 'scale'`` escaped at load."""
    from safetensors.torch import load_file, safe_open

    src = os.path.join(os.path.dirname(__file__), "data", "lab_export_v1_NVFP4.safetensors")
    with safe_open(src, "pt") as f:
        metadata = f.metadata()
    tensors = load_file(src)
    del tensors["scale"]
    path = tmp_path / "layer.safetensors"
    path.write_bytes(save(tensors, metadata=metadata))
    f = open_quantized(path)
    with pytest.raises(
        QuantizedFileError, match=r"^layer\.safetensors: tensor 'scale' is missing; a \[.*F32"
    ):
        f.load("layer")


def test_a_tq2_0_block_holding_the_value_3_is_refused(tmp_path):
    """TQ2_0 stores trits in 2 bits; the value 3 is no trit (no writer makes it), and the
    ternary codebook decoded it to NaN, silently (llama.cpp reads it as +2 d)."""
    block = bytearray(66)  # 64 bytes of 2-bit values (0: -1), then d = 1.0 (fp16)
    block[64:66] = np.float16(1.0).tobytes()
    block[5] = 0b11 << 2  # value 32 * 0 + 5 of the block's second group: 3
    f = _open(tmp_path, raw_gguf([("w", (256,), int(GGML.TQ2_0), 0)], bytes(block)))
    message = r"^m\.gguf: tensor 'w': TQ2_0 block 0 \(from 0\) holds the 2-bit value 3"
    with pytest.raises(QuantizedFileError, match=message):
        f.load("w")
    block[5] = 0b10 << 2  # a valid trit (+1) still reads
    f = _open(tmp_path, raw_gguf([("w", (256,), int(GGML.TQ2_0), 0)], bytes(block)), "n.gguf")
    values = f.load("w").dequantize()
    assert values[37].item() == 1.0 and values[0].item() == -1.0


def test_a_ternary_export_holding_code_3_is_refused(tmp_path):
    """The lab's ternary export packs codes 0..2 at 2 bits; a damaged code 3 decoded to NaN,
    silently."""
    from quant_core import Format, PerGroup, QuantConfig, quantize
    from quant_core.files.lab_export import config_to_json, export_tensors

    cfg = QuantConfig(format=Format.TERNARY, granularity=PerGroup(16))
    qt = quantize(torch.randn(4, 32, generator=torch.Generator().manual_seed(0)), cfg)
    tensors, layout = export_tensors(qt)
    meta = {
        "shape": "[4, 32]",
        "format": cfg.format.value,
        "bits": str(cfg.bits),
        "mode": cfg.mode.value,
        "granularity": json.dumps({"kind": "PerGroup", "group_size": 16}),
        "zero_point_convention": cfg.zero_point.value,
        "config": config_to_json(cfg),
        **layout,
    }
    path = tmp_path / "layer.safetensors"
    path.write_bytes(save(tensors, metadata=meta))
    assert torch.equal(open_quantized(path).load("layer").dequantize(), qt.dequantize())
    tensors["codes"][3] = 0xFF  # four codes of 3
    path.write_bytes(save(tensors, metadata=meta))
    f = open_quantized(path)
    message = r"^layer\.safetensors: tensor 'codes' holds the code 3, which is not a ternary"
    with pytest.raises(QuantizedFileError, match=message):
        f.load("layer")


def test_a_tensor_name_of_many_digits_is_listed(tmp_path):
    """Natural name order turned digit runs into ``int``: a name of 5,000 digits raised
    Python's "Exceeds the limit (4300 digits)" ``ValueError``, naming no file."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(save({"a" + "1" * 5000: torch.zeros(2), "a2": torch.ones(2)}))
    names = [t.name for t in open_quantized(path).tensors]
    assert names == ["a2", "a" + "1" * 5000]


_BIG = 10**4000  # JSON allows it; a product of two has over 4,300 digits, too long to print


def _bnb_with_state_shape(shape: list[int]) -> bytes:
    from quantized_files import bnb_state_dict

    sd = bnb_state_dict(torch.randn(16, 64, generator=torch.Generator().manual_seed(0)), MODULE)
    key = f"{MODULE}.weight.quant_state.bitsandbytes__nf4"
    state = json.loads(bytes(sd[key].tolist()))
    state["shape"] = shape
    sd[key] = torch.tensor(list(json.dumps(state).encode()), dtype=torch.uint8)
    return save(sd)


def _export_with_shape(shape: list[int]) -> bytes:
    from quant_core import Mode, PerGroup, QuantConfig, quantize
    from quant_core.files.lab_export import config_to_json, export_tensors

    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(8))
    x = torch.randn(2, 16, generator=torch.Generator().manual_seed(0))
    tensors, layout = export_tensors(quantize(x, cfg))
    meta = {
        "shape": json.dumps(shape),
        "format": cfg.format.value,
        "bits": "4",
        "mode": cfg.mode.value,
        "granularity": json.dumps({"kind": "PerGroup", "group_size": 8}),
        "zero_point_convention": cfg.zero_point.value,
        "config": config_to_json(cfg),
        **layout,
    }
    return save(tensors, metadata=meta)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: _with_header(
                {"x": {"dtype": "F32", "shape": [_BIG, _BIG], "data_offsets": [0, 4]}}, bytes(4)
            ),
            r"tensor 'x': shape \[1000.* is not a list of sizes",
        ),
        (lambda: _bnb_with_state_shape([_BIG, _BIG]), r"quant state shape \[1000.* is not a list"),
        (lambda: _export_with_shape([_BIG, _BIG]), r"its metadata is not a lab export's \(shape"),
    ],
    ids=["safetensors-shape", "bnb-quant-state", "lab-export-shape"],
)
def test_sizes_too_long_to_print_are_refused(tmp_path, make, message):
    """Sizes of 4,000 digits multiplied into a count that Python refuses to print (over
    4,300 digits): formatting the message raised a ``ValueError`` naming no file. Sizes
    are refused above ``2^64`` (safetensors' ``usize``) or ``2^63`` (a torch size)."""
    path = tmp_path / "u.safetensors"
    path.write_bytes(make())
    with pytest.raises(QuantizedFileError, match=r"^u\.safetensors: .*" + message):
        f = open_quantized(path)
        for t in f.tensors:
            f.load(t.name).dequantize()


@pytest.mark.parametrize("key", ["blocksize", "nested_blocksize"])
def test_a_quant_state_block_size_past_int64_is_refused(tmp_path, key):
    """A block size of ``2^64`` passed the listing (one run of blocks) and made torch's
    integer division raise ``OverflowError: int too big to convert`` at load."""
    from quantized_files import bnb_state_dict

    sd = bnb_state_dict(torch.randn(16, 64, generator=torch.Generator().manual_seed(0)), MODULE)
    state_key = f"{MODULE}.weight.quant_state.bitsandbytes__nf4"
    state = json.loads(bytes(sd[state_key].tolist()))
    state[key] = 2**64
    sd[state_key] = torch.tensor(list(json.dumps(state).encode()), dtype=torch.uint8)
    path = tmp_path / "model.safetensors"
    path.write_bytes(save(sd))
    with pytest.raises(
        QuantizedFileError, match=rf"^model\.safetensors: weight .*{key} 18446744073709551616 is"
    ):
        f = open_quantized(path)
        f.load(f"{MODULE}.weight")


def test_an_export_config_number_too_large_for_a_float_is_refused(tmp_path):
    """``percentile`` of ``10^400`` in an export's config: ``QuantConfig`` raised
    ``OverflowError: int too large to convert to float``."""
    raw = _export_with_shape([2, 16])
    header, data = _header(raw)
    config = json.loads(header["__metadata__"]["config"])
    config["percentile"] = 10**400
    header["__metadata__"]["config"] = json.dumps(config)
    path = tmp_path / "u.safetensors"
    path.write_bytes(_with_header(header, data))
    with pytest.raises(QuantizedFileError, match=r"^u\.safetensors: its config metadata is not"):
        open_quantized(path)


def test_an_mxfp4_block_of_scale_exponent_255_is_refused(tmp_path):
    """E8M0's exponent 255 is NaN; its blocks decoded to NaN (code 0) and float32's max
    where llama.cpp reads finite values (``ggml_e8m0_to_fp32_half``). No writer makes it."""
    block = bytearray(17)  # e, then 16 bytes of FP4 codes (all 0)
    block[0] = 127  # 2^0
    blocks = bytes(block) + bytes([255]) + bytes(16)
    f = _open(tmp_path, raw_gguf([("w", (64,), int(GGML.MXFP4), 0)], blocks))
    message = r"^m\.gguf: tensor 'w': MXFP4 block 1 \(from 0\) has the scale exponent 255"
    with pytest.raises(QuantizedFileError, match=message):
        f.load("w")


def test_a_target_regex_of_a_huge_repeat_count_never_matches(tmp_path):
    """``re:a{4294967296}`` parses for ``regex_risk`` but Python's ``re`` refuses to
    compile it with ``OverflowError`` (not ``re.error``), which escaped the listing; like a
    target that does not compile, it never matches."""
    layer = random_signed_layer(np.random.default_rng(0), 8, 64, 4, 64, symmetric=True)
    write_folder(
        tmp_path,
        prefixed("m.q", pack_compressed(layer, 4)),
        _two_group_ct_config(["re:a{4294967296}"]),
    )
    (entry,) = open_quantized(tmp_path).tensors
    assert " g64 " in entry.type_name  # group_1's "Linear" took it


def test_a_huge_block_count_does_not_stall_the_listing(tmp_path, monkeypatch):
    """``llama.block_count`` 10,000 made the Hugging Face name map list 10,000 blocks'
    names: 17 to 24 s to open a file of one tensor. Blocks past ``MAX_NAMED_BLOCKS`` go
    unnamed; the others keep their names. (The map is asked for at most that many blocks:
    a count, not a timing, so a busy machine cannot fail it.)"""
    from quant_core.files import gguf_names

    asked: list[int] = []
    real = gguf_names._reverse

    def recording(arch_name: str, n_blocks: int):
        asked.append(n_blocks)
        return real(arch_name, n_blocks)

    monkeypatch.setattr(gguf_names, "_reverse", recording)
    kv = _s("general.architecture") + struct.pack("<I", 8) + _s("llama")
    kv += _s("llama.block_count") + struct.pack("<II", 4, 10_000)
    tensors = [("blk.3.attn_q.weight", (8, 2), F32, 0), ("blk.9999.attn_q.weight", (8,), F32, 64)]
    data = GOOD_DATA + np.zeros(8, dtype=np.float32).tobytes()
    f = _open(tmp_path, raw_gguf(tensors, data, kv=kv, n_kv=2))
    assert "model.layers.3.self_attn.q_proj.weight" in f.entry("blk.3.attn_q.weight").original_names
    assert asked and max(asked) <= gguf_names.MAX_NAMED_BLOCKS
    assert f.entry("blk.9999.attn_q.weight").original_names == ()
