"""The DeepSeek V4 Flash (`deepseek4`) target in PyTorch, over whole sequences, for training.

Every piece of docs/MODEL.md "The forward pass, formula by formula" (ds4rt's account of the math):
hyper-connections with Sinkhorn mixing, attention with a sliding window, the ratio-4 (overlapping,
with the lightning indexer) and ratio-128 KV compressors, attention sinks, inverse RoPE and the
grouped low-rank output, YaRN RoPE on compressed layers, hash-routed and learned-routed
sqrt-softplus MoE with the shared expert and the SwiGLU clamp, the HC head and the output head.
tests/reference/dsv4_ref.py (float64, one token at a time) is the specification; the test
tests/test_train_model.py checks this file against it. Numerics: ds4rt's default "official"
mode — FP8 round trip of the KV rows' non-RoPE dims, FP4 round trip of the indexer q/k — with
straight-through gradients (numerics.py).

Parameters are named like the GGUF tensors ("blk.3.attn_q_a.weight"; `wname` maps them to
module keys) and shaped like the reference's NumPy arrays (2-D weights [out, in], experts
[E, out, in]), so export and import are renames.

Training-only additions, none of which exists at inference: the indexer gets its gradient from
an auxiliary KL loss towards the main attention's distribution over the compressed rows (the
lightning indexer's training signal in DeepSeek's sparse attention; its top-k choice itself has
no gradient), and the routers' selection biases follow DeepSeek's auxiliary-loss-free balancing
(a bias step against each expert's load after every optimiser step).
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import torch
import torch.nn.functional as F
from numerics import fp4_st, fp8_st, hadamard_matrix

ROUTER_FLOOR = 6.103515625e-5  # docs/MODEL.md "MoE": guard on the routing weight sum
# Routed experts evaluated densely (all experts, zero weight where not selected) instead of by
# gathering each expert's tokens; None = dense on CUDA. Same values either way.
DENSE_EXPERTS: bool | None = None


@dataclasses.dataclass(frozen=True)
class Shape:
    """Hyperparameters (names of docs/MODEL.md "Derived values") plus the drafter's."""

    L: int
    D: int
    V: int
    H: int
    d_h: int
    r_rot: int
    Rq: int
    G: int
    Ro: int
    E: int
    k: int
    F: int
    n_shared: int
    n_hash: int
    W: int
    Hi: int
    d_i: int
    K_i: int
    ratios: tuple
    N: int = 4
    T_sk: int = 20
    rope_base: float = 10000.0
    compress_rope_base: float = 160000.0
    yarn_factor: float = 16.0
    yarn_beta_fast: float = 32.0
    yarn_beta_slow: float = 1.0
    yarn_orig_ctx: int = 65536
    rms_eps: float = 1e-6
    hc_eps: float = 1e-6
    expert_scale: float = 1.5
    clamp: float = 10.0
    # DSpark support model
    n_stages: int = 3
    block_size: int = 5
    markov_rank: int = 64
    n_target_layers: int = 3

    def __post_init__(self):
        object.__setattr__(self, "ratios", tuple(int(r) for r in self.ratios))
        if len(self.ratios) != self.L:
            raise ValueError("one compress ratio per layer")
        if (self.d_h - self.r_rot) % 64 or self.H % self.G:
            raise ValueError("d_h - r_rot must be a multiple of 64 and G must divide H")

    @property
    def d_nope(self) -> int:
        return self.d_h - self.r_rot

    @property
    def hc_dim(self) -> int:
        return self.N * self.D

    @property
    def hc_mix(self) -> int:
        return (2 + self.N) * self.N

    @property
    def group_dim(self) -> int:
        return self.H // self.G * self.d_h

    @property
    def target_layer_ids(self) -> tuple:
        return tuple(range(self.L - self.n_target_layers, self.L))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, d: dict) -> Shape:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_hparams(cls, hp, **drafter) -> Shape:
        """From tests/reference/dsv4_ref.HParams (read from a GGUF)."""
        if len(set(hp.swiglu_clamp) | set(hp.swiglu_clamp_shexp)) != 1:
            raise ValueError("one SwiGLU clamp for every layer and the shared expert expected")
        return cls(
            L=hp.n_layer,
            D=hp.n_embd,
            V=hp.n_vocab,
            H=hp.n_head,
            d_h=hp.head_dim,
            r_rot=hp.n_rot,
            Rq=hp.q_lora_rank,
            G=hp.o_groups,
            Ro=hp.o_lora_rank,
            E=hp.n_expert,
            k=hp.n_expert_used,
            F=hp.ffn_dim,
            n_shared=hp.n_shared,
            n_hash=hp.n_hash,
            W=hp.window,
            Hi=hp.idx_heads,
            d_i=hp.idx_dim,
            K_i=hp.idx_topk,
            ratios=hp.compress_ratios[: hp.n_layer],
            N=hp.hc_count,
            T_sk=hp.sinkhorn_iters,
            rope_base=hp.rope_base,
            compress_rope_base=hp.compress_rope_base,
            yarn_factor=hp.yarn_factor,
            yarn_beta_fast=hp.yarn_beta_fast,
            yarn_beta_slow=hp.yarn_beta_slow,
            yarn_orig_ctx=hp.yarn_orig_ctx,
            rms_eps=hp.rms_eps,
            hc_eps=hp.hc_eps,
            expert_scale=hp.expert_weights_scale,
            clamp=hp.swiglu_clamp[0],
            **drafter,
        )


