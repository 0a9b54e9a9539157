/* repack.c - the Q8_0 X8 and R16 layouts (repack.h). */
#include "repack.h"

#include <string.h>

#include "ds4rt.h"
#include "kernels.h"

int ds4rt_layout_fits(uint32_t layout, uint32_t type, int64_t rows, int64_t cols) {
    if (layout == DS4RT_LAYOUT_FILE) return 1;
    if (type != DS4RT_TYPE_Q8_0 || cols <= 0 || cols % DS4RT_X8_HALF_COLS != 0) return 0;
    if (layout == DS4RT_LAYOUT_Q8_0_X8) return 1;
    return layout == DS4RT_LAYOUT_Q8_0_R16 && cols <= DS4RT_R16_MAX_COLS && rows > 0 && rows % DS4RT_R16_ROWS == 0;
}

uint32_t ds4rt_cpu_preferred_layout(uint32_t type, int64_t rows, int64_t cols) {
    if (type != DS4RT_TYPE_Q8_0) return DS4RT_LAYOUT_FILE;
    const ds4rt_cpu_kernels *k = ds4rt_cpu_active();
    if (k->q8_0_r16 && ds4rt_layout_fits(DS4RT_LAYOUT_Q8_0_R16, type, rows, cols)) return DS4RT_LAYOUT_Q8_0_R16;
    return ds4rt_layout_fits(k->q8_0_layout, type, rows, cols) ? k->q8_0_layout : DS4RT_LAYOUT_FILE;
}

/* One group of nb = 8 Q8_0 blocks (34 bytes each) -> 8 scales + 256 interleaved biased quants,
 * or a half group of nb = 4 -> 4 scales + 128. */
static void repack_group_x8(const uint8_t *src, uint8_t *dst, int nb) {
    for (int j = 0; j < nb; j++) memcpy(dst + 2 * j, src + 34 * j, 2);
    uint8_t *q = dst + 2 * nb;
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < nb; j++)
            for (int m = 0; m < 4; m++) q[4 * nb * k + 4 * j + m] = (uint8_t)(src[34 * j + 2 + 4 * k + m] ^ 0x80u);
}

void ds4rt_repack_q8_0_x8(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols, uint64_t row_bytes) {
    const int64_t groups = cols / DS4RT_X8_GROUP_COLS;
    const int half = cols % DS4RT_X8_GROUP_COLS != 0;
    const uint64_t packed = (uint64_t)groups * DS4RT_X8_GROUP_BYTES + (half ? DS4RT_X8_HALF_BYTES : 0);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *s = src + (uint64_t)r * row_bytes;
        uint8_t *d = dst + (uint64_t)r * row_bytes;
        for (int64_t g = 0; g < groups; g++)
            repack_group_x8(s + g * DS4RT_X8_GROUP_BYTES, d + g * DS4RT_X8_GROUP_BYTES, 8);
        if (half) repack_group_x8(s + groups * DS4RT_X8_GROUP_BYTES, d + groups * DS4RT_X8_GROUP_BYTES, 4);
        if (row_bytes > packed) memcpy(d + packed, s + packed, row_bytes - packed);
    }
}

void ds4rt_repack_q8_0_r16(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols, uint64_t row_bytes) {
    const int64_t nb = cols / 32, full = cols / DS4RT_X8_GROUP_COLS;
    for (int64_t p = 0; p < rows / DS4RT_R16_ROWS; p++) {
        uint8_t *panel = dst + (uint64_t)p * DS4RT_R16_ROWS * row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *rec = panel + ds4rt_r16_record(b / 8, (int)(b % 8), b / 8 >= full);
            for (int i = 0; i < DS4RT_R16_ROWS; i++) {
                const uint8_t *blk = src + (uint64_t)(p * DS4RT_R16_ROWS + i) * row_bytes + 34 * b;
                memcpy(rec + 2 * i, blk, 2);
                for (int k = 0; k < 8; k++)
                    for (int m = 0; m < 4; m++) rec[32 + 64 * k + 4 * i + m] = (uint8_t)(blk[2 + 4 * k + m] ^ 0x80u);
            }
        }
    }
}

void ds4rt_repack(uint32_t layout, const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols, uint64_t row_bytes) {
    if (layout == DS4RT_LAYOUT_Q8_0_R16) ds4rt_repack_q8_0_r16(src, dst, rows, cols, row_bytes);
    else ds4rt_repack_q8_0_x8(src, dst, rows, cols, row_bytes);
}
