/* backend_api.c - the public backend queries: the registry of compiled-in backends and their
 * capability table (src/backend/backend.h). */
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "backend.h"
#include "internal.h"

static const ds4rt_struct_desc BACKEND_INFO = {
    .name = "ds4rt_backend_info",
    .size = sizeof(ds4rt_backend_info),
    .min_size = sizeof(ds4rt_backend_info), /* first published in 1.1 */
};

DS4RT_API size_t ds4rt_backend_count(void) {
    const ds4rt_backend_entry *const *reg;
    return ds4rt_backend_registry(&reg);
}

DS4RT_API ds4rt_status ds4rt_backend_get_info(size_t index, ds4rt_backend_info *out) {
    if (out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "backend_get_info: NULL argument");
    const ds4rt_backend_entry *const *reg;
    size_t n = ds4rt_backend_registry(&reg);
    if (index >= n) return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "backend %zu: %zu are compiled in", index, n);
    ds4rt_backend_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    snprintf(info.name, sizeof info.name, "%s", reg[index]->name);
    info.kind = (int32_t)reg[index]->kind;
    info.n_devices = reg[index]->device_count();
    info.ops_version = DS4RT_BACKEND_OPS_VERSION;
    ds4rt_status st = ds4rt_struct_write(&BACKEND_INFO, &info, out);
    return st == DS4RT_OK ? st : ds4rt_fail_context(st, "backend_get_info");
}

DS4RT_API uint32_t ds4rt_backend_op_count(void) { return DS4RT_OP_COUNT; }

DS4RT_API const char *ds4rt_backend_op_name(uint32_t op) { return op < DS4RT_OP_COUNT ? ds4rt_op_name(op) : NULL; }

DS4RT_API ds4rt_status ds4rt_backend_supports(int32_t kind, int32_t device, uint32_t op, uint32_t type,
                                              int *supported) {
    if (supported == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "backend_supports: NULL argument");
    *supported = 0;
    if (op >= DS4RT_OP_COUNT)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "backend_supports: op %u (there are %d)", op, DS4RT_OP_COUNT);
    if (kind == DS4RT_BACKEND_AUTO)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "backend_supports: ask a concrete backend, not auto");
    ds4rt_backend *be;
    ds4rt_status st = ds4rt_backend_open((ds4rt_bkind)kind, device, 1, &be);
    if (st != DS4RT_OK) return st;
    *supported = ds4rt_backend_get_ops(be)->supports(be, (ds4rt_op)op, type) ? 1 : 0;
    ds4rt_backend_close(be);
    return DS4RT_OK;
}
