/*
 * cpu_attention.c - the lightning indexer with its top-k, and attention with sinks over keys
 * described by index (backend.h: ds4rt_attn_keys), on the CPU. The key list of each row is
 * built here as host pointers and the heads run in parallel; rows run in order.
 */
#include <math.h>

#include "cpu_internal.h"
#include "cpu_math.h"
#include "kernels.h"
#include "topk.h"

/* ---- attention with sinks over an explicit key list, parallel over heads ------------------- */

typedef struct head_job {
    const float *q;            /* [H][d]; may alias out (a head's scores are done before its
                                  output is written) */
    const float *const *keys;  /* n_keys rows of d floats (K = V) */
    int64_t n_keys;
    const float *sinks;        /* [H] */
    float scale;
    uint32_t d, heads;
    uint32_t group;            /* heads per item of the parallel split */
    float *out;                /* [H][d] */
    float *scores;             /* [threads][CPU_ATT_TILE][max_keys] */
    int64_t max_keys;
    const ds4rt_rope *unrope;  /* or NULL: each output head rotated back with these angles */
    const double *ucs, *usn;
} head_job;

/* sc[i * max_keys + k] = q_{h0+i} . key_k for the nh <= CPU_ATT_TILE heads from h0, with the
 * matmul's F32 kernels of the active ISA (kernels.h): 32 lanes summed in the fixed order, so
 * every ISA path, and a row alone or inside a batch, gives the same bits. The key is shared by
 * all heads (one KV head), so the heads are the tokens of one call: the whole-row kernel keeps
 * the key in registers for all of them and writes the scores; a path without one has the dot
 * kernel fill lanes. (Per head and key, the serial sum this replaced was a fifth of a verify
 * pass on the default model: docs/PERFORMANCE.md, "CPU attention dot products"; a dot call per
 * head and key then was a tenth.) */
static void head_scores(const head_job *j, int64_t h0, int nh, float *sc) {
    const ds4rt_cpu_kernels *kt = ds4rt_cpu_active();
    const ds4rt_act a = {.type = DS4RT_TYPE_F32, .cols = j->d, .base = (uint8_t *)(uintptr_t)(j->q + (size_t)h0 * j->d),
                         .stride = 4 * (size_t)j->d};
    if (kt->rows[DS4RT_TYPE_F32] != NULL && j->d % 32 == 0) {
        for (int64_t k = 0; k < j->n_keys; k++)
            kt->rows[DS4RT_TYPE_F32]((const uint8_t *)j->keys[k], 0, 1, &a, 0, nh, sc + k, j->max_keys);
        return;
    }
    for (int64_t k = 0; k < j->n_keys; k++) {
        float lanes[CPU_ATT_TILE][DS4RT_FLANES];
        for (int i = 0; i < nh; i++)
            for (int l = 0; l < DS4RT_FLANES; l++) lanes[i][l] = 0.0f;
        kt->dot[DS4RT_TYPE_F32]((const uint8_t *)j->keys[k], &a, 0, nh, 0, j->d, lanes[0], DS4RT_FLANES);
        for (int i = 0; i < nh; i++) sc[(size_t)i * j->max_keys + k] = ds4rt_reduce32(lanes[i]);
    }
}

#define OCHUNK 32
typedef float v4f __attribute__((vector_size(16)));

