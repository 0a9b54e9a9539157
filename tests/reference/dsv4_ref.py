"""Float64 NumPy reference of the DeepSeek V4 Flash target forward pass.

Written from docs/MODEL.md ("The forward pass, formula by formula" and the sections around it; a
section name in quotes below is that page's) and DeepSeek's `inference/model.py`
(https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash). It is the arbiter of correctness for ds4rt's
C forward pass, compared per sublayer with resynchronisation (docs/REFERENCE.md, "Comparing by
resynchronisation"): every sublayer is a function of explicit inputs, so a test can feed the C
implementation's hyper-connection state into it. Readings of the specification that needed a choice
are listed in docs/REFERENCE.md.

Numerics: every value is float64 and every formula is evaluated exactly as written (no F16 caches,
no activation quantisation). `simulate_quant=True` (default, the official semantics) applies the
FP8 round trip to the KV "nope" dims of raw and compressed rows and the FP4 round trip to
the indexer q/k after the Hadamard rotation ("Numerics"); `simulate_quant=False` skips both rounding
steps ("llama.cpp-compatible numerics"; the Hadamard rotation is kept, it does not change scores).
`f16_cache=True` additionally rounds every stored raw/compressed/indexer row to F16, as ds4 does.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from .lowp import fp4_roundtrip, fp8_roundtrip, hadamard

ARCH = "deepseek4"
ROUTER_WEIGHT_SUM_FLOOR = 6.103515625e-5  # "MoE" (ds4/llama.cpp guard)
GATING_FUNC_SQRT_SOFTPLUS = 4  # llama.cpp's enum value for deepseek4.expert_gating_func


# ---------------------------------------------------------------------------------------------
# Hyperparameters ("Hyperparameters", "Key types", "Derived values")
# ---------------------------------------------------------------------------------------------
def real_compress_ratios(n_layer: int) -> tuple[int, ...]:
    """The real pattern ("Derived values"): 0 for l < 2, then 4 for even l and 128 for odd l."""
    return tuple(0 if il < 2 else (4 if il % 2 == 0 else 128) for il in range(n_layer))


@dataclass(frozen=True)
class HParams:
    """Model hyperparameters. Defaults are the real model's values ("Derived values")."""

    n_layer: int = 43  # L
    n_embd: int = 4096  # D
    n_vocab: int = 129280  # V
    n_head: int = 64  # H
    head_dim: int = 512  # d_h
    n_rot: int = 64  # r_rot
    q_lora_rank: int = 1024  # Rq
    o_groups: int = 8  # G
    o_lora_rank: int = 1024  # Ro
    window: int = 128  # W
    idx_heads: int = 64  # Hi
    idx_dim: int = 128  # d_i
    idx_topk: int = 512  # K_i
    compress_ratios: tuple[int, ...] = ()  # empty -> real pattern for n_layer
    rope_base: float = 10000.0
    compress_rope_base: float = 160000.0
    rms_eps: float = 1e-6
    n_expert: int = 256  # E
    n_expert_used: int = 6  # k
    ffn_dim: int = 2048  # F
    n_shared: int = 1
    expert_weights_scale: float = 1.5
    expert_weights_norm: bool = True
    n_hash: int = 3
    swiglu_clamp: tuple[float, ...] = ()  # per layer; empty -> 10.0 everywhere
    swiglu_clamp_shexp: tuple[float, ...] = ()  # per layer; empty -> same as swiglu_clamp
    hc_count: int = 4  # N
    sinkhorn_iters: int = 20  # T_sk
    hc_eps: float = 1e-6
    yarn_factor: float = 16.0
    yarn_beta_fast: float = 32.0
    yarn_beta_slow: float = 1.0
    yarn_orig_ctx: int = 65536
    # GGUF keys that were absent and took the default above (set by from_gguf; not compared)
    defaulted: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        L = self.n_layer
        if not self.compress_ratios:
            object.__setattr__(self, "compress_ratios", real_compress_ratios(L))
        if not self.swiglu_clamp:
            object.__setattr__(self, "swiglu_clamp", (10.0,) * L)
        if not self.swiglu_clamp_shexp:
            object.__setattr__(self, "swiglu_clamp_shexp", tuple(self.swiglu_clamp))
        object.__setattr__(self, "compress_ratios", tuple(int(r) for r in self.compress_ratios))
        object.__setattr__(self, "swiglu_clamp", tuple(float(c) for c in self.swiglu_clamp))
        object.__setattr__(
            self, "swiglu_clamp_shexp", tuple(float(c) for c in self.swiglu_clamp_shexp)
        )
        problems = self.problems()
        if problems:
            raise ValueError("invalid DeepSeek V4 hyperparameters: " + "; ".join(problems))

    # -- derived values ("Derived values") --
    @property
    def d_nope(self) -> int:
        return self.head_dim - self.n_rot

    @property
    def group_heads(self) -> int:
        return self.n_head // self.o_groups

    @property
    def group_dim(self) -> int:
        return self.group_heads * self.head_dim

    @property
    def hc_dim(self) -> int:
        return self.hc_count * self.n_embd

    @property
    def hc_mix(self) -> int:
        return (2 + self.hc_count) * self.hc_count

    def ratio(self, il: int) -> int:
        return self.compress_ratios[il]

    def coff(self, il: int) -> int:
        return 2 if self.compress_ratios[il] == 4 else 1

    def has_indexer(self, il: int) -> bool:
        return self.compress_ratios[il] == 4

    def is_hash_layer(self, il: int) -> bool:
        return il < self.n_hash

    def problems(self) -> list[str]:
        """The "Shape constraints" that the formulas need (empty list = fine)."""
        p = []
        L = self.n_layer
        if L < 1:
            p.append("n_layer < 1")
        if len(self.compress_ratios) < L:
            p.append(f"compress_ratios has {len(self.compress_ratios)} entries < n_layer {L}")
        if len(self.swiglu_clamp) < L or len(self.swiglu_clamp_shexp) < L:
            p.append("swiglu clamp arrays shorter than n_layer")
        if any(r < 0 for r in self.compress_ratios[:L]):
            p.append("negative compress ratio")
        if self.n_head % self.o_groups:
            p.append("n_head % o_groups != 0")
        if self.n_rot % 2 or self.n_rot > self.head_dim or self.n_rot > self.idx_dim:
            p.append("n_rot must be even and <= head_dim and <= indexer key_length")
        if self.d_nope % 64:
            p.append("head_dim - n_rot must be a multiple of 64 (FP8 blocks)")
        if any(r == 4 for r in self.compress_ratios[:L]):
            if self.idx_dim & (self.idx_dim - 1) or self.idx_dim % 32:
                p.append("indexer key_length must be a power of two and a multiple of 32")
        if not 1 <= self.n_expert_used <= self.n_expert:
            p.append("expert_used_count must be in [1, expert_count]")
        if not 0 <= self.n_hash <= L:
            p.append("hash_layer_count must be in [0, n_layer]")
        if self.idx_topk < 1 or self.window < 1 or self.hc_count < 1 or self.sinkhorn_iters < 1:
            p.append("top_k, sliding_window, hc count and sinkhorn iterations must be >= 1")
        return p

    # -- GGUF metadata ("Hyperparameters", "Key types") --
    @classmethod
    def from_gguf(cls, reader) -> HParams:
        """Read the deepseek4.* keys (the real model's values where a key is absent)."""
        from gguf import GGUFReader

        if not isinstance(reader, GGUFReader):
            reader = GGUFReader(reader)
        pre = ARCH + "."
        defaulted = []

        def get(key, default=None):
            f = reader.fields.get(pre + key)
            if f is None:
                defaulted.append(pre + key)
                return default
            return f.contents()

        def as_int(key, default):
            v = get(key, default)
            if isinstance(v, float) and not v.is_integer():
                raise ValueError(f"{pre}{key} = {v} is not an integer")
            return int(v)

        arch = reader.fields.get("general.architecture")
        if arch is not None and arch.contents() != ARCH:
            raise ValueError(f"general.architecture is {arch.contents()!r}, not {ARCH!r}")
        n_layer = as_int("block_count", cls.n_layer)

        def per_layer(key, default):
            v = get(key)
            if v is None:
                return default
            if not isinstance(v, list):  # llama.cpp also accepts a scalar
                v = [v] * n_layer
            if len(v) < n_layer:
                raise ValueError(f"{pre}{key} has {len(v)} entries < block_count {n_layer}")
            return tuple(v[:n_layer])

        key_len = as_int("attention.key_length", cls.head_dim)
        val_len = as_int("attention.value_length", key_len)
        if val_len != key_len:
            raise ValueError(f"value_length {val_len} != key_length {key_len}")
        if as_int("attention.head_count_kv", 1) != 1:
            raise ValueError("deepseek4 has one shared KV head (head_count_kv must be 1)")
        for k in ("expert_group_count", "expert_group_used_count"):
            if as_int(k, 0) != 0:
                raise ValueError(f"{pre}{k} must be 0 or absent (no group-limited routing)")
        f = reader.fields.get(pre + "expert_gating_func")  # optional, informational
        gating = None if f is None else f.contents()
        if gating is not None and int(gating) != GATING_FUNC_SQRT_SOFTPLUS:
            raise ValueError(f"expert_gating_func {gating} is not sqrt-softplus (4)")
        clamp = per_layer("swiglu_clamp_exp", ())
        return cls(
            n_layer=n_layer,
            n_embd=as_int("embedding_length", cls.n_embd),
            n_vocab=as_int("vocab_size", cls.n_vocab),
            n_head=as_int("attention.head_count", cls.n_head),
            head_dim=key_len,
            n_rot=as_int("rope.dimension_count", cls.n_rot),
            q_lora_rank=as_int("attention.q_lora_rank", cls.q_lora_rank),
            o_groups=as_int("attention.output_group_count", cls.o_groups),
            o_lora_rank=as_int("attention.output_lora_rank", cls.o_lora_rank),
            window=as_int("attention.sliding_window", cls.window),
            idx_heads=as_int("attention.indexer.head_count", cls.idx_heads),
            idx_dim=as_int("attention.indexer.key_length", cls.idx_dim),
            idx_topk=as_int("attention.indexer.top_k", cls.idx_topk),
            compress_ratios=per_layer("attention.compress_ratios", ()),
            rope_base=float(get("rope.freq_base", cls.rope_base)),
            compress_rope_base=float(
                get("attention.compress_rope_freq_base", cls.compress_rope_base)
            ),
            rms_eps=float(get("attention.layer_norm_rms_epsilon", cls.rms_eps)),
            n_expert=as_int("expert_count", cls.n_expert),
            n_expert_used=as_int("expert_used_count", cls.n_expert_used),
            ffn_dim=as_int("expert_feed_forward_length", cls.ffn_dim),
            n_shared=as_int("expert_shared_count", cls.n_shared),
            expert_weights_scale=float(get("expert_weights_scale", cls.expert_weights_scale)),
            expert_weights_norm=bool(get("expert_weights_norm", cls.expert_weights_norm)),
            n_hash=as_int("hash_layer_count", cls.n_hash),
            swiglu_clamp=clamp,
            swiglu_clamp_shexp=per_layer("swiglu_clamp_shexp", clamp),
            hc_count=as_int("hyper_connection.count", cls.hc_count),
            sinkhorn_iters=as_int("hyper_connection.sinkhorn_iterations", cls.sinkhorn_iters),
            hc_eps=float(get("hyper_connection.epsilon", cls.hc_eps)),
            yarn_factor=float(get("rope.scaling.factor", cls.yarn_factor)),
            yarn_beta_fast=float(get("rope.scaling.yarn_beta_fast", cls.yarn_beta_fast)),
            yarn_beta_slow=float(get("rope.scaling.yarn_beta_slow", cls.yarn_beta_slow)),
            yarn_orig_ctx=as_int("rope.scaling.original_context_length", cls.yarn_orig_ctx),
            defaulted=tuple(sorted(set(defaulted))),
        )

    def replace(self, **changes) -> HParams:
        return replace(self, **changes)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# ---------------------------------------------------------------------------------------------
