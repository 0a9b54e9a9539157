/*
 * kernels.h - the per-ISA dot-product kernels behind ds4rt_matmul, and their selection.
 *
 * A kernel multiplies ONE weight row with up to DS4RT_TILE_TOK activation rows (a token tile)
 * over a range of columns [k0, k1): the weight blocks are decoded once and used for every token
 * of the tile, and each (row, token) pair's partial sums are accumulated into its lane array
 * (8 f32 lanes for block types, 32 for float types; see blocks.h). The driver zeroes the lanes,
 * calls the kernel for consecutive column chunks, and reduces the lanes into y at the end. Lane
 * k only ever receives the terms of its own blocks (or elements), in increasing order, so the
 * result does not depend on the chunking, the tile, the thread split or the ISA: every path
 * gives bitwise the scalar path's result.
 *
 * k0 is a multiple of 256 (a whole number of 8-block lane periods for 32-element blocks, of
 * 32-element lane periods for float types, and of Q8_K blocks); k1 is a multiple of 256 or cols.
 */
#ifndef DS4RT_KERNELS_H
#define DS4RT_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "blocks.h"
#include "ds4rt.h"

#define DS4RT_TILE_TOK 4
#define DS4RT_CHUNK_ALIGN 256

/* dot_<name>, a ds4rt_dot_fn, for a vector ISA file: the token count n (1..DS4RT_TILE_TOK)
 * selects CALL(T) with T a constant, so each tile size is its own unrolled code. ATTR: empty, or
 * a target attribute the tile needs beyond the file's flags. */
#define DS4RT_DEF_DOT_DISPATCH(ATTR, name, CALL)                                                        \
    static ATTR void dot_##name(const uint8_t *w, const ds4rt_act *a, int64_t t0, int n, int64_t k0,     \
                                int64_t k1, float *lanes, int64_t ls) {                                  \
        switch (n) {                                                                                     \
        case 1: CALL(1); break;                                                                          \
        case 2: CALL(2); break;                                                                          \
        case 3: CALL(3); break;                                                                          \
        default: CALL(4); break;                                                                         \
        }                                                                                                \
    }
/* dot_q8_0 .. dot_iq2_xxs of an ISA file from its tile calls C_Q8_0(T) .. C_IQ2_XXS(T). */
#define DS4RT_DEF_DOTS()                                                                                 \
    DS4RT_DEF_DOT_DISPATCH(, q8_0, C_Q8_0)                                                               \
    DS4RT_DEF_DOT_DISPATCH(, q4_0, C_Q4_0)                                                               \
    DS4RT_DEF_DOT_DISPATCH(, mxfp4, C_MXFP4)                                                             \
    DS4RT_DEF_DOT_DISPATCH(, q2_K, C_Q2_K)                                                               \
    DS4RT_DEF_DOT_DISPATCH(, q4_K, C_Q4_K)                                                               \
    DS4RT_DEF_DOT_DISPATCH(, q5_K, C_Q5_K)                                                               \
    DS4RT_DEF_DOT_DISPATCH(, q6_K, C_Q6_K)                                                               \
    DS4RT_DEF_DOT_DISPATCH(, iq2_xxs, C_IQ2_XXS)

/* For i < n_tok (1 <= n_tok <= 4): accumulate the products of columns [k0, k1) of w_row and of
 * activation row t0 + i into the lanes at lanes + i * lane_stride. */
typedef void (*ds4rt_dot_fn)(const uint8_t *w_row, const ds4rt_act *act, int64_t t0, int n_tok,
                             int64_t k0, int64_t k1, float *lanes, int64_t lane_stride);

/* Whole rows: for r < n_rows and t < n_tok, y[t * y_stride + r] = the product of row r (at
 * w + r * row_bytes) and activation row t0 + t over all the columns, as the lane sums of the
 * dot kernels followed by ds4rt_reduce8 / ds4rt_reduce32: bitwise their result. A kernel
 * multiplies several rows and tokens per call, keeping its lanes in registers, which pays where
 * rows are short (a 256-column row is one X8 group: the per-call cost of a dot kernel was most
 * of its time). The driver calls one when a row's columns fit one chunk and are a multiple of
 * 32; 1 <= n_tok <= 16. */
