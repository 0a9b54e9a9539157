"""llama.cpp b11739 as a test oracle: teacher-forced logits and tokenisation of a GGUF file.

Set up once with `python tools/oracle/setup_llama.py` (docs/ORACLES.md). Then:

    from oracle import llama_oracle as lo
    lo.require()                       # pytest.skip(<why>) when the oracle cannot be had
    with lo.LlamaModel(path) as m:
        logits = m.logits(tokens)            # [n, V] float32, one batch
        logits1 = m.logits(tokens, mode="single")   # one token per llama_decode call
        ids = m.tokenize("text")

Contexts are made with flash attention off and F32 K/V cache types (docs/ORACLES.md: the
tightest numbers), one sequence, CPU only. llama.cpp does NOT simulate the FP8 KV / FP4 indexer
round trips of the official model: compare with those simulations switched off.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import sys
from pathlib import Path

import numpy as np

ORACLE_ENV = "DS4RT_ORACLE_DIR"
_state: dict | None = None
_ffi = None
_lib = None
_why: str | None = None
_log: collections.deque = collections.deque(maxlen=200)
_log_cb = None  # keeps the cffi callback alive


def oracle_dir() -> Path:
    env = os.environ.get(ORACLE_ENV)
    return Path(env) if env else Path(sys.prefix) / "ds4rt-oracle"


def _load() -> None:
    global _state, _ffi, _lib, _why, _log_cb
    if _lib is not None or _why is not None:
        return
    state_file = oracle_dir() / "state.json"
    if not state_file.exists():
        _why = (
            f"llama.cpp oracle not set up ({state_file} missing); "
            "run `python tools/oracle/setup_llama.py`"
        )
        return
    try:
        _state = json.loads(state_file.read_text())
        if _state["site"] not in sys.path:
            sys.path.insert(0, _state["site"])
        if _state.get("shim"):
            ctypes.CDLL(_state["shim"], mode=ctypes.RTLD_GLOBAL)
        from llama_cpp_py_sync import _cffi_bindings as b

        _ffi = b.ffi
        lib = b.get_lib()

        @_ffi.callback("void(enum ggml_log_level, const char *, void *)")
        def _on_log(level, text, _ud):
            msg = _ffi.string(text).decode("utf-8", "replace")
            _log.append(msg)
            if os.environ.get("DS4RT_ORACLE_VERBOSE"):
                sys.stderr.write(msg)

        _log_cb = _on_log
        lib.llama_log_set(_log_cb, _ffi.NULL)
        lib.llama_backend_init()
        _lib = lib
    except Exception as e:  # the reason is reported by require()/available()
        _why = f"llama.cpp oracle failed to load from {oracle_dir()}: {type(e).__name__}: {e}"


def available() -> tuple[bool, str]:
    """(True, description) or (False, why not)."""
    _load()
    if _lib is None:
        return False, _why or "unknown"
    return True, f"llama.cpp {_state['llama_commit'][:8]} ({_state['package']} {_state['version']})"


def require() -> None:
    """Skip the calling test, loudly, when the oracle is unavailable."""
    ok, why = available()
    if not ok:
        import pytest

        pytest.skip(f"NO LLAMA.CPP ORACLE: {why}")


def recent_log(n: int = 20) -> str:
    return "".join(list(_log)[-n:])


class OracleError(RuntimeError):
    pass


class LlamaModel:
    """One GGUF loaded into llama.cpp with one CPU context.

    vocab_only=True loads metadata and vocabulary only (no tensor data, no context): enough for
    tokenize()/detokenize(), and it works on the sparse --real-layout files."""

    def __init__(
        self,
        path: str | os.PathLike,
        n_ctx: int = 512,
        n_threads: int = 2,
        vocab_only: bool = False,
    ):
        ok, why = available()
        if not ok:
            raise OracleError(why)
        lib, ffi = _lib, _ffi
        self._lib, self._ffi = lib, ffi
        mp = lib.llama_model_default_params()
        mp.n_gpu_layers = 0
        mp.vocab_only = vocab_only
        self._ctx = ffi.NULL
        self._model = lib.llama_model_load_from_file(os.fsencode(path), mp)
        if self._model == ffi.NULL:
            raise OracleError(f"llama.cpp refused {path}:\n{recent_log()}")
        self._vocab = lib.llama_model_get_vocab(self._model)
        self.n_vocab = lib.llama_vocab_n_tokens(self._vocab)
        self.n_ctx = n_ctx
        if vocab_only:
            return
        cp = lib.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_ctx
        cp.n_ubatch = n_ctx
        cp.n_seq_max = 1
        cp.n_threads = n_threads
        cp.n_threads_batch = n_threads
        cp.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        cp.type_k = lib.GGML_TYPE_F32
        cp.type_v = lib.GGML_TYPE_F32
        cp.no_perf = True
        self._ctx = lib.llama_init_from_model(self._model, cp)
        if self._ctx == ffi.NULL:
            lib.llama_model_free(self._model)
            self._model = ffi.NULL
            raise OracleError(f"llama.cpp could not create a context for {path}:\n{recent_log()}")

    def close(self) -> None:
        if getattr(self, "_ctx", None) not in (None, self._ffi.NULL):
            self._lib.llama_free(self._ctx)
            self._ctx = self._ffi.NULL
        if getattr(self, "_model", None) not in (None, self._ffi.NULL):
            self._lib.llama_model_free(self._model)
            self._model = self._ffi.NULL

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _need_context(self) -> None:
        if self._ctx == self._ffi.NULL:
            raise OracleError("model was loaded with vocab_only=True: no context for logits")

    def _decode(self, tokens, pos0: int) -> np.ndarray:
        lib, ffi = self._lib, self._ffi
        n = len(tokens)
        batch = lib.llama_batch_init(n, 0, 1)
        try:
            batch.n_tokens = n
            for i, t in enumerate(tokens):
                batch.token[i] = int(t)
                batch.pos[i] = pos0 + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1
            rc = lib.llama_decode(self._ctx, batch)
            if rc != 0:
                raise OracleError(f"llama_decode returned {rc}:\n{recent_log()}")
            out = np.empty((n, self.n_vocab), dtype=np.float32)
            for i in range(n):
                p = lib.llama_get_logits_ith(self._ctx, i)
                if p == ffi.NULL:
                    raise OracleError(f"no logits for batch row {i}")
                out[i] = np.frombuffer(ffi.buffer(p, 4 * self.n_vocab), dtype=np.float32)
            return out
        finally:
            lib.llama_batch_free(batch)

    def logits(self, tokens, mode: str = "batch") -> np.ndarray:
        """Teacher-forced logits [len(tokens), V] from position 0 on a cleared cache.

        mode "batch": all tokens in one llama_decode call; "single": one call per token."""
        self._need_context()
        if len(tokens) > self.n_ctx:
            raise ValueError(f"{len(tokens)} tokens exceed n_ctx {self.n_ctx}")
        self._lib.llama_memory_clear(self._lib.llama_get_memory(self._ctx), True)
        if mode == "batch":
            return self._decode(list(tokens), 0)
        if mode == "single":
            return np.concatenate([self._decode([t], i) for i, t in enumerate(tokens)])
        raise ValueError(f"mode must be 'batch' or 'single', not {mode!r}")

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = False):
        """llama.cpp's tokenizer on `text` (UTF-8). parse_special: match control tokens."""
        lib, ffi = self._lib, self._ffi
        raw = text.encode("utf-8")
        cap = len(raw) + 8
        buf = ffi.new("llama_token[]", cap)
        n = lib.llama_tokenize(self._vocab, raw, len(raw), buf, cap, add_special, parse_special)
        if n < 0:
            raise OracleError(f"llama_tokenize needs {-n} slots")
        return [buf[i] for i in range(n)]

    def detokenize(self, ids, remove_special: bool = False, unparse_special: bool = True) -> str:
        """llama.cpp's detokenizer; unparse_special renders control tokens as their text."""
        lib, ffi = self._lib, self._ffi
        arr = ffi.new("llama_token[]", [int(i) for i in ids])
        cap = 16 * len(ids) + 16
        while True:
            buf = ffi.new("char[]", cap)
            n = lib.llama_detokenize(
                self._vocab, arr, len(ids), buf, cap, remove_special, unparse_special
            )
            if n >= 0:
                return ffi.unpack(buf, n).decode("utf-8", "replace")
            cap = -n + 1

    def token_text(self, token: int) -> str:
        return self._ffi.string(self._lib.llama_vocab_get_text(self._vocab, token)).decode()

    def meta(self, key: str) -> str | None:
        buf = self._ffi.new("char[]", 4096)
        n = self._lib.llama_model_meta_val_str(self._model, key.encode(), buf, 4096)
        return None if n < 0 else self._ffi.string(buf).decode("utf-8", "replace")
