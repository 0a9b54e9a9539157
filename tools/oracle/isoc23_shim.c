/* The four C23 entry points that llama.cpp b11739's prebuilt libraries import from glibc 2.38,
 * forwarded to their C99 equivalents so the libraries run on glibc 2.36 (Debian 12). The only
 * behavioural differences of the C23 variants (binary "0b" prefixes in strtol and friends, "%b"
 * in sscanf) never occur in the strings llama.cpp parses (numbers in GGUF metadata overrides,
 * CPU feature files, environment variables). Test-only; see docs/ORACLES.md. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

long __isoc23_strtol(const char *s, char **end, int base);
unsigned long __isoc23_strtoul(const char *s, char **end, int base);
unsigned long long __isoc23_strtoull(const char *s, char **end, int base);
int __isoc23_sscanf(const char *s, const char *fmt, ...);

long __isoc23_strtol(const char *s, char **end, int base) { return strtol(s, end, base); }

unsigned long __isoc23_strtoul(const char *s, char **end, int base) {
    return strtoul(s, end, base);
}

unsigned long long __isoc23_strtoull(const char *s, char **end, int base) {
    return strtoull(s, end, base);
}

int __isoc23_sscanf(const char *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsscanf(s, fmt, ap);
    va_end(ap);
    return n;
}
