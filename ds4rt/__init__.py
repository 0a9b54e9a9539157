"""ds4rt: an embeddable runtime for DeepSeek V4 Flash (deepseek4 GGUF) with DSpark speculative
decoding. The C core (libds4rt) is linked directly by the ``_core`` extension.

    import ds4rt

    with ds4rt.Model.default() as model, model.session() as session:
        print(session.generate("Hello", max_tokens=16))

``get_include()`` and ``get_library_dir()`` tell a C/C++ build where the installed header
(``ds4rt.h``) and shared library (``libds4rt.so``, soname ``libds4rt.so.1``) are, like
``numpy.get_include()``; ``get_pkgconfig_dir()`` holds ``ds4rt.pc`` for pkg-config.
"""

from __future__ import annotations

import os

from . import bench, data, enums, errors, gguf, memory, ops, stats, tokenizer
from ._core import api_version, build_info, version
from .backends import backends
from .dspark import DSpark
from .enums import BackendKind, CachePolicy, Numerics, SchedulerMode, Status
from .errors import BusyError, ClosedError, Ds4rtError
from .generation import (
    GenerationOptions,
    GenerationResult,
    Piece,
    SchedulerOptions,
    StopReason,
    Stream,
    Timings,
)
from .model import Model, Sampler, Session
from .tokenizer import Tokenizer

__all__ = [
    "BackendKind",
    "BusyError",
    "CachePolicy",
    "ClosedError",
    "DSpark",
    "Ds4rtError",
    "GenerationOptions",
    "GenerationResult",
    "Model",
    "Numerics",
    "Piece",
    "Sampler",
    "SchedulerMode",
    "SchedulerOptions",
    "Session",
    "Status",
    "StopReason",
    "Stream",
    "Timings",
    "Tokenizer",
    "api_version",
    "backends",
    "bench",
    "build_info",
    "data",
    "enums",
    "errors",
    "get_include",
    "get_library_dir",
    "get_pkgconfig_dir",
    "gguf",
    "memory",
    "ops",
    "stats",
    "tokenizer",
    "version",
]

__version__ = version()


def get_include() -> str:
    """Directory holding the installed public header ``ds4rt.h``."""
    return os.path.join(os.path.dirname(__file__), "include")


def get_library_dir() -> str:
    """Directory holding the installed shared library ``libds4rt.so`` (link with -lds4rt)."""
    return os.path.dirname(__file__)


def get_pkgconfig_dir() -> str:
    """Directory holding ``ds4rt.pc``: with it on PKG_CONFIG_PATH, ``pkg-config --cflags --libs
    ds4rt`` gives the flags to build and link a host (rpath included)."""
    return os.path.join(os.path.dirname(__file__), "pkgconfig")
