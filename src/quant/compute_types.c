/* compute_types.c - which tensor types the CPU backend computes with: exactly those with a
 * dequantiser (dequant.c, bit-exact with gguf-py) and a matmul kernel in every ISA path, both
 * tested (tests/test_quant_*.py). */
#include "qtypes.h"

int ds4rt_type_is_computable(uint32_t type) {
    switch (type) {
    case DS4RT_TYPE_F32:
    case DS4RT_TYPE_F16:
    case DS4RT_TYPE_BF16:
    case DS4RT_TYPE_Q8_0:
    case DS4RT_TYPE_Q4_0:
    case DS4RT_TYPE_MXFP4:
    case DS4RT_TYPE_Q2_K:
    case DS4RT_TYPE_Q4_K:
    case DS4RT_TYPE_Q5_K:
    case DS4RT_TYPE_Q6_K:
    case DS4RT_TYPE_IQ2_XXS: return 1;
    default: return 0;
    }
}
