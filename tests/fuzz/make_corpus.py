"""Seed corpora of the fuzz targets (docs/ROBUSTNESS.md).

    python tests/fuzz/make_corpus.py                 # rewrites tests/fuzz/corpus/ (committed)
    python tests/fuzz/make_corpus.py --models DIR    # writes DIR/target.gguf, DIR/support.gguf

The committed corpora are small: GGUF images that use every structure the reader knows, texts
and vocabularies for the tokenizer, parameter blocks, and patch lists for the model targets
(fuzz_model_file.c: their input patches a seed model file; the empty list loads it intact).
The seed model files themselves (about 1 and 1.5 MB: a 2-layer float target and its support
model) are generated, not committed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, TESTS)

import gguf_craft as gc  # noqa: E402


def gguf_seeds() -> dict[str, bytes]:
    deep = (gc.STRING, ["leaf", ""])
    for _ in range(3):
        deep = (gc.ARRAY, [deep, (gc.UINT64, [1, 2**64 - 1])])
    nested = gc.build(
        [("deep", gc.ARRAY, deep), ("general.alignment", gc.UINT32, 64)],
        [gc.Tensor("a", [32], gc.Q8_0), gc.Tensor("c", [], gc.F32)],
        alignment=64,
        version=2,
    ).data
    return {
        "small32.gguf": gc.small_complete(32).data,
        "small8.gguf": gc.small_complete(8).data,
        "nested.gguf": nested,
    }


def tokenizer_seeds() -> dict[str, bytes]:
    # first byte: bits 0-3 tokenize flags, bit 7 a vocabulary follows (fuzz_tokenizer.c)
    return {
        "plain.txt": b"\x00hello world, hello\n\tworld  123 4567",
        "special.txt": b"\x03<s>he said <think>hm</think></s>",
        "strict_bad_utf8.txt": b"\x04ok \xff\xfe \xe2\x82 \xf0\x9f\x98\x80",
        "bos_unicode.txt": "\x08\u00e9t\u00e9 \u4e2d\u6587 \U0001f600 \u0301a".encode(),
        "vocab.txt": b"\x80h\ne\nl\no\nhe\nll\n\nh e\nl l\nhe ll",
        "vocab_types.txt": b"\x83\x03<s>\x04<t>\x01a\x01b\n\na b",
    }


def params_seeds() -> dict[str, bytes]:
    # first byte: bit 0 set = scheduler (fuzz_params.c); little-endian fields in order
    sampler = struct.pack("<fiffQIB", 0.8, 40, 0.95, 0.05, 7, 255, 0) + bytes(range(256))
    greedy = struct.pack("<fiffQIB", 0.0, 0, 1.0, 0.0, 0, 15, 1) + struct.pack("<16f", *range(16))
    sched = struct.pack("<IiiiiBBIfff", 0, 0, 4, 4, 64, 229, 127, 1, 0.8, 0.2, 0.3)
    return {
        "sampler.bin": b"\x00" + sampler,
        "greedy.bin": b"\x00" + greedy,
        "scheduler.bin": b"\x01" + sched + bytes(range(200)),
    }


def patch(kind: int, offset: int, data: bytes) -> bytes:
    return bytes([kind]) + offset.to_bytes(3, "little") + bytes([len(data)]) + data


def model_seeds() -> dict[str, bytes]:
    # [kind u8][offset u24][n u8][bytes]: even kind = within the first 64 KiB, odd = scaled to
    # the whole file, 0xff = truncate at offset / 2^24 of the file
    return {
        "intact.bin": b"",
        "version.bin": patch(0, 4, b"\x02\x00\x00\x00"),
        "counts.bin": patch(0, 8, b"\xff\xff") + patch(0, 16, b"\x00"),
        "truncated.bin": patch(0xFF, 1 << 23, b""),
        "data.bin": patch(1, 1 << 22, b"\x00\x00\xc0\x7f" * 4),
    }


def write_corpus(root: str) -> None:
    for name, seeds in (
        ("gguf", gguf_seeds()),
        ("tokenizer", tokenizer_seeds()),
        ("params", params_seeds()),
        ("model", model_seeds()),
        ("support", model_seeds()),
    ):
        d = os.path.join(root, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for fname, data in seeds.items():
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)


def write_models(out: str) -> tuple[str, str]:
    """A 2-layer float target (no compressors) and its DSpark support model, with an acceptance
    prior (ds4rt.dspark.acceptance_prior), so fuzz_support mutates its validation too."""
    from dspark_helpers import tiny_pair
    from reference import dspark_tiny as DT
    from reference import tiny

    os.makedirs(out, exist_ok=True)
    hp, w, dp, sw = tiny_pair(n_vocab=64, small=True, block_size=3)
    target, support = os.path.join(out, "target.gguf"), os.path.join(out, "support.gguf")
    tiny.write_gguf(target, hp, w)
    DT.write_support_gguf(support, dp, sw)
    sys.path.insert(0, os.path.join(os.path.dirname(TESTS), "tools", "train"))
    try:
        import acceptance_prior
    finally:
        sys.path.pop(0)
    plain = support + ".plain"
    os.replace(support, plain)
    acceptance_prior.rewrite(plain, support, [0.7, 0.6, 0.5])
    os.remove(plain)
    return target, support


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", metavar="DIR", help="write the seed model files to DIR instead")
    a = ap.parse_args()
    if a.models:
        print(*write_models(a.models))
    else:
        write_corpus(os.path.join(HERE, "corpus"))


if __name__ == "__main__":
    main()
