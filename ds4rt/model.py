"""Loading a DeepSeek V4 Flash (``deepseek4``) GGUF and running it.

    model = ds4rt.Model("target.gguf")                 # official numerics
    s = model.session(n_ctx=4096)
    rows = s.logits([0, 17, 42])                       # teacher-forced logits, shape (3, n_vocab)
    ids = s.generate([0, 17], max_tokens=16)           # greedy by default

A ``Model`` is read-only after loading and may be shared by sessions; a ``Session`` holds one
context and must be used from one thread at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import _core
from .errors import StateError
from .tokenizer import Tokenizer

NUMERICS = ("official", "llama.cpp")

TRACE_STAGES = (
    "layer_in",
    "attn_in",
    "attn_out",
    "attn_hc",
    "ffn_in",
    "ffn_out",
    "layer_out",
    "head",
)


class Model:
    """A deepseek4 target model.

    ``numerics="official"`` follows the trained model (FP8 round trip of KV rows, FP4 round
    trip of the indexer's q/k); ``"llama.cpp"`` turns both simulations off, matching
    llama.cpp b11739 ("llama.cpp-compatible numerics"). ``n_threads <= 0`` uses every CPU.
    ``cache`` is the Q8->F16 expansion cache policy ("auto", "off", "on", with
    ``cache_budget`` bytes); ``info["cache"]`` reports its state and why (docs/CACHE.md).
    """

    def __init__(
        self,
        path: str,
        numerics: str = "official",
        n_threads: int = 0,
        cache: str = "auto",
        cache_budget: int = 0,
    ):
        self._m = _core._Model(path, numerics, n_threads, cache, cache_budget)
        self.path = path
        self.info = self._m.info()
        core_tok = self._m.tokenizer()
        #: the tokenizer stored in the model file (None if the file has none)
        self.tokenizer: Tokenizer | None = Tokenizer(core_tok) if core_tok is not None else None

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

    @property
    def n_vocab(self) -> int:
        return self.info["n_vocab"]

    @property
    def eos_id(self) -> int:
        return self.info["eos_id"]

    @property
    def bos_id(self) -> int:
        return self.info["bos_id"]

    def session(self, n_ctx: int = 4096, max_batch: int = 32) -> Session:
        """A new empty context of at most ``n_ctx`` tokens; ``max_batch`` tokens per pass."""
        return Session(self, n_ctx=n_ctx, max_batch=max_batch)


class Session:
    """One context on a model: evaluation, logits, rollback, capture, generation."""

    def __init__(self, model: Model, n_ctx: int = 4096, max_batch: int = 32):
        self.model = model
        self._s = _core._Session(model._m, n_ctx, max_batch)

    @property
    def position(self) -> int:
        """Tokens in context."""
        return self._s.position

    def eval(self, tokens: Sequence[int]) -> None:
        """Appends tokens to the context."""
        self._s.eval(tokens, False)

    def logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Appends tokens and returns their teacher-forced logits, shape (len(tokens), n_vocab)."""
        return self._s.eval(tokens, True)

    def current_logits(self) -> np.ndarray | None:
        """Logits after the last token in context (None if there are none)."""
        return self._s.current_logits()

    def truncate(self, n_tokens: int) -> None:
        """Rolls the context back to ``n_tokens`` (within the last forward pass)."""
        self._s.truncate(n_tokens)

    def reset(self) -> None:
        self._s.reset()

    def set_capture(self, layers: Sequence[int]) -> None:
        """Capture the HC-stream mean of these layers' outputs on every pass."""
        self._s.set_capture(list(layers))

    def capture(self, slot: int) -> tuple[int, np.ndarray]:
        """(first position, rows [n, n_embd]) captured for slot ``slot`` in the last pass."""
        return self._s.capture(slot)

    def set_trace(self, fn: Callable[[int, str, int, np.ndarray], None] | None) -> None:
        """Calls ``fn(layer, stage, pos, data)`` between sublayers (see TRACE_STAGES)."""
        if fn is None:
            self._s.set_trace(None)
        else:
            self._s.set_trace(
                lambda layer, stage, pos, data: fn(layer, TRACE_STAGES[stage], pos, data)
            )

    def generate(
        self,
        prompt: Sequence[int],
        max_tokens: int = 128,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int = 0,
        stop_at_eos: bool = True,
        on_token: Callable[[int], bool | None] | None = None,
        *,
        dspark=None,
        draft: Callable | None = None,
        confidence_threshold: float = 0.5,
        scheduler: str = "adaptive",
        scheduler_options: dict | None = None,
        on_stats: Callable[[dict, bool], None] | None = None,
    ) -> list[int]:
        """Evaluates ``prompt`` (appended to the context) and samples up to ``max_tokens`` ids.

        Greedy when ``temperature <= 0``. ``on_token(id)`` returning False stops generation.
        Speculative decoding with ``dspark=`` (a ds4rt.DSpark) or ``draft=`` (a host drafter,
        see ds4rt.dspark): ``confidence_threshold`` (DSpark; 0 disables pruning),
        ``scheduler`` ("adaptive", "always", "off") and ``scheduler_options`` (the fields of
        ds4rt_scheduler_params), ``on_stats(stats, final)`` after every cycle and at the end.
        The context afterwards holds the prompt and every generated token either way.
        """
        from .dspark import make_stats_callback

        return _core._generate(
            self._s,
            prompt,
            max_tokens,
            temperature,
            top_k,
            top_p,
            min_p,
            seed,
            stop_at_eos,
            on_token,
            dspark._d if dspark is not None else None,
            draft,
            confidence_threshold,
            scheduler,
            dict(scheduler_options or {}),
            make_stats_callback(on_stats) if on_stats is not None else None,
        )

    def spec_stats(self) -> dict:
        """Cumulative speculative-decoding statistics of this session (see ds4rt_spec_stats)."""
        from .dspark import stats_to_dict

        return stats_to_dict(_core._session_stats(self._s))

    def spec_stats_line(self) -> str:
        """The same statistics in ds4's one-line format (plus ds4rt's fields)."""
        from .dspark import stats_line

        return stats_line(_core._session_stats(self._s))

    def reset_spec_stats(self) -> None:
        _core._session_reset_stats(self._s)


class Sampler:
    """The C sampler: logits/T -> softmax -> top-k -> top-p -> min-p -> draw (seeded)."""

    def __init__(
        self,
        n_vocab: int,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int = 0,
    ):
        self._s = _core._Sampler(n_vocab, temperature, top_k, top_p, min_p, seed)

    def sample(self, logits: np.ndarray) -> int:
        return self._s.sample(logits)

    def probs(self, logits: np.ndarray) -> np.ndarray:
        return self._s.probs(logits)
