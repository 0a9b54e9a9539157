"""Generation options, results and streaming (``Session.generate`` / ``Session.stream``).

    result = session.generate("Hello", max_tokens=32, temperature=0.7, stop=["\\n\\n"])
    print(result)                       # the text; result.ids, .stop_reason, .timings, ...
    for piece in session.stream("Hello", max_tokens=32):
        print(piece.text, end="", flush=True)

Options are keyword-only; ``GenerationOptions`` holds them all (and validates them when it is
made), so a set can be built once and reused: ``session.generate(prompt, opts, seed=7)``.
Defaults are the C library's (``ds4rt_generate_default_params`` and friends).

Whatever ends a generation, the session's context afterwards is exactly what it held before,
plus the prompt, plus ``result.ids``: the limit is clamped to the room left in the context,
and a stop string stops generation after the token that completes it (that token and the ones
before it stay in ``ids``; only ``text`` ends before the stop string).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Union

import numpy as np

from . import _core
from ._args import INT32_MAX, UINT64_MAX, bool_arg, float_arg, int_arg
from .enums import SchedulerMode
from .errors import InternalError
from .stats import delta, make_stats_callback, stats_to_dict

if TYPE_CHECKING:
    from .tokenizer import Tokenizer

__all__ = [
    "DraftFn",
    "GenerationKwargs",
    "GenerationOptions",
    "GenerationResult",
    "Piece",
    "Prompt",
    "SchedulerOptions",
    "ScheduleFn",
    "StatsFn",
    "StopReason",
    "Stream",
    "Timings",
    "TokenFn",
]

#: A prompt: text (encoded with the model's tokenizer) or token ids.
Prompt = Union[str, Sequence[int], "np.ndarray[Any, np.dtype[np.integer[Any]]]"]
#: ``on_token(id)``: called for every generated token; returning False stops generation.
TokenFn = Callable[[int], bool | None]
#: ``on_stats(stats, final)``: speculative statistics after every cycle and at the end.
StatsFn = Callable[[dict[str, Any], bool], None]
#: ``on_schedule(event)``: the scheduler's plan of a speculative cycle and its outcome (a dict
#: of ds4rt_schedule_event's fields), after every cycle.
ScheduleFn = Callable[[dict[str, Any]], None]
#: A host drafter: ``draft(context_ids, max_draft)`` returns up to max_draft ids, or
#: ``(ids, probs)`` with probs[i] (shape (len(ids), n_vocab)) the distribution ids[i] came from.
DraftFn = Callable[
    [np.ndarray, int],
    Sequence[int] | np.ndarray | tuple[Sequence[int] | np.ndarray, np.ndarray],
]

_DEFAULTS = _core.generation_defaults()
_SAMPLER = _core.sampler_defaults()
_SCHED = _DEFAULTS["scheduler"]
# Probe waits double up to probe_max; the bound keeps the doubling inside a C int32.
_PROBE_LIMIT = 1 << 20
# Pieces a stream's worker may produce ahead of its reader.
_STREAM_LOOKAHEAD = 16


class StopReason(str, enum.Enum):
    """Why a generation ended."""

    EOS = "eos"  # the model's end-of-sequence token (it is the last id)
    MAX_TOKENS = "max_tokens"  # max_tokens ids were generated
    STOP_STRING = "stop_string"  # the text reached one of the stop strings
    CONTEXT_FULL = "context_full"  # the context has no room for another token
    CALLBACK = "callback"  # on_token returned False
    INTERRUPTED = "interrupted"  # Ctrl-C (KeyboardInterrupt), or the stream was closed
    ERROR = "error"  # a callback raised, or the library failed

    def __str__(self) -> str:
        return self.value


def _scheduler_mode(v: object) -> SchedulerMode:
    if isinstance(v, SchedulerMode):
        return v
    if isinstance(v, str):
        try:
            return SchedulerMode[v.upper()]
        except KeyError:
            pass
    names = ", ".join(repr(m.name.lower()) for m in SchedulerMode)
    raise ValueError(f"scheduler must be one of {names}, not {v!r}")


@dataclass(frozen=True, kw_only=True)
class SchedulerOptions:
    """The speculative scheduler (ds4rt_scheduler_params; docs/DSPARK.md). ``mode``: "adaptive"
    (a cost model picks the draft length), "always" (the longest allowed) or "off" (never
    draft); ``max_draft`` caps drafts per cycle (0: the drafter's block size)."""

    mode: SchedulerMode | str = SchedulerMode(_SCHED["mode"])
    max_draft: int = _SCHED["max_draft"]
    warmup_cycles: int = _SCHED["warmup_cycles"]
    probe_min: int = _SCHED["probe_min"]
    probe_max: int = _SCHED["probe_max"]
    history_decay: float = _SCHED["history_decay"]
    confidence_weight: float = _SCHED["confidence_weight"]
    measured_costs: bool = _SCHED["measured_costs"]
    verify_cost_base: float = _SCHED["verify_cost_base"]
    verify_cost_per_token: float = _SCHED["verify_cost_per_token"]
    propose_cost: float = _SCHED["propose_cost"]

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _scheduler_mode(self.mode))
        int_arg("scheduler max_draft", self.max_draft, 0, INT32_MAX)
        int_arg("scheduler warmup_cycles", self.warmup_cycles, 0, INT32_MAX)
        int_arg("scheduler probe_min", self.probe_min, 1, _PROBE_LIMIT)
        int_arg("scheduler probe_max", self.probe_max, 1, _PROBE_LIMIT)
        if self.probe_max < self.probe_min:
            raise ValueError(
                f"scheduler probe_max = {self.probe_max} is below probe_min = {self.probe_min}"
            )
        float_arg("scheduler history_decay", self.history_decay, 0.0, 1.0)
        float_arg("scheduler confidence_weight", self.confidence_weight, 0.0, 1.0)
        bool_arg("scheduler measured_costs", self.measured_costs)
        base = float_arg("scheduler verify_cost_base", self.verify_cost_base, 0.0, 1e6)
        per = float_arg("scheduler verify_cost_per_token", self.verify_cost_per_token, 0, 1e6)
        if base + per <= 0:
            raise ValueError("scheduler verify_cost_base + verify_cost_per_token must be > 0")
        float_arg("scheduler propose_cost", self.propose_cost, 0.0, 1e6)

    def _as_c(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["mode"] = int(_scheduler_mode(self.mode))
        return d


def _stop_strings(v: object) -> tuple[str, ...]:
    if isinstance(v, str):
        v = (v,)
    if isinstance(v, (bytes, bytearray)) or not isinstance(v, (Sequence, frozenset, set)):
        raise TypeError(f"stop must be a string or a sequence of strings, not {type(v).__name__}")
    out = tuple(v)
    for s in out:
        if not isinstance(s, str):
            raise TypeError(f"stop strings must be str, not {type(s).__name__}")
        if not s:
            raise ValueError("a stop string must not be empty")
    return out


@dataclass(frozen=True, kw_only=True)
class GenerationOptions:
    """Everything that shapes one generation. Validated when made (TypeError for a wrong type,
    ValueError for a value outside its domain).

    max_tokens: ids to generate at most; None or -1: until EOS or a full context.
    temperature: <= 0 is greedy (argmax); top_k (<= 0 off), top_p (>= 1 off), min_p (<= 0
    off) filter the distribution in that order (ds4rt_sampler_params).
    seed: the sampler's seed; None or -1 picks a random one (``result.seed`` tells which).
    stop_at_eos: stop after the model's EOS token. stop: strings that end generation when the
    text reaches them (they are left out of ``text``).
    skip_special: leave control tokens (BOS, EOS) out of the text.
    confidence_threshold (DSpark: a draft ends at the first position whose confidence is below
    it; 0 disables pruning) and scheduler apply to speculative decoding only.
    """

    max_tokens: int | None = _DEFAULTS["max_tokens"]
    temperature: float = _SAMPLER["temperature"]
    top_k: int = _SAMPLER["top_k"]
    top_p: float = _SAMPLER["top_p"]
    min_p: float = _SAMPLER["min_p"]
    seed: int | None = None
    stop_at_eos: bool = _DEFAULTS["stop_at_eos"]
    stop: Sequence[str] = ()
    skip_special: bool = True
    confidence_threshold: float = _DEFAULTS["confidence_threshold"]
    scheduler: SchedulerOptions | SchedulerMode | str = field(default_factory=SchedulerOptions)

    def __post_init__(self) -> None:
        if self.max_tokens is not None:
            int_arg("max_tokens", self.max_tokens, -1, INT32_MAX)
        float_arg("temperature", self.temperature, -math.inf, math.inf)
        int_arg("top_k", self.top_k, -INT32_MAX - 1, INT32_MAX)
        float_arg("top_p", self.top_p, 0.0, math.inf, lo_open=True)
        float_arg("min_p", self.min_p, -math.inf, 1.0)
        if self.seed is not None and self.seed != -1:
            int_arg("seed", self.seed, 0, UINT64_MAX)
        bool_arg("stop_at_eos", self.stop_at_eos)
        object.__setattr__(self, "stop", _stop_strings(self.stop))
        bool_arg("skip_special", self.skip_special)
        float_arg("confidence_threshold", self.confidence_threshold, 0.0, 1.0)
        if not isinstance(self.scheduler, SchedulerOptions):
            object.__setattr__(self, "scheduler", SchedulerOptions(mode=self.scheduler))

    @property
    def unlimited(self) -> bool:
        """True when generation runs until EOS or a full context."""
        return self.max_tokens is None or self.max_tokens == -1


class GenerationKwargs(TypedDict, total=False):
    """The fields of GenerationOptions as keyword arguments (for type checkers)."""

    max_tokens: int | None
    temperature: float
    top_k: int
    top_p: float
    min_p: float
    seed: int | None
    stop_at_eos: bool
    stop: Sequence[str] | str
    skip_special: bool
    confidence_threshold: float
    scheduler: SchedulerOptions | SchedulerMode | str


@dataclass(frozen=True)
class Timings:
    """Where the time of one generation went."""

    prompt_tokens: int  # prompt tokens evaluated
    prompt_seconds: float
    generated_tokens: int
    generation_seconds: float  # sampling and evaluating the generated tokens

    @property
    def prompt_tokens_per_second(self) -> float:
        return self.prompt_tokens / self.prompt_seconds if self.prompt_seconds > 0 else 0.0

    @property
    def generation_tokens_per_second(self) -> float:
        s = self.generation_seconds
        return self.generated_tokens / s if s > 0 else 0.0

    def line(self) -> str:
        """``prefill: 12 tokens in 0.050 s (240.0 t/s) | decode: 32 tokens in ...``"""
        return (
            f"prefill: {self.prompt_tokens} tokens in {self.prompt_seconds:.3f} s "
            f"({self.prompt_tokens_per_second:.1f} t/s) | decode: {self.generated_tokens} "
            f"tokens in {self.generation_seconds:.3f} s "
            f"({self.generation_tokens_per_second:.1f} t/s)"
        )


@dataclass(frozen=True)
class GenerationResult:
    """What one generation produced. ``str(result)`` is the text.

    ids: every generated id, all of them now in the session's context (after the prompt).
    text: their text, ending before the stop string if one was met (``stop_string``);
    control tokens are left out unless ``skip_special=False``.
    prompt_ids: the prompt as evaluated (a text prompt after tokenization).
    spec_stats: this generation's speculative statistics (None for plain decoding).
    """

    text: str
    ids: list[int]
    stop_reason: StopReason
    stop_string: str | None
    prompt_ids: list[int]
    timings: Timings
    seed: int
    spec_stats: dict[str, Any] | None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Piece:
    """A piece of streamed output: text completed by ``ids`` (the ids generated since the
    previous piece; text may be "" while a character or a possible stop string is pending)."""

    text: str
    ids: list[int]

    def __str__(self) -> str:
        return self.text


class _StopMatcher:
    """Finds stop strings in text that arrives in pieces, holding back any tail of the text
    that could still become a stop string, so a partial stop string is never handed out."""

    def __init__(self, stops: Sequence[str]):
        self.stops = tuple(stops)
        self.held = ""

    def feed(self, text: str) -> tuple[str, str | None]:
        """(text that is safe to hand out, the stop string met or None)."""
        if not self.stops:
            return text, None
        buf = self.held + text
        # the stop string that is complete first as the text grows (earliest end, then
        # earliest start), so the result does not depend on how the text was cut into pieces
        hit: tuple[int, str] | None = None
        for s in self.stops:
            i = buf.find(s)
            if i >= 0 and (hit is None or (i + len(s), i) < (hit[0] + len(hit[1]), hit[0])):
                hit = (i, s)
        if hit is not None:
            self.held = ""
            return buf[: hit[0]], hit[1]
        keep = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(buf)), keep, -1):
                if buf.endswith(s[:k]):
                    keep = k
                    break
        self.held = buf[len(buf) - keep :]
        return buf[: len(buf) - keep], None

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out


