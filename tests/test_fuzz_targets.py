"""The short run of the libFuzzer targets (tests/fuzz/, docs/ROBUSTNESS.md) that CI makes: each
target built in the `sanitize` configuration (ASan + UBSan, the library's objects linked in)
with the standalone driver, run over its committed corpus and then a few seconds of mutations.
A sanitizer report or a failed check in a target ends the program with a non-zero status.
The long runs (libFuzzer, clang) are in docs/ROBUSTNESS.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sanitizer_env import sanitizer_env

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "fuzz", "corpus")
SECONDS = 3
RUNS = 20000


@pytest.fixture(scope="module")
def seed_models(tmp_path_factory):
    """The seed model files the model targets patch (generated: about 2.5 MB together)."""
    sys.path.insert(0, os.path.join(HERE, "fuzz"))
    try:
        import make_corpus
    finally:
        sys.path.pop(0)
    return make_corpus.write_models(str(tmp_path_factory.mktemp("fuzz_models")))


@pytest.mark.parametrize(
    "target,corpus", [("fuzz_gguf", "gguf"), ("fuzz_tokenizer", "tokenizer"),
                      ("fuzz_params", "params"), ("fuzz_model", "model"),
                      ("fuzz_support", "support")],
)  # fmt: skip
def test_fuzz_target_short_run(c_programs, seed_models, target, corpus):
    exe = c_programs("sanitize").path(target)
    env = sanitizer_env(exe, ("-runs=0",))
    env["DS4RT_FUZZ_TARGET"], env["DS4RT_FUZZ_SUPPORT"] = seed_models
    env["DS4RT_FUZZ_STATS"] = "1"
    r = subprocess.run(
        [exe, f"-runs={RUNS}", f"-max_total_time={SECONDS}", os.path.join(CORPUS, corpus)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-6000:]
    stats = json.loads(r.stdout.strip().splitlines()[-1])
    assert stats["seeds"] == len(os.listdir(os.path.join(CORPUS, corpus)))
    assert stats["runs"] > 0
    if target in ("fuzz_model", "fuzz_support"):
        # the intact seed loads and generates, and patches reach both outcomes
        out = json.loads(r.stderr.strip().splitlines()[-1])
        assert 0 < out["loaded"] < out["inputs"] and out["generated"] > 0, out
