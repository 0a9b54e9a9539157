"""The adaptive scheduler's cold start, driven directly (tests/sched_check.c, the Meson target
sched_check of tests/meson.build, built by the c_programs fixture): a support model's acceptance
prior keeps one missed probe from silencing a good drafter and gives way to evidence; without a
prior the scheduler is the uninformed one; a measured-cost scheduler measures a plain decode
before its warm-up probe and extrapolates verify costs from what it measured; a recalled one
plans at once; a pass whose graph was recorded is no cost sample (docs/DSPARK.md,
"Scheduler")."""

from __future__ import annotations

import subprocess


def test_the_scheduler_cold_start(c_programs):
    exe = c_programs("native").path("sched_check")
    r = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    ok = {line.split()[1] for line in r.stdout.splitlines() if line.startswith("ok ")}
    assert ok == {
        "one_missed_probe",
        "evidence_overrides_the_prior",
        "no_prior_is_the_uninformed_scheduler",
        "measured_costs_start_with_a_decode",
        "a_tail_cycle_measures_the_decode",
        "a_recalled_scheduler_plans_at_once",
        "recorded_passes_are_no_cost_samples",
    }, r.stdout
    assert r.stdout.strip().endswith("sched_check: 0 failed")
