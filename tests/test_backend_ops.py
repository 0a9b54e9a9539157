"""Op conformance of every compiled-in backend (tests/backend_ops/backend_ops.c, the Meson
target backend_ops of tests/meson.build, built by the c_programs fixture): each op of the
backend table against float64 references, against the CPU backend's run of the same inputs,
and for batch invariance, for every weight type (docs/ARCHITECTURE.md, "The backend seam")."""

from __future__ import annotations

import subprocess

import pytest

import ds4rt


@pytest.fixture(scope="module")
def run(c_programs):
    exe = c_programs("native").path("backend_ops")

    def go(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300)

    return go


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_op_of_every_backend_conforms(run, seed):
    r = run("--seed", str(seed))
    failed = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
    assert r.returncode == 0 and not failed, r.stdout + r.stderr
    summary = r.stdout.strip().splitlines()[-1]
    assert summary.startswith("backend-ops:") and summary.endswith(" 0 failed"), summary


def test_every_op_of_the_table_is_checked(run):
    """Each op the table names appears in the run, with a float64 or exact check and a
    comparison with the CPU's run; each weight type the CPU computes with is covered."""
    out = run().stdout
    checked = {line.split()[2] for line in out.splitlines() if line.startswith("ok")}
    table = set(ds4rt._core.backend_op_names())
    # the compressor op is reported as "compressor"; get_rows/matmul per type as "<op> <TYPE>"
    assert table - {"get_rows", "matmul"} <= checked, table - checked
    cpu = next(b for b in ds4rt.backends() if b["name"] == "cpu")
    for op in ("matmul", "get_rows"):
        for t in cpu["ops"][op]:
            assert f"ok   cpu    {op} {t}" in out or f"{op} {t}" in out, (op, t)


def test_usage_errors_exit_2(run):
    assert run("--bogus").returncode == 2


def test_a_backend_lacking_an_op_is_refused_at_load_naming_it(run, tmp_path_factory):
    """For each op: a CPU backend that says it lacks the op refuses to bind the target (or,
    for the drafter's own ops, to enable DSpark) with DS4RT_ERR_BACKEND naming the op."""
    from tiny_models import model as tiny

    r = run("--refusal", str(tiny(tmp_path_factory, "quant").target))
    assert r.returncode == 0, r.stdout + r.stderr
    refused = {line.split()[2] for line in r.stdout.splitlines() if line.startswith("ok")}
    assert refused == set(ds4rt._core.backend_op_names())
