#!/usr/bin/env python3
"""ds4rt against llama.cpp on the CPU (or the GPU), same GGUF files, same threads, runs
alternated: one JSON.

    python tools/bench_cpu_peer.py --llama-bench /path/to/llama-bench \\
        --files /tmp/big4.gguf,/tmp/big8.gguf --threads 16 --out cpu_peer.json [--budget-s 150]
    python tools/bench_cpu_peer.py --backend cuda --llama-bench /path/to/cuda/llama-bench \\
        --files /tmp/big4.gguf --gen 128 --prompts 2,4,6,8,16,512 --out gpu_peer.json

With `--backend cuda` (or hip) ds4rt runs on its GPU backend and llama.cpp with every layer
offloaded and flash attention as it chooses (`-ngl 99 -fa auto`, docs/PERFORMANCE.md); the
rest is the same.

For every (file, threads) pair and every round, both runtimes run once each in a fresh process
(the order alternates from round to round, so neither always gets the warmer caches) and
measure, after one untimed warm-up of every test, the same tests the way llama-bench does:
  * decode ("tg"): `--gen` single-token passes from an empty context, tokens/s;
  * passes of n tokens ("pp n") from an empty context for every n of `--prompts` (n = 2..16
    are the verify passes of speculative decoding, 128/512 prefill), tokens/s.
llama.cpp: `llama-bench -m FILE -t T -ngl 0 --repack 0 -r R -p ... -n GEN -o jsonl` (its
weight repacking aborts on quantised deepseek4 files, docs/PERFORMANCE.md). ds4rt: this script
re-run as a worker (`--worker`) on the installed package, `--backend`, "llama.cpp" numerics (no
FP8/FP4 round trips, so both runtimes do the same arithmetic), Session.eval of the same counts.
Peak RSS of each process comes from wait4(). Per round a test's value is the median of its R
repetitions; the report gives the median over rounds, the spread (min, max), the ratio
ds4rt / llama.cpp of tokens/s, and pass(n) / decode (the cost of a verify pass in decodes) for
both. A round is started only while the estimate of its duration fits `--budget-s`; at least
one round always runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time


def _worker(args: argparse.Namespace) -> None:
    import numpy as np

    import ds4rt

    t0 = time.perf_counter()
    m = ds4rt.Model(args.file, n_threads=args.threads, numerics=args.numerics, backend=args.backend)
    load_s = time.perf_counter() - t0
    prompts = [int(p) for p in args.prompts.split(",") if p]
    rng = np.random.default_rng(0)
    n_ctx = max(prompts + [args.gen]) + 8
    toks = rng.integers(3, m.n_vocab, n_ctx).tolist()

    def tg() -> float:
        s = m.session(n_ctx=n_ctx, max_batch=1)
        t = time.perf_counter()
        for i in range(args.gen):
            s.eval(toks[i : i + 1])
        dt = time.perf_counter() - t
        s.close()
        return dt

    def pp(n: int) -> float:
        s = m.session(n_ctx=n_ctx, max_batch=n)
        t = time.perf_counter()
        s.eval(toks[:n])
        dt = time.perf_counter() - t
        s.close()
        return dt

    tests: list[tuple[str, int, object]] = [("tg", args.gen, tg)]
    tests += [("pp", n, (lambda n=n: pp(n))) for n in prompts]
    out = {"load_s": load_s, "info": {k: str(v) for k, v in m._m.info().items()}, "tests": []}
    for kind, n, fn in tests:
        warm = fn()  # warm-up, as llama-bench does
        samples = [fn() for _ in range(args.reps)]
        out["tests"].append({"kind": kind, "n": n, "warmup_s": warm, "samples_s": samples})
    print(json.dumps(out))


def _run_rss(cmd: list[str], env: dict[str, str] | None = None) -> tuple[str, float, int]:
    """stdout, wall seconds and peak RSS (bytes) of a child, reaped here so that wait4() gives
    its own rusage; stderr goes to a file (llama-bench logs a lot there)."""
    t = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as ef:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=ef, text=True, env=env)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        ef.seek(0)
        err = ef.read()
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}): {err[-2000:]}")
    return out, wall, ru.ru_maxrss * 1024


def variants(a: argparse.Namespace) -> dict[str, dict[str, str]]:
    """--variant NAME:VAR=VALUE[,VAR=VALUE]: ds4rt runs again with these environment settings."""
    out = {}
    for v in a.variant:
        name, _, assigns = v.partition(":")
        out[f"ds4rt[{name}]"] = dict(x.split("=", 1) for x in assigns.split(",") if x)
    return out


def run_ds4rt(file: str, threads: int, a: argparse.Namespace, env: dict | None = None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--file", file]
    cmd += ["--threads", str(threads), "--gen", str(a.gen), "--prompts", a.prompts]
    cmd += ["--reps", str(a.reps), "--numerics", a.numerics, "--backend", a.backend]
    out, wall, rss = _run_rss(cmd, env=dict(os.environ, **env) if env else None)
    r = json.loads(out.strip().splitlines()[-1])
    res = {}
    for t in r["tests"]:
        med = statistics.median(t["samples_s"])
        res[f"{t['kind']}{t['n']}"] = t["n"] / med
    return {"tok_s": res, "wall_s": wall, "peak_rss": rss, "load_s": r["load_s"], "info": r["info"]}


def profile_ds4rt(file: str, threads: int, a: argparse.Namespace) -> dict:
    """One more ds4rt decode run with DS4RT_PROFILE on: matrix-product time per weight type
    per decoded token (src/quant/matmul_profile.h) and the rest of the pass."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "prof.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--file", file]
        cmd += ["--threads", str(threads), "--gen", str(a.gen), "--prompts", ""]
        cmd += ["--reps", str(a.reps), "--numerics", a.numerics, "--backend", a.backend]
        out, _, _ = _run_rss(cmd, env=dict(os.environ, DS4RT_PROFILE=path))
        with open(path) as fh:
            prof = json.load(fh)
    t = json.loads(out.strip().splitlines()[-1])["tests"][0]
    tokens = t["n"] * (1 + len(t["samples_s"]))
    wall_ms = (t["warmup_s"] + sum(t["samples_s"])) * 1e3 / tokens
    per = {
        name: {
            "ms": c["ns"] / 1e6 / tokens,
            "GB_s": c["weight_bytes"] / max(c["ns"], 1),
            "MB": c["weight_bytes"] / 1e6 / tokens,
            "products": c["products"] / tokens,
        }
        for name, c in prof["types"].items()
    }
    mm_ms = prof["total_ns"] / 1e6 / tokens
    return {
        "decode_ms_per_token": wall_ms,
        "matmul_ms_per_token": mm_ms,
        "act_convert_ms_per_token": prof["quant_ns"] / 1e6 / tokens,
        "other_ms_per_token": wall_ms - mm_ms,
        "dispatches_per_token": prof["batches"] / tokens,
        "by_weight_type": per,
    }