# Weights ("Tensors")
# ---------------------------------------------------------------------------------------------
INT_TYPES = ("I8", "I16", "I32", "I64")


def expected_shapes(hp: HParams) -> dict[str, tuple[int, ...]]:
    """NumPy shapes (reversed GGML ne) of every tensor the forward pass reads ("Tensors").

    2-D weights are [out, in]; expert tensors [E, out, in]; ape [R, coff*d]; tid2eid [V, k].
    `exp_probs_b.bias` of hash layers is optional and not listed."""
    D, N = hp.n_embd, hp.hc_count
    s = {
        "token_embd.weight": (hp.n_vocab, D),
        "output_hc_fn.weight": (N, hp.hc_dim),
        "output_hc_scale.weight": (1,),
        "output_hc_base.weight": (N,),
        "output_norm.weight": (D,),
        "output.weight": (hp.n_vocab, D),
    }
    Fs = hp.ffn_dim * hp.n_shared
    for il in range(hp.n_layer):
        b = f"blk.{il}."
        for which in ("attn", "ffn"):
            s[b + f"hc_{which}_fn.weight"] = (hp.hc_mix, hp.hc_dim)
            s[b + f"hc_{which}_scale.weight"] = (3,)
            s[b + f"hc_{which}_base.weight"] = (hp.hc_mix,)
        s[b + "attn_norm.weight"] = (D,)
        s[b + "ffn_norm.weight"] = (D,)
        s[b + "attn_q_a.weight"] = (hp.q_lora_rank, D)
        s[b + "attn_q_a_norm.weight"] = (hp.q_lora_rank,)
        s[b + "attn_q_b.weight"] = (hp.n_head * hp.head_dim, hp.q_lora_rank)
        s[b + "attn_kv.weight"] = (hp.head_dim, D)
        s[b + "attn_kv_a_norm.weight"] = (hp.head_dim,)
        s[b + "attn_sinks.weight"] = (hp.n_head,)
        s[b + "attn_output_a.weight"] = (hp.o_groups * hp.o_lora_rank, hp.group_dim)
        s[b + "attn_output_b.weight"] = (D, hp.o_groups * hp.o_lora_rank)
        R = hp.ratio(il)
        if R:
            cd = hp.coff(il) * hp.head_dim
            s[b + "attn_compressor_ape.weight"] = (R, cd)
            s[b + "attn_compressor_kv.weight"] = (cd, D)
            s[b + "attn_compressor_gate.weight"] = (cd, D)
            s[b + "attn_compressor_norm.weight"] = (hp.head_dim,)
        if hp.has_indexer(il):
            di = hp.idx_dim
            s[b + "indexer.attn_q_b.weight"] = (hp.idx_heads * di, hp.q_lora_rank)
            s[b + "indexer.proj.weight"] = (hp.idx_heads, D)
            s[b + "indexer_compressor_ape.weight"] = (4, 2 * di)
            s[b + "indexer_compressor_kv.weight"] = (2 * di, D)
            s[b + "indexer_compressor_gate.weight"] = (2 * di, D)
            s[b + "indexer_compressor_norm.weight"] = (di,)
        s[b + "ffn_gate_inp.weight"] = (hp.n_expert, D)
        if hp.is_hash_layer(il):
            s[b + "ffn_gate_tid2eid.weight"] = (hp.n_vocab, hp.n_expert_used)
        else:
            s[b + "exp_probs_b.bias"] = (hp.n_expert,)
        s[b + "ffn_gate_exps.weight"] = (hp.n_expert, hp.ffn_dim, D)
        s[b + "ffn_up_exps.weight"] = (hp.n_expert, hp.ffn_dim, D)
        s[b + "ffn_down_exps.weight"] = (hp.n_expert, D, hp.ffn_dim)
        s[b + "ffn_gate_shexp.weight"] = (Fs, D)
        s[b + "ffn_up_shexp.weight"] = (Fs, D)
        s[b + "ffn_down_shexp.weight"] = (D, Fs)
    return s


