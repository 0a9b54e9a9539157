/*
 * standalone_driver.c - runs a libFuzzer target (LLVMFuzzerTestOneInput) without libFuzzer,
 * for compilers that lack it (gcc) and for the short CI run (docs/ROBUSTNESS.md). With clang,
 * -Dfuzz_engine=libfuzzer links the same targets against libFuzzer instead.
 *
 *   fuzz_X [-runs=N] [-max_total_time=S] [-seed=N] [-max_len=N] [CORPUS_FILE_OR_DIR...]
 *
 * The flags are libFuzzer's, so one command line drives either build. Every corpus input runs
 * once as it is; then, until N runs or S seconds, a corpus input (or one of the mutants kept
 * at random as further starting points: no coverage feedback here) gets 1-8 mutations - bit flips, byte sets, boundary integers, byte
 * insertion and erasure, truncation, a splice with another input - and runs. Each input is a
 * heap block of exactly its size, so ASan sees any read past its end. Deterministic for a
 * given seed. Prints one JSON line; a target's failed check or a sanitizer report aborts.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuzz_target.h"

/* libFuzzer's optional set-up hook; none of these targets defines it (they set up lazily). */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

typedef struct input {
    uint8_t *data;
    size_t size;
} input;

typedef struct pool {
    input *v;
    size_t n, cap;
} pool;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void) { /* xorshift64*: the same sequence on every platform */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}

static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static void add(pool *p, const uint8_t *data, size_t size) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        input *v = realloc(p->v, cap * sizeof *v);
        if (v == NULL) return;
        p->v = v;
        p->cap = cap;
    }
    uint8_t *copy = malloc(size ? size : 1);
    if (copy == NULL) return;
    if (size) memcpy(copy, data, size);
    p->v[p->n++] = (input){copy, size};
}

static void add_file(pool *p, const char *path, size_t max_len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return;
    uint8_t *buf = malloc(max_len ? max_len : 1);
    size_t n = buf ? fread(buf, 1, max_len, f) : 0;
    fclose(f);
    if (buf) add(p, buf, n);
    free(buf);
}

static void add_path(pool *p, const char *path, size_t max_len) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "fuzz driver: %s: no such file or directory\n", path);
        exit(2);
    }
    if (!S_ISDIR(sb.st_mode)) {
        add_file(p, path, max_len);
        return;
    }
    DIR *d = opendir(path);
    if (d == NULL) return;
    /* sorted, so a run does not depend on the directory's order */
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char **grown = realloc(names, (n + 1) * sizeof *names);
        if (grown == NULL) break;
        names = grown;
        names[n] = malloc(strlen(path) + strlen(e->d_name) + 2);
        if (names[n] == NULL) break;
        sprintf(names[n], "%s/%s", path, e->d_name);
        n++;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        add_file(p, names[i], max_len);
        free(names[i]);
    }
    free(names);
}

static const uint64_t boundary[] = {0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 64, 127, 128, 255, 256, 4096, 0x7fff,
                                    0x8000, 0xffff, 0x7fffffff, 0x80000000u, 0xffffffffu,
                                    0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
                                    0xffffffffffffffffull};

