/*
 * drafter.c - DSpark's per-session drafter, composed against the backend table: context rows
 * (fusion -> per-stage KV ring), the stage chain over the block (each stage is the target's own
 * ds4rt_block_forward with DSpark's keys), the final head, and the lazy Markov/confidence heads
 * (docs/DSPARK.md, "The drafter (reference alignment)"; see dspark.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "block.h"
#include "dspark.h"
#include "internal.h"
#include "sampling.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

static int64_t ring_cap(const ds4rt_drafter *dr) { return (int64_t)dr->d->window + dr->max_batch; }

static ds4rt_df32 stage_ring(const ds4rt_drafter *dr, uint32_t stage) {
    return ds4rt_f32_at(dr->ring, (uint64_t)stage * ring_cap(dr) * dr->d->target->hp.head_dim);
}

ds4rt_status ds4rt_dspark_require_ops(const struct ds4rt_dspark *d, const ds4rt_backend *be) {
    static const ds4rt_op OPS[] = {DS4RT_OP_HC_POST,   DS4RT_OP_RMS_NORM, DS4RT_OP_ROPE,   DS4RT_OP_NORM_ROPE,
                                   DS4RT_OP_KV_STORE,  DS4RT_OP_ATTENTION, DS4RT_OP_CAPTURE, DS4RT_OP_ARGMAX,
                                   DS4RT_OP_ADD,       DS4RT_OP_NONFINITE, DS4RT_OP_DSPARK_CONFIDENCE};
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(OPS); i++)
        TRY(ds4rt_backend_require(be, OPS[i], DS4RT_TYPE_F32, "the DSpark drafter"));
    if (d->sim_fp8) TRY(ds4rt_backend_require(be, DS4RT_OP_FP8_ROUND, DS4RT_TYPE_F32, "the DSpark drafter"));
    return DS4RT_OK;
}

/* Lays the drafter's tensors out on `b` (NULL: only counts); returns floats used. */
static uint64_t layout(ds4rt_dbuf *b, ds4rt_drafter *dr) {
    const struct ds4rt_dspark *d = dr->d;
    const ds4rt_hparams *hp = &d->target->hp;
    const uint64_t B = d->block_size, D = hp->n_embd, V = hp->n_vocab, mb = (uint64_t)dr->max_batch;
    uint64_t off = 0;
    dr->ring = ds4rt_carve_f32(b, &off, (uint64_t)d->n_stages * ring_cap(dr) * hp->head_dim);
    dr->cat = ds4rt_carve_f32(b, &off, mb * d->n_tgt * D);
    dr->main_x = ds4rt_carve_f32(b, &off, mb * D);
    dr->h = ds4rt_carve_f32(b, &off, B * D);
    dr->hn = ds4rt_carve_f32(b, &off, B * D);
    dr->U = ds4rt_carve_f32(b, &off, B * V);
    dr->corrected = ds4rt_carve_f32(b, &off, B * V);
    dr->markov_state = ds4rt_carve_f32(b, &off, d->markov_rank);
    dr->markov_bias = ds4rt_carve_f32(b, &off, V);
    dr->conf = ds4rt_carve_f32(b, &off, B);
    dr->bad = ds4rt_carve_i32(b, &off, 1);
    return off;
}

