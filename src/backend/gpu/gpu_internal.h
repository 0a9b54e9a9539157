/*
 * gpu_internal.h - the GPU backend's objects (docs/GPU.md, "The GPU backend"): the backend's
 * device data, the per-session context (a created stream and the ops' device workspaces), and
 * the one place where a view becomes a device address. Only src/backend/gpu/ includes this.
 *
 * One source serves gpu=cuda, gpu=hip and gpu=hipcpu: the kernels are reached only through the
 * plain-C launchers of hip/ (gk.h and the area headers), never through a HIP or CUDA header.
 */
#ifndef DS4RT_GPU_INTERNAL_H
#define DS4RT_GPU_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "backend_impl.h"
#include "gk.h"
#include "internal.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

/* An F16 copy of a Q8_0 matrix (the expansion cache, gpu_cache.c). */
typedef struct gpu_cache_entry {
    const uint8_t *src;       /* the Q8_0 matrix's device address */
    int64_t rows, cols;
    uint64_t row_bytes;
    ds4rt_dbuf *f16;          /* [rows][cols] IEEE half */
} gpu_cache_entry;

/* The backend's own data (ds4rt_backend.impl). */
typedef struct gpu_impl {
    char device_name[640];
    int integrated;           /* unified memory with the host (APU): weights are viewed, not copied */
    uint64_t total_bytes;
    void *load_stream;        /* weight uploads */
    /* weight binding on a unified-memory device: views made, and uploads made instead (with why) */
    uint32_t weight_views, weight_view_fallbacks;
    char weight_view_reason[200];
    /* the Q8->F16 expansion cache */
    gpu_cache_entry *cache;
    size_t n_cache, cap_cache;
    _Atomic uint64_t cache_hits;
} gpu_impl;

static inline gpu_impl *gpu_be(const ds4rt_backend *be) { return (gpu_impl *)be->impl; }

/* Device temporaries of the ops of one context, carved from one device buffer (scratch). Sized
 * by ctx_reserve for the largest batch, key count and compressed-row count, so no op allocates. */
typedef struct gpu_workspace {
    ds4rt_limits lim;
    ds4rt_dbuf *buf;          /* the device buffer the views below are carved from */
    uint64_t bytes;
    /* grouped output projection */
    ds4rt_df32 og;            /* [rows][group_dim] one group's input */
    ds4rt_df32 olow;          /* [rows][Ro] one group's output */
    ds4rt_df32 low;           /* [rows][G*Ro] */
    /* MoE */
    ds4rt_df32 router;        /* [rows][E] router logits */
    ds4rt_di32 sel;           /* [rows][k] chosen experts */
    ds4rt_df32 selw;          /* [rows][k] their weights */
    ds4rt_df32 eg, eu;        /* [rows*k][F] expert gate/up, per (row, slot) */
    ds4rt_df32 yslot;         /* [rows][k][D] expert outputs per slot */
    ds4rt_df32 shg, shu;      /* [rows][F*ns] shared expert */
    ds4rt_df32 shy;           /* [rows][D] */
    ds4rt_di32 tickets;       /* [rows][heads] attention's split counters (zero between calls) */
    uint64_t n_tickets;
    /* kernel scratch the launchers ask for (…_scratch_bytes()) */
    void *kscratch;
    uint64_t kscratch_bytes;
    /* converted activations of the products (grown when a shape needs more: gpu_act), one
     * buffer per branch so that products beside each other do not share one */
    ds4rt_dbuf *act, *side_act;
} gpu_workspace;

/* A captured pass (gpu_graphs.c). */
typedef struct gpu_graph {
    uint64_t key;
    void *exec;
} gpu_graph;
#define GPU_MAX_GRAPHS 64

typedef struct gpu_ctx {
    ds4rt_bctx base;          /* first: the composition sees only this */
    void *stream;             /* created stream (HIP-CPU's null stream may reorder work) */
    gpu_workspace ws;
    /* graphs */
    bool graphs_on, recording;
    uint64_t recording_key, graph_replays;
    gpu_graph *graphs;
    size_t n_graphs;
    void *marks[DS4RT_MARK_SLOTS]; /* stage-timer events, created at a slot's first mark */
    uint32_t marked;               /* bit per slot that holds a recorded event */
    /* the side branch (gpu_side_fork): a second stream, its fork and join events */
    void *side, *fork_ev, *join_ev;
    bool side_pending;             /* work issued on `side` that `stream` has not joined */
    bool side_sinkhorn;            /* hc_pre's Sinkhorn on the side branch (DS4RT_GPU_SIDE) */
    bool branches;                 /* the op table's branches run on `side` (DS4RT_GPU_BRANCH) */
    bool merges;                   /* launches merged inside an op (DS4RT_GPU_MERGE; gpu_moe.c) */
    bool on_side;                  /* ops are being issued to the side branch */
} gpu_ctx;

static inline gpu_ctx *gctx(ds4rt_bctx *ctx) { return (gpu_ctx *)ctx; }
/* The stream an op is issued to: the side stream inside a side branch (gpu_branch). */
static inline void *gstream(ds4rt_bctx *ctx) {
    gpu_ctx *c = (gpu_ctx *)ctx;
    return c->on_side ? c->side : c->stream;
}

