"""GGUF metadata and file writing for the target and support files.

Every key is written with an explicit GGUF type: the types of docs/MODEL.md "Key types" (ds4's
loader is strict about them) plus what llama.cpp b11739's loader requires (docs/ORACLES.md:
`context_length` and `rope.scaling.original_context_length` as u32, `expert_gating_func` = 4,
`rope.scaling.type` = "yarn", `head_count_kv`, `value_length`, a gpt2 tokenizer with merges).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUFValueType, GGUFWriter
from gguf import GGMLQuantizationType as QT

from . import quantize, weights
from .configs import Config
from .layout import TensorSpec
from .tokenizer import NOISE, Tokenizer

VT = GGUFValueType
ALIGNMENT = 32

# (key, type, value[, array element type])
Meta = tuple


def target_metadata(cfg: Config, tok: Tokenizer, name: str) -> list[Meta]:
    a = "deepseek4."
    u32 = VT.UINT32
    f32 = VT.FLOAT32
    return [
        ("general.alignment", u32, ALIGNMENT),
        ("general.name", VT.STRING, name),
        (a + "block_count", u32, cfg.L),
        (a + "context_length", u32, cfg.context_length),
        (a + "embedding_length", u32, cfg.D),
        (a + "vocab_size", u32, cfg.V),
        (a + "attention.head_count", u32, cfg.H),
        (a + "attention.head_count_kv", u32, 1),
        (a + "attention.key_length", u32, cfg.d_h),
        (a + "attention.value_length", u32, cfg.d_h),
        (a + "rope.dimension_count", u32, cfg.r_rot),
        (a + "attention.q_lora_rank", u32, cfg.Rq),
        (a + "attention.output_lora_rank", u32, cfg.Ro),
        (a + "attention.output_group_count", u32, cfg.G),
        (a + "attention.sliding_window", u32, cfg.W),
        (a + "attention.indexer.head_count", u32, cfg.Hi),
        (a + "attention.indexer.key_length", u32, cfg.d_i),
        (a + "attention.indexer.top_k", u32, cfg.K_i),
        (a + "attention.compress_ratios", VT.ARRAY, list(cfg.ratios), u32),
        (a + "attention.compress_rope_freq_base", f32, 160000.0),
        (a + "attention.layer_norm_rms_epsilon", f32, 1e-6),
        (a + "expert_count", u32, cfg.E),
        (a + "expert_used_count", u32, cfg.k),
        (a + "expert_feed_forward_length", u32, cfg.F),
        (a + "expert_shared_count", u32, cfg.n_shared),
        (a + "expert_group_count", u32, 0),
        (a + "expert_group_used_count", u32, 0),
        (a + "expert_weights_scale", f32, 1.5),
        (a + "expert_weights_norm", VT.BOOL, True),
        (a + "expert_gating_func", u32, 4),  # sqrt(softplus); llama.cpp requires it
        (a + "hash_layer_count", u32, cfg.n_hash),
        (a + "swiglu_clamp_exp", VT.ARRAY, [10.0] * cfg.L, f32),
        (a + "swiglu_clamp_shexp", VT.ARRAY, [10.0] * cfg.L, f32),
        (a + "nextn_predict_layers", u32, 0),
        (a + "hyper_connection.count", u32, cfg.N),
        (a + "hyper_connection.sinkhorn_iterations", u32, cfg.T_sk),
        (a + "hyper_connection.epsilon", f32, 1e-6),
        (a + "rope.freq_base", f32, 10000.0),
        (a + "rope.scaling.type", VT.STRING, "yarn"),
        (a + "rope.scaling.factor", f32, 16.0),
        (a + "rope.scaling.yarn_beta_fast", f32, 32.0),
        (a + "rope.scaling.yarn_beta_slow", f32, 1.0),
        (a + "rope.scaling.original_context_length", u32, 65536),
        *tokenizer_metadata(tok),
    ]


def tokenizer_metadata(tok: Tokenizer) -> list[Meta]:
    return [
        ("tokenizer.ggml.model", VT.STRING, "gpt2"),
        ("tokenizer.ggml.pre", VT.STRING, tok.pre),
        ("tokenizer.ggml.tokens", VT.ARRAY, list(tok.tokens), VT.STRING),
        ("tokenizer.ggml.token_type", VT.ARRAY, list(tok.types), VT.INT32),
        ("tokenizer.ggml.merges", VT.ARRAY, list(tok.merges), VT.STRING),
        ("tokenizer.ggml.bos_token_id", VT.UINT32, tok.bos_id),
        ("tokenizer.ggml.eos_token_id", VT.UINT32, tok.eos_id),
        ("tokenizer.ggml.padding_token_id", VT.UINT32, tok.pad_id),
    ]


def support_metadata(cfg: Config, noise_token_id: int, name: str) -> list[Meta]:
    u32 = VT.UINT32
    return [
        ("general.alignment", u32, ALIGNMENT),
        ("general.name", VT.STRING, name),
        ("dspark.block_size", u32, cfg.block_size),
        ("dspark.markov_rank", u32, cfg.markov_rank),
        ("dspark.noise_token_id", u32, noise_token_id),
        ("dspark.target_layer_ids", VT.ARRAY, list(cfg.target_layer_ids), u32),
        ("dspark.stage_count", u32, cfg.n_stages),
        ("dspark.n_layers", u32, cfg.n_stages),
    ]


def noise_token_id(tok: Tokenizer) -> int:
    return tok.id_of(NOISE)


def _nbytes(spec: TensorSpec) -> int:
    block, size = GGML_QUANT_SIZES[spec.qtype]
    n = int(np.prod(spec.ne))
    if spec.ne[0] % block:
        raise ValueError(f"{spec.name}: ne0={spec.ne[0]} not a multiple of {block}")
    return n // block * size


def _writer(path: Path, arch: str, meta: Iterable[Meta]) -> GGUFWriter:
    w = GGUFWriter(path, arch=arch)
    for m in meta:
        key, vtype, value = m[0], m[1], m[2]
        w.add_key_value(key, value, vtype, sub_type=m[3] if len(m) > 3 else None)
    return w


def write_gguf(
    path: Path, arch: str, meta: list[Meta], tensors: list[TensorSpec], seed: int
) -> None:
    """Draw, encode and write every tensor."""
    w = _writer(path, arch, meta)
    for spec in tensors:
        values = weights.draw(spec, seed)
        if spec.qtype in (QT.F32, QT.I32):
            w.add_tensor(spec.name, values)
        else:
            w.add_tensor(spec.name, quantize.encode(values, spec.qtype), raw_dtype=spec.qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_sparse_gguf(path: Path, arch: str, meta: list[Meta], tensors: list[TensorSpec]) -> int:
    """Header, metadata and tensor table only; the data section is a hole of the right size
    (the file is truncated up to its full length). Returns the apparent size in bytes."""
    w = _writer(path, arch, meta)
    for spec in tensors:
        w.add_tensor_info(
            spec.name, tuple(reversed(spec.ne)), np.dtype(np.float32), _nbytes(spec), spec.qtype
        )
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    fout.flush()
    pos = fout.tell()
    w.close()
    data_start = -(-pos // ALIGNMENT) * ALIGNMENT
    total = data_start + sum(-(-_nbytes(s) // ALIGNMENT) * ALIGNMENT for s in tensors)
    os.truncate(path, total)
    return total