def run_llama(file: str, threads: int, a: argparse.Namespace) -> dict:
    cmd = [a.llama_bench, "-m", file, "-t", str(threads)]
    cmd += ["-ngl", "0", "--repack", "0"] if a.backend == "cpu" else ["-ngl", "99", "-fa", "auto"]
    cmd += ["-r", str(a.reps), "-n", str(a.gen), "-o", "jsonl"]
    cmd += ["-p", a.prompts] if a.prompts else ["-p", "0"]
    out, wall, rss = _run_rss(cmd)
    res = {}
    build = ""
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        build = j.get("build_commit", build)
        if j.get("n_gen", 0) > 0 and j.get("n_prompt", 0) == 0:
            key = f"tg{j['n_gen']}"
            n = j["n_gen"]
        elif j.get("n_prompt", 0) > 0 and j.get("n_gen", 0) == 0:
            key = f"pp{j['n_prompt']}"
            n = j["n_prompt"]
        else:
            continue
        samples = j.get("samples_ns") or [j["avg_ns"]]
        res[key] = n / (statistics.median(samples) * 1e-9)
    return {"tok_s": res, "wall_s": wall, "peak_rss": rss, "build_commit": build}


def summarise(rounds: list[dict]) -> dict:
    keys = sorted(
        {k for r in rounds for k in r["tok_s"]}, key=lambda k: (k[:2] != "tg", int(k[2:]))
    )
    from ds4rt.bench import spread as spread_of  # the medians and spreads of ds4-cli bench

    med = {}
    spread = {}
    for k in keys:
        s = spread_of([r["tok_s"][k] for r in rounds if k in r["tok_s"]])
        med[k] = s["median"]
        spread[k] = [s["min"], s["max"]]
    tg = next((k for k in keys if k.startswith("tg")), None)
    pass_over_decode = {}
    if tg is not None:
        dec_s = 1.0 / med[tg]
        for k in keys:
            if k.startswith("pp"):
                pass_over_decode[k] = (int(k[2:]) / med[k]) / dec_s
    return {
        "tok_s_median": med,
        "tok_s_min_max": spread,
        "pass_over_decode": pass_over_decode,
        "peak_rss_max": max(r["peak_rss"] for r in rounds),
        "wall_s": [r["wall_s"] for r in rounds],
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--llama-bench", default="/tmp/llcpu/bin/llama-bench")
    ap.add_argument("--files", default="/tmp/big4.gguf,/tmp/big8.gguf")
    ap.add_argument("--threads", default="16", help="comma-separated thread counts")
    ap.add_argument("--gen", type=int, default=16, help="decoded tokens per repetition")
    ap.add_argument("--prompts", default="2,4,8,16,128", help="pass sizes (verify, prefill)")
    ap.add_argument("--reps", type=int, default=2, help="repetitions per process")
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds at most")
    ap.add_argument("--budget-s", type=float, default=150.0, help="stop starting rounds after this")
    ap.add_argument("--numerics", default="llama.cpp")
    ap.add_argument(
        "--backend", default="cpu", choices=["cpu", "cuda", "hip"], help="ds4rt's backend"
    )
    ap.add_argument("--profile", action="store_true", help="one more ds4rt decode run, profiled")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME:VAR=VALUE,...: one more ds4rt run per round with these environment settings",
    )
    ap.add_argument("--out", default="-")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        a.threads = int(a.threads)
        _worker(a)
        return

    t_start = time.perf_counter()
    pairs = [(f, int(t)) for f in a.files.split(",") for t in a.threads.split(",")]
    raw: dict[str, dict[str, list[dict]]] = {
        f"{os.path.basename(f)}@{t}": {"ds4rt": [], "llama.cpp": [], **{v: [] for v in variants(a)}}
        for f, t in pairs
    }
    round_s: list[float] = []
    for rnd in range(a.rounds):
        elapsed = time.perf_counter() - t_start
        # the profiled runs come after the rounds: keep a ds4rt run's time per pair for them
        reserve = sum(v["ds4rt"][0]["wall_s"] for v in raw.values()) if a.profile and rnd else 0.0
        if rnd > 0 and elapsed + max(round_s) + reserve > a.budget_s:
            break
        r0 = time.perf_counter()
        for f, t in pairs:
            key = f"{os.path.basename(f)}@{t}"
            order = ["llama.cpp", "ds4rt", *variants(a)]
            for who in order[::-1] if rnd % 2 else order:
                if who == "llama.cpp":
                    res = run_llama(f, t, a)
                else:
                    res = run_ds4rt(f, t, a, variants(a).get(who))
                res["round"] = rnd
                raw[key][who].append(res)
                print(
                    f"[{time.perf_counter() - t_start:6.1f}s] round {rnd} {key} {who}: "
                    + " ".join(f"{k}={v:.1f}" for k, v in res["tok_s"].items()),
                    file=sys.stderr,
                )
        round_s.append(time.perf_counter() - r0)

        write_report(a, raw, {}, t_start, final=False)  # a partial report survives a kill

    profiles = {}
    if a.profile:
        for f, t in pairs:
            key = f"{os.path.basename(f)}@{t}"
            try:
                profiles[key] = profile_ds4rt(f, t, a)
            except (RuntimeError, OSError, ValueError, KeyError) as e:
                profiles[key] = {"error": str(e)}
    report = write_report(a, raw, profiles, t_start, final=True)
    for r in report["results"]:
        print(
            f"{r['file']} @{r['threads']}: ratio "
            + " ".join(f"{k}={v:.2f}" for k, v in r["ratio_ds4rt_over_llama"].items()),
            file=sys.stderr,
        )


