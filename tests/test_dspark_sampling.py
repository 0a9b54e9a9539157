"""Speculative sampling at T > 0 draws from the target's distribution (docs/DSPARK.md,
verification).

Two checks on a tiny model with an 8-token vocabulary and a 2- or 3-token block:

* exact: every random decision of one speculative cycle (the Markov chain's draft samples, the
  accept/reject coin flips, the residual and bonus samples) is enumerated through the
  reference's own `SpeculativeSession.cycle` (propose, verify, commit, rollback), with a
  scripted random source that follows every branch and multiplies its probability (the
  deterministic block forward and target rows are memoised so the few thousand paths are
  cheap). The probability of the first two
  emitted tokens must equal the target's p(x1)·p(x2 | x1) to rounding, with and without a
  confidence cut; a lossy variant (q from the base logits) must not.
* statistical: many seeds of the full loop (`SpeculativeSession`) against the target's exact
  distribution of the first tokens, with a chi-square goodness-of-fit test; plain sampling is
  put through the same test.
"""

import math
from collections import Counter, defaultdict
from copy import copy as shallow_copy

import numpy as np
import pytest
from dspark_helpers import make_models
from reference import dspark_ref as D

V = 8
PROMPT = [0, 3, 6, 2]


# --- exact enumeration ----------------------------------------------------------------------------
class ScriptedRandom:
    """Replays `script` (a list of decisions), then takes the first option of every new
    decision and records the other options as new scripts. `prob` is the path probability."""

    def __init__(self, script):
        self.script, self.i, self.prob, self.branches = list(script), 0, 1.0, []

    def _decide(self, options):
        if self.i < len(self.script):
            v = self.script[self.i]
        else:
            v = options[0][0]
            self.branches += [self.script + [alt] for alt, _ in options[1:]]
            self.script.append(v)
        self.prob *= dict(options)[v]
        self.i += 1
        return v

    def bernoulli(self, p):
        return self._decide([(v, q) for v, q in ((True, p), (False, 1.0 - p)) if q > 0])

    def choice(self, probs):
        probs = np.asarray(probs, dtype=np.float64)
        probs = probs / probs.sum()
        return self._decide([(int(k), probs[k]) for k in np.flatnonzero(probs > 0)])

    def uniform(self):
        raise AssertionError("the reference must draw through bernoulli/choice only")


def enumerate_outcomes(fn):
    """({outcome: probability}, number of paths) over every execution path of fn(rand)."""
    dist = defaultdict(float)
    stack = [[]]
    n = 0
    while stack:
        r = ScriptedRandom(stack.pop())
        dist[fn(r)] += r.prob
        stack += r.branches
        n += 1
    return dict(dist), n


def test_enumerator_and_chi2_helpers():
    d, n = enumerate_outcomes(lambda r: (r.choice([0.25, 0, 0.75]), r.bernoulli(0.1)))
    assert n == 4
    assert d == pytest.approx({(0, True): 0.025, (0, False): 0.225, (2, True): 0.075,
                               (2, False): 0.675})  # fmt: skip
    assert chi2_sf(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-9)
    assert chi2_sf(18.307038053275146, 10) == pytest.approx(0.05, rel=1e-9)
    assert chi2_sf(124.34211340400407, 100) == pytest.approx(0.05, rel=1e-9)
    assert chi2_sf(0.0, 3) == 1.0


class TargetRows:
    """softmax(target logits / T) after the prompt and a given continuation, cached."""

    def __init__(self, session, T):
        self.s, self.T, self.cache = session, T, {}

    def __call__(self, cont):
        cont = tuple(cont)
        if cont not in self.cache:
            st = self.s.state.copy()
            for t in cont:
                z = self.s.target.forward_token(t, state=st)
            self.cache[cont] = D.probs_at(z, self.T)
        return self.cache[cont]


