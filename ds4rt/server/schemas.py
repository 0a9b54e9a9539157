"""Request and response bodies of the OpenAI-compatible endpoints (pydantic models).

Requests are validated strictly: a field of the wrong type (``"max_tokens": "8"``), a value
outside its domain, or a field the server does not know is an error naming the field, as
OpenAI's API answers (docs/SERVER.md lists what is accepted). Fields OpenAI defines that ds4rt
cannot honour (``n > 1``, penalties, ``logprobs``, tools) are accepted only at their neutral
values, so a client never gets something other than what it asked for without being told.

Extensions: ``dspark`` (per-request DSpark settings), ``top_k``, ``min_p``, ``ignore_eos``
(llama.cpp and vLLM spell them so) in requests; ``ds4rt`` (stop reason, seed, timings and the
request's DSpark statistics) in responses.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

UINT64_MAX = 2**64 - 1
# Stop strings per request: OpenAI allows 4; more would only slow the matcher down.
MAX_STOP_STRINGS = 16
# DSpark block sizes are 1..16 (docs/DSPARK.md), so at most 16 drafts per cycle.
MAX_DRAFT = 16

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class _Strict(BaseModel):
    """Unknown fields are errors; no type coercion ("8" is not an integer)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class DSparkOptions(_Strict):
    """Per-request DSpark settings (the server's command line gives the defaults)."""

    enabled: bool | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    scheduler: Literal["adaptive", "always", "off"] | None = None
    max_draft: int | None = Field(default=None, ge=0, le=MAX_DRAFT)
    # false: the adaptive scheduler's fixed cost model, so a seeded sampled request draws the
    # same tokens every time (docs/DSPARK.md, "Scheduler")
    measured_costs: bool | None = None


class StreamOptions(_Strict):
    include_usage: bool = False


class ResponseFormat(_Strict):
    type: Literal["text"]


class _Sampling(_Strict):
    """Fields /v1/completions and /v1/chat/completions share."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=0, le=2**31 - 1)
    temperature: float | None = Field(default=None, ge=0.0, le=1e6)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0, le=2**31 - 1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=-1, le=UINT64_MAX)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[str, float] | None = None
    user: str | None = None
    ignore_eos: bool = False
    dspark: DSparkOptions | bool | None = None

    @field_validator("stop")
    @classmethod
    def _check_stop(cls, v: str | list[str] | None) -> list[str]:
        stops = [] if v is None else [v] if isinstance(v, str) else v
        if len(stops) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings")
        if any(s == "" for s in stops):
            raise ValueError("a stop string must not be empty")
        return stops

    @field_validator("n")
    @classmethod
    def _one_choice(cls, v: int) -> int:
        if v != 1:
            raise ValueError("one choice per request: n must be 1")
        return v

    @field_validator("presence_penalty", "frequency_penalty")
    @classmethod
    def _no_penalty(cls, v: float) -> float:
        if v != 0:
            raise ValueError(
                "penalties are not supported (ds4rt samples with temperature, "
                "top_k, top_p and min_p): only 0"
            )
        return v

    @field_validator("logit_bias")
    @classmethod
    def _no_bias(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v:
            raise ValueError("logit_bias is not supported")
        return v

    def dspark_options(self) -> DSparkOptions:
        if isinstance(self.dspark, bool):
            return DSparkOptions(enabled=self.dspark)
        return self.dspark if self.dspark is not None else DSparkOptions()

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class ContentPart(_Strict):
    # other part types carry their own fields (image_url, ...): the type is what is refused
    model_config = ConfigDict(extra="ignore", strict=True)

    type: str
    text: str | None = None

    @model_validator(mode="after")
    def _text_only(self) -> ContentPart:
        if self.type != "text" or self.text is None:
            raise ValueError(f"only text content parts are supported, not {self.type!r}")
        return self


class ChatMessage(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    reasoning_content: str | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text or "" for p in self.content)
        return self.content or ""


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=0, le=2**31 - 1)
    reasoning_effort: ReasoningEffort | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    response_format: ResponseFormat | None = None
    tools: list[Any] | None = None
    tool_choice: Literal["none"] | None = None
    parallel_tool_calls: bool | None = None

    @field_validator("logprobs", "top_logprobs")
    @classmethod
    def _no_logprobs(cls, v: Any) -> Any:
        if v:
            raise ValueError("log probabilities are not supported")
        return v

    @field_validator("tools")
    @classmethod
    def _no_tools(cls, v: list[Any] | None) -> list[Any] | None:
        if v:
            raise ValueError("tool calls are not supported")
        return v

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens if self.max_tokens is None else self.max_tokens


class CompletionRequest(_Sampling):
    prompt: str | list[str] | list[int] | list[list[int]]
    echo: bool = False
    suffix: str | None = None
    best_of: int = 1
    logprobs: int | None = None

    @field_validator("echo", "suffix", "logprobs")
    @classmethod
    def _unsupported(cls, v: Any) -> Any:
        if v:
            raise ValueError("not supported")
        return v

    @field_validator("best_of")
    @classmethod
    def _one_best(cls, v: int) -> int:
        if v != 1:
            raise ValueError("best_of must be 1")
        return v

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, v: Any) -> Any:
        if isinstance(v, list) and v and isinstance(v[0], (str, list)):
            if len(v) != 1:
                raise ValueError("one prompt per request (a list of several is not supported)")
            return v[0]
        return v

    @property
    def limit(self) -> int | None:
        return self.max_tokens


# ---- responses ------------------------------------------------------------------------------


class PromptTokensDetails(BaseModel):
    cached_tokens: int  # prompt tokens a session's context already held (not evaluated again)


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    reasoning_content: str | None = None


class ChatChoice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: str | None
    logprobs: None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    ds4rt: dict[str, Any] | None = None


class ChatDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None


class ChatChunkChoice(BaseModel):
    index: int = 0
    delta: ChatDelta
    finish_reason: str | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: Usage | None = None
    ds4rt: dict[str, Any] | None = None


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    finish_reason: str | None
    logprobs: None = None


class Completion(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None
    ds4rt: dict[str, Any] | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "ds4rt"
    max_model_len: int


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail
