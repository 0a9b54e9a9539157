/* cpu_rows.c - the CPU's row-wise ops: embedding rows, norms, RoPE, FP8/FP4/Hadamard, capture,
 * argmax, add, the non-finite count and DSpark's confidence head. Each row is computed alone,
 * so a row's result never depends on the batch. */
#include <math.h>

#include "cpu_internal.h"
#include "cpu_math.h"

ds4rt_status cpu_get_rows(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_di32 ids, int64_t n, uint32_t copies,
                          ds4rt_df32 out) {
    (void)ctx;
    const int32_t *id = I(ids);
    float *o = F(out);
    const int64_t D = w->cols;
    for (int64_t i = 0; i < n; i++) {
        float *x = o + (size_t)i * copies * D;
        TRY(ds4rt_dequantize_row(w->type, B(w->data) + (size_t)id[i] * w->row_bytes, D, x));
        for (uint32_t c = 1; c < copies; c++) memcpy(x + (size_t)c * D, x, (size_t)D * sizeof(float));
    }
    return DS4RT_OK;
}

typedef struct {
    const float *x, *w;
    int64_t rows, stride, n;
    float eps;
    float *out;
} norm_job;

static void norm_groups(void *vj, int64_t g0, int64_t g1, int thread) {
    (void)thread;
    const norm_job *j = vj;
    const int64_t r0 = 4 * g0, r1 = 4 * g1 < j->rows ? 4 * g1 : j->rows;
    ds4rt_rms_norm_rows(j->x + r0 * j->stride, r1 - r0, j->stride, j->n, j->w, j->eps, j->out + r0 * j->stride);
}

void cpu_norm_rows(cpu_ctx *c, const float *x, int64_t rows, int64_t stride, int64_t n, const float *w, float eps,
                   float *out) {
    const norm_job j = {.x = x, .w = w, .rows = rows, .stride = stride, .n = n, .eps = eps, .out = out};
    ds4rt_pool_parallel_for(c->pool, (rows + 3) / 4, 1, norm_groups, (void *)&j);
}

ds4rt_status cpu_rms_norm(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_df32 w, float eps,
                          ds4rt_df32 out) {
    cpu_norm_rows(cpu(ctx), F(x), rows, width, width, F(w), eps, F(out));
    return DS4RT_OK;
}

static bool same_rope(const ds4rt_rope *a, const ds4rt_rope *b) {
    return a->n_rot == b->n_rot && a->base == b->base && a->yarn == b->yarn && a->yarn_scale == b->yarn_scale &&
           a->yarn_lo == b->yarn_lo && a->yarn_hi == b->yarn_hi;
}

/* The kept angles of rope r at pos, or NULL. */
static const cpu_rope_angles *find_angles(const cpu_ctx *c, const ds4rt_rope *r, int64_t pos) {
    for (uint32_t i = 0; i < CPU_ROPE_SLOTS; i++) {
        const cpu_rope_angles *e = &c->rope[i];
        if (e->used && e->pos == pos && same_rope(&e->r, r)) return e;
    }
    return NULL;
}

/* The angles of rope r at pos: kept ones, or computed into a slot (the oldest). */
static const cpu_rope_angles *rope_angles(cpu_ctx *c, const ds4rt_rope *r, int64_t pos) {
    const cpu_rope_angles *k = find_angles(c, r, pos);
    if (k != NULL) return k;
    cpu_rope_angles *e = &c->rope[c->rope_next];
    c->rope_next = (c->rope_next + 1) % CPU_ROPE_SLOTS;
    e->r = *r;
    e->pos = pos;
    e->used = true;
    ds4rt_rope_angles(r, pos, e->cs, e->sn);
    return e;
}

/* The angles of rope r at pos for a split to read (*ci, *si): the kept ones when the issuing
 * thread filled them, else computed into cs / sn. Only reads the slots. */
static void read_angles(const cpu_ctx *c, const ds4rt_rope *r, int64_t pos, double *cs, double *sn,
                        const double **ci, const double **si) {
    const cpu_rope_angles *e = find_angles(c, r, pos);
    if (e == NULL) ds4rt_rope_angles(r, pos, cs, sn);
    *ci = e != NULL ? e->cs : cs;
    *si = e != NULL ? e->sn : sn;
}

void cpu_rope_angles_for(cpu_ctx *c, const ds4rt_rope *r, int64_t pos, double *cs, double *sn, const double **ci,
                         const double **si) {
    if (r->n_rot / 2 <= CPU_ROPE_PAIRS) rope_angles(c, r, pos); /* kept for the next layers */
    read_angles(c, r, pos, cs, sn, ci, si);
}

