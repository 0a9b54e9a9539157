"""The DeepSeek V4 tokenizer and chat template, run by the C core (src/tokenizer/).

    tok = Tokenizer.from_gguf("model.gguf")           # or Tokenizer.from_arrays(...)
    ids = tok.encode("Hello, world")                   # plain text: markers are not parsed
    ids = tok.encode("<｜User｜>hi", special=True)      # as tokenizers' encode() does
    text = tok.decode(ids)
    stream = tok.stream()                              # streaming decoder
    pieces = [stream.push(i) for i in ids] + [stream.flush()]
    prompt = render_chat([{"role": "user", "content": "Hello"}])
    prompt_ids = tok.encode_chat([{"role": "user", "content": "Hello"}], think="high")

Ids equal those of the `tokenizers` library loading DeepSeek V4's tokenizer.json. Text given as
``str`` is encoded to UTF-8 (lone surrogates pass through as invalid UTF-8, so they become
U+FFFD like any invalid sequence); ``bytes`` are taken as they are. See docs/TOKENIZER.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

from . import _core
from .enums import ChatRole, DetokenizeFlag, ThinkMode, TokenizeFlag, TokenType

__all__ = ["StreamDecoder", "ThinkMode", "TokenType", "Tokenizer", "render_chat"]


_PARSE_CONTROL = TokenizeFlag.PARSE_CONTROL
_PARSE_USER_DEFINED = TokenizeFlag.PARSE_USER_DEFINED
_STRICT_UTF8 = TokenizeFlag.STRICT_UTF8
_ADD_BOS = TokenizeFlag.ADD_BOS
_SKIP_CONTROL = DetokenizeFlag.SKIP_CONTROL
_REPLACE_INVALID = DetokenizeFlag.REPLACE_INVALID

# Roles by name ("developer" and "function" are aliases that OpenAI-style messages use).
_ROLES = {
    "system": ChatRole.SYSTEM,
    "developer": ChatRole.SYSTEM,
    "user": ChatRole.USER,
    "assistant": ChatRole.ASSISTANT,
    "tool": ChatRole.TOOL,
    "function": ChatRole.TOOL,
}


def _as_bytes(text: str | bytes | bytearray | memoryview) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    if not isinstance(text, (bytes, bytearray, memoryview)):
        raise TypeError(f"text must be str or bytes, not {type(text).__name__}")
    return bytes(text)


def _special_flags(special: bool | str) -> int:
    if special is True or special == "all":
        return _PARSE_CONTROL | _PARSE_USER_DEFINED
    if special is False or special == "none":
        return 0
    if special == "control":
        return _PARSE_CONTROL
    if special == "user":
        return _PARSE_USER_DEFINED
    raise ValueError(f"special must be a bool, 'all', 'none', 'control' or 'user': {special!r}")


def _think_mode(think: bool | str | int) -> int:
    if think is True:
        return ThinkMode.HIGH
    if think is False or think is None:
        return ThinkMode.NONE
    if isinstance(think, str):
        try:
            return ThinkMode[think.upper()]
        except KeyError:
            raise ValueError(f"think must be 'none', 'high' or 'max': {think!r}") from None
    return ThinkMode(think)


def _messages(messages: Iterable[Mapping[str, object]]) -> list[tuple[int, bytes, bytes | None]]:
    out: list[tuple[int, bytes, bytes | None]] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in _ROLES:
            raise ValueError(f"message {i}: unknown role {role!r}")
        content = m.get("content") or ""
        reasoning = m.get("reasoning", m.get("reasoning_content"))
        if not isinstance(content, (str, bytes)):
            raise TypeError(f"message {i}: content must be str or bytes")
        if reasoning is not None and not isinstance(reasoning, (str, bytes)):
            raise TypeError(f"message {i}: reasoning must be str or bytes")
        out.append(
            (
                int(_ROLES[role]),
                _as_bytes(content),
                None if reasoning is None else _as_bytes(reasoning),
            )
        )
    return out


def render_chat(
    messages: Iterable[Mapping[str, object]],
    *,
    think: bool | str | int = "none",
    add_generation_prompt: bool = True,
    tool_context: bool = False,
) -> str:
    """The DeepSeek V4 Flash prompt text of a conversation, as ds4 renders it.

    messages: dicts with "role" (system, user, assistant, tool; developer/function are aliases),
    "content" and, for assistant turns, optionally "reasoning" (or "reasoning_content").
    think: "none" (</think>), "high" (<think>) or "max" (<think> plus the Think-Max prefix).
    """
    raw = _core._chat_render(
        _messages(messages), _think_mode(think), int(add_generation_prompt), int(tool_context)
    )
    return raw.decode("utf-8", "replace")


class StreamDecoder:
    """Turns ids into text one at a time, never handing out part of a UTF-8 character."""

    def __init__(self, tokenizer: Tokenizer, *, skip_special: bool = False):
        self._s = _core._DetokStream(tokenizer._t, _SKIP_CONTROL if skip_special else 0)

    def push(self, token_id: int) -> str:
        """Text completed by this id ("" while a character is still unfinished)."""
        return self._s.push(token_id).decode("utf-8")

    def flush(self) -> str:
        """Ends the stream: an unfinished character comes out as U+FFFD."""
        return self._s.flush().decode("utf-8")

    @property
    def pending(self) -> int:
        """Bytes held back (0-3)."""
        return self._s.pending


class Tokenizer:
    """A byte-level BPE tokenizer with the DeepSeek V4 pre-tokenizer (C core).

    A tokenizer made by from_gguf/from_arrays is a context manager whose close() frees it; a
    model's tokenizer (``model.tokenizer``) belongs to the model and closes with it. A closed
    tokenizer raises ClosedError."""

    def __init__(self, core: _core._Tokenizer):
        self._t = core

    @property
    def closed(self) -> bool:
        return bool(self._t.closed)

    def close(self) -> None:
        """Frees a tokenizer of its own (a model's tokenizer is left to its model)."""
        self._t.close()

    def __enter__(self) -> Tokenizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """From the tokenizer.* metadata of a GGUF file (a model, or a vocabulary-only file
        such as tools/convert_tokenizer.py writes). The file is closed again."""
        return cls(_core._Tokenizer.from_gguf(path))

    @classmethod
    def from_arrays(
        cls,
        tokens: Sequence[str | bytes],
        merges: Sequence[str | bytes],
        token_types: Sequence[int] | None = None,
        *,
        bos_id: int = -1,
        eos_id: int = -1,
        pre: str | None = "joyai-llm",
        normalized_ids: Sequence[int] = (),
    ) -> Tokenizer:
        """From GGUF-style arrays: token strings (byte-level form for BPE tokens), "a b" merges
        by rank, GGUF token types (CONTROL/USER_DEFINED = added tokens), BOS/EOS ids (-1: none),
        and the added tokens that tokenizers matches in its second ("normalized") pass."""
        return cls(
            _core._Tokenizer.from_arrays(
                tokens, merges, token_types, bos_id, eos_id, pre, list(normalized_ids)
            )
        )

    def __len__(self) -> int:
        return int(self._t.n_tokens)

    @property
    def n_tokens(self) -> int:
        return int(self._t.n_tokens)

    @property
    def n_merges(self) -> int:
        return int(self._t.n_merges)

    @property
    def bos_id(self) -> int | None:
        b = self._t.bos
        return None if b < 0 else b

    @property
    def eos_id(self) -> int | None:
        e = self._t.eos
        return None if e < 0 else e

    def encode(
        self,
        text: str | bytes,
        *,
        special: bool | str = False,
        strict: bool = False,
        add_bos: bool = False,
    ) -> list[int]:
        """Token ids of text. special: False (default; added-token strings are plain text),
        True/"all" (match every added token, as tokenizers' encode()), "control" or "user"
        (only CONTROL, resp. USER_DEFINED tokens). strict: invalid UTF-8 raises instead of
        reading as U+FFFD. add_bos: prepend BOS."""
        flags = _special_flags(special) | (_STRICT_UTF8 if strict else 0)
        flags |= _ADD_BOS if add_bos else 0
        ids: list[int] = self._t.encode(_as_bytes(text), flags).tolist()
        return ids

    def split(self, text: str | bytes, *, special: bool | str = False) -> list[str]:
        """The pieces BPE sees (pre-tokenizer output, added tokens as their own pieces)."""
        raw = _as_bytes(text)
        ends = self._t.split(raw, _special_flags(special)).tolist()
        clean = raw.decode("utf-8", "replace").encode("utf-8")
        out, start = [], 0
        for end in ends:
            out.append(clean[start:end].decode("utf-8"))
            start = end
        return out

    def decode(self, ids: Iterable[int], *, skip_special: bool = False) -> str:
        """Text of ids; bytes that are not valid UTF-8 read as U+FFFD."""
        flags = (_SKIP_CONTROL if skip_special else 0) | _REPLACE_INVALID
        return bytes(self._t.decode(list(ids), flags)).decode("utf-8")

    def decode_bytes(self, ids: Iterable[int], *, skip_special: bool = False) -> bytes:
        """The exact bytes of ids (may be invalid or cut UTF-8)."""
        return bytes(self._t.decode(list(ids), _SKIP_CONTROL if skip_special else 0))

    def stream(self, *, skip_special: bool = False) -> StreamDecoder:
        return StreamDecoder(self, skip_special=skip_special)

    def id_to_token(self, token_id: int) -> str:
        """Stored string of a token (byte-level form for BPE tokens)."""
        return bytes(self._t.token(token_id)[0]).decode("utf-8", "replace")

    def token_type(self, token_id: int) -> TokenType:
        return TokenType(self._t.token(token_id)[1])

    def token_to_id(self, token: str | bytes) -> int | None:
        """Id of the token stored as exactly `token`, or None."""
        i = self._t.find(_as_bytes(token))
        return None if i < 0 else i

    def encode_chat(
        self,
        messages: Iterable[Mapping[str, object]],
        *,
        think: bool | str | int = "none",
        add_generation_prompt: bool = True,
        tool_context: bool = False,
        special_in_content: bool | str = False,
    ) -> list[int]:
        """Prompt ids of a conversation (see render_chat): template markers by id, the text
        between them encoded as plain text unless special_in_content asks otherwise."""
        ids: list[int] = _core._chat_render_ids(
            self._t,
            _messages(messages),
            _think_mode(think),
            int(add_generation_prompt),
            int(tool_context),
            _special_flags(special_in_content),
        ).tolist()
        return ids

    render_chat = staticmethod(render_chat)
