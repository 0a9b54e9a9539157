"""Tensor tables of the target (`deepseek4`) and DSpark support (`deepseek4-dspark`) files.

Each entry says name, GGML shape (ne, ne0 first), dtype and how to draw its values; `weights.py`
draws them and `write.py` writes them (or only their descriptions, for the sparse real layout).
Names and shapes: docs/TINY_MODELS.md, tensors (target and support).
"""

from __future__ import annotations

import dataclasses
import math

from gguf import GGMLQuantizationType as QT

from .configs import Config


@dataclasses.dataclass(frozen=True)
class Init:
    """How to draw a tensor's values (float32, before encoding to its dtype)."""

    kind: str  # "normal" (mean + std * N(0,1)), "uniform" (lo..hi), "tid2eid" (a = E)
    a: float = 0.0  # normal: mean; uniform: lo
    b: float = 1.0  # normal: std; uniform: hi


def normal(std: float, mean: float = 0.0) -> Init:
    return Init("normal", mean, std)


def fan_in(n: int, gain: float = 1.0) -> Init:
    """Unit-variance outputs for unit-variance inputs (times gain)."""
    return Init("normal", 0.0, gain / math.sqrt(n))


NORM = normal(0.1, 1.0)  # RMSNorm weights: near 1
HC_SCALE = Init("uniform", 0.5, 1.5)  # (alpha_pre, alpha_post, alpha_comb)
HC_BASE = normal(0.5)
SINKS = normal(1.0)
APE = normal(0.5)
ROUTER_BIAS = normal(0.1)


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str
    ne: tuple[int, ...]  # GGML order: ne[0] is the contiguous (input) dimension
    qtype: QT
    init: Init


def _layer_tensors(cfg: Config, prefix: str, layer: int | None, support: bool):
    """One DeepSeek V4 block. layer None = a DSpark stage (no compressor/indexer/hash)."""
    d = cfg.dtypes
    dense = d.sup_dense if support else d.dense
    hc_fn = d.sup_hc_fn if support else d.hc_fn
    router = d.sup_router if support else d.router
    D = cfg.D
    res = cfg.residual_scale
    ratio = 0 if layer is None else cfg.ratios[layer]
    hashed = layer is not None and layer < cfg.n_hash
    p = prefix
    out = [
        TensorSpec(f"{p}hc_attn_fn.weight", (cfg.hc_dim, cfg.hc_mix), hc_fn, fan_in(cfg.hc_dim)),
        TensorSpec(f"{p}hc_attn_scale.weight", (3,), QT.F32, HC_SCALE),
        TensorSpec(f"{p}hc_attn_base.weight", (cfg.hc_mix,), QT.F32, HC_BASE),
        TensorSpec(f"{p}attn_norm.weight", (D,), QT.F32, NORM),
        TensorSpec(f"{p}attn_q_a.weight", (D, cfg.Rq), dense, fan_in(D)),
        TensorSpec(f"{p}attn_q_a_norm.weight", (cfg.Rq,), QT.F32, NORM),
        TensorSpec(f"{p}attn_q_b.weight", (cfg.Rq, cfg.H * cfg.d_h), dense, fan_in(cfg.Rq)),
        TensorSpec(f"{p}attn_kv.weight", (D, cfg.d_h), dense, fan_in(D)),
        TensorSpec(f"{p}attn_kv_a_norm.weight", (cfg.d_h,), QT.F32, NORM),
        TensorSpec(f"{p}attn_sinks.weight", (cfg.H,), QT.F32, SINKS),
        TensorSpec(
            f"{p}attn_output_a.weight",
            (cfg.group_dim, cfg.G * cfg.Ro),
            dense,
            fan_in(cfg.group_dim),
        ),
        TensorSpec(
            f"{p}attn_output_b.weight", (cfg.G * cfg.Ro, D), dense, fan_in(cfg.G * cfg.Ro, res)
        ),
    ]
    if ratio:
        coff = 2 if ratio == 4 else 1
        c = d.compressor
        out += [
            TensorSpec(f"{p}attn_compressor_ape.weight", (coff * cfg.d_h, ratio), c, APE),
            TensorSpec(f"{p}attn_compressor_kv.weight", (D, coff * cfg.d_h), c, fan_in(D)),
            TensorSpec(f"{p}attn_compressor_gate.weight", (D, coff * cfg.d_h), c, fan_in(D)),
            TensorSpec(f"{p}attn_compressor_norm.weight", (cfg.d_h,), QT.F32, NORM),
        ]
    if ratio == 4:
        c = d.compressor
        out += [
            TensorSpec(
                f"{p}indexer.attn_q_b.weight", (cfg.Rq, cfg.Hi * cfg.d_i), c, fan_in(cfg.Rq)
            ),
            TensorSpec(f"{p}indexer.proj.weight", (D, cfg.Hi), c, fan_in(D)),
            TensorSpec(f"{p}indexer_compressor_ape.weight", (2 * cfg.d_i, 4), c, APE),
            TensorSpec(f"{p}indexer_compressor_kv.weight", (D, 2 * cfg.d_i), c, fan_in(D)),
            TensorSpec(f"{p}indexer_compressor_gate.weight", (D, 2 * cfg.d_i), c, fan_in(D)),
            TensorSpec(f"{p}indexer_compressor_norm.weight", (cfg.d_i,), QT.F32, NORM),
        ]
    F, E, Fs = cfg.F, cfg.E, cfg.F * cfg.n_shared
    out += [
        TensorSpec(f"{p}hc_ffn_fn.weight", (cfg.hc_dim, cfg.hc_mix), hc_fn, fan_in(cfg.hc_dim)),
        TensorSpec(f"{p}hc_ffn_scale.weight", (3,), QT.F32, HC_SCALE),
        TensorSpec(f"{p}hc_ffn_base.weight", (cfg.hc_mix,), QT.F32, HC_BASE),
        TensorSpec(f"{p}ffn_norm.weight", (D,), QT.F32, NORM),
        TensorSpec(f"{p}ffn_gate_inp.weight", (D, E), router, fan_in(D)),
    ]
    if hashed:
        out.append(
            TensorSpec(
                f"{p}ffn_gate_tid2eid.weight", (cfg.k, cfg.V), QT.I32, Init("tid2eid", cfg.E)
            )
        )
    else:
        out.append(TensorSpec(f"{p}exp_probs_b.bias", (E,), QT.F32, ROUTER_BIAS))
    out += [
        TensorSpec(f"{p}ffn_gate_exps.weight", (D, F, E), d.exp_gate_up, fan_in(D)),
        TensorSpec(f"{p}ffn_up_exps.weight", (D, F, E), d.exp_gate_up, fan_in(D)),
        TensorSpec(f"{p}ffn_down_exps.weight", (F, D, E), d.exp_down, fan_in(F, res)),
        TensorSpec(f"{p}ffn_gate_shexp.weight", (D, Fs), dense, fan_in(D)),
        TensorSpec(f"{p}ffn_up_shexp.weight", (D, Fs), dense, fan_in(D)),
        TensorSpec(f"{p}ffn_down_shexp.weight", (Fs, D), dense, fan_in(Fs, res)),
    ]
    return out


