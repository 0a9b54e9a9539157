"""The C header's enums as Python ``IntEnum`` classes.

Every value is read from ``include/ds4rt.h`` when the extension is compiled (``_enums.pxi``);
this module only gives the members Python names (the C name without its prefix).
``tests/test_enums.py`` checks that every enumerator of the header has its member here.
"""

from __future__ import annotations

import enum

from . import _core

__all__ = [
    "BY_C_NAME",
    "BackendKind",
    "CachePolicy",
    "ChatRole",
    "DetokenizeFlag",
    "GGUFValueType",
    "LoadMode",
    "NoDraftReason",
    "Numerics",
    "QType",
    "SchedulerMode",
    "Status",
    "ThinkMode",
    "TokenType",
    "TokenizeFlag",
    "TraceStage",
    "WeightKind",
]

_FLAT = {name: value for members in _core.HEADER_ENUMS.values() for name, value in members.items()}


def _c(name: str) -> int:
    """The value of the header's enumerator ``name``."""
    return _FLAT[name]


class Status(enum.IntEnum):
    """ds4rt_status: what every failing C call returns (see ds4rt.errors)."""

    OK = _c("DS4RT_OK")
    INVALID_ARGUMENT = _c("DS4RT_ERR_INVALID_ARGUMENT")
    IO = _c("DS4RT_ERR_IO")
    FORMAT = _c("DS4RT_ERR_FORMAT")
    UNSUPPORTED = _c("DS4RT_ERR_UNSUPPORTED")
    OUT_OF_MEMORY = _c("DS4RT_ERR_OUT_OF_MEMORY")
    OUT_OF_RANGE = _c("DS4RT_ERR_OUT_OF_RANGE")
    NOT_FOUND = _c("DS4RT_ERR_NOT_FOUND")
    MISMATCH = _c("DS4RT_ERR_MISMATCH")
    STATE = _c("DS4RT_ERR_STATE")
    BACKEND = _c("DS4RT_ERR_BACKEND")
    INTERNAL = _c("DS4RT_ERR_INTERNAL")


class QType(enum.IntEnum):
    """ds4rt_qtype: tensor element types (ggml/GGUF type ids); COUNT is one past the last."""

    F32 = _c("DS4RT_TYPE_F32")
    F16 = _c("DS4RT_TYPE_F16")
    Q4_0 = _c("DS4RT_TYPE_Q4_0")
    Q4_1 = _c("DS4RT_TYPE_Q4_1")
    Q5_0 = _c("DS4RT_TYPE_Q5_0")
    Q5_1 = _c("DS4RT_TYPE_Q5_1")
    Q8_0 = _c("DS4RT_TYPE_Q8_0")
    Q8_1 = _c("DS4RT_TYPE_Q8_1")
    Q2_K = _c("DS4RT_TYPE_Q2_K")
    Q3_K = _c("DS4RT_TYPE_Q3_K")
    Q4_K = _c("DS4RT_TYPE_Q4_K")
    Q5_K = _c("DS4RT_TYPE_Q5_K")
    Q6_K = _c("DS4RT_TYPE_Q6_K")
    Q8_K = _c("DS4RT_TYPE_Q8_K")
    IQ2_XXS = _c("DS4RT_TYPE_IQ2_XXS")
    IQ2_XS = _c("DS4RT_TYPE_IQ2_XS")
    IQ3_XXS = _c("DS4RT_TYPE_IQ3_XXS")
    IQ1_S = _c("DS4RT_TYPE_IQ1_S")
    IQ4_NL = _c("DS4RT_TYPE_IQ4_NL")
    IQ3_S = _c("DS4RT_TYPE_IQ3_S")
    IQ2_S = _c("DS4RT_TYPE_IQ2_S")
    IQ4_XS = _c("DS4RT_TYPE_IQ4_XS")
    I8 = _c("DS4RT_TYPE_I8")
    I16 = _c("DS4RT_TYPE_I16")
    I32 = _c("DS4RT_TYPE_I32")
    I64 = _c("DS4RT_TYPE_I64")
    F64 = _c("DS4RT_TYPE_F64")
    IQ1_M = _c("DS4RT_TYPE_IQ1_M")
    BF16 = _c("DS4RT_TYPE_BF16")
    TQ1_0 = _c("DS4RT_TYPE_TQ1_0")
    TQ2_0 = _c("DS4RT_TYPE_TQ2_0")
    MXFP4 = _c("DS4RT_TYPE_MXFP4")
    NVFP4 = _c("DS4RT_TYPE_NVFP4")
    Q1_0 = _c("DS4RT_TYPE_Q1_0")
    COUNT = _c("DS4RT_TYPE_COUNT")