/* Device addresses of views (NULL for "no tensor"). */
static inline float *DF(ds4rt_df32 t) { return t.buf ? (float *)t.buf->ptr + t.off : NULL; }
static inline int32_t *DI(ds4rt_di32 t) { return t.buf ? (int32_t *)t.buf->ptr + t.off : NULL; }
static inline const uint8_t *DB(ds4rt_dbytes t) { return t.buf ? (const uint8_t *)t.buf->ptr + t.off : NULL; }
/* The pass block: int64 pos0 at byte 0, int64 base at 8, int32 tokens from 16 (backend.h). */
static inline const int64_t *DPASS(ds4rt_dpass p) { return (const int64_t *)p.buf->ptr; }
static inline const int32_t *DTOK(ds4rt_dpass p) {
    return (const int32_t *)((const uint8_t *)p.buf->ptr + DS4RT_PASS_HEADER_BYTES);
}

/* At least `need` bytes of activation scratch on the context (grown, outside any captured
 * graph, the first time a shape needs more; counted as scratch). */
ds4rt_status gpu_act(ds4rt_bctx *ctx, uint64_t need, void **ptr, uint64_t *bytes);

/* A launcher's status as a ds4rt status naming the op (its message from ds4rt_gk_last_error). */
ds4rt_status gpu_check(int gk_status, const char *op);
#define GK(call, op) TRY(gpu_check((call), (op)))

/* Names of the memory categories, for messages ("weights", "state", "scratch", "graphs"). */
const char *gpu_mem_kind_name(ds4rt_mem_kind kind);

/* memory (gpu_memory.c) */
ds4rt_status gpu_alloc(ds4rt_backend *be, ds4rt_mem_kind kind, uint64_t bytes, ds4rt_dbuf **out);
ds4rt_status gpu_map_weights(ds4rt_backend *be, const void *host, uint64_t bytes, ds4rt_dbuf **out);
ds4rt_status gpu_upload_weights(ds4rt_backend *be, const void *host, uint64_t bytes, ds4rt_dbuf **out);
void gpu_release(ds4rt_backend *be, ds4rt_dbuf *buf);

/* contexts and copies (gpu_context.c) */
ds4rt_status gpu_ctx_create(ds4rt_backend *be, int n_threads, ds4rt_bctx **out);
ds4rt_status gpu_ctx_reserve(ds4rt_bctx *ctx, const ds4rt_hparams *hp, const ds4rt_limits *lim);
void gpu_ctx_free(ds4rt_bctx *ctx);
int gpu_ctx_threads(const ds4rt_bctx *ctx);
ds4rt_status gpu_upload(ds4rt_bctx *ctx, ds4rt_dbuf *dst, uint64_t off, const void *src, uint64_t bytes);
ds4rt_status gpu_download(ds4rt_bctx *ctx, ds4rt_dbuf *src, uint64_t off, void *dst, uint64_t bytes);
ds4rt_status gpu_synchronize(ds4rt_bctx *ctx);
/* The side branch: work that may run beside what follows it on the context's stream (hc_pre's
 * Sinkhorn, which only hc_post reads; the op table's branches, gpu_branch). fork gives the
 * second stream, waiting for everything issued so far; done closes the branch; join makes the
 * context's stream wait for every branch done so far (a no-op without one). A fork while an
 * earlier branch is unjoined queues behind it on the side stream (one stream, in order), so
 * hc_pre's Sinkhorn never waits for a join. join also closes a branch left open by a failed
 * op; pass_end, synchronize and marks join, so a captured graph ends joined and a stage timer
 * covers it. */
ds4rt_status gpu_side_fork(ds4rt_bctx *ctx, void **side);
ds4rt_status gpu_side_done(ds4rt_bctx *ctx);
ds4rt_status gpu_side_join(ds4rt_bctx *ctx);
/* The op table's branch (backend.h): SIDE forks and issues the ops that follow on the side
 * stream (with their own activation scratch), MAIN closes the branch, JOIN joins it. With
 * DS4RT_GPU_BRANCH=0 every op stays on the context's stream, in issue order (same bits). */
ds4rt_status gpu_branch(ds4rt_bctx *ctx, ds4rt_branch which);
ds4rt_status gpu_mark(ds4rt_bctx *ctx, uint32_t slot);
ds4rt_status gpu_mark_ms(ds4rt_bctx *ctx, uint32_t from, uint32_t to, double *ms);
/* The Q8->F16 cache (gpu_cache.c): expand `w`; the F16 view of `w` (or of a block of its
 * rows) if it has a copy, counting a hit; whether it has one (no hit counted); products that
 * used one; release every copy. */
ds4rt_status gpu_cache_expand(ds4rt_backend *be, const ds4rt_dweight *w, uint64_t *bytes);
bool gpu_cache_find(ds4rt_backend *be, const ds4rt_dweight *w, ds4rt_dweight *f16);
bool gpu_cache_holds(ds4rt_backend *be, const ds4rt_dweight *w);
uint64_t gpu_cache_hits(const ds4rt_backend *be);
void gpu_cache_free(ds4rt_backend *be);

/* Bytes of kernel scratch (the launchers' ..._scratch_bytes()) the ops of a context need for
 * models of shape `hp` within `lim` (gpu_ops.c). */
uint64_t gpu_kernel_scratch_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim);
/* Bytes of converted activations the products need for `lim` (gpu_act's first size). */
uint64_t gpu_mm_act_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim);

/* graphs (gpu_graphs.c) */
void gpu_graphs_init(gpu_ctx *c);
void gpu_graphs_free(gpu_ctx *c);
ds4rt_status gpu_pass_begin(ds4rt_bctx *ctx, uint64_t key, int64_t n, ds4rt_pass_how *how);
ds4rt_status gpu_pass_end(ds4rt_bctx *ctx, bool ok);

/* The op table's ops of this backend (gpu_backend.c), for contexts to point at. */
extern const ds4rt_backend_ops ds4rt_gpu_ops;

#endif /* DS4RT_GPU_INTERNAL_H */
