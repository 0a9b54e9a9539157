"""Files shipped with the package: the embedded default model pair.

`default-target.gguf` is a small deepseek4 model trained by ds4rt on Python source and the
Python documentation, and `default-support.gguf` the DSpark support model trained to draft for
it; docs/MODELS.md gives their shape, training commands, sha256 (also in SHA256SUMS here),
quality and speed. `ds4-cli` without `-m` runs this pair with DSpark on. Tests that need random
weights generate them (tests/tiny_models.py); the shipped pair is not a test fixture.
"""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def default_target() -> str:
    """Path of the embedded default target model."""
    return os.path.join(_HERE, "default-target.gguf")


def default_support() -> str:
    """Path of the embedded default DSpark support model (trained for default_target())."""
    return os.path.join(_HERE, "default-support.gguf")


def dspark_default(model_path: str | None, dspark: bool, no_dspark: bool) -> bool:
    """Whether ds4-cli decodes speculatively: never with --no-dspark, always with --dspark,
    and otherwise exactly for the embedded pair (no model path given)."""
    if no_dspark:
        return False
    return dspark or model_path is None
