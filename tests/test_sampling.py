"""The sampler: greedy, temperature, top-k, top-p, min-p; seeded and reproducible; draws follow
the distribution it reports (chi-square)."""

from __future__ import annotations

import numpy as np
import pytest

import ds4rt


def reference_probs(logits, temperature, top_k=0, top_p=1.0, min_p=0.0):
    """float64 statement of the documented order: softmax(l/T) -> top-k -> top-p -> min-p."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    order = sorted(range(len(p)), key=lambda i: (-p[i], i))
    if 0 < top_k < len(p):
        p[order[top_k:]] = 0
    if top_p < 1.0:
        total, cum = p.sum(), 0.0
        for j, i in enumerate(order):
            cum += p[i]
            if cum >= top_p * total:
                p[order[j + 1 :]] = 0
                break
    if min_p > 0:
        p[p < min_p * p.max()] = 0
    return p / p.sum()


LOGITS = np.array([2.0, 1.0, 0.5, 0.5, -1.0, 3.0, 0.0, -2.0, 1.5, 2.5], dtype=np.float32)


def test_greedy_is_argmax_with_lowest_index_ties():
    s = ds4rt.Sampler(10)
    assert s.sample(LOGITS) == 5
    assert s.sample(np.array([1, 4, 4, 2], dtype=np.float32).tolist() + [0] * 6) == 1
    p = s.probs(LOGITS)
    assert p[5] == 1.0 and p.sum() == 1.0


@pytest.mark.parametrize(
    "params",
    [
        dict(temperature=1.0),
        dict(temperature=0.7, top_k=3),
        dict(temperature=1.3, top_p=0.8),
        dict(temperature=1.0, min_p=0.2),
        dict(temperature=0.9, top_k=6, top_p=0.9, min_p=0.05),
    ],
)
def test_probs_follow_the_documented_order(params):
    got = ds4rt.Sampler(10, **params).probs(LOGITS)
    np.testing.assert_allclose(got, reference_probs(LOGITS, **params), rtol=1e-5, atol=1e-7)


def test_seeded_draws_are_reproducible_and_seed_dependent():
    def draws(seed):
        s = ds4rt.Sampler(10, temperature=1.0, seed=seed)
        return [s.sample(LOGITS) for _ in range(200)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


@pytest.mark.parametrize(
    "params", [dict(temperature=1.0), dict(temperature=0.8, top_k=4, min_p=0.1)]
)
def test_draws_follow_the_distribution(params):
    s = ds4rt.Sampler(10, seed=123, **params)
    p = reference_probs(LOGITS, **params)
    n = 40000
    counts = np.bincount([s.sample(LOGITS) for _ in range(n)], minlength=10)
    assert counts[p == 0].sum() == 0
    keep = p > 0
    expected = p[keep] * n
    chi2 = float((((counts[keep] - expected) ** 2) / expected).sum())
    # 99.9th percentile of chi-square with <= 9 degrees of freedom is 27.9
    assert chi2 < 27.9, (chi2, counts, expected)


def test_bad_parameters_are_refused():
    with pytest.raises(ds4rt.errors.InvalidArgumentError, match="top_p"):
        ds4rt.Sampler(10, temperature=1.0, top_p=0.0)
    with pytest.raises(ds4rt.errors.InvalidArgumentError):
        ds4rt.Sampler(10, temperature=float("nan"))
    with pytest.raises(ValueError, match="expected 10 logits"):
        ds4rt.Sampler(10).sample(np.zeros(9, dtype=np.float32))