/* Head h from its raw scores sc[k]: softmax with the sink, then the weighted sum of the keys. */
static void head_output(const head_job *j, int64_t h, float *sc) {
    float mx = j->sinks[h];
    for (int64_t k = 0; k < j->n_keys; k++) {
        sc[k] *= j->scale;
        if (sc[k] > mx) mx = sc[k];
    }
    double den = exp((double)j->sinks[h] - mx);
    for (int64_t k = 0; k < j->n_keys; k++) sc[k] -= mx;
    ds4rt_expf_rows(sc, j->n_keys);
    for (int64_t k = 0; k < j->n_keys; k++) den += sc[k];
    float *o = j->out + (size_t)h * j->d;
    const float inv = (float)(1.0 / den);
    /* o[i] = (sum over keys, in order, of w_k v_k[i]) * inv, OCHUNK dims at a time so that
     * the sums stay in registers across the keys instead of going through memory per key; in
     * 4-float vectors (GCC/Clang vector extensions: SSE, NEON), each element its own sum, as the
     * compiler did not vectorise the scalar loop (it was most of this function's time). The
     * loops over vectors are unrolled so that the sums stay in registers. */
    uint32_t i0 = 0;
    for (; i0 + OCHUNK <= j->d; i0 += OCHUNK) {
        v4f acc[OCHUNK / 4];
#pragma GCC unroll 8
        for (int l = 0; l < OCHUNK / 4; l++) acc[l] = (v4f){0.0f, 0.0f, 0.0f, 0.0f};
        for (int64_t k = 0; k < j->n_keys; k++) {
            const float *v = j->keys[k] + i0;
            const v4f w = {sc[k], sc[k], sc[k], sc[k]};
#pragma GCC unroll 8
            for (int l = 0; l < OCHUNK / 4; l++) {
                v4f vl;
                memcpy(&vl, v + 4 * l, sizeof vl);
                acc[l] += w * vl;
            }
        }
#pragma GCC unroll 8
        for (int l = 0; l < OCHUNK / 4; l++) {
            const v4f r = acc[l] * inv;
            memcpy(o + i0 + 4 * l, &r, sizeof r);
        }
    }
    for (uint32_t i = i0; i < j->d; i++) {
        float acc = 0.0f;
        for (int64_t k = 0; k < j->n_keys; k++) acc += sc[k] * j->keys[k][i];
        o[i] = acc * inv;
    }
}

/* Items [begin, end) of `group` heads each, in tiles of CPU_ATT_TILE heads: all scores of a
 * tile (a head's scores are done before its output, which may overwrite its q), then each
 * head's output. */
static void attend_heads(void *ctx, int64_t begin, int64_t end, int thread) {
    const head_job *j = ctx;
    float *sc = j->scores + (size_t)thread * CPU_ATT_TILE * j->max_keys;
    const int64_t h1 = end * j->group < j->heads ? end * j->group : j->heads;
    for (int64_t h0 = begin * j->group; h0 < h1; h0 += CPU_ATT_TILE) {
        const int nh = (int)(h1 - h0 < CPU_ATT_TILE ? h1 - h0 : CPU_ATT_TILE);
        head_scores(j, h0, nh, sc);
        for (int i = 0; i < nh; i++) {
            head_output(j, h0 + i, sc + (size_t)i * j->max_keys);
            if (j->unrope != NULL) ds4rt_rope_apply(j->out + (size_t)(h0 + i) * j->d, j->d, j->unrope, j->ucs, j->usn, -1);
        }
    }
}