class _Handler:
    """The Python side of one generation: decodes each token, watches for stop strings, calls
    the user's on_token, and hands out pieces (to a stream) as text becomes final."""

    def __init__(
        self,
        tokenizer: Tokenizer | None,
        opts: GenerationOptions,
        on_token: TokenFn | None,
        emit: Callable[[Piece], None] | None,
    ):
        self.decoder = tokenizer.stream(skip_special=opts.skip_special) if tokenizer else None
        self.matcher = _StopMatcher(opts.stop)
        self.on_token = on_token
        self.emit = emit
        self.ids: list[int] = []
        self.n_decoded = 0  # ids whose text has been through the decoder and the matcher
        self.text: list[str] = []
        self.unsent: list[int] = []
        self.stop_reason: StopReason | None = None
        self.stop_string: str | None = None

    def record(self, token: int) -> None:
        self.ids.append(token)
        self.unsent.append(token)

    def _out(self, text: str, final: bool = False) -> None:
        if text:
            self.text.append(text)
        if self.emit is not None and (text or (final and self.unsent)):
            piece, self.unsent = Piece(text, self.unsent), []
            self.emit(piece)

    def _decode(self) -> None:
        """Text of the recorded ids not decoded yet (normally the one just recorded)."""
        while self.n_decoded < len(self.ids):
            token = self.ids[self.n_decoded]
            if self.decoder is None or self.stop_string is not None:
                self.n_decoded = len(self.ids)
                return
            piece = self.decoder.push(token)
            self.n_decoded += 1
            safe, hit = self.matcher.feed(piece)
            if hit is not None:
                self.stop_reason, self.stop_string = StopReason.STOP_STRING, hit
            self._out(safe)

    def push(self, token: int) -> bool:
        """A new token: recorded, decoded, then shown to the user's callback (last, so an
        exception there leaves the record complete)."""
        self.record(token)
        self._decode()
        if self.on_token is not None and self.on_token(token) is False:
            if self.stop_reason is None:
                self.stop_reason = StopReason.CALLBACK
        return self.stop_reason is None

    def finish(self, ids: list[int]) -> None:
        """After the C call, with the ids the library returned: the ones a stop request kept
        from the callback are recorded and decoded, then the held-back text comes out."""
        if self.ids != ids[: len(self.ids)]:
            raise InternalError(f"the callback saw ids {self.ids}, the library returned {ids}")
        for t in ids[len(self.ids) :]:
            self.record(t)
        self._decode()
        if self.decoder is not None and self.stop_string is None:
            safe, hit = self.matcher.feed(self.decoder.flush())
            if hit is not None:
                self.stop_reason, self.stop_string = StopReason.STOP_STRING, hit
            else:
                safe += self.matcher.flush()
            self._out(safe, final=True)
        else:
            self._out("", final=True)


