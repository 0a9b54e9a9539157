/*
 * matmul.c - y = W x for quantised W (see matmul.h).
 *
 * 1. Each activation row is converted once (act_quant.c) into a per-thread scratch buffer that
 *    grows as needed (no allocation per call once warm).
 *    ds4rt_matmul_batch does several products in one dispatch (the experts of a MoE layer):
 *    jobs that read the same rows as the same activation type share one conversion, and the
 *    rows of all jobs form one range split across the pool, so no thread idles between them.
 * 2. The rows of W are split across the pool. A thread takes its rows in blocks of ROW_BLOCK and
 *    the tokens in blocks of TOK_BLOCK, and walks the columns in chunks sized so that the chunk
 *    of every token's activations stays in L1 while the block's rows use it; within a chunk each
 *    weight row is decoded once per tile of DS4RT_TILE_TOK tokens. Each (row, token) pair keeps
 *    its lane accumulators across chunks and is reduced into y at the end.
 *    Where a row fits one chunk and the path has a whole-row kernel for it (kernels.h), that
 *    kernel takes the thread's rows and a token block in one call and writes y itself.
 * Each lane receives the terms of its own blocks in column order whatever the chunking, tiling
 * or thread split, so none of them changes any bit of y (see kernels.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ds4rt_testing.h"
#include "internal.h"
#include "kernels.h"
#include "matmul.h"
#include "matmul_profile.h"
#include "qtypes.h"
#include "repack.h"

/* ---------------- per-thread scratch ---------------- */

typedef struct {
    uint8_t *buf;
    size_t cap;
} scratch_buf;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *p) {
    scratch_buf *s = p;
    free(s->buf);
    free(s);
}