ds4rt_status cpu_attention(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim,
                           const ds4rt_attn_keys *k, ds4rt_df32 sinks, ds4rt_df32 q, ds4rt_df32 out,
                           const ds4rt_rope *unrope) {
    cpu_ctx *c = cpu(ctx);
    const int64_t pos0 = pass_pos0(in), base = pass_base(in);
    const float **keys = c->ws.att_keys;
    const float *ring = F(k->ring), *comp = F(k->comp);
    for (int64_t i = 0; i < n; i++) {
        const int64_t pos = pos0 + i;
        const int64_t last = k->block ? pos0 - 1 : pos;
        int64_t first = last - (int64_t)k->window + 1;
        if (first < base) first = base;
        int64_t nk = 0;
        for (int64_t p = first; p <= last; p++) keys[nk++] = ring + (size_t)(p % k->ring_cap) * dim;
        if (k->block)
            for (int64_t j = 0; j < n; j++) keys[nk++] = F(k->block_rows) + (size_t)j * dim;
        if (k->comp_ratio != 0) {
            if (k->sel.buf != NULL) {
                const int32_t *sel = I(k->sel) + (size_t)i * k->sel_stride;
                for (int32_t j = 0; j < I(k->n_sel)[i]; j++) keys[nk++] = comp + (size_t)sel[j] * dim;
            } else {
                int64_t visible = (pos + 1) / k->comp_ratio;
                for (int64_t j = 0; j < visible; j++) keys[nk++] = comp + (size_t)j * dim;
            }
        }
        if (nk > c->ws.lim.max_keys)
            return ds4rt_fail(DS4RT_ERR_INTERNAL, "attention: %lld keys exceed the workspace's %lld", (long long)nk,
                              (long long)c->ws.lim.max_keys);
        /* one item of `group` heads per thread (at most a tile), so a thread's heads share keys */
        const uint32_t threads = (uint32_t)ds4rt_pool_threads(c->pool);
        uint32_t group = (heads + threads - 1) / threads;
        if (group > CPU_ATT_TILE) group = CPU_ATT_TILE;
        head_job j = {.q = F(q) + (size_t)i * heads * dim, .keys = keys, .n_keys = nk, .sinks = F(sinks),
                      .scale = (float)(1.0 / sqrt((double)dim)), .d = dim, .heads = heads, .group = group,
                      .out = F(out) + (size_t)i * heads * dim, .scores = c->ws.att_scores,
                      .max_keys = c->ws.lim.max_keys};
        double ucs[DS4RT_MAX_ROPE_PAIRS], usn[DS4RT_MAX_ROPE_PAIRS];
        if (unrope != NULL && unrope->n_rot >= 2) { /* the angles cpu_rope would use */
            j.unrope = unrope;
            cpu_rope_angles_for(c, unrope, pos, ucs, usn, &j.ucs, &j.usn);
        }
        ds4rt_pool_parallel_for(c->pool, (heads + group - 1) / group, 1, attend_heads, &j);
    }
    return DS4RT_OK;
}

/* ---- indexer scores over the visible indexer rows, parallel over rows ----------------------- */

typedef struct index_job {
    const float *qi;    /* [Hi][d_i] */
    const float *w;     /* [Hi] */
    float wscale;       /* 1 / sqrt(d_i * Hi) */
    const float *rows;  /* [n][d_i] */
    uint32_t heads, dim;
    float *scores;
} index_job;

static void index_rows(void *ctx, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const index_job *j = ctx;
    for (int64_t c = begin; c < end; c++) {
        const float *k = j->rows + (size_t)c * j->dim;
        float s = 0.0f;
        for (uint32_t h = 0; h < j->heads; h++) {
            const float *q = j->qi + (size_t)h * j->dim;
            float dot = 0.0f;
            for (uint32_t i = 0; i < j->dim; i++) dot += q[i] * k[i];
            s += j->w[h] * j->wscale * (dot > 0.0f ? dot : 0.0f);
        }
        j->scores[c] = s;
    }
}

ds4rt_status cpu_indexer_topk(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 iq,
                              ds4rt_df32 iw, ds4rt_df32 rows, ds4rt_di32 sel, ds4rt_di32 n_sel) {
    cpu_ctx *c = cpu(ctx);
    const int64_t pos0 = pass_pos0(in);
    const float wscale = (float)(1.0 / sqrt((double)hp->idx_dim * hp->idx_heads));
    for (int64_t i = 0; i < n; i++) {
        const int64_t n_vis = (pos0 + i + 1) / 4;
        int32_t *out = I(sel) + (size_t)i * hp->idx_topk;
        int64_t m;
        if (n_vis <= (int64_t)hp->idx_topk) {
            for (int64_t r = 0; r < n_vis; r++) out[r] = (int32_t)r;
            m = n_vis;
        } else {
            if (n_vis > c->ws.lim.max_comp)
                return ds4rt_fail(DS4RT_ERR_INTERNAL, "indexer: %lld rows exceed the workspace", (long long)n_vis);
            index_job ij = {.qi = F(iq) + (size_t)i * hp->idx_q_dim, .w = F(iw) + (size_t)i * hp->idx_heads,
                            .wscale = wscale, .rows = F(rows), .heads = hp->idx_heads, .dim = hp->idx_dim,
                            .scores = c->ws.iscores};
            ds4rt_pool_parallel_for(c->pool, n_vis, 256, index_rows, &ij);
            m = ds4rt_topk_indices(c->ws.iscores, n_vis, hp->idx_topk, c->ws.iscores_tmp, out);
        }
        I(n_sel)[i] = (int32_t)m;
    }
    return DS4RT_OK;
}