class GGUFValueType(enum.IntEnum):
    """ds4rt_gguf_type: GGUF metadata value types."""

    UINT8 = _c("DS4RT_GGUF_UINT8")
    INT8 = _c("DS4RT_GGUF_INT8")
    UINT16 = _c("DS4RT_GGUF_UINT16")
    INT16 = _c("DS4RT_GGUF_INT16")
    UINT32 = _c("DS4RT_GGUF_UINT32")
    INT32 = _c("DS4RT_GGUF_INT32")
    FLOAT32 = _c("DS4RT_GGUF_FLOAT32")
    BOOL = _c("DS4RT_GGUF_BOOL")
    STRING = _c("DS4RT_GGUF_STRING")
    ARRAY = _c("DS4RT_GGUF_ARRAY")
    UINT64 = _c("DS4RT_GGUF_UINT64")
    INT64 = _c("DS4RT_GGUF_INT64")
    FLOAT64 = _c("DS4RT_GGUF_FLOAT64")


class Numerics(enum.IntEnum):
    """ds4rt_numerics: OFFICIAL follows the trained model, LLAMACPP matches llama.cpp."""

    OFFICIAL = _c("DS4RT_NUMERICS_OFFICIAL")
    LLAMACPP = _c("DS4RT_NUMERICS_LLAMACPP")


class CachePolicy(enum.IntEnum):
    """ds4rt_cache_policy: the Q8->F16 expansion cache (docs/CACHE.md)."""

    AUTO = _c("DS4RT_CACHE_AUTO")
    OFF = _c("DS4RT_CACHE_OFF")
    ON = _c("DS4RT_CACHE_ON")


class LoadMode(enum.IntEnum):
    """ds4rt_load_mode: how a model holds its file (MAP, or COPY into its own memory)."""

    MAP = _c("DS4RT_LOAD_MAP")
    COPY = _c("DS4RT_LOAD_COPY")


class BackendKind(enum.IntEnum):
    """ds4rt_backend_kind: where a model runs (AUTO: the best this build and machine offer)."""

    AUTO = _c("DS4RT_BACKEND_AUTO")
    CPU = _c("DS4RT_BACKEND_CPU")
    CUDA = _c("DS4RT_BACKEND_CUDA")
    HIP = _c("DS4RT_BACKEND_HIP")


class TraceStage(enum.IntEnum):
    """ds4rt_trace_stage: where Session.set_trace callbacks are called."""

    LAYER_IN = _c("DS4RT_TRACE_LAYER_IN")
    ATTN_IN = _c("DS4RT_TRACE_ATTN_IN")
    ATTN_OUT = _c("DS4RT_TRACE_ATTN_OUT")
    ATTN_HC = _c("DS4RT_TRACE_ATTN_HC")
    FFN_IN = _c("DS4RT_TRACE_FFN_IN")
    FFN_OUT = _c("DS4RT_TRACE_FFN_OUT")
    LAYER_OUT = _c("DS4RT_TRACE_LAYER_OUT")
    HEAD = _c("DS4RT_TRACE_HEAD")


class SchedulerMode(enum.IntEnum):
    """ds4rt_scheduler_mode: how many drafts a speculative cycle verifies (docs/DSPARK.md)."""

    ADAPTIVE = _c("DS4RT_SCHEDULER_ADAPTIVE")
    ALWAYS = _c("DS4RT_SCHEDULER_ALWAYS")
    OFF = _c("DS4RT_SCHEDULER_OFF")


class NoDraftReason(enum.IntEnum):
    """ds4rt_no_draft_reason: why a speculative cycle verified no draft."""

    SCHEDULER = _c("DS4RT_NO_DRAFT_SCHEDULER")
    TAIL = _c("DS4RT_NO_DRAFT_TAIL")
    CONFIDENCE = _c("DS4RT_NO_DRAFT_CONFIDENCE")
    NOT_READY = _c("DS4RT_NO_DRAFT_NOT_READY")
    OP_UNAVAILABLE = _c("DS4RT_NO_DRAFT_OP_UNAVAILABLE")
    NO_ROOM = _c("DS4RT_NO_DRAFT_NO_ROOM")
    ERROR = _c("DS4RT_NO_DRAFT_ERROR")
    SCHEDULER_OFF = _c("DS4RT_NO_DRAFT_SCHEDULER_OFF")
    EMPTY = _c("DS4RT_NO_DRAFT_EMPTY")


