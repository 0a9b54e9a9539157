"""GGUF files of the trained models: writing (through tools/tinymodel's tensor tables and
metadata) and reading back (gguf-py's reader and dequantiser).

The writer is the tiny-model generator's (docs/TINY_MODELS.md): the same tensor names, shapes,
GGML types and metadata keys with the types ds4 and llama.cpp require; only the values differ
(trained instead of drawn) and the tokenizer is the trained one. The shipped dtypes
(`SHIPPED_DTYPES`) are the published files' except for the routed experts: Q8_0 instead of
IQ2_XXS / Q2_K, because a model this small, trained without 2-bit quantisation-aware training,
would lose most of what it learned at 2 bits, and Q8_0 fits the 40 MB budget (docs/MODELS.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf import GGUFReader  # noqa: E402
from tinymodel import configs, layout, quantize, write  # noqa: E402
from tinymodel import tokenizer as tt  # noqa: E402

from model import Shape  # noqa: E402

SHIPPED_DTYPES = configs.Dtypes(
    token_embd=QT.F16,
    output=QT.Q8_0,
    hc_fn=QT.F16,
    dense=QT.Q8_0,
    router=QT.F16,
    compressor=QT.F16,
    exp_gate_up=QT.Q8_0,
    exp_down=QT.Q8_0,
    sup_dense=QT.Q8_0,
    sup_hc_fn=QT.F16,
    sup_router=QT.Q8_0,
    sup_head=QT.Q8_0,
)


# Values the generator's metadata writer fixes (the real model's, docs/TINY_MODELS.md "Metadata").
WRITER_CONSTANTS = {
    "rope_base": 10000.0,
    "compress_rope_base": 160000.0,
    "yarn_factor": 16.0,
    "yarn_beta_fast": 32.0,
    "yarn_beta_slow": 1.0,
    "yarn_orig_ctx": 65536,
    "rms_eps": 1e-6,
    "hc_eps": 1e-6,
    "expert_scale": 1.5,
    "clamp": 10.0,
}


def tiny_config(sh: Shape, name: str, dtypes=SHIPPED_DTYPES) -> configs.Config:
    """The generator's Config for a Shape (its check() enforces the shape rules)."""
    cfg = configs.Config(
        name=name,
        L=sh.L,
        D=sh.D,
        V=sh.V,
        H=sh.H,
        d_h=sh.d_h,
        r_rot=sh.r_rot,
        Rq=sh.Rq,
        G=sh.G,
        Ro=sh.Ro,
        E=sh.E,
        k=sh.k,
        F=sh.F,
        n_shared=sh.n_shared,
        n_hash=sh.n_hash,
        W=sh.W,
        Hi=sh.Hi,
        d_i=sh.d_i,
        K_i=sh.K_i,
        N=sh.N,
        T_sk=sh.T_sk,
        ratios=tuple(sh.ratios),
        dtypes=dtypes,
        residual_scale=1.0,
        n_stages=sh.n_stages,
        block_size=sh.block_size,
        markov_rank=sh.markov_rank,
        n_target_layers=sh.n_target_layers,
    )
    for k, want in WRITER_CONSTANTS.items():
        if getattr(sh, k) != want:
            raise ValueError(f"{k} = {getattr(sh, k)}: the GGUF writer writes {want}")
    cfg.check()
    return cfg


def tokenizer_from_vocab(vocab: dict) -> tt.Tokenizer:
    return tt.Tokenizer(
        list(vocab["tokens"]),
        list(vocab["types"]),
        list(vocab["merges"]),
        vocab["bos_id"],
        vocab["eos_id"],
        vocab["pad_id"],
        source="ds4rt-train",
    )


