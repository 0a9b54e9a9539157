"""Files shipped with the package.

The embedded default model is the tiny random-weight `float` configuration of
tools/make_tiny_model.py (seed 0): a complete deepseek4 target and its DSpark support file,
small enough to ship, so `ds4-cli` runs on a fresh install without downloading anything. Its
weights are random: it exercises every code path but says nothing sensible.
Regenerate with:

    python tools/make_tiny_model.py --out DIR --config float --seed 0
    cp DIR/target.gguf ds4rt/data/default-target.gguf
    cp DIR/support.gguf ds4rt/data/default-support.gguf

(tests/test_cli_generate.py checks that the shipped files are exactly that output.)
"""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def default_target() -> str:
    """Path of the embedded default target model."""
    return os.path.join(_HERE, "default-target.gguf")


def default_support() -> str:
    """Path of the embedded default DSpark support model."""
    return os.path.join(_HERE, "default-support.gguf")
