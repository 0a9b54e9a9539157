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

#define DS4RT_LAYOUT_FILE 0    /* as stored in the GGUF file */
#define DS4RT_LAYOUT_Q8_0_X8 1 /* Q8_0 rows in groups of 8 blocks, bytes interleaved for 4-byte dot products */

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

/* Nonzero if a matrix of `type` with `cols` columns can be held in `layout`. */
int ds4rt_layout_fits(uint32_t layout, uint32_t type, int64_t cols);

/* The layout the active CPU path multiplies `type` fastest in (DS4RT_LAYOUT_FILE if none or
 * if the matrix does not fit it). */
uint32_t ds4rt_cpu_preferred_layout(uint32_t type, int64_t cols);

/* Rewrites `rows` Q8_0 rows of `cols` columns from the file layout at src into the X8 layout
 * at dst, row r at r * row_bytes in both (bytes past the packed row are copied as they are).
 * src and dst must not overlap. Requires ds4rt_layout_fits(DS4RT_LAYOUT_Q8_0_X8, Q8_0, cols). */
void ds4rt_repack_q8_0_x8(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols, uint64_t row_bytes);

#endif /* DS4RT_REPACK_H */
