/*
 * backend.h - the backend seam: one versioned table of DeepSeek V4 operations on
 * backend-resident tensors (docs/ARCHITECTURE.md, "The backend seam").
 *
 * The model layer (src/model/, src/dspark/) composes the target layer and the DSpark stage ONCE
 * against this table; a backend implements the ops, never its own forward pass. The CPU
 * backend (src/backend/cpu/) is always compiled in; a GPU backend is a second implementation
 * of the same table.
 *
 * Rules every op follows, so that a GPU backend can capture a pass as a graph and replay it:
 *   - Tensors are opaque views (ds4rt_df32, ds4rt_di32, ds4rt_dbytes) into buffers the
 *     composition cannot dereference (struct ds4rt_dbuf is incomplete here): host memory on the
 *     CPU, device memory on a GPU. Inputs and outputs are explicit in each op's signature;
 *     temporaries are the execution context's own (sized by ctx_reserve).
 *   - Static values (layer, batch size n, shapes, weight handles) are host arguments. Values
 *     that change from step to step (position, token ids) are read from the pass input block
 *     (ds4rt_dpass), written by ONE upload at the start of a pass; counts that follow from the
 *     position are computed by the op (a ratio-R layer holding positions 0..pos has
 *     floor((pos + 1) / R) compressed rows).
 *   - No host<->device copy inside a pass except the input block in and the ids / requested
 *     logits out (download).
 *   - Batch invariance: row i of a batched op is bitwise what the op gives for that row alone.
 *
 * An op that a backend lacks for a weight type is reported by supports() at load time; an op
 * is never "unavailable" at run time.
 */
#ifndef DS4RT_BACKEND_H
#define DS4RT_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "ds4rt.h"
#include "hparams.h" /* DeepSeek V4 shapes (plain data; hparams.h makes no calls) */

/* Bumped whenever an op's signature or meaning changes; a backend states the version it
 * implements and the registry refuses a mismatch. */
#define DS4RT_BACKEND_OPS_VERSION 6

/* ---- opaque tensors ----------------------------------------------------------------------- */

/* A backend buffer. Defined only inside backends (src/backend/backend_impl.h), so the
 * composition cannot dereference one by accident. */
typedef struct ds4rt_dbuf ds4rt_dbuf;

/* Typed views: buffer + offset in elements. A NULL buf is "no tensor" (e.g. no norm weight). */
typedef struct ds4rt_df32 {
    ds4rt_dbuf *buf;
    uint64_t off;
} ds4rt_df32;
typedef struct ds4rt_di32 {
    ds4rt_dbuf *buf;
    uint64_t off;
} ds4rt_di32;
typedef struct ds4rt_dbytes {
    ds4rt_dbuf *buf;
    uint64_t off;
} ds4rt_dbytes;

static inline ds4rt_df32 ds4rt_f32(ds4rt_dbuf *b) { return (ds4rt_df32){b, 0}; }
static inline ds4rt_di32 ds4rt_i32(ds4rt_dbuf *b) { return (ds4rt_di32){b, 0}; }
static inline ds4rt_df32 ds4rt_f32_at(ds4rt_df32 t, uint64_t i) { return (ds4rt_df32){t.buf, t.off + i}; }
static inline ds4rt_di32 ds4rt_i32_at(ds4rt_di32 t, uint64_t i) { return (ds4rt_di32){t.buf, t.off + i}; }
static inline bool ds4rt_f32_none(ds4rt_df32 t) { return t.buf == NULL; }

/* Stage-timer marks per execution context (mark / mark_ms). */
#define DS4RT_MARK_SLOTS 8

/* Memory categories, accounted per backend (model info reports them). */
typedef enum ds4rt_mem_kind {
    DS4RT_MEM_WEIGHTS = 0, /* bound weights (on the CPU: views of the mapping count here too) */
    DS4RT_MEM_STATE = 1,   /* KV rings, compressed rows, frontiers, snapshots, journals */
    DS4RT_MEM_SCRATCH = 2, /* activations and op workspaces */
    DS4RT_MEM_GRAPHS = 3,  /* captured graphs (GPU) */
    DS4RT_MEM_COUNT = 4
} ds4rt_mem_kind;

