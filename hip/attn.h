/*
 * attn.h - launchers of the attention-side kernels (hip/attn.hip): RMS norm, RoPE with YaRN,
 * the FP8/FP4 simulations, the Hadamard rotation, the raw KV ring store, the streaming KV
 * compressor (reset / snapshot / update / rollback), the lightning indexer with its top-k, and
 * attention with per-head sinks over keys described by index. Each mirrors the op of the same
 * name in src/backend/backend.h, with raw device pointers instead of views (docs/GPU.md,
 * "Attention kernels").
 *
 * Conventions (hip/gk.h): d_* are device addresses; launchers only enqueue on `stream`; they
 * never allocate (scratch is passed in, sized by the matching *_scratch_bytes function); the
 * values that change from step to step are read on the device from the pass block `d_pass`
 * (backend.h's layout: int64 pos0 at byte 0, int64 base at byte 8), so a pass that calls them
 * can be captured as a graph and replayed at another position.
 */
#ifndef DS4RT_GK_ATTN_H
#define DS4RT_GK_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "gk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RoPE of one layer kind, field for field backend.h's ds4rt_rope: the LAST n_rot dims of a
 * vector rotate. n_rot <= 2 * DS4RT_GK_ROPE_MAX_PAIRS (launchers refuse more). */
typedef struct ds4rt_gk_rope_params {
    uint32_t n_rot;
    double base;
    int yarn;
    double yarn_scale, yarn_lo, yarn_hi;
} ds4rt_gk_rope_params;
#define DS4RT_GK_ROPE_MAX_PAIRS 128

/* d_out[r] = d_x[r] / sqrt(mean(d_x[r]^2) + eps) * d_w for `rows` rows of `width` (d_w NULL:
 * no weight). d_out may alias d_x. */
int ds4rt_gk_rms_norm(int64_t rows, uint32_t width, const float *d_x, const float *d_w, float eps, float *d_out,
                      void *stream);

/* Rotates the tail of each of `heads` vectors of `dim` in row i (row width heads*dim) at
 * position pos0 + i (pos0 from d_pass); sign +1 forward, -1 inverse. In place. */
int ds4rt_gk_rope(const void *d_pass, int64_t n, uint32_t heads, uint32_t dim, const ds4rt_gk_rope_params *r,
                  int sign, float *d_x, void *stream);

/* In place, per head: ds4rt_gk_rms_norm of each of the `heads` vectors of `dim` in row i (d_w:
 * dim floats, or NULL), then ds4rt_gk_rope +1 at pos0 + i; the same bits as those two
 * launchers, in one launch (grid: row x head) where dim <= 1024, else as those two. */
int ds4rt_gk_norm_rope(const void *d_pass, int64_t n, uint32_t heads, uint32_t dim, const float *d_w, float eps,
                       const ds4rt_gk_rope_params *r, float *d_x, void *stream);

/* FP8 E4M3 (blocks of 64) / FP4 E2M1 (blocks of 32) round trip of dims [0, width) of `rows`
 * rows spaced `stride` floats apart (width a multiple of the block). In place. */
int ds4rt_gk_fp8_round(int64_t rows, uint32_t stride, uint32_t width, float *d_x, void *stream);
int ds4rt_gk_fp4_round(int64_t rows, uint32_t stride, uint32_t width, float *d_x, void *stream);

/* v = H v / sqrt(width) (Sylvester order) for `rows` contiguous rows; width a power of two,
 * at most DS4RT_GK_HADAMARD_MAX. In place. */
#define DS4RT_GK_HADAMARD_MAX 4096
int ds4rt_gk_hadamard(int64_t rows, uint32_t width, float *d_x, void *stream);

/* d_ring[(pos0 + i) % ring_cap] = d_src[i] for i < n (rows of dim floats). */
int ds4rt_gk_kv_store(const void *d_pass, int64_t n, uint32_t dim, const float *d_src, float *d_ring,
                      uint32_t ring_cap, void *stream);

/* ---- the streaming KV compressor (docs/MODEL.md, "Compressors" and "Rollback") ------------- */

/* Post-processing of an emitted row: the values of backend.h's ds4rt_comp_post. */
enum {
    DS4RT_GK_COMP_POST_NONE = 0,
    DS4RT_GK_COMP_POST_FP8 = 1,
    DS4RT_GK_COMP_POST_HADAMARD_FP4 = 2,
    DS4RT_GK_COMP_POST_HADAMARD = 3
};

/* backend.h's ds4rt_comp_desc: ratio R (coff = 2 when R == 4), emitted row width dim
 * (<= DS4RT_GK_HADAMARD_MAX), FP8 on [0, d_nope), ape [R][coff*dim], norm [dim]. */
typedef struct ds4rt_gk_comp_desc {
    uint32_t ratio;
    uint32_t dim;
    uint32_t d_nope;
    const float *d_ape;
    const float *d_norm;
    float rms_eps;
    ds4rt_gk_rope_params rope;
    int post; /* DS4RT_GK_COMP_POST_* */
} ds4rt_gk_comp_desc;

/* backend.h's ds4rt_comp_state: frontier kv/score [rows][width], their snapshot, the journal
 * [max_batch][2*width] (u | g per pushed row) and the emitted rows [cap][dim]. */
