/* fuzz_target.h - the libFuzzer entry point every fuzz target defines (docs/ROBUSTNESS.md). */
#ifndef DS4RT_FUZZ_TARGET_H
#define DS4RT_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

/* Runs one input; returns 0. A failed check aborts (a crash to libFuzzer and the driver). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* DS4RT_FUZZ_TARGET_H */
