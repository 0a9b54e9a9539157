/*
 * gguf_fuzz.c - deterministic mutation fuzzing of the GGUF reader, meant to run under
 * AddressSanitizer and UBSan (tests/test_gguf_fuzz.py builds it with the reader's sources).
 *
 *   gguf_fuzz [-n ITERATIONS] [-s SECONDS] [-f SCRATCH_FILE] SEED.gguf...
 *
 * Each iteration takes a seed image, applies 1-4 mutations (bit flips, byte sets, 32/64-bit
 * field overwrites with boundary values, overwrites aimed at the seed's own length and count
 * fields, truncation), copies the result into a heap block of exactly its size (so any read
 * past the end is caught by ASan), and opens it with ds4rt_gguf_open_memory; every 64th
 * iteration goes through a file and ds4rt_gguf_open instead. An image that opens is walked
 * completely: every key, every value through the typed getters, every array element through
 * the accessors (nested arrays through ds4rt_gguf_array_sub), every tensor's first and last
 * data byte, and every name lookup.
 *
 * Checks beyond the sanitizers: a failure returns FORMAT or UNSUPPORTED (never IO, INTERNAL
 * or OUT_OF_MEMORY for these small images) with a non-empty message; lookups by name find the
 * record they came from. Exit status 0 if all iterations passed, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ds4rt.h"
#include "gguf_walk.h"

/* The reader does not ask which types the CPU backend computes with; the type table links
 * against this hook, which belongs to the quant module. */
int ds4rt_type_is_computable(uint32_t type);
int ds4rt_type_is_computable(uint32_t type) {
    (void)type;
    return 0;
}

