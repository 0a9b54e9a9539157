/* gguf_types.c - facts about GGUF metadata value types, and rendering of names from the file
 * for error messages. */
#include <stdio.h>

#include "gguf_internal.h"

static const char *const type_names[] = {
    [DS4RT_GGUF_UINT8] = "UINT8",     [DS4RT_GGUF_INT8] = "INT8",
    [DS4RT_GGUF_UINT16] = "UINT16",   [DS4RT_GGUF_INT16] = "INT16",
    [DS4RT_GGUF_UINT32] = "UINT32",   [DS4RT_GGUF_INT32] = "INT32",
    [DS4RT_GGUF_FLOAT32] = "FLOAT32", [DS4RT_GGUF_BOOL] = "BOOL",
    [DS4RT_GGUF_STRING] = "STRING",   [DS4RT_GGUF_ARRAY] = "ARRAY",
    [DS4RT_GGUF_UINT64] = "UINT64",   [DS4RT_GGUF_INT64] = "INT64",
    [DS4RT_GGUF_FLOAT64] = "FLOAT64",
};

DS4RT_API const char *ds4rt_gguf_type_name(uint32_t type) {
    return type < DS4RT_ARRAY_LEN(type_names) ? type_names[type] : NULL;
}

int gguf_value_size(uint32_t type) {
    switch ((ds4rt_gguf_type)type) {
    case DS4RT_GGUF_UINT8:
    case DS4RT_GGUF_INT8:
    case DS4RT_GGUF_BOOL: return 1;
    case DS4RT_GGUF_UINT16:
    case DS4RT_GGUF_INT16: return 2;
    case DS4RT_GGUF_UINT32:
    case DS4RT_GGUF_INT32:
    case DS4RT_GGUF_FLOAT32: return 4;
    case DS4RT_GGUF_UINT64:
    case DS4RT_GGUF_INT64:
    case DS4RT_GGUF_FLOAT64: return 8;
    case DS4RT_GGUF_STRING:
    case DS4RT_GGUF_ARRAY: return 0;
    }
    return -1;
}

void gguf_quote(gguf_qname *q, const char *name, uint64_t len) {
    /* Room for the longest escape (4) plus "..." and the NUL. */
    const size_t limit = sizeof q->s - 8;
    size_t o = 0;
    for (uint64_t i = 0; i < len; i++) {
        if (o >= limit) {
            memcpy(q->s + o, "...", 4);
            return;
        }
        unsigned char ch = (unsigned char)name[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
            q->s[o++] = (char)ch;
        } else {
            snprintf(q->s + o, 5, "\\x%02x", ch);
            o += 4;
        }
    }
    q->s[o] = '\0';
}