static void scratch_init(void) { scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

/* A 64-byte aligned buffer of at least `bytes`, owned by the calling thread. */
static uint8_t *scratch_get(size_t bytes) {
    pthread_once(&scratch_once, scratch_init);
    if (!scratch_key_ok) return NULL;
    scratch_buf *s = pthread_getspecific(scratch_key);
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        if (s == NULL || pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->cap < bytes) {
        size_t cap = s->cap ? s->cap : 65536;
        while (cap < bytes) cap *= 2;
        void *nb = NULL;
        if (posix_memalign(&nb, 64, cap) != 0) return NULL;
        free(s->buf);
        s->buf = nb;
        s->cap = cap;
    }
    return s->buf;
}

/* ---------------- the product ---------------- */

#define TOK_BLOCK 16
#define ROW_BLOCK_Q 16 /* rows per block for 8-lane (block type) kernels */
#define ROW_BLOCK_F 4  /* ... and for 32-lane (float type) kernels: the same 8 KiB of lanes */
#define L1_ACT_BUDGET (24 * 1024)

typedef struct {
    ds4rt_dot_fn dot;
    ds4rt_rows_fn rows_fn; /* whole rows at once (kernels.h), or NULL */
    int64_t panel;         /* rows a rows_fn call must start at a multiple of (R16: 16), else 1 */
    int n_lanes;
    const uint8_t *w;
    uint64_t row_bytes;
    int64_t rows;
    const ds4rt_act *act;
    int64_t n_tok;
    int64_t k_chunk;
    float *y;
} mm_ctx;

static void rows_worker(void *vctx, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const mm_ctx *c = vctx;
    const int nl = c->n_lanes;
    const int64_t row_block = nl == DS4RT_QLANES ? ROW_BLOCK_Q : ROW_BLOCK_F;
    const int64_t cols = c->act->cols;
    _Alignas(64) float lanes[ROW_BLOCK_Q * TOK_BLOCK * DS4RT_QLANES];
    _Static_assert(ROW_BLOCK_F * TOK_BLOCK * DS4RT_FLANES <= sizeof lanes / sizeof lanes[0], "lane buffer");
    if (c->panel > 1) { /* whole panels: each one by the chunk that holds its first row */
        r0 = (r0 + c->panel - 1) / c->panel * c->panel;
        r1 = (r1 + c->panel - 1) / c->panel * c->panel;
        if (r1 > c->rows) r1 = c->rows;
        if (r0 >= r1) return;
    }
    for (int64_t tb = 0; tb < c->n_tok; tb += TOK_BLOCK) {
        const int64_t nt = c->n_tok - tb < TOK_BLOCK ? c->n_tok - tb : TOK_BLOCK;
        if (c->rows_fn != NULL) {
            c->rows_fn(c->w + (size_t)r0 * c->row_bytes, c->row_bytes, r1 - r0, c->act, tb, nt,
                       c->y + tb * c->rows + r0, c->rows);
            continue;
        }
        for (int64_t rb = r0; rb < r1; rb += row_block) {
            const int64_t nr = r1 - rb < row_block ? r1 - rb : row_block;
            memset(lanes, 0, sizeof(float) * (size_t)(nr * nt * nl));
            for (int64_t k0 = 0; k0 < cols; k0 += c->k_chunk) {
                const int64_t k1 = cols - k0 < c->k_chunk ? cols : k0 + c->k_chunk;
                for (int64_t r = 0; r < nr; r++) {
                    const uint8_t *wr = c->w + (size_t)(rb + r) * c->row_bytes;
                    for (int64_t t = 0; t < nt; t += DS4RT_TILE_TOK) {
                        const int n = (int)(nt - t < DS4RT_TILE_TOK ? nt - t : DS4RT_TILE_TOK);
                        c->dot(wr, c->act, tb + t, n, k0, k1, lanes + (r * nt + t) * nl, nl);
                    }
                }
            }
            for (int64_t r = 0; r < nr; r++)
                for (int64_t t = 0; t < nt; t++) {
                    const float *l = lanes + (r * nt + t) * nl;
                    c->y[(tb + t) * c->rows + rb + r] = nl == DS4RT_QLANES ? ds4rt_reduce8(l) : ds4rt_reduce32(l);
                }
        }
    }
}

/* Checks the arguments shared by ds4rt_matmul and the host entry point. */
static ds4rt_status check_shape(uint32_t type, int64_t rows, int64_t cols, int64_t n_tok, uint64_t *row_bytes) {
    const ds4rt_type_info *info = ds4rt_type_lookup(type);
    if (info == NULL) return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "matmul: unknown tensor type id %u", type);
    if (!ds4rt_type_is_computable(type))
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "matmul: weight type %s is not supported by the CPU backend",
                          info->name);
    if (rows < 0 || cols <= 0 || n_tok < 0)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "matmul: bad shape rows=%lld cols=%lld n_tok=%lld",
                          (long long)rows, (long long)cols, (long long)n_tok);
    int ok;
    const uint32_t at = ds4rt_act_type_for(type, &ok);
    const int64_t blk = at == DS4RT_TYPE_Q8_K ? DS4RT_QK : at == DS4RT_TYPE_Q8_0 ? DS4RT_QK0 : 1;
    if (cols % blk != 0 || cols % (int64_t)info->block_elems != 0)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "matmul: cols=%lld is not a multiple of the %s block (%lld)",
                          (long long)cols, info->name, (long long)(blk > info->block_elems ? blk : info->block_elems));
    if (cols > ((int64_t)1 << 40) || rows > ((int64_t)1 << 40) || n_tok > ((int64_t)1 << 40))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "matmul: dimensions too large");
    *row_bytes = (uint64_t)(cols / info->block_elems) * info->block_bytes;
    return DS4RT_OK;
}

static ds4rt_status check_job(const ds4rt_matmul_job *j) {
    const ds4rt_weight *w = &j->w;
    uint64_t need = 0;
    ds4rt_status st = check_shape(w->type, w->rows, w->cols, j->n_tok, &need);
    if (st != DS4RT_OK) return st;
    if (!ds4rt_layout_fits(w->layout, w->type, w->rows, w->cols))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                          "matmul: layout %u does not hold %s weights of %lld rows of %lld columns", w->layout,
                          ds4rt_type_lookup(w->type)->name, (long long)w->rows, (long long)w->cols);
    if (w->layout == DS4RT_LAYOUT_Q8_0_R16 && w->row_bytes != need)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "matmul: R16 rows of %llu bytes (its panels hold %llu a row)",
                          (unsigned long long)w->row_bytes, (unsigned long long)need);
    if (w->row_bytes < need)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "matmul: row_bytes %llu < %llu needed by %lld columns",
                          (unsigned long long)w->row_bytes, (unsigned long long)need, (long long)w->cols);
    if (j->n_tok == 0 || w->rows == 0) return DS4RT_OK;
    if (w->data == NULL || j->x == NULL || j->y == NULL)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "matmul: %s is NULL",
                          w->data == NULL ? "weight data" : j->x == NULL ? "x" : "y");
    return DS4RT_OK;
}

