"""Model parameters and information added in ABI 1.1: the backend choice, the load progress
callback, and memory by category. The memory figures are checked against what the file holds
(read with gguf-py) and against the state layout of docs/MODEL.md, not against themselves."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from gguf_rewrite import rewrite
from tiny_models import model as tiny

import ds4rt
from ds4rt import _core


@pytest.fixture(scope="module")
def float_model(tmp_path_factory):
    return tiny(tmp_path_factory, "float")


def tensor_bytes(path) -> int:
    return sum(int(t.n_bytes) for t in GGUFReader(str(path)).tensors)


def load(path, **kw):
    return _core._Model(str(path), **kw)


def test_cpu_backend_is_chosen_and_reported(float_model):
    for backend in ("auto", "cpu"):
        info = load(float_model.target, backend=backend).info()
        assert info["backend"] == "cpu" and info["device"] == -1


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_gpu_backend_not_in_this_build_is_an_error(float_model, backend):
    if f"gpu={backend}" in ds4rt.build_info():
        pytest.skip(f"a {backend} build")
    with pytest.raises(ds4rt.errors.BackendError, match=f"{backend} is not compiled into this"):
        load(float_model.target, backend=backend)


def test_bad_backend_arguments(float_model):
    with pytest.raises(ds4rt.errors.InvalidArgumentError, match="device -1 is negative"):
        load(float_model.target, device=-1)
    with pytest.raises(ValueError, match="backend must be one of"):
        load(float_model.target, backend="tpu")


def test_progress_is_monotonic_and_ends_at_the_tensor_data(float_model):
    calls = []
    load(float_model.target, progress=lambda done, total: calls.append((done, total)))
    total = tensor_bytes(float_model.target)
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert all(t == total for _, t in calls)
    dones = [d for d, _ in calls]
    assert dones == sorted(dones) and len(set(dones)) == len(dones)  # strictly increasing
    assert len(calls) > 10  # reported per tensor, not only at both ends


def test_progress_callback_that_raises_fails_the_load(float_model):
    def boom(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        load(float_model.target, progress=boom)


def test_unused_tensor_counts_in_progress_not_in_weights(float_model, tmp_path):
    out = tmp_path / "extra.gguf"
    rewrite(str(float_model.target), str(out), add_tensors={"unused.weight": np.ones(1000)})
    calls = []
    info = load(out, progress=lambda d, t: calls.append((d, t))).info()
    base = load(float_model.target).info()
    assert calls[-1] == (tensor_bytes(out), tensor_bytes(out))
    assert tensor_bytes(out) == tensor_bytes(float_model.target) + 4000
    assert info["memory"] == base["memory"]


def test_weight_bytes_are_mapped_views_plus_owned_copies(float_model, tmp_path):
    # the tiny float model binds every tensor; its vectors are F32, so the f32 copies are as
    # large as the file's vectors and weights equal the file's tensor data
    mem = load(float_model.target).info()["memory"]
    assert mem["weights"] == tensor_bytes(float_model.target)
    assert 0 < mem["weights_owned"] < mem["weights"]
    # an F16 vector still becomes an f32 copy (owned bytes unchanged); an F16 matrix stays a
    # view of half the bytes
    r = GGUFReader(str(float_model.target))
    norm = next(t for t in r.tensors if t.name == "blk.0.attn_norm.weight")
    mat = next(t for t in r.tensors if t.name == "blk.0.attn_q_a.weight")

    def edit(name, data, ttype, ne):
        if name in (norm.name, mat.name) and ttype == QT.F32:
            return np.asarray(data, dtype=np.float32).astype(np.float16).view(np.uint8), QT.F16, ne
        return None

    out = tmp_path / "f16.gguf"
    rewrite(str(float_model.target), str(out), tensor_edit=edit)
    mem16 = load(out).info()["memory"]
    assert mem16["weights_owned"] == mem["weights_owned"]
    assert mem16["weights"] == mem["weights"] - int(mat.n_bytes) // 2


def _u32(r: GGUFReader, key: str) -> int:
    return int(r.fields[key].contents())


def test_state_and_scratch_figures_follow_the_state_layout(float_model):
    """docs/MODEL.md: per layer a raw ring of W + max_batch rows, compressed rows n_ctx/R + 2
    (R != 0) and indexer rows n_ctx/4 + 2 (R = 4); frontiers [coff*R][coff*d_h] (and [8][2*d_i])
    kept with their snapshots; a journal of max_batch compressor inputs per pass. f32 rows."""
    r = GGUFReader(str(float_model.target))
    ratios = [int(x) for x in r.fields["deepseek4.attention.compress_ratios"].contents()]
    d_h = _u32(r, "deepseek4.attention.key_length")
    d_i = _u32(r, "deepseek4.attention.indexer.key_length")
    window = _u32(r, "deepseek4.attention.sliding_window")
    batch = 32  # the default session
    per_1k = fixed = 0
    for ratio in ratios:
        fixed += (window + batch) * d_h
        if ratio:
            coff = 2 if ratio == 4 else 1
            per_1k += 1024 // ratio * d_h
            fixed += 2 * d_h + 4 * (coff * ratio) * (coff * d_h) + batch * 2 * coff * d_h
        if ratio == 4:
            per_1k += 1024 // 4 * d_i
            fixed += 2 * d_i + 4 * 8 * (2 * d_i) + batch * 2 * 2 * d_i
    mem = load(float_model.target).info()["memory"]
    assert mem["state_per_1k"] == 4 * per_1k
    assert mem["state_fixed"] == 4 * fixed
    assert mem["graphs"] == 0
    # the session's own buffers alone: the logits of a 32-token pass, the current row, 4096 ids
    n_vocab = load(float_model.target).info()["n_vocab"]
    assert mem["scratch"] > 4 * (batch * n_vocab + n_vocab + 4096)


def test_copy_on_load_survives_the_file_being_truncated_and_removed(float_model, tmp_path):
    """load="copy" (ABI 1.2, DS4RT_LOAD_COPY): the model reads its own copy of the file, so a
    host may truncate, rewrite or delete the file afterwards; with "map" that would be SIGBUS
    (docs/ROBUSTNESS.md, "The contract"). Logits are those of the mapped load, bit for bit."""
    path = tmp_path / "target.gguf"
    path.write_bytes(float_model.target.read_bytes())
    ids = [1, 5, 9, 2]
    mapped = ds4rt.Model(float_model.target)
    want = mapped.session().logits(ids)
    copied = ds4rt.Model(path, load="copy")
    with open(path, "r+b") as f:  # what a host must never do under a mapped model
        f.truncate(64)
    path.unlink()
    s = copied.session()
    assert np.array_equal(s.logits(ids), want)
    got = s.generate([1, 5], max_tokens=4).ids
    assert got == mapped.session().generate([1, 5], max_tokens=4).ids
    mem = copied.info["memory"]
    assert mem["weights_owned"] == mem["weights"]
    assert mapped.info["memory"]["weights_owned"] < mapped.info["memory"]["weights"]


def test_load_mode_is_checked(float_model, tmp_path):
    with pytest.raises(ValueError, match="load must be one of"):
        ds4rt.Model(float_model.target, load="mmap")
    with pytest.raises(ds4rt.errors.FileIOError, match="cannot open"):
        ds4rt.Model(tmp_path / "missing.gguf", load="copy")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(float_model.target.read_bytes()[:100])  # the header cut short
    with pytest.raises(ds4rt.errors.FormatError, match="cannot fit"):
        ds4rt.Model(bad, load="copy")
