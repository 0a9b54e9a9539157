/*
 * ops.h - device kernels of the op-table entries that are not matrix products or attention
 * (src/backend/backend.h): hyper-connection pre/post/head (with Sinkhorn), DSpark's capture,
 * argmax, add, the non-finite count, DSpark's confidence head, and the MoE pieces around the
 * expert matmuls: the router, SwiGLU with clamp, the slot-ordered combine.
 *
 * Conventions of hip/gk.h hold: d_* are device pointers, launchers only enqueue on `stream`
 * (an opaque hipStream_t / cudaStream_t; use a created stream, never NULL, see docs/GPU.md),
 * return a ds4rt_gk_status (message in ds4rt_gk_last_error()), never allocate (scratch comes
 * from the caller, sized by the *_scratch_bytes() functions), and read per-pass values (token
 * ids) from device memory. Host arguments are static shapes only.
 *
 * Each kernel computes one row (token) with a fixed operation order, so a row's bits never
 * depend on how many rows are in the call (batch invariance). How each op matches the CPU
 * backend's (src/backend/cpu/) is stated per launcher and in docs/GPU.md ("Row ops, HC and MoE
 * pieces"): "bitwise" where the CPU's arithmetic order is reproduced exactly; otherwise the
 * difference is a last-bit effect of float64 sums in a different order or of the device's
 * float64 libm, both rounded to float afterwards.
 */
#ifndef DS4RT_GK_OPS_H
#define DS4RT_GK_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "gk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Weight types the self-contained float product takes (the ggml type numbers). */
#define DS4RT_GK_TYPE_F32 0u
#define DS4RT_GK_TYPE_F16 1u
#define DS4RT_GK_TYPE_BF16 30u

/* Shapes of the hyper-connections (from ds4rt_hparams). */
typedef struct ds4rt_gk_hc_dims {
    uint32_t n_hc;           /* N streams (<= 16) */
    uint32_t d;              /* D = n_embd; a row of X is N*D floats */
    uint32_t sinkhorn_iters;
    float hc_eps;
    float rms_eps;
} ds4rt_gk_hc_dims;

/* ---- hyper-connections ---------------------------------------------------------------------- */

/* Scratch bytes of ds4rt_gk_hc_pre / ds4rt_gk_hc_head / ds4rt_gk_hc_mix for n rows of N = n_hc
 * streams of d floats (hc_mix keeps the normalised rows there for the product). */
size_t ds4rt_gk_hc_scratch_bytes(int64_t n, uint32_t n_hc, uint32_t d);

/* d_mix[i][r] = sum_c fn[r][c] * RMS(X[i])[c] for r < n_out: the mixing product of HC pre
 * (n_out = (2+N)*N) and head (n_out = N). RMS(X) = X * (1/sqrt(mean(X^2) + rms_eps)), rounded
 * to f16 / bf16 for F16 / BF16 fn as the CPU's activation pairing does (docs/QUANTS.md §2);
 * products summed in the CPU's order (lane c % 32, lanes by the fixed tree): bitwise the CPU's
 * product of the same normalised row. fn: `fn_type` (F32/F16/BF16), rows of fn_row_bytes. */
int ds4rt_gk_hc_mix(const ds4rt_gk_hc_dims *dims, int64_t n, uint32_t n_out, uint32_t fn_type, const void *d_fn,
                    uint64_t fn_row_bytes, const float *d_X, float *d_mix, void *d_scratch, size_t scratch_bytes,
                    void *stream);

/* HC pre from a mixing product d_mix [n][(2+N)*N] (from ds4rt_gk_hc_mix or any matmul of the
 * normalised rows): pre/post (float64, as the CPU), xn[i] = RMSNorm(sum_h pre[h] X[i][h]) *
 * norm (d_norm NULL: no weight), and comb [n][N*N]: with `sinkhorn` the Sinkhorn coefficients
 * (one warp of the kernel computes them beside the reduce where N*N fits in a warp), without
 * it the raw comb logits of d_mix, which ds4rt_gk_hc_sinkhorn then turns into the coefficients.
 * post [n][N]. scale [3], base [(2+N)*N]. */
