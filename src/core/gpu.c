/*
 * gpu.c - the public GPU entry points. With gpu=none they report, as an error, that no GPU
 * backend is compiled in; they never pretend to run.
 */
#include <stdio.h>

#include "ds4rt_testing.h"
#include "internal.h"

#ifdef DS4RT_WITH_GPU
int ds4rt_hip_device_count(int *count, char *err, size_t errlen);
int ds4rt_hip_device_name(int device, char *buf, size_t len, char *err, size_t errlen);
int ds4rt_hip_q8_0_to_f16(const void *blocks, size_t n_blocks, uint16_t *out, char *err,
                          size_t errlen);
#endif

DS4RT_API ds4rt_status ds4rt_gpu_device_count(int *count) {
    if (count == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "gpu_device_count: count is NULL");
    *count = 0;
#ifdef DS4RT_WITH_GPU
    char err[256];
    if (ds4rt_hip_device_count(count, err, sizeof err) != 0)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "gpu_device_count: %s", err);
    return DS4RT_OK;
#else
    return DS4RT_OK;
#endif
}

DS4RT_API ds4rt_status ds4rt_gpu_device_name(int device, char *buf, size_t len) {
    if (buf == NULL || len == 0)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "gpu_device_name: empty buffer");
    buf[0] = '\0';
#ifdef DS4RT_WITH_GPU
    char err[256];
    if (ds4rt_hip_device_name(device, buf, len, err, sizeof err) != 0)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "gpu_device_name(%d): %s", device, err);
    return DS4RT_OK;
#else
    (void)device;
    return ds4rt_fail(DS4RT_ERR_BACKEND, "ds4rt was built without a GPU backend (gpu=none)");
#endif
}

DS4RT_API ds4rt_status ds4rt_gpu_expand_q8_0_f16(const void *q8_blocks, size_t n_blocks,
                                                 uint16_t *f16_out) {
    if ((q8_blocks == NULL || f16_out == NULL) && n_blocks != 0)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "gpu_expand_q8_0_f16: NULL buffer");
#ifdef DS4RT_WITH_GPU
    char err[256];
    if (ds4rt_hip_q8_0_to_f16(q8_blocks, n_blocks, f16_out, err, sizeof err) != 0)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "gpu_expand_q8_0_f16: %s", err);
    return DS4RT_OK;
#else
    return ds4rt_fail(DS4RT_ERR_BACKEND, "ds4rt was built without a GPU backend (gpu=none)");
#endif
}
