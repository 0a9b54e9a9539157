"""The DSpark support model (drafter) in PyTorch, for training against a frozen target.

The math is docs/DSPARK.md's (DeepSeek's reference drafter; tests/reference/dspark_ref.py is the
specification and tests/test_train_drafter.py checks this file against it):

* capture: the mean over the N hyper-connection streams of the output of each target layer in
  `target_layer_ids` (the last three); fusion `main_x = RMSNorm(main_proj · concat, main_norm)`;
* per stage s the context KV row of position q is `kv_norm_s(wkv_s(main_x(q)))` with RoPE at q
  (base rope.freq_base, no YaRN) and the FP8 round trip of the non-RoPE dims — no HC, no
  attn_norm; a block at p+1..p+B sees the last `window` context rows (positions <= p);
* the block `[anchor, noise x (B-1)]` at positions p+1..p+B enters the stages as the target's
  embeddings; each stage is a DeepSeek V4 block without compressor, indexer or hash routing whose
  attention is non-causal over the window rows and all B block rows, with sinks;
* heads: h = the last stage's HC head (pre-norm); U = target output · RMSNorm(h, norm); Markov
  `U_i + W2 · W1[prev_i]`; confidence `proj · [h_i ; W1[prev_i]]` (a logit).

Training evaluates many anchors of a sequence at once: the context rows are computed once per
sequence and stage, and every anchor's block attends to its own window through a mask.
"""

from __future__ import annotations

import math

import torch

from model import (
    Rope,
    Shape,
    acc,
    attn_output,
    block_shapes,
    fp8_nope,
    hc_head,
    hc_post,
    hc_pre_w,
    init_all,
    kv_proj,
    load_numpy,
    moe,
    numpy_weights,
    q_proj,
    register,
    rms_norm,
    rope_freqs,
    wname,
)


def support_shapes(sh: Shape) -> dict:
    """NumPy shapes of ds4's support layout (docs/DSPARK.md "Support models"; 81 tensors for 3
    stages, plus one selection-bias vector per stage counted among them)."""
    S, D, R, N = sh.n_stages, sh.D, sh.markov_rank, sh.N
    out = {}
    for s in range(S):
        p = f"mtp.{s}."
        if s == 0:
            out[p + "main_proj.weight"] = (D, sh.n_target_layers * D)
            out[p + "main_norm.weight"] = (D,)
        out.update(block_shapes(sh, p, 0, False))
    last = f"mtp.{S - 1}."
    out[last + "norm.weight"] = (D,)
    out[last + "hc_head_base.weight"] = (N,)
    out[last + "hc_head_fn.weight"] = (N, sh.hc_dim)
    out[last + "hc_head_scale.weight"] = (1,)
    out[last + "markov_head.markov_w1.weight"] = (sh.V, R)
    out[last + "markov_head.markov_w2.weight"] = (sh.V, R)
    out[last + "confidence_head.proj.weight"] = (1, D + R)
    return out


