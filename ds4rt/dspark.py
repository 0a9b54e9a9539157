"""DSpark speculative decoding: support models and draft sources.

    model = ds4rt.Model.default()
    dspark = ds4rt.DSpark.default(model)               # or ds4rt.DSpark(model, "support.gguf")
    s = model.session()
    result = s.generate("Hello", max_tokens=64, dspark=dspark)
    print(result.spec_stats["accept_rate"], s.spec_stats_line())

A host drafter is any callable ``draft(context_ids, max_draft) -> ids`` (or ``(ids, probs)``
with probs[i] the distribution draft i was sampled from, shape (len(ids), n_vocab); without it
drafts are verified as point masses, which is exact too): ``s.generate(..., draft=fn)``.

Greedy output with speculation is token for token the output without it; at temperature > 0
rejection sampling keeps the output distribution the target's. Statistics helpers are in
ds4rt.stats, the scheduler's options in ds4rt.generation.SchedulerOptions.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from . import _core, data
from ._args import INT32_MAX, UINT32_MAX, bool_arg, float_arg, int_arg
from .enums import NoDraftReason, SchedulerMode
from .model import Model

if TYPE_CHECKING:
    from typing_extensions import Self

    from .model import Session

#: Scheduler modes by name ("adaptive", "always", "off").
SCHEDULERS = tuple(m.name.lower() for m in sorted(SchedulerMode))
#: Why a cycle verified no draft, by ds4rt_no_draft_reason value.
NO_DRAFT_REASONS = tuple(r.name.lower() for r in sorted(NoDraftReason))

__all__ = ["NO_DRAFT_REASONS", "SCHEDULERS", "DSpark"]


class DSpark:
    """A DSpark support model (ds4's layout or llama.cpp's dflash layout) bound to ``model``.

    Loading checks every key and tensor against the target and, unless ``self_test=False``,
    runs one proposal; any problem raises with the key, tensor or stage named. ``window`` is
    the drafter's context rows per stage (0 = the target's sliding window). The target's
    numerics and caches are not touched. A session that generated with it keeps it alive;
    ``close()`` makes it unusable at once and frees it when no open session uses it.
    """

    def __init__(
        self,
        model: Model,
        path: str | os.PathLike[str],
        *,
        window: int = 0,
        self_test: bool = True,
    ):
        if not isinstance(model, Model):
            raise TypeError(f"model must be a ds4rt.Model, not {type(model).__name__}")
        self.model = model
        self.path = os.fspath(path)
        self._d = _core._DSpark(
            model._m,
            self.path,
            int_arg("window", window, 0, UINT32_MAX),
            bool_arg("self_test", self_test),
        )
        self.info: dict[str, Any] = self._d.info()

    @classmethod
    def default(cls, model: Model, *, window: int = 0, self_test: bool = True) -> DSpark:
        """The embedded default support model, for ``Model.default()``."""
        return cls(model, data.default_support(), window=window, self_test=self_test)

    @property
    def block_size(self) -> int:
        return int(self.info["block_size"])

    @property
    def closed(self) -> bool:
        return bool(self._d.closed)

    def close(self) -> None:
        self._d.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ds4rt.DSpark {self.path!r} block_size={self.block_size}>"

    def attach(self, session: Session) -> None:
        """Attach the drafter to ``session`` (before its prompt, so it sees all of it)."""
        _core._attach(session._s, self._d)

    def propose(
        self, session: Session, anchor: int, max_draft: int | None = None, threshold: float = 0.0
    ) -> tuple[list[int], npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """One greedy proposal after ``session``'s context: (drafts, confidences, corrected
        logits). The session must have been attached before its context was evaluated."""
        n = self.block_size if max_draft is None else int_arg("max_draft", max_draft, 0, INT32_MAX)
        ids, conf, logits = _core._propose(
            session._s,
            self._d,
            int_arg("anchor", anchor, -INT32_MAX - 1, INT32_MAX),
            n,
            float_arg("threshold", threshold, 0.0, 1.0),
        )
        return ids, conf, logits
