"""Loading a DeepSeek V4 Flash (``deepseek4``) GGUF and running it.

    with ds4rt.Model.default() as model:           # or ds4rt.Model("target.gguf")
        s = model.session(n_ctx=4096)
        print(s.generate("Hello", max_tokens=16))   # a GenerationResult; str() is the text
        rows = s.logits([0, 17, 42])                 # teacher-forced logits, (3, n_vocab)

A ``Model`` is read-only after loading and may be shared by sessions and threads; a
``Session`` holds one context and serves one call at a time (a second thread, or a callback
calling back into its own session, gets ``BusyError``). ``close()`` (or leaving the ``with``
block) frees the C objects at once; a closed object raises ``ClosedError``. Closing a model
closes its sessions and support models.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from . import _core, data
from ._args import INT32_MAX, INT64_MAX, UINT32_MAX, UINT64_MAX, int_arg, number_arg, str_arg
from .enums import BackendKind, TraceStage
from .errors import StateError
from .generation import (
    DraftFn,
    GenerationOptions,
    GenerationResult,
    Prompt,
    ScheduleFn,
    StatsFn,
    Stream,
    TokenFn,
    _Call,
    resolve_options,
)
from .stats import stats_line, stats_to_dict
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

    from .dspark import DSpark
    from .generation import GenerationKwargs

NUMERICS = ("official", "llama.cpp")
CACHE_POLICIES = ("auto", "off", "on")
LOAD_MODES = ("map", "copy")
BACKENDS = tuple(b.name.lower() for b in sorted(BackendKind))

#: ``progress(done_bytes, total_bytes)`` while a model loads (monotonic, ends at total).
ProgressFn = Callable[[int, int], None]

#: Names of the trace stages, by ds4rt_trace_stage value (see Session.set_trace).
TRACE_STAGES = tuple(s.name.lower() for s in sorted(TraceStage))


class Model:
    """A deepseek4 target model.

    ``numerics="official"`` follows the trained model (FP8 round trip of KV rows, FP4 round
    trip of the indexer's q/k); ``"llama.cpp"`` turns both simulations off, matching
    llama.cpp b11739 ("llama.cpp-compatible numerics"). ``n_threads <= 0`` uses every CPU.
    ``cache`` is the Q8->F16 expansion cache policy ("auto", "off", "on", with
    ``cache_budget`` bytes); ``info["cache"]`` reports its state and why (docs/CACHE.md).
    ``backend`` ("auto", "cpu", "cuda", "hip") and ``device`` pick where it runs: a backend this
    build or machine lacks is a BackendError naming why, never a silent fallback;
    ``info["backend"]`` and ``info["memory"]`` say where it runs and what it holds.
    ``progress(done, total)`` is called with bytes as the weights are bound (or uploaded).
    Ctrl-C during the load raises KeyboardInterrupt once the library returns.
    ``load="map"`` (default) maps the file: it must not be truncated or rewritten while the
    model lives (SIGBUS); ``load="copy"`` reads it into memory the model owns, so the file may
    change or go afterwards, at the cost of its size in memory (docs/ROBUSTNESS.md, "The contract").
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        numerics: str = "official",
        n_threads: int = 0,
        cache: str = "auto",
        cache_budget: int = 0,
        backend: str = "auto",
        device: int = 0,
        progress: ProgressFn | None = None,
        load: str = "map",
    ):
        self.path = os.fspath(path)
        self._m = _core._Model(
            self.path,
            str_arg("numerics", numerics, NUMERICS),
            int_arg("n_threads", n_threads, -INT32_MAX - 1, INT32_MAX),
            str_arg("cache", cache, CACHE_POLICIES),
            int_arg("cache_budget", cache_budget, 0, UINT64_MAX),
            str_arg("backend", backend, BACKENDS),
            int_arg("device", device, 0, INT32_MAX),
            progress,
            load=str_arg("load", load, LOAD_MODES),
        )
        info = self._m.info()
        self.n_vocab: int = info["n_vocab"]
        self.eos_id: int = info["eos_id"]
        self.bos_id: int = info["bos_id"]
        core_tok = self._m.tokenizer()
        #: the tokenizer stored in the model file (None if the file has none)
        self.tokenizer: Tokenizer | None = Tokenizer(core_tok) if core_tok is not None else None

    @classmethod
    def default(
        cls,
        *,
        numerics: str = "official",
        n_threads: int = 0,
        cache: str = "auto",
        cache_budget: int = 0,
        backend: str = "auto",
        device: int = 0,
        progress: ProgressFn | None = None,
    ) -> Model:
        """The embedded default model (a tiny random-weight deepseek4 file shipped in the
        package, ds4rt/data): every code path runs, the text it writes means nothing."""
        return cls(
            data.default_target(),
            numerics=numerics,
            n_threads=n_threads,
            cache=cache,
            cache_budget=cache_budget,
            backend=backend,
            device=device,
            progress=progress,
        )

    @property
    def info(self) -> dict[str, Any]:
        """Hyperparameters, numerics, threads and the cache's state (ds4rt_model_info)."""
        info: dict[str, Any] = self._m.info()
        return info

    @property
    def closed(self) -> bool:
        return bool(self._m.closed)

    def close(self) -> None:
        """Closes the model's sessions and support models, then frees the model."""
        self._m.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"n_vocab={self.n_vocab}"
        return f"<ds4rt.Model {self.path!r} {state}>"

    def _need_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            raise StateError(f"{self.path} carries no tokenizer metadata; use token ids")
        return self.tokenizer

    def tokenize(
        self, text: str | bytes, *, special: bool | str = False, add_bos: bool = False
    ) -> list[int]:
        """Text -> token ids with the model's tokenizer. Marker strings such as ``<think>`` in
        the text are plain text unless ``special`` asks for them (see ds4rt.tokenizer)."""
        return self._need_tokenizer().encode(text, special=special, add_bos=add_bos)

    def detokenize(self, ids: Sequence[int], *, skip_special: bool = False) -> str:
        """Token ids -> text (invalid UTF-8 shown as U+FFFD)."""
        return self._need_tokenizer().decode(ids, skip_special=skip_special)

    def encode_chat(
        self, messages: Iterable[Mapping[str, object]], *, think: bool | str | int = "none"
    ) -> list[int]:
        """Prompt ids of a conversation on the chat template, ending with the generation
        prompt (Tokenizer.encode_chat; messages are dicts with "role" and "content")."""
        return self._need_tokenizer().encode_chat(messages, think=think)

    def session(self, n_ctx: int = 4096, max_batch: int = 32) -> Session:
        """A new empty context of at most ``n_ctx`` tokens; ``max_batch`` tokens per pass."""
        return Session(self, n_ctx=n_ctx, max_batch=max_batch)


