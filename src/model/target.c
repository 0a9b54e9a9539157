/* target.c - binding the target model's tensors and checking the backend runs its pass
 * (docs/MODEL.md, "Tensors"). */
#include "target.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

ds4rt_rope ds4rt_rope_dense(const ds4rt_hparams *hp) {
    ds4rt_rope r = {.n_rot = hp->rope_dim, .base = hp->rope_base, .yarn = false, .yarn_scale = 1.0};
    return r;
}

static double yarn_corr(double n_rot, double orig_ctx, double beta, double base) {
    return n_rot * log(orig_ctx / (2.0 * M_PI * beta)) / (2.0 * log(base));
}

ds4rt_rope ds4rt_rope_compressed(const ds4rt_hparams *hp) {
    ds4rt_rope r = {.n_rot = hp->rope_dim, .base = hp->compress_rope_base, .yarn = true};
    r.yarn_scale = 1.0 / hp->yarn_factor;
    double lo = floor(yarn_corr(hp->rope_dim, (double)hp->yarn_orig_ctx, hp->yarn_beta_fast, r.base));
    double hi = ceil(yarn_corr(hp->rope_dim, (double)hp->yarn_orig_ctx, hp->yarn_beta_slow, r.base));
    r.yarn_lo = lo < 0 ? 0 : lo;
    r.yarn_hi = hi > hp->rope_dim - 1.0 ? hp->rope_dim - 1.0 : hi;
    return r;
}

/* Ops on activations only (no weight matrix) that the target pass uses. */
static ds4rt_status require_activation_ops(const ds4rt_target *t) {
    static const ds4rt_op OPS[] = {DS4RT_OP_HC_POST, DS4RT_OP_RMS_NORM, DS4RT_OP_ROPE, DS4RT_OP_NORM_ROPE,
                                   DS4RT_OP_KV_STORE, DS4RT_OP_ATTENTION, DS4RT_OP_CAPTURE};
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(OPS); i++)
        TRY(ds4rt_backend_require(t->be, OPS[i], DS4RT_TYPE_F32, "the target pass"));
    TRY(ds4rt_backend_require_head_dim(t->be, t->hp.head_dim, "the target pass"));
    bool compressed = false;
    for (uint32_t l = 0; l < t->hp.n_layer; l++) compressed |= t->hp.ratio[l] != 0;
    if (compressed) TRY(ds4rt_backend_require(t->be, DS4RT_OP_COMPRESSOR, DS4RT_TYPE_F32, "compressed layers"));
    if (t->hp.any_indexer) {
        TRY(ds4rt_backend_require(t->be, DS4RT_OP_INDEXER_TOPK, DS4RT_TYPE_F32, "the indexer"));
        TRY(ds4rt_backend_require(t->be, DS4RT_OP_HADAMARD, DS4RT_TYPE_F32, "the indexer"));
        if (t->sim_fp4) TRY(ds4rt_backend_require(t->be, DS4RT_OP_FP4_ROUND, DS4RT_TYPE_F32, "official numerics"));
    }
    if (t->sim_fp8) TRY(ds4rt_backend_require(t->be, DS4RT_OP_FP8_ROUND, DS4RT_TYPE_F32, "official numerics"));
    return DS4RT_OK;
}

/* The attention and indexer compressors of layer l (ratio 0 when the layer has none). */
static void layer_compressors(ds4rt_target *t, uint32_t l) {
    const ds4rt_hparams *hp = &t->hp;
    const ds4rt_attn_weights *w = &t->layers[l].attn;
    const uint32_t R = hp->ratio[l];
    memset(&t->attn_comp[l], 0, sizeof t->attn_comp[l]);
    memset(&t->index_comp[l], 0, sizeof t->index_comp[l]);
    if (R != 0)
        t->attn_comp[l] = (ds4rt_comp_desc){.ratio = R, .dim = hp->head_dim, .d_nope = hp->d_nope, .ape = w->c_ape,
                                            .norm = w->c_norm, .rms_eps = hp->rms_eps, .rope = t->rope_comp,
                                            .post = t->sim_fp8 ? DS4RT_COMP_POST_FP8 : DS4RT_COMP_POST_NONE};
    if (R == 4)
        t->index_comp[l] = (ds4rt_comp_desc){
            .ratio = 4, .dim = hp->idx_dim, .d_nope = 0, .ape = w->ic_ape, .norm = w->ic_norm, .rms_eps = hp->rms_eps,
            .rope = t->rope_comp, .post = t->sim_fp4 ? DS4RT_COMP_POST_HADAMARD_FP4 : DS4RT_COMP_POST_HADAMARD};
}

