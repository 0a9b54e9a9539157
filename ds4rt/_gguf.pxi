# GGUF reader binding (included by _core.pyx). The public Python surface is ds4rt.gguf; this
# file wraps the C handle and converts metadata values to Python objects.
#
# Cython-level names carry a gg_ prefix with the C names given as strings, so that other .pxi
# files may declare the same C entities without a clash.

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_FillInfo
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

import os

from ds4rt.errors import NotFoundError, OutOfRangeError


cdef extern from "ds4rt.h":
    ctypedef struct gg_handle "ds4rt_gguf":
        pass

    ctypedef enum gg_type "ds4rt_gguf_type":
        GG_UINT8 "DS4RT_GGUF_UINT8"
        GG_INT8 "DS4RT_GGUF_INT8"
        GG_UINT16 "DS4RT_GGUF_UINT16"
        GG_INT16 "DS4RT_GGUF_INT16"
        GG_UINT32 "DS4RT_GGUF_UINT32"
        GG_INT32 "DS4RT_GGUF_INT32"
        GG_FLOAT32 "DS4RT_GGUF_FLOAT32"
        GG_BOOL "DS4RT_GGUF_BOOL"
        GG_STRING "DS4RT_GGUF_STRING"
        GG_ARRAY "DS4RT_GGUF_ARRAY"
        GG_UINT64 "DS4RT_GGUF_UINT64"
        GG_INT64 "DS4RT_GGUF_INT64"
        GG_FLOAT64 "DS4RT_GGUF_FLOAT64"

    ctypedef struct gg_str "ds4rt_str":
        const char *data
        uint64_t len

    ctypedef struct gg_kv "ds4rt_gguf_kv":
        gg_str key
        gg_type type
        gg_type array_type
        uint64_t array_len
        const void *data
        gg_str str
        uint64_t file_offset
        uint64_t value_offset
        uint64_t value_bytes
        const uint64_t *elem_index

    ctypedef struct gg_tensor "ds4rt_gguf_tensor":
        gg_str name
        uint32_t type
        uint32_t n_dims
        int64_t ne[4]
        uint64_t offset
        uint64_t nbytes
        const void *data
        uint64_t info_offset

    ctypedef struct gg_type_info "ds4rt_type_info":
        const char *name
        uint32_t block_elems
        uint32_t block_bytes
        int compute

    ds4rt_status gg_type_get_info "ds4rt_type_get_info"(uint32_t type, gg_type_info *out)
    ds4rt_status gg_open "ds4rt_gguf_open"(const char *path, gg_handle **out) nogil
    ds4rt_status gg_open_memory "ds4rt_gguf_open_memory"(const void *data, size_t size,
                                                          gg_handle **out) nogil
    void gg_close "ds4rt_gguf_close"(gg_handle *g)
    uint32_t gg_version "ds4rt_gguf_version"(const gg_handle *g)
    uint64_t gg_alignment "ds4rt_gguf_alignment"(const gg_handle *g)
    uint64_t gg_data_offset "ds4rt_gguf_data_offset"(const gg_handle *g)
    uint64_t gg_file_size "ds4rt_gguf_file_size"(const gg_handle *g)
    uint64_t gg_kv_count "ds4rt_gguf_kv_count"(const gg_handle *g)
    const gg_kv *gg_kv_at "ds4rt_gguf_kv_at"(const gg_handle *g, uint64_t i)
    const gg_kv *gg_find_kv "ds4rt_gguf_find_kv"(const gg_handle *g, const char *key)
    ds4rt_status gg_get_u32 "ds4rt_gguf_get_u32"(const gg_handle *g, const char *key,
                                                  uint32_t *out)
    ds4rt_status gg_get_u64 "ds4rt_gguf_get_u64"(const gg_handle *g, const char *key,
                                                  uint64_t *out)
    ds4rt_status gg_get_f32 "ds4rt_gguf_get_f32"(const gg_handle *g, const char *key, float *out)
    ds4rt_status gg_get_bool "ds4rt_gguf_get_bool"(const gg_handle *g, const char *key, int *out)
    ds4rt_status gg_get_str "ds4rt_gguf_get_str"(const gg_handle *g, const char *key,
                                                  gg_str *out)
    ds4rt_status gg_array_str "ds4rt_gguf_array_str"(const gg_kv *kv, uint64_t i, gg_str *out)
    ds4rt_status gg_array_int "ds4rt_gguf_array_int"(const gg_kv *kv, uint64_t i, int64_t *out)
    ds4rt_status gg_array_f64 "ds4rt_gguf_array_f64"(const gg_kv *kv, uint64_t i, double *out)
    ds4rt_status gg_array_sub "ds4rt_gguf_array_sub"(const gg_kv *kv, uint64_t i, gg_kv *out)
    const char *gg_type_name "ds4rt_gguf_type_name"(uint32_t type)
    uint64_t gg_tensor_count "ds4rt_gguf_tensor_count"(const gg_handle *g)
    const gg_tensor *gg_tensor_at "ds4rt_gguf_tensor_at"(const gg_handle *g, uint64_t i)
    const gg_tensor *gg_find_tensor "ds4rt_gguf_find_tensor"(const gg_handle *g,
                                                              const char *name)