/* ---- the pass input block ------------------------------------------------------------------ */

/* Layout in backend memory: int64 pos0 at byte 0 (position of row 0), int64 base at byte 8
 * (first position that has a row in a ring: 0 for the target, the drafter's restart point),
 * then int32 tokens[] from byte 16. Written once per pass by ds4rt_pass_upload. */
typedef struct ds4rt_dpass {
    ds4rt_dbuf *buf;
} ds4rt_dpass;
#define DS4RT_PASS_HEADER_BYTES 16
static inline ds4rt_di32 ds4rt_pass_tokens(ds4rt_dpass p) { return (ds4rt_di32){p.buf, DS4RT_PASS_HEADER_BYTES / 4}; }

/* ---- backend-resident weights --------------------------------------------------------------- */

/* A 2-D weight W[rows][cols] of ggml type `type`; row r at data + r * row_bytes (bytes).
 * `layout` is 0 for the file's bytes, else a layout the backend repacked the rows into
 * (prepare_weight; the CPU's are src/quant/repack.h's). */
typedef struct ds4rt_dweight {
    uint32_t type;
    ds4rt_dbytes data;
    int64_t rows;
    int64_t cols;
    uint64_t row_bytes;
    uint32_t layout;
} ds4rt_dweight;

/* A stack of equally shaped matrices (routed experts): matrix e at first.data + e * stride. */
typedef struct ds4rt_dweight3 {
    ds4rt_dweight first;
    uint32_t count;
    uint64_t stride;
} ds4rt_dweight3;

static inline ds4rt_dweight ds4rt_dweight3_at(const ds4rt_dweight3 *w, uint32_t e) {
    ds4rt_dweight m = w->first;
    m.data.off += (uint64_t)e * w->stride;
    return m;
}

/* Hyper-connection mixing: fn is [out rows][N*D]; scale has 3 (or 1 for a head), base `out`. */
typedef struct ds4rt_hc_weights {
    ds4rt_dweight fn;
    ds4rt_df32 scale;
    ds4rt_df32 base;
} ds4rt_hc_weights;

typedef struct ds4rt_attn_weights {
    ds4rt_df32 norm;                /* attn_norm [D] */
    ds4rt_dweight q_a, q_b, kv;     /* [Rq][D], [H*d_h][Rq], [d_h][D] */
    ds4rt_df32 q_a_norm, kv_norm;   /* [Rq], [d_h] */
    ds4rt_df32 sinks;               /* [H] */
    ds4rt_dweight out_a, out_b;     /* [G*Ro][group_dim], [D][G*Ro] */
    /* compressor (ratio != 0) */
    ds4rt_dweight c_kv, c_gate;     /* [coff*d_h][D] */
    ds4rt_df32 c_ape;               /* [ratio][coff*d_h] */
    ds4rt_df32 c_norm;              /* [d_h] */
    /* indexer (ratio == 4) */
    ds4rt_dweight i_qb, i_proj;     /* [Hi*d_i][Rq], [Hi][D] */
    ds4rt_dweight ic_kv, ic_gate;   /* [2*d_i][D] */
    ds4rt_df32 ic_ape;              /* [4][2*d_i] */
    ds4rt_df32 ic_norm;             /* [d_i] */
} ds4rt_attn_weights;

typedef struct ds4rt_moe_weights {
    ds4rt_df32 norm;                /* ffn_norm [D] */
    ds4rt_dweight gate_inp;         /* [E][D] router */
    ds4rt_df32 bias;                /* [E] selection bias; none on hash layers */
    ds4rt_di32 tid2eid;             /* [V][k] on hash layers (validated < E), else none */
    ds4rt_dweight3 gate_exps, up_exps, down_exps; /* [F][D] x E, [F][D] x E, [D][F] x E */
    ds4rt_dweight gate_sh, up_sh, down_sh;         /* [F*ns][D], [F*ns][D], [D][F*ns] */
} ds4rt_moe_weights;

