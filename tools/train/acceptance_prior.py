#!/usr/bin/env python3
"""Write a DSpark support model's acceptance prior (docs/DSPARK.md, "Scheduler").

    python tools/train/acceptance_prior.py SUPPORT EVAL.json -o OUT [--config always_threshold0]
    python tools/train/acceptance_prior.py SUPPORT --remove -o OUT

The prior is the drafter's measured conditional acceptance per block position in ds4rt itself:
`conditional_acceptance_at` of the JSON that tools/train/accept_ds4rt.py prints (or of the
"acceptance" section of tools/train/eval_ds4rt.py's), configuration `always_threshold0` by
default (every cycle a full block, threshold 0: every position is verified as often as the
drafts reach it, so the curve is the drafter's, not the scheduler's choice of cycles). It is
stored as the FLOAT32 array `ds4rt.dspark.acceptance_prior` (at most block_size values, each in
[0, 1]); the adaptive scheduler starts its estimates from it, each value counted as a few
observations (DS4RT_SCHED_PRIOR_WEIGHT in src/api/scheduler.h). `--remove` writes a copy
without it: the scheduler then starts uninformed.

The file is copied byte for byte except for the metadata: the key is replaced or added, the
tensor records and the data section are kept (tensor offsets are relative to the data section,
which is re-aligned to the file's alignment).
"""

from __future__ import annotations

import argparse
import json
import math
import struct
import sys
from pathlib import Path

KEY = "ds4rt.dspark.acceptance_prior"
# GGUF value types: sizes of the fixed-size ones
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _UINT32, _FLOAT32 = 8, 9, 4, 6


class _Cursor:
    """Walks the header's records to find their byte ranges: the rewrite copies every other
    record verbatim, which neither ds4rt.gguf nor gguf-py's reader hands out."""

    def __init__(self, buf: bytes, at: int):
        self.buf, self.at = buf, at

    def take(self, fmt: str):
        v = struct.unpack_from("<" + fmt, self.buf, self.at)
        self.at += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self) -> bytes:
        n = self.take("Q")
        s = self.buf[self.at : self.at + n]
        self.at += n
        return s

    def skip_value(self, vtype: int) -> None:
        if vtype in _FIXED:
            self.at += _FIXED[vtype]
        elif vtype == _STRING:
            self.string()
        elif vtype == _ARRAY:
            etype, n = self.take("I"), self.take("Q")
            if etype in _FIXED:
                self.at += _FIXED[etype] * n
            else:
                for _ in range(n):
                    self.skip_value(etype)
        else:
            raise ValueError(f"unknown GGUF value type {vtype} at byte {self.at}")


def _kv(key: str, vtype: int, payload: bytes) -> bytes:
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<I", vtype) + payload


def block_size(path: Path) -> int:
    """The support model's block size, read with ds4rt's GGUF reader under the spellings the
    loader accepts, in its order (src/dspark/support.c; docs/DSPARK.md)."""
    from ds4rt import gguf

    md = gguf.inspect(path)["metadata"]
    spellings = ("deepseek4.dspark.", "deepseek4.dspark_", "dspark.", "dflash.")
    for key in (p + "block_size" for p in spellings):
        if isinstance(md.get(key), int):
            return md[key]
    raise ValueError(f"{path}: no block size (not a DSpark support model?)")


def rewrite(src: Path, dst: Path, prior: list[float] | None) -> None:
    """Copy `src` to `dst` with the prior set (or removed, with None)."""
    src, dst = Path(src), Path(dst)
    buf = src.read_bytes()
    c = _Cursor(buf, 0)
    magic, version = c.take("I"), c.take("I")
    if magic != 0x46554747 or version < 2:
        raise ValueError(f"{src}: not a GGUF file of version >= 2")
    n_tensors, n_kv = c.take("Q"), c.take("Q")
    kvs, alignment = [], 32
    for _ in range(n_kv):
        start = c.at
        key = c.string().decode("utf-8", "replace")
        vtype = c.take("I")
        at = c.at
        c.skip_value(vtype)
        if key == "general.alignment" and vtype == _UINT32:
            alignment = struct.unpack_from("<I", buf, at)[0]
        if key != KEY:
            kvs.append(buf[start : c.at])
    if prior is not None:
        kvs.append(
            _kv(
                KEY,
                _ARRAY,
                struct.pack("<IQ", _FLOAT32, len(prior)) + struct.pack(f"<{len(prior)}f", *prior),
            )
        )
    infos_start = c.at
    for _ in range(n_tensors):
        c.string()
        n_dims = c.take("I")
        c.at += 8 * n_dims + 4 + 8
    infos = buf[infos_start : c.at]
    data_start = (c.at + alignment - 1) // alignment * alignment
    head = struct.pack("<IIQQ", magic, version, n_tensors, len(kvs)) + b"".join(kvs) + infos
    pad = (-len(head)) % alignment
    dst.write_bytes(head + b"\0" * pad + buf[data_start:])


def curve_from_json(doc: dict, config: str) -> list[float]:
    """`conditional_acceptance_at` of `config` in accept_ds4rt.py's or eval_ds4rt.py's JSON."""
    sec = doc.get("acceptance", doc)
    if config not in sec or "conditional_acceptance_at" not in sec[config]:
        raise ValueError(
            f"no {config}.conditional_acceptance_at in the JSON (configs: {sorted(sec)})"
        )
    return [float(v) for v in sec[config]["conditional_acceptance_at"]]


def check_curve(curve: list[float], block_size: int) -> list[float]:
    """The prior the loader accepts: 1..block_size finite values in [0, 1] (a longer curve is
    cut to the block size)."""
    curve = curve[:block_size]
    if not curve:
        raise ValueError("the acceptance curve is empty")
    for i, v in enumerate(curve):
        if not (math.isfinite(v) and 0.0 <= v <= 1.0):
            raise ValueError(f"acceptance[{i}] = {v}: must be in [0, 1]")
    return curve


def prior_from_eval(support: Path, doc: dict, config: str = "always_threshold0") -> list[float]:
    """The prior to write into `support` from an acceptance JSON (accept_ds4rt.py /
    eval_ds4rt.py), checked as the loader will check it."""
    return check_curve(curve_from_json(doc, config), block_size(support))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("support", type=Path)
    ap.add_argument("eval", type=Path, nargs="?", help="accept_ds4rt.py / eval_ds4rt.py JSON")
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--config", default="always_threshold0")
    ap.add_argument("--remove", action="store_true", help="write a copy without the prior")
    args = ap.parse_args(argv)
    if args.remove == (args.eval is not None):
        ap.error("give either an acceptance JSON or --remove")
    if args.out.resolve() == args.support.resolve():
        ap.error("write a new file (-o): the input may be mapped by a running ds4rt")
    prior = None
    if not args.remove:
        prior = prior_from_eval(args.support, json.loads(args.eval.read_text()), args.config)
    rewrite(args.support, args.out, prior)
    print(f"{args.out}: {KEY} = {prior if prior is not None else 'removed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
