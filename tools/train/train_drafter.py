#!/usr/bin/env python3
"""Step 3: train the DSpark support model against the frozen target, on the target's own
greedy chains.

    python tools/train/train_drafter.py --target target.gguf --data .traindata \\
        --out .trainrun/drafter [--budget-s 450] [--gen-share 0.4] [--device cuda] [--seed 0]

1. The target is read from the exported GGUF (dequantised: the drafter learns the weights that
   ship) and frozen, with ds4rt's official numerics.
2. The pool, two kinds of windows of `--seq` tokens with a prompt length P each:
   * generated: prompts of P tokens (P in turn from `--prompt-lengths`) of documents of the
     prompt stream that start at a BOS, continued by the target greedily token by token (whole
     prefix recomputed) for `--gen-share` of the budget: on-policy, as ds4rt decodes;
   * natural: `--pool` windows of the prompt stream as they are (half of them starting at a
     BOS), P drawn from `--prompt-lengths`: cheap, many contexts, fewer valid slots.
   One teacher-forced pass per window stores the target's captures (`target_layer_ids`),
   logits and argmax t at every position. (Jacobi sweeps, which would make natural windows
   greedy in place, were tried: on this model each sweep fixes little more than one token.)
3. Labels are exact wherever they are used: for an anchor p (the anchor token x[p+1]), slot
   i is trained towards t[p+1+i], the target's greedy token after [x[..p+1], t[p+1], ..,
   t[p+i]], and only while the window itself continues that chain (x[p+2+k] = t[p+1+k] for
   k < i), no label so far is EOS and the anchor lies before the window's first EOS after P.
   So a drafted block that matches the labels is exactly what greedy verification accepts
   (on generated windows every slot qualifies up to the EOS).
4. Training (DeepSeek's recipe, docs/MODELS.md): per slot, weighted by exp(-i/4): CE of the
   Markov-corrected logits (teacher-forced predecessors), total variation to the target's
   distribution, BCE of the confidence logit against "slot i is accepted given slots < i
   were" (greedy acceptance). Only the drafter runs per step (the pool holds the target's
   side), so a step is cheap.
   With --gen-file, windows generated beforehand (gen_windows.py: ds4rt's own greedy
   continuations of the shipped target, made on a CPU) join the generated ones; their labels
   follow the same chain rule, so a near-tie where PyTorch's float target differs ends them.
5. Evaluation on held-out prompts of the validation stream continued greedily (token by
   token, exact): per-position acceptance of greedy drafts over every anchor, the mean
   committed tokens per verified cycle over every anchor, and the same number for the cycles
   a speculative decoder actually runs (anchor p, then p + accepted + 1: what ds4rt's
   statistics count). Then the support GGUF is exported.

Writes support.gguf, drafter.pt, metrics.json and train.log to --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import gguf_io  # noqa: E402
import shipped  # noqa: E402
from drafter import Drafter  # noqa: E402
from prompts import doc_prompts  # noqa: E402

from model import Target, update_router_bias  # noqa: E402

BIAS_RATE = 1e-3
LOSS_WEIGHTS = {"ce": 0.5, "tv": 0.5, "conf": 1.0}


def load_target(path, dev, mm, max_pos):
    sh, w, vocab = gguf_io.read_target(path, **drafter_fields(shipped.SHAPE))
    tgt = Target(sh, max_pos=max_pos, device=dev, mm_dtype=mm)
    tgt.load_numpy(w)
    tgt.requires_grad_(False)
    tgt.eval()
    return sh, tgt, vocab


def drafter_fields(sh):
    return {k: getattr(sh, k) for k in ("n_stages", "block_size", "markov_rank", "n_target_layers")}


def pool_windows(stream, bos, T, count, rng):
    """count windows of T tokens, half of them starting at a BOS (as prompts do)."""
    w = common.Windows(stream, bos, int(rng.integers(1 << 31)))
    return w.batch(count, T - 1)


@torch.no_grad()
def greedy_continue(tgt, prompts, T, chunk):
    """Greedy continuation of prompts [B, P] to T tokens (whole-prefix recomputation)."""
    x = prompts
    while x.shape[1] < T:
        nxt = torch.cat(
            [tgt(x[i : i + chunk], logits="last").argmax(-1) for i in range(0, len(x), chunk)]
        )
        x = torch.cat([x, nxt[:, None]], dim=1)
    return x


@dataclasses.dataclass
class Pool:
    """Windows x [M, T] with prompt lengths P [M] and the frozen target's side of training:
    captures (bf16, one [M, T, D] per target layer), logits (bf16 [M, T, V]) and argmax t."""

    x: torch.Tensor
    P: torch.Tensor
    end: torch.Tensor  # first EOS at or after P (T if none)
    caps: list
    logits: torch.Tensor
    t: torch.Tensor


@torch.no_grad()
def build_pool(tgt, x, P, eos, chunk, layers, store=torch.bfloat16):
    caps, logits, ts = [[] for _ in layers], [], []
    for i in range(0, len(x), chunk):
        z, c = tgt(x[i : i + chunk], capture_layers=layers)
        for k, il in enumerate(layers):
            caps[k].append(c[il].to(store))
        logits.append(z.to(store))
        ts.append(z.argmax(-1))
    T = x.shape[1]
    pos = torch.arange(T, device=x.device)
    is_eos = (x == eos) & (pos[None] >= P[:, None])
    end = torch.where(is_eos.any(1), is_eos.float().argmax(1), torch.full_like(P, T))
    return Pool(x, P, end, [torch.cat(c) for c in caps], torch.cat(logits), torch.cat(ts))


def concat_pools(pools: list) -> Pool:
    return Pool(
        *(torch.cat([getattr(p, f) for p in pools]) for f in ("x", "P", "end")),
        [torch.cat([p.caps[k] for p in pools]) for k in range(len(pools[0].caps))],
        *(torch.cat([getattr(p, f) for p in pools]) for f in ("logits", "t")),
    )


def anchor_range(pool: Pool, rows, Bk):
    """Per row: the first and last anchor p (anchor token x[p+1] after the prompt, before the
    first EOS, with every label position p+1..p+Bk inside the window)."""
    T = pool.x.shape[1]
    lo = pool.P[rows] - 1
    hi = torch.minimum(pool.end[rows] - 2, torch.full_like(lo, T - 1 - Bk))
    return lo, hi


def labels(pool: Pool, rows, anchors, Bk, eos):
    """Slot labels y [R, A, Bk] = t[p+1+i] and their validity (the chain rule of step 3)."""
    R, A = anchors.shape
    x, t = pool.x[rows], pool.t[rows]
    idx = anchors[..., None] + 1 + torch.arange(Bk, device=x.device)  # p+1 .. p+Bk
    y = t.gather(1, idx.reshape(R, -1)).view(R, A, Bk)
    nxt = x.gather(1, (idx + 1).clamp_max(x.shape[1] - 1).reshape(R, -1)).view(R, A, Bk)
    follows = (nxt == y) & (y != eos)  # the window goes on along the chain after label i
    ok_before = torch.cat([torch.ones_like(follows[..., :1]), follows[..., :-1]], -1)
    valid = ok_before.long().cumprod(-1).bool()
    return y, valid


def pool_terms(dr, pool: Pool, rows, anchors, in_range, sh, eos, loads=None):
    """Drafter outputs and targets for anchors [R, A] of pool rows `rows`."""
    Bk = sh.block_size
    R, A = anchors.shape
    x = pool.x[rows]
    caps = [c[rows].float() for c in pool.caps]
    h, U = dr.blocks(caps, x, anchors, loads=loads)
    y, valid = labels(pool, rows, anchors, Bk, eos)
    valid = valid & in_range[..., None]
    anchor_tok = x.gather(1, anchors + 1)
    prev = torch.cat([anchor_tok[..., None], y[..., :-1]], -1)
    tpos = (anchors[..., None] + 1 + torch.arange(Bk, device=x.device)).reshape(R, -1)
    lg = pool.logits[rows]
    tdist = lg.gather(1, tpos[..., None].expand(-1, -1, lg.shape[-1])).view(R, A, Bk, -1)
    return h, U, y, prev, anchor_tok, tdist.float(), valid


def sample_anchors(pool: Pool, rows, A, Bk, gen):
    lo, hi = anchor_range(pool, rows, Bk)
    u = torch.rand(len(rows), A, generator=gen, device=rows.device)
    span = (hi - lo + 1).clamp_min(1)
    anchors = lo[:, None] + (u * span[:, None]).long()
    in_range = anchors <= hi[:, None]
    return anchors.clamp_max(pool.x.shape[1] - 1 - Bk), in_range


def losses(dr, h, U, y, prev, tdist, valid):
    Bk = y.shape[-1]
    cor, conf = dr.heads(h, U, prev)
    V = cor.shape[-1]
    w = torch.exp(-torch.arange(Bk, device=y.device, dtype=torch.float32) / 4.0)
    m = valid.float() * w
    denom = m.sum().clamp_min(1.0)
    ce = F.cross_entropy(cor.reshape(-1, V), y.reshape(-1), reduction="none").view_as(m)
    tv = 0.5 * (torch.softmax(cor, -1) - torch.softmax(tdist, -1)).abs().sum(-1)
    hit = (cor.detach().argmax(-1) == y).float()
    bce = F.binary_cross_entropy_with_logits(conf, hit, reduction="none")
    parts = {k: (v * m).sum() / denom for k, v in (("ce", ce), ("tv", tv), ("conf", bce))}
    total = sum(LOSS_WEIGHTS[k] * v for k, v in parts.items())
    return total, parts


def cycles_of(n_acc: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    """(cycles, accepted drafts) of the greedy speculative decoder on one sequence: a cycle at
    anchor p commits n_acc[p] drafts and the bonus, so the next anchor is p + n_acc[p] + 1."""
    p, cyc, acc = lo, 0, 0
    while p <= hi:
        k = int(n_acc[p - lo])
        cyc, acc, p = cyc + 1, acc + k, p + k + 1
    return cyc, acc


@torch.no_grad()
def acceptance(dr, pool: Pool, sh, eos, chunk):
    """Greedy drafts at every anchor of the pool's rows: per-position conditional acceptance,
    committed tokens per cycle over every anchor and over the decoder's own cycles."""
    Bk = sh.block_size
    proposed, accepted = torch.zeros(Bk), torch.zeros(Bk)
    lens, conf0, hit0 = [], [], []
    cyc = acc = 0
    T = pool.x.shape[1]
    for i in range(0, len(pool.x), chunk):
        rows = torch.arange(i, min(i + chunk, len(pool.x)), device=pool.x.device)
        lo, hi = anchor_range(pool, rows, Bk)
        A = int((hi - lo + 1).max().clamp(1, T))
        anchors = lo[:, None] + torch.arange(A, device=rows.device)[None]
        in_range = anchors <= hi[:, None]
        anchors = anchors.clamp_max(T - 1 - Bk)
        h, U, y, _, anchor_tok, _, valid = pool_terms(dr, pool, rows, anchors, in_range, sh, eos)
        drafts, _, conf = dr.greedy(h, U, anchor_tok)
        ok = (drafts == y) & valid
        run = ok.long().cumprod(-1)  # slot i accepted iff slots 0..i all match
        reach = torch.cat([torch.ones_like(run[..., :1]), run[..., :-1]], -1) * valid
        proposed += reach.sum((0, 1)).cpu()
        accepted += run.sum((0, 1)).cpu()
        n_acc = run.sum(-1)
        lens.append(n_acc[in_range].cpu())
        conf0.append(torch.sigmoid(conf)[in_range][:, 0].cpu())
        hit0.append(ok[in_range][:, 0].cpu())
        for r in range(len(rows)):
            a, b = int(lo[r]), int(hi[r])
            if b >= a:
                c, k = cycles_of(n_acc[r].cpu().numpy(), a, b)
                cyc, acc = cyc + c, acc + k
    n = torch.cat(lens).float()
    return {
        "anchors": int(n.numel()),
        "mean_accepted": float(n.mean()),
        "committed_per_cycle": 1.0 + float(n.mean()),
        "cycles": cyc,
        "committed_per_decoder_cycle": 1.0 + acc / max(cyc, 1),
        "position_acceptance": (accepted / proposed.clamp_min(1)).tolist(),
        "accepted_length_hist": torch.bincount(n.long(), minlength=Bk + 1).tolist(),
        "confidence0_mean": float(torch.cat(conf0).mean()),
        "slot0_hit_rate": float(torch.cat(hit0).float().mean()),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--target", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=Path(".traindata"))
    ap.add_argument("--stream", default="drafter.u16", help="prompt source file in --data")
    ap.add_argument("--out", type=Path, default=Path(".trainrun/drafter"))
    ap.add_argument("--budget-s", type=float, default=450.0)
    ap.add_argument("--reserve-s", type=float, default=40.0, help="kept for eval + export")
    ap.add_argument("--gen-share", type=float, default=0.4, help="budget share of generation")
    ap.add_argument("--gen-batch", type=int, default=128, help="prompts per generation batch")
    ap.add_argument("--gen-frac", type=float, default=0.5, help="generated windows per batch")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seq", type=int, default=256, help="window length")
    ap.add_argument("--pool", type=int, default=4096, help="natural windows")
    ap.add_argument("--prompt-lengths", default="24,48,72", help="prompt lengths P")
    ap.add_argument("--chunk", type=int, default=256, help="windows per target pass")
    ap.add_argument("--batch", type=int, default=64, help="windows per step")
    ap.add_argument("--anchors", type=int, default=64, help="anchors per window and step")
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--eval-seqs", type=int, default=96)
    ap.add_argument("--eval-seq", type=int, default=224)
    ap.add_argument("--eval-prompt", type=int, default=48)
    ap.add_argument("--init-support", type=Path, help="start from this support GGUF")
    ap.add_argument(
        "--gen-file",
        type=Path,
        help="generated windows made beforehand (gen_windows.py: ds4rt's greedy continuations)",
    )
    ap.add_argument("--no-init-from-target", action="store_true")
    args = ap.parse_args(argv)
    deadline = common.Deadline(args.budget_s)
    args.out.mkdir(parents=True, exist_ok=True)
    log = common.Log(args.out / "train.log")
    dev, mm = common.setup(args.device, args.seed)
    sh, tgt, vocab = load_target(args.target, dev, mm, max(4096, args.seq + 8))
    data_vocab = json.loads((args.data / "vocab.json").read_text(encoding="utf-8"))
    if vocab["tokens"] != data_vocab["tokens"]:
        raise SystemExit("the target's vocabulary differs from the data's")
    ids = data_vocab["ids"]
    bos, eos, noise = ids["bos"], ids["eos"], ids["noise"]
    log(
        "start",
        command=common.argv_line(),
        device=str(dev),
        target=str(args.target),
        shape=json.loads(sh.to_json()),
    )
    rng = np.random.default_rng(args.seed)
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    stream = common.load_stream(args.data / args.stream)
    val = common.load_stream(args.data / "val.u16")
    layers = sh.target_layer_ids
    if args.eval_prompt + sh.block_size + 2 > args.eval_seq:
        raise SystemExit("--eval-seq must exceed --eval-prompt by more than the block size + 1")

    # 1. held-out continuations (exact, token by token), then the training pool
    t0 = time.time()
    vp = np.stack(doc_prompts(val, bos, eos, args.eval_prompt, args.eval_seqs, rng))
    ev = greedy_continue(tgt, torch.as_tensor(vp, device=dev), args.eval_seq, args.chunk)
    ev_P = torch.full((len(ev),), vp.shape[1], device=dev)
    ev_pool = build_pool(tgt, ev, ev_P, eos, args.chunk, layers)
    log("eval set", sequences=len(ev), seconds=round(time.time() - t0, 1))
    plens = [int(v) for v in args.prompt_lengths.split(",")]
    if max(plens) + sh.block_size + 2 > args.seq:
        raise SystemExit("--seq must exceed the longest prompt by more than the block size + 1")
    gen_until = args.gen_share * args.budget_s
    t0 = time.time()
    parts, k = [], 0
    if args.gen_file:  # windows generated beforehand: only their teacher-forced pass here
        f = np.load(args.gen_file)
        gx, gP = f["x"].astype(np.int64), f["P"].astype(np.int64)
        if gx.shape[1] != args.seq:
            raise SystemExit(f"{args.gen_file}: windows of {gx.shape[1]} tokens, not {args.seq}")
        for i in range(0, len(gx), args.chunk):
            xb = torch.as_tensor(gx[i : i + args.chunk], device=dev)
            Pb = torch.as_tensor(gP[i : i + args.chunk], device=dev)
            parts.append(build_pool(tgt, xb, Pb, eos, args.chunk, layers))
        secs = round(time.time() - t0, 1)
        log("generated", file=str(args.gen_file), sequences=len(gx), seconds=secs)
    while deadline.elapsed() < gen_until or not parts:
        P = plens[k % len(plens)]
        pr = np.stack(doc_prompts(stream, bos, eos, P, args.gen_batch, rng))
        pr = torch.as_tensor(pr, device=dev)
        g = greedy_continue(tgt, pr, args.seq, args.chunk)
        parts.append(
            build_pool(tgt, g, torch.full((len(g),), P, device=dev), eos, args.chunk, layers)
        )
        k += 1
        log("generated", batch=k, prompt=P, sequences=len(g), seconds=round(time.time() - t0, 1))
    n_gen = sum(len(p.x) for p in parts)
    t1 = time.time()
    x0 = torch.as_tensor(pool_windows(stream, bos, args.seq, args.pool, rng), device=dev)
    P0 = torch.as_tensor(rng.choice(plens, size=len(x0)), device=dev)
    if len(x0):
        parts.append(build_pool(tgt, x0, P0, eos, args.chunk, layers))
    pool = concat_pools(parts)
    del parts
    M = len(pool.x)
    lo, hi = anchor_range(pool, torch.arange(M, device=dev), sh.block_size)
    span = (hi - lo + 1).clamp_min(0)
    jpos = torch.arange(1, args.seq, device=dev)[None]
    on_chain = (pool.x[:, 1:] == pool.t[:, :-1]) & (jpos >= pool.P[:, None])
    n_cont = (args.seq - pool.P).clamp_min(1)
    pool_stats = {
        "generated_windows": n_gen,
        "natural_windows": M - n_gen,
        "seq": args.seq,
        "anchors_generated": int(span[:n_gen].sum()),
        "anchors_natural": int(span[n_gen:].sum()),
        # share of continuation tokens that are the target's argmax after their prefix
        "on_chain_generated": float(on_chain[:n_gen].sum() / n_cont[:n_gen].sum()),
        "on_chain_natural": float(on_chain[n_gen:].sum() / n_cont[n_gen:].sum().clamp_min(1)),
        "generation_seconds": round(t1 - t0, 1),
        "natural_seconds": round(time.time() - t1, 1),
    }
    log("pool", **pool_stats)
    n_from_gen = min(args.batch, round(args.batch * args.gen_frac)) if n_gen < M else args.batch

    # 2. the drafter
    dr = Drafter(sh, tgt, noise, device=dev)
    dr.init_weights(args.seed, from_target=not args.no_init_from_target)
    if args.init_support:
        dr.load_numpy(gguf_io.read_tensors(args.init_support)[1])
    before = acceptance(dr, ev_pool, sh, eos, 16)
    log("eval", step=0, **before)
    opt = common.make_optimizer(dr, args.lr, 0.0)
    bias_names = {s: f"mtp.{s}.exp_probs_b.bias" for s in range(sh.n_stages)}
    step, total, t_train = 0, 10**9, 0.0
    while deadline.left() > args.reserve_s and step < total:
        t0 = time.time()
        for g in opt.param_groups:
            g["lr"] = common.lr_at(step, total if total < 10**9 else 10**4, args.lr, args.warmup)
        rows = np.concatenate(
            [rng.integers(0, n_gen, n_from_gen), rng.integers(n_gen, M, args.batch - n_from_gen)]
        )
        rows = torch.as_tensor(rows, device=dev)
        anchors, in_range = sample_anchors(pool, rows, args.anchors, sh.block_size, gen)
        loads = {}
        h, U, y, prev, _, tdist, valid = pool_terms(
            dr, pool, rows, anchors, in_range, sh, eos, loads
        )
        loss, parts = losses(dr, h, U, y, prev, tdist, valid)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(dr.parameters(), 1.0)
        opt.step()
        update_router_bias(dr, loads, bias_names, BIAS_RATE)
        step += 1
        dt = time.time() - t0
        if step > 2:
            t_train += dt
        if step == 8:
            per = t_train / 6
            total = step + int(max(0.0, deadline.left() - args.reserve_s) / per)
            log("schedule", total_steps=total, step_s=round(per, 4))
        if step % 50 == 0 or step == 1:
            log(
                "step",
                step=step,
                loss=round(float(loss.detach()), 4),
                **{k: round(float(v.detach()), 4) for k, v in parts.items()},
                valid_slots=round(float(valid.float().mean()), 3),
                grad_norm=round(float(gn), 3),
                dt=round(dt, 3),
            )
        if not math.isfinite(float(loss.detach())):
            raise SystemExit(f"non-finite loss at step {step}")
    after = acceptance(dr, ev_pool, sh, eos, 16)
    log("eval", step=step, **after)
    common.save_checkpoint(args.out / "drafter.pt", dr, {"step": step, "shape": sh.to_json()})
    out = args.out / "support.gguf"
    gguf_io.write_support(out, sh, dr.numpy_weights(), noise, shipped.SUPPORT_NAME)
    metrics = {
        "command": common.argv_line(),
        "seed": args.seed,
        "device": str(dev),
        "steps": step,
        "batch": args.batch,
        "anchors_per_sequence": args.anchors,
        "pool": pool_stats,
        "eval_sequences": len(ev),
        "eval_before": before,
        "eval": after,
        "loss_weights": LOSS_WEIGHTS,
        "lr": args.lr,
        "seconds": round(deadline.elapsed(), 1),
        "gguf_bytes": out.stat().st_size,
    }
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    log("done", **{k: v for k, v in metrics.items() if k != "eval_before"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