/* The activation rows to convert: one per distinct (x, n_tok, act type, cols) of a batch. */
typedef struct {
    ds4rt_act act[DS4RT_MATMUL_MAX_JOBS];
    const float *x[DS4RT_MATMUL_MAX_JOBS];
    int64_t first_item[DS4RT_MATMUL_MAX_JOBS + 1]; /* prefix sums of the rows to convert */
    int n;
} act_set;

static void quant_worker(void *vctx, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const act_set *as = vctx;
    int a = 0;
    for (int64_t i = i0; i < i1; i++) {
        while (as->first_item[a + 1] <= i) a++;
        const int64_t t = i - as->first_item[a];
        ds4rt_act_quantize_row(&as->act[a], t, as->x[a] + t * as->act[a].cols);
    }
}

typedef struct {
    mm_ctx c[DS4RT_MATMUL_MAX_JOBS];
    int64_t first_row[DS4RT_MATMUL_MAX_JOBS + 1]; /* prefix sums of the jobs' rows */
    int n;
} mm_batch;

/* Rows [r0, r1) of the concatenation of the jobs' weight rows. */
static void batch_rows_worker(void *vctx, int64_t r0, int64_t r1, int thread) {
    const mm_batch *b = vctx;
    int j = 0;
    while (b->first_row[j + 1] <= r0) j++;
    for (; j < b->n && b->first_row[j] < r1; j++) {
        const int64_t lo = r0 > b->first_row[j] ? r0 - b->first_row[j] : 0;
        const int64_t hi = (r1 < b->first_row[j + 1] ? r1 : b->first_row[j + 1]) - b->first_row[j];
        if (hi > lo) rows_worker((void *)&b->c[j], lo, hi, thread);
    }
}

