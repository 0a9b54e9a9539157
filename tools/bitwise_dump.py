"""Dump every float the default pair produces for a fixed script, to compare builds bit for bit.

The script: the target's logits for a 40-token prompt, 10 decodes, verify passes of 2..8 tokens
each rolled back to a varying prefix (three rounds), after each rollback a DSpark proposal (its
tokens, confidences and corrected rows), then 20 passes of 8 tokens (compressed rows and the
indexer past its top-k) and a last proposal. Every float goes into one file, in order; two
builds (or two thread counts, or two kernel paths) agree when the files are byte-identical.

    PYTHONPATH=/tmp/before python tools/bitwise_dump.py /tmp/before_t1.bin --threads 1
    python tools/bitwise_dump.py /tmp/after_t1.bin --threads 1
    cmp /tmp/before_t1.bin /tmp/after_t1.bin
    DS4RT_CPU_ISA=scalar python tools/bitwise_dump.py /tmp/scalar.bin

Run it from outside the repository so that PYTHONPATH (or the installed package) decides which
build is imported.
"""

import argparse
import hashlib

import numpy as np

import ds4rt


def script(threads: int) -> list[np.ndarray]:
    """The fixed script's outputs, in order."""
    model = ds4rt.Model.default(n_threads=threads)
    dspark = ds4rt.DSpark.default(model)
    toks = np.random.default_rng(11).integers(3, model.n_vocab, 400).tolist()
    parts: list[np.ndarray] = []

    def proposal(session: ds4rt.Session, anchor: int) -> None:
        ids, conf, rows = dspark.propose(session, anchor, 5, 0.0)
        parts.extend([np.asarray(ids, np.float32), np.asarray(conf, np.float32), np.asarray(rows)])

    session = model.session(n_ctx=512, max_batch=16)
    dspark.attach(session)
    parts.append(session.logits(toks[:40]))
    for t in toks[40:50]:
        parts.append(session.logits([t]))
    pos = 50
    for rep in range(3):
        for n in range(2, 9):
            parts.append(session.logits(toks[pos : pos + n]))
            keep = (n * (rep + 1)) % (n + 1)
            session.truncate(pos + keep)
            pos += keep
            proposal(session, toks[pos - 1])
    for _ in range(20):
        parts.append(session.logits(toks[pos : pos + 8]))
        pos += 8
    proposal(session, toks[pos - 1])
    return parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="file to write the floats to")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    parts = script(args.threads)
    blob = b"".join(np.ascontiguousarray(p, dtype=np.float32).tobytes() for p in parts)
    with open(args.out, "wb") as f:
        f.write(blob)
    print(args.out, len(blob), "bytes, sha256", hashlib.sha256(blob).hexdigest()[:16])


if __name__ == "__main__":
    main()