typedef struct ds4rt_block_weights {
    ds4rt_hc_weights hc_attn, hc_ffn;
    ds4rt_attn_weights attn;
    ds4rt_moe_weights moe;
} ds4rt_block_weights;

/* ---- parameters of row ops ------------------------------------------------------------------- */

/* RoPE of one layer kind: the LAST n_rot dims of a vector are rotated (docs/MODEL.md, RoPE). */
typedef struct ds4rt_rope {
    uint32_t n_rot;
    double base;
    bool yarn;
    double yarn_scale; /* 1 / factor */
    double yarn_lo, yarn_hi;
} ds4rt_rope;

/* Post-processing of an emitted compressed row (docs/MODEL.md, Numerics). */
typedef enum ds4rt_comp_post {
    DS4RT_COMP_POST_NONE = 0,         /* llama.cpp-compatible numerics */
    DS4RT_COMP_POST_FP8 = 1,          /* attention rows: FP8 round trip of dims [0, d_nope) */
    DS4RT_COMP_POST_HADAMARD_FP4 = 2, /* indexer rows: Hadamard, then FP4 round trip */
    DS4RT_COMP_POST_HADAMARD = 3      /* indexer rows without the FP4 simulation */
} ds4rt_comp_post;

/* A streaming KV compressor of ratio R (docs/MODEL.md, "Compressors"). */
typedef struct ds4rt_comp_desc {
    uint32_t ratio;    /* R; coff = 2 (overlapping windows) when R == 4 */
    uint32_t dim;      /* d: emitted row width */
    uint32_t d_nope;   /* FP8 applies to [0, d_nope) */
    ds4rt_df32 ape;    /* [R][coff*d] */
    ds4rt_df32 norm;   /* [d] */
    float rms_eps;
    ds4rt_rope rope;   /* compressed-layer RoPE, at the block's first position */
    ds4rt_comp_post post;
} ds4rt_comp_desc;

/* Its state: the frontier (mutated in place), the snapshot taken before a pass, the journal of
 * the pass's inputs (u | g per row), and the emitted rows (append-only; the row count after
 * positions 0..pos is floor((pos + 1) / R)). */
typedef struct ds4rt_comp_state {
    ds4rt_df32 kv, score;           /* [rows][width]; score -inf where empty */
    ds4rt_df32 snap_kv, snap_score; /* [rows][width] */
    ds4rt_df32 journal;             /* [max_batch][2 * width] */
    ds4rt_df32 out;                 /* [cap][dim] */
    uint32_t rows;                  /* coff * R */
    uint32_t width;                 /* coff * d */
    uint32_t cap;                   /* rows `out` holds */
} ds4rt_comp_state;

/* The keys of an attention op, described by index (K = V rows of `dim` floats). For batch row i
 * at position pos = pos0 + i, in this order:
 *   1. ring rows of positions [max(last - window + 1, base), last] where last = pos (causal) or
 *      pos0 - 1 (block mode: every row sees the same window before the block); the row of
 *      position q is ring[q % ring_cap];
 *   2. block mode: all n rows of `block_rows` (DSpark: non-causal inside the block);
 *   3. comp_ratio != 0: compressed rows [0, floor((pos + 1) / comp_ratio)) of `comp`, or, when
 *      `sel` is given, rows sel[i * sel_stride + j] for j < n_sel[i] (the indexer's choice). */
typedef struct ds4rt_attn_keys {
    ds4rt_df32 ring;
    uint32_t ring_cap;
    uint32_t window;
    bool block;
    ds4rt_df32 block_rows;
    uint32_t comp_ratio;
    ds4rt_df32 comp;
    ds4rt_di32 sel, n_sel; /* sel.buf NULL: every visible compressed row */
    uint32_t sel_stride;
} ds4rt_attn_keys;

/* Largest sizes a context's ops will see, for its workspaces. */
typedef struct ds4rt_limits {
    int64_t max_rows; /* rows of one op call */
    int64_t max_keys; /* keys one query can see */
    int64_t max_comp; /* compressed rows one layer can hold */
} ds4rt_limits;

/* ---- the op table ---------------------------------------------------------------------------- */

