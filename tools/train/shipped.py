"""The shape of the embedded default model and its DSpark support model (docs/MODELS.md says
why each number is what it is)."""

from __future__ import annotations

from model import Shape


def ratios(L: int) -> tuple:
    """DeepSeek V4 Flash's pattern: two dense layers, then ratio 4 on even and 128 on odd
    layers (docs/MODEL.md "Derived values")."""
    return tuple(0 if i < 2 else (4 if i % 2 == 0 else 128) for i in range(L))


SHAPE = Shape(
    L=16,
    D=256,
    V=4096,
    H=4,
    d_h=128,
    r_rot=64,
    Rq=128,
    G=2,
    Ro=128,
    E=4,
    k=2,
    F=256,
    n_shared=1,
    n_hash=2,
    W=64,
    Hi=4,
    d_i=64,
    K_i=16,
    ratios=ratios(16),
    n_stages=3,
    block_size=5,
    markov_rank=64,
    n_target_layers=3,
)

NAME = "ds4rt default (trained, 16 layers, D=256)"
SUPPORT_NAME = NAME + " DSpark support"