class CachedDrafter(D.Drafter):
    """The reference drafter with its (deterministic) block forward memoised per (anchor, p);
    `lossy` replaces the draft distribution handed to the verifier by the base logits (a bug
    the exact test must see)."""

    def __init__(self, dr, lossy=False):
        self.__dict__.update(dr.__dict__)
        self._blocks, self._ctx, self.lossy = {}, {}, lossy

    def context_rows(self, main_x, pos):
        key = (pos, main_x.tobytes())
        if key not in self._ctx:
            self._ctx[key] = super().context_rows(main_x, pos)
        return self._ctx[key]

    def block_forward(self, anchor, p, state, block_size=None):
        key = (anchor, p, block_size)
        if key not in self._blocks:
            self._blocks[key] = super().block_forward(anchor, p, state, block_size)
        return self._blocks[key]

    def propose(self, *a, **kw):
        prop = super().propose(*a, **kw)
        if self.lossy:
            prop.corrected = prop.base_logits[: prop.n]
        return prop


class EnumSession(D.SpeculativeSession):
    """A session whose verify-pass target rows come from a cache keyed by the tokens fed in the
    current cycle (computed once on a copy of the state after the prompt)."""

    def cycle(self, room):
        self._fed = []
        return super().cycle(room)

    def copy(self, rand=None):
        """Shares the target state: cached rows never touch it, and the rollback to the
        checkpoint of an unchanged state writes back the same values."""
        new = shallow_copy(self)
        new.dstate, new.cycles, new.rand = self.dstate.copy(), [], rand
        return new

    def _forward(self, token):
        self._fed.append(int(token))
        key = tuple(self._fed)
        if key not in self._rows:
            st = self._base_state.copy()
            for t in key:
                z, info = self.target.forward_token(
                    t, state=st, capture_layers=self.drafter.capture_layers
                )
            self._rows[key] = (z, info["capture"])
        return self._rows[key]


def _one_step_distribution(session, anchor, T, threshold, lossy=False):
    """Exact distribution of the first two tokens after `anchor` from one `cycle` of the
    session's loop code, a one-token cycle being continued by the target (x2 ~ p(. | x1))."""
    base = EnumSession(
        session.target, CachedDrafter(session.drafter, lossy), temperature=T, threshold=threshold
    )
    base.state, base.dstate, base.p, base.anchor = session.state, session.dstate, session.p, anchor
    base._base_state, base._rows = session.state, {}
    rows = TargetRows(session, T)

    def step(rand):
        s = base.copy(rand=rand)
        emitted = s.cycle(session.drafter.block_size + 1)
        return (emitted[0], emitted[1] if len(emitted) > 1 else None)

    raw, n_paths = enumerate_outcomes(step)
    joint = np.zeros((V, V))
    for (x1, x2), pr in raw.items():
        if x2 is None:
            joint[x1] += pr * rows([anchor, x1])
        else:
            joint[x1, x2] += pr
    p1 = rows([anchor])
    want = p1[:, None] * np.array([rows([anchor, x]) for x in range(V)])
    return joint, want, n_paths


@pytest.fixture(scope="module")
def small():
    m, dr = make_models(n_vocab=V, small=True, block_size=2)
    s = D.SpeculativeSession(m, dr, temperature=1.0)
    s.prefill(PROMPT)
    return s


@pytest.mark.parametrize("T", [1.0, 0.6])
def test_one_step_is_exactly_the_target_distribution(small, T):
    joint, want, n_paths = _one_step_distribution(small, small.anchor, T, threshold=0.0)
    assert n_paths > 500
    assert joint.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(joint, want, rtol=0, atol=1e-14)
    bad, _, _ = _one_step_distribution(small, small.anchor, T, 0.0, lossy=True)
    assert 0.5 * np.abs(bad - want).sum() > 1e-3  # the check has teeth


def test_one_step_with_confidence_cut_is_exact(small):
    """A threshold that cuts the second slot for some first drafts and not for others (the cut
    depends on the sampled d_1 through W1[d_1] but never on d_2 itself)."""
    s, T = small, 1.0
    dr = s.drafter
    for anchor in range(V):
        _, _, h, _, U, _ = dr.block_forward(anchor, s.p, s.dstate)
        c0 = D.sigmoid(dr.confidence_logit(h[0], anchor))
        c1 = np.array([D.sigmoid(dr.confidence_logit(h[1], d)) for d in range(V)])
        thr = float(np.median(c1))
        if c0 > thr and (c1 < thr).any() and (c1 >= thr).any():
            break
    else:
        pytest.fail("no anchor gives a partial cut")
    joint, want, _ = _one_step_distribution(s, anchor, T, threshold=thr)
    np.testing.assert_allclose(joint, want, rtol=0, atol=1e-14)