static ds4rt_status bind_all(const ds4rt_gguf *g, bool official, bool dry, ds4rt_bind_account *account,
                             ds4rt_target *t) {
    ds4rt_hparams *hp = &t->hp;
    TRY(ds4rt_hparams_load(g, hp));
    if (official && hp->d_nope % 64 != 0)
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED,
                          "official numerics need (key_length - rope.dimension_count) %% 64 == 0 for the FP8 KV "
                          "simulation, got %u; load with llama.cpp-compatible numerics",
                          hp->d_nope);
    t->sim_fp8 = official;
    t->sim_fp4 = official;
    t->rope_dense = ds4rt_rope_dense(hp);
    t->rope_comp = ds4rt_rope_compressed(hp);
    TRY(require_activation_ops(t));

    TRY(ds4rt_arena_init(&t->arena, t->be, g, dry));
    ds4rt_binder b = {.g = g, .hp = hp, .arena = &t->arena, .account = account};
    TRY(ds4rt_bind_matrix(&b, "token_embd.weight", hp->n_embd, hp->n_vocab, false, DS4RT_OP_GET_ROWS, &t->tok_embd));
    TRY(ds4rt_bind_hc(&b, "output_hc_", hp->hc, 1, &t->hc_head));
    TRY(ds4rt_bind_vector(&b, "output_norm.weight", hp->n_embd, &t->out_norm));
    TRY(ds4rt_bind_matrix(&b, "output.weight", hp->n_embd, hp->n_vocab, false, DS4RT_OP_MATMUL, &t->output));

    t->layers = calloc(hp->n_layer, sizeof *t->layers);
    t->kinds = calloc(hp->n_layer, sizeof *t->kinds);
    t->attn_comp = calloc(hp->n_layer, sizeof *t->attn_comp);
    t->index_comp = calloc(hp->n_layer, sizeof *t->index_comp);
    if (!t->layers || !t->kinds || !t->attn_comp || !t->index_comp)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "layer table");
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "blk.%u.", l);
        t->kinds[l] = (ds4rt_block_kind){.ratio = hp->ratio[l], .hash = l < hp->n_hash};
        TRY(ds4rt_bind_block(&b, prefix, t->kinds[l], &t->layers[l]));
        layer_compressors(t, l);
    }
    return DS4RT_OK;
}

static ds4rt_status target_bind(const ds4rt_gguf *g, bool official, bool dry, ds4rt_backend *be,
                                ds4rt_bind_account *account, ds4rt_target *t) {
    memset(t, 0, sizeof *t);
    t->be = be;
    ds4rt_status st = bind_all(g, official, dry, account, t);
    if (st != DS4RT_OK) ds4rt_target_free(t);
    return st;
}

ds4rt_status ds4rt_target_bind(const ds4rt_gguf *g, bool official, ds4rt_backend *be, ds4rt_bind_account *account,
                               ds4rt_target *t) {
    return target_bind(g, official, false, be, account, t);
}

ds4rt_status ds4rt_target_bind_dry(const ds4rt_gguf *g, bool official, ds4rt_backend *be, ds4rt_bind_account *account,
                                   ds4rt_target *t) {
    return target_bind(g, official, true, be, account, t);
}

void ds4rt_target_free(ds4rt_target *t) {
    ds4rt_hparams_free(&t->hp);
    ds4rt_arena_free(&t->arena);
    free(t->layers);
    free(t->kinds);
    free(t->attn_comp);
    free(t->index_comp);
    memset(t, 0, sizeof *t);
}
