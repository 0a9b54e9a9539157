"""A fixed set of sessions on one model, lent to requests one at a time, with a bounded queue.

A ds4rt session serves one call at a time (docs/API.md); the model is shared by all of them
and their calls run in parallel. A request borrows a session for its whole generation; when
every session is busy it waits in a queue of bounded length, and when the queue is full it is
refused at once (``QueueFull``: the server answers 429). The pool lives on the event loop: its
methods are called from the loop's thread only (``release`` is posted there by the thread that
ran the generation, once the session is free again).

The pool remembers what each idle session's context holds (the prompt and generated ids of its
last request), so a request whose prompt extends one of them - a chat client resending the
conversation with a new turn - gets that session and evaluates only the new tokens
(``reusable``); the others start from an empty context.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import Any


def reusable(context: Sequence[int], prompt: Sequence[int]) -> int:
    """Tokens of ``context`` a request for ``prompt`` can keep: all of them if the prompt
    extends the context by at least one token (the one whose logits start generation), else
    none (rolling back further than the last pass is not possible, docs/API.md)."""
    n = len(context)
    if 0 < n < len(prompt) and list(prompt[:n]) == list(context):
        return n
    return 0


class QueueFull(Exception):
    """Every session is busy and the queue holds as many requests as it may."""


class ShuttingDown(Exception):
    """The server is draining: it finishes what it has and takes nothing new."""


class SessionPool:
    def __init__(self, sessions: list[Any], max_queue: int):
        if not sessions:
            raise ValueError("a pool needs at least one session")
        if max_queue < 0:
            raise ValueError(f"max_queue must be >= 0, not {max_queue}")
        self.sessions = list(sessions)
        self.max_queue = max_queue
        self._idle: deque[Any] = deque(sessions)
        #: what each session's context holds (by id), kept while it is idle
        self.contexts: dict[int, list[int]] = {id(x): [] for x in sessions}
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._closing = False
        self._all_idle = asyncio.Event()
        self._all_idle.set()

    @property
    def size(self) -> int:
        return len(self.sessions)

    @property
    def busy(self) -> int:
        """Sessions lent out (requests generating)."""
        return len(self.sessions) - len(self._idle)

    @property
    def waiting(self) -> int:
        """Requests queued for a session."""
        return sum(1 for f in self._waiters if not f.done())

    async def acquire(self, prompt: Sequence[int] = ()) -> Any:
        """A free session, waiting for one if need be; QueueFull or ShuttingDown at once. Of
        the idle sessions, the one whose context the prompt extends furthest (else an empty
        one); a waiter gets whichever comes back first."""
        if self._closing:
            raise ShuttingDown("the server is shutting down")
        if self._idle and not self.waiting:
            return self._take(prompt)
        if self.waiting >= self.max_queue:
            raise QueueFull(
                f"all {self.size} sessions are busy and {self.waiting} requests are queued "
                f"(the queue holds {self.max_queue}); retry later"
            )
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                # handed a session just as the waiter went away: back, context unchanged
                got = fut.result()
                self.release(got, self.contexts[id(got)])
            else:
                fut.cancel()
            raise
        finally:
            try:
                self._waiters.remove(fut)
            except ValueError:
                pass

    def _take(self, prompt: Sequence[int]) -> Any:
        best = max(
            self._idle,
            key=lambda x: (reusable(self.contexts[id(x)], prompt), -len(self.contexts[id(x)])),
        )
        self._idle.remove(best)
        self._all_idle.clear()
        return best

    def release(self, session: Any, context: Sequence[int] = ()) -> None:
        """Returns a free session to the pool, with what its context now holds: to the first
        waiter, if any."""
        if session not in self.sessions:
            raise ValueError("release of a session this pool does not hold")
        if session in self._idle:
            raise ValueError("session released twice")
        self.contexts[id(session)] = list(context)
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                if self._closing:
                    fut.set_exception(ShuttingDown("the server is shutting down"))
                    continue
                fut.set_result(session)
                return
        self._idle.append(session)
        if len(self._idle) == len(self.sessions):
            self._all_idle.set()

    async def drain(self) -> None:
        """Takes no more requests (queued ones get ShuttingDown) and waits until every
        session is back."""
        self._closing = True
        for fut in self._waiters:
            if not fut.done():
                fut.set_exception(ShuttingDown("the server is shutting down"))
        await self._all_idle.wait()

    def close(self) -> None:
        """Frees the sessions (after drain)."""
        for s in self.sessions:
            s.close()