int ds4rt_gk_hc_pre_finish(const ds4rt_gk_hc_dims *dims, int64_t n, int sinkhorn, const float *d_mix,
                           const float *d_scale, const float *d_base, const float *d_norm, const float *d_X,
                           float *d_xn, float *d_post, float *d_comb, void *stream);

/* In place: comb [n][N*N] from raw logits to the Sinkhorn coefficients (float64, the CPU's
 * order of operations). Reads nothing but comb, scale and base, so it may run on a second
 * stream beside what follows hc_pre, joined before comb is read. */
int ds4rt_gk_hc_sinkhorn(const ds4rt_gk_hc_dims *dims, int64_t n, const float *d_scale, const float *d_base,
                         float *d_comb, void *stream);

/* hc_pre without the Sinkhorn: ds4rt_gk_hc_mix then ds4rt_gk_hc_pre_finish (comb holds the raw
 * logits; the GPU backend runs ds4rt_gk_hc_sinkhorn on a second stream: gpu_hc_rows.c). */
int ds4rt_gk_hc_pre_raw(const ds4rt_gk_hc_dims *dims, int64_t n, uint32_t fn_type, const void *d_fn,
                        uint64_t fn_row_bytes, const float *d_scale, const float *d_base, const float *d_norm,
                        const float *d_X, float *d_xn, float *d_post, float *d_comb, void *d_scratch,
                        size_t scratch_bytes, void *stream);
/* The form hc_pre takes in this process, as one line (the backend appends it to the device's
 * description): with DS4RT_GPU_HC_PRE1=1, up to 16 tokens of F16/BF16 mixes at most 16384
 * wide with N <= 4 streams take one launch (gk_hc_pre1_kernel: the HC RMS, the mixing product,
 * pre, post and xn; the raw comb logits for the Sinkhorn), the same bits as hc_mix then
 * hc_pre_finish; hc_head likewise (the same bits as hc_mix then hc_head_finish); otherwise
 * those launches. */
const char *ds4rt_gk_hc_forms(void);

/* The whole hc_pre op on one stream: hc_mix then hc_pre_finish with the Sinkhorn (or the one
 * launch of ds4rt_gk_hc_forms() and the Sinkhorn after it). */
int ds4rt_gk_hc_pre(const ds4rt_gk_hc_dims *dims, int64_t n, uint32_t fn_type, const void *d_fn, uint64_t fn_row_bytes,
                    const float *d_scale, const float *d_base, const float *d_norm, const float *d_X, float *d_xn,
                    float *d_post, float *d_comb, void *d_scratch, size_t scratch_bytes, void *stream);

/* X_out[i][j] = post[i][j] f[i] + sum_h comb[i][h*N + j] X[i][h] (float, in the CPU's order:
 * bitwise). X_out must not alias X. */
int ds4rt_gk_hc_post(const ds4rt_gk_hc_dims *dims, int64_t n, const float *d_X, const float *d_f,
                     const float *d_post, const float *d_comb, float *d_X_out, void *stream);

/* HC head from a mixing product d_mix [n][N]: y[i] = sum_h w_h X[i][h] with
 * w = sigmoid(scale[0] * mix + base) + hc_eps (float64, as the CPU). */
int ds4rt_gk_hc_head_finish(const ds4rt_gk_hc_dims *dims, int64_t n, const float *d_mix, const float *d_scale,
                            const float *d_base, const float *d_X, float *d_y, void *stream);

/* The whole hc_head op: ds4rt_gk_hc_mix (n_out = N) then ds4rt_gk_hc_head_finish. */
int ds4rt_gk_hc_head(const ds4rt_gk_hc_dims *dims, int64_t n, uint32_t fn_type, const void *d_fn,
                     uint64_t fn_row_bytes, const float *d_scale, const float *d_base, const float *d_X, float *d_y,
                     void *d_scratch, size_t scratch_bytes, void *stream);