ds4rt_status ds4rt_drafter_create(const struct ds4rt_dspark *d, ds4rt_bctx *ctx, int64_t max_batch,
                                  ds4rt_drafter *dr) {
    memset(dr, 0, sizeof *dr);
    dr->d = d;
    dr->ctx = ctx;
    dr->max_batch = max_batch;
    const ds4rt_hparams *hp = &d->target->hp;
    const int64_t B = d->block_size;
    TRY(ds4rt_dspark_require_ops(d, ctx->be));
    /* the context rows of a whole pass go through the activations too */
    int64_t cap = B > max_batch ? B : max_batch;
    ds4rt_limits lim = {.max_rows = cap, .max_keys = (int64_t)d->window + B, .max_comp = 1};
    TRY(ctx->ops->ctx_reserve(ctx, hp, &lim));
    TRY(ds4rt_acts_create(ctx->be, hp, cap, 2 * B + 1, &dr->acts));
    uint64_t floats = layout(NULL, dr);
    ds4rt_status st = ctx->ops->alloc(ctx->be, DS4RT_MEM_STATE, floats * 4, &dr->buf);
    if (st == DS4RT_OK && (dr->host_rows = malloc((size_t)B * hp->n_vocab * sizeof(float))) == NULL)
        st = ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "DSpark drafter rows");
    if (st != DS4RT_OK) {
        ds4rt_drafter_free(dr);
        return ds4rt_fail_context(st, "DSpark drafter buffers");
    }
    layout(dr->buf, dr);
    dr->lazy = ctx->be->entry == &ds4rt_cpu_backend_entry;
    if (dr->lazy &&
        (dr->cap_ring = malloc((size_t)ring_cap(dr) * d->n_tgt * hp->n_embd * sizeof(float))) == NULL) {
        ds4rt_drafter_free(dr);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "DSpark drafter captures");
    }
    return DS4RT_OK;
}

void ds4rt_drafter_free(ds4rt_drafter *dr) {
    if (dr->ctx != NULL && dr->buf != NULL) dr->ctx->ops->release(dr->ctx->be, dr->buf);
    ds4rt_acts_free(&dr->acts);
    free(dr->host_rows);
    free(dr->cap_ring);
    memset(dr, 0, sizeof *dr);
}

void ds4rt_drafter_reset(ds4rt_drafter *dr) { ds4rt_drafter_restart(dr, 0); }

void ds4rt_drafter_restart(ds4rt_drafter *dr, int64_t base) {
    dr->base = dr->end = dr->start = base;
    dr->kv_start = dr->kv_end = base;
}

ds4rt_capture ds4rt_drafter_capture(const ds4rt_drafter *dr) {
    const uint64_t D = dr->d->target->hp.n_embd;
    /* slot s of row t at cat[t][s]: main_proj's input rows, with no copy */
    return (ds4rt_capture){.layers = dr->d->tgt_layers, .n_layers = dr->d->n_tgt, .rows = dr->cat,
                           .slot_stride = D, .row_stride = dr->d->n_tgt * D};
}

/* ---- context rows -------------------------------------------------------------------------- */

/* Fusion and KV rows of m positions from pos0 on, whose captures are in dr->cat rows 0..m-1;
 * `in` gives their positions. */
static ds4rt_status context_rows(ds4rt_drafter *dr, ds4rt_dpass in, int64_t m, double *ms_fusion, double *ms_rows) {
    const struct ds4rt_dspark *d = dr->d;
    const ds4rt_hparams *hp = &d->target->hp;
    ds4rt_bctx *ctx = dr->ctx;
    const ds4rt_backend_ops *o = ctx->ops;
    ds4rt_stage_clock clk;
    TRY(ds4rt_clock_start(&clk, ctx));
    TRY(o->matmul(ctx, &d->main_proj, dr->cat, m, dr->main_x));
    TRY(o->rms_norm(ctx, m, hp->n_embd, dr->main_x, d->main_norm, hp->rms_eps, dr->main_x));
    TRY(ds4rt_clock_lap(&clk, ms_fusion));
    for (uint32_t s = 0; s < d->n_stages; s++) {
        /* the context row never enters the residual stream: kv_norm_s(wkv_s(main_x)) only, at
         * the target pass's positions */
        TRY(ds4rt_block_kv_rows(ctx, hp, in, m, &d->stages[s].attn, &d->rope, d->sim_fp8, dr->main_x, dr->acts.kv));
        TRY(o->kv_store(ctx, in, m, hp->head_dim, dr->acts.kv, stage_ring(dr, s), (uint32_t)ring_cap(dr)));
    }
    TRY(ds4rt_clock_lap(&clk, ms_rows));
    dr->rows_done += (uint64_t)m;
    return DS4RT_OK;
}