# --- the full loop, many seeds ---------------------------------------------------------------
def chi2_sf(x, k):
    """P(chi2_k > x) = Q(k/2, x/2), the regularized upper incomplete gamma function (series
    below a + 1, Lentz continued fraction above)."""
    a, z = k / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    lg = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > 1e-17 * abs(total):
            n += 1
            term *= z / n
            total += term
        return 1.0 - total * math.exp(lg)
    b = z + 1 - a
    c, d = 1e300, 1 / b
    f = d
    i = 1
    while True:
        an = -i * (i - a)
        b += 2
        d = an * d + b
        c = b + an / c
        d = 1 / d
        f *= d * c
        if abs(d * c - 1) < 1e-16:
            return f * math.exp(lg)
        i += 1


def gof_pvalue(counts: Counter, probs: dict, n: int) -> float:
    """Chi-square goodness of fit; cells with expected count < 5 are pooled into one."""
    obs, exp = [], []
    pool_o = pool_e = 0.0
    for cell, pr in probs.items():
        e = n * pr
        if e < 5:
            pool_o += counts.get(cell, 0)
            pool_e += e
        else:
            obs.append(counts.get(cell, 0))
            exp.append(e)
    assert sum(counts.values()) == n and all(c in probs for c in counts)
    if pool_e > 0:
        obs.append(pool_o)
        exp.append(pool_e)
    obs, exp = np.array(obs, float), np.array(exp, float)
    return chi2_sf(float(((obs - exp) ** 2 / exp).sum()), len(obs) - 1)


@pytest.mark.slow
def test_speculative_sampling_matches_target_distribution():
    T, n_runs, B = 1.0, 200, 3
    m, dr = make_models(n_vocab=V, small=True, block_size=B)
    base = D.SpeculativeSession(m, dr, temperature=T)
    base.prefill(PROMPT)
    p0 = D.probs_at(base.logits, T)
    rows = TargetRows(base, T)
    joint01 = {(a, b): p0[a] * rows([a])[b] for a in range(V) for b in range(V)}
    marg2 = defaultdict(float)
    for (a, b), pr in joint01.items():
        for c, pc in enumerate(rows([a, b])):
            marg2[c] += pr * pc
    spec, plain, accepted = [], [], Counter()
    for seed in range(n_runs):
        s = base.copy(rand=D.Random(seed))
        s.anchor = D.pick_token(base.logits, T, s.rand)
        spec.append(s.generate(B + 2))
        accepted.update(c.n_accepted for c in s.cycles)
        plain.append(D.plain_generate(m, PROMPT, 3, T, seed=10_000 + seed))
    assert all(len(o) == B + 2 for o in spec)
    assert {0, 1, 2} <= set(accepted)  # rejections and multi-token accepts both happen
    for name, outs in (("speculative", spec), ("plain", plain)):
        pv01 = gof_pvalue(Counter((o[0], o[1]) for o in outs), joint01, n_runs)
        pv2 = gof_pvalue(Counter(o[2] for o in outs), dict(marg2), n_runs)
        assert pv01 > 1e-3 and pv2 > 1e-3, (name, pv01, pv2)


def test_sampled_generation_is_reproducible_and_ring_mode_free():
    """At T > 0 the same seed gives the same tokens, and rolling the rings back ('speculative'
    ring mode: append the whole verify pass, crop) changes nothing."""
    m, dr = make_models(n_vocab=V, small=True, block_size=3)
    for seed in (1, 2):
        a, sa = D.speculative_generate(m, dr, PROMPT, 9, 0.8, seed=seed, return_session=True)
        b = D.speculative_generate(m, dr, PROMPT, 9, 0.8, seed=seed, ring_mode="speculative")
        assert a == b == D.speculative_generate(m, dr, PROMPT, 9, 0.8, seed=seed)
        assert len(a) == 9 and all(0 <= t < V for t in a)
        assert sum(c.n_accepted for c in sa.cycles) > 0
