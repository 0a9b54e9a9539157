"""What the server counts, in Prometheus' text format at ``/metrics`` (docs/SERVER.md).

Names follow vLLM's where vLLM has the same quantity (``vllm:prompt_tokens_total`` is
``ds4rt_prompt_tokens_total`` here, ``vllm:spec_decode_num_accepted_tokens_per_pos`` is
``ds4rt_spec_decode_num_accepted_tokens_per_pos_total``); ds4's DSpark counters and timers keep
ds4's names under ``ds4rt_dspark_`` (timers converted from milliseconds to seconds), so every
field of the stats line ds4 prints at exit can be read at any time, summed over all requests.
Every request that decoded without DSpark is counted with the reason, and every cycle that
verified no draft with its reason (``ds4rt_dspark_no_draft_total{reason}``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..stats import DERIVED_FIELDS, LEVEL_FIELDS, derive

# No "<name>_created" series next to every counter: they double the page and say nothing a
# scraper needs (the process start time is what resets the counters). Process-wide.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

#: Content type of the text exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Latency buckets (seconds): a tiny model answers in milliseconds, a real one in minutes.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 32768, 131072)
# Window of the tokens-per-second gauges.
RATE_WINDOW_S = 10.0

# Fields of the statistics that are not summed as counters or timers (derived rates, levels,
# arrays exported with labels).
_LABELLED = {
    "draft_len_hist": ("length", "ds4rt_dspark_draft_length", "cycles by drafts verified"),
    "accepted_len_hist": ("length", "ds4rt_dspark_accepted_length", "cycles by drafts committed"),
    "proposed_at": (
        "position",
        "ds4rt_spec_decode_num_draft_tokens_per_pos",
        "draft tokens verified at position i of a block",
    ),
    "accepted_at": (
        "position",
        "ds4rt_spec_decode_num_accepted_tokens_per_pos",
        "draft tokens accepted at position i of a block (vLLM's name)",
    ),
}
# net_saved may be negative (speculation cost more than it saved): a gauge, not a counter.
_SIGNED_TIMERS = {"net_saved"}


def add_stats(total: dict[str, Any], part: dict[str, Any]) -> None:
    """Adds one generation's statistics to a running total (levels take the newer value)."""
    for k, v in part.items():
        if k in DERIVED_FIELDS:
            continue
        if k in LEVEL_FIELDS or k not in total:
            total[k] = _copy(v)
        elif isinstance(v, dict):
            for kk, vv in v.items():
                total[k][kk] = total[k].get(kk, 0) + vv
        elif isinstance(v, list):
            total[k] = [a + b for a, b in zip(total[k], v, strict=True)]
        else:
            total[k] = total[k] + v
    derive(total)


def _copy(v: Any) -> Any:
    return dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v


class RateWindow:
    """Events per second over the last RATE_WINDOW_S seconds."""

    def __init__(self, window: float = RATE_WINDOW_S):
        self.window = window
        self._events: deque[tuple[float, int]] = deque()

    def add(self, n: int, now: float | None = None) -> None:
        self._events.append((time.monotonic() if now is None else now, n))

    def rate(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        while self._events and self._events[0][0] < now - self.window:
            self._events.popleft()
        return sum(n for _, n in self._events) / self.window


class _SpecCollector:
    """The summed DSpark statistics as metric families, built at each scrape."""

    def __init__(self, metrics: Metrics):
        self.m = metrics

    def collect(self) -> Iterator[Metric]:
        t = self.m.spec_total
        yield from _spec_families(t)
        pool = self.m.pool
        running = GaugeMetricFamily(
            "ds4rt_num_requests_running", "requests generating (sessions lent out)"
        )
        running.add_metric([], pool.busy if pool else 0)
        yield running
        waiting = GaugeMetricFamily(
            "ds4rt_num_requests_waiting", "requests queued for a free session"
        )
        waiting.add_metric([], pool.waiting if pool else 0)
        yield waiting
        for name, doc, value in (
            ("ds4rt_sessions", "sessions in the pool", pool.size if pool else 0),
            ("ds4rt_queue_capacity", "requests the queue may hold", pool.max_queue if pool else 0),
            (
                "ds4rt_prompt_tokens_per_second",
                f"prompt tokens evaluated per second over the last {RATE_WINDOW_S:g} s",
                self.m.prompt_rate.rate(),
            ),
            (
                "ds4rt_generation_tokens_per_second",
                f"tokens generated per second over the last {RATE_WINDOW_S:g} s, all requests",
                self.m.generation_rate.rate(),
            ),
        ):
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], value)
            yield g
        model = self.m.model
        info = model.info if model is not None and not model.closed else None
        if info:
            cache = GaugeMetricFamily(
                "ds4rt_cache_bytes", "Q8->F16 expansion cache bytes (docs/CACHE.md)"
            )
            cache.add_metric([], float(info["cache"]["bytes"]))
            yield cache
            mem = GaugeMetricFamily("ds4rt_memory_bytes", "model memory by kind", labels=["kind"])
            for k, v in info["memory"].items():
                mem.add_metric([k], float(v))
            yield mem