def _write(path: Path, arch: str, meta, specs, values: dict) -> None:
    w = write._writer(path, arch, meta)
    for spec in specs:
        v = np.asarray(values[spec.name])
        want = tuple(reversed(spec.ne))
        if v.shape != want:
            v = v.reshape(want)
        if spec.qtype == QT.I32:
            w.add_tensor(spec.name, np.ascontiguousarray(v, dtype=np.int32))
        elif spec.qtype == QT.F32:
            w.add_tensor(spec.name, np.ascontiguousarray(v, dtype=np.float32))
        else:
            enc = quantize.encode(np.ascontiguousarray(v, dtype=np.float32), spec.qtype)
            w.add_tensor(spec.name, enc, raw_dtype=spec.qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_target(path, sh: Shape, weights: dict, vocab: dict, name: str) -> None:
    cfg = tiny_config(sh, name)
    tok = tokenizer_from_vocab(vocab)
    if len(tok.tokens) != sh.V:
        raise ValueError(f"vocabulary has {len(tok.tokens)} ids, the model {sh.V}")
    specs = layout.target_tensors(cfg)
    _write(Path(path), "deepseek4", write.target_metadata(cfg, tok, name), specs, weights)


def write_support(path, sh: Shape, weights: dict, noise_id: int, name: str) -> None:
    cfg = tiny_config(sh, name)
    specs = layout.support_tensors(cfg)
    meta = write.support_metadata(cfg, noise_id, name)
    _write(Path(path), "deepseek4-dspark", meta, specs, weights)


def read_tensors(path) -> tuple[GGUFReader, dict]:
    """(reader, {name: float32 array (int32 for integer tensors), NumPy order = reversed ne})."""
    from gguf.quants import dequantize

    r = GGUFReader(str(path))
    out = {}
    for t in r.tensors:
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))
        if t.tensor_type == QT.I32:
            a = np.asarray(t.data).astype(np.int32)
        else:
            a = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        out[t.name] = a.reshape(shape)
    return r, out


def field(r: GGUFReader, key: str, default=None):
    f = r.fields.get(key)
    return default if f is None else f.contents()


def read_target(path, **drafter) -> tuple[Shape, dict, dict]:
    """(Shape, weights, vocab) of a deepseek4 GGUF written by write_target (every key the
    writer writes is read; values it does not write are the Shape defaults)."""
    r, w = read_tensors(path)
    a = "deepseek4."

    def u(k):
        return int(field(r, a + k))

    sh = Shape(
        L=u("block_count"),
        D=u("embedding_length"),
        V=u("vocab_size"),
        H=u("attention.head_count"),
        d_h=u("attention.key_length"),
        r_rot=u("rope.dimension_count"),
        Rq=u("attention.q_lora_rank"),
        G=u("attention.output_group_count"),
        Ro=u("attention.output_lora_rank"),
        E=u("expert_count"),
        k=u("expert_used_count"),
        F=u("expert_feed_forward_length"),
        n_shared=u("expert_shared_count"),
        n_hash=u("hash_layer_count"),
        W=u("attention.sliding_window"),
        Hi=u("attention.indexer.head_count"),
        d_i=u("attention.indexer.key_length"),
        K_i=u("attention.indexer.top_k"),
        ratios=tuple(int(x) for x in field(r, a + "attention.compress_ratios")),
        N=u("hyper_connection.count"),
        T_sk=u("hyper_connection.sinkhorn_iterations"),
        **drafter,
    )
    vocab = {
        "tokens": list(field(r, "tokenizer.ggml.tokens")),
        "types": [int(x) for x in field(r, "tokenizer.ggml.token_type")],
        "merges": list(field(r, "tokenizer.ggml.merges")),
        "bos_id": int(field(r, "tokenizer.ggml.bos_token_id")),
        "eos_id": int(field(r, "tokenizer.ggml.eos_token_id")),
        "pad_id": int(field(r, "tokenizer.ggml.padding_token_id")),
    }
    return sh, w, vocab


def read_support_params(path) -> dict:
    r = GGUFReader(str(path))
    return {
        k: field(r, "dspark." + k)
        for k in ("block_size", "markov_rank", "noise_token_id", "target_layer_ids")
    }
