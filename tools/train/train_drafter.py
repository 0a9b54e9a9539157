#!/usr/bin/env python3
"""Step 3: train the DSpark support model on the frozen target's own greedy continuations.

    python tools/train/train_drafter.py --target target.gguf --data .traindata \\
        --out .trainrun/drafter [--budget-s 450] [--gen-share 0.35] [--device cuda] [--seed 0]

1. The target is read from the exported GGUF (dequantised: the drafter learns the weights that
   ship) and frozen, with ds4rt's official numerics.
2. Generation (`--gen-share` of the budget): prompts are the first P tokens (P in 24/48/72) of
   documents of the training stream that start at a BOS (raw files and chat samples in their
   natural mix); the target continues each greedily to T tokens. On these sequences the
   target's argmax at every generated position is the next token, so a drafted block that
   matches the sequence is exactly what greedy verification would accept.
3. Training (DeepSeek's recipe, docs/MODELS.md): for random anchors p in the generated part the
   drafter sees the target's captures of positions <= p and the anchor token at p+1; slot i is
   trained towards the token at p+2+i. Loss per slot, weighted by exp(-i/4): CE of the Markov
   corrected logits (teacher-forced predecessors), total variation to the target's distribution
   at that position, and BCE of the confidence logit against "slot i is accepted given slots < i
   were" (greedy acceptance: the corrected argmax equals the target's token).
4. Evaluation on continuations of held-out prompts (the validation stream): the per-position
   acceptance of greedy drafts and the mean committed tokens per verified cycle (accepted drafts
   plus the bonus) over all anchors; then the support GGUF is exported.

Writes support.gguf, drafter.pt, metrics.json and train.log to --out.
"""

from __future__ import annotations

import argparse
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


def doc_prompts(stream, bos, eos, P, count, rng):
    """count prompts of P tokens that start at a BOS and hold no EOS."""
    starts = np.flatnonzero(stream[: len(stream) - P] == bos)
    rng.shuffle(starts)
    out = []
    for s in starts:
        w = stream[s : s + P]
        if (w == eos).any():
            continue
        out.append(w.astype(np.int64))
        if len(out) == count:
            break
    return np.stack(out)


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


def valid_end(seqs, P, eos):
    """Per sequence: the first position after the prompt holding EOS (or T)."""
    T = seqs.shape[1]
    pos = torch.arange(T, device=seqs.device)
    is_eos = (seqs == eos) & (pos[None] >= P[:, None])
    return torch.where(is_eos.any(1), is_eos.float().argmax(1), torch.full_like(P, T))


def batch_terms(tgt, dr, seqs, P, end, anchors_per_seq, rng_t, sh, loads=None, every=False):
    """Anchors, drafter outputs and targets for one batch of generated sequences."""
    B, T = seqs.shape
    Bk = sh.block_size
    tl = sh.target_layer_ids
    with torch.no_grad():
        tlog, caps = tgt(seqs, capture_layers=tl)
    lo = P - 1  # the first anchor token is the first generated token
    hi = end - Bk - 1  # every label (p+2 .. p+Bk+1) at or before the EOS
    if every:
        A = int((hi - lo).max().clamp_min(1))
        anchors = lo[:, None] + torch.arange(A, device=seqs.device)[None]
    else:
        A = anchors_per_seq
        u = torch.rand(B, A, generator=rng_t, device=seqs.device)
        anchors = lo[:, None] + (u * (hi - lo).clamp_min(1)[:, None]).long()
    valid = anchors <= hi[:, None]
    anchors = torch.minimum(anchors, torch.full_like(anchors, T - Bk - 2))
    h, U = dr.blocks([caps[il] for il in tl], seqs, anchors, loads=loads)
    idx = anchors[..., None] + 2 + torch.arange(Bk, device=seqs.device)  # label positions
    y = seqs.gather(1, idx.reshape(B, -1)).view(B, A, Bk)
    anchor_tok = seqs.gather(1, anchors + 1)
    prev = torch.cat([anchor_tok[..., None], y[..., :-1]], -1)
    tpos = (idx - 1).reshape(B, -1)
    tdist = tlog.gather(1, tpos[..., None].expand(-1, -1, tlog.shape[-1])).view(B, A, Bk, -1)
    return h, U, y, prev, anchor_tok, tdist, valid


