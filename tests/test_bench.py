"""ds4rt.bench and `ds4-cli bench` on the embedded pair with a tiny budget: the report's schema
and invariants (every figure positive, medians within their spread, verify ratios, the byte
floor, identical greedy outputs), the JSON, --out and --plot outputs, and the usage errors.
No assertion is about speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ds4rt import bench, data

CWD = os.path.dirname(data.default_target())
TINY = [
    "--budget-s",
    "1",
    "--repeats",
    "1",
    "--verify",
    "1-3,5",
    "--ctx",
    "16,40",
    "--prefill",
    "16",
    "-n",
    "8",
    "--prompt-tokens",
    "8",
    "--bandwidth",
    "10",
]


def cli(*args: str, code: str | None = None):
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "ds4rt.cli"]
    return subprocess.run(
        cmd + ([] if code else list(args)),
        capture_output=True,
        text=True,
        cwd=CWD,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def walk_spreads(doc, path=""):
    """Every {"median", "min", "max", "q1", "q3", "n"} dict in the report, with its path."""
    if isinstance(doc, dict):
        if {"median", "min", "max", "q1", "q3", "n"} <= doc.keys():
            yield path, doc
        for k, v in doc.items():
            yield from walk_spreads(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from walk_spreads(v, f"{path}[{i}]")


@pytest.fixture(scope="module")
def report():
    cfg = bench.BenchConfig(
        budget_s=2.0,
        repeats=3,
        verify_sizes=[1, 2, 3, 6],
        contexts=[16, 48],
        prefill=24,
        tokens=10,
        prompt_tokens=8,
        modes=list(bench.MODES),
    )
    seen = []
    r = bench.run(cfg, progress=lambda label, frac: seen.append((label, frac)))
    r["_progress"] = seen
    return r


def test_every_figure_is_positive_and_every_median_within_its_spread(report):
    spreads = list(walk_spreads(report))
    assert len(spreads) > 20
    for path, s in spreads:
        assert s["n"] >= 1, path
        assert 0 < s["min"] <= s["q1"] <= s["median"] <= s["q3"] <= s["max"], (path, s)
    assert report["load_s"] > 0 and report["bandwidth"]["gb_s"] > 0
    assert report["memory"]["peak_rss_bytes"] > report["memory"]["model"]["weights"] > 0
    json.dumps(report)  # JSON-ready


def test_verify_rows_ratios_and_floor(report):
    v = report["verify"]
    assert [r["n"] for r in v["rows"]] == [1, 2, 3, 6]
    assert v["rows"][0]["ratio"] == 1.0 and v["rows"][0]["ms"] == v["decode_ms"]
    floors = [r["floor_ms"] for r in v["rows"]]
    assert all(f > 0 for f in floors) and floors == sorted(floors)
    for r in v["rows"]:
        assert r["ratio"] > 0 and r["of_floor"] > 0 and r["floor_bytes"] > 0
        assert r["ms_per_token"] == pytest.approx(r["ms"]["median"] / r["n"])
    # the floor of one token: every weight but the experts and the embedding, k experts of E
    plan = report["memory"]["plan"]["weights"]
    m = report["model"]
    k = plan["by_kind"]
    one = (
        plan["total"]
        - k["experts"]
        - k["embedding"]
        + k["experts"] * m["n_expert_used"] / m["n_expert"]
        + k["embedding"] / m["n_vocab"]
    )
    assert v["rows"][0]["floor_bytes"] == pytest.approx(one)


def test_contexts_prefill_proposal(report):
    assert [r["context"] for r in report["contexts"]["rows"]] == [16, 48]
    assert report["prefill"]["tokens"] == 24
    p = report["proposal"]
    assert p["block_size"] == report["dspark"]["block_size"] and p["in_decodes"] > 0


def test_modes_are_all_there_with_identical_greedy_outputs(report):
    md = report["modes"]
    assert [r["mode"] for r in md["rows"]] == ["plain", *bench.MODES]
    assert md["greedy_identical"] is True and report["greedy_identical"] is True
    rows = {r["mode"]: r for r in md["rows"]}
    assert rows["plain"]["speedup_vs_plain"] == 1.0
    for name, r in rows.items():
        assert r["identical_to_plain"] and r["deterministic"], name
        if name == "plain":
            assert "cycles" not in r
            continue
        assert r["cycles"] >= 1 and r["committed_per_cycle"] >= 1.0
        assert 0.0 <= r["acceptance_rate"] <= 1.0
        for a in r["acceptance_at"]:
            assert (
                0 <= a["accepted"] <= a["proposed"] and a["rate"] == a["accepted"] / a["proposed"]
            )
        assert all(v >= 0 for v in r["stage_ms"].values())
    assert rows["off"]["proposed"] == 0  # the scheduler never drafts
    assert rows["oracle"]["accepted"] == rows["oracle"]["proposed"] > 0  # always right
    assert rows["wrong"]["accepted"] == 0
    assert rows["always"]["proposed"] > 0 and rows["always"]["stage_ms"]["propose"] > 0


def test_progress_is_reported(report):
    labels = [label for label, _ in report["_progress"]]
    assert "verify(1)" in labels and "mode plain" in labels
    assert all(0.0 <= f <= 1.0 for _, f in report["_progress"])


def test_cli_json_and_out(tmp_path):
    out = tmp_path / "bench.json"
    r = cli("bench", *TINY, "--json", "--out", str(out), "--modes", "adaptive")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert json.loads(out.read_text()) == doc
    assert doc["command"].startswith("ds4-cli bench --budget-s 1")
    assert [x["mode"] for x in doc["modes"]["rows"]] == ["plain", "adaptive"]
    assert doc["bandwidth"] == {"gb_s": 10.0, "measured": False}
    assert "\r" not in r.stderr  # no bar when stderr is not a terminal
    r = cli("bench", *TINY, "--modes", "plain", "--progress")
    assert r.returncode == 0, r.stderr
    assert "bench [" in r.stderr and "verify(n)" in r.stdout and "greedy outputs" in r.stdout


def test_cli_plot(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    r = cli("bench", *TINY, "--modes", "plain", "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--verify", "0-3"], "outside [1, 4096]"),
        (["--verify", "5-2"], "empty"),
        (["--verify", "1,x"], "not an integer"),
        (["--verify", "1-5000"], "outside"),
        (["--verify", "1,,2"], "empty item"),
        (["--ctx", "1"], "outside [2,"),
        (["--modes", "sometimes"], "unknown mode"),
        (["-m", data.default_target()], "need --support"),
        (["--support", data.default_support()], "--support needs -m"),
        (["--repeats", "0"], "outside"),
    ],
)
def test_cli_usage_errors(args, message):
    r = cli("bench", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") <= 1 or r.stderr.startswith("usage:")


def test_cli_plot_without_matplotlib_is_a_usage_error(tmp_path):
    """matplotlib hidden from the import system: a clear error before any measuring."""
    code = (
        "import sys; sys.modules['matplotlib'] = None; from ds4rt.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    r = cli("bench", "--plot", str(tmp_path / "p.png"), code=code)
    assert r.returncode == 2, r.stderr
    assert "--plot needs matplotlib" in r.stderr and "pip install" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert not (tmp_path / "p.png").exists()
