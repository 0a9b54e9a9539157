"""Tiny random DeepSeek V4 models for the reference (docs/REFERENCE.md "Tiny float configuration").

`tiny_float_hparams()` is that float configuration; `random_weights()` builds a
well-conditioned random model in memory (residual writes scaled down, docs/ORACLES.md) whose
values are exactly representable in the storage dtype that `write_gguf()` uses, so a model
written to GGUF and loaded back is bit-identical to the in-memory one.
"""

from __future__ import annotations

import numpy as np

from .dsv4_ref import ARCH, GATING_FUNC_SQRT_SOFTPLUS, HParams, expected_shapes

# Tensors whose output is added into the residual stream (scaled by `residual_scale`).
RESIDUAL_WRITES = ("attn_output_b.weight", "ffn_down_shexp.weight", "ffn_down_exps.weight")


def tiny_float_hparams(**changes) -> HParams:
    """The tiny float configuration: L=4, D=64, V=512, H=4, d_h=80, r_rot=16, ratios
    [0, 4, 128, 4], ... (docs/REFERENCE.md)."""
    base = dict(
        n_layer=4,
        n_embd=64,
        n_vocab=512,
        n_head=4,
        head_dim=80,
        n_rot=16,
        q_lora_rank=64,
        o_groups=2,
        o_lora_rank=32,
        window=16,
        idx_heads=4,
        idx_dim=32,
        idx_topk=8,
        compress_ratios=(0, 4, 128, 4),
        rope_base=10000.0,
        compress_rope_base=160000.0,
        rms_eps=1e-6,
        n_expert=8,
        n_expert_used=2,
        ffn_dim=64,
        n_shared=1,
        expert_weights_scale=1.5,
        expert_weights_norm=True,
        n_hash=1,
        swiglu_clamp=(10.0,) * 4,
        hc_count=4,
        sinkhorn_iters=20,
        hc_eps=1e-6,
        yarn_factor=16.0,
        yarn_beta_fast=32.0,
        yarn_beta_slow=1.0,
        yarn_orig_ctx=65536,
    )
    base.update(changes)
    return HParams(**base)


def storage_type(name: str) -> str:
    """GGML type used by write_gguf for a tensor of the float config: experts F16, ids I32,
    everything else F32."""
    if name.endswith("tid2eid.weight"):
        return "I32"
    if "_exps." in name:
        return "F16"
    return "F32"


def _to_storage(a: np.ndarray, typ: str) -> np.ndarray:
    if typ == "F16":
        return a.astype(np.float16).astype(np.float64)
    if typ == "F32":
        return a.astype(np.float32).astype(np.float64)
    raise ValueError(typ)


