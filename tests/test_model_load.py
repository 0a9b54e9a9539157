"""Loading deepseek4 files: metadata read from the file, and clear errors that name the key or
tensor at fault for broken or unsupported files."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf_rewrite import rewrite
from tiny_models import model as tiny
from tinymodel import configs

import ds4rt


@pytest.fixture(scope="module")
def float_model(tmp_path_factory):
    return tiny(tmp_path_factory, "float")


def test_info_matches_the_generated_config(float_model):
    cfg = configs.CONFIGS["float"]
    info = ds4rt.Model(str(float_model.target)).info
    assert info["n_layer"] == cfg.L and info["n_embd"] == cfg.D and info["n_vocab"] == cfg.V
    assert info["n_head"] == cfg.H and info["head_dim"] == cfg.d_h and info["window"] == cfg.W
    assert info["n_expert"] == cfg.E and info["n_expert_used"] == cfg.k and info["n_hc"] == 4
    assert info["bos_id"] == 0 and info["eos_id"] == 1
    assert info["numerics"] == "official"
    assert (
        ds4rt.Model(str(float_model.target), numerics="llama.cpp").info["numerics"] == "llama.cpp"
    )


def broken(float_model, tmp_path, **edits) -> str:
    out = str(tmp_path / "broken.gguf")
    rewrite(str(float_model.target), out, **edits)
    return out


def test_missing_tensor_is_named(float_model, tmp_path):
    path = broken(float_model, tmp_path, drop_tensors=("blk.2.attn_compressor_ape.weight",))
    with pytest.raises(
        ds4rt.errors.NotFoundError, match=r"blk\.2\.attn_compressor_ape\.weight is missing"
    ):
        ds4rt.Model(path)


def test_wrong_shape_is_named(float_model, tmp_path):
    def edit(name, data, ttype, ne):
        if name == "blk.1.attn_kv.weight":
            return np.zeros(ne[0] * (ne[1] - 1), dtype=np.float32), ttype, (ne[0], ne[1] - 1)
        return None

    path = broken(float_model, tmp_path, tensor_edit=edit)
    with pytest.raises(
        ds4rt.errors.FormatError, match=r"blk\.1\.attn_kv\.weight has shape \[64, 79\]"
    ):
        ds4rt.Model(path)


def test_type_without_cpu_kernels_is_refused(float_model, tmp_path):
    def edit(name, data, ttype, ne):
        if name == "blk.0.attn_q_a.weight":  # IQ4_NL: a real GGUF type ds4rt does not compute with
            nb = ne[0] * ne[1] // 32
            return np.zeros(nb * 18, dtype=np.uint8), QT.IQ4_NL, ne
        return None

    path = broken(float_model, tmp_path, tensor_edit=edit)
    with pytest.raises(
        ds4rt.errors.UnsupportedError, match=r"blk\.0\.attn_q_a\.weight has type IQ4_NL"
    ):
        ds4rt.Model(path)


def test_hash_table_out_of_range_expert_is_refused(float_model, tmp_path):
    def edit(name, data, ttype, ne):
        if name == "blk.0.ffn_gate_tid2eid.weight":
            d = np.array(data, dtype=np.int32).reshape(-1).copy()
            d[5] = 99
            return d, ttype, ne
        return None

    path = broken(float_model, tmp_path, tensor_edit=edit)
    with pytest.raises(ds4rt.errors.FormatError, match=r"ffn_gate_tid2eid.*expert 99"):
        ds4rt.Model(path)


@pytest.mark.parametrize(
    ("edits", "error", "pattern"),
    [
        (
            {"drop_keys": ("deepseek4.attention.sliding_window",)},
            ds4rt.errors.NotFoundError,
            r"deepseek4\.attention\.sliding_window is missing",
        ),
        (
            {"set_keys": {"deepseek4.expert_gating_func": (1, VT.UINT32)}},
            ds4rt.errors.UnsupportedError,
            "expert_gating_func = 1",
        ),
        (
            {"set_keys": {"deepseek4.attention.output_group_count": (3, VT.UINT32)}},
            ds4rt.errors.FormatError,
            "output_group_count 3 must divide head_count 4",
        ),
        (
            {
                "set_keys": {
                    "deepseek4.attention.compress_ratios": ([0, 4, 1, 4], VT.ARRAY, VT.UINT32)
                }
            },
            ds4rt.errors.FormatError,
            r"compress_ratios\[2\] = 1",
        ),
        (
            {"set_keys": {"deepseek4.block_count": (5, VT.UINT32)}},
            ds4rt.errors.FormatError,
            "fewer than block_count 5",
        ),
        (
            {"set_keys": {"general.architecture": ("llama", VT.STRING)}},
            ds4rt.errors.UnsupportedError,
            "expected 'deepseek4'",
        ),
    ],
)
def test_bad_metadata_is_named(float_model, tmp_path, edits, error, pattern):
    path = broken(float_model, tmp_path, **edits)
    with pytest.raises(error, match=pattern):
        ds4rt.Model(path)


def test_truncated_file(float_model, tmp_path):
    data = open(float_model.target, "rb").read()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ds4rt.errors.FormatError):
        ds4rt.Model(str(path))


def test_bad_arguments(float_model):
    with pytest.raises(ValueError, match="numerics"):
        ds4rt.Model(str(float_model.target), numerics="fast")
    m = ds4rt.Model(str(float_model.target))
    with pytest.raises(ds4rt.errors.InvalidArgumentError, match="max_batch"):
        m.session(max_batch=0)
    with pytest.raises(ds4rt.errors.InvalidArgumentError, match="n_ctx"):
        m.session(n_ctx=0)