typedef struct ds4rt_gk_comp_state {
    float *d_kv, *d_score;
    float *d_snap_kv, *d_snap_score;
    float *d_journal;
    float *d_out;
    uint32_t rows;  /* coff * R */
    uint32_t width; /* coff * dim */
    uint32_t cap;   /* rows d_out holds; an emission past it is not written */
} ds4rt_gk_comp_state;

/* Empty frontier (kv 0, score -inf). */
int ds4rt_gk_comp_reset(const ds4rt_gk_comp_state *cs, void *stream);
/* snap_* = the frontier (before a pass). */
int ds4rt_gk_comp_snapshot(const ds4rt_gk_comp_state *cs, void *stream);
/* Pushes row i of d_u, d_g ([n][width], ape not yet added) at position pos0 + i (pos0 from
 * d_pass), journals it as journal row i, and emits row (pos + 1) / R - 1 of d_out when a
 * position closes a block of R. */
int ds4rt_gk_comp_update(const void *d_pass, int64_t n, const ds4rt_gk_comp_desc *c, const ds4rt_gk_comp_state *cs,
                         const float *d_u, const float *d_g, void *stream);
/* Restores the snapshot and replays the first `keep` journaled rows of the pass that began at
 * position batch_start (between passes: host arguments). */
int ds4rt_gk_comp_rollback(const ds4rt_gk_comp_desc *c, const ds4rt_gk_comp_state *cs, int64_t batch_start,
                           int64_t keep, void *stream);

/* ---- the lightning indexer ---------------------------------------------------------------- */

/* Scratch for n rows over at most max_comp indexer rows. */
size_t ds4rt_gk_indexer_topk_scratch_bytes(int64_t n, int64_t max_comp);
/* Row i (position pos0 + i, pos0 from d_pass) sees the floor((pos + 1) / 4) first rows of
 * d_rows [.][idx_dim]; score of row r = sum_h d_iw[i][h] / sqrt(idx_dim * idx_heads) *
 * relu(d_iq[i][h] . r) (d_iq [n][idx_heads*idx_dim], d_iw [n][idx_heads]); d_sel[i][..]
 * ([n][idx_topk]) = the idx_topk best in ascending index order (ties: lower index; all rows
 * when they are no more), d_n_sel[i] their count. A row that sees more than max_comp rows gets
 * d_n_sel[i] = -1 and no selection (the scratch was sized too small). */
int ds4rt_gk_indexer_topk(const void *d_pass, int64_t n, uint32_t idx_heads, uint32_t idx_dim, uint32_t idx_topk,
                          int64_t max_comp, const float *d_iq, const float *d_iw, const float *d_rows,
                          int32_t *d_sel, int32_t *d_n_sel, void *d_scratch, size_t scratch_bytes, void *stream);

/* ---- attention with sinks ------------------------------------------------------------------ */

/* backend.h's ds4rt_attn_keys with device pointers. For batch row i at pos = pos0 + i:
 * ring rows of positions [max(last - window + 1, base), last], last = pos (causal) or pos0 - 1
 * (block), row of position p at ring[p % ring_cap]; block mode: the n rows of d_block_rows;
 * comp_ratio != 0: compressed rows [0, floor((pos + 1) / comp_ratio)) of d_comp, or rows
 * d_sel[i * sel_stride + j], j < d_n_sel[i], when d_sel is given. */
typedef struct ds4rt_gk_attn_keys {
    const float *d_ring;
    uint32_t ring_cap;
    uint32_t window;
    int block;
    const float *d_block_rows;
    uint32_t comp_ratio;
    const float *d_comp;
    const int32_t *d_sel, *d_n_sel; /* d_sel NULL: every visible compressed row */
    uint32_t sel_stride;
} ds4rt_gk_attn_keys;

/* The largest head dimension ds4rt_gk_attention takes (the GPU backend refuses a model with
 * wider heads at load). */
uint32_t ds4rt_gk_attention_max_dim(void);
/* Scratch for n rows of `heads` heads of `dim` (the split-key partial results). */
size_t ds4rt_gk_attention_scratch_bytes(int64_t n, uint32_t heads, uint32_t dim);
/* out[i][h] = softmax-with-sink(q[i][h] . keys / sqrt(dim)) . keys over the keys k describes
 * for row i (pos0, base from d_pass); d_sinks [heads]; q, out [n][heads*dim]; d_out may alias
 * d_q. dim <= ds4rt_gk_attention_max_dim() (a lane holds its share of a query and its weighted
 * values in registers). d_tickets: n * heads counters, zero before the first call and left zero
 * by every call (the last split of a head to finish folds the others; one launch). unrope (or
 * NULL): the output's tail leaves rotated back at the row's position, bitwise ds4rt_gk_rope -1
 * after the call, without its launch. */
int ds4rt_gk_attention(const void *d_pass, int64_t n, uint32_t heads, uint32_t dim, const ds4rt_gk_attn_keys *k,
                       const float *d_sinks, const float *d_q, float *d_out, const ds4rt_gk_rope_params *unrope,
                       void *d_scratch, size_t scratch_bytes, uint32_t *d_tickets, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DS4RT_GK_ATTN_H */