/* Ops as the capability table names them. */
typedef enum ds4rt_op {
    DS4RT_OP_GET_ROWS = 0,     /* embedding rows (and Markov rows): weight type = the table's */
    DS4RT_OP_HC_PRE,           /* weight type = fn's */
    DS4RT_OP_HC_POST,
    DS4RT_OP_HC_HEAD,          /* weight type = fn's */
    DS4RT_OP_RMS_NORM,
    DS4RT_OP_MATMUL,           /* weight type = the matrix's */
    DS4RT_OP_ROPE,
    DS4RT_OP_FP8_ROUND,
    DS4RT_OP_FP4_ROUND,
    DS4RT_OP_HADAMARD,
    DS4RT_OP_KV_STORE,
    DS4RT_OP_COMPRESSOR,       /* comp_reset, comp_snapshot, comp_update, comp_rollback */
    DS4RT_OP_INDEXER_TOPK,
    DS4RT_OP_ATTENTION,
    DS4RT_OP_GROUPED_OUT,      /* weight type = out_a's (out_b is a MATMUL) */
    DS4RT_OP_MOE,              /* checked for the router's, each expert stack's and the shared expert's types */
    DS4RT_OP_CAPTURE,
    DS4RT_OP_ARGMAX,
    DS4RT_OP_ADD,
    DS4RT_OP_NONFINITE,
    DS4RT_OP_DSPARK_CONFIDENCE,
    DS4RT_OP_NORM_ROPE,        /* since version 6 */
    DS4RT_OP_COUNT
} ds4rt_op;

typedef struct ds4rt_backend ds4rt_backend;
typedef struct ds4rt_backend_ops ds4rt_backend_ops;

/* How a backend runs a pass it was told of by pass_begin (since version 5). */
typedef enum ds4rt_pass_how {
    DS4RT_PASS_PLAIN = 0,    /* the ops run as they are issued */
    DS4RT_PASS_RECORDED = 1, /* recorded as a graph, run at pass_end: a first pass of its shape */
    DS4RT_PASS_REPLAYED = 2, /* a recorded graph replayed: the composition issues nothing */
} ds4rt_pass_how;

/* Branch points of a composition (the op table's `branch`). */
typedef enum ds4rt_branch {
    DS4RT_BRANCH_SIDE = 0, /* the ops that follow start a side branch */
    DS4RT_BRANCH_MAIN = 1, /* the ops that follow are the main branch again */
    DS4RT_BRANCH_JOIN = 2, /* the ops that follow wait for the side branch */
} ds4rt_branch;

/* A per-session execution context (CPU: thread pool + workspaces; GPU: stream, workspaces,
 * graphs). Backends embed this as the first member of their own context. */
typedef struct ds4rt_bctx {
    const ds4rt_backend_ops *ops;
    ds4rt_backend *be;
} ds4rt_bctx;

/* Every op returns DS4RT_OK or an error with a message; `n` is always the static row count. */
struct ds4rt_backend_ops {
    uint32_t version; /* DS4RT_BACKEND_OPS_VERSION */

    /* Capability: can `op` run with weights of ggml type `type` (DS4RT_TYPE_F32 for ops
     * without a weight matrix)? */
    bool (*supports)(const ds4rt_backend *be, ds4rt_op op, uint32_t type);

    /* ---- memory (backend level: weights outlive sessions) ---- */
    /* A zero-filled buffer of `bytes`, accounted under `kind`. DS4RT_ERR_OUT_OF_MEMORY names it. */
    ds4rt_status (*alloc)(ds4rt_backend *be, ds4rt_mem_kind kind, uint64_t bytes, ds4rt_dbuf **out);
    /* Read-only weights from host memory that stays valid while the backend lives (the GGUF
     * mapping): the CPU views it, a GPU uploads it (or views it on unified memory). */
    ds4rt_status (*map_weights)(ds4rt_backend *be, const void *host, uint64_t bytes, ds4rt_dbuf **out);
    /* Weights from a host array that may be freed after the call (converted f32 vectors). */
    ds4rt_status (*upload_weights)(ds4rt_backend *be, const void *host, uint64_t bytes, ds4rt_dbuf **out);
    /* Optional (NULL: matrices are used as bound; since version 4). Called for every matrix
     * bound for a product (not for get_rows' tables): `count` matrices of w's shape, `stride`
     * bytes apart (1 and 0 for one matrix). A backend whose kernels want another layout (the
     * CPU's avx512-vnni path: Q8_0 in groups of 8 blocks, docs/QUANTS.md) sets *bytes to the
     * size of its copy and w->layout, and unless `dry` (a memory plan: w holds no data) makes
     * the copy in a buffer of its own (*owned, released with the weights) and points w at it;
     * otherwise *bytes = 0, *owned = NULL and w is left as it is. */
    ds4rt_status (*prepare_weight)(ds4rt_backend *be, ds4rt_dweight *w, uint32_t count, uint64_t stride, bool dry,
                                   ds4rt_dbuf **owned, uint64_t *bytes);
    void (*release)(ds4rt_backend *be, ds4rt_dbuf *buf);

