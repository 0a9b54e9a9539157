/*
 * abi.h - the one versioning rule for the public structs that carry their own size
 * (docs/API.md, "Struct versioning"). Every entry point that reads, fills or initialises such a
 * struct goes through the three calls below; none repeats the rule.
 *
 * A struct's `size` (its first member, the sizeof the caller was compiled with) is its version:
 *   - smaller than the library's struct (a caller built against an older header): the caller's
 *     bytes are read over the library's defaults, so the fields it does not know keep their
 *     defaults; an output is filled up to the caller's size;
 *   - larger (a caller built against a newer header than this library): accepted only if every
 *     byte the library does not know is zero (as Linux's openat2 does), else rejected with a
 *     message saying the library is older than the header; an output gets zeros there;
 *   - exactly the size of a published layout that is not a prefix of today's (a field that
 *     changed in place, e.g. a struct once embedded by value): recognised and translated.
 * Fields are only ever appended, never into the tail padding of an earlier version, and a field
 * added later means "what older libraries did" when it is zero.
 */
#ifndef DS4RT_ABI_H
#define DS4RT_ABI_H

#include <stddef.h>

#include "ds4rt.h"

/* Sizes above this are taken for an uninitialised `size` member rather than a real layout. */
#define DS4RT_STRUCT_MAX_SIZE 4096

/* A published layout that is not a prefix of the current one, recognised by its exact size. */
typedef struct ds4rt_legacy_layout {
    size_t size;
    /* the caller's legacy struct -> `lib`, a library-size struct already holding defaults; it
     * may keep pointers into `legacy` (valid for the duration of the call) */
    void (*read)(const void *legacy, void *lib);
    /* defaults in the legacy layout (size member included) */
    void (*init)(void *legacy);
} ds4rt_legacy_layout;

typedef struct ds4rt_struct_desc {
    const char *name;                  /* for messages: "ds4rt_model_params" */
    size_t size;                       /* sizeof in this library */
    size_t min_size;                   /* the smallest layout of today's shape ever published */
    void (*defaults)(void *lib);       /* library-size defaults, size member included; NULL for
                                          outputs */
    const ds4rt_legacy_layout *legacy; /* n_legacy translated layouts */
    size_t n_legacy;
} ds4rt_struct_desc;

/* Input: *lib (desc->size bytes) receives the caller's struct read under the rule; a NULL
 * caller gives the defaults. DS4RT_ERR_INVALID_ARGUMENT for a size that is no layout,
 * DS4RT_ERR_UNSUPPORTED for nonzero bytes this library does not know. */
ds4rt_status ds4rt_struct_read(const ds4rt_struct_desc *desc, const void *caller, void *lib);

/* Initialiser: fills the caller's struct of `size` bytes with the defaults of that layout,
 * zeros beyond what the library knows, and sets its size member to `size`. */
ds4rt_status ds4rt_struct_init(const ds4rt_struct_desc *desc, void *caller, size_t size);

/* Output: copies the library's struct `lib` into the caller's, up to the caller's size (read
 * from its size member), zeroing what lies beyond the library's struct; the caller's size
 * member then says how many bytes were filled. */
ds4rt_status ds4rt_struct_write(const ds4rt_struct_desc *desc, const void *lib, void *caller);

#endif /* DS4RT_ABI_H */
