"""The tiny generated models' tokenizer (tools/tinymodel, 512 ids with all 256 byte tokens):
ds4rt reads it from the target GGUF and must give the ids of `tokenizers` loading the
tokenizer.json the generator writes for the same vocabulary, encode any text, and round-trip."""

from __future__ import annotations

import random

import pytest
import tiny_models
from _tok_support import tokenizer_corpus

from ds4rt.tokenizer import Tokenizer

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    res = tiny_models.model(tmp_path_factory, "float", tokenizer_json=True)
    return Tokenizer.from_gguf(res.target), tokenizers.Tokenizer.from_file(str(res.tokenizer_json))


def test_tiny_vocabulary(tiny):
    tok, hf = tiny
    assert len(tok) == hf.get_vocab_size(with_added_tokens=True) == 512
    assert tok.bos_id == 0 and tok.eos_id == 1


def test_tiny_ids_equal_oracle(tiny):
    tok, hf = tiny
    items = list(tokenizer_corpus.corpus()) + tokenizer_corpus.stdlib_sources(limit=3)
    texts = [t for _, t in items]
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    got = [tok.encode(t, special=True) for t in texts]
    assert [n for (n, _), g, w in zip(items, got, want, strict=True) if g != w] == []


def test_tiny_round_trips_any_text(tiny):
    tok, _ = tiny
    rng = random.Random(12)
    for _ in range(200):
        text = "".join(
            chr(rng.choice([rng.randrange(0x80), rng.randrange(0x30000)]))
            for _ in range(rng.randrange(1, 40))
        )
        text = text.encode("utf-8", "replace").decode("utf-8", "replace")
        assert tok.decode(tok.encode(text)) == text
    raw = bytes(rng.randrange(256) for _ in range(4096))
    assert tok.decode_bytes(tok.encode(raw)) == raw.decode("utf-8", "replace").encode("utf-8")


def test_tiny_chat(tiny):
    tok, hf = tiny
    msgs = [{"role": "user", "content": "Hello there"}]
    text = Tokenizer.render_chat(msgs, think="high")
    assert tok.encode_chat(msgs, think="high") == hf.encode(text, add_special_tokens=False).ids
