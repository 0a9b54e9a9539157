/* qtypes.h - internal access to the tensor type table. */
#ifndef DS4RT_QTYPES_H
#define DS4RT_QTYPES_H

#include <stdint.h>

#include "ds4rt.h"

/* Layout of a known type, or NULL. `compute` in the returned struct is always 0: ask
 * ds4rt_type_is_computable() for that. */
const ds4rt_type_info *ds4rt_type_lookup(uint32_t type);

/* Nonzero if the CPU backend can dequantise and multiply with `type` (defined by the quant
 * module). */
int ds4rt_type_is_computable(uint32_t type);

#endif /* DS4RT_QTYPES_H */