def wname(name: str) -> str:
    """GGUF tensor name -> module key (module keys cannot contain dots)."""
    return name.replace(".", "__")


def block_shapes(sh: Shape, p: str, ratio: int, hashed: bool) -> dict:
    """NumPy shapes of one block's tensors (docs/MODEL.md "Tensors")."""
    D, Fs = sh.D, sh.F * sh.n_shared
    s = {}
    for which in ("attn", "ffn"):
        s[p + f"hc_{which}_fn.weight"] = (sh.hc_mix, sh.hc_dim)
        s[p + f"hc_{which}_scale.weight"] = (3,)
        s[p + f"hc_{which}_base.weight"] = (sh.hc_mix,)
    s[p + "attn_norm.weight"] = (D,)
    s[p + "ffn_norm.weight"] = (D,)
    s[p + "attn_q_a.weight"] = (sh.Rq, D)
    s[p + "attn_q_a_norm.weight"] = (sh.Rq,)
    s[p + "attn_q_b.weight"] = (sh.H * sh.d_h, sh.Rq)
    s[p + "attn_kv.weight"] = (sh.d_h, D)
    s[p + "attn_kv_a_norm.weight"] = (sh.d_h,)
    s[p + "attn_sinks.weight"] = (sh.H,)
    s[p + "attn_output_a.weight"] = (sh.G * sh.Ro, sh.group_dim)
    s[p + "attn_output_b.weight"] = (D, sh.G * sh.Ro)
    if ratio:
        cd = (2 if ratio == 4 else 1) * sh.d_h
        s[p + "attn_compressor_ape.weight"] = (ratio, cd)
        s[p + "attn_compressor_kv.weight"] = (cd, D)
        s[p + "attn_compressor_gate.weight"] = (cd, D)
        s[p + "attn_compressor_norm.weight"] = (sh.d_h,)
    if ratio == 4:
        s[p + "indexer.attn_q_b.weight"] = (sh.Hi * sh.d_i, sh.Rq)
        s[p + "indexer.proj.weight"] = (sh.Hi, D)
        s[p + "indexer_compressor_ape.weight"] = (4, 2 * sh.d_i)
        s[p + "indexer_compressor_kv.weight"] = (2 * sh.d_i, D)
        s[p + "indexer_compressor_gate.weight"] = (2 * sh.d_i, D)
        s[p + "indexer_compressor_norm.weight"] = (sh.d_i,)
    s[p + "ffn_gate_inp.weight"] = (sh.E, D)
    if hashed:
        s[p + "ffn_gate_tid2eid.weight"] = (sh.V, sh.k)
    else:
        s[p + "exp_probs_b.bias"] = (sh.E,)
    s[p + "ffn_gate_exps.weight"] = (sh.E, sh.F, D)
    s[p + "ffn_up_exps.weight"] = (sh.E, sh.F, D)
    s[p + "ffn_down_exps.weight"] = (sh.E, D, sh.F)
    s[p + "ffn_gate_shexp.weight"] = (Fs, D)
    s[p + "ffn_up_shexp.weight"] = (Fs, D)
    s[p + "ffn_down_shexp.weight"] = (D, Fs)
    return s