/* Row-wise ops split over the pool by rows: a row's result never depends on who computes it,
 * and at 2 threads these per-row steps of a verify pass (RoPE of every head, the FP8/FP4
 * simulations, the indexer's Hadamard) ran on the calling thread alone while the other waited. */
typedef struct {
    cpu_ctx *c;
    const ds4rt_rope *r;
    int64_t pos0;
    uint32_t heads, dim, stride, width;
    int sign;
    float *x;
} row_job;

static void rope_rows(void *vj, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const row_job *j = vj;
    const ds4rt_rope *r = j->r;
    double cs[DS4RT_MAX_ROPE_PAIRS], sn[DS4RT_MAX_ROPE_PAIRS];
    for (int64_t i = i0; i < i1; i++) {
        const double *ci, *si; /* cpu_rope filled the kept angles before the split */
        read_angles(j->c, r, j->pos0 + i, cs, sn, &ci, &si);
        float *row = j->x + (size_t)i * j->heads * j->dim;
        for (uint32_t h = 0; h < j->heads; h++) ds4rt_rope_apply(row + (size_t)h * j->dim, j->dim, r, ci, si, j->sign);
    }
}

ds4rt_status cpu_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, const ds4rt_rope *r,
                      int sign, ds4rt_df32 x) {
    cpu_ctx *c = cpu(ctx);
    const int64_t pos0 = pass_pos0(in);
    /* the kept angles are filled here, on the calling thread, so the split only reads them;
     * a pass of more rows than the slots computes the angles per row instead */
    const bool keep = r->n_rot / 2 <= CPU_ROPE_PAIRS && n <= CPU_ROPE_SLOTS;
    for (int64_t i = 0; keep && i < n; i++) rope_angles(c, r, pos0 + i);
    row_job j = {.c = c, .r = r, .pos0 = pos0, .heads = heads, .dim = dim, .sign = sign, .x = F(x)};
    ds4rt_pool_parallel_for(c->pool, n, 2, rope_rows, &j);
    return DS4RT_OK;
}

/* norm_rope: item (i, g) is heads 4 g .. 4 g + 3 of row i, normed together (the four sums'
 * chains overlap, as cpu_rms_norm's groups do) and then rotated, so both steps are one split */
#define NORM_ROPE_HEADS 4
typedef struct {
    row_job rj;
    uint32_t groups; /* head groups per row */
    const float *w;
    float eps;
} norm_rope_job;

static void norm_rope_groups(void *vj, int64_t k0, int64_t k1, int thread) {
    (void)thread;
    const norm_rope_job *j = vj;
    const row_job *rj = &j->rj;
    double cs[DS4RT_MAX_ROPE_PAIRS], sn[DS4RT_MAX_ROPE_PAIRS];
    int64_t have = -1; /* the row whose angles ci/si point at */
    const double *ci = cs, *si = sn;
    for (int64_t k = k0; k < k1; k++) {
        const int64_t i = k / j->groups;
        const uint32_t h0 = (uint32_t)(k % j->groups) * NORM_ROPE_HEADS;
        const uint32_t nh = rj->heads - h0 < NORM_ROPE_HEADS ? rj->heads - h0 : NORM_ROPE_HEADS;
        float *v = rj->x + ((size_t)i * rj->heads + h0) * rj->dim;
        ds4rt_rms_norm_rows(v, nh, rj->dim, rj->dim, j->w, j->eps, v);
        if (i != have) {
            read_angles(rj->c, rj->r, rj->pos0 + i, cs, sn, &ci, &si);
            have = i;
        }
        for (uint32_t h = 0; h < nh; h++) ds4rt_rope_apply(v + (size_t)h * rj->dim, rj->dim, rj->r, ci, si, +1);
    }
}

ds4rt_status cpu_norm_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, ds4rt_df32 w,
                           float eps, const ds4rt_rope *r, ds4rt_df32 x) {
    cpu_ctx *c = cpu(ctx);
    const int64_t pos0 = pass_pos0(in);
    const bool keep = r->n_rot / 2 <= CPU_ROPE_PAIRS && n <= CPU_ROPE_SLOTS; /* as cpu_rope */
    for (int64_t i = 0; keep && i < n; i++) rope_angles(c, r, pos0 + i);
    const uint32_t groups = (heads + NORM_ROPE_HEADS - 1) / NORM_ROPE_HEADS;
    norm_rope_job j = {.rj = {.c = c, .r = r, .pos0 = pos0, .heads = heads, .dim = dim, .x = F(x)},
                       .groups = groups, .w = F(w), .eps = eps};
    ds4rt_pool_parallel_for(c->pool, n * groups, 1, norm_rope_groups, &j);
    return DS4RT_OK;
}