typedef struct seed {
    unsigned char *data;
    size_t size;
    size_t *fields; /* byte offsets of the seed's length/count/offset fields */
    size_t n_fields;
} seed;

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void) {
    /* xorshift64*: deterministic across runs and platforms. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

static int failures;
static uint64_t checksum;

static void fail(const char *what, uint64_t iteration) {
    fprintf(stderr, "gguf_fuzz: iteration %llu: %s\n", (unsigned long long)iteration, what);
    failures++;
}

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void add_field(seed *s, uint64_t at) {
    if (at + 8 > s->size) return;
    size_t *grown = realloc(s->fields, (s->n_fields + 1) * sizeof *grown);
    if (grown == NULL) return;
    s->fields = grown;
    s->fields[s->n_fields++] = (size_t)at;
}

/* Finds the seed's length, count and offset fields from the reader's own description of it,
 * so that mutations can aim at them. */
static int index_seed(seed *s) {
    ds4rt_gguf *g;
    if (ds4rt_gguf_open_memory(s->data, s->size, &g) != DS4RT_OK) return 0;
    add_field(s, 8);  /* n_tensors */
    add_field(s, 16); /* n_kv */
    for (uint64_t i = 0; i < ds4rt_gguf_kv_count(g); i++) {
        const ds4rt_gguf_kv *kv = ds4rt_gguf_kv_at(g, i);
        add_field(s, kv->file_offset); /* key length */
        if (kv->type == DS4RT_GGUF_STRING) add_field(s, kv->value_offset - 8);
        if (kv->type == DS4RT_GGUF_ARRAY) {
            add_field(s, kv->value_offset - 8); /* element count */
            if (kv->array_type == DS4RT_GGUF_STRING && kv->array_len > 0)
                add_field(s, kv->value_offset + kv->elem_index[kv->array_len - 1]);
        }
    }
    for (uint64_t i = 0; i < ds4rt_gguf_tensor_count(g); i++) {
        const ds4rt_gguf_tensor *t = ds4rt_gguf_tensor_at(g, i);
        uint64_t at = t->info_offset;
        add_field(s, at);                        /* name length */
        at += 8 + t->name.len;                   /* n_dims (u32) */
        for (uint32_t d = 0; d < t->n_dims; d++) add_field(s, at + 4 + 8 * d);
        add_field(s, at + 4 + 8 * (uint64_t)t->n_dims + 4); /* data offset */
    }
    ds4rt_gguf_close(g);
    return 1;
}

static const uint64_t boundary_u64[] = {
    0, 1, 2, 7, 8, 12, 13, 31, 32, 33, 255, 4096, 0x7fffffffull, 0x80000000ull, 0xffffffffull,
    0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull,
    0xfffffffffffffff8ull, 0xffffffffffffffe0ull,
};
static const uint32_t boundary_u32[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 12, 13, 16, 26, 30,
                                        31, 41, 42, 64, 255, 0x10000, 0x7fffffff, 0xffffffff};

static size_t mutate(unsigned char *buf, size_t size, const seed *s) {
    int n = 1 + (int)below(4);
    for (int m = 0; m < n && size > 0; m++) {
        uint64_t v;
        size_t at;
        switch (below(7)) {
        case 0: /* bit flip */
            at = (size_t)below(size);
            buf[at] ^= (unsigned char)(1u << below(8));
            break;
        case 1: { /* byte set */
            static const unsigned char special[] = {0, 0xff, 0x7f, 0x80};
            at = (size_t)below(size);
            buf[at] = below(4) == 0 ? (unsigned char)rnd() : special[below(4)];
            break;
        }
        case 2: /* 32-bit field anywhere (types, n_dims, version) */
            if (size < 4) break;
            at = (size_t)below(size - 3);
            memcpy(buf + at, &boundary_u32[below(sizeof boundary_u32 / 4)], 4);
            break;
        case 3: /* 64-bit field anywhere */
            if (size < 8) break;
            at = (size_t)below(size - 7);
            memcpy(buf + at, &boundary_u64[below(sizeof boundary_u64 / 8)], 8);
            break;
        case 4: /* a real length/count/offset field of the seed: boundary or off-by-a-bit */
        case 5:
            if (s->n_fields == 0) break;
            at = s->fields[below(s->n_fields)];
            if (at + 8 > size) break;
            if (below(2)) {
                v = boundary_u64[below(sizeof boundary_u64 / 8)];
            } else {
                memcpy(&v, buf + at, 8);
                v += (uint64_t)(int64_t)((int)below(9) - 4) * (below(2) ? 1 : 32);
            }
            memcpy(buf + at, &v, 8);
            break;
        case 6: /* truncation */
            size = (size_t)below(size);
            break;
        }
    }
    return size;
}

int main(int argc, char **argv) {
    uint64_t iterations = 20000;
    double seconds = 0;
    const char *scratch = NULL;
    seed seeds[64];
    int n_seeds = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "-n") == 0 && a + 1 < argc) iterations = strtoull(argv[++a], NULL, 10);
        else if (strcmp(argv[a], "-s") == 0 && a + 1 < argc) seconds = atof(argv[++a]);
        else if (strcmp(argv[a], "-f") == 0 && a + 1 < argc) scratch = argv[++a];
        else if (n_seeds < 64) {
            seed *s = &seeds[n_seeds];
            memset(s, 0, sizeof *s);
            s->data = read_file(argv[a], &s->size);
            if (s->data == NULL || !index_seed(s)) {
                fprintf(stderr, "gguf_fuzz: %s: cannot read, or not a valid GGUF seed: %s\n",
                        argv[a], ds4rt_last_error());
                return 2;
            }
            n_seeds++;
        }
    }
    if (n_seeds == 0) {
        fprintf(stderr, "usage: gguf_fuzz [-n N] [-s SECONDS] [-f SCRATCH] SEED.gguf...\n");
        return 2;
    }
    clock_t start = clock();
    uint64_t opened = 0, by_status[16] = {0}, done = 0;
    size_t max_size = 0;
    for (int i = 0; i < n_seeds; i++)
        if (seeds[i].size > max_size) max_size = seeds[i].size;
    unsigned char *work = malloc(max_size);
    for (uint64_t it = 0; it < iterations; it++) {
        if (seconds > 0 && (it & 255) == 0 &&
            (double)(clock() - start) / CLOCKS_PER_SEC > seconds)
            break;
        const seed *s = &seeds[below((uint64_t)n_seeds)];
        memcpy(work, s->data, s->size);
        size_t size = mutate(work, s->size, s);
        unsigned char *exact = malloc(size ? size : 1);
        memcpy(exact, work, size);
        ds4rt_gguf *g = NULL;
        ds4rt_status st;
        if (scratch != NULL && (it & 63) == 0) {
            FILE *f = fopen(scratch, "wb");
            if (f == NULL || fwrite(exact, 1, size, f) != size) {
                fail("cannot write the scratch file", it);
                if (f) fclose(f);
                free(exact);
                continue;
            }
            fclose(f);
            st = ds4rt_gguf_open(scratch, &g);
        } else {
            st = ds4rt_gguf_open_memory(exact, size, &g);
        }
        by_status[st < 16 ? st : 15]++;
        if (st == DS4RT_OK) {
            opened++;
            checksum = gguf_walk(g, it, fail);
            ds4rt_gguf_close(g);
        } else {
            if (g != NULL) fail("failed open left a handle", it);
            if (st != DS4RT_ERR_FORMAT && st != DS4RT_ERR_UNSUPPORTED) {
                fprintf(stderr, "gguf_fuzz: iteration %llu: %s: %s\n", (unsigned long long)it,
                        ds4rt_status_name(st), ds4rt_last_error());
                fail("unexpected status", it);
            }
            if (ds4rt_last_error()[0] == '\0') fail("failure without a message", it);
        }
        free(exact);
        done++;
    }
    free(work);
    printf("{\"iterations\": %llu, \"opened\": %llu, \"format\": %llu, \"unsupported\": %llu, "
           "\"failures\": %d, \"checksum\": %llu}\n",
           (unsigned long long)done, (unsigned long long)opened,
           (unsigned long long)by_status[DS4RT_ERR_FORMAT],
           (unsigned long long)by_status[DS4RT_ERR_UNSUPPORTED], failures,
           (unsigned long long)checksum);
    for (int i = 0; i < n_seeds; i++) {
        free(seeds[i].data);
        free(seeds[i].fields);
    }
    return failures ? 1 : 0;
}
