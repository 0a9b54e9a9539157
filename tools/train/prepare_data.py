#!/usr/bin/env python3
"""Step 1: the training data of the embedded model (runs on the development machine).

    python tools/train/prepare_data.py [--out .traindata] [--docs DIR] [--fetch-docs]
        [--vocab 4096] [--seed 0]

Collects the corpus (tools/train/corpus.py), trains the tokenizer (tools/train/bpe.py) on the
training files, and writes to --out (an ignored folder; the GPU machine gets it through `carry`):

    train.u16, val.u16     token streams (uint16): shuffled documents, each BOS ... EOS, the
                           raw files and the chat samples (BOS <｜User｜>sig<｜Assistant｜></think>
                           body EOS) of their split
    drafter.u16            the first 3 M tokens of train.u16 (the drafter's prompt source)
    prompts.json           held-out prompts (chat-template function signatures and raw file
                           openings) for acceptance, speed and agreement checks
    tokenizer.json         the `tokenizers` document of the vocabulary
    vocab.json             the GGUF vocabulary (tokens, types, merges, special ids)
    meta.json              sizes, counts, sha256 of every file, the command and seed

The data is tokenised here because the GPU machine has no network and a different Python (its
standard library differs). `--fetch-docs` runs `apt-get download python3.11-doc` and
`dpkg -x` into --docs (no installation, no daemon).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bpe  # noqa: E402
import corpus  # noqa: E402

N_CHAT_PROMPTS = 48
N_RAW_PROMPTS = 16
RAW_PROMPT_TOKENS = 24
DRAFTER_TOKENS = 3_000_000


def fetch_docs(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", "python3.11-doc"], cwd=dest, check=True)
    debs = sorted(dest.glob("python3.11-doc_*.deb"))
    subprocess.run(["dpkg", "-x", str(debs[-1]), str(dest)], check=True)


def chat_ids(enc, ids: dict, user: str, body: str | None) -> list[int]:
    """The ids ds4rt's chat template gives (no system prompt, no thinking), then the body."""
    head = [ids["bos"], ids["user"]] + enc(user) + [ids["assistant"], ids["end_think"]]
    return head if body is None else head + enc(body) + [ids["eos"]]


def build_split(docs, enc_batch, ids, rng, with_chat=True):
    """Token sequences of one split: every raw file, and its functions as chat samples."""
    texts = [d.text for d in docs]
    seqs = [[ids["bos"]] + e + [ids["eos"]] for e in enc_batch(texts)]
    chats = []
    if with_chat:
        for d in docs:
            if d.source == "py":
                chats += list(corpus.chat_samples(d.text, rng))
        users = enc_batch([c.user for c in chats])
        bodies = enc_batch([c.assistant for c in chats])
        for u, b in zip(users, bodies, strict=True):
            seqs.append(
                [ids["bos"], ids["user"]]
                + u
                + [ids["assistant"], ids["end_think"]]
                + b
                + [ids["eos"]]
            )
    return seqs, chats


def stream(seqs, rng) -> np.ndarray:
    order = list(range(len(seqs)))
    rng.shuffle(order)
    flat = [t for i in order for t in seqs[i]]
    return np.asarray(flat, dtype=np.uint16)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=".traindata")
    ap.add_argument("--docs", type=Path, default=corpus.default_doc_root())
    ap.add_argument("--fetch-docs", action="store_true")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.fetch_docs and not (args.docs / corpus.DOC_SUBDIR).is_dir():
        fetch_docs(args.docs)
    docs = corpus.collect(args.docs)
    train_docs = [d for d in docs if not d.heldout]
    val_docs = [d for d in docs if d.heldout]
    print(f"corpus: {json.dumps(corpus.stats(docs))}", flush=True)

    tok, doc = bpe.train((d.text for d in train_docs), args.vocab)
    hf = bpe.load(doc)
    ids = bpe.ids(tok)

    def enc_batch(texts):
        return [e.ids for e in hf.encode_batch(list(texts), add_special_tokens=False)]

    def enc(text):
        return hf.encode(text, add_special_tokens=False).ids

    rng = random.Random(args.seed)
    train_seqs, _ = build_split(train_docs, enc_batch, ids, rng)
    val_seqs, val_chats = build_split(val_docs, enc_batch, ids, rng)
    train = stream(train_seqs, rng)
    val = stream(val_seqs, rng)
    train.tofile(out / "train.u16")
    val.tofile(out / "val.u16")
    # the drafter's prompt source: a slice of the (shuffled) training stream, small enough to
    # travel to the GPU machine together with the trained target
    train[:DRAFTER_TOKENS].tofile(out / "drafter.u16")

    # held-out prompts: function signatures through the chat template, raw file openings
    prng = random.Random(args.seed + 1)
    chats = [c for c in val_chats if 8 <= len(c.user) <= 200]
    prng.shuffle(chats)
    prompts = [
        {"kind": "chat", "text": c.user, "ids": chat_ids(enc, ids, c.user, None)}
        for c in chats[:N_CHAT_PROMPTS]
    ]
    raw = [d for d in val_docs if d.source == "py"]
    prng.shuffle(raw)
    for d in raw[:N_RAW_PROMPTS]:
        pid = [ids["bos"]] + enc(d.text)[:RAW_PROMPT_TOKENS]
        prompts.append({"kind": "raw", "file": d.rel, "ids": pid})
    (out / "prompts.json").write_text(json.dumps(prompts, ensure_ascii=False, indent=0) + "\n")
    (out / "tokenizer.json").write_text(json.dumps(doc, ensure_ascii=False) + "\n")
    vocab = {
        "tokens": tok.tokens,
        "types": tok.types,
        "merges": tok.merges,
        "bos_id": tok.bos_id,
        "eos_id": tok.eos_id,
        "pad_id": tok.pad_id,
        "ids": ids,
    }
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False) + "\n")
    text_bytes = sum(len(d.text.encode("utf-8")) for d in train_docs)
    meta = {
        "command": "python tools/train/prepare_data.py " + " ".join(argv or sys.argv[1:]),
        "seed": args.seed,
        "vocab_size": len(tok.tokens),
        "ids": ids,
        "corpus": corpus.stats(docs),
        "python": sys.version.split()[0],
        # the vocabulary's id order depends on it: tokenizers 0.23.3 orders 359 tied merges
        # differently from the version that built the first pair (docs/MODELS.md)
        "tokenizers": importlib.metadata.version("tokenizers"),
        "train_tokens": int(train.size),
        "val_tokens": int(val.size),
        "train_sequences": len(train_seqs),
        "val_sequences": len(val_seqs),
        "train_bytes_per_token_raw_files": text_bytes
        / max(1, sum(len(s) - 2 for s in train_seqs[: len(train_docs)])),
        "prompts": len(prompts),
        "seconds": round(time.time() - t0, 1),
    }
    meta["sha256"] = {
        p.name: sha256(p) for p in sorted(out.iterdir()) if p.is_file() and p.name != "meta.json"
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps({k: v for k, v in meta.items() if k != "sha256"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