    /* ---- execution contexts ---- */
    ds4rt_status (*ctx_create)(ds4rt_backend *be, int n_threads, ds4rt_bctx **out);
    /* Grows the context's workspaces to at least `lim` for models of shape `hp`. */
    ds4rt_status (*ctx_reserve)(ds4rt_bctx *ctx, const ds4rt_hparams *hp, const ds4rt_limits *lim);
    void (*ctx_free)(ds4rt_bctx *ctx);
    int (*ctx_threads)(const ds4rt_bctx *ctx);
    ds4rt_status (*upload)(ds4rt_bctx *ctx, ds4rt_dbuf *dst, uint64_t off, const void *src, uint64_t bytes);
    ds4rt_status (*download)(ds4rt_bctx *ctx, ds4rt_dbuf *src, uint64_t off, void *dst, uint64_t bytes);
    /* Waits for every op issued on the context. */
    ds4rt_status (*synchronize)(ds4rt_bctx *ctx);

    /* ---- stage timers (since version 3) ----
     * mark(slot) stamps the point, in issue order, where every op issued before it has
     * finished: the host clock on the CPU (its ops have finished when they return), a device
     * event on a GPU. mark_ms(from, to) waits for mark `to` and gives the time between two
     * marks in milliseconds. A stage timer is therefore the backend's time for the stage on
     * every backend, not the host's time to issue it (docs/GPU.md, "Stage timers"). Slots are
     * the context's own, < DS4RT_MARK_SLOTS; no mark between pass_begin and pass_end. */
    ds4rt_status (*mark)(ds4rt_bctx *ctx, uint32_t slot);
    ds4rt_status (*mark_ms)(ds4rt_bctx *ctx, uint32_t from, uint32_t to, double *ms);

    /* ---- graphs (optional: NULL where the backend does not capture; since version 2) ----
     * The ops the composition issues between pass_begin and pass_end form the pass `key` (a
     * hash of its static shape: the same key means the same ops on the same buffers, with the
     * dynamic values read from the pass block). If the backend holds a graph for `key` it
     * replays it (*how = DS4RT_PASS_REPLAYED), and the composition issues nothing until
     * pass_end; otherwise it may record the ops (DS4RT_PASS_RECORDED: they run at pass_end,
     * and the pass's time includes the recording) or run them as issued (DS4RT_PASS_PLAIN).
     * pass_end(ok = false) discards a recording after a failed op. Nothing between the two may
     * read back or wait. `n` (since version 4) is the pass's token count: a backend may choose
     * launch options by it (the GPU backend: programmatic dependent launch up to a pass size,
     * docs/GPU.md). */
    ds4rt_status (*pass_begin)(ds4rt_bctx *ctx, uint64_t key, int64_t n, ds4rt_pass_how *how);
    ds4rt_status (*pass_end)(ds4rt_bctx *ctx, bool ok);