def random_weights(hp: HParams, seed: int = 0, residual_scale: float = 0.1) -> dict:
    """Random weights for every tensor of `expected_shapes(hp)` (plus nothing else).

    Matrices ~ N(0, 1/in); norm weights ~ 1 + N(0, 0.1²); HC scale ~ U(0.5, 1.5), HC/router
    biases ~ N(0, 0.1²); sinks, ape ~ N(0, 1); tid2eid = k distinct experts per token."""
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in expected_shapes(hp).items():
        typ = storage_type(name)
        short = name.split(".", 2)[-1] if name.startswith("blk.") else name
        if typ == "I32":
            ids = np.array(
                [rng.permutation(hp.n_expert)[: hp.n_expert_used] for _ in range(shape[0])]
            )
            w[name] = ids.astype(np.int64)
            continue
        if short.endswith("norm.weight"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        elif "hc_" in short and short.endswith("scale.weight"):
            a = rng.uniform(0.5, 1.5, shape)
        elif short.endswith("base.weight") or short == "exp_probs_b.bias":
            a = 0.1 * rng.standard_normal(shape)
        elif short in ("attn_sinks.weight",) or short.endswith("ape.weight"):
            a = rng.standard_normal(shape)
        elif short == "token_embd.weight":
            a = rng.standard_normal(shape)
        else:  # a matrix [.., out, in]
            a = rng.standard_normal(shape) / np.sqrt(shape[-1])
            if short in RESIDUAL_WRITES:
                a *= residual_scale
        w[name] = _to_storage(a, typ)
    return w


def write_gguf(path, hp: HParams, weights: dict, types: dict | None = None) -> None:
    """Write a deepseek4 GGUF with the metadata types of docs/MODEL.md "Key types" and the tensors
    of `weights`.

    `types` maps tensor names to a GGML type name ('F32', 'F16', 'Q8_0', 'I32', ...); default
    `storage_type`. Quantised types are produced by gguf.quants.quantize."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFValueType as T

    wr = gguf.GGUFWriter(str(path), arch=ARCH)
    p = ARCH + "."
    u32 = {
        "block_count": hp.n_layer,
        "embedding_length": hp.n_embd,
        "vocab_size": hp.n_vocab,
        "attention.head_count": hp.n_head,
        "attention.head_count_kv": 1,
        "attention.key_length": hp.head_dim,
        "attention.value_length": hp.head_dim,
        "rope.dimension_count": hp.n_rot,
        "attention.q_lora_rank": hp.q_lora_rank,
        "attention.output_lora_rank": hp.o_lora_rank,
        "attention.output_group_count": hp.o_groups,
        "attention.sliding_window": hp.window,
        "attention.indexer.head_count": hp.idx_heads,
        "attention.indexer.key_length": hp.idx_dim,
        "attention.indexer.top_k": hp.idx_topk,
        "expert_count": hp.n_expert,
        "expert_used_count": hp.n_expert_used,
        "expert_feed_forward_length": hp.ffn_dim,
        "expert_shared_count": hp.n_shared,
        "hash_layer_count": hp.n_hash,
        "hyper_connection.count": hp.hc_count,
        "hyper_connection.sinkhorn_iterations": hp.sinkhorn_iters,
        "expert_gating_func": GATING_FUNC_SQRT_SOFTPLUS,
    }
    f32 = {
        "attention.compress_rope_freq_base": hp.compress_rope_base,
        "attention.layer_norm_rms_epsilon": hp.rms_eps,
        "expert_weights_scale": hp.expert_weights_scale,
        "hyper_connection.epsilon": hp.hc_eps,
        "rope.freq_base": hp.rope_base,
        "rope.scaling.factor": hp.yarn_factor,
        "rope.scaling.yarn_beta_fast": hp.yarn_beta_fast,
        "rope.scaling.yarn_beta_slow": hp.yarn_beta_slow,
    }
    for k, v in u32.items():
        wr.add_key_value(p + k, int(v), T.UINT32)
    for k, v in f32.items():
        wr.add_key_value(p + k, float(v), T.FLOAT32)
    wr.add_key_value(p + "expert_weights_norm", bool(hp.expert_weights_norm), T.BOOL)
    wr.add_key_value(p + "rope.scaling.original_context_length", int(hp.yarn_orig_ctx), T.UINT32)
    wr.add_key_value(p + "rope.scaling.type", "yarn", T.STRING)
    wr.add_key_value(
        p + "attention.compress_ratios", [int(r) for r in hp.compress_ratios], T.ARRAY, T.UINT32
    )
    wr.add_key_value(
        p + "swiglu_clamp_exp", [float(c) for c in hp.swiglu_clamp], T.ARRAY, T.FLOAT32
    )
    for name, a in weights.items():
        typ = (types or {}).get(name, storage_type(name))
        qt = Q[typ]
        if typ == "I32":
            wr.add_tensor(name, np.ascontiguousarray(a, dtype=np.int32))
        elif typ == "F32":
            wr.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
        elif typ == "F16":
            wr.add_tensor(name, np.ascontiguousarray(a, dtype=np.float16))
        else:
            data = gguf.quants.quantize(np.ascontiguousarray(a, dtype=np.float32), qt)
            wr.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qt)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
