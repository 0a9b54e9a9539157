/* error.c - status names and the thread-local last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define DS4RT_ERROR_CAP 1024

static _Thread_local char tls_error[DS4RT_ERROR_CAP];

DS4RT_API const char *ds4rt_status_name(ds4rt_status status) {
    switch (status) {
    case DS4RT_OK: return "DS4RT_OK";
    case DS4RT_ERR_INVALID_ARGUMENT: return "DS4RT_ERR_INVALID_ARGUMENT";
    case DS4RT_ERR_IO: return "DS4RT_ERR_IO";
    case DS4RT_ERR_FORMAT: return "DS4RT_ERR_FORMAT";
    case DS4RT_ERR_UNSUPPORTED: return "DS4RT_ERR_UNSUPPORTED";
    case DS4RT_ERR_OUT_OF_MEMORY: return "DS4RT_ERR_OUT_OF_MEMORY";
    case DS4RT_ERR_OUT_OF_RANGE: return "DS4RT_ERR_OUT_OF_RANGE";
    case DS4RT_ERR_NOT_FOUND: return "DS4RT_ERR_NOT_FOUND";
    case DS4RT_ERR_MISMATCH: return "DS4RT_ERR_MISMATCH";
    case DS4RT_ERR_STATE: return "DS4RT_ERR_STATE";
    case DS4RT_ERR_BACKEND: return "DS4RT_ERR_BACKEND";
    case DS4RT_ERR_INTERNAL: return "DS4RT_ERR_INTERNAL";
    }
    return "DS4RT_ERR_UNKNOWN";
}

DS4RT_API const char *ds4rt_last_error(void) { return tls_error; }

DS4RT_API void ds4rt_clear_error(void) { tls_error[0] = '\0'; }

ds4rt_status ds4rt_fail(ds4rt_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_error, sizeof tls_error, fmt, ap);
    va_end(ap);
    return status;
}

ds4rt_status ds4rt_fail_context(ds4rt_status status, const char *fmt, ...) {
    char old[DS4RT_ERROR_CAP];
    memcpy(old, tls_error, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tls_error, sizeof tls_error, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : ((size_t)n < sizeof tls_error ? (size_t)n : sizeof tls_error - 1);
    size_t len = strnlen(old, sizeof old);
    /* names are said once: a message that begins with the word the context ends with ("PATH:
     * ..." from the GGUF reader, under the context "DSpark support PATH") is joined on it */
    const char *colon = memchr(old, ':', len);
    size_t k = colon ? (size_t)(colon - old) : 0;
    if (k > 0 && k <= used && memcmp(tls_error + used - k, old, k) == 0 &&
        (used == k || tls_error[used - k - 1] == ' ')) {
        used -= k;
    } else if (used + 2 < sizeof tls_error) {
        tls_error[used++] = ':';
        tls_error[used++] = ' ';
    }
    size_t room = sizeof tls_error - used;
    if (len >= room) len = room - 1;
    memcpy(tls_error + used, old, len);
    tls_error[used + len] = '\0';
    return status;
}

void ds4rt_copy_last_error(char *dst, size_t dst_size) {
    if (dst == NULL || dst_size == 0) return;
    snprintf(dst, dst_size, "%s", tls_error);
}