def losses(dr, h, U, y, prev, tdist, valid):
    Bk = y.shape[-1]
    cor, conf = dr.heads(h, U, prev)
    V = cor.shape[-1]
    w = torch.exp(-torch.arange(Bk, device=y.device, dtype=torch.float32) / 4.0)
    m = valid[..., None].float() * w
    denom = m.sum().clamp_min(1.0)
    ce = F.cross_entropy(cor.reshape(-1, V), y.reshape(-1), reduction="none").view_as(m)
    tv = 0.5 * (torch.softmax(cor, -1) - torch.softmax(tdist, -1)).abs().sum(-1)
    hit = (cor.detach().argmax(-1) == y).float()
    bce = F.binary_cross_entropy_with_logits(conf, hit, reduction="none")
    parts = {k: (v * m).sum() / denom for k, v in (("ce", ce), ("tv", tv), ("conf", bce))}
    total = sum(LOSS_WEIGHTS[k] * v for k, v in parts.items())
    return total, parts


@torch.no_grad()
def acceptance(tgt, dr, seqs, P, end, sh, chunk):
    """Greedy drafts at every anchor of the generated part: per-position conditional acceptance
    and the mean committed tokens per verified cycle (1 + accepted drafts)."""
    Bk = sh.block_size
    acc_len, proposed = [], torch.zeros(Bk)
    accepted = torch.zeros(Bk)
    conf_hits, conf_total = [], []
    for i in range(0, len(seqs), chunk):
        s, p, e = seqs[i : i + chunk], P[i : i + chunk], end[i : i + chunk]
        h, U, y, prev, anchor_tok, _, valid = batch_terms(tgt, dr, s, p, e, 0, None, sh, every=True)
        drafts, _, conf = dr.greedy(h, U, anchor_tok)
        ok = (drafts == y).long()
        run = ok.cumprod(-1)  # slot i accepted iff slots 0..i all match
        n_acc = run.sum(-1)[valid]
        acc_len.append(n_acc.cpu())
        reach = torch.cat([torch.ones_like(run[..., :1]), run[..., :-1]], -1)  # slots < i all ok
        proposed += (reach * valid[..., None]).sum((0, 1)).cpu()
        accepted += (run * valid[..., None]).sum((0, 1)).cpu()
        conf_hits.append(torch.sigmoid(conf)[valid][:, 0].cpu())
        conf_total.append(ok[valid][:, 0].cpu())
    n = torch.cat(acc_len).float()
    c0 = torch.cat(conf_hits)
    hit0 = torch.cat(conf_total).float()
    return {
        "anchors": int(n.numel()),
        "mean_accepted": float(n.mean()),
        "committed_per_cycle": 1.0 + float(n.mean()),
        "position_acceptance": (accepted / proposed.clamp_min(1)).tolist(),
        "accepted_length_hist": torch.bincount(n.long(), minlength=Bk + 1).tolist(),
        "confidence0_mean": float(c0.mean()),
        "slot0_hit_rate": float(hit0.mean()),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--target", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=Path(".traindata"))
    ap.add_argument("--stream", default="drafter.u16", help="prompt source file in --data")
    ap.add_argument("--out", type=Path, default=Path(".trainrun/drafter"))
    ap.add_argument("--budget-s", type=float, default=450.0)
    ap.add_argument("--reserve-s", type=float, default=50.0, help="kept for eval + export")
    ap.add_argument("--gen-share", type=float, default=0.35)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seq", type=int, default=224, help="length of a generated sequence")
    ap.add_argument("--prompt-lengths", default="24,48,72", help="prompt lengths, in turn")
    ap.add_argument("--gen-batch", type=int, default=384)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--anchors", type=int, default=48, help="anchors per sequence and step")
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--eval-seqs", type=int, default=96)
    ap.add_argument("--no-init-from-target", action="store_true")
    args = ap.parse_args(argv)
    deadline = common.Deadline(args.budget_s)
    args.out.mkdir(parents=True, exist_ok=True)
    log = common.Log(args.out / "train.log")
    dev, mm = common.setup(args.device, args.seed)
    sh, tgt, vocab = load_target(args.target, dev, mm, max(4096, args.seq + 8))
    ids = json.loads((args.data / "vocab.json").read_text(encoding="utf-8"))["ids"]
    if (
        vocab["tokens"]
        != json.loads((args.data / "vocab.json").read_text(encoding="utf-8"))["tokens"]
    ):
        raise SystemExit("the target's vocabulary differs from the data's")
    bos, eos, noise = ids["bos"], ids["eos"], ids["noise"]
    log(
        "start",
        command=common.argv_line(),
        device=str(dev),
        target=str(args.target),
        shape=json.loads(sh.to_json()),
    )
    rng = np.random.default_rng(args.seed)
    rng_t = torch.Generator(device=dev).manual_seed(args.seed)
    stream = common.load_stream(args.data / args.stream)
    val = common.load_stream(args.data / "val.u16")

    # 1. held-out continuations for evaluation, then training continuations until the share
    plens = [int(x) for x in args.prompt_lengths.split(",")]
    if max(plens) + sh.block_size + 2 > args.seq:
        raise SystemExit("--seq must exceed the longest prompt by more than the block size + 1")
    vp = doc_prompts(val, bos, eos, plens[len(plens) // 2], args.eval_seqs, rng)
    chunk = max(1, args.gen_batch)
    ev = greedy_continue(tgt, torch.as_tensor(vp, device=dev), args.seq, chunk)
    ev_P = torch.full((len(ev),), vp.shape[1], device=dev)
    ev_end = valid_end(ev, ev_P, eos)
    gen_until = args.gen_share * args.budget_s
    seqs, Ps = [], []
    k = 0
    while deadline.elapsed() < gen_until or not seqs:
        P = plens[k % len(plens)]
        pr = doc_prompts(stream, bos, eos, P, args.gen_batch, rng)
        t0 = time.time()
        seqs.append(greedy_continue(tgt, torch.as_tensor(pr, device=dev), args.seq, chunk))
        Ps.append(torch.full((len(pr),), P, device=dev))
        k += 1
        log("generated", batch=k, prompt=P, sequences=len(pr), seconds=round(time.time() - t0, 1))
    seqs, Ps = torch.cat(seqs), torch.cat(Ps)
    ends = valid_end(seqs, Ps, eos)
    gen_tokens = int((ends - Ps).clamp_min(0).sum())
    log("generation done", sequences=len(seqs), generated_tokens=gen_tokens)

    # 2. the drafter
    dr = Drafter(sh, tgt, noise, device=dev)
    dr.init_weights(args.seed, from_target=not args.no_init_from_target)
    before = acceptance(tgt, dr, ev, ev_P, ev_end, sh, 16)
    log("eval", step=0, **before)
    opt = common.make_optimizer(dr, args.lr, 0.0)
    bias_names = {s: f"mtp.{s}.exp_probs_b.bias" for s in range(sh.n_stages)}
    step, total, t_train = 0, 10**9, 0.0
    while deadline.left() > args.reserve_s and step < total:
        t0 = time.time()
        for g in opt.param_groups:
            g["lr"] = common.lr_at(step, total if total < 10**9 else 10**4, args.lr, args.warmup)
        pick = torch.as_tensor(rng.integers(0, len(seqs), args.batch), device=dev)
        loads = {}
        h, U, y, prev, _, tdist, valid = batch_terms(
            tgt, dr, seqs[pick], Ps[pick], ends[pick], args.anchors, rng_t, sh, loads
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
        if step % 25 == 0 or step == 1:
            log(
                "step",
                step=step,
                loss=round(float(loss.detach()), 4),
                **{k: round(float(v.detach()), 4) for k, v in parts.items()},
                grad_norm=round(float(gn), 3),
                dt=round(dt, 3),
            )
        if not math.isfinite(float(loss.detach())):
            raise SystemExit(f"non-finite loss at step {step}")
    after = acceptance(tgt, dr, ev, ev_P, ev_end, sh, 16)
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
        "generated_sequences": len(seqs),
        "generated_tokens": gen_tokens,
        "eval_before": before,
        "eval": after,
        "loss_weights": LOSS_WEIGHTS,
        "seconds": round(deadline.elapsed(), 1),
        "gguf_bytes": out.stat().st_size,
    }
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    log("done", **{k: v for k, v in metrics.items() if k != "eval_before"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