ds4rt_status ds4rt_drafter_commit(ds4rt_drafter *dr, ds4rt_dpass target_in, int64_t first, int64_t m,
                                  double *ms_fusion, double *ms_rows) {
    if (first != dr->end)
        return ds4rt_fail(DS4RT_ERR_STATE, "DSpark context rows end at position %lld; cannot append position %lld",
                          (long long)dr->end, (long long)first);
    if (m < 0 || m > dr->max_batch)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "DSpark commit of %lld rows (at most %lld)", (long long)m,
                          (long long)dr->max_batch);
    if (dr->lazy) { /* keep the captures only: a host copy of m rows */
        const uint64_t row = (uint64_t)dr->d->n_tgt * dr->d->target->hp.n_embd;
        const int64_t cap = ring_cap(dr);
        double t0 = ds4rt_now_ms();
        for (int64_t done = 0; done < m;) {
            int64_t slot = (first + done) % cap;
            int64_t k = m - done < cap - slot ? m - done : cap - slot;
            TRY(ds4rt_download_f32(dr->ctx, ds4rt_f32_at(dr->cat, (uint64_t)done * row), (uint64_t)k * row,
                                   dr->cap_ring + (size_t)slot * row));
            done += k;
        }
        *ms_fusion = 0.0;
        *ms_rows = ds4rt_now_ms() - t0;
    } else {
        TRY(context_rows(dr, target_in, m, ms_fusion, ms_rows));
        if (dr->kv_end != first) dr->kv_start = first;
        dr->kv_end = first + m;
    }
    dr->end = first + m;
    if (dr->end - dr->start > ring_cap(dr)) dr->start = dr->end - ring_cap(dr);
    if (dr->end - dr->kv_start > ring_cap(dr)) dr->kv_start = dr->end - ring_cap(dr);
    return DS4RT_OK;
}

/* Lazy: the context rows a proposal reads - positions max(base, end - window) .. end - 1 -
 * computed from the kept captures where `ring` lacks them, in chunks the input block holds. */
static ds4rt_status catch_up(ds4rt_drafter *dr, double *ms_fusion, double *ms_rows) {
    *ms_fusion = *ms_rows = 0.0;
    if (!dr->lazy) return DS4RT_OK;
    const struct ds4rt_dspark *d = dr->d;
    int64_t lo = dr->end - (int64_t)d->window;
    if (lo < dr->base) lo = dr->base;
    if (lo < dr->start) return ds4rt_fail(DS4RT_ERR_INTERNAL, "DSpark: the capture of position %lld is gone", (long long)lo);
    int64_t from = lo >= dr->kv_start && lo <= dr->kv_end ? dr->kv_end : lo; /* extend, or start anew */
    if (from >= dr->end) return DS4RT_OK;
    const uint64_t row = (uint64_t)d->n_tgt * d->target->hp.n_embd;
    const int64_t cap = ring_cap(dr);
    int64_t chunk = 2 * (int64_t)d->block_size + 1; /* ids the drafter's input block holds */
    if (chunk > dr->max_batch) chunk = dr->max_batch;
    static const int32_t zeros[2 * DS4RT_DSPARK_MAX_BLOCK + 1]; /* the rows' ids are not read */
    for (int64_t q = from; q < dr->end;) {
        int64_t m = dr->end - q < chunk ? dr->end - q : chunk;
        for (int64_t i = 0; i < m; i++)
            TRY(dr->ctx->ops->upload(dr->ctx, dr->cat.buf, (dr->cat.off + (uint64_t)i * row) * 4,
                                     dr->cap_ring + (size_t)((q + i) % cap) * row, row * 4));
        TRY(ds4rt_pass_upload(dr->ctx, dr->acts.in, q, dr->base, zeros, m));
        double f, r;
        TRY(context_rows(dr, dr->acts.in, m, &f, &r));
        *ms_fusion += f;
        *ms_rows += r;
        q += m;
    }
    if (from != dr->kv_end) dr->kv_start = from;
    dr->kv_end = dr->end;
    return DS4RT_OK;
}