/* ---- row ops ---------------------------------------------------------------------------------- */

/* dst[i * dst_stride + j] = (sum_h X[i][h][j]) / N for j < d (bitwise the CPU's). */
int ds4rt_gk_capture(uint32_t n_hc, uint32_t d, int64_t n, const float *d_X, float *d_dst, uint64_t dst_stride,
                     void *stream);

/* d_ids[r] = index of the largest value of row r of d_x [rows][width]: the lowest index among
 * equal maxima; NaN never wins; 0 when no value exceeds -inf (exactly the CPU's answer). */
int ds4rt_gk_argmax(int64_t rows, uint32_t width, const float *d_x, int32_t *d_ids, void *stream);

/* The same answer for wide rows (the vocabulary), spread over many blocks: each block takes
 * a chunk of a row and writes its first maximum to the scratch, a second kernel merges the
 * chunks of each row. Scratch: ds4rt_gk_argmax_scratch_bytes(rows, width). */
size_t ds4rt_gk_argmax_scratch_bytes(int64_t rows, uint32_t width);
int ds4rt_gk_argmax_split(int64_t rows, uint32_t width, const float *d_x, int32_t *d_ids, void *d_scratch,
                          size_t scratch_bytes, void *stream);

/* d_out = d_a + d_b, count floats (bitwise). */
int ds4rt_gk_add(int64_t count, const float *d_a, const float *d_b, float *d_out, void *stream);

/* d_out[0] = number of non-finite (inf, NaN) values among d_x[0..count) (exact). */
int ds4rt_gk_nonfinite(int64_t count, const float *d_x, int32_t *d_out, void *stream);

/* d_out[0] = sigmoid(proj . [h ; state]), h of d floats and state of r floats, the products
 * summed in float64 (DSpark's confidence head). */
int ds4rt_gk_dspark_confidence(uint32_t d, uint32_t r, const float *d_proj, const float *d_h, const float *d_state,
                               float *d_out, void *stream);

/* ---- MoE pieces around the expert matmuls ------------------------------------------------------ */

/* Router shapes (from ds4rt_hparams). */
typedef struct ds4rt_gk_moe_dims {
    uint32_t n_expert;      /* E (<= 1024) */
    uint32_t n_used;        /* k (<= 64) */
    int expert_norm;        /* nonzero: weights divided by their sum (floored at 2^-14) */
    float expert_scale;
} ds4rt_gk_moe_dims;

/* The router of n rows from their logits d_logits [n][E] (gate_inp . x, any matmul):
 * p = sqrt(softplus(logit)) (float64, rounded to float); slots d_ids[i][0..k) are
 *   learned (d_tid2eid NULL): the k largest of p + bias (d_bias [E]) in descending order,
 *     ties to the lower expert, NaN lowest (the CPU's ds4rt_topk_small), or
 *   hash (d_tid2eid [V][k]): tid2eid[token_i] with token_i read from the pass block d_pass
 *     (int32 tokens from byte 16, backend.h's ds4rt_dpass);
 * d_weights[i][s] = p[id] * norm * expert_scale, norm = 1 / max(sum_s p[id_s], 2^-14) when
 * expert_norm (the sum in slot order), else 1. d_ids is what the expert-stack matmul reads
 * (int32, row-major [n][k]). Bitwise the CPU's given bitwise logits, except that on a GPU the
 * float64 exp/log1p of the device's libm may differ from the host's in the last double bit. */
int ds4rt_gk_moe_route(const ds4rt_gk_moe_dims *dims, int64_t n, const float *d_logits, const float *d_bias,
                       const int32_t *d_tid2eid, const void *d_pass, int32_t *d_ids, float *d_weights, void *stream);

