"""Shared fixtures-in-code for the DSpark reference tests: tiny target + support models, an
independent restatement of the context-row recipe, and a drafter wrapper that forces chosen
acceptance lengths (a random tiny drafter rarely agrees with the target)."""

from __future__ import annotations

import functools
import itertools

import numpy as np
from reference import dspark_ref as D
from reference import dspark_tiny as DT
from reference import dsv4_ref as R
from reference import lowp, tiny

# The stage timers a drafting cycle must run (each > 0 once DSpark proposed): the seed's failure
# showed as these at 0.000 ms with errors=0 (docs/DSPARK.md).
STAGE_TIMERS = (
    "propose",
    "prop_stage0",
    "prop_setup",
    "prop_cache",
    "prop_chain",
    "prop_hidden",
    "prop_conf0",
    "prop_logits",
    "prop_markov",
    "verify",
    "verify_upload",
    "verify_layer",
    "verify_head",
    "verify_read",
    "snapshot",
)


def assert_stage_timers(st: dict, n_stages: int) -> None:
    """Every stage timer ran (> 0), and the stage timers (backend time between marks: device
    events on a GPU) nest inside the host's wall clock around their pass, and add up: the
    seed's 0.000 ms stages, or timers that measure the host issuing work, fail here."""
    for key in STAGE_TIMERS:
        assert st[key] > 0, key
    stages = st["stage_ms"][:n_stages]
    assert all(ms > 0 for ms in stages), stages
    slack = 0.0005  # the statistics carry milliseconds to 3 decimals
    assert abs(sum(stages) - st["prop_chain"]) <= slack * (n_stages + 1)
    nests = {
        "propose": (
            "prop_setup",
            "prop_chain",
            "prop_hidden",
            "prop_conf0",
            "prop_logits",
            "prop_markov",
        ),
        "verify": ("snapshot", "verify_upload", "verify_layer", "verify_head", "verify_read"),
    }
    for whole, parts in nests.items():
        got = {k: st[k] for k in (whole, *parts)}
        assert sum(st[k] for k in parts) <= st[whole] + slack * (len(parts) + 1), got


@functools.cache
def tiny_pair(n_vocab: int = 512, small: bool = False, block_size: int = 5, seed: int = 0):
    """(HParams, target weights, DSparkParams, support weights) of a tiny float model.

    small=True: 2 layers without compressors (fast loops for the statistical tests)."""
    kw = dict(n_vocab=n_vocab)
    if small:
        kw.update(n_layer=2, compress_ratios=(0, 0), swiglu_clamp=(10.0,) * 2, n_hash=1)
    hp = tiny.tiny_float_hparams(**kw)
    dp = DT.tiny_dspark_params(hp, block_size=block_size)
    return hp, tiny.random_weights(hp, seed), dp, DT.random_support_weights(hp, dp, seed + 1)


def make_models(n_vocab=512, small=False, block_size=5, simulate_quant=True, window=None, seed=0):
    hp, w, dp, sw = tiny_pair(n_vocab, small, block_size, seed)
    m = R.Model(hp, w, simulate_quant=simulate_quant)
    kw = {} if window is None else {"window": window}
    return m, D.Drafter(m, dp, sw, **kw)


def rope_restated(x, pos, n_rot, base):
    """RoPE on the last n_rot dims as complex multiplication (adjacent pairs = re, im)."""
    y = np.array(x, dtype=np.float64)
    t = y[..., -n_rot:]
    z = t[..., 0::2] + 1j * t[..., 1::2]
    z = z * np.exp(1j * pos * base ** (-np.arange(n_rot // 2) * 2.0 / n_rot))
    t[..., 0::2], t[..., 1::2] = z.real, z.imag
    return y


def context_row_restated(drafter, s, captures, pos):
    """kv_norm_s(wkv_s(RMSNorm(main_proj · concat(captures), main_norm))), RoPE base
    rope.freq_base at pos, FP8 on the non-RoPE dims (docs/DSPARK_REFERENCE.md, reading 5)."""
    hp, w = drafter.hp, drafter.w
    eps = hp.rms_eps

    def norm(x, g):
        return x / np.sqrt(np.mean(x * x) + eps) * g

    h = np.concatenate([captures[il] for il in sorted(captures)])
    main_x = norm(w["mtp.0.main_proj.weight"] @ h, w["mtp.0.main_norm.weight"])
    kv = norm(w[f"mtp.{s}.attn_kv.weight"] @ main_x, w[f"mtp.{s}.attn_kv_a_norm.weight"])
    kv = rope_restated(kv, pos, hp.n_rot, hp.rope_base)
    if drafter.simulate_quant:
        kv[: hp.d_nope] = lowp.fp8_roundtrip(kv[: hp.d_nope])
    return kv


def target_captures(target, tokens, layers):
    """Captures of every position of a fresh target run over tokens."""
    st = target.new_state()
    out = []
    for t in tokens:
        _, info = target.forward_token(t, state=st, capture_layers=layers)
        out.append(info["capture"])
    return out, st


class ForcedDrafter:
    """A Drafter whose proposals are replaced by the target's greedy continuation for the first
    k tokens and wrong tokens after (k cycles through `pattern`), so every acceptance length
    occurs. Everything else (rings, block forward, confidences) is the real drafter's."""

    def __init__(self, drafter, target, pattern):
        self.drafter, self.target = drafter, target
        self.pattern = itertools.cycle(pattern)
        self.session = None

    def __getattr__(self, name):
        return getattr(self.drafter, name)

    def propose(self, anchor, p, temperature=0.0, threshold=0.0, rng=None, *, state, n_max=None):
        prop = self.drafter.propose(
            anchor, p, temperature, threshold, rng, state=state, n_max=n_max
        )
        k = next(self.pattern)
        st = self.session.state.copy()
        good, tok = [], anchor
        for _ in prop.drafts:
            tok = int(np.argmax(self.target.forward_token(tok, state=st)))
            good.append(tok)
        V = self.target.hp.n_vocab
        prop.drafts = good[:k] + [(g + 1) % V for g in good[k:]]
        return prop


def forced_generate(target, drafter, prompt, max_tokens, pattern, **kw):
    fd = ForcedDrafter(drafter, target, pattern)
    s = D.SpeculativeSession(target, fd, **kw)
    fd.session = s
    out = [s.prefill(prompt)]
    while len(out) < max_tokens and out[-1] not in s.stop_ids:
        out += s.cycle(max_tokens - len(out))
    return out, s