ds4rt_status ds4rt_drafter_crop(ds4rt_drafter *dr, int64_t end) {
    if (end > dr->end) return ds4rt_fail(DS4RT_ERR_STATE, "DSpark crop to %lld: rows only reach %lld", (long long)end,
                                         (long long)dr->end);
    int64_t need = end - (int64_t)dr->d->window;
    if (need < dr->base) need = dr->base;
    if (need < dr->start)
        return ds4rt_fail(DS4RT_ERR_STATE, "DSpark crop to %lld: the row of position %lld was overwritten",
                          (long long)end, (long long)need);
    dr->end = end;
    if (dr->start > end) dr->start = end;
    if (dr->kv_end > end) dr->kv_end = end;
    if (dr->kv_start > dr->kv_end) dr->kv_start = dr->kv_end;
    return DS4RT_OK;
}

/* ---- the proposal ------------------------------------------------------------------------------ */

/* The chain's ids live in the drafter's input block after the B block tokens: [anchor, d_1, ..]. */
static ds4rt_di32 chain_id(const ds4rt_drafter *dr, int32_t i) {
    return ds4rt_i32_at(ds4rt_pass_tokens(dr->acts.in), dr->d->block_size + (uint64_t)i);
}

ds4rt_status ds4rt_drafter_propose(ds4rt_drafter *dr, int32_t anchor, int32_t max_draft, float threshold,
                                   const ds4rt_sampler_params *sp, const double *u, float *work_val, int32_t *work_idx,
                                   bool want_rows, ds4rt_proposal *out) {
    const struct ds4rt_dspark *d = dr->d;
    const ds4rt_target *t = d->target;
    const ds4rt_hparams *hp = &t->hp;
    ds4rt_bctx *ctx = dr->ctx;
    const ds4rt_backend_ops *o = ctx->ops;
    ds4rt_acts *a = &dr->acts;
    const int64_t B = d->block_size;
    const uint32_t D = hp->n_embd, V = hp->n_vocab;
    const bool sample = sp != NULL && sp->temperature > 0.0f;
    memset(out, 0, sizeof *out);
    if (dr->end < 1) return ds4rt_fail(DS4RT_ERR_STATE, "DSpark proposal without context rows");
    if (anchor < 0 || (uint32_t)anchor >= V)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "DSpark anchor %d outside the vocabulary", anchor);
    const int64_t p = dr->end - 1;
    if (max_draft > B) max_draft = (int32_t)B;

    TRY(catch_up(dr, &out->ms_fusion, &out->ms_rows));
    /* stage timers are backend time between marks (backend.h): on a GPU, device events */
    ds4rt_stage_clock clk;
    TRY(ds4rt_clock_start(&clk, ctx));
    /* the block [anchor, noise x (B-1)] at p+1.., and the chain's first id: one upload */
    int32_t ids[2 * DS4RT_DSPARK_MAX_BLOCK + 1];
    for (int64_t i = 0; i < B; i++) ids[i] = i == 0 ? anchor : (int32_t)d->noise_token;
    ids[B] = anchor;
    TRY(ds4rt_pass_upload(ctx, a->in, p + 1, dr->base, ids, B + 1));
    TRY(o->get_rows(ctx, &t->tok_embd, ds4rt_pass_tokens(a->in), B, hp->hc, a->X));
    TRY(ds4rt_clock_lap(&clk, &out->ms_setup));
    ds4rt_block_run run = {.ctx = ctx, .hp = hp, .a = a, .n = B};
    for (uint32_t s = 0; s < d->n_stages; s++) {
        ds4rt_block_keys keys = {.rope = &d->rope, .sim_fp8 = d->sim_fp8, .ring = stage_ring(dr, s),
                                 .ring_cap = (uint32_t)ring_cap(dr), .window = d->window};
        TRY(ds4rt_block_forward(&run, &d->stages[s], &keys, d->clamp, d->clamp_sh));
        TRY(o->nonfinite(ctx, B * (int64_t)hp->hc_dim, a->X, dr->bad));
        int32_t bad;
        TRY(ds4rt_download_i32(ctx, dr->bad, 1, &bad));
        if (bad != 0) return ds4rt_fail(DS4RT_ERR_BACKEND, "DSpark stage %u produced non-finite values", s);
        TRY(ds4rt_clock_lap(&clk, &out->ms_stage[s]));
        out->ms_chain += out->ms_stage[s];
    }
    TRY(o->hc_head(ctx, hp, B, &d->hc_head, a->X, dr->h));
    TRY(o->rms_norm(ctx, B, D, dr->h, d->final_norm, hp->rms_eps, dr->hn));
    TRY(ds4rt_clock_lap(&clk, &out->ms_hidden));

    bool have_logits = false;
    for (int32_t i = 0; i < max_draft; i++) {
        /* confidence of slot i from h_i and W1[prev_i] */
        TRY(o->get_rows(ctx, &d->markov_w1, chain_id(dr, i), 1, 1, dr->markov_state));
        TRY(o->dspark_confidence(ctx, D, d->markov_rank, d->conf_proj, ds4rt_f32_at(dr->h, (uint64_t)i * D),
                                 dr->markov_state, ds4rt_f32_at(dr->conf, (uint64_t)i)));
        float c;
        TRY(ds4rt_download_f32(ctx, ds4rt_f32_at(dr->conf, (uint64_t)i), 1, &c));
        out->conf[out->n_conf++] = c;
        double ms_conf;
        TRY(ds4rt_clock_lap(&clk, &ms_conf)); /* the first slot's own timer; later ones count as Markov steps */
        if (i == 0) out->ms_conf0 = ms_conf;
        else out->ms_markov += ms_conf;
        if (threshold > 0.0f && c < threshold) {
            out->cut = true;
            break;
        }
        if (!have_logits) { /* lazily: a cut at the first slot never pays for the head */
            TRY(o->matmul(ctx, &t->output, dr->hn, B, dr->U));
            TRY(ds4rt_clock_lap(&clk, &out->ms_logits));
            have_logits = true;
        }
        ds4rt_df32 z = ds4rt_f32_at(dr->corrected, (uint64_t)i * V);
        TRY(o->matmul(ctx, &d->markov_w2, dr->markov_state, 1, dr->markov_bias));
        TRY(o->add(ctx, V, ds4rt_f32_at(dr->U, (uint64_t)i * V), dr->markov_bias, z));
        int32_t tok;
        if (!sample) {
            TRY(o->argmax(ctx, 1, V, z, chain_id(dr, i + 1)));
            TRY(ds4rt_download_i32(ctx, chain_id(dr, i + 1), 1, &tok));
        } else {
            /* sampling with the request's filters runs on the host from the row read back */
            float *row = dr->host_rows + (size_t)i * V;
            TRY(ds4rt_download_f32(ctx, z, V, row));
            ds4rt_sampling_probs(sp, row, V, work_val + V, work_idx, work_val);
            tok = ds4rt_sample_probs(work_val + V, V, u[i]);
            TRY(o->upload(ctx, chain_id(dr, i + 1).buf, chain_id(dr, i + 1).off * 4, &tok, 4));
        }
        out->tokens[out->n++] = tok;
        double ms_step;
        TRY(ds4rt_clock_lap(&clk, &ms_step));
        out->ms_markov += ms_step;
    }
    if (want_rows && !sample && out->n > 0) TRY(ds4rt_download_f32(ctx, dr->corrected, (uint64_t)out->n * V, dr->host_rows));
    out->corrected = dr->host_rows;
    return DS4RT_OK;
}
