"""The memory plan of a model: what loading a deepseek4 file and running one session would hold,
from the file's header alone (``ds4rt_model_memory_plan``; docs/PERFORMANCE.md, "Memory of the
real model"). No tensor data is read, so a header written without its data (the real-layout
header of ``tools/make_big_model.py prepare``) serves as well as the 81 GiB file.

    plan = ds4rt.memory.memory_plan("big43.header", n_ctx=200_000, support="support.gguf")
    plan["totals"]["dspark"]            # bytes: weights + state + scratch + the drafter's

Every figure is in bytes. ``weights["total"]`` is what ``Model.info["memory"]["weights"]`` of
the loaded file reports, split by kind (``weights["by_kind"]``: embedding, head, attention,
compressors, indexer, router, experts, shared_experts, hyper_connections, norms);
``state`` is one session's (window rings, compressor frontiers, compressed KV rows and indexer
rows at ``n_ctx``, and per 1024 tokens), from the same layout the session allocates;
``scratch`` and the drafter's buffers are measured on the CPU backend; ``cache`` gives the
Q8->F16 expansion cache for each policy on a GPU backend (docs/CACHE.md; the CPU backend holds
none under any policy).
"""

from __future__ import annotations

import os
from typing import Any

from . import _core, data
from ._args import int_arg

__all__ = ["memory_plan"]

INT32_MAX = 2**31 - 1


def memory_plan(
    path: str | os.PathLike[str] | None = None,
    *,
    n_ctx: int = 4096,
    max_batch: int = 32,
    support: str | os.PathLike[str] | None = None,
    dspark_window: int = 0,
    cache_budget: int = 0,
    numerics: str = "official",
    n_threads: int = 0,
) -> dict[str, Any]:
    """The plan of ``path`` (default: the embedded target, with the embedded support unless
    ``support`` is given) for one session of ``n_ctx`` tokens and ``max_batch``; ``support`` adds
    the DSpark drafter's figures. ``cache_budget`` is the budget of the cache's ``on`` policy
    (0: none). ``totals`` sums the four cases: plain or with DSpark, cache off or on."""
    if path is None:
        path = data.default_target()
        if support is None:
            support = data.default_support()
    plan: dict[str, Any] = _core.memory_plan(
        os.fspath(path),
        int_arg("n_ctx", n_ctx, 1, 2**31),
        int_arg("max_batch", max_batch, 1, 4096),
        None if support is None else os.fspath(support),
        int_arg("dspark_window", dspark_window, 0, 65536),
        int_arg("cache_budget", cache_budget, 0, 2**64 - 1),
        numerics,
        int_arg("n_threads", n_threads, -1, INT32_MAX),
    )
    plan["path"] = os.fspath(path)
    plan["support"] = None if support is None else os.fspath(support)
    cache = plan["cache"]
    on = cache["on_within_budget"] if cache_budget else cache["on"]
    cache["by_policy"] = {"off": 0, "auto": 0, "on": on}
    base = plan["weights"]["total"] + plan["state"]["total"] + plan["scratch"]
    d = plan["drafter"]
    drafter = d["weights"] + d["state"] + d["scratch"] if d else 0
    plan["totals"] = {
        "plain": base,
        "plain_cache_on": base + on,
        "dspark": base + drafter if d else None,
        "dspark_cache_on": base + drafter + on if d else None,
    }
    return plan
