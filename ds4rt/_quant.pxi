# _quant.pxi - CPU tensor ops of libds4rt (dequantisation, quantised matmul, CPU path choice).
# Included at the end of _core.pyx; the public wrappers are in ds4rt/ops.py. The C functions are
# declared under _q_ aliases so they cannot clash with declarations in other .pxi files.

from libc.stdint cimport int8_t, int64_t, uint32_t, uint64_t

cdef extern from "ds4rt_testing.h":  # not installed: test hooks the library exports
    ds4rt_status _q_dequantize "ds4rt_dequantize"(uint32_t type, const void *src, int64_t n,
                                                  float *dst) nogil
    ds4rt_status _q_matmul_host "ds4rt_matmul_host"(uint32_t type, const void *w, int64_t rows,
                                                    int64_t cols, const float *x, int64_t n_tok,
                                                    float *y, int n_threads) nogil
    ds4rt_status _q_quantize_activation "ds4rt_quantize_activation"(
        uint32_t weight_type, const float *x, int64_t n, int8_t *q, float *scales) nogil
    ds4rt_status _q_row_bytes "ds4rt_type_row_bytes"(uint32_t type, int64_t n, uint64_t *out)
    const char *_q_cpu_isa "ds4rt_cpu_isa"()
    int _q_cpu_isa_supported "ds4rt_cpu_isa_supported"(const char *name)
    ds4rt_status _q_cpu_isa_set "ds4rt_cpu_isa_set"(const char *name)


def quant_row_bytes(uint32_t qtype, int64_t n):
    """Bytes of n elements of qtype (n a whole number of blocks)."""
    cdef uint64_t out = 0
    check(_q_row_bytes(qtype, n, &out))
    return out


def _bytes_needed(uint32_t qtype, int64_t n):
    """Bytes of n elements of qtype, or None when the C call itself will reject (qtype, n)
    before reading anything (unknown type, partial block)."""
    try:
        return quant_row_bytes(qtype, n)
    except Ds4rtError:
        return None


def quant_dequantize(raw, uint32_t qtype, int64_t n):
    """raw bytes of n elements of qtype -> float32[n]."""
    cdef const unsigned char[::1] src = np.frombuffer(raw, dtype=np.uint8)
    out = np.empty(n, dtype=np.float32)
    cdef float[::1] dst = out
    cdef const void *sp = <const void *>&src[0] if src.shape[0] else NULL
    cdef float *dp = &dst[0] if n > 0 else NULL
    cdef ds4rt_status st
    need = _bytes_needed(qtype, n)
    if n > 0 and need is not None and <uint64_t>src.shape[0] < need:
        raise ValueError(f"{src.shape[0]} bytes are too few for {n} elements of type {qtype}")
    with nogil:
        st = _q_dequantize(qtype, sp, n, dp)
    check(st)
    return out


def quant_matmul(raw, uint32_t qtype, int64_t rows, int64_t cols, x, int n_threads=0):
    """W[rows][cols] (raw GGUF bytes of qtype) times x[n_tok][cols] (float32) -> y[n_tok][rows]."""
    cdef const unsigned char[::1] w = np.frombuffer(raw, dtype=np.uint8)
    xa = np.ascontiguousarray(x, dtype=np.float32)
    if xa.ndim != 2 or xa.shape[1] != cols:
        raise ValueError(f"x must have shape (n_tok, {cols}), got {xa.shape}")
    need = _bytes_needed(qtype, cols)
    if rows > 0 and cols > 0 and need is not None and <uint64_t>w.shape[0] < rows * need:
        raise ValueError(f"{w.shape[0]} weight bytes are too few for {rows} x {cols} of type {qtype}")
    cdef int64_t n_tok = xa.shape[0]
    y = np.empty((n_tok, rows), dtype=np.float32)
    cdef const float[:, ::1] xv = xa
    cdef float[:, ::1] yv = y
    cdef const void *wp = <const void *>&w[0] if w.shape[0] else NULL
    cdef const float *xp = &xv[0, 0] if xa.size else NULL
    cdef float *yp = &yv[0, 0] if y.size else NULL
    cdef ds4rt_status st
    with nogil:
        st = _q_matmul_host(qtype, wp, rows, cols, xp, n_tok, yp, n_threads)
    check(st)
    return y


def quant_activation(uint32_t weight_type, x):
    """(q int8[n] or None, scales float32) as the matmul rounds x for weight_type."""
    xa = np.ascontiguousarray(x, dtype=np.float32).ravel()
    cdef int64_t n = xa.shape[0]
    q = np.zeros(n, dtype=np.int8)
    s = np.zeros(n, dtype=np.float32)
    cdef const float[::1] xv = xa
    cdef int8_t[::1] qv = q
    cdef float[::1] sv = s
    check(_q_quantize_activation(weight_type, &xv[0] if n else NULL, n, &qv[0] if n else NULL,
                                 &sv[0] if n else NULL))
    return q, s


def cpu_isa():
    return _q_cpu_isa().decode()


def cpu_isa_supported(str name):
    return bool(_q_cpu_isa_supported(name.encode()))


def cpu_isa_set(str name):
    check(_q_cpu_isa_set(name.encode()))