def load_gguf_tensors(reader) -> dict[str, np.ndarray]:
    """Every tensor of a GGUF file: float types dequantised (gguf.quants.dequantize) to float64,
    integer types kept as int64; shaped as reversed ne ("Tensors")."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    if not isinstance(reader, GGUFReader):
        reader = GGUFReader(reader)
    out = {}
    for t in reader.tensors:
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))
        if t.tensor_type.name in INT_TYPES:
            arr = np.asarray(t.data).astype(np.int64)
        else:
            arr = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)
        out[t.name] = arr.reshape(shape)
    return out


def check_weights(hp: HParams, w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Validate names/shapes against "Tensors" and normalise layouts (3-D attn_output_a -> 2-D).

    Returns a new dict of float64 arrays (int64 for tid2eid)."""
    exp = expected_shapes(hp)
    out = {}
    problems = []
    for name, shape in exp.items():
        if name not in w:
            problems.append(f"missing {name}")
            continue
        a = np.asarray(w[name])
        if name.endswith("attn_output_a.weight") and a.shape == (
            hp.o_groups,
            hp.o_lora_rank,
            hp.group_dim,
        ):
            a = a.reshape(shape)  # llama.cpp's 3-D form, same bytes ("Tensors")
        if a.shape != shape:
            problems.append(f"{name}: shape {a.shape}, expected {shape}")
            continue
        if name.endswith("tid2eid.weight"):
            a = a.astype(np.int64)
            if a.min() < 0 or a.max() >= hp.n_expert:
                problems.append(f"{name}: expert id out of range")
        else:
            a = a.astype(np.float64)
        out[name] = a
    for il in range(hp.n_layer):  # optional selection bias of hash layers: kept, never used
        name = f"blk.{il}.exp_probs_b.bias"
        if hp.is_hash_layer(il) and name in w:
            out[name] = np.asarray(w[name], dtype=np.float64)
    if problems:
        raise ValueError("weights do not match the hyperparameters: " + "; ".join(problems))
    return out


