"""One generation on a borrowed session, run on its own thread and read from the event loop.

The C library releases the GIL while it computes (ds4rt/_generate.pxi), so generations on
different sessions progress in parallel and the event loop stays free to serve other clients.
A ``Generation`` runs ``Session.stream`` on a worker thread and hands its pieces to the loop
through an ``asyncio.Queue``. ``cancel()`` (a client went away) stops the C call after the
current token or prompt pass without blocking the loop. Whatever ends the generation, the
worker posts the session back to the pool only once the C call has returned, so a session is
never lent to two requests at once.

A session comes with what its context holds (``context``): when the prompt extends it, only
the new tokens are evaluated (``reused`` counts the others) - the output is the same, as a
pass's rows are bitwise those of one-token decoding (docs/ARCHITECTURE.md); otherwise the
context is emptied first. Afterwards the context is the prompt plus the generated ids (the
Python API's guarantee, docs/API.md), which goes back to the pool with the session; after a
failure, or with reuse off, the session is emptied.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from ..generation import GenerationOptions, GenerationResult, Piece, StopReason
from .pool import reusable


@dataclass(frozen=True)
class Done:
    result: GenerationResult


@dataclass(frozen=True)
class Failed:
    error: BaseException
    result: GenerationResult | None


Event = Piece | Done | Failed


class Generation:
    def __init__(
        self,
        session: Any,
        prompt_ids: list[int],
        options: GenerationOptions,
        dspark: Any,
        release: Callable[[Any, list[int]], None],
        context: list[int],
        reuse: bool,
    ):
        self.session = session
        self.reused = reusable(context, prompt_ids) if reuse else 0
        self._had_context = bool(context)
        self._reuse = reuse
        self.prompt_ids = prompt_ids
        self.options = options
        self.dspark = dspark
        self._release = release
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._cancelled = threading.Event()
        self._stream: Any = None
        self.finished = asyncio.Event()
        #: called on the event loop once the session is back in the pool
        self.on_finish: Callable[[Generation], None] | None = None
        self._thread = threading.Thread(target=self._run, name="ds4rt-server-gen", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """Stops the generation soon (after the current token); returns at once."""
        self._cancelled.set()
        stream = self._stream
        if stream is not None:
            stream.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def _post(self, item: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is reading any more
            pass

    def _run(self) -> None:  # worker thread
        kept: list[int] = []
        try:
            if self._had_context and not self.reused:
                self.session.reset()
            todo = self.prompt_ids[self.reused :]
            stream = self.session.stream(todo, self.options, dspark=self.dspark)
            self._stream = stream
            if self._cancelled.is_set():  # cancel() ran before the stream existed
                stream.cancel()
            with stream:
                for piece in stream:
                    self._post(piece)
            result = stream.result
            assert result is not None
            if self._reuse and result.stop_reason is not StopReason.ERROR:
                kept = self.prompt_ids + result.ids
            self._post(Done(result))
        except BaseException as e:  # noqa: B036 - handed to the request's coroutine
            self._post(Failed(e, self.session.last_result))
        finally:
            self._stream = None
            try:
                if not kept or self.session.position != len(kept):
                    kept = []
                    self.session.reset()
            finally:
                try:
                    self._loop.call_soon_threadsafe(self._finish, kept)
                except RuntimeError:
                    pass

    def _finish(self, context: list[int]) -> None:  # event loop
        self._release(self.session, context)
        self.finished.set()
        if self.on_finish is not None:
            self.on_finish(self)

    async def events(self) -> AsyncIterator[Event]:
        """Pieces, then one Done or Failed."""
        while True:
            ev = await self._events.get()
            yield ev
            if isinstance(ev, (Done, Failed)):
                return
