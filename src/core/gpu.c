/*
 * gpu.c - the public GPU entry points. With gpu=none they report, as an error, that no GPU
 * backend is compiled in; they never pretend to run.
 */
#include <stdio.h>

#include "ds4rt_testing.h"
#include "internal.h"

#ifdef DS4RT_WITH_GPU
#include "gk.h"
#include "q8_expand.h"
#endif

DS4RT_API ds4rt_status ds4rt_gpu_device_count(int *count) {
    if (count == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "gpu_device_count: count is NULL");
    *count = 0;
#ifdef DS4RT_WITH_GPU
    if (ds4rt_gk_device_count(count) != DS4RT_GK_OK)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "gpu_device_count: %s", ds4rt_gk_last_error());
#endif
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_gpu_device_name(int device, char *buf, size_t len) {
    if (buf == NULL || len == 0)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "gpu_device_name: empty buffer");
    buf[0] = '\0';
#ifdef DS4RT_WITH_GPU
    if (ds4rt_gk_device_info(device, buf, len, NULL, NULL, NULL, NULL) != DS4RT_GK_OK)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "gpu_device_name(%d): %s", device, ds4rt_gk_last_error());
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
    if (n_blocks == 0) return DS4RT_OK;
    void *d_in = NULL, *d_out = NULL;
    int st = ds4rt_gk_malloc(&d_in, n_blocks * 34);
    if (st == DS4RT_GK_OK) st = ds4rt_gk_malloc(&d_out, n_blocks * 32 * sizeof(uint16_t));
    if (st == DS4RT_GK_OK) st = ds4rt_gk_memcpy_h2d(d_in, q8_blocks, n_blocks * 34, NULL);
    if (st == DS4RT_GK_OK) st = ds4rt_gk_q8_0_to_f16(d_in, n_blocks, d_out, NULL);
    if (st == DS4RT_GK_OK) st = ds4rt_gk_memcpy_d2h(f16_out, d_out, n_blocks * 32 * sizeof(uint16_t), NULL);
    if (st == DS4RT_GK_OK) st = ds4rt_gk_stream_sync(NULL);
    ds4rt_gk_free(d_in);
    ds4rt_gk_free(d_out);
    if (st != DS4RT_GK_OK)
        return ds4rt_fail(st == DS4RT_GK_ERR_OUT_OF_MEMORY ? DS4RT_ERR_OUT_OF_MEMORY : DS4RT_ERR_BACKEND,
                          "gpu_expand_q8_0_f16: %s", ds4rt_gk_last_error());
    return DS4RT_OK;
#else
    return ds4rt_fail(DS4RT_ERR_BACKEND, "ds4rt was built without a GPU backend (gpu=none)");
#endif
}
