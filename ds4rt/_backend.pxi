# _backend.pxi - the compiled-in compute backends and their capability table (include/ds4rt.h,
# "Compute backends"). Included at the end of _core.pyx; the public wrapper is ds4rt/backends.py.

from libc.stdint cimport int32_t, uint32_t

cdef extern from "ds4rt.h":
    ctypedef struct ds4rt_backend_info:
        size_t size
        char name[32]
        int32_t kind
        int32_t n_devices
        uint32_t ops_version
    size_t ds4rt_backend_count()
    ds4rt_status ds4rt_backend_get_info(size_t index, ds4rt_backend_info *out)
    uint32_t ds4rt_backend_op_count()
    const char *ds4rt_backend_op_name(uint32_t op)
    ds4rt_status ds4rt_backend_supports(int32_t kind, int32_t device, uint32_t op, uint32_t type,
                                        int *supported)


def backend_list():
    """[{name, kind, n_devices, ops_version}] of the compiled-in backends, CPU first."""
    out = []
    cdef ds4rt_backend_info info
    for i in range(ds4rt_backend_count()):
        info.size = sizeof(ds4rt_backend_info)
        check(ds4rt_backend_get_info(i, &info))
        out.append({"name": info.name.decode(), "kind": info.kind, "n_devices": info.n_devices,
                    "ops_version": info.ops_version})
    return out


def backend_op_names():
    """Names of the op table's ops, by op number."""
    return [ds4rt_backend_op_name(i).decode() for i in range(ds4rt_backend_op_count())]


def backend_supports(int32_t kind, int32_t device, uint32_t op, uint32_t qtype):
    """Whether backend `kind` on `device` runs op number `op` with weights of type `qtype`."""
    cdef int ok = 0
    check(ds4rt_backend_supports(kind, device, op, qtype, &ok))
    return bool(ok)
