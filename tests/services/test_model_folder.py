"""Model folders on this machine: the allowed roots, and a checkpoint's shards, index and
tensors listed from the headers alone, with every refusal in plain words."""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from dashboard.services.io import LoadError, load_safetensors_file_tensor
from dashboard.services.io.regular import open_regular, read_at_most
from dashboard.services.model.checkpoint import (
    INDEX_NAME,
    LISTING_COLUMNS,
    CheckpointError,
    listing_table,
    read_tensor,
)
from dashboard.services.model.folder import find_checkpoints, open_checkpoint, snapshot_key
from dashboard.services.model.roots import (
    ROOTS_ENV,
    ModelRoots,
    PathRefused,
    parse_roots,
    resolve_in_roots,
)
from dashboard.services.model.shards import shard_name, write_sharded


def _t(*shape: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


SHARDS = [
    {
        "model.embed_tokens.weight": _t(50, 32),
        "model.layers.0.self_attn.q_proj.weight": _t(32, 64, seed=1),
        "model.layers.0.input_layernorm.weight": _t(32, dtype=torch.float32),
    },
    {
        "model.layers.0.mlp.up_proj.weight": _t(96, 32, dtype=torch.float16, seed=2),
        "model.layers.0.mlp.up_proj.bias": _t(96, dtype=torch.float32),
    },
    {
        "model.layers.1.self_attn.q_proj.weight": _t(32, 64, dtype=torch.float32, seed=3),
        "lm_head.weight": _t(50, 32, seed=4),
    },
]
LINEAR = [
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.0.mlp.up_proj.weight",
    "lm_head.weight",
    "model.layers.1.self_attn.q_proj.weight",
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    return tmp_path / "models"


@pytest.fixture
def roots(root: Path) -> ModelRoots:
    return parse_roots(str(root))


@pytest.fixture
def model(root: Path) -> Path:
    write_sharded(root / "org" / "tiny", SHARDS, len(SHARDS))
    return root / "org" / "tiny"


def _index(folder: Path) -> dict:
    return json.loads((folder / INDEX_NAME).read_text())


def _write_index(folder: Path, index: dict) -> None:
    (folder / INDEX_NAME).write_text(json.dumps(index))


def refusal(path: Path | str, roots: ModelRoots) -> str:
    with pytest.raises(LoadError) as info:
        open_checkpoint(path, roots)
    return str(info.value)


# --- The setting ---------------------------------------------------------------------------


def test_roots_from_env_and_secrets(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in "abc")
    for p in (a, b, c):
        p.mkdir()
    roots = parse_roots(f"{a}{os.pathsep}{b}{os.pathsep}", [str(c), str(a)])
    assert roots.roots == (a.resolve(), b.resolve(), c.resolve())  # a once
    assert roots.enabled and not roots.problems
    assert parse_roots(None, str(c)).roots == (c.resolve(),)  # one path as a string


@pytest.mark.parametrize("value", [None, "", os.pathsep])
def test_unset_or_empty_setting_is_off(value: str | None) -> None:
    roots = parse_roots(value)
    assert not roots.enabled
    with pytest.raises(PathRefused, match=ROOTS_ENV):
        resolve_in_roots("/anything", roots)


def test_unusable_entries_are_left_out_with_a_reason(tmp_path: Path) -> None:
    roots = parse_roots(f"relative/dir{os.pathsep}{tmp_path / 'missing'}", {"a": 1})
    assert not roots.enabled
    text = " ".join(roots.problems)
    assert "'relative/dir' is not an absolute path" in text
    assert "missing" in text and "not an existing folder" in text
    assert "must be a list of folder paths, got dict" in text
    with pytest.raises(TypeError, match="env_value"):
        parse_roots(3)  # type: ignore[arg-type]


def test_paths_inside_the_roots_resolve(model: Path, roots: ModelRoots, root: Path) -> None:
    assert resolve_in_roots(str(model), roots) == model.resolve()
    # ``..`` that stays inside is fine; the root itself is inside.
    assert resolve_in_roots(f"{model}/../tiny", roots) == model.resolve()
    assert resolve_in_roots(root, roots) == root.resolve()


@pytest.mark.parametrize("shape", ["dotdot", "absolute", "relative", "empty", "nul"])
def test_paths_outside_the_roots_are_refused(
    shape: str, roots: ModelRoots, root: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret").mkdir()
    path = {
        "dotdot": f"{root}/../secret",
        "absolute": "/etc",
        "relative": "org/tiny",
        "empty": "  ",
        "nul": f"{root}/a\0b",
    }[shape]
    with pytest.raises(PathRefused) as info:
        resolve_in_roots(path, roots)
    text = str(info.value)
    if shape in ("dotdot", "absolute"):
        assert path in text and str(root.resolve()) in text and "outside the allowed" in text
        # Where a path outside leads is not said (it would reveal the server's files).
        assert "link" not in text
    elif shape == "relative":
        assert "not an absolute path" in text and str(root.resolve()) in text


def test_a_link_inside_a_root_that_leads_outside_is_refused(
    model: Path, roots: ModelRoots, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    with pytest.raises(PathRefused, match="is a link that leads out") as info:
        resolve_in_roots(root / "escape" / "x", roots)
    # The link inside the root is named; where it leads is not (the server's files).
    assert f"{root / 'escape'} is a link" in str(info.value)
    assert str(outside) not in str(info.value)
    # A link from outside into a root is read where it leads: inside.
    (tmp_path / "door").symlink_to(model)
    assert resolve_in_roots(tmp_path / "door", roots) == model.resolve()


def test_a_shard_linked_outside_the_roots_is_refused(
    model: Path, roots: ModelRoots, tmp_path: Path
) -> None:
    # A snapshot's files are links into a blobs folder: outside the roots, refused.
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    name = shard_name(2, 3)
    (model / name).rename(blobs / "abc123")
    (model / name).symlink_to(blobs / "abc123")
    text = refusal(model, roots)
    assert f"{name} is a link that leads outside the allowed folders" in text
    assert ROOTS_ENV in text and str(blobs) not in text and "abc123" not in text
    # With the blobs folder allowed too, the same folder opens.
    both = parse_roots(f"{roots.roots[0]}{os.pathsep}{blobs}")
    assert len(open_checkpoint(model, both).shards) == 3


def test_a_chain_of_links_that_leaves_the_roots_reveals_no_target_outside(
    root: Path, roots: ModelRoots, tmp_path: Path
) -> None:
    # root/a -> root/b -> a file outside: the message names the first link inside the
    # root that leads out, never the file it ends at nor the link's text.
    secret = tmp_path / "secret-host-name"
    secret.write_text("x")
    (root / "b").symlink_to(secret)
    (root / "a").symlink_to(root / "b")
    for path in (root / "a", root / "b"):
        with pytest.raises(PathRefused) as info:
            resolve_in_roots(path, roots)
        text = str(info.value)
        assert "secret-host-name" not in text and str(tmp_path / "secret") not in text
        assert f"{path} is a link that leads out" in text, text
    # Through the folder source: a shard linked to it the same way.
    folder = root / "m"
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(root / "a")
    text = refusal(folder, roots)
    assert "model.safetensors is a link that leads outside" in text
    assert "secret-host-name" not in text


def _within(seconds: float, fn, fifo: Path) -> object:
    """``fn()`` run in a thread, which must finish within ``seconds``; returns its result
    or raised exception. A reader stuck on ``fifo`` is released (opened for writing and
    closed) so that the thread ends before the test does."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # the result under test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    stuck = thread.is_alive()
    if stuck:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # a blocked reader lets this open
        os.close(fd)
        thread.join(5)
    assert not stuck, f"reading {fifo.name} did not finish within {seconds} s"
    return out[0]


@pytest.mark.parametrize("which", ["shard", "index", "single", "linked", "explorer"])
def test_a_named_pipe_named_like_a_model_file_is_refused_at_once(
    which: str, model: Path, root: Path, roots: ModelRoots
) -> None:
    """A FIFO where a shard, the index or the one file should be (or a link to one) is
    refused by type before anything opens it: no writer ever comes, so an open or a read
    would block the page's thread forever."""
    single = root / "single"
    single.mkdir()
    if which == "shard":
        target = model / shard_name(2, 3)
        target.unlink()
    elif which == "index":
        target = model / INDEX_NAME
        target.unlink()
    elif which == "single":
        target = single / "model.safetensors"
    elif which == "linked":
        target = root / "pipe"
        (single / "model.safetensors").symlink_to(target)
    else:
        # The explorer reads one tensor of a shard by its path.
        target = model / shard_name(3, 3)
        target.unlink()
    os.mkfifo(target)
    if which == "explorer":
        result = _within(10, lambda: load_safetensors_file_tensor(target, "lm_head.weight"), target)
    else:
        path = single if which in ("single", "linked") else model
        result = _within(10, lambda: open_checkpoint(path, roots), target)
    assert isinstance(result, LoadError), result
    assert "is a named pipe (FIFO), not a regular file" in str(result), str(result)


def test_a_listed_shard_swapped_for_a_pipe_is_refused_when_read(
    model: Path, roots: ModelRoots
) -> None:
    ck = open_checkpoint(model, roots)
    target = ck.shard_path(shard_name(3, 3))
    target.unlink()
    os.mkfifo(target)
    result = _within(10, lambda: read_tensor(ck, "lm_head.weight"), target)
    assert isinstance(result, LoadError) and "named pipe" in str(result), result


def test_a_device_is_refused_by_its_type_and_reads_are_bounded(tmp_path: Path) -> None:
    refused = pytest.raises(LoadError, match="zero is a character device, not a regular file")
    with refused, open_regular("/dev/zero", "zero"):
        pass
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(10)))
    with open_regular(path, "f.bin") as file:
        assert file.size == 10
        assert read_at_most(file.fd, 4, 3) == bytes([3, 4, 5, 6])
        assert read_at_most(file.fd, 100) == bytes(range(10))  # fewer only at the end


def test_a_folder_given_as_a_pipe_says_what_it_is(root: Path, roots: ModelRoots) -> None:
    os.mkfifo(root / "fifo")
    text = _within(10, lambda: refusal(root / "fifo", roots), root / "fifo")
    assert "is a named pipe (FIFO), not a folder or a file" in str(text)


# --- Listing -------------------------------------------------------------------------------


def test_sharded_checkpoint_lists_every_tensor_from_the_headers(
    model: Path, roots: ModelRoots
) -> None:
    ck = open_checkpoint(model, roots)
    assert ck.folder == model.resolve() and ck.index == INDEX_NAME and not ck.notes
    assert [s.name for s in ck.shards] == [shard_name(i, 3) for i in (1, 2, 3)]
    assert [s.tensors for s in ck.shards] == [3, 2, 2]
    assert sum(s.size for s in ck.shards) == ck.stored_bytes
    by_name = {t.name: t for t in ck.tensors}
    assert set(by_name) == {n for shard in SHARDS for n in shard}
    for i, shard in enumerate(SHARDS, start=1):
        for name, tensor in shard.items():
            t = by_name[name]
            assert t.shard == shard_name(i, 3)
            assert t.info.shape == tuple(tensor.shape)
            assert t.info.dtype == str(tensor.dtype).removeprefix("torch.")
            assert t.stored_bytes == tensor.numel() * tensor.element_size()
    assert [t.name for t in ck.linear_weights] == LINEAR  # shard order, natural within
    assert ck.largest_weight is not None and ck.largest_weight.name == LINEAR[1]
    table = listing_table(ck)
    assert list(table.columns) == list(LISTING_COLUMNS)
    assert list(table["name"]) == [t.name for t in ck.tensors]
    assert table.set_index("name").loc[LINEAR[1], "shape"] == "96×32"
    assert table["report"].sum() == len(LINEAR)


def test_the_index_or_a_shard_path_opens_the_same_checkpoint(
    model: Path, roots: ModelRoots
) -> None:
    ck = open_checkpoint(model, roots)
    assert open_checkpoint(model / INDEX_NAME, roots) == ck
    one = open_checkpoint(model / shard_name(3, 3), roots)  # one file on its own
    assert [t.name for t in one.tensors] == ["lm_head.weight", LINEAR[3]] and one.index is None


def test_single_file_folder(root: Path, roots: ModelRoots) -> None:
    folder = root / "single"
    folder.mkdir()
    save_file(SHARDS[0], str(folder / "model.safetensors"))
    ck = open_checkpoint(folder, roots)
    assert ck.index is None and [s.name for s in ck.shards] == ["model.safetensors"]
    assert [t.name for t in ck.linear_weights] == [LINEAR[0]]
    # A stale index beside model.safetensors is ignored, as transformers does.
    _write_index(folder, {"weight_map": {"x": "gone.safetensors"}})
    assert open_checkpoint(folder, roots).notes == (
        f"{INDEX_NAME} is ignored: model.safetensors is used",
    )
    # One file of any name works too.
    other = root / "other"
    other.mkdir()
    save_file(SHARDS[2], str(other / "weights.safetensors"))
    assert len(open_checkpoint(other, roots).tensors) == 2


def test_unrelated_safetensors_files_are_noted(model: Path, roots: ModelRoots) -> None:
    save_file({"x": _t(2, 2)}, str(model / "consolidated.safetensors"))
    ck = open_checkpoint(model, roots)
    assert ck.notes == (f"consolidated.safetensors is not named by {INDEX_NAME}; ignored",)
    assert "x" not in {t.name for t in ck.tensors}


# --- Refusals ------------------------------------------------------------------------------


def test_missing_path_and_files_that_are_not_models(root: Path, roots: ModelRoots) -> None:
    assert "does not exist" in refusal(root / "nope", roots)
    (root / "notes.txt").write_text("hi")
    assert "neither a .safetensors file nor" in refusal(root / "notes.txt", roots)
    (root / "empty").mkdir()
    assert "holds no .safetensors file" in refusal(root / "empty", roots)


def test_shards_without_an_index(model: Path, roots: ModelRoots) -> None:
    (model / INDEX_NAME).unlink()
    text = refusal(model, roots)
    assert "3 shard files" in text and f"no {INDEX_NAME}" in text


def test_several_files_and_no_index(root: Path, roots: ModelRoots) -> None:
    folder = root / "two"
    folder.mkdir()
    save_file(SHARDS[0], str(folder / "a.safetensors"))
    save_file(SHARDS[1], str(folder / "b.safetensors"))
    assert "2 .safetensors files" in refusal(folder, roots)


def test_index_names_a_missing_shard(model: Path, roots: ModelRoots) -> None:
    (model / shard_name(2, 3)).unlink()
    text = refusal(model, roots)
    assert shard_name(2, 3) in text and "does not hold" in text and "up_proj" in text
    assert "names 1 shard file that" in text and "(s)" not in text


def test_tensor_in_the_index_but_not_in_its_shard(model: Path, roots: ModelRoots) -> None:
    index = _index(model)
    index["weight_map"]["model.layers.9.ghost.weight"] = shard_name(1, 3)
    _write_index(model, index)
    text = refusal(model, roots)
    assert "maps 1 tensor to model-00001-of-00003.safetensors, which does not hold it" in text
    assert "ghost" in text and "(s)" not in text


def test_tensor_in_a_shard_but_mapped_elsewhere_or_nowhere(model: Path, roots: ModelRoots) -> None:
    index = _index(model)
    del index["weight_map"]["lm_head.weight"]
    _write_index(model, index)
    text = refusal(model, roots)
    assert "'lm_head.weight' (in no index entry)" in text and shard_name(3, 3) in text


def test_shard_of_the_series_not_in_the_index(model: Path, roots: ModelRoots) -> None:
    index = _index(model)
    index["weight_map"] = {k: v for k, v in index["weight_map"].items() if v != shard_name(3, 3)}
    _write_index(model, index)
    text = refusal(model, roots)
    assert shard_name(3, 3) in text and "never names this shard" in text


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        ("not json", "not valid JSON"),
        ({"metadata": {}}, 'no "weight_map"'),
        ({"weight_map": {}}, "lists no tensors"),
        ({"weight_map": {"a.weight": 3}}, "a shard file name was expected"),
        ({"weight_map": {"a.weight": "../model.safetensors"}}, "not a file name"),
        ({"weight_map": {"a.weight": "/etc/passwd"}}, "not a file name"),
        ({"weight_map": {"a.weight": "a.bin"}}, "not a .safetensors file"),
    ],
    ids=["text", "no-map", "empty-map", "number", "dotdot", "absolute", "bin"],
)
def test_broken_index(model: Path, roots: ModelRoots, index: object, expected: str) -> None:
    (model / INDEX_NAME).write_text(index if isinstance(index, str) else json.dumps(index))
    assert expected in refusal(model, roots)