    /* ---- branches (optional: NULL where ops run one after another; since version 5) ----
     * branch(DS4RT_BRANCH_SIDE): the ops issued until branch(DS4RT_BRANCH_MAIN) form a side
     * branch, which may run beside the ops issued after it until branch(DS4RT_BRANCH_JOIN).
     * The composition promises what makes that safe: a side branch reads only what was
     * written before it began or by itself, and the main ops between MAIN and JOIN neither
     * read nor write what the side branch writes, nor write what it reads. Every result is
     * then that of issue order, so a backend may ignore branches. pass_end, synchronize and
     * marks join an open branch. */
    ds4rt_status (*branch)(ds4rt_bctx *ctx, ds4rt_branch which);

    /* ---- ops ---- */
    /* out[i][c][:] = dequantised row ids[i] of w, for c < copies (out rows are copies*cols). */
    ds4rt_status (*get_rows)(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_di32 ids, int64_t n, uint32_t copies,
                             ds4rt_df32 out);
    /* HC pre of X [n][N*D]: mix = fn . RMS(X) (no weight), Sinkhorn coefficients pre/post/comb,
     * xn[i] = RMSNorm(sum_h pre[h] X[i][h], norm). post [n][N], comb [n][N*N] are kept for
     * hc_post. */
    ds4rt_status (*hc_pre)(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *w,
                           ds4rt_df32 norm, ds4rt_df32 X, ds4rt_df32 xn, ds4rt_df32 post, ds4rt_df32 comb);
    /* X_out[i][j] = post[i][j] f[i] + sum_h comb[i][h*N + j] X[i][h]; X_out must not alias X. */
    ds4rt_status (*hc_post)(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 f,
                            ds4rt_df32 post, ds4rt_df32 comb, ds4rt_df32 X_out);
    /* y[i] = sum_h w_h X[i][h], w = sigmoid(scale * fn . RMS(X[i]) + base) + eps (before the
     * final norm). */
    ds4rt_status (*hc_head)(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *head,
                            ds4rt_df32 X, ds4rt_df32 y);
    /* out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for `rows` contiguous rows of `width`
     * (w none: no weight; per-head norms are rows = n * heads). out may alias x. */
    ds4rt_status (*rms_norm)(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_df32 w, float eps,
                             ds4rt_df32 out);
    /* y[i][r] = sum_c W[r][c] x[i][c] (activations rounded as docs/QUANTS.md says). */
    ds4rt_status (*matmul)(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_df32 x, int64_t n, ds4rt_df32 y);
    /* Rotates the tail of each of `heads` vectors of `dim` in row i (row width heads*dim) at
     * position pos0 + i; sign +1 forward, -1 inverse. */
    ds4rt_status (*rope)(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim,
                         const ds4rt_rope *r, int sign, ds4rt_df32 x);
    /* In place, per head: rms_norm of each of the `heads` vectors of `dim` in row i (weight w of
     * dim floats, or none), then rope +1 at pos0 + i; bitwise rms_norm(rows = n * heads) then
     * rope. One op (since version 6) because the keys and the queries always take the two
     * together, and a GPU then runs them as one kernel instead of two on the decode's chain. */
    ds4rt_status (*norm_rope)(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim,
                              ds4rt_df32 w, float eps, const ds4rt_rope *r, ds4rt_df32 x);
    /* FP8 E4M3 (block 64) / FP4 E2M1 (block 32) round trip of dims [0, width) of `rows` rows
     * spaced `stride` floats apart; Hadamard rotation of `rows` contiguous rows of `width`. */
    ds4rt_status (*fp8_round)(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x);
    ds4rt_status (*fp4_round)(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x);
    ds4rt_status (*hadamard)(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x);
    /* ring[(pos0 + i) % ring_cap] = src[i] (rows of dim). */
    ds4rt_status (*kv_store)(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t dim, ds4rt_df32 src,
                             ds4rt_df32 ring, uint32_t ring_cap);
    /* Compressor: empty frontier; snapshot before a pass; push row i (u, g of width coff*d,
     * ape not yet added) at position pos0 + i, journaling it at i and emitting a row when
     * pos0 + i closes a block; restore the snapshot and replay the first `keep` journaled rows
     * of the pass that began at batch_start (rollback runs between passes: host arguments). */
    ds4rt_status (*comp_reset)(ds4rt_bctx *ctx, const ds4rt_comp_state *cs);
    ds4rt_status (*comp_snapshot)(ds4rt_bctx *ctx, const ds4rt_comp_state *cs);
    ds4rt_status (*comp_update)(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, const ds4rt_comp_desc *c,
                                const ds4rt_comp_state *cs, ds4rt_df32 u, ds4rt_df32 g);
    ds4rt_status (*comp_rollback)(ds4rt_bctx *ctx, const ds4rt_comp_desc *c, const ds4rt_comp_state *cs,
                                  int64_t batch_start, int64_t keep);
    /* Lightning indexer of row i (position pos): over the floor((pos + 1) / 4) visible rows r of
     * `rows` [.][d_i], score = sum_h iw[i][h] / sqrt(d_i * Hi) * relu(iq[i][h] . r); sel[i][..]
     * = the top idx_topk in ascending index order (all rows when they are no more), n_sel[i]
     * their count. */
    ds4rt_status (*indexer_topk)(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 iq,
                                 ds4rt_df32 iw, ds4rt_df32 rows, ds4rt_di32 sel, ds4rt_di32 n_sel);
    /* Attention with per-head sinks: out[i][h] = softmax-with-sink(q[i][h] . keys / sqrt(dim))
     * weighted keys, over the keys `k` describes for row i. out may alias q. unrope (since
     * version 6; NULL: none): each output head then rotated back, bitwise rope(unrope, -1) on
     * out, which DeepSeek V4 always does next (one step less on a GPU's decode chain). */
    ds4rt_status (*attention)(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim,
                              const ds4rt_attn_keys *k, ds4rt_df32 sinks, ds4rt_df32 q, ds4rt_df32 out,
                              const ds4rt_rope *unrope);
    /* f = out_b . concat_g(out_a[g] . o[:, group g]) - the grouped low-rank output projection. */
    ds4rt_status (*grouped_out)(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_dweight *out_a,
                                const ds4rt_dweight *out_b, ds4rt_df32 o, ds4rt_df32 f);
    /* The MoE sublayer: router (sqrt-softplus; biased top-k, or tid2eid of the row's token from
     * the pass block), experts with SwiGLU clamped at `clamp`, scaled weights, plus the shared
     * expert (clamp_sh); f[i] = sum of slot outputs in slot order + shared. */
    ds4rt_status (*moe)(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n,
                        const ds4rt_moe_weights *w, float clamp, float clamp_sh, ds4rt_df32 x, ds4rt_df32 f);
    /* dst[i * dst_stride + d] = mean over the N streams of X[i][.][d] (DSpark's capture). */
    ds4rt_status (*capture)(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 dst,
                            uint64_t dst_stride);
    /* ids[r] = index of the largest of row r (lowest index on ties; NaN never wins). */
    ds4rt_status (*argmax)(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_di32 ids);
    /* out = a + b, `count` floats. */
    ds4rt_status (*add)(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 a, ds4rt_df32 b, ds4rt_df32 out);
    /* out[0] = number of non-finite values among x[0..count). */
    ds4rt_status (*nonfinite)(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 x, ds4rt_di32 out);
    /* out[0] = sigmoid(proj . [h ; state]) with h of d floats and state of r floats, summed in
     * float64 (DSpark's confidence head). */
    ds4rt_status (*dspark_confidence)(ds4rt_bctx *ctx, uint32_t d, uint32_t r, ds4rt_df32 proj, ds4rt_df32 h,
                                      ds4rt_df32 state, ds4rt_df32 out);
};