# numpy dtypes of the fixed-size element types, for converting whole arrays at once.
_GG_ARRAY_DTYPES = {
    GG_UINT8: (np.dtype("<u1"), 1),
    GG_INT8: (np.dtype("<i1"), 1),
    GG_UINT16: (np.dtype("<u2"), 2),
    GG_INT16: (np.dtype("<i2"), 2),
    GG_UINT32: (np.dtype("<u4"), 4),
    GG_INT32: (np.dtype("<i4"), 4),
    GG_FLOAT32: (np.dtype("<f4"), 4),
    GG_BOOL: (np.dtype("<u1"), 1),
    GG_UINT64: (np.dtype("<u8"), 8),
    GG_INT64: (np.dtype("<i8"), 8),
    GG_FLOAT64: (np.dtype("<f8"), 8),
}


cdef str _gg_text(const char *data, uint64_t n):
    """Bytes from the file as str. Undecodable bytes survive as surrogates (PEP 383), so
    nothing is lost or replaced; encode with errors='surrogateescape' to get them back."""
    if n == 0:
        return ""
    return data[:n].decode("utf-8", "surrogateescape")


def gguf_value_type_name(uint32_t type):
    """Name of a metadata value type id ("UINT32"), or None."""
    cdef const char *n = gg_type_name(type)
    return None if n == NULL else n.decode()


def gguf_tensor_type_name(uint32_t type):
    """ggml name of a tensor type id ("Q8_0"), or None for an unknown id."""
    cdef gg_type_info info
    if gg_type_get_info(type, &info) != DS4RT_OK:
        ds4rt_clear_error()
        return None
    return info.name.decode()


cdef object _gg_scalar(gg_type type, const void *p):
    cdef uint8_t u8
    cdef int8_t i8
    cdef uint16_t u16
    cdef int16_t i16
    cdef uint32_t u32
    cdef int32_t i32
    cdef uint64_t u64
    cdef int64_t i64
    cdef float f32
    cdef double f64
    # memcpy: values in the file are not aligned.
    if type == GG_UINT8:
        memcpy(&u8, p, 1)
        return u8
    if type == GG_INT8:
        memcpy(&i8, p, 1)
        return i8
    if type == GG_UINT16:
        memcpy(&u16, p, 2)
        return u16
    if type == GG_INT16:
        memcpy(&i16, p, 2)
        return i16
    if type == GG_UINT32:
        memcpy(&u32, p, 4)
        return u32
    if type == GG_INT32:
        memcpy(&i32, p, 4)
        return i32
    if type == GG_FLOAT32:
        memcpy(&f32, p, 4)
        return <double>f32
    if type == GG_BOOL:
        memcpy(&u8, p, 1)
        return u8 != 0
    if type == GG_UINT64:
        memcpy(&u64, p, 8)
        return u64
    if type == GG_INT64:
        memcpy(&i64, p, 8)
        return i64
    if type == GG_FLOAT64:
        memcpy(&f64, p, 8)
        return f64
    raise ValueError(f"not a scalar GGUF type: {type}")


