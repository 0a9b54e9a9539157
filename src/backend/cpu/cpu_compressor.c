/*
 * cpu_compressor.c - the raw KV ring and the streaming KV compressor with per-feature softmax
 * pooling on the CPU (docs/MODEL.md, "Compressors" and "Rollback"): push, emission, the
 * snapshot before a pass (lazy: the slots a pass writes are saved as it first writes them) and
 * the journal replay of a rollback.
 */
#include <math.h>
#include <stdlib.h>

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

/* ---- the lazy snapshot (cpu_internal.h, cpu_comp_saved) ---------------------------------------- */

static cpu_comp_saved *saved_find(cpu_ctx *c, const ds4rt_comp_state *cs) {
    const float *kv = F(cs->kv);
    for (uint32_t i = 0; i < c->n_comp; i++)
        if (c->comp[i].kv == kv) return &c->comp[i];
    return NULL;
}

/* The entry of cs, added (all slots unsaved) if it has none. */
static ds4rt_status saved_get(cpu_ctx *c, const ds4rt_comp_state *cs, cpu_comp_saved **out) {
    cpu_comp_saved *e = saved_find(c, cs);
    if (e == NULL) {
        if (c->n_comp == c->cap_comp) {
            uint32_t cap = c->cap_comp ? 2 * c->cap_comp : 16;
            cpu_comp_saved *grown = realloc(c->comp, cap * sizeof *grown);
            if (grown == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "compressor snapshot bookkeeping");
            c->comp = grown;
            c->cap_comp = cap;
        }
        e = &c->comp[c->n_comp];
        *e = (cpu_comp_saved){.kv = F(cs->kv)};
    }
    if (e->rows != cs->rows) { /* new, or a buffer reused for another shape */
        uint8_t *saved = realloc(e->saved, cs->rows);
        if (saved == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "compressor snapshot bookkeeping");
        e->saved = saved;
        e->rows = cs->rows;
    }
    if (e == &c->comp[c->n_comp]) c->n_comp++;
    *out = e;
    return DS4RT_OK;
}

void cpu_comp_saved_free(cpu_ctx *c) {
    for (uint32_t i = 0; i < c->n_comp; i++) free(c->comp[i].saved);
    free(c->comp);
    c->comp = NULL;
    c->n_comp = c->cap_comp = 0;
}

/* Saves frontier slot `slot` into the snapshot unless it already holds the slot's state at the
 * last comp_snapshot. */
static void save_slot(const ds4rt_comp_state *cs, cpu_comp_saved *e, uint32_t slot) {
    if (e->saved[slot]) return;
    const size_t off = (size_t)slot * cs->width, bytes = cs->width * sizeof(float);
    memcpy(F(cs->snap_kv) + off, F(cs->kv) + off, bytes);
    memcpy(F(cs->snap_score) + off, F(cs->score) + off, bytes);
    e->saved[slot] = 1;
}

/* Saves every slot that push() at `pos` writes: its own slot and, when it closes a block of an
 * overlapping compressor, the first half it moves the block into. */
static void save_push_slots(const ds4rt_comp_desc *c, const ds4rt_comp_state *cs, cpu_comp_saved *e, int64_t pos) {
    const uint32_t R = c->ratio, r = (uint32_t)(pos % R);
    const bool overlap = R == 4;
    save_slot(cs, e, overlap ? R + r : r);
    if (overlap && (pos + 1) % R == 0)
        for (uint32_t i = 0; i < R; i++) save_slot(cs, e, i);
}

ds4rt_status cpu_comp_reset(ds4rt_bctx *ctx, const ds4rt_comp_state *cs) {
    /* the snapshot must still give the frontier of before the reset (as a full copy did) */
    cpu_comp_saved *e = saved_find(cpu(ctx), cs);
    if (e != NULL)
        for (uint32_t i = 0; i < cs->rows; i++) save_slot(cs, e, i);
    size_t n = (size_t)cs->rows * cs->width;
    memset(F(cs->kv), 0, n * sizeof(float));
    float *sc = F(cs->score);
    for (size_t i = 0; i < n; i++) sc[i] = -INFINITY;
    return DS4RT_OK;
}

ds4rt_status cpu_comp_snapshot(ds4rt_bctx *ctx, const ds4rt_comp_state *cs) {
    cpu_comp_saved *e = NULL;
    TRY(saved_get(cpu(ctx), cs, &e));
    memset(e->saved, 0, e->rows);
    return DS4RT_OK;
}

ds4rt_status cpu_comp_update(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, const ds4rt_comp_desc *c,
                             const ds4rt_comp_state *cs, ds4rt_df32 u, ds4rt_df32 g) {
    cpu_comp_saved *e = saved_find(cpu(ctx), cs);
    if (e == NULL) return ds4rt_fail(DS4RT_ERR_INTERNAL, "compressor update without a snapshot");
    const int64_t pos0 = pass_pos0(in);
    const uint32_t w = cs->width;
    frontier f = host_frontier(cs);
    for (int64_t i = 0; i < n; i++) {
        const float *ui = F(u) + (size_t)i * w, *gi = F(g) + (size_t)i * w;
        float *jr = F(cs->journal) + (size_t)i * 2 * w;
        memcpy(jr, ui, w * sizeof(float));
        memcpy(jr + w, gi, w * sizeof(float));
        save_push_slots(c, cs, e, pos0 + i);
        push(c, &f, ui, gi, pos0 + i, F(cs->out), cpu(ctx)->ws.comp_tmp);
    }
    return DS4RT_OK;
}

ds4rt_status cpu_comp_rollback(ds4rt_bctx *ctx, const ds4rt_comp_desc *c, const ds4rt_comp_state *cs,
                               int64_t batch_start, int64_t keep) {
    const cpu_comp_saved *e = saved_find(cpu(ctx), cs);
    if (e == NULL) return ds4rt_fail(DS4RT_ERR_INTERNAL, "compressor rollback without a snapshot");
    const uint32_t w = cs->width;
    /* the slots not saved are unchanged since the snapshot; the replay writes only saved ones */
    for (uint32_t slot = 0; slot < cs->rows; slot++) {
        if (!e->saved[slot]) continue;
        const size_t off = (size_t)slot * w;
        memcpy(F(cs->kv) + off, F(cs->snap_kv) + off, w * sizeof(float));
        memcpy(F(cs->score) + off, F(cs->snap_score) + off, w * sizeof(float));
    }
    frontier f = host_frontier(cs);
    for (int64_t i = 0; i < keep; i++) {
        const float *jr = F(cs->journal) + (size_t)i * 2 * w;
        push(c, &f, jr, jr + w, batch_start + i, F(cs->out), cpu(ctx)->ws.comp_tmp);
    }
    return DS4RT_OK;
}
