/* gguf_values.c - typed access to metadata values: the getters by key and the array element
 * accessors. Everything read here was validated at open time. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "gguf_internal.h"

static const char *type_name_or(uint32_t type) {
    const char *n = ds4rt_gguf_type_name(type);
    return n ? n : "unknown";
}

/* Loads an integer value of `type` as sign and magnitude; false if `type` is not an integer
 * type (BOOL is not an integer here). */
static bool load_integer(uint32_t type, const uint8_t *p, uint64_t *mag, bool *neg) {
    int64_t s;
    *neg = false;
    switch ((ds4rt_gguf_type)type) {
    case DS4RT_GGUF_UINT8: *mag = p[0]; return true;
    case DS4RT_GGUF_UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        *mag = v;
        return true;
    }
    case DS4RT_GGUF_UINT32: *mag = gguf_load_u32(p); return true;
    case DS4RT_GGUF_UINT64: *mag = gguf_load_u64(p); return true;
    case DS4RT_GGUF_INT8: s = (int8_t)p[0]; break;
    case DS4RT_GGUF_INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        s = v;
        break;
    }
    case DS4RT_GGUF_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        s = v;
        break;
    }
    case DS4RT_GGUF_INT64: memcpy(&s, p, 8); break;
    default: return false;
    }
    *neg = s < 0;
    /* Magnitude without signed overflow, also for INT64_MIN. */
    *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    return true;
}

/* Loads a float value; false if `type` is neither FLOAT32 nor FLOAT64. */
static bool load_float(uint32_t type, const uint8_t *p, double *out) {
    if (type == DS4RT_GGUF_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        *out = f;
        return true;
    }
    if (type == DS4RT_GGUF_FLOAT64) {
        memcpy(out, p, 8);
        return true;
    }
    return false;
}

static double integer_as_double(uint64_t mag, bool neg) {
    return neg ? -(double)mag : (double)mag;
}

/* --- getters by key --- */

static ds4rt_status find(const ds4rt_gguf *g, const char *key, const char *fn,
                         const ds4rt_gguf_kv **kv, void *out) {
    if (g == NULL || key == NULL || out == NULL) {
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
    }
    *kv = ds4rt_gguf_find_kv(g, key);
    if (*kv == NULL) {
        gguf_qname q;
        gguf_quote(&q, key, strlen(key));
        return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "metadata key '%s' not found", q.s);
    }
    return DS4RT_OK;
}

static ds4rt_status mismatch(const ds4rt_gguf_kv *kv, const char *detail) {
    gguf_qname q;
    gguf_quote(&q, kv->key.data, kv->key.len);
    return ds4rt_fail(DS4RT_ERR_FORMAT, "metadata key '%s' (record at byte %llu): %s", q.s,
                      (unsigned long long)kv->file_offset, detail);
}

static ds4rt_status type_mismatch(const ds4rt_gguf_kv *kv, const char *wanted) {
    gguf_qname q;
    gguf_quote(&q, kv->key.data, kv->key.len);
    return ds4rt_fail(DS4RT_ERR_FORMAT,
                      "metadata key '%s' (record at byte %llu) has type %s; expected %s", q.s,
                      (unsigned long long)kv->file_offset, type_name_or(kv->type), wanted);
}