def write_report(a, raw: dict, profiles: dict, t_start: float, final: bool) -> dict:
    import ds4rt

    results = []
    for key, both in raw.items():
        if not both["ds4rt"] or not both["llama.cpp"]:
            continue
        d, ll = summarise(both["ds4rt"]), summarise(both["llama.cpp"])
        ratio = {
            k: d["tok_s_median"][k] / v
            for k, v in ll["tok_s_median"].items()
            if k in d["tok_s_median"]
        }
        f, t = key.rsplit("@", 1)
        extra = {}
        for v in variants(a):
            if both.get(v):
                s = summarise(both[v])
                s["ratio_over_llama"] = {
                    k: s["tok_s_median"][k] / x
                    for k, x in ll["tok_s_median"].items()
                    if k in s["tok_s_median"]
                }
                s["ratio_over_ds4rt"] = {
                    k: s["tok_s_median"][k] / x
                    for k, x in d["tok_s_median"].items()
                    if k in s["tok_s_median"]
                }
                extra[v] = s
        results.append(
            {
                "variants": extra,
                "file": f,
                "threads": int(t),
                "rounds": len(both["ds4rt"]),
                "ratio_ds4rt_over_llama": ratio,
                "ds4rt": d,
                "llama.cpp": ll,
                "ds4rt_profile": profiles.get(key),
                "raw": both,
            }
        )
    report = {
        "command": "bench_cpu_peer.py " + " ".join(sys.argv[1:]),
        "complete": final,
        "ds4rt_build": ds4rt.build_info(),
        "llama_build": next(
            (r["build_commit"] for v in raw.values() for r in v["llama.cpp"]), None
        ),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "processor": platform.processor(),
            "affinity": len(os.sched_getaffinity(0)),
        },
        "method": "alternated fresh processes; median of reps per round, then over rounds",
        "gen": a.gen,
        "prompts": a.prompts,
        "reps": a.reps,
        "numerics": a.numerics,
        "backend": a.backend,
        "total_s": time.perf_counter() - t_start,
        "results": results,
    }
    text = json.dumps(report, indent=1, default=str)
    if a.out == "-":
        if final:
            print(text)
    else:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text + "\n")
        os.replace(tmp, a.out)
    return report


if __name__ == "__main__":
    main()
