/*
 * internal.h - helpers shared by every part of the core: error reporting and checked
 * arithmetic. Not installed; nothing here is exported from libds4rt.
 */
#ifndef DS4RT_INTERNAL_H
#define DS4RT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ds4rt.h"

#if defined(__GNUC__)
#  define DS4RT_PRINTF(fmt_idx, args_idx) __attribute__((format(printf, fmt_idx, args_idx)))
#else
#  define DS4RT_PRINTF(fmt_idx, args_idx)
#endif

/* Records `status` and a formatted message as the calling thread's last error and returns
 * `status`, so failures read as `return ds4rt_fail(DS4RT_ERR_FORMAT, "...", ...);`. */
ds4rt_status ds4rt_fail(ds4rt_status status, const char *fmt, ...) DS4RT_PRINTF(2, 3);

/* Prepends "prefix: " to the calling thread's current error message (adds context on the way
 * up, e.g. the file path) and returns `status`. A message that already begins with the prefix's
 * last word (a path the reader named) keeps one mention of it. */
ds4rt_status ds4rt_fail_context(ds4rt_status status, const char *fmt, ...) DS4RT_PRINTF(2, 3);

/* Copies the calling thread's last error message into `dst` (a handle's own message). */
void ds4rt_copy_last_error(char *dst, size_t dst_size);

/* Overflow-checked arithmetic on sizes read from untrusted input. Return false on overflow. */
static inline bool ds4rt_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool ds4rt_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

#define DS4RT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Monotonic clock in milliseconds, for stage timers. */
double ds4rt_now_ms(void);

#endif /* DS4RT_INTERNAL_H */