def target_tensors(cfg: Config) -> list[TensorSpec]:
    d = cfg.dtypes
    out = [TensorSpec("token_embd.weight", (cfg.D, cfg.V), d.token_embd, normal(1.0))]
    for layer in range(cfg.L):
        out += _layer_tensors(cfg, f"blk.{layer}.", layer, support=False)
    out += [
        TensorSpec("output_hc_fn.weight", (cfg.hc_dim, cfg.N), d.hc_fn, fan_in(cfg.hc_dim)),
        TensorSpec("output_hc_scale.weight", (1,), QT.F32, HC_SCALE),
        TensorSpec("output_hc_base.weight", (cfg.N,), QT.F32, HC_BASE),
        TensorSpec("output_norm.weight", (cfg.D,), QT.F32, NORM),
        TensorSpec("output.weight", (cfg.D, cfg.V), d.output, fan_in(cfg.D)),
    ]
    return out


def support_tensors(cfg: Config, head_dtype: QT | None = None) -> list[TensorSpec]:
    """ds4's DSpark support layout: 24 tensors per stage, main_proj/main_norm on stage 0, and
    norm, hc_head_*, the Markov and confidence heads on the last stage (81 for 3 stages)."""
    d = cfg.dtypes
    head = head_dtype if head_dtype is not None else d.sup_head
    R, D, S = cfg.markov_rank, cfg.D, cfg.n_stages
    n_in = cfg.n_target_layers * D
    out = []
    for s in range(S):
        p = f"mtp.{s}."
        if s == 0:
            out += [
                TensorSpec(f"{p}main_proj.weight", (n_in, D), d.sup_dense, fan_in(n_in)),
                TensorSpec(f"{p}main_norm.weight", (D,), QT.F32, NORM),
            ]
        out += _layer_tensors(cfg, p, None, support=True)
        if s == S - 1:
            out += [
                TensorSpec(f"{p}norm.weight", (D,), QT.F32, NORM),
                TensorSpec(f"{p}hc_head_base.weight", (cfg.N,), QT.F32, HC_BASE),
                TensorSpec(
                    f"{p}hc_head_fn.weight", (cfg.hc_dim, cfg.N), d.sup_hc_fn, fan_in(cfg.hc_dim)
                ),
                TensorSpec(f"{p}hc_head_scale.weight", (1,), QT.F32, HC_SCALE),
                TensorSpec(f"{p}markov_head.markov_w1.weight", (R, cfg.V), head, fan_in(R)),
                TensorSpec(f"{p}markov_head.markov_w2.weight", (R, cfg.V), head, normal(0.5)),
                TensorSpec(f"{p}confidence_head.proj.weight", (D + R, 1), head, fan_in(D + R)),
            ]
    return out
