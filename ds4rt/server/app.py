"""The HTTP side: a Starlette application with OpenAI's endpoints over a ServerEngine.

    POST /v1/chat/completions   POST /v1/completions   (stream: server-sent events)
    GET  /v1/models   GET /health   GET /metrics (Prometheus text)   GET /stats (JSON)

Request bodies are read and checked here (size, UTF-8, JSON, schema) before any model work;
prompts are tokenized on a worker thread; each generation runs on its own thread with a
session from the pool (runner.Generation), so the event loop only moves bytes. A client that
disconnects, mid-stream or while waiting for a whole response, cancels its generation, whose
session goes back to the pool once the C call has stopped.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..generation import GenerationResult
from .engine import FINISH_REASONS, Job, ServerEngine
from .errors import APIError, from_validation, parse_body
from .metrics import CONTENT_TYPE
from .pool import QueueFull, ShuttingDown
from .reasoning import ReasoningSplitter
from .runner import Done, Failed, Generation
from .schemas import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatDelta,
    Completion,
    CompletionChoice,
    CompletionRequest,
    ModelCard,
    ModelList,
    PromptTokensDetails,
    Usage,
)

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _sse(obj: BaseModel | dict[str, Any]) -> str:
    """One server-sent event; the optional top-level fields are left out when unset."""
    doc = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    for key in ("usage", "ds4rt"):
        if doc.get(key, 0) is None:
            del doc[key]
    return f"data: {json.dumps(doc, ensure_ascii=False)}\n\n"


def _usage(job: Job, result: GenerationResult) -> Usage:
    n = len(result.ids)
    return Usage(
        prompt_tokens=len(job.prompt_ids),
        completion_tokens=n,
        total_tokens=len(job.prompt_ids) + n,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=job.cached_tokens),
    )


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise APIError(413, f"The request body is larger than {limit} bytes", code="body_too_large")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise APIError(
                413, f"The request body is larger than {limit} bytes", code="body_too_large"
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone away (the body has been read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _watch_disconnect(request: Request, gen: Generation) -> None:
    """Cancels gen when the client goes away (the body has been read, so the next message the
    server gets for this request is the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            gen.cancel()
            return


class _Handlers:
    def __init__(self, engine: ServerEngine):
        self.engine = engine
        self.draining = False
        self.running: set[Generation] = set()  # generations whose C call has not returned

    # ---- plumbing ---------------------------------------------------------------------------

    def _check_auth(self, request: Request) -> None:
        key = self.engine.config.api_key
        if key is None:
            return
        if request.headers.get("authorization", "") != f"Bearer {key}":
            raise APIError(
                401,
                "Incorrect or missing API key (Authorization: Bearer KEY)",
                code="invalid_api_key",
            )

    async def _parse(self, request: Request, model: type[BaseModel]) -> Any:
        self._check_auth(request)
        raw = await _read_body(request, self.engine.config.max_body_bytes)
        doc = parse_body(raw)
        try:
            return model.model_validate(doc)
        except ValidationError as e:
            raise from_validation(e) from None

    def endpoint(
        self, name: str, fn: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        metrics = self.engine.metrics

        async def wrapped(request: Request) -> Response:
            try:
                response = await fn(request)
            except APIError as e:
                # refused before generating (a failed generation is a finished one, "error")
                if e.status < 500 or e.status == 503:
                    why = {429: "queue_full", 503: "shutting_down"}.get(e.status)
                    metrics.rejected.labels(why or e.code or e.type).inc()
                response = e.response()
            except ClientDisconnect:  # gone while its body was read or while it was queued
                metrics.rejected.labels("client_disconnected").inc()
                response = Response(status_code=499)
            metrics.requests.labels(name, str(response.status_code)).inc()
            return response

        return wrapped

    # ---- generation -------------------------------------------------------------------------

    async def _acquire(self, request: Request, prompt: list[int]) -> Any:
        """A session, or ClientDisconnect if the client leaves while the request is queued."""
        pool = self.engine.pool
        if pool.busy < pool.size and not pool.waiting:
            return await pool.acquire(prompt)
        acquiring = asyncio.ensure_future(pool.acquire(prompt))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({acquiring, gone}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            acquiring.cancel()
            raise
        finally:
            gone.cancel()  # a receive that is cancelled consumes no message
        if acquiring.done():
            return acquiring.result()
        acquiring.cancel()  # hands back a session given to it meanwhile (SessionPool.acquire)
        raise ClientDisconnect()

    async def _start(self, request: Request, job: Job) -> Generation:
        try:
            session = await self._acquire(request, job.prompt_ids)
        except QueueFull as e:
            raise APIError(429, str(e), type="rate_limit_error", code="queue_full") from None
        except ShuttingDown as e:
            raise APIError(503, str(e), type="server_error", code="shutting_down") from None
        self.engine.metrics.queue_time.observe(time.perf_counter() - job.arrived)
        pool = self.engine.pool
        gen = Generation(
            session,
            job.prompt_ids,
            job.options,
            job.dspark,
            pool.release,
            pool.contexts[id(session)],
            self.engine.config.reuse_prefix,
        )
        job.cached_tokens = gen.reused
        self.running.add(gen)
        gen.on_finish = self.running.discard
        gen.start()
        return gen

    async def _whole(self, request: Request, job: Job) -> tuple[str, GenerationResult, str]:
        """Runs a job to its end: (text, result, finish_reason); an APIError on failure."""
        gen = await self._start(request, job)
        watcher = asyncio.create_task(_watch_disconnect(request, gen))
        first: float | None = None
        text: list[str] = []
        try:
            async for ev in gen.events():
                if isinstance(ev, Done):
                    reason = FINISH_REASONS[ev.result.stop_reason]
                    self.engine.record(job, ev.result, first, reason)
                    return "".join(text), ev.result, reason
                if isinstance(ev, Failed):
                    self.engine.record(job, ev.result, first, "error")
                    raise APIError(
                        500,
                        f"generation failed: {ev.error}",
                        type="server_error",
                        code="generation_failed",
                    )
                if first is None and ev.ids:
                    first = time.perf_counter()
                self.engine.metrics.generation_rate.add(len(ev.ids))
                text.append(ev.text)
        finally:
            watcher.cancel()
            gen.cancel()  # a no-op when it has ended; stops it if this coroutine was cancelled
        raise AssertionError("the generation ended without a result")

    async def _stream(self, request: Request, job: Job) -> AsyncIterator[str]:
        gen = await self._start(request, job)
        # watched from here, so a client gone before the body iterator starts still cancels it
        watcher = asyncio.create_task(_watch_disconnect(request, gen))
        return self._events(job, gen, watcher)

    async def _events(
        self, job: Job, gen: Generation, watcher: asyncio.Task[None]
    ) -> AsyncIterator[str]:
        rid = ("chatcmpl-" if job.kind == "chat" else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        first: float | None = None
        recorded = False

        split = ReasoningSplitter(job.think != "none")

        def chunk(
            text: str | None, finish: str | None = None, reasoning: str | None = None, **extra: Any
        ) -> str:
            if job.kind == "chat":
                delta = ChatDelta(content=text, reasoning_content=reasoning)
                if extra.pop("role", False):
                    delta.role = "assistant"
                return _sse(
                    ChatCompletionChunk(
                        id=rid,
                        created=created,
                        model=job.model_name,
                        choices=[ChatChunkChoice(delta=delta, finish_reason=finish)],
                        **extra,
                    )
                )
            return _sse(
                Completion(
                    id=rid,
                    created=created,
                    model=job.model_name,
                    choices=[CompletionChoice(text=text or "", finish_reason=finish)],
                    **extra,
                )
            )

        try:
            if job.kind == "chat":
                yield chunk("", role=True)
            async for ev in gen.events():
                if isinstance(ev, Done):
                    r = ev.result
                    reason = FINISH_REASONS[r.stop_reason]
                    self.engine.record(job, r, first, reason)
                    recorded = True
                    if gen.cancelled:
                        return
                    if held := split.finish():
                        yield chunk(None, reasoning=held)
                    yield chunk(None, reason, ds4rt=self.engine.extension(job, r))
                    if job.include_usage:
                        usage = _usage(job, r)
                        if job.kind == "chat":
                            yield _sse(
                                ChatCompletionChunk(
                                    id=rid,
                                    created=created,
                                    model=job.model_name,
                                    choices=[],
                                    usage=usage,
                                )
                            )
                        else:
                            yield _sse(
                                Completion(
                                    id=rid,
                                    created=created,
                                    model=job.model_name,
                                    choices=[],
                                    usage=usage,
                                )
                            )
                    yield "data: [DONE]\n\n"
                    return
                if isinstance(ev, Failed):
                    self.engine.record(job, ev.result, first, "error")
                    recorded = True
                    err = APIError(
                        500,
                        f"generation failed: {ev.error}",
                        type="server_error",
                        code="generation_failed",
                    )
                    yield _sse(err.body())
                    yield "data: [DONE]\n\n"
                    return
                if first is None and ev.ids:
                    first = time.perf_counter()
                self.engine.metrics.generation_rate.add(len(ev.ids))
                if ev.text and job.kind == "chat":
                    reasoning, content = split.feed(ev.text)
                    if reasoning:
                        yield chunk(None, reasoning=reasoning)
                    if content:
                        yield chunk(content)
                elif ev.text:
                    yield chunk(ev.text)
        finally:
            watcher.cancel()
            gen.cancel()
            if not recorded:  # the client went away: counted once the generation has stopped
                asyncio.get_running_loop().create_task(self._record_abort(job, gen, first))

    async def _record_abort(self, job: Job, gen: Generation, first: float | None) -> None:
        await gen.finished.wait()
        self.engine.record(job, gen.session.last_result, first, "abort")

    async def _respond(self, request: Request, job: Job) -> Response:
        if job.stream:
            events = await self._stream(request, job)
            return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)
        text, result, reason = await self._whole(request, job)
        rid_prefix = "chatcmpl-" if job.kind == "chat" else "cmpl-"
        common: dict[str, Any] = {
            "id": rid_prefix + uuid.uuid4().hex,
            "created": int(time.time()),
            "model": job.model_name,
            "usage": _usage(job, result),
            "ds4rt": self.engine.extension(job, result),
        }
        body: BaseModel
        if job.kind == "chat":
            split = ReasoningSplitter(job.think != "none")
            reasoning, content = split.feed(text)
            reasoning += split.finish()
            message = AssistantMessage(
                content=content, reasoning_content=reasoning if job.think != "none" else None
            )
            body = ChatCompletion(
                choices=[ChatChoice(message=message, finish_reason=reason)], **common
            )
        else:
            body = Completion(choices=[CompletionChoice(text=text, finish_reason=reason)], **common)
        return Response(body.model_dump_json(), media_type="application/json")

    # ---- endpoints --------------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        arrived = time.perf_counter()
        req: ChatCompletionRequest = await self._parse(request, ChatCompletionRequest)
        self.engine.model_name(req.model)
        ids, think = await run_in_threadpool(self.engine.chat_prompt, req)
        return await self._respond(request, self.engine.job(req, ids, think, arrived))

    async def completion(self, request: Request) -> Response:
        arrived = time.perf_counter()
        req: CompletionRequest = await self._parse(request, CompletionRequest)
        self.engine.model_name(req.model)
        ids = await run_in_threadpool(self.engine.completion_prompt, req)
        return await self._respond(request, self.engine.job(req, ids, "none", arrived))

    async def models(self, request: Request) -> Response:
        self._check_auth(request)
        e = self.engine
        cards = [ModelCard(id=n, created=e.created, max_model_len=e.n_ctx) for n in e.names]
        return Response(ModelList(data=cards).model_dump_json(), media_type="application/json")

    async def model(self, request: Request) -> Response:
        self._check_auth(request)
        e = self.engine
        name = e.model_name(request.path_params["name"])
        card = ModelCard(id=name, created=e.created, max_model_len=e.n_ctx)
        return Response(card.model_dump_json(), media_type="application/json")

    async def health(self, request: Request) -> Response:
        pool = self.engine.pool
        doc = {
            "status": "draining" if self.draining else "ok",
            "sessions": pool.size,
            "busy": pool.busy,
            "waiting": pool.waiting,
            "dspark": self.engine.dspark is not None,
        }
        return JSONResponse(doc, status_code=503 if self.draining else 200)

    async def metrics(self, request: Request) -> Response:
        return Response(self.engine.metrics.render(), media_type=CONTENT_TYPE)

    async def stats(self, request: Request) -> Response:
        self._check_auth(request)
        return JSONResponse({"spec_stats": self.engine.metrics.spec_total})

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return APIError(
            404, f"No such endpoint: {request.method} {request.url.path}", code="not_found"
        ).response()

    async def bad_method(self, request: Request, exc: Exception) -> Response:
        return APIError(
            405, f"{request.method} is not allowed on {request.url.path}", code="method_not_allowed"
        ).response()

    async def internal(self, request: Request, exc: Exception) -> Response:
        return APIError(
            500, f"internal error: {type(exc).__name__}: {exc}", type="server_error"
        ).response()


def create_app(engine: ServerEngine) -> Starlette:
    """The ASGI application over engine. Its lifespan ends, at shutdown, what is still running
    (the ASGI server has already given in-flight requests their grace period), waits for every
    session to come back and frees the sessions; the model and support model stay open (their
    owner closes them)."""
    h = _Handlers(engine)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        h.draining = True
        for gen in list(h.running):  # e.g. a stream whose client never read it
            gen.cancel()
        await engine.pool.drain()
        engine.pool.close()

    routes = [
        Route("/v1/chat/completions", h.endpoint("chat", h.chat), methods=["POST"]),
        Route("/v1/completions", h.endpoint("completions", h.completion), methods=["POST"]),
        Route("/v1/models", h.endpoint("models", h.models), methods=["GET"]),
        Route("/v1/models/{name:path}", h.endpoint("models", h.model), methods=["GET"]),
        Route("/health", h.health, methods=["GET"]),
        Route("/metrics", h.metrics, methods=["GET"]),
        Route("/stats", h.endpoint("stats", h.stats), methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={404: h.not_found, 405: h.bad_method, 500: h.internal},
    )
    app.state.engine = engine
    app.state.handlers = h
    return app
