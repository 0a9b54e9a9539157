#!/usr/bin/env python3
"""Cost of decode, verify(n) and a DSpark proposal in ds4rt for candidate model shapes.

    python tools/train/bench_shapes.py [--threads 2] [--repeats 30] [--only NAME ...]

Random weights (tools/tinymodel), so only the timings mean anything. For each shape it prints
JSON: the median time of one decoded token, of verify passes of n = 2..7 tokens (relative to
one decode), of one DSpark proposal (block 5, threshold 0), file sizes, and the speed-up that
tau committed tokens per verified cycle would give: tau * t1 / (t_propose + t_verify(6)).
Used to choose the shipped model's shape (docs/MODELS.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gguf import GGMLQuantizationType as QT  # noqa: E402
from tinymodel import configs, layout, tokenizer, write  # noqa: E402

import ds4rt  # noqa: E402


def dtypes(dense, expert, head=QT.Q8_0, embd=QT.F16, small=QT.F16):
    return configs.Dtypes(
        token_embd=embd,
        output=head,
        hc_fn=small,
        dense=dense,
        router=small,
        compressor=small,
        exp_gate_up=expert,
        exp_down=expert,
        sup_dense=dense,
        sup_hc_fn=small,
        sup_router=small,
        sup_head=head,
    )


def shape(
    name,
    L,
    D,
    E,
    k,
    F,
    H=4,
    d_h=128,
    r_rot=64,
    Rq=None,
    G=2,
    Ro=None,
    V=4096,
    W=128,
    dense=QT.Q8_0,
    expert=QT.Q8_0,
    R=64,
    Ki=32,
    ratios=None,
):
    if ratios is None:
        ratios = (0,) + tuple(4 if i % 2 else 128 for i in range(1, L))
    return dataclasses.replace(
        configs.QUANT,
        name=name,
        L=L,
        D=D,
        V=V,
        H=H,
        d_h=d_h,
        r_rot=r_rot,
        Rq=Rq or D // 2,
        G=G,
        Ro=Ro or D // 2,
        E=E,
        k=k,
        F=F,
        n_hash=1,
        W=W,
        Hi=4,
        d_i=64,
        K_i=Ki,
        ratios=tuple(ratios),
        dtypes=dtypes(dense, expert),
        markov_rank=R,
        residual_scale=0.1,
    )


SHAPES = [
    shape("L8-D256-E4k2", 8, 256, 4, 2, 512),
    shape("L12-D256-E4k2", 12, 256, 4, 2, 512),
    shape("L12-D384-E4k2", 12, 384, 4, 2, 768),
    shape("L16-D256-E4k2", 16, 256, 4, 2, 512),
    shape("L12-D512-E4k2", 12, 512, 4, 2, 1024),
    shape("L12-D256-E8k2", 12, 256, 8, 2, 512),
    shape("L12-D256-E4k2-f16", 12, 256, 4, 2, 512, dense=QT.F16, expert=QT.F16),
    shape("L12-D256-E4k2-f32", 12, 256, 4, 2, 512, dense=QT.F32, expert=QT.F32),
]


def tiny_vocab(V):
    return tokenizer.tiny_tokenizer(V) if V <= 1024 else None


def make(cfg, out):
    cfg.check()
    tok = tokenizer.tiny_tokenizer(512)
    # pad the tiny vocabulary with unused byte-free tokens up to V (timing only)
    tokens = list(tok.tokens) + [f"<pad{i}>" for i in range(cfg.V - len(tok.tokens))]
    types = list(tok.types) + [4] * (cfg.V - len(tok.types))
    tok = tokenizer.Tokenizer(tokens, types, list(tok.merges), tok.bos_id, tok.eos_id, tok.pad_id)
    t = os.path.join(out, cfg.name + "-t.gguf")
    s = os.path.join(out, cfg.name + "-s.gguf")
    write.write_gguf(
        t, "deepseek4", write.target_metadata(cfg, tok, cfg.name), layout.target_tensors(cfg), 0
    )
    write.write_gguf(
        s,
        "deepseek4-dspark",
        write.support_metadata(cfg, write.noise_token_id(tok), cfg.name),
        layout.support_tensors(cfg),
        1,
    )
    return t, s


CLOCK = time.perf_counter


def med(f, repeats):
    ts = []
    for _ in range(repeats):
        t0 = CLOCK()
        f()
        ts.append(CLOCK() - t0)
    return statistics.median(ts)


def bench(cfg, out, threads, repeats):
    tpath, spath = make(cfg, out)
    m = ds4rt.Model(tpath, n_threads=threads)
    d = ds4rt.DSpark(m, spath)
    s = m.session(n_ctx=1024, max_batch=32)
    d.attach(s)
    prompt = [0] + [5 + (i * 37) % 400 for i in range(95)]
    s.eval(prompt)
    base = s.position

    def verify(n):
        s.eval([7 + i for i in range(n)])
        s.truncate(base)

    for n in (1, 6):
        verify(n)
    res = {
        "shape": cfg.name,
        "L": cfg.L,
        "D": cfg.D,
        "E": cfg.E,
        "k": cfg.k,
        "F": cfg.F,
        "V": cfg.V,
        "dense": cfg.dtypes.dense.name,
        "experts": cfg.dtypes.exp_gate_up.name,
        "target_MB": os.path.getsize(tpath) / 1e6,
        "support_MB": os.path.getsize(spath) / 1e6,
    }
    t1 = med(lambda: verify(1), repeats)
    res["decode_ms"] = t1 * 1e3
    for n in (2, 3, 4, 5, 6, 7):
        res[f"verify{n}_x"] = med(lambda n=n: verify(n), repeats) / t1
    tp = med(lambda: d.propose(s, 9, 5, 0.0), repeats)
    res["propose_x"] = tp / t1
    for tau in (2.5, 3.0, 3.5):
        res[f"speedup_tau{tau}"] = tau / (res["propose_x"] + res["verify6_x"])
    os.remove(tpath)
    os.remove(spath)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--only", nargs="*")
    ap.add_argument(
        "--cpu-time",
        action="store_true",
        help="time with the process CPU clock (robust to a shared machine; use with --threads 1)",
    )
    ap.add_argument("--shape", action="append", default=[], help="extra shape: k=v,... (shape())")
    args = ap.parse_args(argv)
    global CLOCK
    if args.cpu_time:
        CLOCK = time.process_time
    if args.shape and not args.only:
        SHAPES.clear()  # only the shapes given on the command line
    for spec in args.shape:
        kw = dict(kv.split("=") for kv in spec.split(","))
        name = kw.pop("name")
        conv = {
            k: (getattr(QT, v.upper()) if k in ("dense", "expert") else int(v))
            for k, v in kw.items()
        }
        SHAPES.append(shape(name, **conv))
    with tempfile.TemporaryDirectory() as out:
        for cfg in SHAPES:
            if args.only and cfg.name not in args.only:
                continue
            print(json.dumps(bench(cfg, out, args.threads, args.repeats)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
