/*
 * dspark.h - the DSpark drafter of DeepSeek V4 Flash (docs/DSPARK.md), following DeepSeek's own
 * reference drafter (docs/DSPARK.md, "The drafter (reference alignment)"):
 *
 *   capture   mean of the 4 HC streams of each target layer's output (target_layer_ids, ascending)
 *   fusion    main_x = RMSNorm(main_proj . concat(captures), main_norm)
 *   context   per stage s, for every committed position q: kv_norm_s(wkv_s(main_x(q))), RoPE at q
 *             (base rope.freq_base, no YaRN), FP8 round trip of the non-RoPE dims; a ring of the
 *             last `window` positions. main_x never enters the residual stream.
 *   block     [anchor, noise x (B-1)] at positions p+1..p+B (p = last committed position); its
 *             HC input is the target's embeddings; every block row attends non-causally to the
 *             window and to all B block rows; no compressor, indexer or hash routing.
 *   heads     final stage HC head -> h (pre-norm); U = target output . RMSNorm(h, norm); the
 *             Markov chain prev_0 = anchor, logits_i = U_i + W2 . W1[prev_i]; confidence
 *             c_i = sigmoid(proj . [h_i ; W1[prev_i]]); the draft ends at the first c_i < threshold.
 *
 * Support files in ds4's layout ("deepseek4-dspark", mtp.N. stages) and in llama.cpp's
 * ("dflash", blk.N.) are both read.
 */
#ifndef DS4RT_DSPARK_H
#define DS4RT_DSPARK_H

#include <stdbool.h>
#include <stdint.h>

#include "activations.h"
#include "backend.h"
#include "ds4rt.h"
#include "target.h"
#include "weights.h"

#define DS4RT_DSPARK_MAX_STAGES 8
#define DS4RT_DSPARK_MAX_TARGET_LAYERS 8
#define DS4RT_DSPARK_MAX_BLOCK 16

typedef enum ds4rt_dspark_layout {
    DS4RT_DSPARK_LAYOUT_DS4 = 0,    /* ds4's support GGUF */
    DS4RT_DSPARK_LAYOUT_DFLASH = 1  /* llama.cpp's dflash draft GGUF */
} ds4rt_dspark_layout;

struct ds4rt_dspark {
    ds4rt_gguf *gguf;
    const ds4rt_model *model;       /* the target it is bound to (kept by the caller) */
    const ds4rt_target *target;
    ds4rt_dspark_layout layout;
    uint32_t n_stages, block_size, markov_rank, noise_token;
    uint32_t n_tgt, tgt_layers[DS4RT_DSPARK_MAX_TARGET_LAYERS];
    uint32_t window;                /* context rows per stage */
    float clamp, clamp_sh;          /* SwiGLU limits (the target's last layer's) */
    ds4rt_block_weights stages[DS4RT_DSPARK_MAX_STAGES];
    ds4rt_dweight main_proj;        /* [D][n_tgt*D] */
    ds4rt_df32 main_norm;           /* [D] */
    ds4rt_df32 final_norm;          /* [D] */
    ds4rt_hc_weights hc_head;       /* fn [N][N*D] */
    ds4rt_dweight markov_w1;        /* [V][R] */
    ds4rt_dweight markov_w2;        /* [V][R] */
    ds4rt_df32 conf_proj;           /* [D + R] */
    ds4rt_rope rope;                /* dense parameters */
    bool sim_fp8;
    char tensor_types[160];         /* "main_proj=Q8_0 markov=BF16 ..." for messages */
    float acceptance_prior[DS4RT_DSPARK_MAX_BLOCK]; /* the file's measured per-position acceptance
                                        (ds4rt.dspark.acceptance_prior), the scheduler's start */
    uint32_t n_prior;               /* its length; 0: the file has none */
    struct ds4rt_sched_memory *sched_mem; /* what the adaptive scheduler learned with this drafter,
                                        kept between generations (scheduler.h); mutable */
    ds4rt_weight_arena arena;
};

/* Per-session drafter state: one ring of context KV rows per stage, and the tensors of a
 * proposal, in the session's backend memory. */
typedef struct ds4rt_drafter {
    const struct ds4rt_dspark *d;
    ds4rt_bctx *ctx;         /* the session's */
    int64_t base;            /* first position with a row (rows before it never existed) */
    int64_t start;           /* oldest position whose row is still stored */
    int64_t end;             /* positions [start, end) have context rows; ring capacity is
                                window + max_batch so a whole pass can be appended and
                                cropped back */
    int64_t max_batch;
    ds4rt_acts acts;         /* cap = max(B, max_batch); its input block holds the block's B
                                tokens, then the Markov chain's ids (anchor, drafts) */
    ds4rt_dbuf *buf;         /* the tensors below */
    ds4rt_df32 ring;         /* [S][window + max_batch][d_h]; slot of position q: q % cap */
    ds4rt_df32 cat;          /* [max_batch][n_tgt*D] the target's captures, concatenated */
    ds4rt_df32 main_x;       /* [max_batch][D] */
    ds4rt_df32 h;            /* [B][D] pre-norm head rows */
    ds4rt_df32 hn;           /* [B][D] */
    ds4rt_df32 U;            /* [B][V] base logits */
    ds4rt_df32 corrected;    /* [B][V] Markov-corrected logits */
    ds4rt_df32 markov_state; /* [R] */
    ds4rt_df32 markov_bias;  /* [V] */
    ds4rt_df32 conf;         /* [B] */
    ds4rt_di32 bad;          /* [1] non-finite count */
    float *host_rows;        /* [B][V] corrected rows read back when a caller needs them */
    uint64_t rows_done;      /* context rows computed (fusion + KV), for the schedule log */
    /* Lazy context rows (the CPU backend, where the captures are host memory): a pass only
     * keeps its captured rows (cap_ring); the fusion and KV rows of the last `window`
     * positions are computed when a proposal needs them, so cycles that do not draft do no
     * drafter work. Positions [kv_start, kv_end) have KV rows in `ring`. On a GPU every pass
     * computes its rows (eager): keeping captures there would cost a read-back per pass. */
    bool lazy;
    float *cap_ring;         /* [window + max_batch][n_tgt*D]; position q at slot q % cap */
    int64_t kv_start, kv_end;
} ds4rt_drafter;

