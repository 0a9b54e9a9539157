"""tools/train/accept_ds4rt.py, the acceptance numbers of docs/MODELS.md measured in ds4rt: its
sums are ds4rt's own statistics, and splitting the prompts over worker processes changes
nothing (greedy, full blocks: the counts do not depend on timing)."""

from __future__ import annotations

import sys
from pathlib import Path

import ds4rt
from ds4rt import data

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "train"))

import accept_ds4rt  # noqa: E402

FULL = (("always_threshold0", {"scheduler": "always", "confidence_threshold": 0.0}),)


def _prompts(model):
    texts = ("def fibonacci(n):", "class Stack:", "def read_lines(path):")
    return [model.tokenizer.encode_chat([{"role": "user", "content": t}]) for t in texts]


def test_sums_are_ds4rts_statistics_and_workers_change_nothing():
    t, s = data.default_target(), data.default_support()
    model = ds4rt.Model(t)
    prompts = _prompts(model)
    one = accept_ds4rt.measure(t, s, prompts, tokens=24, workers=1, configs=FULL)
    two = accept_ds4rt.measure(t, s, prompts, tokens=24, workers=2, configs=FULL)
    assert one == two
    assert one["ds4rt"]["path"] == ds4rt.__file__
    d = ds4rt.DSpark(model, s)
    acc = cyc = 0
    for p in prompts:
        sess = model.session(max_batch=32)
        sess.generate(p, max_tokens=24, dspark=d, **FULL[0][1])
        st = sess.spec_stats()
        acc, cyc = acc + st["accepted_draft"], cyc + st["cycles"]
    r = one["always_threshold0"]
    assert (r["accepted_draft"], r["cycles"]) == (acc, cyc)
    assert r["committed_per_cycle"] == (acc + cyc) / cyc
    # position 1's conditional acceptance is its plain acceptance; later ones are conditioned
    assert r["conditional_acceptance_at"][0] == r["acceptance_at"][0]
    assert all(0.0 <= a <= 1.0 for a in r["conditional_acceptance_at"])
