"""Random sequences of session calls against a model of what each session must contain
(issue 13's standing regime; docs/ROBUSTNESS.md).

Hypothesis drives evals, generations (plain, DSpark, host drafters; greedy and sampled; stopped
by a callback's False or exception at a random token, or not at all), truncations, resets,
captures, invalid inputs, and closing sessions, support models and the model in any order.
After every step each open session's position must be the length of the modelled context and
its logits a reference session's after evaluating that context from scratch; every greedy
generation must give the ids plain greedy decoding gives from the same context; every refused
call must leave the session as it was.

Cheap by default (a few short runs, for CI). DS4RT_STATEFUL_EXAMPLES and DS4RT_STATEFUL_STEPS
scale it up; under the sanitizer build (docs/ROBUSTNESS.md) any heap error ends the run.
"""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import ds4rt
from ds4rt import ClosedError, StopReason
from ds4rt.errors import InvalidArgumentError, OutOfRangeError, StateError

EXAMPLES = int(os.environ.get("DS4RT_STATEFUL_EXAMPLES", "6"))
STEPS = int(os.environ.get("DS4RT_STATEFUL_STEPS", "14"))
SLOTS = 2  # sessions alive at once


class HostStop(Exception):
    """Raised by a callback the machine planted."""


class Slot:
    """One session, its reference twin and the model of its context."""

    def __init__(self, model, n_ctx: int, max_batch: int):
        self.s = model.session(n_ctx=n_ctx, max_batch=max_batch)
        self.ref = model.session(n_ctx=n_ctx, max_batch=max_batch)
        self.ctx: list[int] = []  # what the session's context must hold
        self.ref_ctx: list[int] = []  # what the reference's holds
        self.pass_start: int | None = 0  # start of the last pass, when the model knows it
        self.has_logits = False

    def sync_ref(self, ids: list[int]) -> None:
        """Brings the reference to context `ids`, appending when it can."""
        if self.ref_ctx != ids[: len(self.ref_ctx)]:
            self.ref.reset()
            self.ref_ctx = []
        if len(ids) > len(self.ref_ctx):
            self.ref.eval(ids[len(self.ref_ctx) :])
        self.ref_ctx = list(ids)

    def snapshot(self):
        return self.s.position, self.s.current_logits()

    def unchanged_since(self, snap) -> bool:
        pos, logits = snap
        now = self.s.current_logits()
        same = (logits is None and now is None) or (
            logits is not None and now is not None and np.array_equal(logits, now)
        )
        return self.s.position == pos and same


class SessionMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.model = ds4rt.Model.default()
        self.V = self.model.n_vocab
        self.dspark: ds4rt.DSpark | None = ds4rt.DSpark.default(self.model)
        self.slots: list[Slot | None] = [None] * SLOTS

    def teardown(self):
        self.model.close()

    # ---- objects --------------------------------------------------------------------------

    @precondition(lambda self: not self.model.closed)
    @rule(i=st.integers(0, SLOTS - 1), n_ctx=st.integers(8, 96), mb=st.sampled_from([1, 5, 17, 32]))
    def open_session(self, i, n_ctx, mb):
        if self.slots[i] is not None:
            self.slots[i].s.close()
            self.slots[i].ref.close()
        self.slots[i] = Slot(self.model, n_ctx, mb)

    @rule(i=st.integers(0, SLOTS - 1))
    def close_session(self, i):
        slot = self.slots[i]
        if slot is None:
            return
        slot.s.close()
        slot.s.close()  # idempotent
        try:
            slot.s.eval([3])
            raise AssertionError("a closed session evaluated")
        except ClosedError:
            pass
        slot.ref.close()
        self.slots[i] = None

    @precondition(lambda self: not self.model.closed)
    @rule()
    def reopen_dspark(self):
        if self.dspark is not None:
            self.dspark.close()
        self.dspark = ds4rt.DSpark.default(self.model)

    @rule()
    def close_dspark(self):
        """Sessions that generated with it keep it alive; new calls with it are refused."""
        if self.dspark is not None:
            self.dspark.close()

    @rule()
    def close_model(self):
        """Closing the model closes every session and support model of it; then a new one."""
        self.model.close()
        for slot in self.slots:
            if slot is not None:
                assert slot.s.closed and slot.ref.closed
        assert self.dspark is None or self.dspark.closed
        self.model = ds4rt.Model.default()
        self.dspark = ds4rt.DSpark.default(self.model)
        self.slots = [None] * SLOTS

    # ---- calls ------------------------------------------------------------------------------

    def _slot(self, i) -> Slot | None:
        return self.slots[i]

    @rule(i=st.integers(0, SLOTS - 1), n=st.integers(1, 40), seed=st.integers(0, 2**16),
          bad=st.sampled_from([None, None, None, -1, "V", 2**31]))  # fmt: skip
    def eval(self, i, n, seed, bad):
        slot = self._slot(i)
        if slot is None:
            return
        ids = np.random.default_rng(seed).integers(3, self.V, n).tolist()
        if bad is not None:
            ids[seed % n] = self.V if bad == "V" else bad
        fits = len(slot.ctx) + n <= slot.s.n_ctx
        snap = slot.snapshot()
        try:
            slot.s.eval(ids)
        except (OutOfRangeError, ValueError, OverflowError) as e:
            assert bad is not None or not fits, e
            assert slot.unchanged_since(snap)
            return
        assert bad is None and fits
        B = slot.s.max_batch
        slot.pass_start = len(slot.ctx) + ((n - 1) // B) * B
        slot.ctx += ids
        slot.has_logits = True
        assert slot.s.current_logits() is not None

    @rule(i=st.integers(0, SLOTS - 1), n=st.integers(0, 100))
    def truncate(self, i, n):
        slot = self._slot(i)
        if slot is None:
            return
        pos = len(slot.ctx)
        n = min(n, pos + 1)
        # only positions within the last pass can be kept; where the model does not know
        # where that pass began (after a generation), only n == pos is sure to be kept
        if slot.pass_start is not None:
            allowed: bool | None = slot.pass_start <= n <= pos
        else:
            allowed = True if n == pos else (False if n > pos else None)
        snap = slot.snapshot()
        try:
            slot.s.truncate(n)
        except StateError:
            assert allowed is not True, (n, pos, slot.pass_start)
            assert slot.unchanged_since(snap)
            return
        assert allowed is not False, (n, pos, slot.pass_start)
        if n < pos:
            # the prompt's last pass keeps only its last row's logits
            slot.has_logits = slot.s.current_logits() is not None
        slot.ctx = slot.ctx[:n]

    @rule(i=st.integers(0, SLOTS - 1))
    def reset(self, i):
        slot = self._slot(i)
        if slot is None:
            return
        slot.s.reset()
        slot.ctx, slot.pass_start, slot.has_logits = [], 0, False
        assert slot.s.current_logits() is None

    @rule(i=st.integers(0, SLOTS - 1), layers=st.lists(st.integers(-1, 17), max_size=3))
    def set_capture(self, i, layers):
        slot = self._slot(i)
        if slot is None:
            return
        snap = slot.snapshot()
        n_layer = self.model.info["n_layer"]
        increasing = all(a < b for a, b in zip(layers[:-1], layers[1:], strict=True))
        valid = increasing and all(0 <= x < n_layer for x in layers)
        try:
            slot.s.set_capture(layers)
        except (OutOfRangeError, InvalidArgumentError, ValueError, OverflowError):
            assert not valid
            assert slot.unchanged_since(snap)
            return
        assert valid
        for k in range(len(layers)):
            first, rows = slot.s.capture(k)
            assert rows.ndim == 2 and first + rows.shape[0] == slot.s.position

    @rule(i=st.integers(0, SLOTS - 1))
    def spec_stats(self, i):
        slot = self._slot(i)
        if slot is None:
            return
        stats = slot.s.spec_stats()
        assert stats["tokens"] >= 0
        slot.s.reset_spec_stats()
        assert slot.s.spec_stats()["tokens"] == 0

    @rule(
        i=st.integers(0, SLOTS - 1),
        n_prompt=st.integers(0, 12),
        max_tokens=st.integers(0, 24),
        drafter=st.sampled_from(["plain", "dspark", "dspark", "host", "host_probs", "host_raises"]),
        temperature=st.sampled_from([0.0, 0.0, 0.8]),
        stop_at=st.one_of(st.none(), st.integers(1, 24)),
        stop_how=st.sampled_from(["false", "raise"]),
        scheduler=st.sampled_from(["always", "adaptive"]),
        seed=st.integers(0, 2**16),
    )
    def generate(self, i, n_prompt, max_tokens, drafter, temperature, stop_at, stop_how,
                 scheduler, seed):  # fmt: skip
        slot = self._slot(i)
        if slot is None:
            return
        rng = np.random.default_rng(seed)
        prompt = rng.integers(3, self.V, n_prompt).tolist()
        seen: list[int] = []

        def on_token(t):
            seen.append(t)
            if stop_at is not None and len(seen) == stop_at:
                if stop_how == "raise":
                    raise HostStop()
                return False
            return True

        calls = [0]

        def draft(ctx, k):
            calls[0] += 1
            if drafter == "host_raises" and calls[0] == 3:
                raise HostStop()
            ids = [int(ctx[-1])] * k if seed % 2 else rng.integers(3, self.V, k).tolist()
            if drafter == "host_probs":
                return ids, np.full((len(ids), self.V), 1.0 / self.V, np.float32)
            return ids

        kwargs = dict(max_tokens=max_tokens, temperature=temperature, seed=seed,
                      stop_at_eos=bool(seed % 3), on_token=on_token)  # fmt: skip
        if drafter == "dspark":
            if self.dspark is None:
                return
            kwargs.update(dspark=self.dspark, scheduler=scheduler)
        elif drafter != "plain":
            kwargs.update(draft=draft, scheduler=scheduler)
        before = list(slot.ctx)
        snap = slot.snapshot()
        fits = len(before) + n_prompt <= slot.s.n_ctx
        can_sample = n_prompt > 0 or slot.has_logits
        raised = None
        try:
            r = slot.s.generate(prompt, **kwargs)
        except HostStop:
            raised = "host"
            r = slot.s.last_result
        except ClosedError:
            assert drafter == "dspark" and self.dspark.closed
            assert slot.unchanged_since(snap)
            return
        except InvalidArgumentError as e:
            # a verify pass of the drafter's block does not fit this session's max_batch
            assert drafter != "plain" and "max_batch" in str(e), e
            assert slot.unchanged_since(snap)
            return
        except (OutOfRangeError, StateError) as e:
            assert not fits or not can_sample, e
            assert slot.unchanged_since(snap)
            return
        assert fits and can_sample
        ids = list(r.ids)
        assert ids == seen[: len(ids)] and len(ids) <= max_tokens
        if raised is not None:
            assert (stop_at is not None and stop_how == "raise") or drafter == "host_raises"
        elif stop_at is not None and len(ids) == stop_at:
            assert r.stop_reason == StopReason.CALLBACK
        if stop_at is not None and len(ids) > stop_at:
            raise AssertionError(f"{len(ids)} ids after a stop at {stop_at}")
        full = before + prompt + ids
        slot.ctx = full[: slot.s.n_ctx]
        slot.pass_start = None
        slot.has_logits = slot.has_logits or bool(prompt) or bool(ids)
        if temperature == 0.0 and ids:
            # greedy: the ids plain decoding gives from the same context
            slot.sync_ref(before + prompt)
            want = slot.ref.generate([], max_tokens=len(ids), stop_at_eos=False).ids
            slot.ref_ctx = (before + prompt + list(want))[: slot.ref.n_ctx]
            assert ids == list(want), (ids, want, drafter)

    # ---- the model of each session ------------------------------------------------------

    @invariant()
    def sessions_hold_exactly_their_context(self):
        for slot in self.slots:
            if slot is None or slot.s.closed:
                continue
            assert slot.s.position == len(slot.ctx), (slot.s.position, len(slot.ctx))
            logits = slot.s.current_logits()
            if logits is None:
                continue
            slot.sync_ref(slot.ctx)
            assert np.array_equal(logits, slot.ref.current_logits())


TestSessionMachine = SessionMachine.TestCase
TestSessionMachine.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