/* ---- backend objects and the registry (backend.c) --------------------------------------------- */

/* Kinds, numbered as the public ds4rt_backend_kind. */
typedef enum ds4rt_bkind {
    DS4RT_BKIND_AUTO = 0,
    DS4RT_BKIND_CPU = 1,
    DS4RT_BKIND_CUDA = 2,
    DS4RT_BKIND_HIP = 3
} ds4rt_bkind;

/* A compiled-in backend: its name, kind, devices, and a constructor. */
typedef struct ds4rt_backend_entry {
    const char *name;
    ds4rt_bkind kind;
    /* Devices usable now (0: compiled in, but nothing to run on). */
    int (*device_count)(void);
    ds4rt_status (*create)(int device, int n_threads, ds4rt_backend **out);
    /* true: AUTO never picks it, only a request by kind does (HIP-CPU, a developer aid that runs
     * the GPU kernels on host threads) */
    bool explicit_only;
} ds4rt_backend_entry;

/* Compiled-in backends, CPU first. */
size_t ds4rt_backend_registry(const ds4rt_backend_entry *const **out);
const ds4rt_backend_entry *ds4rt_backend_find(ds4rt_bkind kind);

/* Opens the backend of `kind` (AUTO: the first GPU backend with a device, else the CPU). */
ds4rt_status ds4rt_backend_open(ds4rt_bkind kind, int device, int n_threads, ds4rt_backend **out);
void ds4rt_backend_close(ds4rt_backend *be);