class Drafter(torch.nn.Module):
    """The drafter of `target` (a model.Target, frozen and not part of this module's
    parameters). `window` context rows per stage (default: the target's sliding window, as
    ds4rt's DSpark loader does)."""

    def __init__(
        self,
        sh: Shape,
        target,
        noise_id: int,
        *,
        window: int | None = None,
        dtype=torch.float32,
        device=None,
        simulate_quant: bool = True,
    ):
        super().__init__()
        self.sh = sh
        self.noise_id = int(noise_id)
        self.window = int(window or sh.W)
        self.simulate_quant = simulate_quant
        self._target = [target]
        self.shapes = support_shapes(sh)
        register(self, self.shapes, dtype, device)
        self.rope = Rope(rope_freqs(sh, False), target.max_pos, dtype, device)

    @property
    def target(self):
        return self._target[0]

    def w(self, name):
        return getattr(self, wname(name))

    def stage_w(self, s: int):
        p = f"mtp.{s}."
        return lambda suffix: getattr(self, wname(p + suffix))

    def last(self, suffix):
        return self.w(f"mtp.{self.sh.n_stages - 1}.{suffix}")

    def load_numpy(self, weights):
        load_numpy(self, self.shapes, weights)

    def numpy_weights(self):
        return numpy_weights(self, self.shapes)

    def init_weights(self, seed: int, from_target: bool = True) -> None:
        """Random values as the target's init; with from_target, each stage starts as a copy
        of the block tensors of one of the target's last layers (the ones it shares), and the
        Markov and confidence heads start at zero (no bias, confidence 1/2)."""
        init_all(self, self.shapes, self.sh, seed)
        with torch.no_grad():
            if from_target:
                S, L = self.sh.n_stages, self.sh.L
                for s in range(S):
                    src = f"blk.{L - S + s}."
                    for name in self.shapes:
                        suffix = name[len(f"mtp.{s}.") :]
                        if name.startswith(f"mtp.{s}.") and src + suffix in self.target.shapes:
                            self.w(name).copy_(self.target.w(src + suffix))
                tail = self.target
                self.last("norm.weight").copy_(tail.w("output_norm.weight"))
                for k in ("fn", "scale", "base"):
                    self.last(f"hc_head_{k}.weight").copy_(tail.w(f"output_hc_{k}.weight"))
            self.last("markov_head.markov_w2.weight").zero_()
            self.last("confidence_head.proj.weight").zero_()

    def lin(self, x, w):
        return self.target.lin(x, w)

    def fp8(self, x):
        return fp8_nope(x, self.sh, self.simulate_quant)

    # -- the block --
    def main_x(self, caps: list):
        """Fusion of the captured rows (ascending target-layer order): [B, T, D]."""
        h = torch.cat(caps, dim=-1)
        return rms_norm(
            self.lin(h, self.w("mtp.0.main_proj.weight")),
            self.w("mtp.0.main_norm.weight"),
            self.sh.rms_eps,
        )

    def stage(self, s, X, ids, pos, ctx, ctx_mask, loads):
        """One stage on blocks X [B, A, Bk, N, D] at positions pos [B, A, Bk]; ctx [B, T, d_h]
        are the stage's context rows, ctx_mask [B, A, T] the window of each block."""
        sh = self.sh
        W = self.stage_w(s)
        x, post, comb = hc_pre_w(W, X, "attn", sh)
        xn = rms_norm(x, W("attn_norm.weight"), sh.rms_eps)
        _, q = q_proj(W, xn, sh, self.lin, self.rope, pos)  # [B, A, Bk, H, d]
        bkv = kv_proj(W, xn, sh, self.lin, self.rope, pos, self.fp8)  # [B, A, Bk, d]
        scale = 1.0 / math.sqrt(sh.d_h)
        s_ctx = torch.einsum("bakhd,bjd->bakhj", q, ctx) * scale
        s_ctx = s_ctx.masked_fill(~ctx_mask[:, :, None, None, :], float("-inf"))
        s_blk = torch.einsum("bakhd,bamd->bakhm", q, bkv) * scale
        sink = W("attn_sinks.weight").view(1, 1, 1, sh.H, 1).expand(*s_blk.shape[:-1], 1)
        probs = torch.softmax(acc(torch.cat([s_ctx, s_blk, sink.to(s_blk.dtype)], -1)), -1)
        probs = probs.to(q.dtype)
        T, Bk = ctx.shape[1], s_blk.shape[-1]
        o = torch.einsum("bakhj,bjd->bakhd", probs[..., :T], ctx)
        o = o + torch.einsum("bakhm,bamd->bakhd", probs[..., T : T + Bk], bkv)
        X = hc_post(attn_output(W, o, sh, self.lin, self.rope, pos), X, post, comb)
        x, post, comb = hc_pre_w(W, X, "ffn", sh)
        xn = rms_norm(x, W("ffn_norm.weight"), sh.rms_eps)
        f = moe(W, xn, ids, sh, self.lin, False, loads, s, self.target.mm_dtype)  # never hashed
        return hc_post(f, X, post, comb)

    def blocks(self, caps: list, tokens, anchors, block_size=None, loads=None):
        """Blocks after the anchors: `anchors` [B, A] are last committed positions p (the
        anchor token tokens[p+1] sits at p+1, context rows are those of positions <= p).
        Returns (h [B, A, Bk, D] pre-norm, U [B, A, Bk, V] base logits)."""
        sh = self.sh
        Bk = block_size or sh.block_size
        B, T = tokens.shape
        main_x = self.main_x(caps)
        dev = tokens.device
        pos_t = torch.arange(T, device=dev)
        pos = anchors[..., None] + 1 + torch.arange(Bk, device=dev)  # [B, A, Bk]
        anchor_tok = tokens.gather(1, anchors + 1)
        ids = torch.cat([anchor_tok[..., None], torch.full_like(pos[..., 1:], self.noise_id)], -1)
        ctx_mask = (pos_t <= anchors[..., None]) & (pos_t > anchors[..., None] - self.window)
        X = self.target.embed(ids)
        for s in range(sh.n_stages):
            ctx = kv_proj(self.stage_w(s), main_x, sh, self.lin, self.rope, pos_t, self.fp8)
            X = self.stage(s, X, ids, pos, ctx, ctx_mask, loads)
        h = hc_head(
            X,
            self.last("hc_head_fn.weight"),
            self.last("hc_head_scale.weight"),
            self.last("hc_head_base.weight"),
            sh,
        )
        hn = rms_norm(h, self.last("norm.weight"), sh.rms_eps)
        U = acc(self.lin(hn, self.target.w("output.weight")))
        return h, U

    def heads(self, h, U, prev):
        """Markov-corrected logits and confidence logits for the given predecessors prev
        [B, A, Bk] (prev_0 = the anchor, prev_i = the token of slot i-1)."""
        e = self.last("markov_head.markov_w1.weight")[prev]
        corrected = U + acc(self.lin(e, self.last("markov_head.markov_w2.weight")))
        proj = self.last("confidence_head.proj.weight")[0]
        conf = acc(torch.cat([h, e.to(h.dtype)], -1) @ proj.to(h.dtype))
        return corrected, conf

    @torch.no_grad()
    def greedy(self, h, U, anchor_tok):
        """The greedy Markov chain (ties to the smallest id): drafts [B, A, Bk], corrected
        logits and confidence logits along the drafted predecessors."""
        Bk = U.shape[-2]
        prev = anchor_tok
        drafts, cors, confs = [], [], []
        w1 = self.last("markov_head.markov_w1.weight")
        w2 = self.last("markov_head.markov_w2.weight")
        proj = self.last("confidence_head.proj.weight")[0]
        for i in range(Bk):
            e = w1[prev]
            c = U[..., i, :] + acc(self.lin(e, w2))
            confs.append(acc(torch.cat([h[..., i, :], e.to(h.dtype)], -1) @ proj.to(h.dtype)))
            prev = c.argmax(-1)
            drafts.append(prev)
            cors.append(c)
        return torch.stack(drafts, -1), torch.stack(cors, -2), torch.stack(confs, -1)