cdef list _gg_array(const gg_kv *kv):
    cdef uint64_t i, n = kv.array_len
    cdef gg_str s
    cdef gg_kv sub
    if kv.array_type == GG_STRING:
        out = []
        for i in range(n):
            check(gg_array_str(kv, i, &s))
            out.append(_gg_text(s.data, s.len))
        return out
    if kv.array_type == GG_ARRAY:
        out = []
        for i in range(n):
            check(gg_array_sub(kv, i, &sub))
            out.append(_gg_array(&sub))
        return out
    dtype, size = _GG_ARRAY_DTYPES[kv.array_type]
    if n == 0:
        return []
    arr = np.frombuffer((<const char *>kv.data)[:n * size], dtype=dtype)
    if kv.array_type == GG_BOOL:
        arr = arr != 0
    return arr.tolist()


cdef object _gg_value(const gg_kv *kv):
    if kv.type == GG_STRING:
        return _gg_text(kv.str.data, kv.str.len)
    if kv.type == GG_ARRAY:
        return _gg_array(kv)
    return _gg_scalar(kv.type, kv.data)


cdef str _gg_type_label(const gg_kv *kv):
    """"UINT32", "ARRAY[STRING]"; for arrays of arrays the element type of the first inner
    array is shown ("ARRAY[ARRAY[INT32]]"); inner arrays may differ from each other."""
    cdef gg_kv sub
    name = gguf_value_type_name(kv.type)
    if kv.type != GG_ARRAY:
        return name
    if kv.array_type == GG_ARRAY and kv.array_len > 0:
        check(gg_array_sub(kv, 0, &sub))
        return f"ARRAY[{_gg_type_label(&sub)}]"
    return f"ARRAY[{gguf_value_type_name(kv.array_type)}]"


