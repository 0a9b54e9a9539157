/*
 * threadpool.c - persistent workers for the CPU backend (see threadpool.h).
 *
 * Dispatch: the caller publishes the job, bumps `generation` and wakes sleepers (only if any
 * sleep). Workers spin on `generation` for a short while (DS4RT_POOL_SPIN_US, default 100 us)
 * and then sleep on a condition variable, so back-to-back matmuls of a decode step dispatch in
 * well under a microsecond while an idle pool costs no CPU. Items are handed out in chunks
 * from an atomic counter; which thread runs a chunk never changes what is computed.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "threadpool.h"

#define POOL_MAX_THREADS 1024

struct ds4rt_pool {
    int n_threads;
    pthread_t *threads;
    struct worker_arg *args;

    /* the current job (written by the caller before generation is bumped) */
    ds4rt_range_fn fn;
    void *ctx;
    int64_t n;
    int64_t chunk;
    _Atomic int64_t next;

    _Atomic uint32_t generation;
    _Atomic int pending; /* workers that have not finished the current generation */
    _Atomic int n_sleeping;
    _Atomic int stop;
    int64_t spin_ns;

    pthread_mutex_t mu;
    pthread_cond_t cv;
};

struct worker_arg {
    ds4rt_pool *pool;
    int index;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int ds4rt_cpu_count(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    return 1;
}

static void run_chunks(ds4rt_pool *p, int thread) {
    const int64_t n = p->n, chunk = p->chunk;
    for (;;) {
        const int64_t b = atomic_fetch_add_explicit(&p->next, chunk, memory_order_relaxed);
        if (b >= n) break;
        p->fn(p->ctx, b, b + chunk < n ? b + chunk : n, thread);
    }
}

static void *worker_main(void *arg) {
    struct worker_arg *wa = arg;
    ds4rt_pool *p = wa->pool;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g == seen) {
            const int64_t until = now_ns() + p->spin_ns;
            for (unsigned i = 1;; i++) {
                cpu_relax();
                g = atomic_load_explicit(&p->generation, memory_order_acquire);
                if (g != seen) break;
                if ((i & 255) == 0 && now_ns() > until) break;
            }
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->n_sleeping, 1); /* seq_cst: pairs with the caller's bump */
            while ((g = atomic_load(&p->generation)) == seen) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->n_sleeping, 1);
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        run_chunks(p, wa->index);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
    return NULL;
}

static void bump_generation(ds4rt_pool *p) {
    atomic_fetch_add(&p->generation, 1); /* seq_cst */
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static int64_t spin_ns_from_env(void) {
    const char *s = getenv("DS4RT_POOL_SPIN_US");
    if (s && *s) {
        char *end;
        const long v = strtol(s, &end, 10);
        if (*end == '\0' && v >= 0 && v <= 10000000) return (int64_t)v * 1000;
    }
    return 100 * 1000;
}

ds4rt_status ds4rt_pool_create(int n_threads, ds4rt_pool **out) {
    if (out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "pool_create: out is NULL");
    *out = NULL;
    if (n_threads <= 0) n_threads = ds4rt_cpu_count();
    if (n_threads > POOL_MAX_THREADS)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "pool_create: %d threads (at most %d)", n_threads,
                          POOL_MAX_THREADS);
    ds4rt_pool *p = calloc(1, sizeof *p);
    if (p == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "pool_create: out of memory");
    p->n_threads = n_threads;
    p->spin_ns = spin_ns_from_env();
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        p->args = calloc((size_t)n_threads - 1, sizeof *p->args);
        if (p->threads == NULL || p->args == NULL) {
            free(p->threads);
            free(p->args);
            free(p);
            return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "pool_create: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            p->args[i].pool = p;
            p->args[i].index = i + 1;
            const int rc = pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]);
            if (rc != 0) {
                p->n_threads = i + 1; /* the workers started so far, plus the caller */
                ds4rt_pool_destroy(p);
                return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "pool_create: cannot start thread %d of %d (%s)",
                                  i + 1, n_threads, rc == EAGAIN ? "EAGAIN" : "error");
            }
        }
    }
    *out = p;
    return DS4RT_OK;
}

void ds4rt_pool_destroy(ds4rt_pool *pool) {
    if (pool == NULL) return;
    atomic_store(&pool->stop, 1);
    bump_generation(pool);
    for (int i = 0; i < pool->n_threads - 1; i++) pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
    free(pool->threads);
    free(pool->args);
    free(pool);
}

int ds4rt_pool_threads(const ds4rt_pool *pool) { return pool ? pool->n_threads : 1; }

void ds4rt_pool_parallel_for(ds4rt_pool *pool, int64_t n, int64_t grain, ds4rt_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (pool == NULL || pool->n_threads == 1 || n <= grain) {
        fn(ctx, 0, n, 0);
        return;
    }
    /* about four chunks per thread for balance, never below the grain */
    const int64_t per = (n + 4 * (int64_t)pool->n_threads - 1) / (4 * (int64_t)pool->n_threads);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->chunk = per > grain ? per : grain;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->pending, pool->n_threads - 1, memory_order_relaxed);
    bump_generation(pool); /* seq_cst: publishes the job fields above */
    run_chunks(pool, 0);
    for (unsigned i = 1; atomic_load_explicit(&pool->pending, memory_order_acquire) != 0; i++) {
        cpu_relax();
        if ((i & 0xffff) == 0) sched_yield();
    }
}
