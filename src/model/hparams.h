/*
 * hparams.h - DeepSeek V4 hyperparameters read from GGUF metadata (docs/MODEL.md, "Hyperparameters"),
 * with the derived sizes the forward pass uses. Every dimension comes from here, so the real
 * 43-layer model and tiny test models share one code path.
 */
#ifndef DS4RT_HPARAMS_H
#define DS4RT_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "ds4rt.h"

/* Upper bounds that keep a hostile file from requesting absurd allocations. Far above the
 * real model (43 layers, 4096 wide, 129280 vocab). */
#define DS4RT_MAX_LAYERS 512
#define DS4RT_MAX_HC 16

typedef struct ds4rt_hparams {
    /* trunk */
    uint32_t n_layer;    /* L */
    uint32_t n_embd;     /* D */
    uint32_t n_vocab;    /* V */
    uint32_t n_head;     /* H */
    uint32_t head_dim;   /* d_h = key_length = value_length */
    uint32_t rope_dim;   /* r_rot: the LAST r_rot dims of a head are rotated */
    uint32_t q_lora;     /* Rq */
    uint32_t o_groups;   /* G */
    uint32_t o_lora;     /* Ro */
    uint32_t window;     /* W, includes the current token */
    /* indexer (ratio-4 layers) */
    uint32_t idx_heads;  /* Hi */
    uint32_t idx_dim;    /* d_i */
    uint32_t idx_topk;   /* K_i */
    /* MoE */
    uint32_t n_expert;      /* E */
    uint32_t n_expert_used; /* k */
    uint32_t expert_ff;     /* F */
    uint32_t n_shared;      /* shared experts; shared hidden = F * n_shared */
    uint32_t n_hash;        /* layers l < n_hash route by token id */
    float expert_scale;
    bool expert_norm;
    /* hyper-connections */
    uint32_t hc;            /* N streams */
    uint32_t sinkhorn_iters;
    float hc_eps;
    float rms_eps;
    /* RoPE */
    float rope_base;        /* ratio-0 layers */
    float compress_rope_base;
    float yarn_factor;
    float yarn_beta_fast;
    float yarn_beta_slow;
    uint64_t yarn_orig_ctx;
    uint64_t train_ctx;     /* context_length (informational; 0 if absent) */
    /* per layer */
    uint32_t *ratio;        /* [n_layer] compress ratio: 0, 4 (overlap + indexer) or other */
    float *clamp_exp;       /* [n_layer] SwiGLU clamp of routed experts */
    float *clamp_shexp;     /* [n_layer] SwiGLU clamp of the shared expert */

    /* derived */
    uint32_t d_nope;        /* head_dim - rope_dim */
    uint32_t q_dim;         /* H * d_h */
    uint32_t group_dim;     /* (H / G) * d_h */
    uint32_t o_low_dim;     /* G * Ro */
    uint32_t hc_dim;        /* N * D */
    uint32_t hc_mix;        /* (2 + N) * N */
    uint32_t idx_q_dim;     /* Hi * d_i */
    uint32_t shared_ff;     /* F * n_shared */
    bool any_indexer;       /* some layer has ratio 4 */
} ds4rt_hparams;

/* Reads and validates the hyperparameters of a `deepseek4` file. Errors name the key. */
ds4rt_status ds4rt_hparams_load(const ds4rt_gguf *g, ds4rt_hparams *hp);
void ds4rt_hparams_free(ds4rt_hparams *hp);

/* Coefficient of the compressor projection width: 2 for overlapping (ratio 4) layers. */
static inline uint32_t ds4rt_coff(uint32_t ratio) { return ratio == 4 ? 2u : 1u; }

#endif /* DS4RT_HPARAMS_H */