# ---------------------------------------------------------------------------------------------
# Elementary functions ("Conventions")
# ---------------------------------------------------------------------------------------------
def sigmoid(x):
    x = np.asarray(x, dtype=np.float64)
    return np.exp(-np.logaddexp(0.0, -x))


def silu(x):
    return np.asarray(x, dtype=np.float64) * sigmoid(x)


def softplus(x):
    return np.logaddexp(0.0, np.asarray(x, dtype=np.float64))


def rms(x, eps: float, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    return np.sqrt(np.mean(x * x, axis=axis, keepdims=True) + eps)


def rms_norm(x, w=None, eps: float = 1e-6):
    """RMSNorm_w(x) = x / rms(x) * w over the last axis; RMSNorm_0 when w is None."""
    y = np.asarray(x, dtype=np.float64) / rms(x, eps)
    return y if w is None else y * w


def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def f16_round(x):
    return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)


def topk_stable(v, k: int) -> np.ndarray:
    """Indices of the k largest values, ties to the lower index, in descending value order."""
    v = np.asarray(v, dtype=np.float64)
    return np.argsort(-v, kind="stable")[:k]


# ---------------------------------------------------------------------------------------------
# Hyper-connections ("Hyper-connections")
# ---------------------------------------------------------------------------------------------
def sinkhorn(c0, iters: int, eps: float):
    """Sinkhorn ("Hyper-connections", HC pre step 3): row softmax + eps, one column normalisation,
    then (iters-1) x (row, column)."""
    c = softmax(c0, axis=1) + eps
    c = c / (c.sum(axis=0, keepdims=True) + eps)
    for _ in range(iters - 1):
        c = c / (c.sum(axis=1, keepdims=True) + eps)
        c = c / (c.sum(axis=0, keepdims=True) + eps)
    return c


def hc_mixes(X, fn, norm_eps: float):
    """m = Φ · RMSNorm_0(flat(X)) with the RMS over all N*D values (stream-major flat)."""
    flat = np.asarray(X, dtype=np.float64).reshape(-1)
    return fn @ rms_norm(flat, None, norm_eps)


def hc_pre(X, fn, scale, base, *, norm_eps: float, hc_eps: float, iters: int):
    """HC pre. Returns (x, pre, post, comb): sublayer input, the N pre weights, N post weights and
    the N×N Sinkhorn matrix comb[a, b] (built from m_comb[a*N + b])."""
    N = X.shape[0]
    m = hc_mixes(X, fn, norm_eps)
    pre = sigmoid(scale[0] * m[:N] + base[:N]) + hc_eps
    post = 2.0 * sigmoid(scale[1] * m[N : 2 * N] + base[N : 2 * N])
    c0 = (scale[2] * m[2 * N :] + base[2 * N :]).reshape(N, N)
    comb = sinkhorn(c0, iters, hc_eps)
    x = pre @ X
    return x, pre, post, comb


