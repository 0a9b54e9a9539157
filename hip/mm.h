/*
 * mm.h - matrix products and row gathers of weights on the GPU (docs/GPU.md, "Matrix products").
 *
 * Every weight type the CPU backend computes: F32 F16 BF16 Q8_0 Q4_0 MXFP4 Q2_K Q4_K Q5_K Q6_K
 * IQ2_XXS (type ids are GGML's, = DS4RT_TYPE_*). Activations are converted exactly as the CPU
 * path converts them (docs/QUANTS.md §2) and each output is formed by the CPU's fixed operation
 * order (docs/QUANTS.md §3: per-block integer sums, one f32 term per block into lane b % 8, the fixed lane
 * reduction; float types: lane i % 32), so results are BITWISE those of the CPU backend's
 * matmul, and a row's result does not depend on the other rows of the batch.
 *
 * Conventions of hip/gk.h: launchers only enqueue on `stream`, return a ds4rt_gk_status (message
 * in ds4rt_gk_last_error()), never allocate (scratch is passed in, sized by the _scratch_bytes
 * functions), and read per-pass dynamic values (expert ids, row ids) from device memory, so a pass
 * can be captured as a graph. The format tables live in constant memory (no set-up call).
 */
#ifndef DS4RT_GK_MM_H
#define DS4RT_GK_MM_H

#include <stddef.h>
#include <stdint.h>

#include "gk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A 2-D weight W[rows][cols] on the device, as stored in GGUF: row r at d_data + r * row_bytes.
 * cols must be a multiple of the type's block (32 or 256 elements) and, for the quantised types,
 * of the activation block (Q8_0: 32, Q8_K: 256), as on the CPU. Rows and data may have any
 * alignment; 16-byte aligned data with row_bytes a multiple of 16 takes the fast loads. */
typedef struct ds4rt_gk_weight {
    uint32_t type;
    const void *d_data;
    int64_t rows;
    int64_t cols;
    uint64_t row_bytes;
} ds4rt_gk_weight;

/* Nonzero if `type` has kernels here (exactly the CPU backend's computable types). */
int ds4rt_gk_mm_supports(uint32_t type);

/* The smallest pass (token rows) whose Q8_0 products run on the int8 tensor cores
 * (mm_qm_kernel: NVIDIA, a binary built for sm_80 or later), 0 where they never do. Decided
 * once per process, from DS4RT_GPU_QM_MIN_N (default 2; 0 turns the path off); the backend
 * asks once when it opens, before any capture (docs/GPU.md, "Matrix products"). */
int64_t ds4rt_gk_qm_min_n(void);
/* Products of at most 8 tokens with fewer rows than this keep mm_qt_kernel although n reaches
 * ds4rt_gk_qm_min_n() (DS4RT_GPU_QM_MIN_ROWS, default 0: none); 0 where the tensor-core path
 * does not exist. Decided once per process, like ds4rt_gk_qm_min_n(). */
int64_t ds4rt_gk_qm_min_rows(void);
/* Why the tensor-core path is on or off ("on", or "off: <reason>"): the backend appends it to
 * the device's description, so a run that does not take it says so. */
const char *ds4rt_gk_qm_reason(void);

/* The forms the expert-stack products take in this process, decided once from
 * DS4RT_GPU_QS_IQ2 (old, the default, or new: the IQ2_XXS arithmetic of mm_qs_kernel) and
 * DS4RT_GPU_QS_Q2K (1 or new, the default, or old: mm_qs_kernel's Q2_K form; 0: mm_q_kernel), as
 * one line; the backend appends it to the device's description (docs/GPU.md, "Matrix
 * products"). Every form gives the same bits. */
const char *ds4rt_gk_mm_forms(void);

/* Bytes of converted activations for n rows of `cols` paired with weight type `type` (0 for an
 * unsupported type). Scratch of at least this size is passed to the launchers below. */
size_t ds4rt_gk_act_bytes(uint32_t type, int64_t cols, int64_t n);

/* Converts the n rows d_x[n][cols] (f32, contiguous) into d_act (ds4rt_gk_act_bytes(type, cols,
 * n) bytes, 16-byte aligned), in the activation type paired with weight type `type`. One
 * conversion can serve several products with weights of the same pairing (gate and up). */
int ds4rt_gk_act_convert(uint32_t type, const float *d_x, int64_t n, int64_t cols, void *d_act,
                         size_t act_bytes, void *stream);

/* ds4rt_gk_swiglu (ops.h) of the `rows` contiguous rows of `width` in d_g and d_u, with
 * `clamp` and row weights d_weight (NULL: none), converted as ds4rt_gk_act_convert converts
 * for weight type `type`: the same bits as the two calls, in one launch, and the SwiGLU rows
 * are never written (the MoE's down product reads only the conversion). */
int ds4rt_gk_swiglu_act(uint32_t type, int64_t rows, uint32_t width, const float *d_g, const float *d_u, float clamp,
                        const float *d_weight, void *d_act, size_t act_bytes, void *stream);

/* y[i][r] = sum_c W[r][c] x[i][c] for i < n (d_y[n][w->rows]), from activations converted by
 * ds4rt_gk_act_convert for a weight of the same pairing and the same cols. Any n >= 0. */
int ds4rt_gk_matmul_act(const ds4rt_gk_weight *w, const void *d_act, int64_t n, float *d_y, void *stream);

/* ds4rt_gk_act_convert into d_scratch then ds4rt_gk_matmul_act, with the same bits; a few rows
 * of a Q8_0-activation type (n <= 4, small matrices) take one fused launch that converts in
 * the product kernel, and float weights with up to 32 rows (aligned, whole 32-column periods)
 * one launch that rounds x as it loads it; both leave d_scratch untouched. scratch_bytes >=
 * ds4rt_gk_matmul_scratch_bytes(w->type, w->cols, n). */
