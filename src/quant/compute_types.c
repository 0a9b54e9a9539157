/* compute_types.c - which tensor types the CPU backend computes with. Grows as kernels land;
 * a type is listed only once its dequantiser and matmul exist and are tested. */
#include "qtypes.h"

int ds4rt_type_is_computable(uint32_t type) {
    (void)type;
    return 0;
}