cdef class _GGUFView:
    """A read-only buffer over bytes of an open GGUF mapping. It keeps its handle's mapping
    alive: closing the handle while views exist defers the unmapping until the last one dies."""

    cdef _GGUFHandle owner
    cdef const char *ptr
    cdef Py_ssize_t size

    def __getbuffer__(self, Py_buffer *buf, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("GGUF tensor data is read-only")
        PyBuffer_FillInfo(buf, self, <void *>self.ptr, self.size, 1, flags)

    def __releasebuffer__(self, Py_buffer *buf):
        pass

    def __dealloc__(self):
        if self.owner is not None:
            self.owner.live_views -= 1
            self.owner._release_if_closed()


cdef class _GGUFHandle:
    """An open GGUF file (wraps ds4rt_gguf). Use ds4rt.gguf.GGUFFile instead."""

    cdef gg_handle *g
    cdef bint closed
    cdef Py_ssize_t live_views
    cdef object image  # the bytes object a memory image was opened from (kept alive)
    cdef readonly object path

    def __cinit__(self):
        self.g = NULL
        self.closed = False
        self.live_views = 0

    def __dealloc__(self):
        if self.g != NULL:
            gg_close(self.g)
            self.g = NULL

    cdef void _release_if_closed(self):
        if self.closed and self.live_views == 0 and self.g != NULL:
            gg_close(self.g)
            self.g = NULL

    cdef gg_handle *_h(self) except NULL:
        if self.closed or self.g == NULL:
            raise ValueError("I/O operation on a closed GGUF file")
        return self.g

    def close(self):
        """Closes the file. The mapping stays until no tensor view made from it is alive."""
        self.closed = True
        self._release_if_closed()

    @property
    def is_closed(self):
        return self.closed

    @property
    def version(self):
        return gg_version(self._h())

    @property
    def alignment(self):
        return gg_alignment(self._h())

    @property
    def data_offset(self):
        return gg_data_offset(self._h())

    @property
    def file_size(self):
        return gg_file_size(self._h())

    @property
    def kv_count(self):
        return gg_kv_count(self._h())

    @property
    def tensor_count(self):
        return gg_tensor_count(self._h())

    cdef const gg_kv *_kv(self, key) except NULL:
        cdef bytes k = key.encode("utf-8", "surrogateescape")
        cdef const gg_kv *kv = gg_find_kv(self._h(), k)
        if kv == NULL:
            raise NotFoundError(f"metadata key '{key}' not found")
        return kv

    def keys(self):
        """Metadata keys in file order."""
        cdef gg_handle *g = self._h()
        cdef const gg_kv *kv
        cdef uint64_t i
        out = []
        for i in range(gg_kv_count(g)):
            kv = gg_kv_at(g, i)
            out.append(_gg_text(kv.key.data, kv.key.len))
        return out

    def metadata(self, max_array=None):
        """{key: value} in file order. Arrays are lists (nested arrays nested lists). With
        max_array, arrays longer than that are cut to their first max_array elements, and the
        second return value maps each cut key to its full length."""
        cdef gg_handle *g = self._h()
        cdef const gg_kv *kv
        cdef gg_kv head
        cdef uint64_t i
        values = {}
        cut = {}
        for i in range(gg_kv_count(g)):
            kv = gg_kv_at(g, i)
            key = _gg_text(kv.key.data, kv.key.len)
            if max_array is not None and kv.type == GG_ARRAY and kv.array_len > max_array:
                head = kv[0]
                head.array_len = max_array
                values[key] = _gg_array(&head)
                cut[key] = kv.array_len
            else:
                values[key] = _gg_value(kv)
        return (values, cut) if max_array is not None else values

    def metadata_types(self):
        """{key: type label} in file order ("UINT32", "STRING", "ARRAY[STRING]", ...)."""
        cdef gg_handle *g = self._h()
        cdef const gg_kv *kv
        cdef uint64_t i
        out = {}
        for i in range(gg_kv_count(g)):
            kv = gg_kv_at(g, i)
            out[_gg_text(kv.key.data, kv.key.len)] = _gg_type_label(kv)
        return out

    def kv_record(self, key):
        """Where a key's record and value lie: dict of type, array_type, array_len,
        file_offset, value_offset, value_bytes."""
        cdef const gg_kv *kv = self._kv(key)
        return {
            "type": gguf_value_type_name(kv.type),
            "array_type": gguf_value_type_name(kv.array_type) if kv.type == GG_ARRAY else None,
            "array_len": kv.array_len if kv.type == GG_ARRAY else None,
            "file_offset": kv.file_offset,
            "value_offset": kv.value_offset,
            "value_bytes": kv.value_bytes,
        }

    def get(self, key):
        """The value of one key, converted like metadata()."""
        return _gg_value(self._kv(key))

    # Typed getters: the C library's own leniency rules (see ds4rt.h).
    def get_u32(self, key):
        cdef uint32_t v
        check(gg_get_u32(self._h(), key.encode(), &v))
        return v

    def get_u64(self, key):
        cdef uint64_t v
        check(gg_get_u64(self._h(), key.encode(), &v))
        return v

    def get_f32(self, key):
        cdef float v
        check(gg_get_f32(self._h(), key.encode(), &v))
        return v

    def get_bool(self, key):
        cdef int v
        check(gg_get_bool(self._h(), key.encode(), &v))
        return bool(v)

    def get_str(self, key):
        cdef gg_str v
        check(gg_get_str(self._h(), key.encode(), &v))
        return _gg_text(v.data, v.len)

    def array_str(self, key, uint64_t i):
        cdef gg_str v
        check(gg_array_str(self._kv(key), i, &v))
        return _gg_text(v.data, v.len)

    def array_int(self, key, uint64_t i):
        cdef int64_t v
        check(gg_array_int(self._kv(key), i, &v))
        return v

    def array_f64(self, key, uint64_t i):
        cdef double v
        check(gg_array_f64(self._kv(key), i, &v))
        return v

    def array_sub(self, key, path):
        """The nested array reached by following indices `path` from a key's array (each step
        through ds4rt_gguf_array_sub), converted to a list."""
        cdef gg_kv cur = self._kv(key)[0]
        cdef gg_kv nxt
        for i in path:
            check(gg_array_sub(&cur, i, &nxt))
            cur = nxt
        return _gg_array(&cur)

    cdef dict _tensor_dict(self, const gg_tensor *t):
        cdef gg_type_info info
        check(gg_type_get_info(t.type, &info))
        return {
            "name": _gg_text(t.name.data, t.name.len),
            "type": info.name.decode(),
            "type_id": t.type,
            "shape": [t.ne[d] for d in range(t.n_dims)],
            "offset": t.offset,
            "nbytes": t.nbytes,
        }

    def tensors(self):
        """Tensor table in file order: dicts of name, type, type_id, shape (ne order: ne[0]
        first, n_dims entries), offset (from the data section start), nbytes."""
        cdef gg_handle *g = self._h()
        cdef uint64_t i
        return [self._tensor_dict(gg_tensor_at(g, i)) for i in range(gg_tensor_count(g))]

    cdef const gg_tensor *_tensor(self, name_or_index) except NULL:
        cdef gg_handle *g = self._h()
        cdef const gg_tensor *t
        cdef bytes k
        if isinstance(name_or_index, int):
            if name_or_index < 0 or name_or_index >= <object>gg_tensor_count(g):
                raise OutOfRangeError(f"tensor index {name_or_index} out of range "
                                      f"({gg_tensor_count(g)} tensors)")
            return gg_tensor_at(g, name_or_index)
        k = name_or_index.encode("utf-8", "surrogateescape")
        t = gg_find_tensor(g, k)
        if t == NULL:
            raise NotFoundError(f"tensor '{name_or_index}' not found")
        return t

    def tensor(self, name_or_index):
        """One tensor's dict, by name or file-order index."""
        return self._tensor_dict(self._tensor(name_or_index))

    def tensor_data(self, name_or_index):
        """The tensor's raw bytes as a read-only numpy uint8 array viewing the mapping (no
        copy). The view keeps the mapping alive after close()."""
        cdef const gg_tensor *t = self._tensor(name_or_index)
        cdef _GGUFView v = _GGUFView.__new__(_GGUFView)
        v.owner = self
        v.ptr = <const char *>t.data
        v.size = <Py_ssize_t>t.nbytes
        self.live_views += 1
        return np.frombuffer(v, dtype=np.uint8)


def gguf_open(path):
    """Opens and validates a GGUF file; raises the ds4rt error of the failing check."""
    cdef bytes p = os.fsencode(path)
    cdef const char *cp = p
    cdef gg_handle *g = NULL
    cdef ds4rt_status st
    with nogil:
        st = gg_open(cp, &g)
    check(st)
    h = _GGUFHandle.__new__(_GGUFHandle)
    (<_GGUFHandle>h).g = g
    (<_GGUFHandle>h).path = os.fspath(path)
    return h


def gguf_open_bytes(data):
    """Opens and validates a GGUF image held in a bytes object (ds4rt_gguf_open_memory); the
    handle keeps the object alive."""
    cdef bytes image = bytes(data)
    cdef const char *p = image
    cdef size_t n = len(image)
    cdef gg_handle *g = NULL
    cdef ds4rt_status st
    with nogil:
        st = gg_open_memory(p, n, &g)
    check(st)
    h = _GGUFHandle.__new__(_GGUFHandle)
    (<_GGUFHandle>h).g = g
    (<_GGUFHandle>h).image = image
    (<_GGUFHandle>h).path = "<memory>"
    return h