def resolve_options(
    options: GenerationOptions | None, overrides: dict[str, Any]
) -> GenerationOptions:
    """``options`` (or the defaults) with keyword overrides; TypeError for unknown names."""
    if options is not None and not isinstance(options, GenerationOptions):
        raise TypeError(f"options must be a GenerationOptions, not {type(options).__name__}")
    base = options if options is not None else GenerationOptions()
    return dataclasses.replace(base, **overrides) if overrides else base


def _seed(opts: GenerationOptions) -> int:
    if opts.seed is None or opts.seed == -1:
        return int.from_bytes(os.urandom(8), "little")
    return int(opts.seed)


class _Call:
    """One generation on a session: prompt ids, the handler, the C call, the result."""

    def __init__(
        self,
        session: Any,
        prompt: Prompt,
        opts: GenerationOptions,
        *,
        dspark: Any,
        draft: DraftFn | None,
        on_token: TokenFn | None,
        on_stats: StatsFn | None,
        emit: Callable[[Piece], None] | None,
        check_signals: bool,
        on_schedule: ScheduleFn | None = None,
    ):
        if dspark is not None and draft is not None:
            raise ValueError("give dspark= or draft=, not both")
        if dspark is not None and not hasattr(dspark, "_d"):
            raise TypeError(f"dspark must be a ds4rt.DSpark, not {type(dspark).__name__}")
        callbacks = (
            ("draft", draft),
            ("on_token", on_token),
            ("on_stats", on_stats),
            ("on_schedule", on_schedule),
        )
        for name, fn in callbacks:
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable, not {type(fn).__name__}")
        self.session = session
        self.opts = opts
        self.prompt_ids = session._prompt_ids(prompt)
        self.seed = _seed(opts)
        self.dspark = dspark
        self.draft = draft
        self.handler = _Handler(session.model.tokenizer, opts, on_token, emit)
        stats_cb = make_stats_callback(on_stats) if on_stats is not None else None
        self.run = _core._GenRun(self.handler, draft, stats_cb, check_signals, on_schedule)

    def __call__(self) -> GenerationResult:
        o = self.opts
        sched = o.scheduler
        assert isinstance(sched, SchedulerOptions)
        speculative = self.dspark is not None or self.draft is not None
        r = _core._generate(
            self.session._s,
            self.prompt_ids,
            -1 if o.unlimited else int(o.max_tokens or 0),
            {
                "temperature": float(o.temperature),
                "top_k": int(o.top_k),
                "top_p": float(o.top_p),
                "min_p": float(o.min_p),
                "seed": self.seed,
            },
            bool(o.stop_at_eos),
            speculative,
            self.dspark._d if self.dspark is not None else None,
            float(o.confidence_threshold),
            sched._as_c(),
            self.run,
        )
        h = self.handler
        try:
            h.finish(r["ids"])
        except InternalError:
            raise
        except BaseException as e:  # noqa: B036 - e.g. a second Ctrl-C while finishing
            r["error"] = r["error"] or e
        err = r["error"]
        ids = r["ids"]
        eos = self.session.model.eos_id
        if err is not None:
            reason = (
                StopReason.INTERRUPTED if isinstance(err, KeyboardInterrupt) else StopReason.ERROR
            )
        elif self.run.cancel:
            reason = StopReason.INTERRUPTED
        elif h.stop_reason is not None:
            reason = h.stop_reason
        elif o.stop_at_eos and ids and ids[-1] == eos:
            reason = StopReason.EOS
        elif len(ids) == r["limit"]:
            reason = StopReason.CONTEXT_FULL if r["clamped"] else StopReason.MAX_TOKENS
        else:
            raise InternalError(
                f"generation ended after {len(ids)} of {r['limit']} ids for no reason"
            )
        spec = None
        if speculative:
            spec = delta(stats_to_dict(r["stats_before"]), stats_to_dict(r["stats_after"]))
        result = GenerationResult(
            text="".join(h.text),
            ids=ids,
            stop_reason=reason,
            stop_string=h.stop_string,
            prompt_ids=self.prompt_ids,
            timings=Timings(r["n_prompt"], r["prefill_s"], len(ids), r["decode_s"]),
            seed=self.seed,
            spec_stats=spec,
        )
        self.session.last_result = result
        if err is not None:
            raise err
        return result


