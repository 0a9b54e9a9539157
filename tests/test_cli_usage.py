"""ds4-cli as users drive it through pipes: prompt sources, -n -1 and a full context, the
timing line, --json, stop strings, ds4's environment knobs, llama.cpp flags, and every user
error or signal ending in one line on stderr and a non-zero status, never a traceback.
(Where a terminal matters - chat, Ctrl-C, the progress bar - see test_cli_terminal.py.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

import ds4rt
from ds4rt import data

CWD = os.path.dirname(data.default_target())  # outside the source tree


def cli(*args: str, stdin: str | None = None, env: dict | None = None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DS4_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ds4rt.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=CWD,
        env=full_env,
        timeout=300,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


def jrun(*args: str, **kw) -> dict:
    r = cli(*args, "--json", **kw)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def no_traceback(r) -> None:
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr


def test_prompt_sources_agree(tmp_path):
    want = jrun("-p", "Hello there", "-n", "4")
    f = tmp_path / "prompt.txt"
    f.write_text("Hello there\n")  # one trailing newline is dropped, as llama.cpp does
    assert jrun("-f", str(f), "-n", "4")["prompt_ids"] == want["prompt_ids"]
    assert jrun("-p", "-", "-n", "4", stdin="Hello there\n")["prompt_ids"] == want["prompt_ids"]
    assert jrun("-n", "4", stdin="Hello there")["prompt_ids"] == want["prompt_ids"]  # a pipe
    assert jrun("-f", "-", "-n", "4", stdin="Hello there")["ids"] == want["ids"]


def test_unlimited_generation_ends_at_a_full_context_and_says_so():
    rec = jrun("-p", "Hi", "-n", "-1", "--ignore-eos", "-c", "48")
    assert rec["stop_reason"] == "context_full"
    assert len(rec["prompt_ids"]) + len(rec["ids"]) == 48
    r = cli("-p", "Hi", "-n", "-1", "--ignore-eos", "-c", "48")
    assert r.returncode == 0 and "the context is full (48 tokens)" in r.stderr


def test_the_timing_line_gives_prefill_and_decode_speeds():
    r = cli("-p", "Hi", "-n", "6")
    assert r.returncode == 0
    line = r.stderr.strip().splitlines()[-1]
    pat = (
        r"ds4-cli: prefill: \d+ tokens in [\d.]+ s \([\d.]+ t/s\) \| decode: 6 tokens in "
        r"[\d.]+ s \([\d.]+ t/s\) \| stop: (max_tokens|eos)"
    )
    assert re.fullmatch(pat, line), line


def test_json_has_the_stop_reason_the_timings_and_the_stats():
    rec = jrun("-p", "Hi", "-n", "8", "--dspark", "--scheduler", "always")
    assert rec["stop_reason"] in ("max_tokens", "eos") and isinstance(rec["seed"], int)
    assert rec["timings"]["generated_tokens"] == len(rec["ids"])
    st = rec["spec_stats"]
    assert st["tokens"] == len(rec["ids"]) and "accept_rate" in st and st["cycles"] > 0
    assert jrun("-p", "Hi", "-n", "2", "--no-dspark")["spec_stats"] is None


def test_seed_minus_one_is_random_and_reported():
    # the adaptive scheduler times passes, so which cycles draft (and so the sampled tokens) may
    # differ between runs; with a fixed drafting policy a seed reproduces the output exactly
    fixed = ("-n", "12", "--temp", "1.0", "--scheduler", "always")
    a = jrun("-p", "Hi", *fixed, "--seed", "-1")
    b = jrun("-p", "Hi", *fixed, "-s", "-1")
    assert a["seed"] != b["seed"]
    again = jrun("-p", "Hi", *fixed, "--seed", str(a["seed"]))
    assert again["ids"] == a["ids"]


def test_stop_strings():
    full = jrun("-p", "Hello", "-n", "40", "--ignore-eos")
    stop = full["text"][20:22]
    rec = jrun("-p", "Hello", "-n", "40", "--ignore-eos", "--stop", stop)
    assert rec["stop_reason"] == "stop_string" and rec["stop_string"] == stop
    assert rec["text"] == full["text"][: full["text"].index(stop)]
    r = cli("-p", "Hello", "-n", "40", "--ignore-eos", "-r", stop)
    assert r.stdout == rec["text"] + "\n"


@pytest.mark.parametrize(
    "argv,status,message",
    [
        (["-p", "x", "--bogus"], 2, "unrecognized arguments: --bogus"),
        (["-p", "x", "-n", "99999999999"], 2, "-n/--n-predict: 99999999999 is outside"),
        (["-p", "x", "-n", "-2"], 2, "is outside [-1,"),
        (["-p", "x", "-c", "0"], 2, "-c/--ctx"),
        (["-p", "x", "-c", str(2**40)], 2, "-c/--ctx"),
        (["-p", "x", "--seed", str(2**64)], 2, "--seed"),
        (["-p", "x", "--seed", "-5"], 2, "--seed"),
        (["-p", "x", "--top-k", str(2**40)], 2, "--top-k"),
        (["-p", "x", "--temp", "nan"], 2, "--temp"),
        (["-p", "x", "--top-p", "2"], 2, "--top-p"),
        (["-p", "x", "-t", "-5"], 2, "-t/--threads"),
        (["-p", "x", "-b", "5000"], 2, "-b/--batch-size"),
        (["-p", "x", "--device", "-1"], 2, "--device"),
        (["-p", "x", "--max-draft", "99"], 2, "--max-draft"),
        (["-p", "x", "--confidence", "1.5"], 2, "--confidence"),
        (["--ids", "0,99999999999"], 2, "--ids: 99999999999 is outside"),
        (["--ids", "0,x"], 2, "--ids must be comma-separated integers"),
        (["--ids", "0,999999"], 1, "outside the vocabulary"),
        (["-f", "/nonexistent/prompt.txt"], 1, "/nonexistent/prompt.txt: No such file"),
        (["chat", "--bogus"], 2, "unrecognized arguments"),
        (["chat", "-n", "2**31"], 2, "-n/--n-predict"),
        (["info"], 2, "required: path"),
        (["tokenize", "--model"], 2, "expected one argument"),
    ],
)
def test_user_errors_give_one_line_and_no_traceback(argv, status, message):
    r = cli(*argv)
    no_traceback(r)
    assert r.returncode == status, r.stderr
    assert message in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(("ds4-cli", "usage:")), r.stderr


def test_a_file_that_is_not_text_or_not_a_model(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"caf\xe9")
    r = cli("-f", str(bad))
    no_traceback(r)
    assert r.returncode == 2 and "is not UTF-8 text (byte 3)" in r.stderr
    missing = tmp_path / "missing.gguf"
    for argv in (
        ["-m", str(missing), "-p", "x"],
        ["--dspark", "--support", str(missing), "-p", "x"],
    ):
        r = cli(*argv)
        no_traceback(r)
        assert r.returncode == 1 and r.stderr.count(str(missing)) == 1, r.stderr  # named once
    r = cli("--dspark", "-m", data.default_target(), "-p", "x")
    assert r.returncode == 2 and "needs --support" in r.stderr


@pytest.mark.skipif(ds4rt._core.gpu_device_count() > 0, reason="a GPU is visible")
def test_backend_flag():
    assert jrun("-p", "x", "-n", "2", "--backend", "cpu")["ids"]
    r = cli("-p", "x", "--backend", "cuda")
    no_traceback(r)
    assert r.returncode == 1 and "ds4-cli: error:" in r.stderr and "cuda" in r.stderr.lower()


@pytest.mark.parametrize(
    "argv,hint",
    [
        (["-ngl", "99"], "--backend"),
        (["--n-gpu-layers=99"], "--backend"),
        (["-fa"], "one implementation"),
        (["--mlock"], "maps the file"),
        (["--no-mmap"], "maps the model file"),
        (["-cnv"], "ds4-cli chat"),
        (["-md", "draft.gguf"], "--support FILE --dspark"),
        (["--repeat-penalty", "1.1"], "temperature, top-k"),
        (["-ctk", "q8_0"], "KV cache"),
    ],
)
def test_llama_cpp_flags_say_what_ds4rt_uses(argv, hint):
    for mode in ([], ["chat"]):
        r = cli(*mode, "-p", "x", *argv) if not mode else cli(*mode, *argv)
        no_traceback(r)
        assert r.returncode == 2 and "is a llama.cpp option" in r.stderr and hint in r.stderr


def test_option_values_are_not_mistaken_for_llama_flags():
    tok = ds4rt.Model.default().tokenizer
    for argv, text in ((["--prompt=-i"], "-i"), (["-p", "-i please"], "-i please")):
        rec = jrun(*argv, "-n", "2")
        assert rec["prompt_ids"] == tok.encode_chat([{"role": "user", "content": text}])


def test_a_closed_pipe_ends_quietly():
    p = subprocess.Popen(
        [sys.executable, "-m", "ds4rt.cli", "-p", "x", "-n", "4000", "--ignore-eos", "-c", "8192"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=CWD,
    )
    assert p.stdout.read(1)
    p.stdout.close()  # as `| head -c 1` does
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and "Traceback" not in err and "Exception" not in err


def test_sigint_through_a_pipe_ends_with_status_130():
    p = subprocess.Popen(
        [sys.executable, "-m", "ds4rt.cli", "-p", "x", "-n", "-1", "--ignore-eos", "-c", "65536"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=CWD,
    )
    assert p.stdout.read(1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    err = err.decode()
    assert p.returncode == 130 and "ds4-cli: interrupted" in err and "Traceback" not in err
    assert "| stop: interrupted" in err  # the timing line still comes


def test_ds4_environment_knobs():
    r = cli("-p", "Hi", "-n", "8", "--dspark", env={"DS4_DSPARK_STATS": "1"})
    assert r.returncode == 0 and "ds4: DSpark stats cycles=" in r.stderr
    r = cli("-p", "Hi", "-n", "8", "--dspark", env={"DS4_DSPARK_STATS": "0"})
    assert "DSpark stats" not in r.stderr
    always = jrun("-p", "Hi", "-n", "16", "--dspark", "--scheduler", "always")["spec_stats"]
    env_off = jrun("-p", "Hi", "-n", "16", "--dspark", env={"DS4_DSPARK_SCHEDULER": "0"})
    assert env_off["spec_stats"]["draft_len_hist"] == always["draft_len_hist"]
    assert env_off["spec_stats"]["scheduler_skips"] == 0
    flag_wins = jrun(
        "-p",
        "Hi",
        "-n",
        "16",
        "--dspark",
        "--scheduler",
        "off",
        env={"DS4_DSPARK_SCHEDULER": "0"},
    )
    assert flag_wins["spec_stats"]["proposed"] == 0
    r = cli("-p", "Hi", "-n", "1", "-v", env={"DS4_CUDA_NO_Q8_F16_CACHE": "1"})
    assert "ds4-cli: cache: off -> off" in r.stderr
    r = cli("-p", "Hi", "-n", "1", "-v", "--cache", "on", env={"DS4_CUDA_NO_Q8_F16_CACHE": "1"})
    assert "ds4-cli: cache: on -> " in r.stderr


def test_verbose_load_details():
    r = cli("-p", "Hi", "-n", "1", "-v", "--dspark")
    assert r.returncode == 0
    err = r.stderr
    for part in (
        "ds4-cli: model ",
        "backend cpu",
        "memory: weights",
        "session state",
        "ds4-cli: cache: auto -> off (",
        "ds4-cli: DSpark support ",
        ", acceptance prior 0.",  # the embedded support model's: the scheduler's start
    ):
        assert part in err, err
    assert "loading" not in err  # no progress bar when stderr is not a terminal
