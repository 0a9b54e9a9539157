/*
 * gguf_walk.h - walks an opened GGUF completely, for the fuzzers (gguf_fuzz, fuzz_gguf): every
 * key, every value through the typed getters, every array element through the accessors (nested
 * arrays through ds4rt_gguf_array_sub), every tensor's first and last data byte, and every name
 * lookup. A lookup that misses the record it came from, an accessor that fails on an element
 * the reader accepted, or an index past the end that is not refused is reported through `fail`.
 */
#ifndef DS4RT_GGUF_WALK_H
#define DS4RT_GGUF_WALK_H

#include <stdint.h>

#include "ds4rt.h"

typedef void (*gguf_walk_fail_fn)(const char *what, uint64_t iteration);

/* Walks g; returns a running checksum of every byte read (so the reads cannot be optimised
 * away). */
uint64_t gguf_walk(const ds4rt_gguf *g, uint64_t iteration, gguf_walk_fail_fn fail);

#endif /* DS4RT_GGUF_WALK_H */