def hc_post(f, X, post, comb):
    """HC post: X_new[j] = post[j]·f + Σ_i comb[i, j]·X_old[i]."""
    return np.outer(post, f) + comb.T @ X


def hc_head(X, fn, scale, base, *, norm_eps: float, hc_eps: float):
    """HC head: y = Σ_h (σ(scale[0]·m[h] + base[h]) + eps)·X[h]."""
    m = hc_mixes(X, fn, norm_eps)
    w = sigmoid(scale[0] * m + base) + hc_eps
    return w @ X


# ---------------------------------------------------------------------------------------------
# RoPE ("RoPE")
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RopeParams:
    n_rot: int
    base: float
    yarn: bool = False
    factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    orig_ctx: int = 0


def rope_params(hp: HParams, il: int) -> RopeParams:
    """Dense layers: rope.freq_base, no YaRN; compressed layers: compress base + YaRN ("RoPE")."""
    if hp.ratio(il) == 0:
        return RopeParams(hp.n_rot, hp.rope_base)
    return RopeParams(
        hp.n_rot,
        hp.compress_rope_base,
        True,
        hp.yarn_factor,
        hp.yarn_beta_fast,
        hp.yarn_beta_slow,
        hp.yarn_orig_ctx,
    )


def yarn_corr_dim(n_rot: int, base: float, orig_ctx: int, beta: float) -> float:
    return n_rot * math.log(orig_ctx / (2.0 * math.pi * beta)) / (2.0 * math.log(base))


def yarn_range(rp: RopeParams) -> tuple[int, int]:
    lo = max(0, math.floor(yarn_corr_dim(rp.n_rot, rp.base, rp.orig_ctx, rp.beta_fast)))
    hi = min(rp.n_rot - 1, math.ceil(yarn_corr_dim(rp.n_rot, rp.base, rp.orig_ctx, rp.beta_slow)))
    return lo, hi


