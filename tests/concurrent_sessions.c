/*
 * concurrent_sessions.c - sessions of one model (and one DSpark support model) generating on
 * several threads at once, as docs/API.md allows ("a model is read-only and may be shared by
 * threads"). Built in the `tsan` configuration of tests/meson.build, so ThreadSanitizer sees
 * every access the library makes (tests/test_concurrency_tsan.py; docs/ROBUSTNESS.md).
 *
 *   concurrent_sessions TARGET.gguf SUPPORT.gguf [THREADS] [ROUNDS]
 *
 * First, on one thread, the reference: greedy plain and speculative generations from a few
 * prompts (greedy speculative output equals plain output, docs/DSPARK.md). Then THREADS
 * threads each run ROUNDS rounds of the same generations - every thread its own sessions,
 * half of them speculative with the shared support model - and each result must equal the
 * reference. Prints "ok" and exits 0 when every result matched.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds4rt.h"

#define N_PROMPTS 3
#define MAX_NEW 12

static ds4rt_model *model;
static ds4rt_dspark *dspark;
static int32_t reference[N_PROMPTS][MAX_NEW];
static int rounds = 2;

static const int32_t PROMPTS[N_PROMPTS][4] = {{0, 5, 9, 100}, {7, 7, 3, 40}, {1, 2, 3, 4}};

/* Greedy generation of MAX_NEW tokens after prompt p into out; speculative if spec. */
static int generate(int p, int spec, int32_t *out) {
    ds4rt_session_params sp;
    ds4rt_session *s = NULL;
    if (ds4rt_session_params_init(&sp, sizeof sp) != DS4RT_OK) return -1;
    sp.n_ctx = 64;
    if (ds4rt_session_create(model, &sp, &s) != DS4RT_OK) return -1;
    ds4rt_generate_params gp;
    ds4rt_spec_params spp;
    ds4rt_scheduler_params sch;
    (void)ds4rt_generate_params_init(&gp, sizeof gp);
    (void)ds4rt_spec_params_init(&spp, sizeof spp);
    (void)ds4rt_scheduler_params_init(&sch, sizeof sch);
    gp.max_tokens = MAX_NEW;
    gp.stop_at_eos = 0;
    if (spec) {
        sch.mode = DS4RT_SCHEDULER_ALWAYS;
        spp.dspark = dspark;
        spp.scheduler = &sch;
        gp.spec = &spp;
    }
    size_t n = 0;
    ds4rt_status st = ds4rt_generate(s, PROMPTS[p], 4, &gp, out, MAX_NEW, &n);
    if (st != DS4RT_OK) fprintf(stderr, "generate: %s\n", ds4rt_session_last_error(s));
    ds4rt_session_free(s);
    return st == DS4RT_OK && n == MAX_NEW ? 0 : -1;
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg, bad = 0;
    for (int r = 0; r < rounds; r++)
        for (int p = 0; p < N_PROMPTS; p++) {
            int32_t out[MAX_NEW];
            int spec = (id + r + p) % 2;
            if (generate(p, spec, out) != 0 || memcmp(out, reference[p], sizeof out) != 0) {
                fprintf(stderr, "thread %d round %d prompt %d (%s): differs from the reference\n", id, r, p,
                        spec ? "speculative" : "plain");
                bad++;
            }
        }
    return (void *)(intptr_t)bad;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: concurrent_sessions TARGET.gguf SUPPORT.gguf [THREADS] [ROUNDS]\n");
        return 2;
    }
    int n_threads = argc > 3 ? atoi(argv[3]) : 3;
    if (argc > 4) rounds = atoi(argv[4]);
    if (n_threads < 1 || n_threads > 64 || rounds < 1) return 2;
    ds4rt_model_params mp;
    (void)ds4rt_model_params_init(&mp, sizeof mp);
    mp.n_threads = 1; /* the threads here are the sessions' callers, not the pool's */
    if (ds4rt_model_load(argv[1], &mp, &model) != DS4RT_OK ||
        ds4rt_dspark_load(model, argv[2], NULL, &dspark) != DS4RT_OK) {
        fprintf(stderr, "load: %s\n", ds4rt_last_error());
        return 2;
    }
    int bad = 0;
    for (int p = 0; p < N_PROMPTS; p++) {
        int32_t spec[MAX_NEW];
        if (generate(p, 0, reference[p]) != 0 || generate(p, 1, spec) != 0) return 2;
        if (memcmp(spec, reference[p], sizeof spec) != 0) {
            fprintf(stderr, "prompt %d: greedy speculative output differs from plain\n", p);
            bad++;
        }
    }
    pthread_t t[64];
    for (int i = 0; i < n_threads; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) != 0) return 2;
    for (int i = 0; i < n_threads; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (int)(intptr_t)r;
    }
    ds4rt_dspark_free(dspark);
    ds4rt_model_free(model);
    if (bad) return 1;
    printf("ok\n");
    return 0;
}
