#!/usr/bin/env python3
"""Benchmark of the OpenAI-compatible server: many clients at once on one model.

    python tools/bench_server.py [--target T --support S] [--sessions 1,2,4] [--clients 1,4,8]
                                 [--requests 16] [--tokens 32] [--threads 1] [--no-dspark]

Prints JSON. For every (sessions, clients) pair it starts the server (ds4rt.server on uvicorn,
127.0.0.1, a free port), lets `clients` threads send `requests` streamed completions between
them (greedy, `tokens` ids each, ignore_eos, every request a different short prompt), and
reports the aggregate generation throughput (completion tokens / wall time), the request
latency and the time to first token (p50, p99, from the client's side), and the server's own
counters (queue time, ds4rt_dspark_* from /metrics). Every result is checked equal to the same
request sent alone beforehand, so the throughput is of correct answers.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import sys
import time

import httpx

import ds4rt
from ds4rt import data
from ds4rt.server import ServerConfig, ServerEngine
from ds4rt.server.background import BackgroundServer


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]


def stream_one(url: str, prompt: list[int], n: int) -> tuple[str, float, float]:
    """(text, latency, time to first token) of one streamed completion."""
    t0 = time.perf_counter()
    ttft = None
    text = []
    body = {"prompt": prompt, "max_tokens": n, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.read()[:200]!r}")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("choices") and ev["choices"][0]["text"]:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                text.append(ev["choices"][0]["text"])
    return "".join(text), time.perf_counter() - t0, ttft if ttft is not None else float("nan")


def metric(page: str, name: str) -> float:
    for line in page.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def run_config(model, dspark, sessions, clients, prompts, n, want):
    cfg = ServerConfig(sessions=sessions, queue=len(prompts), n_ctx=256)
    engine = ServerEngine(model, dspark, cfg)
    with BackgroundServer(engine) as srv:
        before = httpx.get(srv.url + "/metrics").text
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(clients) as ex:
            out = list(ex.map(lambda p: stream_one(srv.url, p, n), prompts))
        wall = time.perf_counter() - t0
        after = httpx.get(srv.url + "/metrics").text
    texts = [o[0] for o in out]
    if want is not None and texts != want:
        raise RuntimeError(f"sessions={sessions} clients={clients}: results differ from alone")
    lat = [o[1] for o in out]
    ttft = [o[2] for o in out]
    tokens = metric(after, "ds4rt_generation_tokens_total") - metric(
        before, "ds4rt_generation_tokens_total"
    )
    qcount = metric(after, "ds4rt_request_queue_time_seconds_count") - metric(
        before, "ds4rt_request_queue_time_seconds_count"
    )
    qsum = metric(after, "ds4rt_request_queue_time_seconds_sum") - metric(
        before, "ds4rt_request_queue_time_seconds_sum"
    )
    drafted = metric(after, "ds4rt_spec_decode_num_draft_tokens_total") - metric(
        before, "ds4rt_spec_decode_num_draft_tokens_total"
    )
    accepted = metric(after, "ds4rt_spec_decode_num_accepted_tokens_total") - metric(
        before, "ds4rt_spec_decode_num_accepted_tokens_total"
    )
    return {
        "sessions": sessions,
        "clients": clients,
        "requests": len(prompts),
        "wall_s": round(wall, 3),
        "generation_tokens": int(tokens),
        "throughput_tokens_per_s": round(tokens / wall, 1),
        "latency_p50_s": round(percentile(lat, 50), 3),
        "latency_p99_s": round(percentile(lat, 99), 3),
        "ttft_p50_s": round(percentile(ttft, 50), 3),
        "ttft_p99_s": round(percentile(ttft, 99), 3),
        "queue_time_mean_s": round(qsum / qcount, 3) if qcount else 0.0,
        "draft_tokens": int(drafted),
        "accepted_tokens": int(accepted),
        "results_equal_alone": want is not None,
    }, texts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--target", default=data.default_target())
    ap.add_argument("--support", default=data.default_support())
    ap.add_argument("--no-dspark", action="store_true")
    ap.add_argument("--sessions", default="1,2,4")
    ap.add_argument("--clients", default="1,4,8")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads per session's pass")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args(argv)
    model = ds4rt.Model(args.target, n_threads=args.threads)
    dspark = None if args.no_dspark else ds4rt.DSpark(model, args.support)
    prompts = [[model.bos_id or 0, 17 + i, 42 + 3 * i, 7] for i in range(args.requests)]
    # the reference: every request alone, one at a time (after a warm-up run)
    run_config(model, dspark, 1, 1, prompts, args.tokens, None)
    _, want = run_config(model, dspark, 1, 1, prompts, args.tokens, None)
    rows = []
    for s in (int(x) for x in args.sessions.split(",")):
        for c in (int(x) for x in args.clients.split(",")):
            row, _ = run_config(model, dspark, s, c, prompts, args.tokens, want)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    doc = {
        "benchmark": "server",
        "target": os.path.basename(args.target),
        "dspark": dspark is not None,
        "tokens_per_request": args.tokens,
        "threads_per_session": args.threads,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "python": platform.python_version(),
        },
        "ds4rt": ds4rt.build_info(),
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
    }
    text = json.dumps(doc, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    model.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
