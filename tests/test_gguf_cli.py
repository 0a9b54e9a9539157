"""`ds4-cli info` on good and bad files, text and JSON, and the CLI's dispatch."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys

import gguf_craft as gc
import numpy as np
import pytest

from ds4rt import cli
from ds4rt import gguf as dg

gguf = pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    """A tiny deepseek4-style file: hyperparameters, a 100-token vocabulary, 12 tensors."""
    path = tmp_path_factory.mktemp("cli") / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), arch="deepseek4")
    w.add_name("tiny deepseek4")
    w.add_uint32("deepseek4.block_count", 2)
    w.add_uint32("deepseek4.embedding_length", 64)
    w.add_float32("deepseek4.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_array("deepseek4.attention.compress_ratios", [0, 4, 128, 4, 128, 4, 128, 4, 128, 4])
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_token_list([f"t{i}" for i in range(100)])
    for i in range(12):
        w.add_tensor(f"blk.{i}.w", np.full((2, 32), i, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_info_text(model, capsys):
    rc, out, err = run(capsys, "info", model)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert "architecture  deepseek4" in lines
    assert "name          tiny deepseek4" in lines
    assert "GGUF          version 3, alignment 32, data at byte " in out
    assert f"({os.path.getsize(model):,} bytes)" in out
    assert any(ln.split() == ["deepseek4.block_count", "2"] for ln in lines)
    assert any(
        ln.split()[:2] == ["deepseek4.attention.layer_norm_rms_epsilon", "1e-06"] for ln in lines
    )
    assert "[0, 4, 128, 4, 128, 4, 128, 4, ... (10 values)]" in out
    assert "tokenizer     model gpt2, 100 tokens" in lines
    assert "tensors       12 tensors, 3.00 KiB of tensor data" in lines
    assert "tensor table (first 10; --tensors for all):" in lines
    assert "blk.9.w" in out and "blk.10.w" not in out
    rc, out, _ = run(capsys, "info", model, "--tensors")
    assert "tensor table:" in out and "blk.11.w" in out


def test_info_dspark_support_file(tmp_path, capsys):
    img = gc.build(
        [
            ("general.architecture", gc.STRING, "deepseek4-dspark"),
            ("dspark.block_size", gc.UINT32, 5),
            ("dspark.target_layer_ids", gc.ARRAY, (gc.UINT32, [40, 41, 42])),
            ("ds4rt.dspark.acceptance_prior", gc.ARRAY, (gc.FLOAT32, [0.75, 0.5])),
            ("unrelated.key", gc.UINT32, 1),
        ],
        [gc.Tensor("mtp.0.main_norm.weight", [16], gc.F32)],
    )
    p = tmp_path / "support.gguf"
    p.write_bytes(img.data)
    rc, out, _ = run(capsys, "info", str(p))
    assert rc == 0
    assert "hyperparameters (deepseek4-dspark.*, dspark.*, ds4rt.dspark.*):" in out
    assert re.search(r"\n  dspark\.target_layer_ids +\[40, 41, 42\]\n", out), out
    # the scheduler's start (docs/DSPARK.md "Scheduler")
    assert re.search(r"\n  ds4rt\.dspark\.acceptance_prior +\[0\.75, 0\.5\]\n", out), out
    assert "unrelated.key" not in out


def test_info_json(model, capsys):
    rc, out, err = run(capsys, "info", model, "--json")
    assert rc == 0 and err == ""
    doc = json.loads(out)
    full = dg.inspect(model)
    assert doc["tensors"] == full["tensors"]
    for k in ("version", "alignment", "data_offset", "file_size", "metadata_types"):
        assert doc[k] == full[k]
    cut = cli.DEFAULT_JSON_MAX_ARRAY
    assert doc["metadata_truncated"] == {"tokenizer.ggml.tokens": 100}
    assert doc["metadata"]["tokenizer.ggml.tokens"] == [f"t{i}" for i in range(cut)]
    key = "deepseek4.attention.compress_ratios"
    assert doc["metadata"][key] == full["metadata"][key]
    rc, out, _ = run(capsys, "info", model, "--json", "--full")
    doc = json.loads(out)
    assert doc["metadata_truncated"] == {} and doc["metadata"] == full["metadata"]
    rc, out, _ = run(capsys, "info", model, "--json", "--max-array", "3")
    doc = json.loads(out)
    assert doc["metadata_truncated"] == {
        "deepseek4.attention.compress_ratios": 10,
        "tokenizer.ggml.tokens": 100,
    }


@pytest.mark.parametrize("mode", [[], ["--json"]])
def test_info_bad_file(tmp_path, model, capsys, mode):
    bad = tmp_path / "cut.gguf"
    data = open(model, "rb").read()
    bad.write_bytes(data[: len(data) // 3])
    rc, out, err = run(capsys, "info", str(bad), *mode)
    assert rc == 1 and out == ""
    assert err.startswith(f"ds4-cli: error: {bad}: ")
    assert "byte" in err and err.count("\n") == 1


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_dispatch_keeps_version_and_generation_mode(capsys, monkeypatch):
    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and out.strip() == cli._core.build_info()
    monkeypatch.setattr(sys, "stdin", _Terminal())  # no arguments, nothing piped in: the help
    rc, out, _ = run(capsys)
    assert rc == 0 and "usage: ds4-cli" in out and "subcommands: chat, serve, info" in out
    with pytest.raises(SystemExit) as e:
        cli.main(["info"])  # PATH is required
    assert e.value.code == 2


def test_installed_entry_point(tmp_path, model):
    exe = shutil.which("ds4-cli")
    if exe is None or os.path.dirname(exe) != os.path.dirname(sys.executable):
        pytest.skip("ds4-cli of this environment is not on PATH")
    r = subprocess.run([exe, "info", model, "--json"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["version"] == 3
    r = subprocess.run(
        [exe, "info", str(tmp_path / "missing.gguf")], capture_output=True, text=True, cwd=tmp_path
    )
    assert r.returncode == 1 and r.stderr.startswith("ds4-cli: error: ")
    assert "cannot open" in r.stderr
