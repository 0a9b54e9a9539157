/* target.c - binding the target model's tensors (dsv4-architecture.md §3). */
#include "target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

static ds4rt_status bind_all(const ds4rt_gguf *g, bool official, ds4rt_bind_account *account, ds4rt_target *t) {
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

    ds4rt_binder b = {.g = g, .hp = hp, .arena = &t->arena, .account = account};
    TRY(ds4rt_bind_matrix(&b, "token_embd.weight", hp->n_embd, hp->n_vocab, false, &t->tok_embd));
    TRY(ds4rt_bind_hc(&b, "output_hc_", hp->hc, 1, &t->hc_head));
    TRY(ds4rt_bind_vector(&b, "output_norm.weight", hp->n_embd, &t->out_norm));
    TRY(ds4rt_bind_matrix(&b, "output.weight", hp->n_embd, hp->n_vocab, false, &t->output));

    t->layers = calloc(hp->n_layer, sizeof *t->layers);
    t->kinds = calloc(hp->n_layer, sizeof *t->kinds);
    if (t->layers == NULL || t->kinds == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "layer table");
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "blk.%u.", l);
        t->kinds[l] = (ds4rt_block_kind){.ratio = hp->ratio[l], .hash = l < hp->n_hash};
        TRY(ds4rt_bind_block(&b, prefix, t->kinds[l], &t->layers[l]));
    }
    return DS4RT_OK;
}

ds4rt_status ds4rt_target_bind(const ds4rt_gguf *g, bool official, ds4rt_bind_account *account,
                               ds4rt_target *t) {
    memset(t, 0, sizeof *t);
    ds4rt_status st = bind_all(g, official, account, t);
    if (st != DS4RT_OK) ds4rt_target_free(t);
    return st;
}

void ds4rt_target_free(ds4rt_target *t) {
    ds4rt_hparams_free(&t->hp);
    ds4rt_arena_free(&t->arena);
    free(t->layers);
    free(t->kinds);
    memset(t, 0, sizeof *t);
}
