"""`ds4-cli tokenize`: text to token ids and back through the C tokenizer.

ds4-cli tokenize (--model GGUF | --vocab GGUF) [options] [TEXT]     ids of TEXT (or stdin)
ds4-cli tokenize (--model GGUF | --vocab GGUF) --decode IDS           text of ids ("1 2 3", "1,2")
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from .errors import Ds4rtError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ds4-cli tokenize",
        description="Encode text to token ids (or decode ids to text) with the tokenizer of a "
        "GGUF file, run by ds4rt's C tokenizer.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="GGUF", help="model GGUF (its tokenizer.* metadata)")
    src.add_argument("--vocab", metavar="GGUF", help="vocabulary-only GGUF")
    p.add_argument("text", nargs="?", help="text to encode (default: read stdin)")
    p.add_argument("--decode", metavar="IDS", help="decode these ids instead of encoding")
    p.add_argument(
        "--special",
        choices=["none", "all", "control", "user"],
        default="none",
        help="added tokens recognised in the text: none (default: plain text), all (as "
        "tokenizers' encode), control, user",
    )
    p.add_argument("--bos", action="store_true", help="prepend the BOS id")
    p.add_argument(
        "--chat",
        action="store_true",
        help="encode TEXT as one user turn of the chat template (BOS, markers, generation prefix)",
    )
    p.add_argument(
        "--think", choices=["none", "high", "max"], default="none", help="with --chat: mode"
    )
    p.add_argument("--pieces", action="store_true", help="print one id per line with its text")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--skip-special", action="store_true", help="with --decode: leave out control tokens"
    )
    return p


def _parse_ids(spec: str) -> list[int]:
    parts = [s for s in re.split(r"[\s,\[\]]+", spec) if s]
    try:
        return [int(s) for s in parts]
    except ValueError:
        raise SystemExit(f"ds4-cli tokenize: --decode wants integers, got {spec!r}") from None


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from .tokenizer import Tokenizer

    try:
        tok = Tokenizer.from_gguf(args.model or args.vocab)
        if args.decode is not None:
            ids = _parse_ids(args.decode)
            text = tok.decode(ids, skip_special=args.skip_special)
            if args.json:
                print(json.dumps({"ids": ids, "text": text}, ensure_ascii=False))
            else:
                sys.stdout.write(text + ("\n" if not text.endswith("\n") else ""))
            return 0
        text = args.text if args.text is not None else sys.stdin.read()
        if args.chat:
            ids = tok.encode_chat([{"role": "user", "content": text}], think=args.think)
        else:
            ids = tok.encode(text, special=args.special, add_bos=args.bos)
    except Ds4rtError as e:
        print(f"ds4-cli: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        doc = {"ids": ids, "n": len(ids)}
        if args.pieces:
            doc["pieces"] = [tok.decode_bytes([i]).decode("utf-8", "replace") for i in ids]
        print(json.dumps(doc, ensure_ascii=False))
    elif args.pieces:
        for i in ids:
            piece = tok.decode_bytes([i]).decode("utf-8", "replace")
            print(f"{i}\t{json.dumps(piece, ensure_ascii=False)}")
    else:
        print(" ".join(map(str, ids)))
    return 0