class Session:
    """One context on a model: evaluation, logits, rollback, capture, generation."""

    def __init__(self, model: Model, n_ctx: int = 4096, max_batch: int = 32):
        if not isinstance(model, Model):
            raise TypeError(f"model must be a ds4rt.Model, not {type(model).__name__}")
        self.model = model
        self._s = _core._Session(
            model._m,
            int_arg("n_ctx", n_ctx, -INT64_MAX - 1, INT64_MAX),  # the C library checks the domain
            int_arg("max_batch", max_batch, 0, UINT32_MAX),
        )
        #: the result of the last generate()/stream() on this session, also when it was
        #: interrupted or a callback raised (then with what was generated until then)
        self.last_result: GenerationResult | None = None

    @property
    def n_ctx(self) -> int:
        return int(self._s.n_ctx)

    @property
    def max_batch(self) -> int:
        return int(self._s.max_batch)

    @property
    def position(self) -> int:
        """Tokens in context."""
        return int(self._s.position)

    @property
    def closed(self) -> bool:
        return bool(self._s.closed)

    def close(self) -> None:
        """Frees the session (BusyError while a call on it is running)."""
        self._s.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def eval(self, tokens: Sequence[int] | npt.NDArray[np.integer[Any]]) -> None:
        """Appends tokens to the context."""
        self._s.eval(tokens, False)

    def logits(
        self, tokens: Sequence[int] | npt.NDArray[np.integer[Any]]
    ) -> npt.NDArray[np.float32]:
        """Appends tokens and returns their teacher-forced logits, shape (len(tokens), n_vocab)."""
        out: npt.NDArray[np.float32] = self._s.eval(tokens, True)
        return out

    def current_logits(self) -> npt.NDArray[np.float32] | None:
        """Logits after the last token in context (None if there are none)."""
        out: npt.NDArray[np.float32] | None = self._s.current_logits()
        return out

    def truncate(self, n_tokens: int) -> None:
        """Rolls the context back to ``n_tokens`` (within the last forward pass)."""
        self._s.truncate(int_arg("n_tokens", n_tokens, -INT64_MAX - 1, INT64_MAX))

    def reset(self) -> None:
        """Empties the context."""
        self._s.reset()

    def set_capture(self, layers: Sequence[int]) -> None:
        """Capture the HC-stream mean of these layers' outputs on every pass."""
        self._s.set_capture(list(layers))

    def capture(self, slot: int) -> tuple[int, npt.NDArray[np.float32]]:
        """(first position, rows [n, n_embd]) captured for slot ``slot`` in the last pass."""
        first, rows = self._s.capture(int_arg("slot", slot, 0, UINT32_MAX))
        return int(first), rows

    def set_trace(
        self, fn: Callable[[int, str, int, npt.NDArray[np.float32]], None] | None
    ) -> None:
        """Calls ``fn(layer, stage, pos, data)`` between sublayers (see TRACE_STAGES). An
        exception in fn ends the running call and is raised by it."""
        if fn is None:
            self._s.set_trace(None)
        elif not callable(fn):
            raise TypeError(f"the trace function must be callable, not {type(fn).__name__}")
        else:
            self._s.set_trace(
                lambda layer, stage, pos, data: fn(layer, TRACE_STAGES[stage], pos, data)
            )

    def _prompt_ids(self, prompt: Prompt) -> list[int]:
        """A text prompt through the model's tokenizer (marker strings such as <｜User｜> read
        as their tokens, as llama.cpp reads prompts; BOS first when the context is empty), or
        token ids checked as ids."""
        if isinstance(prompt, str):
            tok = self.model._need_tokenizer()
            ids = tok.encode(prompt, special=True)
            bos = tok.bos_id
            if self.position == 0 and bos is not None and (not ids or ids[0] != bos):
                ids.insert(0, bos)
            return ids
        ids_arr = _core.token_ids(prompt, "prompt")
        out: list[int] = ids_arr.tolist()
        return out

    def _call(
        self,
        prompt: Prompt,
        options: GenerationOptions | None,
        overrides: dict[str, Any],
        *,
        dspark: DSpark | None,
        draft: DraftFn | None,
        on_token: TokenFn | None,
        on_stats: StatsFn | None,
        streaming: bool,
        on_schedule: ScheduleFn | None = None,
    ) -> _Call:
        opts = resolve_options(options, overrides)
        if opts.stop and self.model.tokenizer is None:
            raise StateError(f"{self.model.path} carries no tokenizer: stop strings need one")
        return _Call(
            self,
            prompt,
            opts,
            dspark=dspark,
            draft=draft,
            on_token=on_token,
            on_stats=on_stats,
            on_schedule=on_schedule,
            emit=None,
            check_signals=not streaming,
        )

    def generate(
        self,
        prompt: Prompt,
        options: GenerationOptions | None = None,
        /,
        *,
        dspark: DSpark | None = None,
        draft: DraftFn | None = None,
        on_token: TokenFn | None = None,
        on_stats: StatsFn | None = None,
        on_schedule: ScheduleFn | None = None,
        **overrides: Unpack[GenerationKwargs],
    ) -> GenerationResult:
        """Evaluates ``prompt`` (text or ids, appended to the context) and generates.

        Options: ``options`` and/or keywords (the fields of GenerationOptions: max_tokens,
        temperature, top_k, top_p, min_p, seed, stop_at_eos, stop, skip_special,
        confidence_threshold, scheduler). Speculative decoding with ``dspark=`` (a
        ds4rt.DSpark) or ``draft=`` (a host drafter); greedy output is the same token for
        token. ``on_token(id)`` returning False stops; ``on_stats(stats, final)`` after every
        speculative cycle and at the end; ``on_schedule(event)`` after every speculative cycle
        with the scheduler's plan and why (a dict of ds4rt_schedule_event's fields).

        Ctrl-C stops generation after the current token (or pass of the prompt) and raises
        KeyboardInterrupt; an exception in a callback stops it at once and is re-raised. In
        both cases ``last_result`` holds what was generated, and the context holds exactly
        the prompt and those ids (the prompt's evaluated part, if it was stopped there).
        """
        return self._call(
            prompt,
            options,
            dict(overrides),
            dspark=dspark,
            draft=draft,
            on_token=on_token,
            on_stats=on_stats,
            streaming=False,
            on_schedule=on_schedule,
        )()

    def stream(
        self,
        prompt: Prompt,
        options: GenerationOptions | None = None,
        /,
        *,
        dspark: DSpark | None = None,
        draft: DraftFn | None = None,
        on_stats: StatsFn | None = None,
        on_schedule: ScheduleFn | None = None,
        **overrides: Unpack[GenerationKwargs],
    ) -> Stream:
        """As generate(), but returns at once a Stream that yields Pieces (text and ids) as
        they are produced; ``stream.result`` is the GenerationResult at the end. Callbacks
        (draft, on_stats) run on the stream's worker thread."""
        return Stream(
            self._call(
                prompt,
                options,
                dict(overrides),
                dspark=dspark,
                draft=draft,
                on_token=None,
                on_stats=on_stats,
                streaming=True,
                on_schedule=on_schedule,
            )
        )

    def spec_stats(self) -> dict[str, Any]:
        """Cumulative speculative-decoding statistics of this session (see ds4rt_spec_stats)."""
        return stats_to_dict(_core._session_stats(self._s))

    def spec_stats_line(self) -> str:
        """The same statistics in ds4's one-line format (plus ds4rt's fields)."""
        return stats_line(_core._session_stats(self._s))

    def reset_spec_stats(self) -> None:
        _core._session_reset_stats(self._s)


class Sampler:
    """The C sampler: logits/T -> softmax -> top-k -> top-p -> min-p -> draw (seeded)."""

    def __init__(
        self,
        n_vocab: int,
        *,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int = 0,
    ):
        self._s = _core._Sampler(
            int_arg("n_vocab", n_vocab, 1, UINT32_MAX),
            number_arg("temperature", temperature),
            int_arg("top_k", top_k, -INT32_MAX - 1, INT32_MAX),
            number_arg("top_p", top_p),
            number_arg("min_p", min_p),
            int_arg("seed", seed, 0, UINT64_MAX),
        )

    def sample(self, logits: npt.ArrayLike) -> int:
        return int(self._s.sample(logits))

    def probs(self, logits: npt.ArrayLike) -> npt.NDArray[np.float32]:
        out: npt.NDArray[np.float32] = self._s.probs(logits)
        return out


__all__ = [
    "BACKENDS",
    "CACHE_POLICIES",
    "NUMERICS",
    "TRACE_STAGES",
    "Model",
    "ProgressFn",
    "Sampler",
    "Session",
]
