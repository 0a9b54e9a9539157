"""Benchmarks of the installed ds4rt: the measurements behind ``ds4-cli bench`` and the tools in
tools/bench_*.py (docs/PERFORMANCE.md, "One benchmark command").

    from ds4rt import bench
    report = bench.run(bench.BenchConfig(budget_s=60))     # the embedded pair
    report["verify"]["rows"][7]["ratio"]                    # verify(8) / decode

What :func:`run` measures, in this order, each part within its share of ``budget_s``:

* **load**: wall seconds to load the target (and the support model);
* **bandwidth**: a copy of ``--bandwidth-mib`` MiB (read + write bytes over time), unless a
  bandwidth is given; with the plan's weight bytes it gives the **byte floor** of a pass: the
  bytes of weights a pass of n tokens must read (every dense matrix and the head once, the
  routed experts n tokens choose: E * (1 - (1 - k/E)^n) per layer for uniform routing, n rows
  of the embedding), over the bandwidth;
* **verify**: a pass of n tokens after ``verify_ctx`` tokens for every n of ``verify_sizes``
  (its logits rows read back, as speculative verification does, then rolled back), and its
  ratio to a pass of one token (decode): what DSpark's speed-up divides by;
* **contexts**: prefill of c tokens (tokens/s) and decode after c tokens for every c of
  ``contexts``: speed against context length;
* **prefill**: one prefill of ``prefill`` tokens from an empty context;
* **proposal**: one DSpark proposal (a full block, threshold 0) after the prompt;
* **modes**: a greedy generation of ``tokens`` tokens after a ``prompt_tokens`` prompt for
  plain decoding and each DSpark mode (``off``: the drafter attached and the scheduler never
  drafting; ``adaptive``; ``always``: a full block every cycle, threshold 0; ``oracle`` and
  ``wrong``: host drafters that are always right / always wrong, adaptive), with the
  speculative counters (committed tokens per verify cycle, acceptance per block position) and
  the per-stage timers, each mode's greedy output checked identical to plain decoding's;
* **memory**: peak RSS of the process, the model's memory by category (ds4rt_model_info) and
  the plan of the file (ds4rt.memory).

Every figure is a median over repeats with its spread (``min``, ``max``, ``q1``, ``q3``) and
the number of samples (``n``). The budget cuts repeats: once a part's share of it is spent,
each remaining item gets one sample (a tiny budget gives a complete but rough report). Items
are skipped only past 1.5 x the budget + 30 s (a big file on a slow backend), and the part
then says so (``truncated``); every generation mode always runs, its output checked.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _core, data
from .dspark import DSpark
from .memory import memory_plan
from .model import Model, Session

__all__ = [
    "MODES",
    "BenchConfig",
    "byte_floor",
    "measure_bandwidth",
    "pass_cost",
    "proposal_cost",
    "run",
    "spec_modes",
    "summary",
    "verify_costs",
]

MODES = ("off", "adaptive", "always", "oracle", "wrong")
DEFAULT_MODES = ("off", "adaptive", "always")
# the shares of the budget, in the order of the parts (the rest: load, memory)
SHARES = {"verify": 0.3, "contexts": 0.2, "prefill": 0.05, "proposal": 0.05, "modes": 0.35}

Progress = Callable[[str, float], None]


@dataclasses.dataclass
class BenchConfig:
    """What :func:`run` measures (see the module's docstring)."""

    target: str | None = None  # None: the embedded target (and support)
    support: str | None = None  # None with target None: the embedded support; else no DSpark
    backend: str = "auto"
    threads: int = 0
    cache: str = "auto"
    numerics: str = "official"
    repeats: int = 5
    budget_s: float = 120.0
    verify_sizes: Sequence[int] = tuple(range(1, 18))
    verify_ctx: int = 64
    contexts: Sequence[int] = (64, 256, 1024)
    prefill: int = 128
    prompt_tokens: int = 32
    tokens: int = 64
    modes: Sequence[str] = DEFAULT_MODES
    passes: int = 3  # passes timed per sample (their mean is one sample)
    bandwidth_gbs: float | None = None  # None: measured
    bandwidth_mib: int = 256
    seed: int = 0


def spread(samples: Sequence[float]) -> dict[str, Any]:
    """Median, min, max, quartiles and count of samples (all equal for a single sample)."""
    v = sorted(float(x) for x in samples)
    if not v:
        raise ValueError("no samples")
    q1, q3 = (statistics.quantiles(v, n=4, method="inclusive")[::2]) if len(v) > 1 else (v[0],) * 2
    return {
        "median": statistics.median(v),
        "min": v[0],
        "max": v[-1],
        "q1": q1,
        "q3": q3,
        "n": len(v),
    }


def _scale(s: dict[str, Any], k: float) -> dict[str, Any]:
    """A spread of x as a spread of k * x (k > 0)."""
    return {key: (val * k if key != "n" else val) for key, val in s.items()}


def _inverse(s: dict[str, Any], k: float = 1.0) -> dict[str, Any]:
    """A spread of seconds as a spread of k / seconds (tokens/s: min and max swap)."""
    return {
        "median": k / s["median"],
        "min": k / s["max"],
        "max": k / s["min"],
        "q1": k / s["q3"],
        "q3": k / s["q1"],
        "n": s["n"],
    }


class _Clock:
    """The budget: a deadline per part, from its share of what is left."""

    def __init__(self, budget_s: float):
        self.start = time.perf_counter()
        self.budget = budget_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def deadline(self, share: float) -> float:
        left = max(self.budget - self.elapsed(), 0.0)
        return time.perf_counter() + left * share

    def hard(self) -> float:
        """When remaining items are skipped rather than measured once: 1.5 x the budget + 30 s."""
        return self.start + 1.5 * self.budget + 30.0


def _tokens(rng: np.random.Generator, n_vocab: int, n: int) -> list[int]:
    return rng.integers(3, n_vocab, n).tolist()


def pass_cost(s: Session, ctx_len: int, chunk: Sequence[int], passes: int) -> tuple[float, float]:
    """Mean wall and process CPU seconds of `passes` passes of `chunk` (its logits rows read
    back) after the session's context of ctx_len tokens, each rolled back."""
    wall = cpu = 0.0
    for _ in range(passes):
        w0, c0 = time.perf_counter(), time.process_time()
        s.logits(chunk)
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
        s.truncate(ctx_len)
    return wall / passes, cpu / passes


def verify_costs(
    model: Model,
    sizes: Sequence[int],
    *,
    ctx: int = 64,
    repeats: int = 5,
    passes: int = 3,
    deadline: float | None = None,
    hard: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """A pass of n tokens after `ctx` tokens for every n of sizes (warm-up first): wall and CPU
    ms per pass and per token, and the ratio to the pass of one token (measured first). After
    `deadline` every size gets one sample; after `hard` the remaining sizes are skipped."""
    rng = np.random.default_rng(seed)
    context = [max(model.bos_id, 0)] + _tokens(rng, model.n_vocab, ctx - 1)
    order = [1] + [n for n in sizes if n != 1]
    s = model.session(n_ctx=ctx + max(order) + 8, max_batch=max(max(order), 1))
    s.eval(context)
    rows, truncated = [], False
    for i, n in enumerate(order):
        chunk = _tokens(rng, model.n_vocab, n)
        pass_cost(s, ctx, chunk, 1)  # warm-up (first use of a shape)
        wall, cpu = [], []
        for _ in range(repeats):
            w, c = pass_cost(s, ctx, chunk, passes)
            wall.append(w)
            cpu.append(c)
            if deadline is not None and time.perf_counter() > deadline:
                break
        rows.append({"n": n, "wall": wall, "cpu": cpu})
        if progress:
            progress(f"verify({n})", (i + 1) / len(order))
        if hard is not None and time.perf_counter() > hard and i + 1 < len(order):
            truncated = True
            break
    s.close()
    decode = statistics.median(rows[0]["wall"])
    out = []
    for r in rows:
        if r["n"] not in sizes:
            continue
        w = spread(r["wall"])
        out.append(
            {
                "n": r["n"],
                "ms": _scale(w, 1e3),
                "cpu_ms": _scale(spread(r["cpu"]), 1e3),
                "ms_per_token": w["median"] * 1e3 / r["n"],
                "ratio": w["median"] / decode,
            }
        )
    return {
        "context": ctx,
        "decode_ms": _scale(spread(rows[0]["wall"]), 1e3),
        "rows": out,
        "truncated": truncated,
    }


def context_costs(
    model: Model,
    contexts: Sequence[int],
    *,
    repeats: int,
    passes: int,
    max_batch: int,
    deadline: float,
    hard: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Prefill of c tokens (tokens/s) and decode after them (tokens/s), for every c (one sample
    each after `deadline`, the rest skipped after `hard`)."""
    rng = np.random.default_rng(seed + 1)
    rows, truncated = [], False
    for i, c in enumerate(sorted(contexts)):
        s = model.session(n_ctx=c + 8, max_batch=max_batch)
        toks = [max(model.bos_id, 0)] + _tokens(rng, model.n_vocab, c - 1)
        pre, dec = [], []
        for _ in range(repeats):
            s.reset()
            t0 = time.perf_counter()
            s.eval(toks)
            s.current_logits()
            pre.append(time.perf_counter() - t0)
            dec.append(pass_cost(s, c, _tokens(rng, model.n_vocab, 1), passes)[0])
            if time.perf_counter() > deadline:
                break
        s.close()
        rows.append(
            {
                "context": c,
                "prefill_tokens_per_s": _inverse(spread(pre), c),
                "decode_tokens_per_s": _inverse(spread(dec)),
                "decode_ms": _scale(spread(dec), 1e3),
            }
        )
        if progress:
            progress(f"context {c}", (i + 1) / len(contexts))
        if hard is not None and time.perf_counter() > hard and i + 1 < len(contexts):
            truncated = True
            break
    return {"rows": rows, "truncated": truncated}


def prefill_cost(
    model: Model, n: int, *, repeats: int, max_batch: int, deadline: float, seed: int = 0
) -> dict[str, Any]:
    """One prefill of n tokens from an empty context (its last logits row read), tokens/s."""
    rng = np.random.default_rng(seed + 2)
    toks = [max(model.bos_id, 0)] + _tokens(rng, model.n_vocab, n - 1)
    s = model.session(n_ctx=n + 8, max_batch=max_batch)
    t = []
    for _ in range(repeats):
        s.reset()
        t0 = time.perf_counter()
        s.eval(toks)
        s.current_logits()
        t.append(time.perf_counter() - t0)
        if time.perf_counter() > deadline:
            break
    s.close()
    sp = spread(t)
    return {"tokens": n, "ms": _scale(sp, 1e3), "tokens_per_s": _inverse(sp, n)}


def proposal_cost(
    model: Model,
    dspark: DSpark,
    *,
    ctx: int,
    repeats: int,
    deadline: float,
    seed: int = 0,
) -> dict[str, Any]:
    """One DSpark proposal of a full block (threshold 0) after a context of ctx tokens."""
    rng = np.random.default_rng(seed + 3)
    toks = [max(model.bos_id, 0)] + _tokens(rng, model.n_vocab, ctx - 1)
    block = dspark.block_size
    s = model.session(n_ctx=ctx + block + 8, max_batch=max(32, block + 1))
    dspark.attach(s)
    s.eval(toks)
    anchor = toks[-1]
    dspark.propose(s, anchor, block, 0.0)  # warm-up
    t = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        dspark.propose(s, anchor, block, 0.0)
        t.append(time.perf_counter() - t0)
        if time.perf_counter() > deadline:
            break
    s.close()
    return {"context": ctx, "block_size": block, "ms": _scale(spread(t), 1e3)}


# the speculative timers reported per mode (ms for the whole generation; docs/DSPARK.md)
STAGE_TIMERS = (
    "propose",
    "prop_stage0",
    "prop_setup",
    "prop_cache",
    "prop_chain",
    "prop_hidden",
    "prop_conf0",
    "prop_logits",
    "prop_markov",
    "snapshot",
    "verify",
    "verify_upload",
    "verify_layer",
    "verify_head",
    "verify_read",
    "target",
    "spec_total",
)


def _mode_kwargs(mode: str, dspark: DSpark | None, full: list[int], n_vocab: int) -> dict[str, Any]:
    def oracle(ctx: Sequence[int], k: int) -> list[int]:
        m = len(ctx)
        return [full[m + i] if m + i < len(full) else 0 for i in range(k)]

    def wrong(ctx: Sequence[int], k: int) -> list[int]:
        return [(t + 1) % n_vocab for t in oracle(ctx, k)]

    if mode == "oracle":
        return {"draft": oracle}
    if mode == "wrong":
        return {"draft": wrong}
    if dspark is None:
        raise ValueError(f"mode {mode!r} needs a DSpark support model")
    if mode == "off":
        return {"dspark": dspark, "scheduler": "off"}
    if mode == "always":
        return {"dspark": dspark, "scheduler": "always", "confidence_threshold": 0.0}
    return {"dspark": dspark}


def spec_modes(
    model: Model,
    dspark: DSpark | None,
    modes: Sequence[str],
    *,
    tokens: int = 64,
    prompt_tokens: int = 32,
    repeats: int = 5,
    deadline: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Greedy generation of `tokens` tokens for plain decoding and every mode; each mode's
    output is compared with plain decoding's."""
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r} (modes: {', '.join(MODES)})")
    rng = np.random.default_rng(seed + 4)
    prompt = [max(model.bos_id, 0)] + _tokens(rng, model.n_vocab, prompt_tokens - 1)
    block = dspark.block_size if dspark is not None else 16
    max_batch = max(32, block + 1)

    def gen(kw: dict[str, Any]) -> tuple[float, list[int], dict[str, Any] | None]:
        s = model.session(n_ctx=len(prompt) + tokens + block + 8, max_batch=max_batch)
        t0 = time.perf_counter()
        r = s.generate(prompt, max_tokens=tokens, stop_at_eos=False, **kw)
        dt = time.perf_counter() - t0
        s.close()
        return dt, list(r.ids), (r.spec_stats if kw else None)

    names = ["plain", *modes]
    results, base_out, truncated = [], None, False
    full: list[int] = []
    for i, name in enumerate(names):
        kw = {} if name == "plain" else _mode_kwargs(name, dspark, full, model.n_vocab)
        times, outs, stats = [], [], []
        for _ in range(repeats):
            dt, out, st = gen(kw)
            times.append(dt)
            outs.append(out)
            stats.append(st)
            if deadline is not None and time.perf_counter() > deadline:
                break
        if name == "plain":
            base_out = outs[0]
            full = prompt + base_out
        mid = sorted(range(len(times)), key=lambda j: times[j])[len(times) // 2]
        row: dict[str, Any] = {
            "mode": name,
            "s": spread(times),
            "tokens_per_s": _inverse(spread(times), tokens),
            "identical_to_plain": all(o == base_out for o in outs),
            "deterministic": all(o == outs[0] for o in outs),
        }
        st = stats[mid]
        if st is not None:
            cycles = max(st["cycles"], 1)
            row["cycles"] = st["cycles"]
            row["proposed"] = st["proposed"]
            row["accepted"] = st["accepted_draft"]
            row["no_draft"] = st["no_draft"]
            row["committed_per_cycle"] = st["tokens"] / cycles
            row["accepted_per_cycle"] = st["accepted_draft"] / cycles
            row["acceptance_rate"] = (
                st["accepted_draft"] / st["proposed"] if st["proposed"] else 0.0
            )
            row["acceptance_at"] = [
                {"position": j + 1, "proposed": p, "accepted": a, "rate": a / p}
                for j, (p, a) in enumerate(zip(st["proposed_at"], st["accepted_at"], strict=True))
                if p
            ]
            row["stage_ms"] = {k: st[k] for k in STAGE_TIMERS}
            row["drafter_stage_ms"] = [x for x in st["stage_ms"] if x]
        results.append(row)
        if progress:
            progress(f"mode {name}", (i + 1) / len(names))
        if deadline is not None and time.perf_counter() > deadline and i + 1 < len(names):
            truncated = True  # the remaining modes run once: their outputs must be checked
            repeats = 1
    plain = results[0]["s"]["median"]
    for r in results:
        r["speedup_vs_plain"] = plain / r["s"]["median"]
    return {
        "tokens": tokens,
        "prompt_tokens": len(prompt),
        "greedy_identical": all(r["identical_to_plain"] for r in results),
        "rows": results,
        "truncated": truncated,
    }


def measure_bandwidth(mib: int = 256, repeats: int = 3) -> float:
    """GB/s of a copy of `mib` MiB in this process (read + write bytes over the median time):
    the memory bandwidth the byte floor divides by. One thread: a lower bound on a machine
    whose bandwidth needs several cores."""
    n = (mib << 20) // 8
    src = np.ones(n, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        t.append(time.perf_counter() - t0)
    return 2 * src.nbytes / statistics.median(t) / 1e9


def byte_floor(
    plan: dict[str, Any], info: dict[str, Any], n: int, bandwidth_gbs: float
) -> dict[str, float]:
    """The weight bytes a pass of n tokens must read and the time they take at bandwidth_gbs:
    every weight once except the routed experts (those n tokens choose, uniform routing) and
    the embedding (n rows)."""
    kinds = plan["weights"]["by_kind"]
    e, k = info["n_expert"], info["n_expert_used"]
    touched = 1.0 - (1.0 - k / e) ** n if e else 0.0
    dense = plan["weights"]["total"] - kinds["experts"] - kinds["embedding"]
    embd_row = kinds["embedding"] / info["n_vocab"]
    b = dense + kinds["experts"] * touched + n * embd_row
    return {"n": n, "bytes": b, "ms": b / (bandwidth_gbs * 1e9) * 1e3}


def _reset_peak_rss() -> bool:
    """Restart the kernel's peak-RSS count of this process (Linux), so the bandwidth probe's
    buffers are not taken for the model's memory; False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss() -> int:
    """Peak resident bytes of this process (since the last reset, where there was one)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r) if sys.platform == "darwin" else int(r) * 1024


def _paths(cfg: BenchConfig) -> tuple[str, str | None]:
    if cfg.target is None:
        return data.default_target(), cfg.support or data.default_support()
    return cfg.target, cfg.support


def run(cfg: BenchConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Every part of the benchmark (the module's docstring), as a JSON-ready report."""
    clock = _Clock(cfg.budget_s)
    target, support = _paths(cfg)
    if any(m in ("off", "adaptive", "always") for m in cfg.modes) and support is None:
        raise ValueError("the DSpark modes need a support model (--support) or --modes plain")
    t0 = time.perf_counter()
    model = Model(
        target, n_threads=cfg.threads, cache=cfg.cache, backend=cfg.backend, numerics=cfg.numerics
    )
    load_s = time.perf_counter() - t0
    dspark, dspark_load_s = None, None
    if support is not None:
        t0 = time.perf_counter()
        dspark = DSpark(model, support)
        dspark_load_s = time.perf_counter() - t0
    info = model.info
    if progress:
        progress("loaded", 0.0)
    try:
        # the sessions' own batch size (the modes' sessions below), so the plan's scratch is theirs
        max_batch = max(32, (dspark.block_size + 1) if dspark else 0)
        plan = memory_plan(
            target,
            n_ctx=max(cfg.contexts),
            max_batch=max_batch,
            support=support,
            n_threads=cfg.threads,
        )
        bw = cfg.bandwidth_gbs
        bw_measured = bw is None
        if bw is None:
            bw = measure_bandwidth(cfg.bandwidth_mib)
        rss_reset = _reset_peak_rss()
        report: dict[str, Any] = {
            "command": None,
            "build": _core.build_info(),
            "machine": {
                "platform": platform.platform(),
                "processor": platform.processor() or platform.machine(),
                "cpus_available": len(os.sched_getaffinity(0)),
                "load_average": list(os.getloadavg()),
            },
            "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(cfg).items()},
            "target": target,
            "support": support,
            "model": {
                k: info[k]
                for k in ("n_layer", "n_embd", "n_vocab", "n_expert", "n_expert_used", "backend")
            }
            | {"device": info["device"], "threads": info["n_threads"], "cache": info["cache"]},
            "dspark": dspark.info if dspark is not None else None,
            "load_s": load_s,
            "dspark_load_s": dspark_load_s,
            "bandwidth": {"gb_s": bw, "measured": bw_measured},
        }
        report["verify"] = verify_costs(
            model,
            list(cfg.verify_sizes),
            ctx=cfg.verify_ctx,
            repeats=cfg.repeats,
            passes=cfg.passes,
            deadline=clock.deadline(SHARES["verify"]),
            hard=clock.hard(),
            seed=cfg.seed,
            progress=progress,
        )
        floor = {r["n"]: byte_floor(plan, info, r["n"], bw) for r in report["verify"]["rows"]}
        for r in report["verify"]["rows"]:
            r["floor_ms"] = floor[r["n"]]["ms"]
            r["floor_bytes"] = floor[r["n"]]["bytes"]
            r["of_floor"] = floor[r["n"]]["ms"] / r["ms"]["median"]
        left = 1.0 - SHARES["verify"]
        report["contexts"] = context_costs(
            model,
            cfg.contexts,
            repeats=cfg.repeats,
            passes=cfg.passes,
            max_batch=max_batch,
            deadline=clock.deadline(SHARES["contexts"] / left),
            hard=clock.hard(),
            seed=cfg.seed,
            progress=progress,
        )
        left -= SHARES["contexts"]
        report["prefill"] = prefill_cost(
            model,
            cfg.prefill,
            repeats=cfg.repeats,
            max_batch=max_batch,
            deadline=clock.deadline(SHARES["prefill"] / left),
            seed=cfg.seed,
        )
        left -= SHARES["prefill"]
        decode_ms = report["verify"]["decode_ms"]["median"]
        if dspark is not None:
            p = proposal_cost(
                model,
                dspark,
                ctx=cfg.prompt_tokens,
                repeats=cfg.repeats,
                deadline=clock.deadline(SHARES["proposal"] / left),
                seed=cfg.seed,
            )
            p["in_decodes"] = p["ms"]["median"] / decode_ms
            report["proposal"] = p
        else:
            report["proposal"] = None
        if progress:
            progress("prefill, proposal", 1.0)
        report["modes"] = spec_modes(
            model,
            dspark,
            list(cfg.modes),
            tokens=cfg.tokens,
            prompt_tokens=cfg.prompt_tokens,
            repeats=cfg.repeats,
            deadline=clock.deadline(1.0),
            seed=cfg.seed,
            progress=progress,
        )
        report["greedy_identical"] = report["modes"]["greedy_identical"]
        report["memory"] = {
            "peak_rss_bytes": _peak_rss(),
            "peak_rss_since": "after the bandwidth probe" if rss_reset else "process start",
            "model": info["memory"],
            "model_memory_on": "device" if info["device"] >= 0 else "host",
            "cache_bytes": model.info["cache"]["bytes"],
            "plan": {
                "n_ctx": plan["n_ctx"],
                "weights": plan["weights"],
                "state": plan["state"],
                "scratch": plan["scratch"],
                "drafter": plan["drafter"],
                "totals": plan["totals"],
            },
        }
        report["elapsed_s"] = clock.elapsed()
        report["budget_s"] = cfg.budget_s
        return report
    finally:
        if dspark is not None:
            dspark.close()
        model.close()


def summary(report: dict[str, Any]) -> str:
    """The report as a few lines of text."""
    out = []
    m = report["model"]
    out.append(
        f"ds4rt bench: {os.path.basename(report['target'])} ({m['n_layer']} layers, n_embd "
        f"{m['n_embd']}), backend {m['backend']}, {m['threads']} threads; "
        f"{report['elapsed_s']:.1f} s of a {report['budget_s']:g} s budget"
    )
    v = report["verify"]
    d = v["decode_ms"]
    out.append(
        f"decode after {v['context']} tokens: {d['median']:.3f} ms [{d['min']:.3f}, "
        f"{d['max']:.3f}] = {1e3 / d['median']:.1f} tokens/s; bandwidth "
        f"{report['bandwidth']['gb_s']:.1f} GB/s"
        + (" (measured, one-thread copy)" if report["bandwidth"]["measured"] else "")
    )
    out.append("verify(n): ms (median [min, max]), ratio to decode, byte floor ms")
    for r in v["rows"]:
        ms = r["ms"]
        out.append(
            f"  n={r['n']:>2}  {ms['median']:9.3f} [{ms['min']:.3f}, {ms['max']:.3f}]  "
            f"x{r['ratio']:5.2f}  floor {r['floor_ms']:.3f}"
        )
    out.append("context: prefill tokens/s, decode tokens/s")
    for r in report["contexts"]["rows"]:
        out.append(
            f"  {r['context']:>6}  {r['prefill_tokens_per_s']['median']:10.1f}  "
            f"{r['decode_tokens_per_s']['median']:10.1f}"
        )
    p = report["prefill"]
    out.append(f"prefill of {p['tokens']} tokens: {p['tokens_per_s']['median']:.1f} tokens/s")
    if report["proposal"]:
        q = report["proposal"]
        out.append(
            f"proposal (block {q['block_size']}): {q['ms']['median']:.3f} ms = "
            f"{q['in_decodes']:.2f} decodes"
        )
    md = report["modes"]
    out.append(
        f"generation of {md['tokens']} tokens: tokens/s, vs plain, committed/cycle, acceptance"
    )
    for r in md["rows"]:
        extra = ""
        if "cycles" in r:
            extra = (
                f"  {r['committed_per_cycle']:.2f}/cycle  accepted {r['accepted']}/{r['proposed']}"
            )
        same = "" if r["identical_to_plain"] else "  OUTPUT DIFFERS FROM PLAIN"
        out.append(
            f"  {r['mode']:<9} {r['tokens_per_s']['median']:9.1f}  x{r['speedup_vs_plain']:.2f}"
            f"{extra}{same}"
        )
    out.append(f"greedy outputs identical to plain decoding: {md['greedy_identical']}")
    mem = report["memory"]
    out.append(
        f"memory: peak RSS {mem['peak_rss_bytes'] / 2**20:.1f} MiB; model "
        + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in mem["model"].items())
        + f" ({mem['model_memory_on']})"
    )
    return "\n".join(out)


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed (the `bench` extra: pip install 'ds4rt[bench]')."""


def require_matplotlib() -> Any:
    """The matplotlib module with a file backend, or PlotUnavailable saying how to get it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotUnavailable(
            f"--plot needs matplotlib (pip install 'ds4rt[bench]' or pip install matplotlib): {e}"
        ) from None
    return plt


def plot(report: dict[str, Any], path: str) -> None:
    """A PNG of the report: speed against context length (prefill and decode tokens/s, min-max
    bars) and the cost of verify(n) against n beside its byte floor and n decodes."""
    plt = require_matplotlib()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    rows = report["contexts"]["rows"]
    ctx = [r["context"] for r in rows]
    for key, label in (("decode_tokens_per_s", "decode"), ("prefill_tokens_per_s", "prefill")):
        med = [r[key]["median"] for r in rows]
        lo = [r[key]["median"] - r[key]["min"] for r in rows]
        hi = [r[key]["max"] - r[key]["median"] for r in rows]
        a.errorbar(ctx, med, yerr=[lo, hi], marker="o", capsize=3, label=label)
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("context length (tokens)")
    a.set_ylabel("tokens/s")
    a.set_title("speed against context length")
    a.legend()
    v = report["verify"]["rows"]
    n = [r["n"] for r in v]
    med = [r["ms"]["median"] for r in v]
    b.errorbar(
        n,
        med,
        yerr=[
            [m - r["ms"]["min"] for m, r in zip(med, v, strict=True)],
            [r["ms"]["max"] - m for m, r in zip(med, v, strict=True)],
        ],
        marker="o",
        capsize=3,
        label="verify(n)",
    )
    bw = report["bandwidth"]
    b.plot(
        n,
        [r["floor_ms"] for r in v],
        linestyle="--",
        label=f"byte floor ({bw['gb_s']:.1f} GB/s{', measured' if bw['measured'] else ''})",
    )
    dec = report["verify"]["decode_ms"]["median"]
    b.plot(n, [k * dec for k in n], linestyle=":", label="n decodes")
    b.set_xlabel("tokens per pass n")
    b.set_ylabel("ms per pass")
    b.set_title(f"verify cost after {report['verify']['context']} tokens")
    b.legend()
    m = report["model"]
    fig.suptitle(
        f"ds4rt bench: {os.path.basename(report['target'])}, {m['backend']}, {m['threads']} threads"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