ds4rt_status ds4rt_matmul_batch(ds4rt_pool *pool, const ds4rt_matmul_job *jobs, int n_jobs) {
    if (n_jobs < 0 || n_jobs > DS4RT_MATMUL_MAX_JOBS || (n_jobs > 0 && jobs == NULL))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "matmul_batch: %d jobs (at most %d)", n_jobs,
                          DS4RT_MATMUL_MAX_JOBS);
    for (int j = 0; j < n_jobs; j++) {
        const ds4rt_status st = check_job(&jobs[j]);
        if (st != DS4RT_OK) return st;
    }

    const ds4rt_cpu_kernels *k = ds4rt_cpu_active();
    const int prof = ds4rt_mmprof_on();
    const int64_t t_start = prof ? ds4rt_mmprof_now() : 0;
    uint32_t job_type[DS4RT_MATMUL_MAX_JOBS];
    act_set as;
    mm_batch b;
    as.n = 0;
    as.first_item[0] = 0;
    b.n = 0;
    int act_of[DS4RT_MATMUL_MAX_JOBS];
    uint64_t act_bytes = 0;
    size_t act_off[DS4RT_MATMUL_MAX_JOBS];
    for (int j = 0; j < n_jobs; j++) {
        const ds4rt_matmul_job *jb = &jobs[j];
        if (jb->n_tok == 0 || jb->w.rows == 0) continue;
        const int x8 = jb->w.layout == DS4RT_LAYOUT_Q8_0_X8, r16 = jb->w.layout == DS4RT_LAYOUT_Q8_0_R16;
        /* R16 matrices go through rows_q8_0_r16 only (their rows fit one chunk: kernels.h) */
        const ds4rt_dot_fn dot = x8 || r16 ? k->dot_q8_0_x8 : k->dot[jb->w.type];
        if (dot == NULL || (r16 && k->rows_q8_0_r16 == NULL))
            return ds4rt_fail(DS4RT_ERR_INTERNAL, "matmul: CPU path %s has no kernel for a computable type", k->name);
        int ok;
        ds4rt_act act;
        ds4rt_act_layout(ds4rt_act_type_for_layout(jb->w.type, jb->w.layout, &ok), jb->w.cols, &act);
        /* jobs reading the same rows as the same activation type convert them once */
        int a = 0;
        while (a < as.n && !(as.x[a] == jb->x && as.act[a].type == act.type && as.act[a].cols == act.cols &&
                             as.first_item[a + 1] - as.first_item[a] == jb->n_tok))
            a++;
        if (a == as.n) {
            uint64_t bytes;
            if (!ds4rt_mul_u64((uint64_t)jb->n_tok, act.stride, &bytes) || bytes > SIZE_MAX / 4 ||
                act_bytes > SIZE_MAX / 4)
                return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "matmul: activation buffer too large");
            act_off[a] = (size_t)act_bytes;
            act_bytes += (bytes + 63) / 64 * 64;
            as.act[a] = act;
            as.x[a] = jb->x;
            as.first_item[a + 1] = as.first_item[a] + jb->n_tok;
            as.n++;
        }
        act_of[b.n] = a;
        job_type[b.n] = jb->w.type;
        b.c[b.n] = (mm_ctx){
            .dot = dot,
            .rows_fn = r16 ? k->rows_q8_0_r16 : x8 ? k->rows_q8_0_x8 : k->rows[jb->w.type],
            .panel = r16 ? DS4RT_R16_ROWS : 1,
            .n_lanes = ds4rt_lanes_for(jb->w.type),
            .w = jb->w.data,
            .row_bytes = jb->w.row_bytes,
            .rows = jb->w.rows,
            .n_tok = jb->n_tok,
            .y = jb->y,
        };
        b.n++;
    }
    if (b.n == 0) return DS4RT_OK;
    uint8_t *base = scratch_get((size_t)act_bytes);
    if (base == NULL)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "matmul: cannot allocate %llu bytes of activation scratch",
                          (unsigned long long)act_bytes);
    int64_t elems = 0;
    for (int a = 0; a < as.n; a++) {
        as.act[a].base = base + act_off[a];
        elems += (as.first_item[a + 1] - as.first_item[a]) * as.act[a].cols;
    }

    /* convert activations: in parallel only when there is enough of them */
    const int64_t items = as.first_item[as.n];
    if (pool != NULL && items >= 4 && elems >= 32768)
        ds4rt_pool_parallel_for(pool, items, 1, quant_worker, &as);
    else
        quant_worker(&as, 0, items, 0);
    const int64_t t_quant = prof ? ds4rt_mmprof_now() : 0;

    double work = 0.0; /* weight bytes x tokens */
    b.first_row[0] = 0;
    for (int j = 0; j < b.n; j++) {
        mm_ctx *c = &b.c[j];
        c->act = &as.act[act_of[j]];
        /* columns per chunk: a chunk of one token block's activations fits the L1 budget */
        const int64_t cols = c->act->cols;
        const int64_t ntb = c->n_tok < TOK_BLOCK ? c->n_tok : TOK_BLOCK;
        const double act_per_col = (double)c->act->stride / (double)cols; /* bytes, scales included */
        int64_t kc = (int64_t)(L1_ACT_BUDGET / (act_per_col * (double)ntb)) / DS4RT_CHUNK_ALIGN * DS4RT_CHUNK_ALIGN;
        if (kc < DS4RT_CHUNK_ALIGN) kc = DS4RT_CHUNK_ALIGN;
        c->k_chunk = kc >= cols ? cols : kc;
        if (c->panel == 1 && (c->k_chunk != cols || cols % 32 != 0)) c->rows_fn = NULL; /* whole rows only */
        b.first_row[j + 1] = b.first_row[j] + c->rows;
        work += (double)(c->row_bytes ? c->row_bytes : 1) * (double)c->n_tok * (double)c->rows;
    }
    /* rows per chunk: at least ~64 KiB of weight bytes x tokens of work, so that small products
     * stay on the calling thread and dispatch costs little next to a chunk */
    const int64_t rows = b.first_row[b.n];
    int64_t grain = (int64_t)(65536.0 / (work / (double)rows));
    if (grain < 1) grain = 1;
    ds4rt_pool_parallel_for(pool, rows, grain, batch_rows_worker, &b);
    if (prof) {
        /* the products ran together: each job gets its share of the time by its work */
        const int64_t t_end = ds4rt_mmprof_now();
        for (int j = 0; j < b.n; j++) {
            const mm_ctx *c = &b.c[j];
            const double wj = (double)(c->row_bytes ? c->row_bytes : 1) * (double)c->n_tok * (double)c->rows;
            ds4rt_mmprof_add(job_type[j], (int64_t)((double)(t_end - t_quant) * wj / work),
                             c->row_bytes * (uint64_t)c->rows, c->n_tok);
        }
        ds4rt_mmprof_batch(t_quant - t_start, t_end - t_start);
    }
    return DS4RT_OK;
}