class TokenType(enum.IntEnum):
    """ds4rt_token_type: GGUF token types (CONTROL and USER_DEFINED are added tokens)."""

    UNDEFINED = _c("DS4RT_TOKEN_UNDEFINED")
    NORMAL = _c("DS4RT_TOKEN_NORMAL")
    UNKNOWN = _c("DS4RT_TOKEN_UNKNOWN")
    CONTROL = _c("DS4RT_TOKEN_CONTROL")
    USER_DEFINED = _c("DS4RT_TOKEN_USER_DEFINED")
    UNUSED = _c("DS4RT_TOKEN_UNUSED")
    BYTE = _c("DS4RT_TOKEN_BYTE")


class TokenizeFlag(enum.IntFlag):
    """ds4rt_tokenize_flags."""

    PARSE_CONTROL = _c("DS4RT_TOKENIZE_PARSE_CONTROL")
    PARSE_USER_DEFINED = _c("DS4RT_TOKENIZE_PARSE_USER_DEFINED")
    PARSE_SPECIAL = _c("DS4RT_TOKENIZE_PARSE_SPECIAL")
    STRICT_UTF8 = _c("DS4RT_TOKENIZE_STRICT_UTF8")
    ADD_BOS = _c("DS4RT_TOKENIZE_ADD_BOS")


class DetokenizeFlag(enum.IntFlag):
    """ds4rt_detokenize_flags."""

    SKIP_CONTROL = _c("DS4RT_DETOKENIZE_SKIP_CONTROL")
    REPLACE_INVALID = _c("DS4RT_DETOKENIZE_REPLACE_INVALID")


class ChatRole(enum.IntEnum):
    """ds4rt_chat_role."""

    SYSTEM = _c("DS4RT_ROLE_SYSTEM")
    USER = _c("DS4RT_ROLE_USER")
    ASSISTANT = _c("DS4RT_ROLE_ASSISTANT")
    TOOL = _c("DS4RT_ROLE_TOOL")


class ThinkMode(enum.IntEnum):
    """ds4rt_think_mode: NONE answers directly, HIGH thinks, MAX thinks with ds4's prefix."""

    NONE = _c("DS4RT_THINK_NONE")
    HIGH = _c("DS4RT_THINK_HIGH")
    MAX = _c("DS4RT_THINK_MAX")


class WeightKind(enum.IntEnum):
    """ds4rt_weight_kind: the categories of a memory plan's weights (ds4rt.memory_plan)."""

    EMBEDDING = _c("DS4RT_WEIGHT_EMBEDDING")
    HEAD = _c("DS4RT_WEIGHT_HEAD")
    ATTENTION = _c("DS4RT_WEIGHT_ATTENTION")
    COMPRESSOR = _c("DS4RT_WEIGHT_COMPRESSOR")
    INDEXER = _c("DS4RT_WEIGHT_INDEXER")
    ROUTER = _c("DS4RT_WEIGHT_ROUTER")
    EXPERTS = _c("DS4RT_WEIGHT_EXPERTS")
    SHARED_EXPERTS = _c("DS4RT_WEIGHT_SHARED_EXPERTS")
    HYPER = _c("DS4RT_WEIGHT_HYPER")
    NORMS = _c("DS4RT_WEIGHT_NORMS")
    COUNT = _c("DS4RT_WEIGHT_KIND_COUNT")


# The Python enum of each C enum (tests/test_enums.py walks this against the header).
BY_C_NAME: dict[str, type[enum.IntEnum] | type[enum.IntFlag]] = {
    "ds4rt_status": Status,
    "ds4rt_qtype": QType,
    "ds4rt_gguf_type": GGUFValueType,
    "ds4rt_numerics": Numerics,
    "ds4rt_cache_policy": CachePolicy,
    "ds4rt_load_mode": LoadMode,
    "ds4rt_backend_kind": BackendKind,
    "ds4rt_trace_stage": TraceStage,
    "ds4rt_scheduler_mode": SchedulerMode,
    "ds4rt_no_draft_reason": NoDraftReason,
    "ds4rt_token_type": TokenType,
    "ds4rt_tokenize_flags": TokenizeFlag,
    "ds4rt_detokenize_flags": DetokenizeFlag,
    "ds4rt_chat_role": ChatRole,
    "ds4rt_think_mode": ThinkMode,
    "ds4rt_weight_kind": WeightKind,
}