_END = object()


class _StreamWork:
    """What a stream's worker thread uses: the call, the queue of pieces, the outcome. The
    worker holds no reference to the Stream, so a dropped stream is collected (and stops)."""

    def __init__(self, call: _Call):
        self.call = call
        self.q: queue.Queue[object] = queue.Queue()
        self.room = threading.Semaphore(_STREAM_LOOKAHEAD)
        self.result: GenerationResult | None = None
        self.error: BaseException | None = None
        call.handler.emit = self.emit

    def emit(self, piece: Piece) -> None:  # worker thread
        while not self.room.acquire(timeout=0.05):
            if self.call.run.cancel:
                break
        self.q.put(piece)

    def run(self) -> None:  # worker thread
        try:
            self.result = self.call()
        except BaseException as e:  # noqa: B036 - handed to the reader
            self.error = e
            self.result = self.call.session.last_result
        finally:
            self.q.put(_END)


class Stream(Iterator[Piece]):
    """Pieces of one generation as they are produced (``Session.stream``).

    The generation runs on a worker thread, at most a few pieces ahead of the reader. Leaving
    the loop early, ``close()``, the end of a ``with`` block, dropping the stream or Ctrl-C
    while waiting stop it after the current token; the session is free again once ``close()``
    has returned. ``result`` is the GenerationResult once the stream has ended (None before).
    An exception of the generation (or of one of its callbacks, which run on the worker
    thread) is raised by the iteration.
    """

    def __init__(self, call: _Call):
        self._ended = True
        self._work = _StreamWork(call)
        self._thread = threading.Thread(target=self._work.run, name="ds4rt-stream", daemon=True)
        self._thread.start()
        self._ended = False

    @property
    def result(self) -> GenerationResult | None:
        return self._work.result if self._ended else None

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> Piece:
        if self._ended:
            raise StopIteration
        try:
            item = self._work.q.get()
        except BaseException:
            self._stop()
            raise
        if item is _END:
            self._ended = True
            self._thread.join()
            if self._work.error is not None:
                err, self._work.error = self._work.error, None
                raise err
            raise StopIteration
        self._work.room.release()
        assert isinstance(item, Piece)
        return item

    def _stop(self) -> None:
        """Stops the worker and waits for it (the session is free afterwards)."""
        self._work.call.run.cancel = True
        if threading.current_thread() is not self._thread:
            self._thread.join()
        self._ended = True

    def close(self) -> None:
        """Stops generation (after the current token) and waits until it has stopped."""
        if not self._ended:
            self._stop()

    def cancel(self) -> None:
        """Asks the generation to stop after the current token (or pass of the prompt) and
        returns at once; safe from any thread, e.g. a server whose client went away while
        another thread reads the stream. The iteration then ends as after ``close()``, with
        ``result.stop_reason`` INTERRUPTED."""
        self._work.call.run.cancel = True

    def text(self) -> str:
        """Reads the rest of the stream and returns all of its text."""
        return "".join(p.text for p in self)

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_ended", True):
            self._stop()
