/*
 * cpu_compressor.c - the raw KV ring and the streaming KV compressor with per-feature softmax
 * pooling on the CPU (docs/MODEL.md, "Compressors" and "Rollback"): push, emission, the
 * snapshot before a pass and the journal replay of a rollback.
 */
#include <math.h>

#include "cpu_internal.h"
#include "cpu_math.h"

/* A frontier in host memory. */
typedef struct frontier {
    float *kv, *score;
    uint32_t rows, width;
} frontier;

/* Pushes position pos's projections u, g into the frontier; when pos closes a block, pools
 * it, post-processes the row and writes it as row (pos + 1) / R - 1 of `rows`. tmp needs
 * d + 2 + 2 * n_rot floats, 8-byte aligned. */
static void push(const ds4rt_comp_desc *c, frontier *f, const float *u, const float *g, int64_t pos, float *rows,
                 float *tmp) {
    const uint32_t R = c->ratio, d = c->dim;
    const bool overlap = R == 4;
    const uint32_t width = f->width; /* coff * d */
    const uint32_t r = (uint32_t)(pos % R);
    const uint32_t slot = overlap ? R + r : r;
    const float *ape = F(c->ape) + (size_t)r * width;
    float *kv = f->kv + (size_t)slot * width;
    float *sc = f->score + (size_t)slot * width;
    for (uint32_t j = 0; j < width; j++) {
        kv[j] = u[j];
        sc[j] = g[j] + ape[j];
    }
    if ((pos + 1) % R != 0) return;

    float *z = tmp;
    for (uint32_t j = 0; j < d; j++) {
        /* candidates: (overlap) previous block's first half, then this block's second half */
        float mx = -INFINITY;
        if (overlap) {
            for (uint32_t i = 0; i < R; i++) mx = fmaxf(mx, f->score[(size_t)i * width + j]);
            for (uint32_t i = R; i < 2 * R; i++) mx = fmaxf(mx, f->score[(size_t)i * width + d + j]);
        } else {
            for (uint32_t i = 0; i < R; i++) mx = fmaxf(mx, f->score[(size_t)i * width + j]);
        }
        double num = 0.0, den = 0.0;
        if (overlap) {
            for (uint32_t i = 0; i < R; i++) {
                float s = f->score[(size_t)i * width + j];
                if (s == -INFINITY) continue;
                double e = exp((double)s - mx);
                den += e;
                num += e * f->kv[(size_t)i * width + j];
            }
            for (uint32_t i = R; i < 2 * R; i++) {
                double e = exp((double)f->score[(size_t)i * width + d + j] - mx);
                den += e;
                num += e * f->kv[(size_t)i * width + d + j];
            }
        } else {
            for (uint32_t i = 0; i < R; i++) {
                double e = exp((double)f->score[(size_t)i * width + j] - mx);
                den += e;
                num += e * f->kv[(size_t)i * width + j];
            }
        }
        z[j] = (float)(num / den);
    }
    if (overlap) {
        /* this block becomes the previous block of the next emission */
        memcpy(f->kv, f->kv + (size_t)R * width, (size_t)R * width * sizeof(float));
        memcpy(f->score, f->score + (size_t)R * width, (size_t)R * width * sizeof(float));
    }

    ds4rt_rms_norm(z, d, F(c->norm), c->rms_eps, z);
    double *cs = (double *)(tmp + d + (d & 1));
    double *sn = cs + c->rope.n_rot / 2;
    ds4rt_rope_angles(&c->rope, pos + 1 - R, cs, sn);
    ds4rt_rope_apply(z, d, &c->rope, cs, sn, +1);
    switch (c->post) {
    case DS4RT_COMP_POST_FP8: ds4rt_fp8_roundtrip(z, c->d_nope); break;
    case DS4RT_COMP_POST_HADAMARD_FP4:
        ds4rt_hadamard(z, d);
        ds4rt_fp4_roundtrip(z, d);
        break;
    case DS4RT_COMP_POST_HADAMARD: ds4rt_hadamard(z, d); break;
    case DS4RT_COMP_POST_NONE: break;
    }
    memcpy(rows + (size_t)((pos + 1) / R - 1) * d, z, d * sizeof(float));
}


static frontier host_frontier(const ds4rt_comp_state *cs) {
    return (frontier){.kv = F(cs->kv), .score = F(cs->score), .rows = cs->rows, .width = cs->width};
}

ds4rt_status cpu_kv_store(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t dim, ds4rt_df32 src, ds4rt_df32 ring,
                          uint32_t ring_cap) {
    (void)ctx;
    const int64_t pos0 = pass_pos0(in);
    for (int64_t i = 0; i < n; i++)
        memcpy(F(ring) + (size_t)((pos0 + i) % ring_cap) * dim, F(src) + (size_t)i * dim, dim * sizeof(float));
    return DS4RT_OK;
}

ds4rt_status cpu_comp_reset(ds4rt_bctx *ctx, const ds4rt_comp_state *cs) {
    (void)ctx;
    size_t n = (size_t)cs->rows * cs->width;
    memset(F(cs->kv), 0, n * sizeof(float));
    float *sc = F(cs->score);
    for (size_t i = 0; i < n; i++) sc[i] = -INFINITY;
    return DS4RT_OK;
}

ds4rt_status cpu_comp_snapshot(ds4rt_bctx *ctx, const ds4rt_comp_state *cs) {
    (void)ctx;
    size_t bytes = (size_t)cs->rows * cs->width * sizeof(float);
    memcpy(F(cs->snap_kv), F(cs->kv), bytes);
    memcpy(F(cs->snap_score), F(cs->score), bytes);
    return DS4RT_OK;
}

ds4rt_status cpu_comp_update(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, const ds4rt_comp_desc *c,
                             const ds4rt_comp_state *cs, ds4rt_df32 u, ds4rt_df32 g) {
    const int64_t pos0 = pass_pos0(in);
    const uint32_t w = cs->width;
    frontier f = host_frontier(cs);
    for (int64_t i = 0; i < n; i++) {
        const float *ui = F(u) + (size_t)i * w, *gi = F(g) + (size_t)i * w;
        float *jr = F(cs->journal) + (size_t)i * 2 * w;
        memcpy(jr, ui, w * sizeof(float));
        memcpy(jr + w, gi, w * sizeof(float));
        push(c, &f, ui, gi, pos0 + i, F(cs->out), cpu(ctx)->ws.comp_tmp);
    }
    return DS4RT_OK;
}

ds4rt_status cpu_comp_rollback(ds4rt_bctx *ctx, const ds4rt_comp_desc *c, const ds4rt_comp_state *cs,
                               int64_t batch_start, int64_t keep) {
    size_t bytes = (size_t)cs->rows * cs->width * sizeof(float);
    memcpy(F(cs->kv), F(cs->snap_kv), bytes);
    memcpy(F(cs->score), F(cs->snap_score), bytes);
    frontier f = host_frontier(cs);
    const uint32_t w = cs->width;
    for (int64_t i = 0; i < keep; i++) {
        const float *jr = F(cs->journal) + (size_t)i * 2 * w;
        push(c, &f, jr, jr + w, batch_start + i, F(cs->out), cpu(ctx)->ws.comp_tmp);
    }
    return DS4RT_OK;
}
