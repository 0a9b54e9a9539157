"""Speculative decoding: greedy identity with every draft source, rollback through verify
passes, the scheduler's behaviour, the confidence threshold, exact sampling, statistics."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tiny_models import model as tiny

import ds4rt


@pytest.fixture(scope="module")
def fl(tmp_path_factory):
    return tiny(tmp_path_factory, "float")


@pytest.fixture(scope="module")
def model(fl):
    return ds4rt.Model(str(fl.target))


@pytest.fixture(scope="module")
def dspark(model, fl):
    return ds4rt.DSpark(model, str(fl.support))


def prompt(n, seed, vocab=512):
    return [0] + np.random.default_rng(seed).integers(3, vocab, n - 1).tolist()


def plain(model, toks, n, **kw):
    return model.session(max_batch=32).generate(toks, max_tokens=n, stop_at_eos=False, **kw).ids


class Oracle:
    """Host drafters that know the plain continuation: right (always accepted), wrong (never),
    or right for a random number of tokens then wrong."""

    def __init__(self, full, vocab, mode, seed=0):
        self.full, self.vocab, self.mode = full, vocab, mode
        self.rng = np.random.default_rng(seed)

    def __call__(self, ctx, k):
        n = len(ctx)
        truth = [self.full[n + i] if n + i < len(self.full) else 3 for i in range(k)]
        if self.mode == "right":
            return truth
        if self.mode == "wrong":
            return [(t + 1) % self.vocab for t in truth]
        cut = int(self.rng.integers(0, k + 1))
        return truth[:cut] + [(t + 1) % self.vocab for t in truth[cut:]]


@pytest.mark.parametrize("n_prompt,n_gen", [(1, 40), (7, 25), (23, 60), (45, 33)])
def test_greedy_dspark_output_equals_plain_output(model, dspark, n_prompt, n_gen):
    toks = prompt(n_prompt, n_prompt)
    want = plain(model, toks, n_gen)
    for sched in ("always", "adaptive"):
        for threshold in (0.0, 0.5):
            s = model.session(max_batch=16)
            got = s.generate(
                toks,
                max_tokens=n_gen,
                dspark=dspark,
                scheduler=sched,
                confidence_threshold=threshold,
                stop_at_eos=False,
            ).ids
            assert got == want, (sched, threshold)
            # the context holds prompt + output, exactly as plain generation leaves it
            assert s.position == len(toks) + n_gen
            ref = model.session(max_batch=32)
            ref.eval(toks + want)
            assert np.array_equal(s.current_logits(), ref.current_logits())


@pytest.mark.parametrize("mode", ["right", "wrong", "random"])
def test_greedy_output_is_unchanged_by_forced_drafters(model, mode):
    toks = prompt(9, 3)
    want = plain(model, toks, 80)
    s = model.session(max_batch=32)
    got = s.generate(
        toks,
        max_tokens=80,
        draft=Oracle(toks + want, model.n_vocab, mode),
        scheduler="always",
        stop_at_eos=False,
    ).ids
    assert got == want
    st = s.spec_stats()
    if mode == "right":
        assert st["accepted_draft"] == st["proposed"] > 0 and st["miss_first"] == 0
    if mode == "wrong":
        assert st["accepted_draft"] == 0 and st["miss_first"] == st["cycles"] - st["no_draft"]


def test_adaptive_scheduler_backs_off_an_always_wrong_drafter(model):
    toks = prompt(5, 11)
    want = plain(model, toks, 300)
    s = model.session(max_batch=32)
    s.generate(
        toks, max_tokens=300, draft=Oracle(toks + want, model.n_vocab, "wrong"), stop_at_eos=False
    )
    st = s.spec_stats()
    drafting = st["cycles"] - st["no_draft"]
    assert drafting / st["cycles"] < 0.03, st  # the warm-up probe and the later probes
    # the warm-up is a probe; the next comes after probe_min skips, later ones rarer
    assert st["scheduler_skips"] > 0.9 * st["cycles"] and st["probes"] >= 2
    assert st["no_draft_by_reason"]["scheduler"] == st["scheduler_skips"]


def test_adaptive_scheduler_drafts_full_length_for_an_always_right_drafter(model):
    toks = prompt(5, 12)
    want = plain(model, toks, 200)
    s = model.session(max_batch=32)
    events = []
    s.generate(
        toks,
        max_tokens=200,
        draft=Oracle(toks + want, model.n_vocab, "right"),
        stop_at_eos=False,
        # the fixed cost model makes the schedule deterministic (measured verify costs of the
        # tiny model are nearly linear in the width, so there 5 or 8 drafts are a toss-up)
        scheduler=ds4rt.SchedulerOptions(max_draft=8, measured_costs=False),
        on_schedule=events.append,
    )
    st = s.spec_stats()
    hist = st["draft_len_hist"]
    # every cycle drafted: the warm-up probe (2), one cycle that still leans on the prior, then
    # the full 8 except where the tail rule shortened the last ones
    assert [e["planned"] for e in events[:3]] == [2, 5, 8]
    assert st["no_draft"] == st["tail_skips"] and hist[8] >= st["cycles"] - 4
    assert st["accepted_draft"] == st["proposed"]


def test_scheduler_off_never_drafts(model, dspark):
    toks = prompt(6, 13)
    s = model.session(max_batch=16)
    assert s.generate(
        toks, max_tokens=20, dspark=dspark, scheduler="off", stop_at_eos=False
    ).ids == plain(model, toks, 20)
    st = s.spec_stats()
    reasons = st["no_draft_by_reason"]
    assert st["proposed"] == 0 and reasons["scheduler_off"] + reasons["tail"] == st["cycles"] > 0


def test_confidence_threshold_ends(model, dspark):
    toks = prompt(12, 14)
    s = model.session(max_batch=16)
    s.generate(
        toks,
        max_tokens=20,
        dspark=dspark,
        scheduler="always",
        confidence_threshold=1.0,
        stop_at_eos=False,
    )
    st = s.spec_stats()  # sigma(c) < 1 always: every proposal is cut at its first position
    assert (
        st["proposed"] == 0 and st["no_draft_by_reason"]["confidence"] == st["confidence_cuts"] > 0
    )
    s = model.session(max_batch=16)
    s.generate(
        toks,
        max_tokens=20,
        dspark=dspark,
        scheduler="always",
        confidence_threshold=0.0,
        stop_at_eos=False,
    )
    st = s.spec_stats()  # 0 disables pruning: full blocks
    assert st["confidence_cuts"] == 0 and st["draft_len_hist"][5] > 0


def test_eos_inside_accepted_drafts_ends_generation(fl, tmp_path):
    """Make a token of the plain continuation the model's EOS: plain decoding stops after it,
    and so must speculative decoding when that token sits inside a block of accepted drafts."""
    from gguf import GGUFValueType as VT
    from gguf_rewrite import rewrite

    base = ds4rt.Model(str(fl.target))
    toks = prompt(4, 15)
    cont = plain(base, toks, 30)
    stop = cont[10]
    first = cont.index(stop)  # the first occurrence ends plain generation
    path = tmp_path / "eos.gguf"
    rewrite(str(fl.target), str(path), set_keys={"tokenizer.ggml.eos_token_id": (stop, VT.UINT32)})
    m = ds4rt.Model(str(path))
    want = m.session(max_batch=32).generate(toks, max_tokens=30).ids
    assert want == cont[: first + 1] and want[-1] == m.eos_id
    full = toks + cont

    def right(ctx, k):  # proposes past the EOS: everything up to it is accepted
        n = len(ctx)
        return [full[n + i] if n + i < len(full) else 3 for i in range(k)]

    s = m.session(max_batch=32)
    assert s.generate(toks, max_tokens=30, draft=right, scheduler="always").ids == want
    st = s.spec_stats()
    assert st["accepted_draft"] > 0 and st["tokens"] == len(want)
    # the drafts after the EOS were dropped from the context too, not only from the output
    ref = m.session(max_batch=32)
    ref.eval(toks + want)
    assert s.position == ref.position and np.array_equal(s.current_logits(), ref.current_logits())


def pair_distribution(model, toks, runs, **kw):
    counts = {}
    s = model.session(max_batch=32)
    for seed in range(runs):
        s.reset()
        out = tuple(
            s.generate(
                toks, max_tokens=2, temperature=0.9, top_k=3, seed=seed, stop_at_eos=False, **kw
            ).ids
        )
        counts[out] = counts.get(out, 0) + 1
    return counts


def exact_pair_distribution(model, toks):
    s = model.session(max_batch=32)
    sampler = ds4rt.Sampler(model.n_vocab, temperature=0.9, top_k=3)
    s.eval(toks)
    p0 = sampler.probs(s.current_logits())
    dist = {}
    for a in np.nonzero(p0)[0]:
        s2 = model.session(max_batch=32)
        s2.eval(toks + [int(a)])
        p1 = sampler.probs(s2.current_logits())
        for b in np.nonzero(p1)[0]:
            dist[(int(a), int(b))] = float(p0[a] * p1[b])
    return dist


def chi_square(counts, dist, runs):
    assert set(counts) <= set(dist), set(counts) - set(dist)
    return sum((counts.get(k, 0) - runs * p) ** 2 / (runs * p) for k, p in dist.items())


@pytest.mark.slow
def test_speculative_sampling_draws_from_the_target_distribution(model, dspark):
    """Two tokens at T = 0.9, top-k 3: 9 outcomes whose exact probabilities come from the
    target; plain sampling, DSpark drafting and a host drafter with its own distribution must
    all match them (chi-square, 8 degrees of freedom, 99.9th percentile 26.1)."""
    toks = prompt(10, 21)
    dist = exact_pair_distribution(model, toks)
    runs = 3000

    def host(ctx, k):  # drafts one token from a fixed, deliberately wrong distribution
        q = np.zeros((k, model.n_vocab), dtype=np.float32)
        q[:, :4] = 0.25
        rng = np.random.default_rng(len(ctx) * 7 + int(ctx[-1]))
        return [int(rng.integers(0, 4)) for _ in range(k)], q

    for kw in (
        {},
        {"dspark": dspark, "scheduler": "always"},
        {"draft": host, "scheduler": "always"},
    ):
        counts = pair_distribution(model, toks, runs, **kw)
        assert chi_square(counts, dist, runs) < 26.1, (kw.keys(), counts, dist)


def test_stats_line_json_and_callbacks(model, dspark):
    toks = prompt(8, 16)
    seen = []
    s = model.session(max_batch=16)
    s.generate(
        toks,
        max_tokens=24,
        dspark=dspark,
        scheduler="always",
        stop_at_eos=False,
        on_stats=lambda st, final: seen.append((st["cycles"], final)),
    )
    st = s.spec_stats()
    assert [c for c, final in seen if not final] == list(range(1, st["cycles"] + 1))
    assert seen[-1] == (st["cycles"], True)
    line = s.spec_stats_line()
    keys = re.findall(r" ([a-z_0-9]+)=", line)
    ds4_fields = [
        "cycles",
        "first_tokens",
        "proposed",
        "accepted_draft",
        "accept_rate",
        "avg_accept",
        "committed_per_verify",
        "full",
        "partial",
        "miss_first",
        "no_draft",
        "no_room",
        "invalid",
        "scheduler_skips",
        "tail_skips",
        "verifier_unavailable",
        "errors",
        "propose",
        "prop_stage0",
        "prop_setup",
        "prop_cache",
        "prop_chain",
        "prop_hidden",
        "prop_conf0",
        "prop_logits",
        "prop_markov",
        "prop_confidence",
        "snapshot",
        "verify",
        "verify_upload",
        "verify_layer",
        "verify_head",
        "verify_read",
        "verify_fused_head",
        "replay",
        "spec_total",
        "target",
        "saved",
        "net_saved",
        "draft_len_hist",
        "accepted_len_hist",
    ]
    assert line.startswith("ds4: DSpark stats cycles=") and keys[: len(ds4_fields)] == ds4_fields
    assert " time_ms propose=" in line
    assert st["tokens"] == 24 and st["cycles"] == st["first_tokens"]
    assert st["full"] + st["partial"] + st["miss_first"] + st["no_draft"] == st["cycles"]
    assert sum(st["accepted_len_hist"]) == st["cycles"]
    # committed tokens per verified cycle: accepted drafts plus one token per verified cycle
    verified = st["full"] + st["partial"] + st["miss_first"]
    assert verified == st["cycles"] - st["no_draft"] == sum(st["draft_len_hist"][1:]) > 0
    per_verify = (st["accepted_draft"] + verified) / verified
    assert st["committed_per_verify"] == pytest.approx(per_verify, abs=5e-4)
    assert f" committed_per_verify={per_verify:.3f} " in line
    s.reset_spec_stats()
    assert s.spec_stats()["cycles"] == 0 and s.spec_stats()["committed_per_verify"] == 0.0
    assert " committed_per_verify=0.000 " in s.spec_stats_line()


def stats_struct(**counters):
    """A raw ds4rt_spec_stats (bytes) with the given counters, the rest 0."""
    pytest.importorskip("cffi")
    import abi_cffi

    p = abi_cffi.new.new("ds4rt_spec_stats *")
    p.size = abi_cffi.new.sizeof("ds4rt_spec_stats")
    for k, v in counters.items():
        setattr(p, k, v)
    return bytes(abi_cffi.new.buffer(p))


def test_committed_per_verify_is_derived_from_the_counters():
    # 9 cycles: 6 verified drafts (3 full, 2 partial, 1 missed the first), 3 without a draft
    c = {"cycles": 9, "proposed": 20, "accepted_draft": 11, "full": 3, "partial": 2}
    c.update(miss_first=1, no_draft=3)
    st = ds4rt.stats.stats_to_dict(stats_struct(**c))
    assert st["committed_per_verify"] == round((11 + 6) / 6, 3) == 2.833
    assert st["avg_accept"] == round(11 / 9, 3) and st["accept_rate"] == 55.0
    line = ds4rt.stats.stats_line(stats_struct(**c))
    assert " accept_rate=55.00% avg_accept=1.222 committed_per_verify=2.833 full=3 " in line
    # cycles without a draft do not count; no verified cycle at all gives 0
    none = stats_struct(cycles=4, no_draft=4)
    assert ds4rt.stats.stats_to_dict(none)["committed_per_verify"] == 0
    assert " committed_per_verify=0.000 " in ds4rt.stats.stats_line(none)
    # every draft missed: one committed token per verified cycle
    missed = stats_struct(cycles=2, proposed=6, miss_first=2)
    assert ds4rt.stats.stats_to_dict(missed)["committed_per_verify"] == 1
    # a generation's share (delta) derives it again from the subtracted counters
    before = ds4rt.stats.stats_to_dict(stats_struct(cycles=3, accepted_draft=4, full=1, partial=1))
    d = ds4rt.stats.delta(before, st)
    assert (d["full"], d["partial"], d["miss_first"], d["accepted_draft"]) == (2, 1, 1, 7)
    assert d["committed_per_verify"] == round((7 + 4) / 4, 3)
    assert ds4rt.stats.delta(st, st)["committed_per_verify"] == 0.0


def test_bad_speculative_setups(model, dspark, tmp_path_factory):
    s = model.session(max_batch=4)
    with pytest.raises(ds4rt.errors.InvalidArgumentError, match="max_batch 4 cannot hold"):
        s.generate([0, 5], max_tokens=4, dspark=dspark)
    with pytest.raises(ValueError, match="scheduler must be"):
        model.session().generate([0], max_tokens=2, dspark=dspark, scheduler="sometimes")
    with pytest.raises(ValueError, match="confidence_threshold"):
        model.session().generate([0], max_tokens=2, dspark=dspark, confidence_threshold=1.5)
    other = ds4rt.Model(str(tiny(tmp_path_factory, "float").target))
    with pytest.raises(ds4rt.errors.MismatchError, match="another target"):
        other.session().generate([0], max_tokens=2, dspark=dspark)

    def boom(ctx, k):
        raise RuntimeError("drafter exploded")

    with pytest.raises(RuntimeError, match="drafter exploded"):
        model.session().generate([0, 4], max_tokens=5, draft=boom, scheduler="always")


def test_generation_stops_at_a_full_context_the_same_way(model, dspark):
    toks = prompt(10, 17)
    outs = []
    for kw in ({}, {"dspark": dspark, "scheduler": "always"}):
        s = model.session(n_ctx=30, max_batch=16)
        r = s.generate(toks, max_tokens=50, stop_at_eos=False, **kw)
        outs.append(r.ids)
        assert r.stop_reason is ds4rt.StopReason.CONTEXT_FULL
        assert s.position == 30  # prompt + every generated token, all of them in the context
    assert outs[0] == outs[1] and len(outs[0]) == 20


# The fixed cost model (measured_costs=False) makes the adaptive scheduler's decisions a
# function of the drafts alone, so its schedule can be checked exactly.
FIXED = ds4rt.SchedulerOptions(measured_costs=False)


def test_an_always_wrong_drafter_is_only_probed_and_probes_get_rarer(model):
    toks = prompt(5, 21)
    want = plain(model, toks, 400)
    events = []
    s = model.session(max_batch=32)
    got = s.generate(
        toks,
        max_tokens=400,
        draft=Oracle(toks + want, model.n_vocab, "wrong"),
        scheduler=FIXED,
        stop_at_eos=False,
        on_schedule=events.append,
    ).ids
    assert got == want
    drafting = [e for e in events if e["planned"] > 0]
    # the warm-up (one 2-token probe) and the probes are the only cycles that draft
    assert drafting[0]["cycle"] == 0 and all(e["probe"] and e["planned"] == 2 for e in drafting)
    assert all(e["accepted"] == 0 for e in drafting)
    # every skipped cycle was the scheduler's choice, for a reason it logged
    for e in events:
        if e["planned"] == 0 and e["max_draft"] > 0:
            assert e["reason"] == "scheduler" and e["rate_skip"] >= e["rate_plan"]
    # probe gaps widen: at least doubling, and at least the gap that keeps the expected loss
    # of probing under 1 %. Fixed model after the warm-up's miss: cost 0.3 + (0.8 + 0.2 * 3)
    # decode units for an expected 1 + 0.25 + 0.25^2 tokens (the prior still weighs in the
    # average acceptance), a loss of 0.39 decodes: 39 skipped cycles
    gaps = [b["cycle"] - a["cycle"] - 1 for a, b in zip(drafting[:-1], drafting[1:], strict=True)]
    assert drafting[0]["probe_gap"] == 39 and gaps[0] == 39
    assert all(b >= min(2 * a, 256) for a, b in zip(gaps[:-1], gaps[1:], strict=True))
    assert len(drafting) / len(events) < 0.02


def test_the_skip_path_does_no_drafter_work(model, dspark):
    """While the scheduler skips, DSpark computes no context rows (fusion, KV): a proposal
    computes those of its window when it needs them (CPU backend, docs/DSPARK.md)."""
    toks = prompt(30, 22)
    want = plain(model, toks, 120)
    events = []
    s = model.session(max_batch=16)
    got = s.generate(
        toks,
        max_tokens=120,
        dspark=dspark,
        confidence_threshold=0.0,
        scheduler=FIXED,
        stop_at_eos=False,
        on_schedule=events.append,
    ).ids
    assert got == want
    skips = [e for e in events if e["planned"] == 0]
    drafts = [e for e in events if e["planned"] > 0]
    assert len(skips) > 0.9 * len(events) and drafts  # the random drafter: probes only
    assert all(e["drafter_rows"] == 0 for e in skips)
    window = 16  # the drafter's context rows: the tiny target's sliding window
    assert all(0 < e["drafter_rows"] <= window for e in drafts)
    # a drafter forced to draft every cycle computes the rows of what each verify pass added
    events.clear()
    s = model.session(max_batch=16)
    s.generate(
        toks,
        max_tokens=40,
        dspark=dspark,
        scheduler="always",
        confidence_threshold=0.0,
        stop_at_eos=False,
        on_schedule=events.append,
    )
    assert events[0]["drafter_rows"] == min(window, len(toks))
    pairs = zip(events[:-1], events[1:], strict=True)
    assert all(e["drafter_rows"] == p["accepted"] + 1 for p, e in pairs)


def test_the_scheduler_remembers_a_drafter_between_generations(model, fl):
    d = ds4rt.DSpark(model, str(fl.support))  # a fresh handle: nothing learned yet
    toks = prompt(9, 23)
    seen = []
    for _ in range(2):
        events = []
        model.session(max_batch=16).generate(
            toks, max_tokens=30, dspark=d, stop_at_eos=False, on_schedule=events.append
        )
        seen.append(events)
    # a fresh measured-cost scheduler: a plain decode that measures the decode, then the
    # warm-up probe; a recalled one starts from what the first generation learned
    assert not seen[0][0]["recalled"] and not seen[0][0]["probe"] and seen[0][0]["planned"] == 0
    assert seen[0][1]["probe"] and seen[0][1]["planned"] == 2
    assert seen[1][0]["recalled"] and seen[1][0]["cost_decode"] > 0
    assert not any(e["probe"] and e["cycle"] == 1 for e in seen[1])  # no warm-up again
    # the fixed cost model starts afresh every time, so its schedules are reproducible
    for _ in range(2):
        events = []
        model.session(max_batch=16).generate(
            toks, max_tokens=30, dspark=d, scheduler=FIXED, on_schedule=events.append
        )
        assert not events[0]["recalled"]


def test_a_fresh_measured_cost_scheduler_measures_a_decode_before_its_first_probe(model, fl):
    """Until a plain decode is measured its cost is only inferred (from a probe's verify pass,
    through the fixed model's shape), so a fresh measured-cost scheduler's first cycle is a
    plain decode, its second the warm-up probe, planned with the decode it measured; the fixed
    model needs no measurement and probes at once."""
    toks = prompt(9, 25)
    want = plain(model, toks, 20)
    for draft in (
        {"dspark": ds4rt.DSpark(model, str(fl.support))},  # a fresh handle
        {"draft": Oracle(toks + want, model.n_vocab, "wrong")},
    ):
        events = []
        got = model.session(max_batch=32).generate(
            toks, max_tokens=20, stop_at_eos=False, on_schedule=events.append, **draft
        )
        assert got.ids == want
        first, second = events[0], events[1]
        assert (first["planned"], first["probe"], first["reason"]) == (0, False, "scheduler")
        assert first["cost_decode"] == 1.0  # nothing measured: the model's unit
        assert second["probe"] and second["planned"] == 2
        assert second["cost_decode"] == first["verify_ms"]  # the decode it measured
    events = []
    model.session(max_batch=16).generate(
        toks,
        max_tokens=20,
        dspark=ds4rt.DSpark(model, str(fl.support)),
        scheduler=FIXED,
        stop_at_eos=False,
        on_schedule=events.append,
    )
    assert events[0]["probe"] and events[0]["planned"] == 2


def test_the_scheduler_remembers_a_host_drafter_between_generations(model):
    """A host drafter given from Python is recognised by the session's scheduler memory across
    generations (the same callable, or bound methods of one object), so a second generation
    starts from what the first learned instead of paying the warm-up probe again."""
    toks = prompt(9, 24)
    want = plain(model, toks, 30)
    s = model.session(max_batch=32)

    def first_events(draft):
        events = []
        got = s.generate(
            toks, max_tokens=30, draft=draft, stop_at_eos=False, on_schedule=events.append
        )
        assert got.ids == want
        s.reset()
        return events[0]

    wrong = Oracle(toks + want, model.n_vocab, "wrong")
    assert not first_events(wrong)["recalled"]
    assert first_events(wrong)["recalled"]

    class Holder:
        def __init__(self):
            self.o = Oracle(toks + want, model.n_vocab, "wrong")

        def draft(self, ctx, k):
            return self.o(ctx, k)

    h = Holder()
    assert not first_events(h.draft)["recalled"]  # another drafter: nothing to recall
    assert first_events(h.draft)["recalled"]  # a new bound method of the same one
    assert not first_events(Holder().draft)["recalled"]