def rope_freqs(rp: RopeParams) -> np.ndarray:
    """ω_k (k = 0 .. n_rot/2 - 1) with θ_k = p·ω_k, YaRN blend included."""
    k = np.arange(rp.n_rot // 2, dtype=np.float64)
    w_ext = rp.base ** (-2.0 * k / rp.n_rot)
    if not rp.yarn:
        return w_ext
    lo, hi = yarn_range(rp)
    gamma = 1.0 - np.clip((k - lo) / max(0.001, hi - lo), 0.0, 1.0)
    s = 1.0 / rp.factor
    return s * w_ext * (1.0 - gamma) + w_ext * gamma


def rope(x, pos: int, rp: RopeParams, inverse: bool = False):
    """Rotate the last n_rot dims of x (...,d) in adjacent pairs at position pos; returns a copy."""
    y = np.array(x, dtype=np.float64, copy=True)
    r = rp.n_rot
    if r == 0:
        return y
    theta = pos * rope_freqs(rp)
    c, s = np.cos(theta), np.sin(theta)
    if inverse:
        s = -s
    tail = y[..., y.shape[-1] - r :]
    a, b = tail[..., 0::2].copy(), tail[..., 1::2].copy()
    tail[..., 0::2] = a * c - b * s
    tail[..., 1::2] = a * s + b * c
    return y


# ---------------------------------------------------------------------------------------------
# KV compressor ("Compressors") and indexer ("Indexer")
# ---------------------------------------------------------------------------------------------
@dataclass
class CompressorState:
    """Streaming frontier (ds4 layout): kv and score, both [coff*R, coff*d], init 0 / -inf."""

    ratio: int
    d: int
    kv: np.ndarray = field(repr=False, default=None)
    score: np.ndarray = field(repr=False, default=None)

    def __post_init__(self):
        c = 2 if self.overlap else 1
        if self.kv is None:
            self.kv = np.zeros((c * self.ratio, c * self.d))
        if self.score is None:
            self.score = np.full((c * self.ratio, c * self.d), -np.inf)

    @property
    def overlap(self) -> bool:
        return self.ratio == 4


def compressor_inputs(xn, w_kv, w_gate, ape, pos: int):
    """u = W_kv·xn and g = W_gate·xn + ape[pos mod R]."""
    R = ape.shape[0]
    return w_kv @ xn, w_gate @ xn + ape[pos % R]


def compressor_step(st: CompressorState, u, g, pos: int):
    """Store (u, g) for position pos; at the end of a block return the pooled row z, else None.

    Non-overlap: z[j] = Σ_r softmax_r(g_r[j])·u_r[j] over the R rows of the block.
    Overlap (R = 4): features [0, d) of the previous block's rows and [d, 2d) of this block's
    rows are pooled together (2R candidates per feature); the previous block of b = 0 is the
    initial -inf/0 state."""
    R, d = st.ratio, st.d
    row = (R + pos % R) if st.overlap else pos % R
    st.kv[row] = u
    st.score[row] = g
    if (pos + 1) % R:
        return None
    if st.overlap:
        vals = np.concatenate([st.kv[:R, :d], st.kv[R:, d:]], axis=0)
        scores = np.concatenate([st.score[:R, :d], st.score[R:, d:]], axis=0)
        st.kv[:R] = st.kv[R:]
        st.score[:R] = st.score[R:]
    else:
        vals, scores = st.kv, st.score
    return np.sum(softmax(scores, axis=0) * vals, axis=0)


def indexer_qat(x, simulate_quant: bool):
    """Hadamard rotation on the last axis, then (official semantics) FP4 ("Indexer")."""
    y = hadamard(x)
    return fp4_roundtrip(y) if simulate_quant else y


def indexer_scores(qi, w, keys):
    """s_c = Σ_h w[h]·max(0, qi[h]·k_c) for every row k_c of keys."""
    if len(keys) == 0:
        return np.zeros(0)
    dots = np.asarray(qi) @ np.asarray(keys).T  # [Hi, n]
    return np.asarray(w) @ np.maximum(dots, 0.0)


def indexer_select(scores, k: int) -> np.ndarray:
    """Allowed compressed rows, ascending: all if n <= k, else the k best (ties: lower index)."""
    n = len(scores)
    if n <= k:
        return np.arange(n)
    return np.sort(topk_stable(scores, k))


# ---------------------------------------------------------------------------------------------
# Attention core ("Attention")
# ---------------------------------------------------------------------------------------------
def attention_with_sinks(q, keys, sinks, scale: float):
    """o[h] = Σ_j e^{z_j - M}·k_j / (e^{sink_h - M} + Σ_j e^{z_j - M}), z = scale·q[h]·k_j."""
    z = scale * (q @ keys.T)  # [H, n]
    M = np.maximum(sinks, z.max(axis=1))
    e = np.exp(z - M[:, None])
    den = np.exp(sinks - M) + e.sum(axis=1)
    return (e @ keys) / den[:, None]


# ---------------------------------------------------------------------------------------------
# Per-session state ("Per-session state")
# ---------------------------------------------------------------------------------------------
@dataclass
class LayerState:
    ratio: int
    raw: list = field(default_factory=list)  # stored raw kv row of every position so far
    comp: list = field(default_factory=list)  # compressed attention rows
    comp_state: CompressorState | None = None
    index_comp: list = field(default_factory=list)  # indexer-compressor rows (ratio 4)
    index_state: CompressorState | None = None

    @property
    def n_comp(self) -> int:
        return len(self.comp)

    @property
    def n_index_comp(self) -> int:
        return len(self.index_comp)


@dataclass
class State:
    layers: list
    n_tokens: int = 0  # next position to process

    @classmethod
    def new(cls, hp: HParams) -> State:
        layers = []
        for il in range(hp.n_layer):
            R = hp.ratio(il)
            ls = LayerState(R)
            if R:
                ls.comp_state = CompressorState(R, hp.head_dim)
            if hp.has_indexer(il):
                ls.index_state = CompressorState(4, hp.idx_dim)
            layers.append(ls)
        return cls(layers)

    def copy(self) -> State:
        return copy.deepcopy(self)


# ---------------------------------------------------------------------------------------------
# The model ("The forward pass, formula by formula")
# ---------------------------------------------------------------------------------------------
class Model:
    def __init__(
        self,
        hp: HParams,
        weights: dict[str, np.ndarray],
        *,
        simulate_quant: bool = True,
        f16_cache: bool = False,
    ):
        self.hp = hp
        self.w = check_weights(hp, weights)
        self.simulate_quant = simulate_quant
        self.f16_cache = f16_cache
        self.rope = [rope_params(hp, il) for il in range(hp.n_layer)]
        self.state = State.new(hp)

    @classmethod
    def from_gguf(cls, path, **kw) -> Model:
        from gguf import GGUFReader

        reader = GGUFReader(path)
        return cls(HParams.from_gguf(reader), load_gguf_tensors(reader), **kw)

    def new_state(self) -> State:
        return State.new(self.hp)

    def reset(self) -> None:
        self.state = self.new_state()

    def lw(self, il: int, name: str) -> np.ndarray:
        return self.w[f"blk.{il}.{name}"]

    def _store(self, row):
        return f16_round(row) if self.f16_cache else row

    # -- embedding and HC helpers --
    def embed(self, token: int):
        """X[h] = token_embd[t] for every stream."""
        e = self.w["token_embd.weight"][int(token)]
        return np.tile(e, (self.hp.hc_count, 1))

    def hc_pre_layer(self, il: int, X, which: str):
        """HC pre with layer l's hc_{which}_* weights (which = 'attn' or 'ffn')."""
        return hc_pre(
            X,
            self.lw(il, f"hc_{which}_fn.weight"),
            self.lw(il, f"hc_{which}_scale.weight"),
            self.lw(il, f"hc_{which}_base.weight"),
            norm_eps=self.hp.rms_eps,
            hc_eps=self.hp.hc_eps,
            iters=self.hp.sinkhorn_iters,
        )

    # -- attention sublayer ("Attention") --
    def compress_row(self, il: int, z, pos_block: int, indexer: bool):
        """Post-processing of a pooled row ("Compressors"): norm, RoPE at the block's first
        position, then FP8 (attention) or Hadamard + FP4 (indexer)."""
        hp = self.hp
        prefix = "indexer_compressor" if indexer else "attn_compressor"
        row = rms_norm(z, self.lw(il, f"{prefix}_norm.weight"), hp.rms_eps)
        row = rope(row, pos_block, self.rope[il])
        if indexer:
            return indexer_qat(row, self.simulate_quant)
        if self.simulate_quant:
            row[: hp.d_nope] = fp8_roundtrip(row[: hp.d_nope])
        return row

    def attention_sublayer(self, il: int, xn, pos: int, state: State | None = None, trace=None):
        """Attention of layer l for the token at `pos` given xn (the attn_norm output); appends
        this position's raw row (and any compressed/indexer row) to `state` and returns a."""
        hp = self.hp
        st = (state if state is not None else self.state).layers[il]
        if len(st.raw) != pos:
            raise ValueError(f"layer {il}: state holds {len(st.raw)} raw rows, position is {pos}")
        rp = self.rope[il]
        eps = hp.rms_eps
        # projections
        qr = rms_norm(self.lw(il, "attn_q_a.weight") @ xn, self.lw(il, "attn_q_a_norm.weight"), eps)
        q = (self.lw(il, "attn_q_b.weight") @ qr).reshape(hp.n_head, hp.head_dim)
        q = rms_norm(q, None, eps)
        q = rope(q, pos, rp)
        kv = rms_norm(self.lw(il, "attn_kv.weight") @ xn, self.lw(il, "attn_kv_a_norm.weight"), eps)
        kv = rope(kv, pos, rp)
        if self.simulate_quant:
            kv[: hp.d_nope] = fp8_roundtrip(kv[: hp.d_nope])
        st.raw.append(self._store(kv))
        # compressor (runs before attention, so a row emitted now is visible now)
        R = hp.ratio(il)
        comp_row = index_row = None
        if R:
            u, g = compressor_inputs(
                xn,
                self.lw(il, "attn_compressor_kv.weight"),
                self.lw(il, "attn_compressor_gate.weight"),
                self.lw(il, "attn_compressor_ape.weight"),
                pos,
            )
            z = compressor_step(st.comp_state, u, g, pos)
            if z is not None:
                comp_row = self._store(self.compress_row(il, z, pos + 1 - R, indexer=False))
                st.comp.append(comp_row)
        n_vis = (pos + 1) // R if R else 0
        if R and len(st.comp) != n_vis:
            raise AssertionError(f"layer {il}: {len(st.comp)} compressed rows, expected {n_vis}")
        # indexer
        selected = np.arange(n_vis)
        idx_scores = None
        if hp.has_indexer(il):
            u, g = compressor_inputs(
                xn,
                self.lw(il, "indexer_compressor_kv.weight"),
                self.lw(il, "indexer_compressor_gate.weight"),
                self.lw(il, "indexer_compressor_ape.weight"),
                pos,
            )
            z = compressor_step(st.index_state, u, g, pos)
            if z is not None:
                index_row = self._store(self.compress_row(il, z, pos + 1 - R, indexer=True))
                st.index_comp.append(index_row)
            qi = (self.lw(il, "indexer.attn_q_b.weight") @ qr).reshape(hp.idx_heads, hp.idx_dim)
            qi = indexer_qat(rope(qi, pos, rp), self.simulate_quant)
            wi = (self.lw(il, "indexer.proj.weight") @ xn) / math.sqrt(hp.idx_dim * hp.idx_heads)
            idx_scores = indexer_scores(qi, wi, np.array(st.index_comp[:n_vis]))
            selected = indexer_select(idx_scores, hp.idx_topk)
        # attention over window ∪ visible compressed rows
        first = max(0, pos - hp.window + 1)
        keys = list(st.raw[first : pos + 1]) + [st.comp[c] for c in selected]
        o = attention_with_sinks(
            q, np.array(keys), self.lw(il, "attn_sinks.weight"), 1.0 / math.sqrt(hp.head_dim)
        )
        # inverse RoPE, grouped low-rank output
        o = rope(o, pos, rp, inverse=True)
        og = o.reshape(hp.o_groups, hp.group_dim)
        wa = self.lw(il, "attn_output_a.weight").reshape(hp.o_groups, hp.o_lora_rank, hp.group_dim)
        low = np.einsum("grd,gd->gr", wa, og).reshape(-1)
        a = self.lw(il, "attn_output_b.weight") @ low
        if trace is not None:
            trace.update(
                attn_qr=qr,
                attn_q=q,
                attn_kv=st.raw[pos],
                comp_row=comp_row,
                index_row=index_row,
                index_scores=idx_scores,
                index_selected=selected if hp.has_indexer(il) else None,
                n_comp=len(st.comp),
                n_index_comp=len(st.index_comp),
                attn_o=o,
                attn_out=a,
            )
        return a

    # -- MoE sublayer ("MoE") --
    def route(self, il: int, xn, token: int):
        """Router: returns (selected expert ids, their weights, probs)."""
        hp = self.hp
        prob = np.sqrt(softplus(self.lw(il, "ffn_gate_inp.weight") @ xn))
        if hp.is_hash_layer(il):
            sel = self.lw(il, "ffn_gate_tid2eid.weight")[int(token)].copy()
        else:
            sel = topk_stable(prob + self.lw(il, "exp_probs_b.bias"), hp.n_expert_used)
        wsel = prob[sel]
        if hp.expert_weights_norm:
            wsel = wsel / max(wsel.sum(), ROUTER_WEIGHT_SUM_FLOOR)
        return sel, wsel * hp.expert_weights_scale, prob

    @staticmethod
    def swiglu(g, u, clamp: float):
        """silu(min(g, c))·clamp(u, -c, c); no clamp when c <= 0 (official swiglu_limit)."""
        if clamp > 0:
            g = np.minimum(g, clamp)
            u = np.clip(u, -clamp, clamp)
        return silu(g) * u

    def moe_sublayer(self, il: int, xn, token: int, trace=None):
        """Routed experts (weight applied before the down projection) + shared expert."""
        hp = self.hp
        sel, wsel, prob = self.route(il, xn, token)
        wg, wu, wd = (self.lw(il, f"ffn_{k}_exps.weight") for k in ("gate", "up", "down"))
        c = hp.swiglu_clamp[il]
        r = np.zeros(hp.n_embd)
        for e, we in zip(sel, wsel, strict=True):
            h = self.swiglu(wg[e] @ xn, wu[e] @ xn, c) * we
            r += wd[e] @ h
        cs = hp.swiglu_clamp_shexp[il]
        hs = self.swiglu(
            self.lw(il, "ffn_gate_shexp.weight") @ xn, self.lw(il, "ffn_up_shexp.weight") @ xn, cs
        )
        sh = self.lw(il, "ffn_down_shexp.weight") @ hs
        f = r + sh
        if trace is not None:
            trace.update(
                router_probs=prob, experts=sel, expert_weights=wsel, ffn_routed=r, ffn_shared=sh
            )
            trace["ffn_out"] = f
        return f

    # -- whole layer and output head ("Output head") --
    def layer_forward(
        self, il: int, X, token: int, pos: int, state: State | None = None, trace=None
    ):
        t = {} if trace is not None else None
        x, pre, post, comb = self.hc_pre_layer(il, X, "attn")
        xn = rms_norm(x, self.lw(il, "attn_norm.weight"), self.hp.rms_eps)
        a = self.attention_sublayer(il, xn, pos, state, t)
        X1 = hc_post(a, X, post, comb)
        if t is not None:
            t.update(hc_in=X, attn_x=x, attn_pre=pre, attn_post=post, attn_comb=comb, attn_xn=xn)
            t["hc_after_attn"] = X1
        x, pre, post, comb = self.hc_pre_layer(il, X1, "ffn")
        xn = rms_norm(x, self.lw(il, "ffn_norm.weight"), self.hp.rms_eps)
        f = self.moe_sublayer(il, xn, token, t)
        X2 = hc_post(f, X1, post, comb)
        if t is not None:
            t.update(ffn_x=x, ffn_pre=pre, ffn_post=post, ffn_comb=comb, ffn_xn=xn)
            t["hc_after_ffn"] = X2
            trace.append(t)
        return X2

    def output_head(self, X, trace=None):
        """HC head, output_norm, vocabulary projection."""
        hp = self.hp
        y = hc_head(
            X,
            self.w["output_hc_fn.weight"],
            self.w["output_hc_scale.weight"],
            self.w["output_hc_base.weight"],
            norm_eps=hp.rms_eps,
            hc_eps=hp.hc_eps,
        )
        yn = rms_norm(y, self.w["output_norm.weight"], hp.rms_eps)
        logits = self.w["output.weight"] @ yn
        if trace is not None:
            trace.update(head_y=y, head_yn=yn)
        return logits

    def forward_token(
        self,
        token: int,
        pos: int | None = None,
        *,
        state: State | None = None,
        trace: bool = False,
        capture_layers=(),
    ):
        """The whole pass for one token at position pos (must be the state's next position).

        Returns logits, or (logits, info) when trace=True or capture_layers is not empty.
        info['capture'] is {layer: mean over the N streams of that layer's output HC state} (the
        DSpark capture row, docs/DSPARK.md "The drafter (reference alignment)") for every layer in
        capture_layers. With trace=True info also holds 'layers' (one dict per layer with every
        intermediate), 'hc_out', 'head_y', 'head_yn' and 'logits'."""
        st = state if state is not None else self.state
        if pos is None:
            pos = st.n_tokens
        if pos != st.n_tokens:
            raise ValueError(f"position {pos} given, the state's next position is {st.n_tokens}")
        if not 0 <= int(token) < self.hp.n_vocab:
            raise ValueError(f"token id {token} outside the vocabulary")
        layers = [] if trace else None
        capture = {}
        X = self.embed(token)
        for il in range(self.hp.n_layer):
            X = self.layer_forward(il, X, token, pos, st, layers)
            if il in capture_layers:
                capture[il] = X.mean(axis=0)
        head = {} if trace else None
        logits = self.output_head(X, head)
        st.n_tokens = pos + 1
        if trace:
            head.update(layers=layers, capture=capture, logits=logits, hc_out=X, position=pos)
            return logits, head
        return (logits, {"capture": capture}) if capture_layers else logits

    def forward_tokens(self, tokens, *, state: State | None = None) -> np.ndarray:
        """Logits [n, V] of consecutive tokens starting at the state's next position."""
        return np.array([self.forward_token(t, state=state) for t in tokens])