typedef void (*ds4rt_rows_fn)(const uint8_t *w, uint64_t row_bytes, int64_t n_rows, const ds4rt_act *act,
                              int64_t t0, int64_t n_tok, float *y, int64_t y_stride);

/* Number of lanes of a weight type's kernels: DS4RT_FLANES for F32/F16/BF16, else DS4RT_QLANES. */
static inline int ds4rt_lanes_for(uint32_t wtype) {
    return wtype == DS4RT_TYPE_F32 || wtype == DS4RT_TYPE_F16 || wtype == DS4RT_TYPE_BF16 ? DS4RT_FLANES
                                                                                        : DS4RT_QLANES;
}

typedef struct ds4rt_cpu_kernels {
    const char *name; /* "scalar", "avx2", "avx512", "avx512-vnni", "avx512-vbmi", "neon", "neon-dotprod" */
    ds4rt_dot_fn dot[DS4RT_TYPE_COUNT];   /* indexed by weight type; NULL = not computable */
    /* Q8_0 rows in the X8 layout (repack.h), with DS4RT_ACT_Q8_0_X8 activations; every path
     * has one (a portable one where the path has no faster), so weights repacked for one path
     * stay computable when another is forced. */
    ds4rt_dot_fn dot_q8_0_x8;
    uint32_t q8_0_layout; /* the layout this path wants Q8_0 weights in (repack.h) */
    /* Whole-row kernels (ds4rt_rows_fn) by weight type and for X8 rows; NULL: the driver uses
     * the dot kernel. */
    ds4rt_rows_fn rows[DS4RT_TYPE_COUNT];
    ds4rt_rows_fn rows_q8_0_x8;
    /* Q8_0 matrices in the R16 layout (repack.h), with DS4RT_ACT_Q8_0_X8 activations: whole
     * rows only (a row is at most 384 columns), n_rows a multiple of 16 and w the start of a
     * panel; every path has one (a portable one where it has no faster). */
    ds4rt_rows_fn rows_q8_0_r16;
    int q8_0_r16; /* nonzero: this path wants Q8_0 matrices that fit R16 in it (else q8_0_layout) */
    /* Converts activation row t of `a` from x bitwise as act_quant.c's portable code does and
     * returns 1, or returns 0 for a type it leaves to that code; NULL: always the portable one. */
    int (*act_row)(const ds4rt_act *a, int64_t t, const float *x);
} ds4rt_cpu_kernels;

extern const ds4rt_cpu_kernels ds4rt_kernels_scalar;
/* The portable X8 kernel (kernels_scalar.c), in every path's table that has no faster one. */
void ds4rt_dot_q8_0_x8_portable(const uint8_t *w_row, const ds4rt_act *act, int64_t t0, int n_tok, int64_t k0,
                                int64_t k1, float *lanes, int64_t lane_stride);
/* The portable R16 kernel (kernels_scalar.c), likewise. */
void ds4rt_rows_q8_0_r16_portable(const uint8_t *w, uint64_t row_bytes, int64_t n_rows, const ds4rt_act *act,
                                  int64_t t0, int64_t n_tok, float *y, int64_t y_stride);
#if defined(__x86_64__) || defined(_M_X64)
extern const ds4rt_cpu_kernels ds4rt_kernels_avx2;
extern const ds4rt_cpu_kernels ds4rt_kernels_avx512;
extern const ds4rt_cpu_kernels ds4rt_kernels_avx512_vnni;
extern const ds4rt_cpu_kernels ds4rt_kernels_avx512_vbmi; /* avx512-vnni + IQ2_XXS by VBMI */
/* kernels_avx512_vnni.c: the X8 kernel with AVX-512 VNNI's 4-byte dot products */
void ds4rt_dot_q8_0_x8_vnni(const uint8_t *w_row, const ds4rt_act *act, int64_t t0, int n_tok, int64_t k0,
                            int64_t k1, float *lanes, int64_t lane_stride);
