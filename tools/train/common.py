"""Shared pieces of the training scripts: device and precision, the wall-clock budget, data
windows, the learning-rate schedule, logging and checkpoints."""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch


def setup(device: str, seed: int):
    """(torch.device, matmul dtype). bf16 products with TF32 on CUDA; float32 on the CPU."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        return dev, torch.bfloat16
    # one thread unless asked: OpenMP's spinning workers crawl on a shared, loaded machine
    torch.set_num_threads(int(os.environ.get("TRAIN_CPU_THREADS", "1")))
    return dev, torch.float32


class Deadline:
    """The wall-clock budget of a script, counted from its start."""

    def __init__(self, budget_s: float):
        self.t0 = time.time()
        self.budget = float(budget_s)

    def elapsed(self) -> float:
        return time.time() - self.t0

    def left(self) -> float:
        return self.budget - self.elapsed()


class Log:
    """JSON lines to stdout and to a file."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "a", encoding="utf-8")
        self.t0 = time.time()

    def __call__(self, event: str, **kw):
        rec = {"t": round(time.time() - self.t0, 2), "event": event, **kw}
        line = json.dumps(rec)
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def load_stream(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype=np.uint16)


class Windows:
    """Random training windows of n+1 tokens from a token stream; a share of them starts at a
    BOS so that position 0 holds a document start as it does at inference."""

    def __init__(self, stream: np.ndarray, bos: int, seed: int, bos_share: float = 0.5):
        self.s = stream
        self.starts = np.flatnonzero(stream == bos)
        self.rng = np.random.default_rng(seed)
        self.bos_share = bos_share

    def batch(self, b: int, n: int) -> np.ndarray:
        hi = len(self.s) - n - 1
        k = int(round(b * self.bos_share))
        st = self.starts[self.starts < hi]
        a = self.rng.choice(st, size=k) if k and len(st) else np.zeros(0, dtype=np.int64)
        r = self.rng.integers(0, hi, size=b - len(a))
        offs = np.concatenate([a, r]).astype(np.int64)
        idx = offs[:, None] + np.arange(n + 1)[None, :]
        return self.s[idx].astype(np.int64)


def fixed_windows(stream: np.ndarray, n: int, count: int) -> np.ndarray:
    """Evenly spaced, non-overlapping windows of n+1 tokens (the held-out evaluation set)."""
    count = min(count, len(stream) // (n + 1))
    offs = np.linspace(0, len(stream) - n - 1, count).astype(np.int64)
    return stream[offs[:, None] + np.arange(n + 1)[None, :]].astype(np.int64)


def lr_at(step: int, total: int, peak: float, warmup: int, floor: float = 0.1) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


def make_optimizer(module, lr: float, wd: float):
    decay, keep = [], []
    for name, p in module.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.dim() >= 2 and "token_embd" not in name else keep).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": wd}, {"params": keep, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )


def save_checkpoint(path: Path, module, extra: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    torch.save({"state": state, **extra}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path, module) -> dict:
    ck = torch.load(path, map_location="cpu", weights_only=False)
    module.load_state_dict(ck["state"])
    return ck


def argv_line() -> str:
    return " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
