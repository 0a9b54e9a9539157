/* q8_expand.h - Q8_0 -> F16 weight expansion (the kernel of the Q8->F16 expansion cache). */
#ifndef DS4RT_GK_Q8_EXPAND_H
#define DS4RT_GK_Q8_EXPAND_H

#include "gk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* d_out[n_blocks*32] (IEEE half bits) = the Q8_0 blocks at d_blocks (34 bytes each) expanded,
 * rounded to nearest even: bitwise what the CPU dequantiser rounded to F16 gives. */
int ds4rt_gk_q8_0_to_f16(const void *d_blocks, size_t n_blocks, uint16_t *d_out, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DS4RT_GK_Q8_EXPAND_H */
