#!/usr/bin/env python3
"""Step 5: the numbers of docs/MODELS.md, measured with ds4rt on the CPU.

    python tools/train/eval_ds4rt.py [--target T --support S] [--data .traindata] \\
        [--threads 2] [--tokens 96] [--repeats 3] [--skip ...] > docs/bench/default_model.json

Sections (JSON; each can be skipped with --skip NAME):

* tokenizer   ds4rt's C tokenizer vs `tokenizers` loading the vocabulary's tokenizer.json, on
              the held-out files (raw and chat-rendered): identical ids, count of files
* perplexity  held-out perplexity from ds4rt's teacher-forced logits (windows of val.u16)
* agreement   ds4rt vs the PyTorch model on the same weights (tools/train/agree.py): logits
              error per row and greedy agreement on held-out prompts
* acceptance  DSpark on the held-out prompts (prompts.json), greedy, block 5, every cycle
              drafting a full block (scheduler "always", threshold 0) and with the defaults:
              committed tokens per verified cycle, per-position acceptance
* speed       plain vs DSpark-adaptive (defaults) vs DSpark-always: the same greedy
              generations on --threads threads (outputs checked identical) in --repeats rounds
              that alternate the three; median time and the median of each round's speed-up
* samples     greedy continuations of a few code prompts, as text
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ds4rt  # noqa: E402
from ds4rt import data  # noqa: E402
from ds4rt.model import BACKENDS  # noqa: E402

SAMPLE_PROMPTS = (
    "def fibonacci(n):",
    "def is_prime(n):",
    "class Stack:",
    "def read_lines(path):",
    "def parse_args(argv=None):",
    "def __repr__(self):",
)
SECTIONS = ("tokenizer", "perplexity", "agreement", "acceptance", "speed", "samples")


def chat(model, text):
    return model.tokenizer.encode_chat([{"role": "user", "content": text}])


def section_tokenizer(model, args):
    import bpe
    import corpus

    hf = bpe.load(json.loads((args.data / "tokenizer.json").read_text(encoding="utf-8")))
    docs = [d for d in corpus.collect(corpus.default_doc_root()) if d.heldout]
    bad = []
    n_tok = 0
    for d in docs:
        want = hf.encode(d.text, add_special_tokens=False).ids
        got = model.tokenize(d.text)
        n_tok += len(want)
        if got != want:
            bad.append(d.rel)
    return {"files": len(docs), "tokens": n_tok, "mismatched_files": bad, "identical": not bad}


def section_perplexity(model, args):
    val = np.fromfile(args.data / "val.u16", dtype=np.uint16)
    n, count = 256, 24
    offs = np.linspace(0, len(val) - n - 1, count).astype(np.int64)
    tot, k = 0.0, 0
    for o in offs:
        w = [int(t) for t in val[o : o + n + 1]]
        z = model.session(n_ctx=n + 8).logits(w[:-1]).astype(np.float64)
        z -= z.max(-1, keepdims=True)
        lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        tot -= lp[np.arange(n), w[1:]].sum()
        k += n
    ce = tot / k
    return {"windows": count, "window_tokens": n, "ce_nats": ce, "ppl": float(np.exp(ce))}


def section_agreement(model, args, prompts):
    import agree
    import torch

    torch.set_num_threads(1)
    m = agree.torch_target(args.target)
    rows = []
    checks = []
    for p in prompts[: args.agree_prompts]:
        g = agree.greedy_check(model, m, p["ids"], 64, args.tie)
        seq = p["ids"] + g["tokens"]
        e = agree.row_errors(
            model.session(n_ctx=len(seq) + 8).logits(seq), agree.torch_logits(m, seq)
        )
        rows.append(e)
        checks.append(g)
    e = np.concatenate(rows)
    return {
        "prompts": len(checks),
        "rel_err_median": float(np.median(e)),
        "rel_err_p99": float(np.quantile(e, 0.99)),
        "rel_err_max": float(e.max()),
        "greedy_64_identical": sum(not c["disagree"] for c in checks),
        "greedy_disagreements_all_within_rounding": all(c["ok"] for c in checks),
        "disagree_gaps": [c["disagree_gaps"] for c in checks if c["disagree"]],
        "disagree_slack": [c["disagree_slack"] for c in checks if c["disagree"]],
        "tie_threshold": args.tie,
    }


def section_acceptance(args, prompts):
    import accept_ds4rt

    return {
        "prompts": len(prompts),
        "max_tokens": args.tokens,
        **accept_ds4rt.measure(
            str(args.target),
            str(args.support),
            [p["ids"] for p in prompts],
            args.tokens,
            workers=args.workers,
        ),
    }


def section_speed(args, prompts):
    model = ds4rt.Model(str(args.target), n_threads=args.threads, backend=args.backend)
    dspark = ds4rt.DSpark(model, str(args.support))
    sel = prompts[: args.speed_prompts]
    configs = {
        "plain": {},
        "dspark-adaptive": {"dspark": dspark},
        "dspark-always": {"dspark": dspark, "scheduler": "always", "confidence_threshold": 0.0},
    }
    # rounds alternate the configurations (rotated each round) so that a machine whose speed
    # drifts, as a shared VM's does by tens of percent, slows all of them alike; the speed-up is
    # the median of each round's own ratio to plain decoding
    names = list(configs)
    times = {n: [] for n in names}
    outs = {}
    for r in range(args.repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.perf_counter()
            got = []
            for p in sel:
                s = model.session(n_ctx=len(p["ids"]) + args.tokens + 16, max_batch=32)
                got.append(s.generate(p["ids"], max_tokens=args.tokens, **configs[name]).ids)
            times[name].append(time.perf_counter() - t0)
            outs[name] = got
    res = {}
    for name in names:
        if outs[name] != outs["plain"]:
            raise SystemExit(f"{name}: greedy output differs from plain decoding")
        n = sum(len(o) for o in outs[name])
        med = statistics.median(times[name])
        ratios = [b / t for b, t in zip(times["plain"], times[name], strict=True)]
        res[name] = {
            "median_s": med,
            "tokens": n,
            "tokens_per_s": n / med,
            "speedup": statistics.median(ratios),
            "speedup_per_round": ratios,
        }
    return {
        "backend": model.info["backend"],
        "threads": args.threads,
        "prompts": len(sel),
        "repeats": args.repeats,
        **res,
    }


def section_samples(model, dspark, args, prompts):
    out = []
    texts = list(SAMPLE_PROMPTS) + [p["text"] for p in prompts if p["kind"] == "chat"][:3]
    for t in texts:
        s = model.session(n_ctx=512, max_batch=32)
        g = s.generate(chat(model, t), max_tokens=args.tokens, dspark=dspark)
        out.append(
            {
                "prompt": t,
                "text": g.text,
                "tokens": len(g.ids),
                "stats": s.spec_stats_line().split(" time_ms")[0],
            }
        )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--target", type=Path, default=Path(data.default_target()))
    ap.add_argument("--support", type=Path, default=Path(data.default_support()))
    ap.add_argument("--data", type=Path, default=Path(".traindata"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--backend", default="cpu", choices=BACKENDS, help="where the speed section runs"
    )
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--speed-prompts", type=int, default=12)
    ap.add_argument("--agree-prompts", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1, help="processes (acceptance)")
    ap.add_argument("--tie", type=float, default=0.1, help="near-tie logit margin (agreement)")
    ap.add_argument("--skip", nargs="*", default=[], choices=SECTIONS)
    args = ap.parse_args(argv)
    model = ds4rt.Model(str(args.target), n_threads=args.threads)
    dspark = ds4rt.DSpark(model, str(args.support))
    prompts = json.loads((args.data / "prompts.json").read_text(encoding="utf-8"))
    doc = {
        "command": " ".join(["tools/train/eval_ds4rt.py"] + (argv or sys.argv[1:])),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cpus_available": len(os.sched_getaffinity(0)),
        },
        "build": ds4rt.build_info(),
        "target": str(args.target),
        "support": str(args.support),
    }
    t0 = time.time()
    for name in SECTIONS:
        if name in args.skip:
            continue
        if name == "tokenizer":
            doc[name] = section_tokenizer(model, args)
        elif name == "perplexity":
            doc[name] = section_perplexity(model, args)
        elif name == "agreement":
            doc[name] = section_agreement(model, args, prompts)
        elif name == "acceptance":
            doc[name] = section_acceptance(args, prompts)
        elif name == "speed":
            doc[name] = section_speed(args, prompts)
        elif name == "samples":
            doc[name] = section_samples(model, dspark, args, prompts)
        print(f"{name} done at {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