ds4rt_status ds4rt_matmul(ds4rt_pool *pool, const ds4rt_weight *w, const float *x, int64_t n_tok, float *y) {
    if (w == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "matmul: weight is NULL");
    const ds4rt_matmul_job job = {.w = *w, .x = x, .n_tok = n_tok, .y = y};
    return ds4rt_matmul_batch(pool, &job, 1);
}

/* ---------------- host entry points (public API) ---------------- */

static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static ds4rt_pool *host_pool;
static int host_threads;

DS4RT_API ds4rt_status ds4rt_matmul_host(uint32_t type, const void *w, int64_t rows, int64_t cols, const float *x,
                                         int64_t n_tok, float *y, int n_threads) {
    uint64_t rb = 0;
    ds4rt_status st = check_shape(type, rows, cols, n_tok, &rb);
    if (st != DS4RT_OK) return st;
    if (n_threads <= 0) n_threads = ds4rt_cpu_count();
    pthread_mutex_lock(&host_mu);
    if (host_pool == NULL || host_threads != n_threads) {
        ds4rt_pool_destroy(host_pool);
        host_pool = NULL;
        st = ds4rt_pool_create(n_threads, &host_pool);
        host_threads = st == DS4RT_OK ? n_threads : 0;
    }
    if (st == DS4RT_OK) {
        const ds4rt_weight wt = {.type = type, .data = w, .rows = rows, .cols = cols, .row_bytes = rb};
        st = ds4rt_matmul(host_pool, &wt, x, n_tok, y);
    }
    pthread_mutex_unlock(&host_mu);
    return st;
}

DS4RT_API ds4rt_status ds4rt_dequantize(uint32_t type, const void *src, int64_t n, float *dst) {
    return ds4rt_dequantize_row(type, src, n, dst);
}

DS4RT_API ds4rt_status ds4rt_quantize_activation(uint32_t weight_type, const float *x, int64_t n, int8_t *q,
                                                 float *scales) {
    uint64_t rb = 0;
    ds4rt_status st = check_shape(weight_type, 1, n, 1, &rb);
    if (st != DS4RT_OK) return st;
    int ok;
    const uint32_t at = ds4rt_act_type_for(weight_type, &ok);
    const int ints = at == DS4RT_TYPE_Q8_0 || at == DS4RT_TYPE_Q8_K;
    if (x == NULL || scales == NULL || (ints && q == NULL))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "quantize_activation: %s is NULL",
                          x == NULL ? "x" : scales == NULL ? "scales" : "q");
    ds4rt_act act;
    ds4rt_act_layout(at, n, &act);
    act.base = scratch_get(act.stride);
    if (act.base == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "quantize_activation: out of memory");
    ds4rt_act_quantize_row(&act, 0, x);
    if (ints) {
        const int64_t blk = at == DS4RT_TYPE_Q8_K ? DS4RT_QK : DS4RT_QK0;
        memcpy(q, ds4rt_act_qs(&act, 0), (size_t)n);
        memcpy(scales, ds4rt_act_d(&act, 0), (size_t)(n / blk) * sizeof(float));
    } else {
        memcpy(scales, ds4rt_act_f32(&act, 0), (size_t)n * sizeof(float));
    }
    return DS4RT_OK;
}