size_t ds4rt_gk_matmul_scratch_bytes(uint32_t type, int64_t cols, int64_t n);
int ds4rt_gk_matmul(const ds4rt_gk_weight *w, const float *d_x, int64_t n, float *d_y, void *d_scratch,
                    size_t scratch_bytes, void *stream);

/* The n rows x[n][w->cols] of floats (the hyper-connection streams): y[t][r] = sum_c W[r][c]
 * act(x[t][c] * inv_t), inv_t = (float)(1 / sqrt(mean(x[t]^2) + eps)) with the HC RMS's float64
 * sum (hip/gk_internal.h, gk_rms_inv) and act the activation rounding of the float type: bitwise
 * the HC RMS conversion (ops.hip) followed by ds4rt_gk_matmul_act, in one launch, where
 * ds4rt_gk_matmul_rms_rows_supported(w, n) (DS4RT_GPU_HC_RMS_IN_MIX=1, float weights,
 * 4097..16384 columns, at most 256 rows, 16-byte aligned, n within mm_fs1_kernel's token bound);
 * elsewhere DS4RT_GK_ERR_UNSUPPORTED. */
int ds4rt_gk_matmul_rms_rows_supported(const ds4rt_gk_weight *w, int64_t n);
int ds4rt_gk_matmul_rms_rows(const ds4rt_gk_weight *w, const float *d_x, int64_t n, float eps, float *d_y,
                             void *stream);

/* Grouped products (the grouped low-rank output projection): W holds n_groups blocks of
 * rows_g = w->rows / n_groups rows, and block g multiplies columns [g*cols, (g+1)*cols) of each
 * activation row (cols = w->cols; the rows were converted by ds4rt_gk_act_convert with
 * n_groups * cols columns):
 *     y[i][g*rows_g + r] = sum_c W[g*rows_g + r][c] x[i][g*cols + c]    (d_y[n][w->rows])
 * One launch for all groups; bitwise ds4rt_gk_matmul_act of each row block on its column slice.
 * Only where ds4rt_gk_matmul_grouped_supported() (Q8_0-activation types, 16-byte aligned rows,
 * 1 <= n <= 8); elsewhere DS4RT_GK_ERR_UNSUPPORTED. */
int ds4rt_gk_matmul_grouped_supported(const ds4rt_gk_weight *w, uint32_t n_groups, int64_t n);
int ds4rt_gk_matmul_grouped_act(const ds4rt_gk_weight *w, uint32_t n_groups, const void *d_act, int64_t n,
                                float *d_y, void *stream);

/* The grouped product of the float rows d_x[n][n_groups * w->cols] themselves, each thread
 * block converting its group's activations (the fused form of mm_qt_kernel): bitwise
 * ds4rt_gk_act_convert then ds4rt_gk_matmul_grouped_act, one launch, where
 * ds4rt_gk_matmul_grouped_fused_supported() (a group's row of one staging step, few tokens, the
 * re-read floats within the fused form's bound, not the tensor-core path); elsewhere
 * DS4RT_GK_ERR_UNSUPPORTED. */
int ds4rt_gk_matmul_grouped_fused_supported(const ds4rt_gk_weight *w, uint32_t n_groups, int64_t n);
int ds4rt_gk_matmul_grouped_fused(const ds4rt_gk_weight *w, uint32_t n_groups, const float *d_x, int64_t n, float *d_y,
                                  void *stream);

/* Products over a stack of experts (MoE dispatch), with the expert of each slot read from device
 * memory: for j < n_slots, e = d_ids[j] (int32), W_e = the matrix at w->d_data + e * expert_stride
 * (shape and type of *w),
 *     y[j][r] = sum_c W_e[r][c] x[j / x_div][c]       (d_y[n_slots][w->rows])
 * with x the activation rows converted by ds4rt_gk_act_convert (n_slots / x_div rows, rounded
 * up). x_div = k (slots per token) for gate/up, where slot i*k+s reads token i's row; x_div = 1
 * for down, where each slot has its own row. Bitwise equal to ds4rt_gk_matmul_act of W_e on that
 * row alone. An id outside [0, n_experts) reads no weight and writes NaN to its output row. */
int ds4rt_gk_matmul_experts_act(const ds4rt_gk_weight *w, uint64_t expert_stride, uint32_t n_experts,
                                const int32_t *d_ids, int64_t n_slots, uint32_t x_div, const void *d_act,
                                float *d_y, void *stream);

/* Two expert stacks of the same type, shape and expert stride over the same slots and
 * activations (the MoE's gate and up) in one launch: bitwise ds4rt_gk_matmul_experts_act of w
 * into d_y and of w2 into d_y2 (one launch instead of two on a decode's critical path, and twice
 * the thread blocks to fill the device with). */
int ds4rt_gk_matmul_experts2_act(const ds4rt_gk_weight *w, const ds4rt_gk_weight *w2, uint64_t expert_stride,
                                 uint32_t n_experts, const int32_t *d_ids, int64_t n_slots, uint32_t x_div,
                                 const void *d_act, float *d_y, float *d_y2, void *stream);

/* out[i][c][:] = row d_ids[i] of W dequantised to f32 (bit-exact with the CPU dequantiser, which
 * is gguf-py's), for i < n and c < copies: d_out is [n][copies][w->cols]. An id outside
 * [0, w->rows) writes NaN to its rows and reads nothing. */
int ds4rt_gk_get_rows(const ds4rt_gk_weight *w, const int32_t *d_ids, int64_t n, uint32_t copies, float *d_out,
                      void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DS4RT_GK_MM_H */
