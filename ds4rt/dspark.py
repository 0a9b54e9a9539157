"""DSpark speculative decoding: support models, draft sources, scheduler, statistics.

    model = ds4rt.Model("target.gguf")
    dspark = ds4rt.DSpark(model, "support.gguf")          # validated + self-tested at load
    s = model.session()
    ids = s.generate(prompt_ids, max_tokens=64, dspark=dspark, stats=True)
    print(s.spec_stats_line())                              # ds4's stats line + ds4rt fields

A host drafter is any callable ``draft(context_ids, max_draft) -> ids`` (or ``(ids, probs)``
with probs[i] the distribution draft i was sampled from; without it drafts are verified as
point masses, which is exact too): ``s.generate(..., draft=fn)``.

Greedy output with speculation is token for token the output without it; at temperature > 0
rejection sampling keeps the output distribution the target's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from . import _core
from .model import Model

SCHEDULERS = ("adaptive", "always", "off")

NO_DRAFT_REASONS = (
    "scheduler",
    "tail",
    "confidence",
    "not_ready",
    "op_unavailable",
    "no_room",
    "error",
    "scheduler_off",
    "empty",
)


class DSpark:
    """A DSpark support model (ds4's layout or llama.cpp's dflash layout) bound to ``model``.

    Loading checks every key and tensor against the target and, unless ``self_test=False``,
    runs one proposal; any problem raises with the key, tensor or stage named. ``window`` is
    the drafter's context rows per stage (0 = the target's sliding window). The target's
    numerics and caches are not touched.
    """

    def __init__(
        self, model: Model, path: str | os.PathLike[str], window: int = 0, self_test: bool = True
    ):
        self.model = model
        self.path = os.fspath(path)
        self._d = _core._DSpark(model._m, self.path, window, self_test)
        self.info = self._d.info()

    @property
    def block_size(self) -> int:
        return self.info["block_size"]

    def attach(self, session) -> None:
        """Attach the drafter to ``session`` (before its prompt, so it sees all of it)."""
        _core._attach(session._s, self._d)

    def propose(self, session, anchor: int, max_draft: int | None = None, threshold: float = 0.0):
        """One greedy proposal after ``session``'s context: (drafts, confidences, corrected
        logits). The session must have been attached before its context was evaluated."""
        n = self.block_size if max_draft is None else max_draft
        return _core._propose(session._s, self._d, anchor, n, threshold)


def stats_to_dict(raw: bytes) -> dict:
    """A raw ds4rt_spec_stats as a dict (the JSON form of ds4rt_spec_stats_format)."""
    return json.loads(_core._stats_format(raw, True))


def stats_line(raw: bytes) -> str:
    """ds4's one-line stats format, followed by ds4rt's extra fields."""
    return _core._stats_format(raw, False)


def make_stats_callback(fn: Callable[[dict, bool], None]) -> Callable[[bytes, bool], None]:
    """Adapts ``fn(stats_dict, final)`` to the raw callback of the binding."""
    return lambda raw, final: fn(stats_to_dict(raw), final)