const ds4rt_backend_ops *ds4rt_backend_get_ops(const ds4rt_backend *be);
const char *ds4rt_backend_name(const ds4rt_backend *be);
uint64_t ds4rt_backend_bytes(const ds4rt_backend *be, ds4rt_mem_kind kind);
const char *ds4rt_op_name(ds4rt_op op);

/* DS4RT_OK if `be` runs `op` with weights of `type`, else DS4RT_ERR_BACKEND naming the
 * backend, the op, the type and `what` (the tensor or stage that needs it). */
ds4rt_status ds4rt_backend_require(const ds4rt_backend *be, ds4rt_op op, uint32_t type, const char *what);

/* The Q8->F16 expansion cache of a backend (docs/CACHE.md). has_cache: whether the backend
 * has one at all (the CPU's integer Q8_0 kernels make it pointless there); expand: keep an F16
 * copy of the Q8_0 matrix `w` (its bytes in *bytes) that the backend's products use from then
 * on, DS4RT_ERR_OUT_OF_MEMORY naming the cache when the device is full; hits: products that
 * used a copy. unified: the backend's device shares memory with the host. */
bool ds4rt_backend_has_cache(const ds4rt_backend *be);
ds4rt_status ds4rt_backend_cache_expand(ds4rt_backend *be, const ds4rt_dweight *w, uint64_t *bytes);
uint64_t ds4rt_backend_cache_hits(const ds4rt_backend *be);
bool ds4rt_backend_unified(const ds4rt_backend *be);

/* DS4RT_OK if `be`'s attention takes heads of `head_dim` dims, else DS4RT_ERR_BACKEND naming
 * the backend's limit (a GPU kernel keeps a head's share per lane in registers). */
ds4rt_status ds4rt_backend_require_head_dim(const ds4rt_backend *be, uint32_t head_dim, const char *what);

/* Writes the pass input block (one upload): pos0, base, tokens[0..n). */
ds4rt_status ds4rt_pass_upload(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t pos0, int64_t base, const int32_t *tokens,
                               int64_t n);

/* Bytes of a pass block holding `max_tokens` ids. */
static inline uint64_t ds4rt_pass_bytes(int64_t max_tokens) {
    return DS4RT_PASS_HEADER_BYTES + 4 * (uint64_t)(max_tokens > 0 ? max_tokens : 1);
}

/* Convenience: download `count` floats / int32s of a view into host memory. */
ds4rt_status ds4rt_download_f32(ds4rt_bctx *ctx, ds4rt_df32 src, uint64_t count, float *dst);
ds4rt_status ds4rt_download_i32(ds4rt_bctx *ctx, ds4rt_di32 src, uint64_t count, int32_t *dst);

/* A stage clock over the context's marks (mark / mark_ms): start() marks the beginning, each
 * lap() the backend time since the previous lap (or the start). It alternates two slots, so a
 * composition's consecutive stages are laps of one clock; the composition holds one clock at
 * a time per context. */
typedef struct ds4rt_stage_clock {
    ds4rt_bctx *ctx;
    uint32_t slot;
} ds4rt_stage_clock;
ds4rt_status ds4rt_clock_start(ds4rt_stage_clock *c, ds4rt_bctx *ctx);
ds4rt_status ds4rt_clock_lap(ds4rt_stage_clock *c, double *ms);

#endif /* DS4RT_BACKEND_H */