def test_hostile_shard_headers_are_refused_by_the_io_checks(model: Path, roots: ModelRoots) -> None:
    path = model / shard_name(2, 3)
    # A header length far past the end of the file.
    path.write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(CheckpointError, match="header length says"):
        open_checkpoint(model, roots)
    # A tensor whose byte range runs past the data.
    header = {
        "model.layers.0.mlp.up_proj.weight": {
            "dtype": "BF16",
            "shape": [96, 32],
            "data_offsets": [0, 6144],
        },
        "model.layers.0.mlp.up_proj.bias": {
            "dtype": "F32",
            "shape": [96],
            "data_offsets": [6144, 6528],
        },
    }
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 100)
    with pytest.raises(CheckpointError, match="truncated"):
        open_checkpoint(model, roots)


# --- Finding and keys -----------------------------------------------------------------------


def test_find_checkpoints_under_the_roots(
    model: Path, root: Path, roots: ModelRoots, tmp_path: Path
) -> None:
    hf = root / "hub" / "models--org--name" / "snapshots" / "abc"
    hf.mkdir(parents=True)
    save_file(SHARDS[0], str(hf / "model.safetensors"))
    hidden = root / ".cache" / "m"
    hidden.mkdir(parents=True)
    save_file(SHARDS[0], str(hidden / "model.safetensors"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    save_file(SHARDS[0], str(outside / "model.safetensors"))
    (root / "link").symlink_to(outside)
    found = find_checkpoints(roots)
    assert set(found) == {model.resolve(), hf.resolve()}
    assert find_checkpoints(roots, max_depth=2) == (model.resolve(),)


def test_snapshot_key_follows_the_files(model: Path, roots: ModelRoots) -> None:
    before = snapshot_key(model, roots)
    assert before == snapshot_key(model, roots)
    ck = open_checkpoint(model, roots)
    save_file(SHARDS[2] | {"extra.weight": _t(4, 4)}, str(model / shard_name(3, 3)))
    assert snapshot_key(model, roots) != before
    with pytest.raises(CheckpointError, match=r"extra\.weight"):  # not in the index now
        open_checkpoint(model, roots)
    assert all(f"{s.name}:{s.size}:{s.mtime_ns}" in ck.key for s in ck.shards)
    with pytest.raises(PathRefused):
        snapshot_key("/etc", roots)
