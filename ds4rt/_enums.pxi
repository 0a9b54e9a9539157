# The C header's enums (included first by _core.pyx). Cython reads every value from ds4rt.h at
# compile time, so no number is copied here; ds4rt/enums.py gives them their public Python
# names, and tests/test_enums.py checks that every enumerator of the header is bound.

cdef extern from "ds4rt.h":
    cpdef enum ds4rt_status:
        DS4RT_OK
        DS4RT_ERR_INVALID_ARGUMENT
        DS4RT_ERR_IO
        DS4RT_ERR_FORMAT
        DS4RT_ERR_UNSUPPORTED
        DS4RT_ERR_OUT_OF_MEMORY
        DS4RT_ERR_OUT_OF_RANGE
        DS4RT_ERR_NOT_FOUND
        DS4RT_ERR_MISMATCH
        DS4RT_ERR_STATE
        DS4RT_ERR_BACKEND
        DS4RT_ERR_INTERNAL

    cpdef enum ds4rt_qtype:
        DS4RT_TYPE_F32
        DS4RT_TYPE_F16
        DS4RT_TYPE_Q4_0
        DS4RT_TYPE_Q4_1
        DS4RT_TYPE_Q5_0
        DS4RT_TYPE_Q5_1
        DS4RT_TYPE_Q8_0
        DS4RT_TYPE_Q8_1
        DS4RT_TYPE_Q2_K
        DS4RT_TYPE_Q3_K
        DS4RT_TYPE_Q4_K
        DS4RT_TYPE_Q5_K
        DS4RT_TYPE_Q6_K
        DS4RT_TYPE_Q8_K
        DS4RT_TYPE_IQ2_XXS
        DS4RT_TYPE_IQ2_XS
        DS4RT_TYPE_IQ3_XXS
        DS4RT_TYPE_IQ1_S
        DS4RT_TYPE_IQ4_NL
        DS4RT_TYPE_IQ3_S
        DS4RT_TYPE_IQ2_S
        DS4RT_TYPE_IQ4_XS
        DS4RT_TYPE_I8
        DS4RT_TYPE_I16
        DS4RT_TYPE_I32
        DS4RT_TYPE_I64
        DS4RT_TYPE_F64
        DS4RT_TYPE_IQ1_M
        DS4RT_TYPE_BF16
        DS4RT_TYPE_TQ1_0
        DS4RT_TYPE_TQ2_0
        DS4RT_TYPE_MXFP4
        DS4RT_TYPE_NVFP4
        DS4RT_TYPE_Q1_0
        DS4RT_TYPE_COUNT

    cpdef enum ds4rt_gguf_type:
        DS4RT_GGUF_UINT8
        DS4RT_GGUF_INT8
        DS4RT_GGUF_UINT16
        DS4RT_GGUF_INT16
        DS4RT_GGUF_UINT32
        DS4RT_GGUF_INT32
        DS4RT_GGUF_FLOAT32
        DS4RT_GGUF_BOOL
        DS4RT_GGUF_STRING
        DS4RT_GGUF_ARRAY
        DS4RT_GGUF_UINT64
        DS4RT_GGUF_INT64
        DS4RT_GGUF_FLOAT64

    cpdef enum ds4rt_numerics:
        DS4RT_NUMERICS_OFFICIAL
        DS4RT_NUMERICS_LLAMACPP

    cpdef enum ds4rt_cache_policy:
        DS4RT_CACHE_AUTO
        DS4RT_CACHE_OFF
        DS4RT_CACHE_ON

    cpdef enum ds4rt_load_mode:
        DS4RT_LOAD_MAP
        DS4RT_LOAD_COPY

    cpdef enum ds4rt_backend_kind:
        DS4RT_BACKEND_AUTO
        DS4RT_BACKEND_CPU
        DS4RT_BACKEND_CUDA
        DS4RT_BACKEND_HIP

    cpdef enum ds4rt_trace_stage:
        DS4RT_TRACE_LAYER_IN
        DS4RT_TRACE_ATTN_IN
        DS4RT_TRACE_ATTN_OUT
        DS4RT_TRACE_ATTN_HC
        DS4RT_TRACE_FFN_IN
        DS4RT_TRACE_FFN_OUT
        DS4RT_TRACE_LAYER_OUT
        DS4RT_TRACE_HEAD

    cpdef enum ds4rt_scheduler_mode:
        DS4RT_SCHEDULER_ADAPTIVE
        DS4RT_SCHEDULER_ALWAYS
        DS4RT_SCHEDULER_OFF

    cpdef enum ds4rt_no_draft_reason:
        DS4RT_NO_DRAFT_SCHEDULER
        DS4RT_NO_DRAFT_TAIL
        DS4RT_NO_DRAFT_CONFIDENCE
        DS4RT_NO_DRAFT_NOT_READY
        DS4RT_NO_DRAFT_OP_UNAVAILABLE
        DS4RT_NO_DRAFT_NO_ROOM
        DS4RT_NO_DRAFT_ERROR
        DS4RT_NO_DRAFT_SCHEDULER_OFF
        DS4RT_NO_DRAFT_EMPTY

    cpdef enum ds4rt_token_type:
        DS4RT_TOKEN_UNDEFINED
        DS4RT_TOKEN_NORMAL
        DS4RT_TOKEN_UNKNOWN
        DS4RT_TOKEN_CONTROL
        DS4RT_TOKEN_USER_DEFINED
        DS4RT_TOKEN_UNUSED
        DS4RT_TOKEN_BYTE

    cpdef enum ds4rt_tokenize_flags:
        DS4RT_TOKENIZE_PARSE_CONTROL
        DS4RT_TOKENIZE_PARSE_USER_DEFINED
        DS4RT_TOKENIZE_PARSE_SPECIAL
        DS4RT_TOKENIZE_STRICT_UTF8
        DS4RT_TOKENIZE_ADD_BOS

    cpdef enum ds4rt_detokenize_flags:
        DS4RT_DETOKENIZE_SKIP_CONTROL
        DS4RT_DETOKENIZE_REPLACE_INVALID

    cpdef enum ds4rt_chat_role:
        DS4RT_ROLE_SYSTEM
        DS4RT_ROLE_USER
        DS4RT_ROLE_ASSISTANT
        DS4RT_ROLE_TOOL

    cpdef enum ds4rt_think_mode:
        DS4RT_THINK_NONE
        DS4RT_THINK_HIGH
        DS4RT_THINK_MAX

    cpdef enum ds4rt_weight_kind:
        DS4RT_WEIGHT_EMBEDDING
        DS4RT_WEIGHT_HEAD
        DS4RT_WEIGHT_ATTENTION
        DS4RT_WEIGHT_COMPRESSOR
        DS4RT_WEIGHT_INDEXER
        DS4RT_WEIGHT_ROUTER
        DS4RT_WEIGHT_EXPERTS
        DS4RT_WEIGHT_SHARED_EXPERTS
        DS4RT_WEIGHT_HYPER
        DS4RT_WEIGHT_NORMS
        DS4RT_WEIGHT_KIND_COUNT


# Every enumerator above by its C name, for ds4rt/enums.py.
HEADER_ENUMS = {
    cls.__name__: {m.name: int(m) for m in cls}
    for cls in (ds4rt_status, ds4rt_qtype, ds4rt_gguf_type, ds4rt_numerics, ds4rt_cache_policy,
                ds4rt_load_mode, ds4rt_backend_kind, ds4rt_trace_stage, ds4rt_scheduler_mode,
                ds4rt_no_draft_reason, ds4rt_token_type, ds4rt_tokenize_flags,
                ds4rt_detokenize_flags, ds4rt_chat_role, ds4rt_think_mode, ds4rt_weight_kind)
}
