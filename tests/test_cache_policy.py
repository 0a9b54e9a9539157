"""The Q8->F16 expansion cache policy: set by the host, reported with its reason, and never
changed by loading or using a support model (docs/CACHE.md)."""

from __future__ import annotations

import pytest

import ds4rt
from ds4rt import data


@pytest.mark.parametrize(
    ("policy", "fallbacks", "reason"),
    [
        ("auto", 0, "auto: off on the CPU backend"),
        ("off", 0, "off as requested"),
        ("on", 1, "no F16 GEMM path"),
    ],
)
def test_policy_is_reported_with_its_reason(policy, fallbacks, reason):
    cache = ds4rt.Model(data.default_target(), cache=policy, cache_budget=1 << 20).info["cache"]
    assert cache["requested"] == policy and not cache["active"] and cache["bytes"] == 0
    assert cache["fallbacks"] == fallbacks and reason in cache["reason"]


@pytest.mark.parametrize("policy", ["auto", "on"])
def test_support_model_does_not_change_the_cache(policy):
    m = ds4rt.Model(data.default_target(), cache=policy)
    before = m._m.info()["cache"]
    d = ds4rt.DSpark(m, data.default_support())
    s = m.session(max_batch=16)
    s.generate([0, 5, 9], max_tokens=12, dspark=d, scheduler="always")
    assert m._m.info()["cache"] == before
    st = s.spec_stats()  # the stats carry the model's cache counters
    assert (st["cache_bytes"], st["cache_fallbacks"]) == (before["bytes"], before["fallbacks"])


def test_unknown_policy():
    with pytest.raises(ValueError, match="cache must be"):
        ds4rt.Model(data.default_target(), cache="sometimes")
