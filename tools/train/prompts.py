"""The drafter's generation prompts, one rule for the PyTorch generator (train_drafter.py) and
ds4rt's (gen_windows.py): documents of the prompt stream that start at a BOS."""

from __future__ import annotations

import numpy as np


def doc_prompts(stream, bos, eos, P, count, rng):
    """count prompts of P tokens that start at a BOS and hold no EOS."""
    starts = np.flatnonzero(stream[: len(stream) - P] == bos)
    rng.shuffle(starts)
    out = []
    for s in starts:
        w = stream[s : s + P]
        if (w == eos).any():
            continue
        out.append(w.astype(np.int64))
        if len(out) == count:
            break
    return out
