"""The server's model side: one model (and support model), a pool of sessions, the metrics, and
the translation of an OpenAI request into prompt ids and GenerationOptions."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from ..generation import GenerationOptions, GenerationResult, SchedulerOptions, StopReason
from .errors import APIError, invalid
from .metrics import Metrics
from .options import ServerConfig
from .pool import SessionPool
from .schemas import ChatCompletionRequest, CompletionRequest

T = TypeVar("T")


def pick(value: T | None, default: T) -> T:
    """The request's value, or the server's default where the request has none."""
    return default if value is None else value


# OpenAI's finish_reason for each way a generation ends.
FINISH_REASONS = {
    StopReason.EOS: "stop",
    StopReason.STOP_STRING: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTEXT_FULL: "length",
    StopReason.CALLBACK: "stop",
    StopReason.INTERRUPTED: "abort",
    StopReason.ERROR: "error",
}

# reasoning_effort -> the chat template's think mode (as ds4-server maps it: "max" is Think
# Max, every other level normal thinking).
THINK_FOR_EFFORT: dict[str, str] = {
    "none": "none",
    "minimal": "high",
    "low": "high",
    "medium": "high",
    "high": "high",
    "xhigh": "high",
    "max": "max",
}


@dataclass
class Job:
    """One request, ready to generate."""

    kind: str  # "chat" or "completion"
    model_name: str
    prompt_ids: list[int]
    options: GenerationOptions
    dspark: Any  # a ds4rt.DSpark or None
    decoding_why: str  # "dspark", or why not: "request", "server", "no_support_model"
    stream: bool
    include_usage: bool
    think: str
    arrived: float  # time.perf_counter() when the request arrived
    cached_tokens: int = 0  # prompt tokens the session's context already held


class ServerEngine:
    """Owns the sessions; the model and support model stay the caller's (closed by it)."""

    def __init__(self, model: Any, dspark: Any, config: ServerConfig):
        self.model = model
        self.dspark = dspark
        self.config = config
        self.names = config.names_for(model.path)
        self.created = int(time.time())
        block = dspark.block_size if dspark is not None else 0
        batch = config.max_batch if config.max_batch is not None else max(32, block + 1)
        sessions = [
            model.session(n_ctx=config.n_ctx, max_batch=batch) for _ in range(config.sessions)
        ]
        if dspark is not None:  # from the first token on, so a kept context has its drafts
            for s in sessions:
                dspark.attach(s)
        self.n_ctx = sessions[0].n_ctx
        self.pool = SessionPool(sessions, config.queue)
        self.metrics = Metrics()
        self.metrics.pool = self.pool
        self.metrics.model = model
        self.metrics.spec_total = dict(sessions[0].spec_stats())  # the fields, all zero
        self.metrics.add_spec_stats({})

    # ---- requests -> jobs -------------------------------------------------------------------

    def model_name(self, requested: str | None) -> str:
        if requested is None:
            return self.names[0]
        if requested not in self.names:
            raise APIError(
                404,
                f"The model `{requested}` does not exist; this server serves "
                + ", ".join(f"`{n}`" for n in self.names),
                param="model",
                code="model_not_found",
            )
        return requested

    def _options(
        self, req: ChatCompletionRequest | CompletionRequest
    ) -> tuple[GenerationOptions, Any, str]:
        d = self.config.defaults
        so = req.dspark_options()
        if so.enabled is None:
            use = self.config.dspark and self.dspark is not None
            why = "dspark" if use else ("no_support_model" if self.dspark is None else "server")
        else:
            use = so.enabled
            why = "dspark" if use else "request"
        if use and self.dspark is None:
            raise invalid(
                "DSpark was asked for, but this server has no support model "
                "(start it with --support FILE --dspark)",
                "dspark.enabled",
            )
        sched = d.scheduler
        assert isinstance(sched, SchedulerOptions)
        if so.scheduler is not None or so.max_draft is not None or so.measured_costs is not None:
            sched = dataclasses.replace(
                sched,
                mode=so.scheduler if so.scheduler is not None else sched.mode,
                max_draft=so.max_draft if so.max_draft is not None else sched.max_draft,
                measured_costs=(
                    so.measured_costs if so.measured_costs is not None else sched.measured_costs
                ),
            )
        limit = req.limit
        try:
            opts = dataclasses.replace(
                d,
                max_tokens=pick(limit, d.max_tokens),
                temperature=pick(req.temperature, d.temperature),
                top_p=pick(req.top_p, d.top_p),
                top_k=pick(req.top_k, d.top_k),
                min_p=pick(req.min_p, d.min_p),
                seed=pick(req.seed, d.seed),
                stop=tuple(req.stop) if req.stop else d.stop,
                stop_at_eos=d.stop_at_eos and not req.ignore_eos,
                confidence_threshold=pick(so.confidence, d.confidence_threshold),
                scheduler=sched,
            )
        except (TypeError, ValueError) as e:
            raise invalid(str(e)) from None
        return opts, (self.dspark if use else None), why

    def _check_fit(self, n_prompt: int, limit: int | None, what: str) -> None:
        n_ctx = self.n_ctx
        if n_prompt == 0:
            raise invalid("The prompt is empty", "prompt" if what == "prompt" else "messages")
        if n_prompt >= n_ctx:
            raise invalid(
                f"This model's maximum context length is {n_ctx} tokens. However, your {what} "
                f"resulted in {n_prompt} tokens, leaving no room for a completion.",
                "messages" if what == "messages" else "prompt",
                "context_length_exceeded",
            )
        if limit is not None and n_prompt + limit > n_ctx:
            raise invalid(
                f"This model's maximum context length is {n_ctx} tokens. However, you "
                f"requested {n_prompt + limit} tokens ({n_prompt} in the {what}, {limit} in the "
                f"completion). Please reduce the length of the {what} or completion.",
                "max_tokens",
                "context_length_exceeded",
            )

    def chat_prompt(self, req: ChatCompletionRequest) -> tuple[list[int], str]:
        """Prompt ids on the chat template (runs in a worker thread: long prompts take time)."""
        think = (
            THINK_FOR_EFFORT[req.reasoning_effort] if req.reasoning_effort else self.config.think
        )
        messages: list[dict[str, Any]] = []
        if self.config.system and not any(m.role in ("system", "developer") for m in req.messages):
            messages.append({"role": "system", "content": self.config.system})
        for m in req.messages:
            msg: dict[str, Any] = {"role": m.role, "content": m.text()}
            if m.reasoning_content is not None:
                msg["reasoning"] = m.reasoning_content
            messages.append(msg)
        try:
            return self.model.encode_chat(messages, think=think), think
        except (TypeError, ValueError) as e:
            raise invalid(str(e), "messages") from None

    def completion_prompt(self, req: CompletionRequest) -> list[int]:
        p = req.prompt
        if isinstance(p, str):
            tok = self.model._need_tokenizer()
            ids: list[int] = tok.encode(p, special=True)
            if tok.bos_id is not None and (not ids or ids[0] != tok.bos_id):
                ids.insert(0, tok.bos_id)
            return ids
        assert isinstance(p, list)
        n_vocab = self.model.n_vocab
        for i, t in enumerate(p):
            if not isinstance(t, int) or not 0 <= t < n_vocab:
                raise invalid(
                    f"prompt[{i}] = {t!r} is not a token id of this model [0, {n_vocab})", "prompt"
                )
        return list(p)  # type: ignore[arg-type]

    def job(
        self,
        req: ChatCompletionRequest | CompletionRequest,
        prompt_ids: list[int],
        think: str,
        arrived: float,
    ) -> Job:
        name = self.model_name(req.model)
        opts, dspark, why = self._options(req)
        kind = "chat" if isinstance(req, ChatCompletionRequest) else "completion"
        self._check_fit(len(prompt_ids), req.limit, "messages" if kind == "chat" else "prompt")
        return Job(
            kind=kind,
            model_name=name,
            prompt_ids=prompt_ids,
            options=opts,
            dspark=dspark,
            decoding_why=why,
            stream=req.stream,
            include_usage=req.include_usage,
            think=think,
            arrived=arrived,
        )

    # ---- results -> metrics and extension fields --------------------------------------------

    def record(
        self,
        job: Job,
        result: GenerationResult | None,
        first_token_at: float | None,
        finish_reason: str,
    ) -> None:
        m = self.metrics
        now = time.perf_counter()
        m.finished.labels(finish_reason).inc()
        m.decoding.labels("dspark" if job.dspark is not None else "plain", job.decoding_why).inc()
        m.e2e.observe(now - job.arrived)
        if first_token_at is not None:
            m.ttft.observe(first_token_at - job.arrived)
        if result is None:
            return
        t = result.timings
        m.prompt_tokens.inc(t.prompt_tokens)
        m.prefix_queries.inc(len(job.prompt_ids))
        m.prefix_hits.inc(job.cached_tokens)
        m.generation_tokens.inc(t.generated_tokens)
        m.prompt_rate.add(t.prompt_tokens)
        m.prefill_time.observe(t.prompt_seconds)
        m.decode_time.observe(t.generation_seconds)
        m.prompt_len.observe(t.prompt_tokens)
        m.generation_len.observe(t.generated_tokens)
        if result.spec_stats is not None:
            m.add_spec_stats(result.spec_stats)

    @staticmethod
    def extension(job: Job, result: GenerationResult) -> dict[str, Any]:
        """The response's ``ds4rt`` field: how the request was decoded and what it cost."""
        t = result.timings
        return {
            "stop_reason": str(result.stop_reason),
            "cached_tokens": job.cached_tokens,
            "stop_string": result.stop_string,
            "seed": result.seed,
            "dspark": job.dspark is not None,
            "decoding": job.decoding_why,
            "timings": {
                "prompt_tokens": t.prompt_tokens,
                "prompt_seconds": t.prompt_seconds,
                "prompt_tokens_per_second": t.prompt_tokens_per_second,
                "generated_tokens": t.generated_tokens,
                "generation_seconds": t.generation_seconds,
                "generation_tokens_per_second": t.generation_tokens_per_second,
            },
            "spec_stats": result.spec_stats,
        }
