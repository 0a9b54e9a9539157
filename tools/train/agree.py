"""ds4rt against the PyTorch model on an exported file: teacher-forced logits and greedy
continuations (used by tests/test_default_model.py and tools/train/eval_ds4rt.py).

The PyTorch side loads the GGUF's own (dequantised) weights, so both sides compute the same
function of the same weights; what differs is ds4rt's arithmetic: it rounds every activation
to Q8_0 (blocks of 32) before a Q8_0 product and to F16 before an F16 product
(docs/QUANTS.md), and sums in its own order. The agreement measures are:

* per row, the relative L2 error ||z_ds4rt - z_torch|| / ||z_torch|| of the logits;
* greedy agreement on ds4rt's own greedy continuation: at every position PyTorch, fed the same
  prefix, must pick ds4rt's next token, unless PyTorch's own gap between its choice and ds4rt's
  is within what the rounding moves a logit by (`rounding_slack`: a near-tie threshold, or six
  times the row's RMS logit difference): then either choice is a correct greedy decode;
* for the drafter, per DSpark proposal: the Markov-corrected logits of every slot (PyTorch's
  heads run along ds4rt's drafted chain), the confidences, and ds4rt's drafts equal to
  PyTorch's argmax except at near-ties.
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


@torch.no_grad()
def self_sensitivity(m: Target, ids, trials: int = 4, rel: float = 0.004, seed: int = 0):
    """Per row, the largest relative logit change of PyTorch itself when its token embedding
    is perturbed by `rel` relative noise (about one Q8_0 rounding, docs/QUANTS.md), over
    `trials` draws. Large where a discrete choice (router or indexer top-k, an FP8/FP4 code)
    sits near its boundary: there, rounding alone moves a row by that much."""
    w = m.w("token_embd.weight")
    ref = torch_logits(m, ids)
    orig = w.detach().clone()
    g = torch.Generator().manual_seed(seed)
    worst = np.zeros(len(ref))
    try:
        for _ in range(trials):
            w.copy_(orig * (1 + rel * torch.randn(orig.shape, generator=g, dtype=orig.dtype)))
            worst = np.maximum(worst, row_errors(torch_logits(m, ids), ref))
    finally:
        w.copy_(orig)
    return worst


def margins(z: np.ndarray) -> np.ndarray:
    top2 = np.sort(z, axis=-1)[..., -2:]
    return top2[..., 1] - top2[..., 0]


def rounding_slack(a: np.ndarray, ref: np.ndarray, tie: float) -> np.ndarray:
    """Per row, how far apart two logits of `ref` may be and still swap order in `a` by
    rounding alone: `tie`, or six times the row's RMS difference if that is larger (the most
    the rounding moved a single logit by, with room)."""
    return np.maximum(tie, 6.0 * np.sqrt(((a - ref) ** 2).mean(-1)))


def greedy_check(ds4_model, m: Target, prompt, n: int, tie: float) -> dict:
    """ds4rt's greedy continuation of `prompt` (n tokens, EOS ignored) checked against PyTorch
    teacher-forced on the same sequence: where PyTorch's argmax differs from ds4rt's token,
    PyTorch's own gap between the two must be within the row's rounding slack."""
    s = ds4_model.session(n_ctx=len(prompt) + n + 8)
    out = s.generate(list(prompt), max_tokens=n, stop_at_eos=False).ids
    seq = list(prompt) + out
    rows = slice(len(prompt) - 1, len(seq) - 1)
    z = torch_logits(m, seq)[rows]
    lg = ds4_model.session(n_ctx=len(seq) + 8).logits(seq).astype(np.float64)[rows]
    pick = z.argmax(-1)
    idx = np.arange(len(out))
    gap = z[idx, pick] - z[idx, out]
    slack = rounding_slack(lg, z, tie)
    disagree = [i for i in range(len(out)) if pick[i] != out[i]]
    return {
        "tokens": out,
        "disagree": disagree,
        "disagree_gaps": [float(gap[i]) for i in disagree],
        "disagree_slack": [float(slack[i]) for i in disagree],
        "near_ties": int((margins(z) < tie).sum()),
        "ok": all(gap[i] <= slack[i] for i in disagree),
    }


def torch_drafter(support_path, target: Target, dtype=torch.float32):
    """The PyTorch drafter on a support GGUF's own (dequantised) weights, bound to `target`
    (the drafter's Shape is the target's with the file's block size and Markov rank)."""
    import dataclasses

    from drafter import Drafter

    p = gguf_io.read_support_params(support_path)
    ids = tuple(int(i) for i in p["target_layer_ids"])
    sh = dataclasses.replace(
        target.sh,
        block_size=int(p["block_size"]),
        markov_rank=int(p["markov_rank"]),
        n_target_layers=len(ids),
    )
    if sh.target_layer_ids != ids:
        raise ValueError(f"target layers {ids} are not the last {len(ids)} of {sh.L}")
    _, w = gguf_io.read_tensors(support_path)
    dr = Drafter(
        sh, target, int(p["noise_token_id"]), dtype=dtype, simulate_quant=target.simulate_quant
    )
    dr.load_numpy(w)
    dr.eval()
    return dr


@torch.no_grad()
def drafter_check(ds4_model, dspark, dr, seq, anchors, tie: float) -> list[dict]:
    """ds4rt's DSpark proposals after seq[: p + 1] with anchor seq[p + 1], for each p in
    `anchors`, against the PyTorch drafter on the same context. PyTorch's heads run along
    ds4rt's own chain (the same predecessors), so every slot is compared: the corrected logits'
    relative L2 error, the confidence, and whether ds4rt's draft is PyTorch's argmax or explained
    by rounding (PyTorch's gap between its argmax and ds4rt's draft within rounding_slack)."""
    sh = dr.sh
    x = torch.tensor([list(seq)])
    _, caps = dr.target(x, capture_layers=sh.target_layer_ids)
    out = []
    for p in anchors:
        s = ds4_model.session(n_ctx=len(seq) + 8)
        dspark.attach(s)
        s.eval(list(seq[: p + 1]))
        ids, conf, logits = dspark.propose(s, int(seq[p + 1]), threshold=0.0)
        h, U = dr.blocks([caps[il] for il in sh.target_layer_ids], x, torch.tensor([[p]]))
        prev = torch.tensor([[[int(seq[p + 1])] + ids[:-1]]])
        cor, cf = dr.heads(h, U, prev)
        z = cor[0, 0].double().numpy()
        lg = logits.astype(np.float64)
        pick = z.argmax(-1)
        rows = np.arange(len(ids))
        gap = z[rows, pick] - z[rows, ids]
        slack = rounding_slack(lg, z, tie)
        out.append(
            {
                "anchor": p,
                "drafts": ids,
                "torch_argmax": pick.tolist(),
                "rel_err": row_errors(lg, z).tolist(),
                "conf_err": float(np.abs(conf - torch.sigmoid(cf[0, 0]).double().numpy()).max()),
                "ok": bool((gap <= slack).all()),
                "gaps": gap.tolist(),
                "margins": margins(z).tolist(),
            }
        )
    return out