def _spec_families(t: dict[str, Any]) -> Iterator[Metric]:
    def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
        c = CounterMetricFamily(name, doc)
        c.add_metric([], value)
        return c

    # vLLM's spec-decode counters
    cycles, no_draft = t.get("cycles", 0), t.get("no_draft", 0)
    yield counter(
        "ds4rt_spec_decode_num_drafts", "verify cycles that verified a draft", cycles - no_draft
    )
    yield counter(
        "ds4rt_spec_decode_num_draft_tokens", "draft tokens verified", t.get("proposed", 0)
    )
    yield counter(
        "ds4rt_spec_decode_num_accepted_tokens", "draft tokens accepted", t.get("accepted_draft", 0)
    )
    for field, (label, name, doc) in _LABELLED.items():
        fam = CounterMetricFamily(name, doc, labels=[label])
        for i, v in enumerate(t.get(field, [])):
            fam.add_metric([str(i)], v)
        yield fam
    reasons = CounterMetricFamily(
        "ds4rt_dspark_no_draft",
        "verify cycles without a draft, by reason (ds4rt_no_draft_reason)",
        labels=["reason"],
    )
    for reason, v in t.get("no_draft_by_reason", {}).items():
        reasons.add_metric([reason], v)
    yield reasons
    stages = CounterMetricFamily(
        "ds4rt_dspark_stage_seconds", "drafter time by stage", labels=["stage"]
    )
    for i, ms in enumerate(t.get("stage_ms", [])):
        stages.add_metric([str(i)], ms / 1000.0)
    yield stages
    # every other field of ds4rt_spec_stats under its own (ds4's) name
    for k, v in t.items():
        if k in _LABELLED or k in DERIVED_FIELDS or isinstance(v, (dict, list)):
            continue
        if k in LEVEL_FIELDS or k in _SIGNED_TIMERS:
            base = k.replace("_ms_avg", "_avg")  # decode_ms_avg -> ds4rt_dspark_decode_avg_seconds
            g = GaugeMetricFamily(
                f"ds4rt_dspark_{base}" + ("_seconds" if isinstance(v, float) else ""),
                f"ds4rt_spec_stats.{k}" + (" (a level)" if k in LEVEL_FIELDS else " (summed)"),
            )
            g.add_metric([], v / 1000.0 if isinstance(v, float) else v)
            yield g
        elif isinstance(v, float):
            yield counter(f"ds4rt_dspark_{k}_seconds", f"ds4rt_spec_stats.{k}, summed", v / 1000.0)
        else:
            yield counter(f"ds4rt_dspark_{k}", f"ds4rt_spec_stats.{k}, summed", v)
    rate = GaugeMetricFamily(
        "ds4rt_spec_decode_acceptance_ratio", "accepted / verified draft tokens, all requests"
    )
    proposed = t.get("proposed", 0)
    rate.add_metric([], t.get("accepted_draft", 0) / proposed if proposed else 0.0)
    yield rate


class Metrics:
    """The server's counters; ``render()`` is the body of /metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.pool: Any = None
        self.model: Any = None  # read at each scrape: the cache grows as it is used
        self.spec_total: dict[str, Any] = {}
        self.prompt_rate = RateWindow()
        self.generation_rate = RateWindow()
        self.requests = Counter(
            "ds4rt_requests",
            "HTTP requests answered, by endpoint and status code",
            ["endpoint", "code"],
            registry=r,
        )
        self.finished = Counter(
            "ds4rt_request_success",
            "generations finished, by OpenAI finish_reason (abort: the client went away)",
            ["finished_reason"],
            registry=r,
        )
        self.rejected = Counter(
            "ds4rt_requests_rejected",
            "requests refused before generating, by reason",
            ["reason"],
            registry=r,
        )
        self.decoding = Counter(
            "ds4rt_requests_decoding",
            "generations by decoding mode and why (dspark; plain: request, server, "
            "no_support_model)",
            ["mode", "why"],
            registry=r,
        )
        self.prompt_tokens = Counter("ds4rt_prompt_tokens", "prompt tokens evaluated", registry=r)
        self.prefix_queries = Counter(
            "ds4rt_prefix_cache_queries",
            "prompt tokens of requests that generated (vLLM's name)",
            registry=r,
        )
        self.prefix_hits = Counter(
            "ds4rt_prefix_cache_hits",
            "of them, tokens a session's context already held, not evaluated again (vLLM's name)",
            registry=r,
        )
        self.generation_tokens = Counter("ds4rt_generation_tokens", "tokens generated", registry=r)
        self.ttft = Histogram(
            "ds4rt_time_to_first_token_seconds",
            "arrival to first generated token",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "ds4rt_e2e_request_latency_seconds",
            "arrival to the end of the generation",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_time = Histogram(
            "ds4rt_request_queue_time_seconds",
            "time waiting for a session",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.prefill_time = Histogram(
            "ds4rt_request_prefill_time_seconds",
            "prompt evaluation",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.decode_time = Histogram(
            "ds4rt_request_decode_time_seconds",
            "generation after the prompt",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.prompt_len = Histogram(
            "ds4rt_request_prompt_tokens",
            "prompt tokens per request",
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.generation_len = Histogram(
            "ds4rt_request_generation_tokens",
            "tokens generated per request",
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        r.register(_SpecCollector(self))

    def add_spec_stats(self, stats: dict[str, Any]) -> None:
        add_stats(self.spec_total, stats)

    def render(self) -> bytes:
        return generate_latest(self.registry)