static void fp8_rows(void *vj, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const row_job *j = vj;
    for (int64_t i = i0; i < i1; i++) ds4rt_fp8_roundtrip(j->x + (size_t)i * j->stride, j->width);
}

static void fp4_rows(void *vj, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const row_job *j = vj;
    for (int64_t i = i0; i < i1; i++) ds4rt_fp4_roundtrip(j->x + (size_t)i * j->stride, j->width);
}

static void hadamard_rows(void *vj, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const row_job *j = vj;
    for (int64_t i = i0; i < i1; i++) ds4rt_hadamard(j->x + (size_t)i * j->stride, j->width);
}

ds4rt_status cpu_fp8_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x) {
    row_job j = {.stride = stride, .width = width, .x = F(x)};
    ds4rt_pool_parallel_for(cpu(ctx)->pool, rows, 2, fp8_rows, &j);
    return DS4RT_OK;
}

ds4rt_status cpu_fp4_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x) {
    row_job j = {.stride = stride, .width = width, .x = F(x)};
    ds4rt_pool_parallel_for(cpu(ctx)->pool, rows, 4, fp4_rows, &j);
    return DS4RT_OK;
}

ds4rt_status cpu_hadamard(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x) {
    row_job j = {.stride = width, .width = width, .x = F(x)};
    ds4rt_pool_parallel_for(cpu(ctx)->pool, rows, 4, hadamard_rows, &j);
    return DS4RT_OK;
}

ds4rt_status cpu_capture(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 dst,
                         uint64_t dst_stride) {
    (void)ctx;
    const uint32_t N = hp->hc, D = hp->n_embd;
    for (int64_t t = 0; t < n; t++) {
        float *row = F(dst) + (size_t)t * dst_stride;
        const float *Xt = F(X) + (size_t)t * hp->hc_dim;
        for (uint32_t d = 0; d < D; d++) {
            float acc = 0.0f;
            for (uint32_t h = 0; h < N; h++) acc += Xt[(size_t)h * D + d];
            row[d] = acc / (float)N;
        }
    }
    return DS4RT_OK;
}

ds4rt_status cpu_argmax(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_di32 ids) {
    (void)ctx;
    /* the first index of the largest value (NaN never is; none above -inf: index 0), found as
     * the largest value in 8 branch-free chains (the compiler vectorises them; a maximum does not
     * depend on the order), then its first occurrence: a 4096-logit row in one predictable pass
     * instead of a compare-and-branch per element */
    for (int64_t r = 0; r < rows; r++) {
        const float *v = F(x) + (size_t)r * width;
        float m8[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
        uint32_t i = 0;
        for (; i + 8 <= width; i += 8)
            for (int l = 0; l < 8; l++) m8[l] = v[i + l] > m8[l] ? v[i + l] : m8[l];
        float bv = -INFINITY;
        for (int l = 0; l < 8; l++) bv = m8[l] > bv ? m8[l] : bv;
        for (; i < width; i++) bv = v[i] > bv ? v[i] : bv;
        int32_t best = 0;
        if (bv > -INFINITY)
            while (!(v[best] == bv)) best++;
        I(ids)[r] = best;
    }
    return DS4RT_OK;
}

ds4rt_status cpu_add(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 a, ds4rt_df32 b, ds4rt_df32 out) {
    (void)ctx;
    const float *ap = F(a), *bp = F(b);
    float *op = F(out);
    for (int64_t i = 0; i < count; i++) op[i] = ap[i] + bp[i];
    return DS4RT_OK;
}

ds4rt_status cpu_nonfinite(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 x, ds4rt_di32 out) {
    (void)ctx;
    const float *xp = F(x);
    int32_t bad = 0;
    for (int64_t i = 0; i < count; i++) bad += !isfinite(xp[i]);
    I(out)[0] = bad;
    return DS4RT_OK;
}

ds4rt_status cpu_dspark_confidence(ds4rt_bctx *ctx, uint32_t d, uint32_t r, ds4rt_df32 proj, ds4rt_df32 h,
                                   ds4rt_df32 state, ds4rt_df32 out) {
    (void)ctx;
    const float *p = F(proj), *hp = F(h), *sp = F(state);
    double acc = 0.0;
    for (uint32_t i = 0; i < d; i++) acc += (double)p[i] * hp[i];
    for (uint32_t i = 0; i < r; i++) acc += (double)p[d + i] * sp[i];
    F(out)[0] = (float)(1.0 / (1.0 + exp(-acc)));
    return DS4RT_OK;
}
