"""A fixed set of sessions on one model, lent to requests one at a time, with a bounded queue.

A ds4rt session serves one call at a time (docs/API.md); the model is shared by all of them
and their calls run in parallel. A request borrows a session for its whole generation; when
every session is busy it waits in a queue of bounded length, and when the queue is full it is
refused at once (``QueueFull``: the server answers 429). The pool lives on the event loop: its
methods are called from the loop's thread only (``release`` is posted there by the thread that
ran the generation, once the session is free again and reset).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any


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

    async def acquire(self) -> Any:
        """A free session, waiting for one if need be; QueueFull or ShuttingDown at once."""
        if self._closing:
            raise ShuttingDown("the server is shutting down")
        if self._idle and not self.waiting:
            return self._take()
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
                self.release(fut.result())  # handed a session just as the waiter went away
            else:
                fut.cancel()
            raise
        finally:
            try:
                self._waiters.remove(fut)
            except ValueError:
                pass

    def _take(self) -> Any:
        s = self._idle.popleft()
        self._all_idle.clear()
        return s

    def release(self, session: Any) -> None:
        """Returns a session (free and reset) to the pool: to the first waiter, if any."""
        if session not in self.sessions:
            raise ValueError("release of a session this pool does not hold")
        if session in self._idle:
            raise ValueError("session released twice")
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