/* Output of one proposal. corrected[i] are the Markov-corrected logits the draft token i was
 * chosen from (the draft distribution q for verification). */
typedef struct ds4rt_proposal {
    int32_t n;                              /* drafts produced */
    int32_t tokens[DS4RT_DSPARK_MAX_BLOCK];
    float conf[DS4RT_DSPARK_MAX_BLOCK];     /* sigmoid confidences of the evaluated slots */
    int32_t n_conf;                         /* slots whose confidence was evaluated */
    bool cut;                               /* ended by the confidence threshold */
    float *corrected;                       /* [n][V] host rows, owned by the drafter; only
                                               filled when the proposal was asked for them */
    /* stage timers: backend time in ms (device events on a GPU, backend.h) */
    double ms_setup, ms_chain, ms_stage[DS4RT_DSPARK_MAX_STAGES], ms_hidden, ms_conf0, ms_logits, ms_markov;
    double ms_fusion, ms_rows;              /* lazy context rows computed for this proposal */
} ds4rt_proposal;

/* Reads, validates and binds the support file at `path` for d->target (d->model and d->target
 * set by the caller) on the target's backend. */
ds4rt_status ds4rt_dspark_bind(struct ds4rt_dspark *d, const char *path, const ds4rt_dspark_params *p);
/* The same for a memory plan: the file's header only, a dry binding (ds4rt_arena_init), the
 * bytes bound told to `account` (or NULL). d->target may be a dry target. Never proposes. */
ds4rt_status ds4rt_dspark_bind_dry(struct ds4rt_dspark *d, const char *path, const ds4rt_dspark_params *p,
                                   ds4rt_bind_account *account);
/* Releases what ds4rt_dspark_bind made (not d itself). */
void ds4rt_dspark_release(struct ds4rt_dspark *d);

/* Enabling DSpark on a backend: every op the drafter needs, checked against it. */
ds4rt_status ds4rt_dspark_require_ops(const struct ds4rt_dspark *d, const ds4rt_backend *be);

ds4rt_status ds4rt_drafter_create(const struct ds4rt_dspark *d, ds4rt_bctx *ctx, int64_t max_batch,
                                  ds4rt_drafter *dr);
void ds4rt_drafter_free(ds4rt_drafter *dr);
void ds4rt_drafter_reset(ds4rt_drafter *dr);

/* The capture the target pass must write for this drafter: straight into dr->cat. */
ds4rt_capture ds4rt_drafter_capture(const ds4rt_drafter *dr);

/* Appends positions first .. first+m-1 (the target pass just run, whose input block
 * `target_in` gives the positions) from the captured rows in dr->cat: their context rows
 * (eager), or only the captures (lazy; the rows come at the next proposal). first must equal
 * dr->end. Backend time of main_proj + main_norm in *ms_fusion, of the context rows in
 * *ms_rows (of the copy of the captures, lazy). */
ds4rt_status ds4rt_drafter_commit(ds4rt_drafter *dr, ds4rt_dpass target_in, int64_t first, int64_t m,
                                  double *ms_fusion, double *ms_rows);

/* Drops context rows of positions >= end (rollback). */
ds4rt_status ds4rt_drafter_crop(ds4rt_drafter *dr, int64_t end);

/* Forgets every row; the next commit may start at any position `base` (rows before it never
 * existed: proposals then see a shorter window). */
void ds4rt_drafter_restart(ds4rt_drafter *dr, int64_t base);

/* Draft up to max_draft (<= B) tokens after `anchor`, the token at p+1 where p = dr->end - 1.
 * temperature <= 0: greedy Markov chain (argmax on the backend); else each slot is sampled on
 * the host with `sampler_p` (the same filters as the target's sampling) using `u[i]` uniforms;
 * work_val needs 2 * n_vocab floats and work_idx n_vocab. threshold > 0 cuts at the first slot
 * with confidence < threshold. want_rows: fill out->corrected (always done when sampling). */
ds4rt_status ds4rt_drafter_propose(ds4rt_drafter *dr, int32_t anchor, int32_t max_draft, float threshold,
                                   const ds4rt_sampler_params *sampler_p, const double *u, float *work_val,
                                   int32_t *work_idx, bool want_rows, ds4rt_proposal *out);

#endif /* DS4RT_DSPARK_H */