DS4RT_API ds4rt_status ds4rt_gguf_get_u32(const ds4rt_gguf *g, const char *key, uint32_t *out) {
    const ds4rt_gguf_kv *kv;
    ds4rt_status st = find(g, key, "gguf_get_u32", &kv, out);
    if (st != DS4RT_OK) return st;
    uint64_t mag;
    bool neg;
    if (!load_integer(kv->type, kv->data, &mag, &neg)) return type_mismatch(kv, "an integer");
    if (neg || mag > UINT32_MAX) {
        char detail[96];
        snprintf(detail, sizeof detail, "%s%llu does not fit in a u32", neg ? "-" : "",
                 (unsigned long long)mag);
        return mismatch(kv, detail);
    }
    *out = (uint32_t)mag;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_gguf_get_u64(const ds4rt_gguf *g, const char *key, uint64_t *out) {
    const ds4rt_gguf_kv *kv;
    ds4rt_status st = find(g, key, "gguf_get_u64", &kv, out);
    if (st != DS4RT_OK) return st;
    uint64_t mag;
    bool neg;
    if (!load_integer(kv->type, kv->data, &mag, &neg)) return type_mismatch(kv, "an integer");
    if (neg) {
        char detail[96];
        snprintf(detail, sizeof detail, "-%llu is negative; a u64 is needed",
                 (unsigned long long)mag);
        return mismatch(kv, detail);
    }
    *out = mag;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_gguf_get_f32(const ds4rt_gguf *g, const char *key, float *out) {
    const ds4rt_gguf_kv *kv;
    ds4rt_status st = find(g, key, "gguf_get_f32", &kv, out);
    if (st != DS4RT_OK) return st;
    double d;
    uint64_t mag;
    bool neg;
    if (load_float(kv->type, kv->data, &d)) {
        if (isfinite(d) && fabs(d) > FLT_MAX) {
            char detail[96];
            snprintf(detail, sizeof detail, "%g does not fit in a float", d);
            return mismatch(kv, detail);
        }
    } else if (load_integer(kv->type, kv->data, &mag, &neg)) {
        d = integer_as_double(mag, neg);
    } else {
        return type_mismatch(kv, "a number");
    }
    *out = (float)d;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_gguf_get_bool(const ds4rt_gguf *g, const char *key, int *out) {
    const ds4rt_gguf_kv *kv;
    ds4rt_status st = find(g, key, "gguf_get_bool", &kv, out);
    if (st != DS4RT_OK) return st;
    if (kv->type != DS4RT_GGUF_BOOL) return type_mismatch(kv, "BOOL");
    *out = *(const uint8_t *)kv->data != 0;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_gguf_get_str(const ds4rt_gguf *g, const char *key, ds4rt_str *out) {
    const ds4rt_gguf_kv *kv;
    ds4rt_status st = find(g, key, "gguf_get_str", &kv, out);
    if (st != DS4RT_OK) return st;
    if (kv->type != DS4RT_GGUF_STRING) return type_mismatch(kv, "STRING");
    *out = kv->str;
    return DS4RT_OK;
}

/* --- array elements --- */

static ds4rt_status element_fail(const ds4rt_gguf_kv *kv, uint64_t i, ds4rt_status st,
                                 const char *detail) {
    gguf_qname q;
    gguf_quote(&q, kv->key.data, kv->key.len);
    return ds4rt_fail(st, "metadata key '%s' (record at byte %llu), array element %llu: %s", q.s,
                      (unsigned long long)kv->file_offset, (unsigned long long)i, detail);
}

/* Pointer to element i of array record kv, after the checks every accessor shares. */
static ds4rt_status element(const ds4rt_gguf_kv *kv, uint64_t i, const void *out, const char *fn,
                            const uint8_t **p) {
    if (kv == NULL || out == NULL) {
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
    }
    if (kv->type != DS4RT_GGUF_ARRAY) {
        gguf_qname q;
        gguf_quote(&q, kv->key.data, kv->key.len);
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "metadata key '%s' (record at byte %llu) is a %s, not an array", q.s,
                          (unsigned long long)kv->file_offset, type_name_or(kv->type));
    }
    if (i >= kv->array_len) {
        char detail[96];
        snprintf(detail, sizeof detail, "index out of range (the array has %llu elements)",
                 (unsigned long long)kv->array_len);
        return element_fail(kv, i, DS4RT_ERR_OUT_OF_RANGE, detail);
    }
    int size = gguf_value_size(kv->array_type);
    if (size > 0) {
        *p = (const uint8_t *)kv->data + i * (uint64_t)size;
    } else if (size == 0 && kv->elem_index != NULL) {
        *p = (const uint8_t *)kv->data + kv->elem_index[i];
    } else {
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                          "%s: the record has no element index (it did not come from the reader)",
                          fn);
    }
    return DS4RT_OK;
}

static ds4rt_status element_type_mismatch(const ds4rt_gguf_kv *kv, uint64_t i,
                                          const char *wanted) {
    char detail[160];
    if (kv->array_type == DS4RT_GGUF_ARRAY) {
        snprintf(detail, sizeof detail,
                 "it is a nested array (read it with ds4rt_gguf_array_sub); expected %s", wanted);
    } else {
        snprintf(detail, sizeof detail, "it has type %s; expected %s",
                 type_name_or(kv->array_type), wanted);
    }
    return element_fail(kv, i, DS4RT_ERR_FORMAT, detail);
}

DS4RT_API ds4rt_status ds4rt_gguf_array_str(const ds4rt_gguf_kv *kv, uint64_t i, ds4rt_str *out) {
    const uint8_t *p = NULL;
    ds4rt_status st = element(kv, i, out, "gguf_array_str", &p);
    if (st != DS4RT_OK) return st;
    if (kv->array_type != DS4RT_GGUF_STRING) return element_type_mismatch(kv, i, "STRING");
    out->len = gguf_load_u64(p);
    out->data = (const char *)p + 8;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_gguf_array_int(const ds4rt_gguf_kv *kv, uint64_t i, int64_t *out) {
    const uint8_t *p = NULL;
    ds4rt_status st = element(kv, i, out, "gguf_array_int", &p);
    if (st != DS4RT_OK) return st;
    if (kv->array_type == DS4RT_GGUF_BOOL) {
        *out = p[0] != 0;
        return DS4RT_OK;
    }
    uint64_t mag;
    bool neg;
    if (!load_integer(kv->array_type, p, &mag, &neg)) {
        return element_type_mismatch(kv, i, "an integer or BOOL");
    }
    if (!neg && mag > (uint64_t)INT64_MAX) {
        char detail[96];
        snprintf(detail, sizeof detail, "%llu does not fit in an int64", (unsigned long long)mag);
        return element_fail(kv, i, DS4RT_ERR_FORMAT, detail);
    }
    /* Back from sign and magnitude without overflow, INT64_MIN included (mag >= 1 if neg). */
    *out = neg ? -(int64_t)(mag - 1) - 1 : (int64_t)mag;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_gguf_array_f64(const ds4rt_gguf_kv *kv, uint64_t i, double *out) {
    const uint8_t *p = NULL;
    ds4rt_status st = element(kv, i, out, "gguf_array_f64", &p);
    if (st != DS4RT_OK) return st;
    uint64_t mag;
    bool neg;
    if (load_float(kv->array_type, p, out)) return DS4RT_OK;
    if (load_integer(kv->array_type, p, &mag, &neg)) {
        *out = integer_as_double(mag, neg);
        return DS4RT_OK;
    }
    return element_type_mismatch(kv, i, "a number");
}

DS4RT_API ds4rt_status ds4rt_gguf_array_sub(const ds4rt_gguf_kv *kv, uint64_t i,
                                            ds4rt_gguf_kv *out) {
    const uint8_t *p = NULL;
    ds4rt_status st = element(kv, i, out, "gguf_array_sub", &p);
    if (st != DS4RT_OK) return st;
    if (kv->array_type != DS4RT_GGUF_ARRAY) return element_type_mismatch(kv, i, "ARRAY");
    uint64_t at = kv->elem_index[i] + GGUF_ARRAY_HEADER_BYTES; /* from kv->data */
    uint64_t end = i + 1 < kv->array_len ? kv->elem_index[i + 1] : kv->value_bytes;
    uint64_t child = kv->elem_index[kv->array_len + i];
    ds4rt_gguf_kv sub = {
        .key = kv->key,
        .type = DS4RT_GGUF_ARRAY,
        .array_type = (ds4rt_gguf_type)gguf_load_u32(p),
        .array_len = gguf_load_u64(p + 4),
        .data = p + GGUF_ARRAY_HEADER_BYTES,
        .file_offset = kv->file_offset,
        .value_offset = kv->value_offset + at,
        .value_bytes = end - at,
        .elem_index = child ? kv->elem_index + child : NULL,
    };
    *out = sub;
    return DS4RT_OK;
}
