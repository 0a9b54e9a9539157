/* gguf_walk.c - reads every part of an opened GGUF (see gguf_walk.h). */
#include "gguf_walk.h"

#include <string.h>

static uint64_t checksum;
static gguf_walk_fail_fn fail;

static void touch(const void *p, uint64_t n) {
    const unsigned char *b = p;
    for (uint64_t i = 0; i < n; i++) checksum = checksum * 31 + b[i];
}

static void walk_array(const ds4rt_gguf_kv *kv, uint64_t iteration) {
    for (uint64_t i = 0; i < kv->array_len; i++) {
        ds4rt_str s;
        int64_t iv;
        double dv;
        ds4rt_gguf_kv sub;
        switch (kv->array_type) {
        case DS4RT_GGUF_STRING:
            if (ds4rt_gguf_array_str(kv, i, &s) != DS4RT_OK) fail("array_str failed", iteration);
            else touch(s.data, s.len);
            break;
        case DS4RT_GGUF_ARRAY:
            if (ds4rt_gguf_array_sub(kv, i, &sub) != DS4RT_OK) fail("array_sub failed", iteration);
            else walk_array(&sub, iteration);
            break;
        case DS4RT_GGUF_FLOAT32:
        case DS4RT_GGUF_FLOAT64:
            if (ds4rt_gguf_array_f64(kv, i, &dv) != DS4RT_OK) fail("array_f64 failed", iteration);
            else touch(&dv, sizeof dv);
            break;
        default: {
            ds4rt_status st = ds4rt_gguf_array_int(kv, i, &iv);
            if (st == DS4RT_OK) touch(&iv, sizeof iv);
            else if (!(st == DS4RT_ERR_FORMAT && kv->array_type == DS4RT_GGUF_UINT64))
                fail("array_int failed", iteration);
        }
        }
    }
    ds4rt_str s;
    if (kv->array_len > 0 && ds4rt_gguf_array_str(kv, kv->array_len, &s) != DS4RT_ERR_OUT_OF_RANGE)
        fail("array index past the end was not OUT_OF_RANGE", iteration);
}

uint64_t gguf_walk(const ds4rt_gguf *g, uint64_t iteration, gguf_walk_fail_fn on_failure) {
    fail = on_failure;
    char key[256];
    for (uint64_t i = 0; i < ds4rt_gguf_kv_count(g); i++) {
        const ds4rt_gguf_kv *kv = ds4rt_gguf_kv_at(g, i);
        touch(kv->key.data, kv->key.len);
        if (kv->key.len < sizeof key && memchr(kv->key.data, 0, kv->key.len) == NULL) {
            memcpy(key, kv->key.data, kv->key.len);
            key[kv->key.len] = '\0';
            if (ds4rt_gguf_find_kv(g, key) != kv) fail("find_kv missed its record", iteration);
            uint32_t u32;
            uint64_t u64;
            float f;
            int b;
            ds4rt_str s;
            /* Any status is fine for a type that does not fit; only the reads matter. */
            if (ds4rt_gguf_get_u32(g, key, &u32) == DS4RT_OK) touch(&u32, 4);
            if (ds4rt_gguf_get_u64(g, key, &u64) == DS4RT_OK) touch(&u64, 8);
            if (ds4rt_gguf_get_f32(g, key, &f) == DS4RT_OK) touch(&f, 4);
            if (ds4rt_gguf_get_bool(g, key, &b) == DS4RT_OK) touch(&b, sizeof b);
            if (ds4rt_gguf_get_str(g, key, &s) == DS4RT_OK) touch(s.data, s.len);
        }
        if (kv->type == DS4RT_GGUF_STRING) touch(kv->str.data, kv->str.len);
        else if (kv->type == DS4RT_GGUF_ARRAY) walk_array(kv, iteration);
        else touch(kv->data, kv->value_bytes);
    }
    char name[256];
    for (uint64_t i = 0; i < ds4rt_gguf_tensor_count(g); i++) {
        const ds4rt_gguf_tensor *t = ds4rt_gguf_tensor_at(g, i);
        touch(t->name.data, t->name.len);
        const unsigned char *d = t->data;
        if (t->nbytes == 0) fail("tensor with 0 bytes", iteration);
        else {
            touch(d, 1);
            touch(d + t->nbytes - 1, 1);
        }
        if (t->name.len < sizeof name && memchr(t->name.data, 0, t->name.len) == NULL) {
            memcpy(name, t->name.data, t->name.len);
            name[t->name.len] = '\0';
            if (ds4rt_gguf_find_tensor(g, name) != t) fail("find_tensor missed", iteration);
        }
    }
    if (ds4rt_gguf_kv_at(g, ds4rt_gguf_kv_count(g)) != NULL) fail("kv_at past the end", iteration);
    if (ds4rt_gguf_tensor_at(g, ds4rt_gguf_tensor_count(g)) != NULL)
        fail("tensor_at past the end", iteration);
    return checksum;
}