/* SwiGLU with clamp for `rows` rows of `width`: h[r][c] = silu(min(g, clamp)) *
 * clamp(u, -clamp, clamp) * weight[r] (d_weight NULL: no weight, the shared expert). Rows of
 * g, u, h are g_stride, u_stride, h_stride floats apart (h may alias g). silu(x) =
 * x / (1 + e^-x): bitwise the CPU's with the same expf (HIP-CPU); on a GPU e^-x is float64 exp
 * rounded to float (the correctly rounded value but for double-rounding cases), where the
 * host's expf is within 0.502 ulp, so the two differ in rare last bits. */
int ds4rt_gk_swiglu(int64_t rows, uint32_t width, const float *d_g, uint64_t g_stride, const float *d_u,
                    uint64_t u_stride, float clamp, const float *d_weight, float *d_h, uint64_t h_stride,
                    void *stream);

/* f[i][j] = (sum over slots s < k, in slot order, of y[i][s][j]) + shared[i][j] (d_shared NULL:
 * no shared expert): bitwise the CPU's combine. d_y [n][k][d]. */
int ds4rt_gk_moe_combine(int64_t n, uint32_t k, uint32_t d, const float *d_y, const float *d_shared, float *d_f,
                         void *stream);

/* ---- sampling on the device --------------------------------------------------------------------- */

/* Sampling parameters of a request (host values: static for a captured graph). */
typedef struct ds4rt_gk_sample_params {
    float temperature; /* <= 0: greedy (argmax) */
    int32_t top_k;     /* 0: off */
    float top_p;       /* >= 1: off */
    float min_p;       /* <= 0: off */
    uint64_t seed;
} ds4rt_gk_sample_params;

/* Scratch of ds4rt_gk_sample for rows of `width` (the final distributions, [rows][width] f32). */
size_t ds4rt_gk_sample_scratch_bytes(int64_t rows, uint32_t width);

/* d_ids[r] = a token drawn from row r of the logits d_x [rows][width] by the CPU's rule
 * (src/model/sampling.c: softmax of x/T in float64, then top-k with ties to the lower id,
 * top-p over the distribution sorted by (p desc, id asc), min-p, renormalised; the first id
 * whose cumulative probability exceeds u * total), one block per row. The uniform u of row r
 * comes from a counter-based generator: u = (splitmix64(seed + *d_counter + r) >> 11) * 2^-53
 * (ds4rt_gk_sample_uniform), with the counter read from device memory so a captured graph
 * draws new numbers on replay; the caller advances it. temperature <= 0 is argmax (ids only).
 * The final distribution of each row stays in the scratch (for rejection sampling).
 * Against the CPU's functions with the same u: the same token except where u * total lies
 * within float64 rounding of a cumulative boundary (float64 sums in another order; the
 * device's float64 exp). */
int ds4rt_gk_sample(const ds4rt_gk_sample_params *p, int64_t rows, uint32_t width, const float *d_x,
                    const uint64_t *d_counter, int32_t *d_ids, void *d_scratch, size_t scratch_bytes, void *stream);

/* The generator of ds4rt_gk_sample on the host, for callers and tests. */
double ds4rt_gk_sample_uniform(uint64_t seed, uint64_t counter);

/* ---- the float product on its own ------------------------------------------------------------- */

/* y[i][r] = sum_c W[r][c] x[i][c] for F32/F16/BF16 W [rows][cols] (rows of w_row_bytes), in
 * the CPU matmul's order and activation rounding: bitwise the CPU's ds4rt_matmul. A
 * self-contained helper for the ops above and for tests composing the MoE op; the model's
 * matmuls go through the matmul launchers of hip/mm.h. */
int ds4rt_gk_matmul_float(uint32_t w_type, const void *d_w, int64_t rows, int64_t cols, uint64_t w_row_bytes,
                          const float *d_x, int64_t n, float *d_y, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DS4RT_GK_OPS_H */
