#!/usr/bin/env python3
"""Step 2: train the target model under a wall-clock budget, then export it.

    python tools/train/train_target.py --data .traindata --out .trainrun/target \\
        [--budget-s 450] [--device cuda] [--seed 0] [--batch 128] [--seq 512] [--lr 2e-3]

Next-token cross entropy on random windows of the training stream, with ds4rt's official
numerics simulated (straight-through FP8 KV / FP4 indexer rounding), the indexer's auxiliary KL
loss and auxiliary-loss-free router balancing (model.py). The schedule is fixed after a short
calibration: the first steps are timed and the number of steps is set so that training ends
with enough of the budget left to evaluate and export (`total_steps` is logged; pass
`--steps N` to repeat a run with the same schedule). Writes to --out:

    target.pt        checkpoint (weights, step, shape, losses)
    target.gguf      the exported model (tools/train/gguf_io.py, Q8_0 + F16 + F32)
    metrics.json     held-out loss / perplexity, throughput, schedule, command
    train.log        JSON lines
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import gguf_io  # noqa: E402
import shipped  # noqa: E402

from model import Target, update_router_bias  # noqa: E402

INDEXER_WEIGHT = 0.1
BIAS_RATE = 1e-3
CALIBRATION_STEPS = 8


def evaluate(model, windows, batch: int, dev) -> float:
    """Mean next-token cross entropy (nats) over the held-out windows."""
    model.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(windows), batch):
            x = torch.as_tensor(windows[i : i + batch], device=dev)
            logits = model(x[:, :-1])
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum"
            )
            tot += float(loss)
            n += x[:, 1:].numel()
    model.train()
    return tot / max(1, n)


def forward_backward(model, opt, x, V: int):
    """One training step's forward and backward: (next-token CE, indexer KL, aux terms)."""
    aux = {}
    logits = model(x[:, :-1], aux=aux)
    ce = F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))
    kl = torch.stack(aux["indexer_kl"]).mean() if aux.get("indexer_kl") else ce * 0
    opt.zero_grad(set_to_none=True)
    (ce + INDEXER_WEIGHT * kl).backward()
    return ce, kl, aux


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(".traindata"))
    ap.add_argument("--out", type=Path, default=Path(".trainrun/target"))
    ap.add_argument("--budget-s", type=float, default=450.0)
    ap.add_argument("--reserve-s", type=float, default=45.0, help="kept for eval + export")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--steps", type=int, default=0, help="fixed number of steps (0: from budget)")
    ap.add_argument("--eval-windows", type=int, default=256)
    ap.add_argument("--checkpoint-every-s", type=float, default=120.0)
    ap.add_argument("--resume", type=Path, help="start from this checkpoint's weights")
    args = ap.parse_args(argv)
    deadline = common.Deadline(args.budget_s)
    args.out.mkdir(parents=True, exist_ok=True)
    log = common.Log(args.out / "train.log")
    dev, mm = common.setup(args.device, args.seed)
    sh = shipped.SHAPE
    vocab = json.loads((args.data / "vocab.json").read_text(encoding="utf-8"))
    if len(vocab["tokens"]) != sh.V:
        raise SystemExit(f"data vocabulary has {len(vocab['tokens'])} ids, the shape {sh.V}")
    train = common.load_stream(args.data / "train.u16")
    val = common.load_stream(args.data / "val.u16")
    windows = common.Windows(train, vocab["bos_id"], args.seed)
    val_w = common.fixed_windows(val, args.seq, args.eval_windows)
    log(
        "start",
        command=common.argv_line(),
        device=str(dev),
        shape=json.loads(sh.to_json()),
        train_tokens=int(train.size),
        val_tokens=int(val.size),
        torch=torch.__version__,
    )

    model = Target(sh, max_pos=max(4096, args.seq + 1), device=dev, mm_dtype=mm)
    model.init_weights(args.seed)
    if args.resume:
        common.load_checkpoint(args.resume, model)
        log("resumed", path=str(args.resume))
    n_params = sum(p.numel() for p in model.parameters())
    opt = common.make_optimizer(model, args.lr, args.wd)
    bias_names = {il: f"blk.{il}.exp_probs_b.bias" for il in range(sh.n_hash, sh.L)}
    total = args.steps or 10**9
    step, t_train, last_ck = 0, 0.0, time.time()
    losses = []
    while True:
        if step >= total or (not args.steps and deadline.left() < args.reserve_s):
            break
        t0 = time.time()
        for g in opt.param_groups:
            g["lr"] = common.lr_at(step, total if total < 10**9 else 10**4, args.lr, args.warmup)
        x = torch.as_tensor(windows.batch(args.batch, args.seq), device=dev)
        ce, kl, aux = forward_backward(model, opt, x, sh.V)
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        update_router_bias(model, aux["loads"], bias_names, BIAS_RATE)
        ce_v = float(ce.detach())
        if not math.isfinite(ce_v):
            raise SystemExit(f"non-finite loss at step {step}")
        dt = time.time() - t0
        step += 1
        if step > 2:
            t_train += dt
        losses.append(ce_v)
        if step == CALIBRATION_STEPS and not args.steps:
            per = t_train / (step - 2)
            total = step + int(max(0.0, deadline.left() - args.reserve_s) / per)
            log(
                "schedule",
                total_steps=total,
                step_s=round(per, 4),
                tokens_per_s=round(args.batch * args.seq / per),
            )
        if step % 25 == 0 or step == 1:
            log(
                "step",
                step=step,
                ce=round(ce_v, 4),
                indexer_kl=round(float(kl.detach()), 4),
                grad_norm=round(float(gn), 3),
                lr=opt.param_groups[0]["lr"],
                dt=round(dt, 3),
            )
        if time.time() - last_ck > args.checkpoint_every_s:
            common.save_checkpoint(
                args.out / "target.pt", model, {"step": step, "shape": sh.to_json()}
            )
            last_ck = time.time()
            log("checkpoint", step=step)
    val_ce = evaluate(model, val_w, max(1, args.batch // 2), dev)
    common.save_checkpoint(
        args.out / "target.pt", model, {"step": step, "shape": sh.to_json(), "val_ce": val_ce}
    )
    gguf_path = args.out / "target.gguf"
    gguf_io.write_target(gguf_path, sh, model.numpy_weights(), vocab, shipped.NAME)
    metrics = {
        "command": common.argv_line(),
        "seed": args.seed,
        "device": str(dev),
        "steps": step,
        "total_steps": total,
        "batch": args.batch,
        "seq": args.seq,
        "tokens_seen": step * args.batch * args.seq,
        "epochs": step * args.batch * args.seq / max(1, train.size),
        "params": n_params,
        "train_ce_last100": sum(losses[-100:]) / max(1, len(losses[-100:])),
        "val_ce": val_ce,
        "val_ppl": math.exp(val_ce),
        "val_windows": len(val_w),
        "seconds": round(deadline.elapsed(), 1),
        "gguf_bytes": gguf_path.stat().st_size,
    }
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    log("done", **metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
