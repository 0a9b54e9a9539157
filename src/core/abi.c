/* abi.c - the struct versioning rule (see abi.h). */
#include "abi.h"

#include <stddef.h>
#include <string.h>

#include "internal.h"

#ifndef DS4RT_VERSION_STRING
#  define DS4RT_VERSION_STRING "0.0.0"
#endif

static size_t size_member(const void *s) {
    size_t n;
    memcpy(&n, s, sizeof n); /* the caller's struct may be less aligned than size_t */
    return n;
}

static void set_size_member(void *s, size_t n) { memcpy(s, &n, sizeof n); }

static const ds4rt_legacy_layout *find_legacy(const ds4rt_struct_desc *d, size_t size) {
    for (size_t i = 0; i < d->n_legacy; i++)
        if (d->legacy[i].size == size) return &d->legacy[i];
    return NULL;
}

static ds4rt_status check_size(const ds4rt_struct_desc *d, size_t size, const char *how) {
    if (size >= d->min_size && size <= DS4RT_STRUCT_MAX_SIZE) return DS4RT_OK;
    return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                      "%s.size is %zu, which is no layout of this struct (this library's is %zu bytes): %s", d->name,
                      size, d->size, how);
}

ds4rt_status ds4rt_struct_read(const ds4rt_struct_desc *d, const void *caller, void *lib) {
    d->defaults(lib);
    if (caller == NULL) return DS4RT_OK;
    size_t size = size_member(caller);
    const ds4rt_legacy_layout *old = find_legacy(d, size);
    if (old != NULL) {
        old->read(caller, lib);
        set_size_member(lib, d->size);
        return DS4RT_OK;
    }
    ds4rt_status st = check_size(d, size, "initialise it with its *_init() or *_default_params() call");
    if (st != DS4RT_OK) return st;
    if (size > d->size) {
        const unsigned char *b = caller;
        for (size_t i = d->size; i < size; i++)
            if (b[i] != 0)
                return ds4rt_fail(DS4RT_ERR_UNSUPPORTED,
                                  "%s is %zu bytes and sets byte %zu, beyond the %zu bytes this library (ds4rt %s) "
                                  "knows: the library is older than the header the caller was built with",
                                  d->name, size, i, d->size, DS4RT_VERSION_STRING);
        size = d->size;
    }
    memcpy(lib, caller, size);
    set_size_member(lib, d->size);
    return DS4RT_OK;
}

ds4rt_status ds4rt_struct_init(const ds4rt_struct_desc *d, void *caller, size_t size) {
    if (caller == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "%s init: NULL struct", d->name);
    const ds4rt_legacy_layout *old = find_legacy(d, size);
    if (old != NULL) {
        old->init(caller);
        set_size_member(caller, size);
        return DS4RT_OK;
    }
    ds4rt_status st = check_size(d, size, "pass sizeof the struct");
    if (st != DS4RT_OK) return st;
    _Alignas(max_align_t) unsigned char lib[DS4RT_STRUCT_MAX_SIZE];
    if (d->size > sizeof lib) return ds4rt_fail(DS4RT_ERR_INTERNAL, "%s is larger than %zu bytes", d->name, sizeof lib);
    d->defaults(lib);
    memset(caller, 0, size);
    memcpy(caller, lib, size < d->size ? size : d->size);
    set_size_member(caller, size);
    return DS4RT_OK;
}

ds4rt_status ds4rt_struct_write(const ds4rt_struct_desc *d, const void *lib, void *caller) {
    size_t size = size_member(caller);
    ds4rt_status st = check_size(d, size, "set it to sizeof the struct before the call");
    if (st != DS4RT_OK) return st;
    if (size > d->size) {
        memset((unsigned char *)caller + d->size, 0, size - d->size);
        size = d->size;
    }
    memcpy(caller, lib, size);
    set_size_member(caller, size);
    return DS4RT_OK;
}
