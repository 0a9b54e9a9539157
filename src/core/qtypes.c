/* qtypes.c - the table of GGUF tensor element types: names and block layouts. Which types the
 * CPU backend computes with is filled in by the quant module (ds4rt_type_is_computable). */
#include "internal.h"
#include "qtypes.h"

static const ds4rt_type_info type_table[DS4RT_TYPE_COUNT] = {
    [0] = {"F32", 1, 4, 0},
    [1] = {"F16", 1, 2, 0},
    [2] = {"Q4_0", 32, 18, 0},
    [3] = {"Q4_1", 32, 20, 0},
    [6] = {"Q5_0", 32, 22, 0},
    [7] = {"Q5_1", 32, 24, 0},
    [8] = {"Q8_0", 32, 34, 0},
    [9] = {"Q8_1", 32, 40, 0},
    [10] = {"Q2_K", 256, 84, 0},
    [11] = {"Q3_K", 256, 110, 0},
    [12] = {"Q4_K", 256, 144, 0},
    [13] = {"Q5_K", 256, 176, 0},
    [14] = {"Q6_K", 256, 210, 0},
    [15] = {"Q8_K", 256, 292, 0},
    [16] = {"IQ2_XXS", 256, 66, 0},
    [17] = {"IQ2_XS", 256, 74, 0},
    [18] = {"IQ3_XXS", 256, 98, 0},
    [19] = {"IQ1_S", 256, 50, 0},
    [20] = {"IQ4_NL", 32, 18, 0},
    [21] = {"IQ3_S", 256, 110, 0},
    [22] = {"IQ2_S", 256, 82, 0},
    [23] = {"IQ4_XS", 256, 136, 0},
    [24] = {"I8", 1, 1, 0},
    [25] = {"I16", 1, 2, 0},
    [26] = {"I32", 1, 4, 0},
    [27] = {"I64", 1, 8, 0},
    [28] = {"F64", 1, 8, 0},
    [29] = {"IQ1_M", 256, 56, 0},
    [30] = {"BF16", 1, 2, 0},
    [34] = {"TQ1_0", 256, 54, 0},
    [35] = {"TQ2_0", 256, 66, 0},
    [39] = {"MXFP4", 32, 17, 0},
    [40] = {"NVFP4", 64, 36, 0},
    [41] = {"Q1_0", 128, 18, 0},
};

const ds4rt_type_info *ds4rt_type_lookup(uint32_t type) {
    if (type >= DS4RT_TYPE_COUNT || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

DS4RT_API ds4rt_status ds4rt_type_get_info(uint32_t type, ds4rt_type_info *out) {
    const ds4rt_type_info *t = ds4rt_type_lookup(type);
    if (out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "type_get_info: out is NULL");
    if (t == NULL) return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "unknown tensor type id %u", type);
    *out = *t;
    out->compute = ds4rt_type_is_computable(type);
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_type_row_bytes(uint32_t type, int64_t n, uint64_t *out) {
    const ds4rt_type_info *t = ds4rt_type_lookup(type);
    if (out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "type_row_bytes: out is NULL");
    if (t == NULL) return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "unknown tensor type id %u", type);
    if (n < 0 || (uint64_t)n % t->block_elems != 0)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%lld elements is not a whole number of %s blocks (%u)",
                          (long long)n, t->name, t->block_elems);
    if (!ds4rt_mul_u64((uint64_t)n / t->block_elems, t->block_bytes, out))
        return ds4rt_fail(DS4RT_ERR_FORMAT, "row of %lld %s elements overflows", (long long)n, t->name);
    return DS4RT_OK;
}
