"""Checks of the arguments the public API passes to C: the right type (TypeError, never a
coercion: Cython would truncate 4.5 to 4 and read "yes" as true) and the C field's range
(ValueError)."""

from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1


def int_arg(name: str, v: object, lo: int, hi: int) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} = {v} is outside [{lo}, {hi}]")
    return int(v)


def float_arg(name: str, v: object, lo: float, hi: float, *, lo_open: bool = False) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, not {type(v).__name__}")
    f = float(v)
    if not math.isfinite(f) or f < lo or f > hi or (lo_open and f == lo):
        left = "(" if lo_open else "["
        raise ValueError(f"{name} = {v} is outside {left}{lo}, {hi}]")
    return f


def number_arg(name: str, v: object) -> float:
    """A number of any value (the C library judges its range)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, not {type(v).__name__}")
    return float(v)


def bool_arg(name: str, v: object) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {type(v).__name__}")
    return bool(v)


def str_arg(name: str, v: object, choices: tuple[str, ...]) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{name} must be a str, not {type(v).__name__}")
    if v not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, not {v!r}")
    return v
