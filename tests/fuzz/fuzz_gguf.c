/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader (docs/ROBUSTNESS.md, docs/GGUF.md): the
 * input is a GGUF image, opened with ds4rt_gguf_open_memory and, if it opens, walked completely
 * (gguf_walk.h). Checks beyond the sanitizers: a refusal is FORMAT or UNSUPPORTED (never IO,
 * INTERNAL or OUT_OF_MEMORY for an image this small) with a message and no handle; lookups by
 * name find the record they came from. gguf_fuzz.c is the mutation fuzzer aimed at the
 * format's length fields; this target leaves the search to the engine.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ds4rt.h"
#include "fuzz_target.h"
#include "gguf_walk.h"

static void failed(const char *what, uint64_t iteration) {
    (void)iteration;
    fprintf(stderr, "fuzz_gguf: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ds4rt_gguf *g = NULL;
    ds4rt_status st = ds4rt_gguf_open_memory(data, size, &g);
    if (st == DS4RT_OK) {
        gguf_walk(g, 0, failed);
        ds4rt_gguf_close(g);
        return 0;
    }
    if (g != NULL) failed("a failed open left a handle", 0);
    if (st != DS4RT_ERR_FORMAT && st != DS4RT_ERR_UNSUPPORTED) {
        fprintf(stderr, "fuzz_gguf: %s: %s\n", ds4rt_status_name(st), ds4rt_last_error());
        failed("unexpected status", 0);
    }
    if (ds4rt_last_error()[0] == '\0') failed("a failure without a message", 0);
    return 0;
}
