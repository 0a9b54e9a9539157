"""Speculative-decoding statistics: the C library's ``ds4rt_spec_stats`` as Python data.

A session's statistics are cumulative (``Session.spec_stats()``, reset with
``Session.reset_spec_stats()``); a ``GenerationResult`` carries the share of one generation
(``delta``). The field names and meanings are those of ``ds4rt_spec_stats`` (include/ds4rt.h,
docs/DSPARK.md); ``stats_line`` is ds4's one-line format followed by ds4rt's fields. The
formatter also derives ``accept_rate``, ``avg_accept`` and ``committed_per_verify`` (ds4rt's)
from the counters (``derive``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _core

__all__ = [
    "DERIVED_FIELDS",
    "LEVEL_FIELDS",
    "delta",
    "derive",
    "make_stats_callback",
    "stats_line",
    "stats_to_dict",
]

# Fields that hold a level rather than a count: a generation's share is the value at its end.
LEVEL_FIELDS = frozenset({"cache_bytes", "decode_ms_avg"})
# Fields the formatter derives from the counters (never summed or subtracted: see derive).
DERIVED_FIELDS = ("accept_rate", "avg_accept", "committed_per_verify")


def stats_to_dict(raw: bytes) -> dict[str, Any]:
    """A raw ds4rt_spec_stats as a dict (the JSON form of ds4rt_spec_stats_format)."""
    import json

    doc: dict[str, Any] = json.loads(_core._stats_format(raw, True))
    return doc


def stats_line(raw: bytes) -> str:
    """ds4's one-line stats format, followed by ds4rt's extra fields."""
    text: str = _core._stats_format(raw, False)
    return text


def _sub(after: Any, before: Any) -> Any:
    if isinstance(after, dict):
        return {k: _sub(v, before.get(k, 0)) for k, v in after.items()}
    if isinstance(after, list):
        return [_sub(a, b) for a, b in zip(after, before, strict=True)]
    return after - before


def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The statistics of what happened between two snapshots of a session's cumulative
    statistics: counters and timers subtract, levels (LEVEL_FIELDS) keep their later value and
    the derived rates (DERIVED_FIELDS) are computed again from the counters."""
    out = {
        k: (v if k in LEVEL_FIELDS else _sub(v, before.get(k, 0)))
        for k, v in after.items()
        if k not in DERIVED_FIELDS
    }
    return derive(out)


def derive(stats: dict[str, Any]) -> dict[str, Any]:
    """Sets the derived rates (DERIVED_FIELDS) of ``stats`` from its counters, as
    ds4rt_spec_stats_format does, and returns it: ``accept_rate`` = 100·accepted_draft/proposed,
    ``avg_accept`` = accepted_draft/cycles, ``committed_per_verify`` = (accepted_draft +
    verified)/verified, the committed tokens per verified cycle, where verified = full + partial +
    miss_first (the cycles that verified drafts); each 0 without a denominator."""
    proposed, accepted, cycles = (stats.get(f, 0) for f in ("proposed", "accepted_draft", "cycles"))
    verified = sum(stats.get(f, 0) for f in ("full", "partial", "miss_first"))
    stats["accept_rate"] = round(100.0 * accepted / proposed, 2) if proposed else 0.0
    stats["avg_accept"] = round(accepted / cycles, 3) if cycles else 0.0
    stats["committed_per_verify"] = round((accepted + verified) / verified, 3) if verified else 0.0
    return stats


def make_stats_callback(
    fn: Callable[[dict[str, Any], bool], None],
) -> Callable[[bytes, bool], None]:
    """Adapts ``fn(stats_dict, final)`` to the raw callback of the binding."""
    return lambda raw, final: fn(stats_to_dict(raw), final)
