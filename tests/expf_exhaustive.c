/*
 * expf_exhaustive.c - ds4rt_expf_rows (src/backend/cpu/cpu_math.c) against the C library's expf
 * for all 2^32 float inputs, bit for bit (tests/test_expf_exhaustive.py). Where the machine does
 * not take the vector form it checks nothing and exits 77 (skip), since ds4rt_expf_rows then is
 * the library's expf itself.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu_math.h"

int main(void) {
    if (!ds4rt_expf_rows_vector()) {
        printf("SKIP: this machine takes the library's expf (no vector form to check)\n");
        return 77;
    }
    enum { CHUNK = 1 << 16 };
    static float in[CHUNK], out[CHUNK];
    uint64_t bad = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += CHUNK) {
        for (uint32_t i = 0; i < CHUNK; i++) {
            const uint32_t u = (uint32_t)(base + i);
            memcpy(&in[i], &u, 4);
        }
        memcpy(out, in, sizeof out);
        /* odd lengths too: the 8-wide loop and the scalar tail */
        ds4rt_expf_rows(out, CHUNK - 3);
        ds4rt_expf_rows(out + CHUNK - 3, 3);
        for (uint32_t i = 0; i < CHUNK; i++) {
            const float want = expf(in[i]);
            if (memcmp(&want, &out[i], 4) != 0 && bad++ < 10)
                printf("MISMATCH x=%a (0x%08x): expf %a, rows %a\n", (double)in[i], (uint32_t)(base + i),
                       (double)want, (double)out[i]);
        }
    }
    printf("%s: %llu of 2^32 inputs differ\n", bad ? "FAILED" : "PASSED", (unsigned long long)bad);
    return bad != 0;
}
