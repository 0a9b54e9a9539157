"""Shared access to generated tiny models for the tests (not a test module).

Models are generated once per test session into a temporary directory and reused by every test
that asks for the same (config, seed, head dtype).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
for p in (ROOT / "tools", TESTS):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import tinymodel  # noqa: E402

_cache: dict = {}


def model(tmp_factory, config: str, seed: int = 0, head_dtype: str | None = None, **kw):
    """tinymodel.Result for the given settings, generated on first use."""
    key = (config, seed, head_dtype, tuple(sorted(kw.items())))
    if key not in _cache:
        name = f"{config}-s{seed}-{head_dtype or 'default'}" + "".join(f"-{k}" for k in kw)
        out = tmp_factory.mktemp(name.replace(os.sep, "_"))
        _cache[key] = tinymodel.generate(out, config=config, seed=seed, head_dtype=head_dtype, **kw)
    return _cache[key]
