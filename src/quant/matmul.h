/*
 * matmul.h - the CPU backend's quantised matrix products, as the model layer calls them.
 *
 * Activations are f32 in and out. Before the dot products each activation row is converted to
 * the type llama.cpp pairs with the weight type (F32->F32, F16->F16, BF16->BF16,
 * Q8_0/Q4_0/MXFP4->Q8_0, K-quants and IQ2_XXS->Q8_K), so results can be compared with
 * llama.cpp's. Row-wise batch invariance: y[t] is bitwise the same whatever n_tok and thread
 * count it is computed with.
 */
#ifndef DS4RT_MATMUL_H
#define DS4RT_MATMUL_H

#include <stdint.h>

#include "ds4rt.h"
#include "threadpool.h"

/* A 2-D weight matrix W[rows][cols] as stored in GGUF (ne0 = cols = in features,
 * ne1 = rows = out features); row r starts at data + r * row_bytes. `layout` (repack.h):
 * DS4RT_LAYOUT_FILE (0) for the file's bytes, else a repacked copy (ds4rt_repack_q8_0_x8). */
typedef struct ds4rt_weight {
    uint32_t type;
    const void *data;
    int64_t rows;
    int64_t cols;
    uint64_t row_bytes;
    uint32_t layout;
} ds4rt_weight;

/* y[t * w->rows + r] = sum_c W[r][c] * x[t * w->cols + c] for t < n_tok.
 * pool may be NULL (everything on the calling thread); a pool serves one call at a time, and
 * must not be used from inside one of its own parallel_for callbacks. n_tok == 0 or rows == 0:
 * nothing to do. w->row_bytes may exceed the packed row size (strided rows). Activations are
 * converted into a scratch buffer owned by the calling thread (grown on demand, freed at thread
 * exit), so concurrent calls from different threads with different pools are fine. Errors:
 * DS4RT_ERR_UNSUPPORTED for a type the CPU backend does not compute, DS4RT_ERR_INVALID_ARGUMENT
 * for NULLs, negative sizes or cols not a multiple of the weight/activation block. See
 * docs/QUANTS.md for the rounding of activations and the exactness guarantees. */
ds4rt_status ds4rt_matmul(ds4rt_pool *pool, const ds4rt_weight *w, const float *x, int64_t n_tok,
                          float *y);

/* One product of a batch: y = W x for n_tok rows of x (as ds4rt_matmul's arguments). */
typedef struct ds4rt_matmul_job {
    ds4rt_weight w;
    const float *x;
    int64_t n_tok;
    float *y;
} ds4rt_matmul_job;

#define DS4RT_MATMUL_MAX_JOBS 64

/* Computes n_jobs (<= DS4RT_MATMUL_MAX_JOBS) independent products in one pool dispatch: the
 * rows of all the weights are split across the threads together, and jobs with the same x
 * pointer, n_tok and activation type convert their activations once. Every y is bitwise what
 * ds4rt_matmul gives for that job alone (the row and column split never changes a result). The
 * jobs' outputs must not overlap each other or any x. All jobs are checked before any runs;
 * errors as ds4rt_matmul's. */
ds4rt_status ds4rt_matmul_batch(ds4rt_pool *pool, const ds4rt_matmul_job *jobs, int n_jobs);

/* Dequantises n elements (a whole number of blocks) of `type` at src into dst, bit-exact with
 * gguf-py's dequantize(). */
ds4rt_status ds4rt_dequantize_row(uint32_t type, const void *src, int64_t n, float *dst);

#endif /* DS4RT_MATMUL_H */
