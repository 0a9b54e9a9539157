"""ABI 1.0 compatibility of today's library.

* A host compiled against the frozen 1.0 header (tests/abi/ds4rt_1_0.h, built by Meson as
  abi_host_1_0) runs against the installed library and gets the same results as today's API:
  model load and info, session, plain and sampled generation (sampler embedded by value, as in
  1.0), speculative generation with the default DSpark pair and with a host drafter (scheduler
  embedded by value), the sampler, statistics, the tokenizer and chat template.
* tests/abi/abi_1_0.txt lists every symbol and struct of ABI 1.0: no symbol may disappear, no
  struct shrink, no 1.0 field move (but in the two structs whose 1.0 layout is translated).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

import ds4rt
from ds4rt import _core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = os.path.join(ROOT, "tests", "abi", "abi_1_0.txt")
LIB = os.path.join(ds4rt.get_library_dir(), "libds4rt.so.1")
# 1.0 layouts that embedded a struct by value: recognised by their size and translated, so their
# fields may move (tests/test_abi_versioning.py checks the translation)
TRANSLATED = {"ds4rt_generate_params", "ds4rt_spec_params"}
PROMPT = [1, 2, 3, 4, 5]


def parse_list(text: str) -> tuple[set[str], dict[str, int], dict[str, int]]:
    symbols, structs, fields = set(), {}, {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        kind, name, *rest = line.split()
        if kind == "symbol":
            symbols.add(name)
        elif kind == "struct":
            structs[name] = int(rest[0])
        elif kind == "field":
            fields[name] = int(rest[0])
    return symbols, structs, fields


@pytest.fixture(scope="module")
def host_output(c_programs):
    exe = c_programs("native").path("abi_host_1_0")
    r = subprocess.run(
        [exe, ds4rt.data.default_target(), ds4rt.data.default_support()],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = {}
    for line in r.stdout.splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    assert "done" in out
    return out


def ids(value: str) -> list[int]:
    return [int(x) for x in value.split()]


def kv(value: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in value.split())


@pytest.fixture(scope="module")
def today():
    model = ds4rt.Model(ds4rt.data.default_target(), numerics="llama.cpp", n_threads=2)
    return model, ds4rt.DSpark(model, ds4rt.data.default_support())


def test_1_0_host_model_and_info(host_output, today):
    model, _ = today
    assert host_output["api"] == "1 1"
    info = kv(host_output["info"])
    assert int(info["size"]) == 264  # the 1.0 struct, filled to its size
    assert int(info["n_layer"]) == model.info["n_layer"]
    assert int(info["n_vocab"]) == model.info["n_vocab"]
    assert int(info["n_embd"]) == model.info["n_embd"]
    assert int(info["eos"]) == model.info["eos_id"]
    assert info["threads"] == "2" and int(info["numerics"]) == 1 and info["reason_nul"] == "1"


def test_1_0_host_generation_matches_todays_api(host_output, today):
    model, dspark = today
    s = model.session(n_ctx=256)
    greedy = s.generate(PROMPT, max_tokens=16, stop_at_eos=False)
    assert ids(host_output["greedy"]) == greedy and len(greedy) == 16
    s.reset()
    sampled = s.generate(
        PROMPT, max_tokens=16, temperature=0.8, top_k=20, seed=42, stop_at_eos=False
    )
    assert ids(host_output["sampled"]) == sampled
    assert sampled != greedy
    # speculative greedy output is plain greedy output, whichever drafter
    assert ids(host_output["dspark"]) == greedy
    assert ids(host_output["dspark_off"]) == greedy
    assert ids(host_output["host"]) == greedy
    s.reset()
    assert s.generate(PROMPT, max_tokens=16, stop_at_eos=False, dspark=dspark) == greedy


def test_1_0_host_speculative_statistics(host_output):
    d = kv(host_output["dspark_stats"])
    assert int(d["size"]) == 1024 and int(d["cycles"]) > 0 and int(d["proposed"]) > 0
    assert int(d["tokens"]) == 16
    assert host_output["dspark_stats_line_starts"] == "ds4: DSpark stats"
    assert host_output["callbacks"] == "1 final=1"
    off = kv(host_output["off_stats"])
    assert int(off["proposed"]) == 0 and int(off["off"]) >= int(off["cycles"]) - 1 > 0
    host = kv(host_output["host_stats"])
    # the host drafter knows the answer: every draft is accepted
    assert int(host["proposed"]) > 0 and host["accepted"] == host["proposed"]


def test_1_0_host_sampler_tokenizer_and_chat(host_output, today):
    model, _ = today
    assert abs(float(kv(host_output["sampler"])["total"]) - 1.0) < 1e-3
    s = model.session(n_ctx=256)
    s.eval(PROMPT)
    sampler = ds4rt.Sampler(model.n_vocab, temperature=1.0, top_p=0.9, seed=3)
    logits = s.current_logits()
    assert ids(host_output["drawn"]) == [sampler.sample(logits) for _ in range(4)]
    if model.tokenizer is not None:
        assert ids(host_output["tokens"]) == model.tokenize("Hello world")
        chat = model.tokenizer.encode_chat([{"role": "user", "content": "Hi"}])
        assert ids(host_output["chat"]) == list(chat)
    assert host_output["arrays"] == "n_tokens=3 bos=-1"


def test_no_1_0_symbol_is_missing():
    from test_build import exported_symbols

    want, _, _ = parse_list(open(LIST, encoding="utf-8").read())
    assert len(want) > 90
    have = set(exported_symbols(LIB))
    assert sorted(want - have) == []


def test_the_list_matches_the_frozen_header(c_programs):
    """The struct lines of abi_1_0.txt are what a C compiler makes of tests/abi/ds4rt_1_0.h, and
    its symbols are the functions that header declares."""
    _, structs, fields = parse_list(open(LIST, encoding="utf-8").read())
    out = subprocess.run(
        [c_programs("native").path("abi_sizes_1_0")], capture_output=True, text=True, check=True
    ).stdout
    _, s10, f10 = parse_list(out)
    assert (s10, f10) == (structs, fields)
    header = open(os.path.join(ROOT, "tests", "abi", "ds4rt_1_0.h"), encoding="utf-8").read()
    declared = set(re.findall(r"DS4RT_API\s+[^;(]*?\b(ds4rt_\w+)\s*\(", header))
    symbols, _, _ = parse_list(open(LIST, encoding="utf-8").read())
    assert declared == symbols


def test_no_struct_shrinks_and_no_1_0_field_moves(c_programs):
    _, structs, fields = parse_list(open(LIST, encoding="utf-8").read())
    out = subprocess.run(
        [c_programs("native").path("abi_sizes")], capture_output=True, text=True, check=True
    ).stdout
    _, now_structs, now_fields = parse_list(out)
    shrunk = {n: (s, now_structs[n]) for n, s in structs.items() if now_structs[n] < s}
    assert shrunk.keys() <= TRANSLATED, shrunk
    moved = {
        f: (o, now_fields[f])
        for f, o in fields.items()
        if now_fields[f] != o and f.split(".")[0] not in TRANSLATED
    }
    assert moved == {}


def test_translated_layouts_keep_their_1_0_size_recognisable(c_programs):
    """A later layout may never take the size that identifies a 1.0 layout (the library asserts
    this at compile time too)."""
    _, structs, _ = parse_list(open(LIST, encoding="utf-8").read())
    out = subprocess.run(
        [c_programs("native").path("abi_sizes")], capture_output=True, text=True, check=True
    ).stdout
    _, now, _ = parse_list(out)
    for name in TRANSLATED:
        assert now[name] != structs[name]


def test_core_extension_and_library_agree():
    assert _core.api_version() == ds4rt.api_version() == 1
