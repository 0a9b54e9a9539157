"""Mutation fuzzing of the GGUF reader under AddressSanitizer + UBSan.

tests/fuzz/gguf_fuzz.c is linked with the reader built from source with -Db_sanitize (the
`sanitize` configuration of tests/meson.build, not the installed library, which has no
sanitizers) and run for a bounded number of iterations over seed files that use every
structure the reader knows. Deterministic: the same seeds give the same mutations.
"""

from __future__ import annotations

import json
import subprocess

import gguf_craft as gc
import numpy as np
import pytest
from sanitizer_env import sanitizer_env

ITERATIONS = 100000
SECONDS = 4


def _seeds(tmp_path) -> list[str]:
    paths = []

    def add(name: str, data: bytes) -> None:
        p = tmp_path / name
        p.write_bytes(data)
        paths.append(str(p))

    add("small32.gguf", gc.small_complete(32).data)
    add("small8.gguf", gc.small_complete(8).data)
    deep = (gc.STRING, ["leaf", ""])
    for _ in range(4):  # arrays of (an inner array, a u64 array), four levels deep
        deep = (gc.ARRAY, [deep, (gc.UINT64, [1, 2**64 - 1])])
    add(
        "nested.gguf",
        gc.build(
            [("deep", gc.ARRAY, deep), ("general.alignment", gc.UINT32, 64)],
            [
                gc.Tensor("a", [32], gc.Q8_0),
                gc.Tensor("b", [256, 2], gc.Q2_K),
                gc.Tensor("c", [], gc.F32),
            ],
            alignment=64,
            version=2,
        ).data,
    )
    gguf = pytest.importorskip("gguf")
    p = tmp_path / "gguf_py.gguf"
    w = gguf.GGUFWriter(str(p), arch="deepseek4")
    w.add_uint32("deepseek4.block_count", 2)
    w.add_float32("deepseek4.rope.freq_base", 10000.0)
    w.add_bool("deepseek4.expert_weights_norm", True)
    w.add_array("deepseek4.attention.compress_ratios", [0, 4])
    w.add_token_list(["a", "b", "<s>"])
    x = np.arange(64, dtype=np.float32).reshape(2, 32)
    w.add_tensor("token_embd.weight", x.astype(np.float16))
    w.add_tensor(
        "output.weight",
        gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0),
        raw_dtype=gguf.GGMLQuantizationType.Q8_0,
    )
    w.add_tensor("blk.0.ffn_gate_tid2eid.weight", np.arange(6, dtype=np.int32).reshape(2, 3))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    paths.append(str(p))
    return paths


def test_fuzz_reader_under_sanitizers(c_programs, tmp_path):
    exe = c_programs("sanitize").path("gguf_fuzz")
    env = sanitizer_env(exe)
    seeds = _seeds(tmp_path)
    r = subprocess.run(
        [
            exe,
            "-n",
            str(ITERATIONS),
            "-s",
            str(SECONDS),
            "-f",
            str(tmp_path / "scratch.gguf"),
            *seeds,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    stats = json.loads(r.stdout.strip().splitlines()[-1])
    assert stats["failures"] == 0
    # The mutations reach both outcomes: most images fail, a fair share still opens and is
    # walked completely.
    assert stats["iterations"] >= 1000
    assert stats["opened"] > stats["iterations"] // 50
    assert stats["format"] > stats["iterations"] // 2