void ds4rt_rows_q8_0_x8_vnni(const uint8_t *w, uint64_t row_bytes, int64_t n_rows, const ds4rt_act *act,
                             int64_t t0, int64_t n_tok, float *y, int64_t y_stride);
void ds4rt_rows_q8_0_r16_vnni(const uint8_t *w, uint64_t row_bytes, int64_t n_rows, const ds4rt_act *act,
                              int64_t t0, int64_t n_tok, float *y, int64_t y_stride);
void ds4rt_rows_q8_0_vnni(const uint8_t *w, uint64_t row_bytes, int64_t n_rows, const ds4rt_act *act, int64_t t0,
                          int64_t n_tok, float *y, int64_t y_stride); /* file layout */
int ds4rt_act_row_avx2(const ds4rt_act *a, int64_t t, const float *x); /* act_quant_avx2.c */
#endif
#if defined(__aarch64__)
extern const ds4rt_cpu_kernels ds4rt_kernels_neon;
extern const ds4rt_cpu_kernels ds4rt_kernels_neon_dotprod;
#endif

/* The kernels in use: chosen on first use from the CPU's features, or forced by the environment
 * variable DS4RT_CPU_ISA or ds4rt_cpu_isa_set(). Never NULL. */
const ds4rt_cpu_kernels *ds4rt_cpu_active(void);

/* The table of a path by name if it is compiled in and this CPU runs it; else NULL and *why
 * (if given) says which. */
const ds4rt_cpu_kernels *ds4rt_cpu_lookup(const char *name, const char **why);

/* "cpu=avx2 (compiled: scalar avx2 avx512)", the reason if DS4RT_CPU_ISA was not honoured, and
 * which expf the CPU backend takes ("; expf 8-wide (...)" or "; expf per element: why"). */
void ds4rt_cpu_describe(char *buf, size_t len);

/* Whether the CPU backend's ds4rt_expf_rows takes its 8-wide form (bitwise glibc's expf, proven
 * for glibc >= 2.28 on CPUs with AVX2 and FMA) rather than the C library per element. */
bool ds4rt_cpu_expf_vector(void);

/* ------------------------------------------------------------------------------------------ */
/* Activation conversion (act_quant.c; one implementation shared by every ISA path)             */
/* ------------------------------------------------------------------------------------------ */

/* The activation type paired with weight type `wtype` (F32, F16, BF16, Q8_0 or Q8_K), or 0 with
 * *ok = 0 for a type the CPU backend does not compute. */
uint32_t ds4rt_act_type_for(uint32_t wtype, int *ok);

/* Activations of X8-layout Q8_0 weights (repack.h): the Q8_0 activation's bits, its quants
 * interleaved within each 256-column group as the weights' are (byte 32k + 4j + m = quant
 * 4k + m of block j), its scales as Q8_0's, and per block -128 times its quant sum (the
 * weights' +128 bias taken back out). Not a GGUF type id. */
#define DS4RT_ACT_Q8_0_X8 0x10008u

/* The activation type paired with `wtype` held in `layout` (repack.h). */
uint32_t ds4rt_act_type_for_layout(uint32_t wtype, uint32_t layout, int *ok);

/* Fills the layout fields of `a` (type, cols, stride, d_off, s_off; not base) for rows of
 * `cols` activations of type act_type; cols must be a multiple of the act block. */
void ds4rt_act_layout(uint32_t act_type, int64_t cols, ds4rt_act *a);

/* Converts x[cols] into activation row t of `a`. */
void ds4rt_act_quantize_row(const ds4rt_act *a, int64_t t, const float *x);

#endif /* DS4RT_KERNELS_H */
