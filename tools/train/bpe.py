"""A small byte-level BPE trained with `tokenizers`, laid out like DeepSeek V4's vocabulary.

The pipeline is DeepSeek V4's (docs/TOKENIZER.md "Encoding, step by step"): empty normaliser,
the three isolated `Split` steps, then `ByteLevel` without its own regex. The id layout is the
tiny generator's (docs/TINY_MODELS.md, "Tokenizer"), so ds4rt's C tokenizer and chat template
serve it unchanged:

    0, 1, 2        BOS, EOS, pad                     (control)
    3 .. 258       the 256 byte tokens in byte order (normal)
    259 .. V-7     merged tokens in the order their merge rules were learned (normal)
    V-6            <｜place▁holder▁no▁799｜>           (control: DSpark's noise token)
    V-5 .. V-1     <｜User｜> <｜Assistant｜> <think> </think> ｜DSML｜ (user-defined)

`train()` returns a `tinymodel.tokenizer.Tokenizer` (written into the GGUF by
`tinymodel.write.tokenizer_metadata`) and the matching `tokenizers` JSON document.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tinymodel import tokenizer as tt  # noqa: E402


def _pipeline(tok) -> None:
    from tokenizers import Regex, decoders, pre_tokenizers

    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in tt.SPLIT_PATTERNS]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()


def n_fixed() -> int:
    return len(tt.LEADING_SPECIALS) + 256 + len(tt.TRAILING_ADDED)


def train(texts: Iterable[str], vocab_size: int) -> tuple[tt.Tokenizer, dict]:
    """Train merges on `texts` so that the full vocabulary (specials included) has exactly
    vocab_size ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    n_bpe = vocab_size - len(tt.LEADING_SPECIALS) - len(tt.TRAILING_ADDED)
    if n_bpe <= 256:
        raise ValueError(f"vocab_size must exceed {n_fixed()}")
    raw = Tokenizer(models.BPE())
    _pipeline(raw)
    trainer = trainers.BpeTrainer(
        vocab_size=n_bpe,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    raw.train_from_iterator(texts, trainer)
    model = json.loads(raw.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    b2u = tt.byte_to_unicode()
    tokens = list(tt.LEADING_SPECIALS) + [b2u[b] for b in range(256)]
    seen = set(tokens)
    for m in merges:
        a, b = m.split(" ")
        if a not in seen or b not in seen:
            raise ValueError(f"merge {m!r} uses a token not made before it")
        t = a + b
        if t in seen:
            raise ValueError(f"merge {m!r} makes the existing token {t!r}")
        tokens.append(t)
        seen.add(t)
    if len(tokens) != n_bpe + len(tt.LEADING_SPECIALS):
        raise ValueError(f"trainer made {len(tokens) - 259} merges, wanted {n_bpe - 256}")
    types = [tt.CONTROL] * len(tt.LEADING_SPECIALS) + [tt.NORMAL] * (
        len(tokens) - len(tt.LEADING_SPECIALS)
    )
    for s, kind in tt.TRAILING_ADDED:
        tokens.append(s)
        types.append(kind)
    tok = tt.Tokenizer(tokens, types, merges, bos_id=0, eos_id=1, pad_id=2, source="ds4rt-train")
    return tok, tt.to_tokenizer_json(tok)


def load(doc: dict):
    """A `tokenizers.Tokenizer` from the JSON document."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(json.dumps(doc, ensure_ascii=False))


def ids(tok: tt.Tokenizer) -> dict:
    """The ids the training code needs."""
    return {
        "bos": tok.bos_id,
        "eos": tok.eos_id,
        "pad": tok.pad_id,
        "noise": tok.id_of(tt.NOISE),
        "user": tok.id_of(tt.USER),
        "assistant": tok.id_of(tt.ASSISTANT),
        "think": tok.id_of(tt.THINK),
        "end_think": tok.id_of(tt.END_THINK),
    }
