/*
 * threadpool.c - persistent workers for the CPU backend (see threadpool.h).
 *
 * A job is published in `claim`, one 64-bit word holding the job's sequence number (high 24
 * bits) and the next unclaimed item (low 40 bits). Threads take chunks by compare-and-swap on
 * that word, so a worker that wakes late can only take chunks of the job it read the word of,
 * and the caller waits only for chunks that were actually taken (`done`), never for a worker
 * that took none: a descheduled or sleeping worker costs no latency, the caller just does more.
 *
 * Waking: the caller rings `doorbell` and signals the condition variable only if a worker
 * sleeps. Workers spin on the doorbell for DS4RT_POOL_SPIN_US (default 100 us) before sleeping,
 * so back-to-back products of a decode step dispatch without a system call.
 * Which thread runs a chunk never changes what is computed for an item. (The 24-bit job number
 * wraps after 16M jobs; a worker would have to stall inside one CAS loop that long to misread.)
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
#define IDX_BITS 40
#define IDX_MASK ((UINT64_C(1) << IDX_BITS) - 1)
#define SEQ_MASK ((UINT64_C(1) << (64 - IDX_BITS)) - 1)
#define MAX_ITEMS ((int64_t)1 << (IDX_BITS - 1)) /* larger jobs run on the caller alone */

struct worker_arg {
    ds4rt_pool *pool;
    int index;
};

struct ds4rt_pool {
    int n_threads;
    pthread_t *threads;
    struct worker_arg *args;
    int64_t spin_ns;
    uint64_t seq; /* the caller's job counter */

    /* the current job; fields are written between closing and opening `claim` */
    _Atomic uint64_t claim;
    _Atomic(ds4rt_range_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n;
    _Atomic int64_t chunk;
    _Atomic int64_t done; /* items finished in the current job */

    _Atomic uint32_t doorbell;
    _Atomic int n_sleeping;
    _Atomic int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
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

/* Takes and runs chunks of the job that `claim` holds now, until it has none left. */
static void run_chunks(ds4rt_pool *p, int thread) {
    uint64_t cur = atomic_load_explicit(&p->claim, memory_order_acquire);
    const uint64_t seq = cur >> IDX_BITS;
    for (;;) {
        if ((cur >> IDX_BITS) != seq) return; /* a newer job: its caller handles it */
        const int64_t idx = (int64_t)(cur & IDX_MASK);
        const int64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
        const int64_t chunk = atomic_load_explicit(&p->chunk, memory_order_relaxed);
        const ds4rt_range_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        if (idx >= n) return;
        /* success means the job was still open, so the fields read above are this job's */
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &cur, cur + (uint64_t)chunk, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        const int64_t end = idx + chunk < n ? idx + chunk : n;
        fn(ctx, idx, end, thread);
        atomic_fetch_add_explicit(&p->done, end - idx, memory_order_release);
        cur = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    struct worker_arg *wa = arg;
    ds4rt_pool *p = wa->pool;
    uint32_t seen = 0; /* the doorbell's initial value: a ring before this thread ran still counts */
    for (;;) {
        uint32_t g = atomic_load_explicit(&p->doorbell, memory_order_acquire);
        if (g == seen) {
            const int64_t until = now_ns() + p->spin_ns;
            for (unsigned i = 1;; i++) {
                cpu_relax();
                g = atomic_load_explicit(&p->doorbell, memory_order_acquire);
                if (g != seen) break;
                if ((i & 255) == 0 && now_ns() > until) break;
            }
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->n_sleeping, 1); /* seq_cst: pairs with ring() */
            while ((g = atomic_load(&p->doorbell)) == seen) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->n_sleeping, 1);
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        run_chunks(p, wa->index);
    }
    return NULL;
}

static void ring(ds4rt_pool *p) {
    atomic_fetch_add(&p->doorbell, 1); /* seq_cst */
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
    atomic_store(&p->claim, IDX_MASK); /* job 0, closed */
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
    ring(pool);
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
    if (pool == NULL || pool->n_threads == 1 || n <= grain || n >= MAX_ITEMS) {
        fn(ctx, 0, n, 0);
        return;
    }
    /* about four chunks per thread for balance, never below the grain, except that the grain
     * never leaves fewer than two chunks per thread: a 2048-row product with a 124-row grain on
     * 16 threads would otherwise make 17 chunks, i.e. one thread does two while 15 wait. */
    const int64_t T = pool->n_threads;
    const int64_t per = (n + 4 * T - 1) / (4 * T);
    const int64_t half = (n + 2 * T - 1) / (2 * T);
    if (grain > half) grain = half;
    /* then even the chunks out: chunks are claimed in rounds of T, so 35 chunks on 16 threads
     * take as long as 48; shrink the chunk until its count is a whole number of rounds */
    int64_t chunk = per > grain ? per : grain;
    const int64_t rounds = (n + T * chunk - 1) / (T * chunk);
    chunk = (n + T * rounds - 1) / (T * rounds);
    const uint64_t seq = (++pool->seq) & SEQ_MASK;
    /* close: from here no thread can take a chunk, and (acq_rel) the writes below stay after it */
    atomic_exchange_explicit(&pool->claim, seq << IDX_BITS | IDX_MASK, memory_order_acq_rel);
    atomic_store_explicit(&pool->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&pool->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&pool->n, n, memory_order_relaxed);
    atomic_store_explicit(&pool->chunk, chunk, memory_order_relaxed);
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->claim, seq << IDX_BITS, memory_order_release); /* open */
    ring(pool);
    run_chunks(pool, 0);
    for (unsigned i = 1; atomic_load_explicit(&pool->done, memory_order_acquire) < n; i++) {
        cpu_relax();
        if ((i & 1023) == 0) sched_yield(); /* let a descheduled worker finish its chunk */
    }
}
