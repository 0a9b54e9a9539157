"""ds4-cli generation mode on the embedded default pair (whatever its weights: these tests need
only a working deepseek4 model with a tokenizer and a DSpark support model for it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tiny_models import model as tiny

import ds4rt
from ds4rt import cli, data


def run_cli(*args: str) -> subprocess.CompletedProcess:
    # run outside the source tree, whose ds4rt/ has no compiled extension
    cwd = os.path.dirname(data.default_target())
    return subprocess.run(
        [sys.executable, "-m", "ds4rt.cli", *args], capture_output=True, text=True, cwd=cwd
    )


def test_greedy_generation_on_the_default_model_matches_the_api(capsys):
    assert cli.main(["--ids", "0,5,9,100", "-n", "12", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    s = ds4rt.Model(data.default_target()).session()
    assert rec["ids"] == s.generate([0, 5, 9, 100], max_tokens=12).ids
    assert rec["prompt_ids"] == [0, 5, 9, 100] and len(rec["ids"]) <= 12


def test_sampling_options_are_reproducible(capsys):
    # a fixed drafting policy: the adaptive scheduler times passes, so which cycles draft (and so
    # the sampled tokens) may differ between runs (docs/DSPARK.md, "Scheduler")
    argv = ["--ids", "0,7", "-n", "10", "--temp", "0.9", "--top-k", "40", "--seed", "5", "--json"]
    argv += ["--scheduler", "always"]
    cli.main(argv)
    a = json.loads(capsys.readouterr().out)["ids"]
    cli.main(argv)
    b = json.loads(capsys.readouterr().out)["ids"]
    assert a == b


def test_errors_exit_nonzero_with_a_message(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    r = run_cli("-m", str(bad), "--ids", "0")
    assert r.returncode == 1 and "ds4-cli: error:" in r.stderr
    r = run_cli("--ids", "0,999999")
    assert r.returncode == 1 and "outside the vocabulary" in r.stderr
    r = run_cli("--ids", "0,x")
    assert r.returncode != 0 and "--ids" in r.stderr


@pytest.mark.parametrize("numerics", ["official", "llama.cpp"])
def test_numerics_switch(capsys, numerics):
    assert cli.main(["--ids", "0,3", "-n", "4", "--numerics", numerics, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["ids"]) == 4


def test_text_prompt_uses_the_chat_template_and_streams_text(capsys):
    m = ds4rt.Model(data.default_target())
    prompt = m.tokenizer.encode_chat([{"role": "user", "content": "Hello"}])
    assert prompt[0] == m.bos_id  # BOS <｜User｜>Hello<｜Assistant｜></think>
    want = m.session().generate(prompt, max_tokens=10).ids
    text = m.detokenize(want, skip_special=True)  # control tokens (EOS) are not shown
    assert cli.main(["-p", "Hello", "-n", "10"]) == 0
    assert capsys.readouterr().out == text + "\n"
    assert cli.main(["-p", "Hello", "-n", "10", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["prompt_ids"] == prompt and rec["ids"] == want and rec["text"] == text


def test_raw_prompt_and_thinking_mode(capsys):
    m = ds4rt.Model(data.default_target())
    cli.main(["-p", "Hi there", "--raw", "-n", "2", "--json"])
    assert json.loads(capsys.readouterr().out)["prompt_ids"] == m.tokenize("Hi there", add_bos=True)
    cli.main(["-p", "Hi", "--think", "-n", "2", "--json"])
    ids = json.loads(capsys.readouterr().out)["prompt_ids"]
    assert m.detokenize(ids).endswith("<｜Assistant｜><think>")


def test_model_tokenize_round_trip():
    m = ds4rt.Model(data.default_target())
    text = "def f(x):\n    return x * 2  # ok"
    assert m.detokenize(m.tokenize(text)) == text
    assert m.tokenize("<think>") != [m.tokenizer.token_to_id("<think>")]
    assert m.tokenize("<think>", special=True) == [m.tokenizer.token_to_id("<think>")]


def test_dspark_flags_print_the_stats_line(capsys):
    assert (
        cli.main(["-p", "Hello", "-n", "12", "--dspark", "--stats", "--scheduler", "always"]) == 0
    )
    captured = capsys.readouterr()
    line = next(ln for ln in captured.err.splitlines() if ln.startswith("ds4: DSpark stats"))
    assert "proposed=" in line and " time_ms propose=" in line
    # the same text as without speculation (greedy identity)
    assert cli.main(["-p", "Hello", "-n", "12"]) == 0
    assert capsys.readouterr().out == captured.out
    assert cli.main(["-p", "Hi", "-n", "4", "--dspark", "--stats-json", "--json"]) == 0
    err = capsys.readouterr().err
    assert json.loads(err.splitlines()[0])["tokens"] == 4


def test_schedule_log_writes_one_event_per_cycle(capsys, tmp_path):
    log = tmp_path / "sched.jsonl"
    args = ["-p", "class Stack:", "-n", "16", "--ignore-eos", "--stats-json"]
    assert cli.main([*args, "--schedule-log", str(log)]) == 0
    stats = json.loads(capsys.readouterr().err.splitlines()[-1])
    events = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert len(events) == stats["cycles"] > 0
    assert [e["cycle"] for e in events] == list(range(len(events)))
    assert sum(e["accepted"] for e in events) == stats["accepted_draft"]
    e = events[0]
    assert e["mode"] == "adaptive" and e["planned"] >= 0 and len(e["acceptance"]) == 16
    assert all(k in e for k in ("cost_decode", "cost_verify", "rate_plan", "rate_skip", "reason"))


def test_dspark_is_on_by_default_for_the_embedded_pair_only(capsys, tmp_path_factory):
    assert cli.main(["-p", "Hi", "-n", "6", "--stats"]) == 0
    err = capsys.readouterr().err
    assert any(ln.startswith("ds4: DSpark stats") for ln in err.splitlines())
    assert cli.main(["-p", "Hi", "-n", "6", "--stats", "--no-dspark"]) == 0
    assert "DSpark stats" not in capsys.readouterr().err
    # with -m a support model is used only when asked for
    r = tiny(tmp_path_factory, "float", seed=0)
    assert cli.main(["-m", str(r.target), "--ids", "0,5", "-n", "4", "--stats"]) == 0
    assert "DSpark stats" not in capsys.readouterr().err
    argv = ["-m", str(r.target), "--support", str(r.support), "--ids", "0,5", "-n", "4"]
    assert cli.main(argv + ["--dspark", "--stats"]) == 0
    assert "DSpark stats" in capsys.readouterr().err
