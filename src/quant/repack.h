/*
 * repack.h - weight layouts private to a CPU kernel path, and the repacking into them
 * (docs/QUANTS.md, "The Q8_0 X8 layout").
 *
 * A layout changes where a row's bytes sit, never what they hold: a row keeps its size, its
 * blocks, and every product computed from it keeps its bits (the integer sums of a block are
 * exact in any order). A path that prefers a layout (ds4rt_cpu_kernels.q8_0_layout) gets its
 * weights repacked once, when the CPU backend binds them; every path can multiply every layout.
 */
#ifndef DS4RT_REPACK_H
#define DS4RT_REPACK_H

#include <stdint.h>

#define DS4RT_LAYOUT_FILE 0     /* as stored in the GGUF file */
#define DS4RT_LAYOUT_Q8_0_X8 1  /* Q8_0 rows in groups of 8 blocks, bytes interleaved for 4-byte dot products */
#define DS4RT_LAYOUT_Q8_0_R16 2 /* short Q8_0 rows in panels of 16, a row in each 32-bit lane */

/* Group g of an X8 row (256 columns, 272 bytes, the size of its 8 Q8_0 blocks): the 8 f16
 * scales of blocks 8g..8g+7, then 256 bytes where byte 32k + 4j + m is quant 4k + m of block
 * 8g + j plus 128 (an unsigned byte). So a 32-byte load k holds 4 consecutive quants of each
 * of the 8 blocks, and a 4-byte dot product per 32-bit lane leaves block j's sum in lane j. */
#define DS4RT_X8_GROUP_COLS 256
#define DS4RT_X8_GROUP_BYTES 272

/* A row of 256 G + 128 columns ends, after its G groups, with a half group (128 columns, 136
 * bytes): the 4 f16 scales of blocks 8G..8G+3, then 128 bytes where byte 16k + 4j + m is quant
 * 4k + m of block 8G + j plus 128. Its blocks fall in lanes 0..3, as in the file layout. (The
 * 128-column Q8_0 matrices of the default model, attn_q_b, were the last ones in the file
 * layout, whose kernel costs about twice as much per weight.) */
#define DS4RT_X8_HALF_COLS 128
#define DS4RT_X8_HALF_BYTES 136

/* The R16 layout holds Q8_0 matrices of 128, 256 or 384 columns (one X8 group and/or a half
 * group) whose rows are a multiple of 16, in panels of 16 rows (16 times the row size: row r
 * of the matrix is row r % 16 of panel r / 16, which starts at (r / 16) * 16 * row_bytes). A
 * panel holds, for each block b of the row (group g = b / 8, j = b % 8), a record at
 * ds4rt_r16_record(g, j, half): the 16 rows' f16 scales of block b, then 8 runs of 64 bytes
 * where byte 64k + 4i + m is quant 4k + m of row i plus 128. So one
 * 64-byte load k holds 4 quants of block b of all 16 rows, a 4-byte dot product per 32-bit lane
 * with the activation's 4 quants broadcast leaves row i's block sum in lane i, and the f32
 * terms and the fixed 8-lane reduction run across rows, one vector for 16 results, with no
 * horizontal sums. Activations are the X8 layout's (DS4RT_ACT_Q8_0_X8). Longer rows stay in
 * X8: there the lanes of a row's blocks would have to be walked group by group per lane. */
#define DS4RT_R16_ROWS 16
#define DS4RT_R16_BLOCK_BYTES 544 /* 16 f16 scales + 16 x 32 quants */
#define DS4RT_R16_GROUP_BYTES (8 * DS4RT_R16_BLOCK_BYTES)
#define DS4RT_R16_MAX_COLS 384

/* The byte offset in a panel of the record of block 8g + j (half: g is the row's half group).
 * Within a group the records follow the order in which ds4rt_reduce8 adds the lanes (0, 4, 2,
 * 6, 1, 5, 3, 7; a half group 0, 2, 1, 3), so a kernel that forms the sum lane after lane
 * walks each panel front to back and the hardware prefetchers follow it. */
static inline uint64_t ds4rt_r16_record(int64_t g, int j, int half) {
    static const uint8_t pos8[8] = {0, 4, 2, 6, 1, 5, 3, 7}, pos4[4] = {0, 2, 1, 3};
    return (uint64_t)g * DS4RT_R16_GROUP_BYTES + (uint64_t)(half ? pos4[j] : pos8[j]) * DS4RT_R16_BLOCK_BYTES;
}

/* Nonzero if a matrix of `type` with `rows` rows of `cols` columns can be held in `layout`. */
int ds4rt_layout_fits(uint32_t layout, uint32_t type, int64_t rows, int64_t cols);

/* The layout the active CPU path multiplies `type` fastest in (DS4RT_LAYOUT_FILE if none or
 * if the matrix does not fit it). */
uint32_t ds4rt_cpu_preferred_layout(uint32_t type, int64_t rows, int64_t cols);

/* Rewrites `rows` Q8_0 rows of `cols` columns from the file layout at src into the X8 layout
 * at dst, row r at r * row_bytes in both (bytes past the packed row are copied as they are).
 * src and dst must not overlap. Requires ds4rt_layout_fits(DS4RT_LAYOUT_Q8_0_X8, Q8_0, cols). */
void ds4rt_repack_q8_0_x8(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols, uint64_t row_bytes);

/* The same into the R16 layout. Requires ds4rt_layout_fits(DS4RT_LAYOUT_Q8_0_R16, Q8_0, rows,
 * cols) and row_bytes = the rows' Q8_0 bytes (no padding). */
void ds4rt_repack_q8_0_r16(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols, uint64_t row_bytes);

/* Repacks `rows` rows from the file layout into `layout` (X8 or R16). */
void ds4rt_repack(uint32_t layout, const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols, uint64_t row_bytes);

#endif /* DS4RT_REPACK_H */
