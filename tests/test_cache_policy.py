"""The Q8->F16 expansion cache policy: set by the host, reported with its reason, and never
changed by loading or using a support model (docs/CACHE.md)."""

from __future__ import annotations

import pytest
from tiny_models import model as tiny

import ds4rt


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A generated random pair (the float config: F32 weights, so no Q8->F16 candidates)."""
    return tiny(tmp_path_factory, "float", seed=0)


@pytest.mark.parametrize(
    ("policy", "fallbacks", "reason"),
    [
        ("auto", 0, "auto: off on the CPU backend"),
        ("off", 0, "off as requested"),
        ("on", 1, "no F16 GEMM path"),
    ],
)
def test_policy_is_reported_with_its_reason(pair, policy, fallbacks, reason):
    cache = ds4rt.Model(str(pair.target), cache=policy, cache_budget=1 << 20).info["cache"]
    assert cache["requested"] == policy and not cache["active"] and cache["bytes"] == 0
    assert cache["fallbacks"] == fallbacks and reason in cache["reason"]


@pytest.mark.parametrize("policy", ["auto", "on"])
def test_support_model_does_not_change_the_cache(pair, policy):
    m = ds4rt.Model(str(pair.target), cache=policy)
    before = m._m.info()["cache"]
    d = ds4rt.DSpark(m, str(pair.support))
    s = m.session(max_batch=16)
    s.generate([0, 5, 9], max_tokens=12, dspark=d, scheduler="always")
    assert m._m.info()["cache"] == before
    st = s.spec_stats()  # the stats carry the model's cache counters
    assert (st["cache_bytes"], st["cache_fallbacks"]) == (before["bytes"], before["fallbacks"])


def test_unknown_policy(pair):
    with pytest.raises(ValueError, match="cache must be"):
        ds4rt.Model(str(pair.target), cache="sometimes")