def target_shapes(sh: Shape) -> dict:
    s = {"token_embd.weight": (sh.V, sh.D)}
    for il in range(sh.L):
        s.update(block_shapes(sh, f"blk.{il}.", sh.ratios[il], il < sh.n_hash))
    s.update(
        {
            "output_hc_fn.weight": (sh.N, sh.hc_dim),
            "output_hc_scale.weight": (1,),
            "output_hc_base.weight": (sh.N,),
            "output_norm.weight": (sh.D,),
            "output.weight": (sh.V, sh.D),
        }
    )
    return s


# Tensors that are not trained by gradient: the hash table and the routers' selection biases.
def is_buffer(name: str) -> bool:
    return name.endswith("tid2eid.weight") or name.endswith("exp_probs_b.bias")


# ---------------------------------------------------------------------------------------------
# Elementary pieces (docs/MODEL.md "Conventions", "Hyper-connections", "RoPE")
# ---------------------------------------------------------------------------------------------
def acc(x):
    """Softmaxes, router probabilities and logits in float32 (float64 stays float64)."""
    return x if x.dtype == torch.float64 else x.float()


def rms_norm(x, w=None, eps: float = 1e-6):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


def sinkhorn(c0, iters: int, eps: float):
    """Row softmax + eps, one column normalisation, then (iters - 1) x (row, column)."""
    c = torch.softmax(c0, dim=-1) + eps
    c = c / (c.sum(-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        c = c / (c.sum(-1, keepdim=True) + eps)
        c = c / (c.sum(-2, keepdim=True) + eps)
    return c


def hc_mixes(X, fn, eps):
    flat = X.flatten(-2)
    return rms_norm(flat, None, eps) @ fn.t()


def hc_pre(X, fn, scale, base, sh: Shape):
    """X [..., N, D] -> (x [..., D], post [..., N], comb [..., N, N]) (HC pre)."""
    N = sh.N
    m = hc_mixes(X, fn, sh.rms_eps)
    pre = torch.sigmoid(scale[0] * m[..., :N] + base[:N]) + sh.hc_eps
    post = 2.0 * torch.sigmoid(scale[1] * m[..., N : 2 * N] + base[N : 2 * N])
    c0 = (scale[2] * m[..., 2 * N :] + base[2 * N :]).unflatten(-1, (N, N))
    comb = sinkhorn(c0, sh.T_sk, sh.hc_eps)
    x = (pre.unsqueeze(-1) * X).sum(-2)
    return x, post, comb


def hc_post(f, X, post, comb):
    """X_new[j] = post[j] f + sum_i comb[i, j] X[i] (HC post)."""
    return post.unsqueeze(-1) * f.unsqueeze(-2) + torch.einsum("...ij,...id->...jd", comb, X)


def hc_head(X, fn, scale, base, sh: Shape):
    m = hc_mixes(X, fn, sh.rms_eps)
    w = torch.sigmoid(scale[0] * m + base) + sh.hc_eps
    return (w.unsqueeze(-1) * X).sum(-2)


def rope_freqs(sh: Shape, compressed: bool) -> np.ndarray:
    """omega_k, theta_k = p * omega_k (float64); YaRN on compressed layers (docs/MODEL.md)."""
    r = sh.r_rot
    k = np.arange(r // 2, dtype=np.float64)
    base = sh.compress_rope_base if compressed else sh.rope_base
    w = base ** (-2.0 * k / r)
    if not compressed:
        return w

    def corr(beta):
        return r * math.log(sh.yarn_orig_ctx / (2.0 * math.pi * beta)) / (2.0 * math.log(base))

    lo = max(0, math.floor(corr(sh.yarn_beta_fast)))
    hi = min(r - 1, math.ceil(corr(sh.yarn_beta_slow)))
    gamma = 1.0 - np.clip((k - lo) / max(0.001, hi - lo), 0.0, 1.0)
    return w / sh.yarn_factor * (1.0 - gamma) + w * gamma


class Rope:
    """cos/sin tables of one RoPE parameter set, indexed by position."""

    def __init__(self, omega: np.ndarray, max_pos: int, dtype, device):
        theta = np.arange(max_pos, dtype=np.float64)[:, None] * omega[None, :]
        self.cos = torch.tensor(np.cos(theta), dtype=dtype, device=device)
        self.sin = torch.tensor(np.sin(theta), dtype=dtype, device=device)

    def __call__(self, x, pos, inverse: bool = False, heads: int = 0):
        """Rotate the last r_rot dims of x [..., T, <heads axes>, d] in adjacent pairs at
        positions `pos` (shape [..., T], broadcast against x's leading axes)."""
        c, s = self.cos[pos], self.sin[pos]
        for _ in range(heads):
            c, s = c.unsqueeze(-2), s.unsqueeze(-2)
        if inverse:
            s = -s
        r = 2 * c.shape[-1]
        head, tail = x[..., :-r], x[..., -r:]
        a, b = tail[..., 0::2], tail[..., 1::2]
        rot = torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
        return torch.cat([head, rot], dim=-1)


def swiglu(g, u, clamp: float):
    if clamp > 0:
        g = g.clamp(max=clamp)
        u = u.clamp(-clamp, clamp)
    return F.silu(g) * u


# ---------------------------------------------------------------------------------------------
# Block pieces shared by the target's layers and the DSpark stages. `W(suffix)` returns the
# block's tensor "<prefix><suffix>"; `lin(x, w)` is the matrix product in the model's mm dtype.
# ---------------------------------------------------------------------------------------------
def q_proj(W, xn, sh: Shape, lin, rope, pos):
    """qr (also the indexer's input) and the RoPE'd per-head-normalised q [..., H, d_h]."""
    eps = sh.rms_eps
    qr = rms_norm(lin(xn, W("attn_q_a.weight")), W("attn_q_a_norm.weight"), eps)
    q = lin(qr, W("attn_q_b.weight")).unflatten(-1, (sh.H, sh.d_h))
    return qr, rope(rms_norm(q, None, eps), pos, heads=1)


def kv_proj(W, x, sh: Shape, lin, rope, pos, fp8):
    """kv_norm(wkv(x)) with RoPE at pos and the FP8 round trip of the non-RoPE dims."""
    kv = rms_norm(lin(x, W("attn_kv.weight")), W("attn_kv_a_norm.weight"), sh.rms_eps)
    return fp8(rope(kv, pos))


def attn_output(W, o, sh: Shape, lin, rope, pos):
    """Inverse RoPE on the heads, grouped low-rank output: o [..., H, d_h] -> [..., D]."""
    o = rope(o, pos, inverse=True, heads=1)
    og = o.reshape(*o.shape[:-2], sh.G, sh.group_dim)
    wa = W("attn_output_a.weight").view(sh.G, sh.Ro, sh.group_dim)
    low = torch.einsum("...gd,grd->...gr", og, wa.to(og.dtype))
    return lin(low.flatten(-2), W("attn_output_b.weight"))


def moe(
    W, xn, tokens, sh: Shape, lin, hashed: bool, loads: dict | None = None, key=None, mm_dtype=None
):
    """Router (hash table or biased top-k of sqrt-softplus, ties to the lower index), routed
    SwiGLU experts with the weight applied before the down projection, shared expert
    (docs/MODEL.md "MoE"). `loads[key]` receives the tokens per expert of a learned-routing
    layer."""
    shape = xn.shape
    x = xn.reshape(-1, shape[-1])
    prob = torch.sqrt(F.softplus(acc(lin(x, W("ffn_gate_inp.weight")))))
    if hashed:
        sel = W("ffn_gate_tid2eid.weight")[tokens.reshape(-1)]
    else:
        biased = (prob + W("exp_probs_b.bias")).detach()
        sel = torch.sort(biased, dim=-1, descending=True, stable=True).indices[:, : sh.k]
        if loads is not None:
            loads[key] = torch.zeros(sh.E, device=x.device).index_add_(
                0, sel.reshape(-1), torch.ones(sel.numel(), device=x.device)
            )
    wsel = prob.gather(1, sel)
    wsel = (wsel / wsel.sum(-1, keepdim=True).clamp_min(ROUTER_FLOOR) * sh.expert_scale).to(x.dtype)
    wg, wu, wd = (W(f"ffn_{k}_exps.weight") for k in ("gate", "up", "down"))
    gate = torch.zeros(x.shape[0], sh.E, dtype=x.dtype, device=x.device).scatter_add(1, sel, wsel)
    if DENSE_EXPERTS if DENSE_EXPERTS is not None else x.is_cuda:
        # every expert on every token, weighted (0 where not selected): E/k times the expert
        # arithmetic, but no data-dependent shapes, so nothing waits for the GPU
        mm = mm_dtype or x.dtype
        xm = x.to(mm)
        g = torch.einsum("md,efd->emf", xm, wg.to(mm)).to(x.dtype)
        u = torch.einsum("md,efd->emf", xm, wu.to(mm)).to(x.dtype)
        h = swiglu(g, u, sh.clamp) * gate.t()[:, :, None]
        out = torch.einsum("emf,edf->md", h.to(mm), wd.to(mm)).to(x.dtype)
    else:
        out = torch.zeros_like(x)
        for e in range(sh.E):
            rows = (sel == e).any(-1).nonzero(as_tuple=True)[0]
            if rows.numel() == 0:
                continue
            xe = x[rows]
            h = swiglu(lin(xe, wg[e]), lin(xe, wu[e]), sh.clamp) * gate[rows, e, None]
            out = out.index_add(0, rows, lin(h, wd[e]))
    hs = swiglu(lin(x, W("ffn_gate_shexp.weight")), lin(x, W("ffn_up_shexp.weight")), sh.clamp)
    return (out + lin(hs, W("ffn_down_shexp.weight"))).view(shape)


def hc_pre_w(W, X, which: str, sh: Shape):
    return hc_pre(
        X,
        W(f"hc_{which}_fn.weight"),
        W(f"hc_{which}_scale.weight"),
        W(f"hc_{which}_base.weight"),
        sh,
    )


def fp8_nope(x, sh: Shape, on: bool):
    if not on:
        return x
    return torch.cat([fp8_st(x[..., : sh.d_nope]), x[..., sh.d_nope :]], dim=-1)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------
class Target(torch.nn.Module):
    """`simulate_quant` = ds4rt's official numerics (FP8 KV, FP4 indexer) with straight-through
    gradients; off = llama.cpp numerics. `mm_dtype` is the dtype of the large matrix products
    (bfloat16 when training on a GPU; the parameters' dtype otherwise)."""

    def __init__(
        self,
        sh: Shape,
        *,
        max_pos: int = 4096,
        dtype=torch.float32,
        device=None,
        simulate_quant: bool = True,
        mm_dtype=None,
    ):
        super().__init__()
        self.sh = sh
        self.simulate_quant = simulate_quant
        self.mm_dtype = mm_dtype or dtype
        self.max_pos = max_pos
        self.shapes = target_shapes(sh)
        register(self, self.shapes, dtype, device)
        self.rope_dense = Rope(rope_freqs(sh, False), max_pos, dtype, device)
        self.rope_comp = Rope(rope_freqs(sh, True), max_pos, dtype, device)
        self.register_buffer("hadamard", hadamard_matrix(sh.d_i, dtype, device), persistent=False)
        # per layer: (suffix, module key) of its tensors, so a forward pass does no name search
        self._layer_keys = [
            [(n[len(f"blk.{il}.") :], wname(n)) for n in self.shapes if n.startswith(f"blk.{il}.")]
            for il in range(sh.L)
        ]

    # -- weights --
    def w(self, name: str) -> torch.Tensor:
        return getattr(self, wname(name))

    def load_numpy(self, weights: dict) -> None:
        load_numpy(self, self.shapes, weights)

    def numpy_weights(self) -> dict:
        return numpy_weights(self, self.shapes)

    def init_weights(self, seed: int) -> None:
        """Initial values: unit-variance projections, residual writes scaled by 1/sqrt(2L),
        hyper-connections that start as a plain residual (pre = 1/N, post = 1, comb near I)."""
        init_all(self, self.shapes, self.sh, seed)

    def lin(self, x, w):
        return F.linear(x.to(self.mm_dtype), w.to(self.mm_dtype)).to(x.dtype)

    def fp8(self, x):
        return fp8_nope(x, self.sh, self.simulate_quant)

    def qat(self, x):
        y = x @ self.hadamard
        return fp4_st(y) if self.simulate_quant else y

    # -- attention (docs/MODEL.md "Attention") --
    def compress(self, W, xn, pos, prefix, d, ratio):
        """Rows of the complete ratio-blocks of xn [B, T, D] (docs/MODEL.md "Compressors"):
        per-feature softmax pooling (with the overlap of ratio-4 layers), norm, RoPE at the block's
        first position.
        [B, nb, d]; the caller applies FP8 (attention) or Hadamard + FP4 (indexer)."""
        B, T, _ = xn.shape
        nb = T // ratio
        u = self.lin(xn, W(f"{prefix}_kv.weight"))
        g = self.lin(xn, W(f"{prefix}_gate.weight")) + W(f"{prefix}_ape.weight")[pos % ratio]
        u = u[:, : nb * ratio].unflatten(1, (nb, ratio))
        g = g[:, : nb * ratio].unflatten(1, (nb, ratio))
        if ratio == 4:  # overlap: previous block's first half + this block's second half
            pu = F.pad(u[:, :-1, :, :d], (0, 0, 0, 0, 1, 0))
            pg = F.pad(g[:, :-1, :, :d], (0, 0, 0, 0, 1, 0), value=float("-inf"))
            u = torch.cat([pu, u[..., d:]], dim=2)
            g = torch.cat([pg, g[..., d:]], dim=2)
        z = (torch.softmax(acc(g), dim=2).to(u.dtype) * u).sum(2)
        row = rms_norm(z, W(f"{prefix}_norm.weight"), self.sh.rms_eps)
        return self.rope_comp(row, torch.arange(nb, device=xn.device) * ratio)

    def attention(self, W, R, xn, pos, want_kl):
        """Attention of one layer with compress ratio R: (output [B, T, D], the indexer's KL
        term or None)."""
        sh = self.sh
        B, T, _ = xn.shape
        kl = None
        rope = self.rope_comp if R else self.rope_dense
        qr, q = q_proj(W, xn, sh, self.lin, rope, pos)
        kv = kv_proj(W, xn, sh, self.lin, rope, pos, self.fp8)
        scale = 1.0 / math.sqrt(sh.d_h)
        # raw window: key j visible to query t iff t - W < j <= t
        t_idx = torch.arange(T, device=xn.device)
        diff = t_idx[:, None] - t_idx[None, :]
        s_raw = torch.einsum("bthd,bjd->bhtj", q, kv) * scale
        s_raw = s_raw.masked_fill(~((diff >= 0) & (diff < sh.W)), float("-inf"))
        parts, values = [s_raw], [kv]
        if R:
            comp = self.fp8(self.compress(W, xn, pos, "attn_compressor", sh.d_h, R))
            nb = comp.shape[1]
            vis = torch.arange(nb, device=xn.device)[None, :] < ((t_idx + 1) // R)[:, None]
            allowed = vis[None]  # [1, T, nb]
            if R == 4 and nb:
                allowed, kl = self.indexer(W, xn, qr, pos, vis, q, comp, want_kl)
            s_c = torch.einsum("bthd,bcd->bhtc", q, comp) * scale
            parts.append(s_c.masked_fill(~allowed.unsqueeze(1), float("-inf")))
            values.append(comp)
        sink = W("attn_sinks.weight").view(1, sh.H, 1, 1).expand(B, sh.H, T, 1).to(s_raw.dtype)
        probs = torch.softmax(acc(torch.cat(parts + [sink], dim=-1)), dim=-1).to(q.dtype)
        o, off = 0, 0
        for part, v in zip(parts, values, strict=True):
            n = part.shape[-1]
            o = o + torch.einsum("bhtj,bjd->bthd", probs[..., off : off + n], v)
            off += n
        return attn_output(W, o, sh, self.lin, rope, pos), kl

    def indexer(self, W, xn, qr, pos, vis, q, comp, want_kl):
        """Allowed compressed rows [B, T, nb] of a ratio-4 layer (docs/MODEL.md "Indexer"): all
        visible rows when there are at most K_i, else the K_i best by the indexer score (ties:
        lower index). With want_kl also the indexer's training loss, else None."""
        sh = self.sh
        xi, qri = (xn.detach(), qr.detach()) if want_kl else (xn, qr)
        krow = self.qat(self.compress(W, xi, pos, "indexer_compressor", sh.d_i, 4))
        qi = self.lin(qri, W("indexer.attn_q_b.weight")).unflatten(-1, (sh.Hi, sh.d_i))
        qi = self.qat(self.rope_comp(qi, pos, heads=1))
        wi = self.lin(xi, W("indexer.proj.weight")) / math.sqrt(sh.d_i * sh.Hi)
        dots = torch.einsum("bthd,bcd->bthc", qi, krow).clamp_min(0.0)
        score = torch.einsum("bth,bthc->btc", wi, dots)
        masked = score.detach().masked_fill(~vis[None], float("-inf"))
        kk = min(sh.K_i, score.shape[-1])
        order = torch.sort(masked, dim=-1, descending=True, stable=True).indices[..., :kk]
        sel = torch.zeros_like(masked, dtype=torch.bool).scatter_(-1, order, True) & vis[None]
        if not want_kl:
            return sel, None
        # KL(main attention over the visible rows || indexer softmax), main side detached
        with torch.no_grad():
            logits = acc(torch.einsum("bthd,bcd->bhtc", q, comp)) / math.sqrt(sh.d_h)
            p = torch.softmax(logits.masked_fill(~vis[None, None], float("-inf")), -1).mean(1)
            has = vis.any(-1).to(p.dtype)  # queries with at least one visible row
        logq = torch.log_softmax(acc(score).masked_fill(~vis[None], float("-inf")), -1)
        kl = (p * (torch.log(p.clamp_min(1e-12)) - logq)).masked_fill(~vis[None], 0.0).sum(-1)
        # the mean over the queries that have a visible row (a mask, not a boolean index: no
        # data-dependent shape)
        return sel, (kl * has).sum() / (has.sum() * kl.shape[0])

    # -- layers and head (docs/MODEL.md "Output head") --
    def layer(self, il, X, tokens, pos, aux):
        """Layer il on the HC state X; with aux, its indexer KL and expert loads go there."""
        sh = self.sh
        wd = {suffix: getattr(self, key) for suffix, key in self._layer_keys[il]}
        X, kl, load = self.layer_body(
            wd, X, tokens, pos, sh.ratios[il], il < sh.n_hash, aux is not None
        )
        if aux is not None:
            if kl is not None:
                aux.setdefault("indexer_kl", []).append(kl)
            if load is not None:
                aux.setdefault("loads", {})[il] = load
        return X

    def layer_body(self, wd: dict, X, tokens, pos, ratio: int, hashed: bool, want_aux: bool):
        """One layer of compress ratio `ratio` (hash-routed or not) with its tensors `wd`
        (suffix -> tensor): (X, indexer KL or None, expert loads or None): the training-only
        terms are returned, not collected in a shared dict."""
        sh = self.sh
        W = wd.__getitem__
        x, post, comb = hc_pre_w(W, X, "attn", sh)
        xn = rms_norm(x, W("attn_norm.weight"), sh.rms_eps)
        a, kl = self.attention(W, ratio, xn, pos, want_aux)
        X = hc_post(a, X, post, comb)
        x, post, comb = hc_pre_w(W, X, "ffn", sh)
        xn = rms_norm(x, W("ffn_norm.weight"), sh.rms_eps)
        loads = {} if want_aux else None
        f = moe(W, xn, tokens, sh, self.lin, hashed, loads, 0, self.mm_dtype)
        return hc_post(f, X, post, comb), kl, (loads or {}).get(0)

    def head_hidden(self, X):
        """The HC head collapse y (pre-norm) of a final HC state."""
        return hc_head(
            X,
            self.w("output_hc_fn.weight"),
            self.w("output_hc_scale.weight"),
            self.w("output_hc_base.weight"),
            self.sh,
        )

    def logits_of(self, y):
        yn = rms_norm(y, self.w("output_norm.weight"), self.sh.rms_eps)
        out = self.lin(yn, self.w("output.weight"))
        return acc(out)

    def embed(self, tokens):
        e = self.w("token_embd.weight")[tokens]
        return e.unsqueeze(-2).expand(*e.shape[:-1], self.sh.N, e.shape[-1]).contiguous()

    def forward(self, tokens, *, capture_layers=(), aux=None, logits=True):
        """tokens [B, T] at positions 0..T-1 -> logits [B, T, V] (float32; [B, V] of the last
        position with logits="last"; None with logits=False).

        capture_layers: returns also {layer: mean over the N streams of its output HC state}
        (DSpark's capture, docs/DSPARK.md). aux: a dict that collects the training-only terms
        ("indexer_kl" list, "loads" per learned-routing layer); None at inference."""
        B, T = tokens.shape
        if T > self.max_pos:
            raise ValueError(f"{T} positions > max_pos {self.max_pos}")
        pos = torch.arange(T, device=tokens.device)
        X = self.embed(tokens)
        caps = {}
        for il in range(self.sh.L):
            X = self.layer(il, X, tokens, pos, aux)
            if il in capture_layers:
                caps[il] = X.mean(-2)
        if logits == "last":
            out = self.logits_of(self.head_hidden(X[:, -1]))
        else:
            out = self.logits_of(self.head_hidden(X)) if logits else None
        return (out, caps) if capture_layers else out


@torch.no_grad()
def update_router_bias(module, loads: dict, names: dict, rate: float) -> None:
    """Auxiliary-loss-free balancing: raise the selection bias of under-loaded experts, lower
    the over-loaded ones (DeepSeek V3's rule: the sign of the deviation from the mean load).
    names[key] is the bias tensor name of loads[key]."""
    for key, load in loads.items():
        b = getattr(module, wname(names[key]))
        b += rate * torch.sign(load.mean() - load).to(b.dtype)


def register(module, shapes: dict, dtype, device) -> None:
    for name, shape in shapes.items():
        if name.endswith("tid2eid.weight"):
            module.register_buffer(wname(name), torch.zeros(shape, dtype=torch.long, device=device))
        elif is_buffer(name):
            module.register_buffer(wname(name), torch.zeros(shape, dtype=dtype, device=device))
        else:
            t = torch.zeros(shape, dtype=dtype, device=device)
            module.register_parameter(wname(name), torch.nn.Parameter(t))


def load_numpy(module, shapes: dict, weights: dict) -> None:
    """Copy float / int arrays keyed by GGUF name (any layout with the right size, e.g. the
    3-D attn_output_a)."""
    missing = [n for n in shapes if n not in weights]
    if missing:
        raise KeyError(f"missing tensors: {missing[:5]}")
    with torch.no_grad():
        for name, shape in shapes.items():
            a = np.asarray(weights[name])
            t = getattr(module, wname(name))
            if a.size != t.numel():
                raise ValueError(f"{name}: {a.shape} does not fit {tuple(shape)}")
            t.copy_(torch.tensor(a.reshape(shape)).to(t.dtype))


def numpy_weights(module, shapes: dict) -> dict:
    out = {}
    for n in shapes:
        t = getattr(module, wname(n)).detach().cpu()
        out[n] = t.numpy().astype(np.int32) if n.endswith("tid2eid.weight") else t.float().numpy()
    return out


def init_all(module, shapes: dict, sh: Shape, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, shape in shapes.items():
            t = getattr(module, wname(name))
            t.copy_(init_value(name, shape, sh, g).to(t.dtype))


def init_value(name: str, shape, sh: Shape, g: torch.Generator) -> torch.Tensor:
    """Initial value of one tensor (see Target.init_weights)."""
    N = sh.N

    def normal(std):
        return torch.randn(shape, generator=g, dtype=torch.float64) * std

    suffix = name.split(".", 2)[-1] if name.startswith(("blk.", "mtp.")) else name
    if name.endswith("tid2eid.weight"):
        V, k = shape
        return torch.argsort(torch.rand(V, sh.E, generator=g), dim=1)[:, :k]
    if suffix.endswith("norm.weight") or name == "output_norm.weight":
        return torch.ones(shape, dtype=torch.float64)
    if suffix.endswith("_scale.weight"):
        return torch.ones(shape, dtype=torch.float64)
    if suffix.startswith(("hc_attn_base", "hc_ffn_base")):
        b = torch.zeros(shape, dtype=torch.float64)
        b[:N] = math.log(1.0 / (N - 1))  # sigmoid = 1/N: the streams' mean
        b[2 * N :] = (torch.eye(N, dtype=torch.float64) * 4.0).reshape(-1)  # comb near identity
        return b
    if suffix.startswith(("hc_head_base", "output_hc_base")):
        return torch.full(shape, math.log(1.0 / (N - 1)), dtype=torch.float64)
    if "hc_" in suffix and suffix.endswith("_fn.weight"):
        return normal(0.1 / math.sqrt(shape[-1]))
    if suffix in ("attn_sinks.weight", "exp_probs_b.bias") or suffix.endswith("_ape.weight"):
        return torch.zeros(shape, dtype=torch.float64)
    if name == "token_embd.weight":
        return normal(1.0)
    if suffix in ("attn_output_b.weight", "ffn_down_shexp.weight", "ffn_down_exps.weight"):
        return normal(1.0 / math.sqrt(shape[-1]) / math.sqrt(2 * sh.L))
    return normal(1.0 / math.sqrt(shape[-1]))
