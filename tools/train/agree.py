"""ds4rt against the PyTorch model on an exported file: teacher-forced logits and greedy
continuations (used by tests/test_default_model.py and tools/train/eval_ds4rt.py).

The PyTorch side loads the GGUF's own (dequantised) weights, so both sides compute the same
function of the same weights; what differs is ds4rt's arithmetic: it rounds every activation
to Q8_0 (blocks of 32) before a Q8_0 product and to F16 before an F16 product
(docs/QUANTS.md), and sums in its own order. The agreement measures are:

* per row, the relative L2 error ||z_ds4rt - z_torch|| / ||z_torch|| of the logits;
* greedy agreement on ds4rt's own greedy continuation: at every position PyTorch, fed the same
  prefix, must pick ds4rt's next token, unless its own top-2 logit margin there is below a
  near-tie threshold (then either choice is a correct greedy decode within rounding).
"""

from __future__ import annotations

import gguf_io
import numpy as np
import torch

from model import Target


def torch_target(path, dtype=torch.float32, simulate_quant: bool = True) -> Target:
    sh, w, _ = gguf_io.read_target(path)
    m = Target(sh, dtype=dtype, simulate_quant=simulate_quant)
    m.load_numpy(w)
    m.eval()
    return m


@torch.no_grad()
def torch_logits(m: Target, ids) -> np.ndarray:
    return m(torch.tensor([list(ids)])).double()[0].numpy()


def row_errors(a: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.linalg.norm(a - ref, axis=-1) / np.linalg.norm(ref, axis=-1)


def margins(z: np.ndarray) -> np.ndarray:
    top2 = np.sort(z, axis=-1)[..., -2:]
    return top2[..., 1] - top2[..., 0]


def greedy_check(ds4_model, m: Target, prompt, n: int, tie: float) -> dict:
    """ds4rt's greedy continuation of `prompt` (n tokens, EOS ignored) checked against PyTorch
    teacher-forced on the same sequence."""
    s = ds4_model.session(n_ctx=len(prompt) + n + 8)
    out = s.generate(list(prompt), max_tokens=n, stop_at_eos=False).ids
    seq = list(prompt) + out
    z = torch_logits(m, seq)[len(prompt) - 1 : len(seq) - 1]
    pick = z.argmax(-1)
    mg = margins(z)
    disagree = [i for i in range(len(out)) if pick[i] != out[i]]
    return {
        "tokens": out,
        "disagree": disagree,
        "disagree_margins": [float(mg[i]) for i in disagree],
        "near_ties": int((mg < tie).sum()),
        "ok": all(mg[i] < tie for i in disagree),
    }
