"""The compute backends compiled into this build and what each runs.

    import ds4rt
    for b in ds4rt.backends():
        print(b["name"], b["n_devices"], b["ops"]["matmul"])   # weight types matmul runs with

A model loads only on a backend that runs every op and weight type it needs (else
``ds4rt.errors.BackendError`` names what is missing); this answers the question before loading.
See docs/ARCHITECTURE.md, "The backend seam".
"""

from __future__ import annotations

from typing import Any

from . import _core
from .ops import TYPE_IDS

__all__ = ["backends"]

# Ops that read a weight matrix; the others run on f32 activations only.
_WEIGHT_OPS = ("get_rows", "hc_pre", "hc_head", "matmul", "grouped_out", "moe")


def backends() -> list[dict[str, Any]]:
    """One dict per compiled-in backend (CPU first): name, kind, n_devices, ops_version and
    ops: {op name: [weight type names it runs with]} (["F32"] for activation-only ops that it
    runs, [] for an op it lacks). A backend without a visible device lists no ops (ops: None)."""
    names = _core.backend_op_names()
    out = []
    for b in _core.backend_list():
        ops: dict[str, list[str]] | None = None
        if b["n_devices"] > 0:
            ops = {}
            for op, name in enumerate(names):
                types = TYPE_IDS if name in _WEIGHT_OPS else {"F32": TYPE_IDS["F32"]}
                ops[name] = [
                    t for t, tid in types.items() if _core.backend_supports(b["kind"], 0, op, tid)
                ]
        out.append({**b, "ops": ops})
    return out