/* Mutates buf (size bytes of cap) in place; returns the new size. */
static size_t mutate(uint8_t *buf, size_t size, size_t cap, const pool *p) {
    int n = 1 + (int)below(8);
    for (int m = 0; m < n; m++) {
        switch (below(8)) {
        case 0:
            if (size) buf[below(size)] ^= (uint8_t)(1u << below(8));
            break;
        case 1:
            if (size) buf[below(size)] = below(2) ? (uint8_t)rnd() : (uint8_t)boundary[below(14)];
            break;
        case 2: { /* an integer of 1, 2, 4 or 8 bytes at a random offset */
            size_t w = (size_t)1 << below(4);
            if (size < w) break;
            uint64_t v = boundary[below(sizeof boundary / sizeof *boundary)];
            if (below(4) == 0) v += (uint64_t)(int64_t)((int)below(5) - 2);
            memcpy(buf + below(size - w + 1), &v, w);
            break;
        }
        case 3: { /* insert bytes */
            size_t k = 1 + below(16), at = below(size + 1);
            if (size + k > cap) break;
            memmove(buf + at + k, buf + at, size - at);
            for (size_t i = 0; i < k; i++) buf[at + i] = (uint8_t)rnd();
            size += k;
            break;
        }
        case 4: { /* erase bytes */
            if (size == 0) break;
            size_t at = below(size), k = 1 + below(size - at < 16 ? size - at : 16);
            memmove(buf + at, buf + at + k, size - at - k);
            size -= k;
            break;
        }
        case 5: /* truncate */
            size = below(size + 1);
            break;
        case 6: { /* splice: the tail of another input from a random point */
            const input *o = &p->v[below(p->n)];
            if (o->size == 0) break;
            size_t at = below(size + 1), from = below(o->size), k = o->size - from;
            if (at + k > cap) k = cap - at;
            memcpy(buf + at, o->data + from, k);
            if (at + k > size) size = at + k;
            break;
        }
        case 7: { /* copy a run of the input over another place in it */
            if (size < 2) break;
            size_t from = below(size), to = below(size), k = 1 + below(32);
            if (from + k > size) k = size - from;
            if (to + k > size) k = size - to;
            memmove(buf + to, buf + from, k);
            break;
        }
        }
    }
    return size;
}

static void run_one(const uint8_t *data, size_t size) {
    uint8_t *exact = malloc(size ? size : 1); /* exactly `size` bytes: overreads are caught */
    if (exact == NULL) return;
    if (size) memcpy(exact, data, size);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    uint64_t runs = 10000, seed = 1;
    double max_time = 0;
    size_t max_len = 1 << 16;
    pool corpus = {0};
    char **paths = calloc((size_t)argc, sizeof *paths);
    int n_paths = 0;
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        if (strncmp(s, "-runs=", 6) == 0) runs = strtoull(s + 6, NULL, 10);
        else if (strncmp(s, "-max_total_time=", 16) == 0) max_time = atof(s + 16);
        else if (strncmp(s, "-seed=", 6) == 0) seed = strtoull(s + 6, NULL, 10);
        else if (strncmp(s, "-max_len=", 9) == 0) max_len = (size_t)strtoull(s + 9, NULL, 10);
        else if (s[0] == '-') fprintf(stderr, "fuzz driver: ignoring %s (a libFuzzer flag it lacks)\n", s);
        else paths[n_paths++] = argv[a];
    }
    if (seed) rng ^= seed * 0xbf58476d1ce4e5b9ull;
    for (int i = 0; i < n_paths; i++) add_path(&corpus, paths[i], max_len);
    free(paths);
    size_t n_seeds = corpus.n;
    for (size_t i = 0; i < n_seeds; i++) run_one(corpus.v[i].data, corpus.v[i].size);
    if (corpus.n == 0) add(&corpus, (const uint8_t *)"", 0);
    uint8_t *buf = malloc(max_len ? max_len : 1);
    double t0 = now_s();
    uint64_t done = 0;
    for (; done < runs; done++) {
        if (max_time > 0 && (done & 63) == 0 && now_s() - t0 > max_time) break;
        const input *in = &corpus.v[below(corpus.n)];
        size_t size = in->size < max_len ? in->size : max_len;
        memcpy(buf, in->data, size);
        size = mutate(buf, size, max_len, &corpus);
        run_one(buf, size);
        /* keep a few mutants as further starting points (no coverage feedback here) */
        if (below(64) == 0 && corpus.n < 4096) add(&corpus, buf, size);
    }
    printf("{\"seeds\": %zu, \"runs\": %llu, \"seconds\": %.1f}\n", n_seeds, (unsigned long long)done,
           now_s() - t0);
    for (size_t i = 0; i < corpus.n; i++) free(corpus.v[i].data);
    free(corpus.v);
    free(buf);
    return 0;
}
