#!/usr/bin/env python3
"""One configuration of tools/sched_bench.py on one thread, for counting work with callgrind.

    valgrind --tool=callgrind python tools/sched_count.py default|quant CONFIG [SUPPORT]

CONFIG: load (load the model, the DSpark handle and the prompts only), plain (also the plain
references), adaptive, off, wrong (the references, then DSpark adaptive / DSpark with the
scheduler off / an always-wrong host drafter, outputs checked identical). The work of a
configuration is its instruction count minus plain's (plain's: minus load's), so startup
cancels and the numbers do not move with the load of a shared machine (docs/PERFORMANCE.md,
"DSpark never a net loss"). Default pair: 4 held-out chat prompts, up to 64 tokens each;
quant pair: one 32-token prompt, 128 tokens. SUPPORT replaces the pair's support model (the
same drafter with an acceptance prior, for instance).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sched_bench as sb  # noqa: E402

import ds4rt  # noqa: E402
from ds4rt import data  # noqa: E402


def main(argv=None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    pair, cfg = args[:2]
    tgt, sup = (
        (data.default_target(), data.default_support()) if pair == "default" else sb.quant_pair()
    )
    if len(args) > 2:
        sup = args[2]
    model = ds4rt.Model(tgt, n_threads=1)
    d = ds4rt.DSpark(model, sup)
    if pair == "default":
        prompts, n, eos = sb.heldout_prompts(model, 4), 64, True
    else:
        rng = np.random.default_rng(0)
        prompts = [[max(model.bos_id, 0)] + rng.integers(3, model.n_vocab, 31).tolist()]
        n, eos = 128, False
    if cfg == "load":
        return 0
    refs = [
        model.session(n_ctx=len(p) + n + 16).generate(p, max_tokens=n, stop_at_eos=eos).ids
        for p in prompts
    ]
    if cfg == "plain":
        return 0
    for p, ref in zip(prompts, refs, strict=True):
        kw = {
            "adaptive": {"dspark": d},
            "off": {"dspark": d, "scheduler": "off"},
            "wrong": {"draft": sb.wrong_drafter(p + ref)},
        }[cfg]
        s = model.session(n_ctx=len(p) + n + 16)
        if s.generate(p, max_tokens=n, stop_at_eos=eos, **kw).ids != ref:
            raise SystemExit(f"{cfg}: greedy output differs from plain decoding")
    return 0


if __name__ == "__main__":
    sys.exit(main())
