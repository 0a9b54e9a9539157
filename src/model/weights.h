/*
 * weights.h - binding GGUF tensors to the backend's weight slots (backend.h), with shape,
 * type and capability checks that name the tensor at fault (docs/MODEL.md, "Tensors").
 * Matrices are views of the file's data section, which the backend maps once (the CPU views
 * it, a GPU uploads it); small vectors are converted once to f32 and uploaded.
 *
 * The same block binder serves trunk layers ("blk.N.") and DSpark drafter stages ("mtp.N."),
 * which are DeepSeek V4 blocks without compressor, indexer or hash routing.
 */
#ifndef DS4RT_WEIGHTS_H
#define DS4RT_WEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "ds4rt.h"
#include "hparams.h"
#include "backend.h"

/* What a block holds besides the common parts. */
typedef struct ds4rt_block_kind {
    uint32_t ratio;  /* 0: window only; 4: overlapping compressor + indexer; else plain pooling */
    bool hash;       /* routed by token id through tid2eid */
} ds4rt_block_kind;

/* The backend buffers of one bound file (the mapping and the uploaded vectors); released
 * together. */
typedef struct ds4rt_weight_arena {
    ds4rt_backend *be;
    ds4rt_dbuf *mapping;        /* the data section */
    const uint8_t *map_base;    /* its host address */
    uint64_t map_bytes;
    ds4rt_dbuf **bufs;
    size_t n, cap;
    bool dry;                   /* a memory plan: shapes, types and bytes only (below) */
} ds4rt_weight_arena;

/* Maps g's data section on `be` (once per file). `dry`: maps nothing and reads no tensor data
 * (a file opened with ds4rt_gguf_open_header): every binding then checks names, shapes and
 * types and accounts its bytes as a load would, but its tensors are "no tensor" views and
 * nothing is uploaded. A dry binding only serves the memory plan; it never runs. */
ds4rt_status ds4rt_arena_init(ds4rt_weight_arena *a, ds4rt_backend *be, const ds4rt_gguf *g, bool dry);
void ds4rt_arena_free(ds4rt_weight_arena *a);

/* What a load bound (the model's memory figures) and a per-tensor hook (its progress). */
typedef struct ds4rt_bind_account {
    uint64_t mapped_bytes;   /* tensors the forward pass reads in place from the mapping */
    uint64_t owned_bytes;    /* f32 copies made in the arena */
    uint64_t seen_bytes;     /* file bytes of every tensor bound so far */
    void (*on_tensor)(void *user, uint64_t seen_bytes); /* after each tensor; may be NULL */
    void *user;
    /* after each tensor bound: its name and the bytes the load holds for it (its file bytes
     * for a view, the f32 copy's for a converted vector); may be NULL */
    void (*on_weight)(void *user, const char *name, uint64_t bytes);
    void *weight_user;
} ds4rt_bind_account;

/* Binding context: the file, the shapes, the arena for owned vectors, the account (or NULL). */
typedef struct ds4rt_binder {
    const ds4rt_gguf *g;
    const ds4rt_hparams *hp;
    ds4rt_weight_arena *arena;
    ds4rt_bind_account *account;
} ds4rt_binder;

/* Matrix `name` with ne0 == cols and ne1 == rows (trailing dims of 1 allowed; with
 * `flatten`, ne1*ne2*... == rows), used by `op`: its type must be one ds4rt computes with
 * (else DS4RT_ERR_UNSUPPORTED) and one the backend runs `op` with (else DS4RT_ERR_BACKEND). */
ds4rt_status ds4rt_bind_matrix(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                               bool flatten, ds4rt_op op, ds4rt_dweight *out);
/* Stack of `count` matrices: ne = [cols, rows, count] (used by the MoE op). */
ds4rt_status ds4rt_bind_matrices(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                                 uint32_t count, ds4rt_dweight3 *out);
/* Vector (any shape) of exactly n elements of any computable type, converted to f32. */
ds4rt_status ds4rt_bind_vector(ds4rt_binder *b, const char *name, int64_t n, ds4rt_df32 *out);
/* f32 copy of a 2-D tensor [rows][cols] of any computable type. */
ds4rt_status ds4rt_bind_table(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                              ds4rt_df32 *out);

/* Binds one DeepSeek V4 block whose tensor names start with `prefix` ("blk.3." / "mtp.0.").
 * `clamp` is unused here; routing tables are validated against E. */
ds4rt_status ds4rt_bind_block(ds4rt_binder *b, const char *prefix, ds4rt_block_kind kind,
                              ds4rt_block_weights *out);

/* HC mixing weights "<prefix>fn.weight", "<prefix>scale.weight", "<prefix>base.weight" with
 * `out_rows` outputs and `n_scale` scales. */
ds4rt_status ds4rt_bind_hc(ds4rt_binder *b, const char *prefix, uint32_t out_rows, uint32_t n_scale,
                           ds4rt_hc_weights *out);

#endif /* DS4RT_WEIGHTS_H */
