# cython: language_level=3, boundscheck=False, wraparound=False
"""Low-level binding of libds4rt (include/ds4rt.h). Use the public modules of the ds4rt package
instead of importing this one directly; its names may change between versions."""

from libc.stdint cimport uint16_t, uint32_t

import inspect
import os

import numpy as np

from ds4rt.errors import BY_STATUS_NAME, ClosedError, Ds4rtError

include "_enums.pxi"

# Error class by ds4rt_status value (the values from the header, the classes by C name).
_ERROR_BY_STATUS = {int(ds4rt_status[name]): cls for name, cls in BY_STATUS_NAME.items()}


cdef extern from "ds4rt.h":
    const char *ds4rt_status_name(ds4rt_status status)
    const char *ds4rt_last_error()
    void ds4rt_clear_error()
    uint32_t ds4rt_api_version()
    const char *ds4rt_version()
    const char *ds4rt_build_info()
    ds4rt_status ds4rt_gpu_device_count(int *count)
    ds4rt_status ds4rt_gpu_device_name(int device, char *buf, size_t len)


cdef extern from "ds4rt_testing.h":  # not installed: test hooks the library exports
    ds4rt_status ds4rt_gpu_expand_q8_0_f16(const void *q8_blocks, size_t n_blocks,
                                           uint16_t *f16_out) nogil


cdef int check(ds4rt_status st) except -1:
    """Raises the ds4rt exception for a failing status, with the library's message."""
    if st == DS4RT_OK:
        return 0
    msg = ds4rt_last_error().decode("utf-8", "replace")
    cls = _ERROR_BY_STATUS.get(<int>st, Ds4rtError)
    raise cls(msg or ds4rt_status_name(st).decode())


def api_version():
    return ds4rt_api_version()


def version():
    return ds4rt_version().decode()


def build_info():
    return ds4rt_build_info().decode()


def gpu_device_count():
    cdef int n = 0
    check(ds4rt_gpu_device_count(&n))
    return n


def gpu_device_name(int device=0):
    cdef char buf[256]
    check(ds4rt_gpu_device_name(device, buf, sizeof(buf)))
    return buf.decode("utf-8", "replace")


def gpu_expand_q8_0_f16(blocks):
    """Q8_0 bytes (a multiple of 34) -> numpy float16 array, expanded on the GPU."""
    cdef const unsigned char[::1] src = np.frombuffer(bytes(blocks), dtype=np.uint8)
    if src.shape[0] % 34:
        raise ValueError("Q8_0 data must be a multiple of 34 bytes")
    cdef size_t nb = src.shape[0] // 34
    out = np.empty(nb * 32, dtype=np.uint16)
    cdef uint16_t[::1] dst = out
    cdef const void *sp = <const void *>&src[0] if nb else NULL
    cdef uint16_t *dp = &dst[0] if nb else NULL
    with nogil:
        st = ds4rt_gpu_expand_q8_0_f16(sp, nb, dp)
    check(st)
    return out.view(np.float16)


include "_gguf.pxi"
include "_quant.pxi"
include "_tok.pxi"
include "_model.pxi"
include "_dspark.pxi"
include "_generate.pxi"
include "_backend.pxi"
