/*
 * cache_policy.c - the Q8->F16 expansion cache policy on the CPU backend.
 *
 * The expansion pays on GPUs, where batched passes can use tensor-core half GEMMs. The CPU
 * backend multiplies Q8_0 weights with Q8_0 activations in integer kernels that read 34 bytes
 * per 32 weights, against 64 for F16: every pass of the real model is memory-bound, so an F16
 * copy would be slower (measured: a 4096x4096 product for 6 tokens takes 2.21 ms from Q8_0 and
 * 3.96 ms from F16, docs/CACHE.md) and would double the memory of the expanded tensors. So on
 * the CPU the expansion is a no-op: AUTO resolves to off, and ON is recorded as one fallback
 * with its reason, never silently ignored.
 */
#include "cache_policy.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "qtypes.h"
#include "target.h"

void ds4rt_cache_resolve_cpu(ds4rt_cache_policy requested, uint64_t budget, ds4rt_cache_state *out) {
    memset(out, 0, sizeof *out);
    out->requested = requested;
    out->budget = budget;
    switch (requested) {
    case DS4RT_CACHE_OFF: snprintf(out->reason, sizeof out->reason, "off as requested"); break;
    case DS4RT_CACHE_AUTO:
        snprintf(out->reason, sizeof out->reason,
                 "auto: off on the CPU backend (Q8_0 integer kernels read fewer bytes than F16)");
        break;
    case DS4RT_CACHE_ON:
        out->fallbacks = 1;
        snprintf(out->reason, sizeof out->reason,
                 "on requested, but the CPU backend has no F16 GEMM path: Q8_0 kernels used");
        break;
    }
}

/* The matrices every pass reads at every layer (attention projections, the shared expert) and
 * the output head: the ones batched passes multiply most. Routed experts are left out (the
 * published files store them in 2-bit types, and each pass reads few of them). */
static size_t selected(const ds4rt_target *t, const ds4rt_dweight **out, size_t cap) {
    size_t n = 0;
#define ADD(w)                                                                 \
    do {                                                                       \
        if ((w).type == DS4RT_TYPE_Q8_0 && (w).rows > 0 && n < cap) out[n++] = &(w); \
    } while (0)
    for (uint32_t l = 0; l < t->hp.n_layer; l++) {
        const ds4rt_block_weights *b = &t->layers[l];
        ADD(b->attn.q_a);
        ADD(b->attn.q_b);
        ADD(b->attn.kv);
        ADD(b->attn.out_a);
        ADD(b->attn.out_b);
        ADD(b->moe.gate_sh);
        ADD(b->moe.up_sh);
        ADD(b->moe.down_sh);
    }
    ADD(t->output);
#undef ADD
    return n;
}

/* Bytes of a matrix's F16 copy. */
static uint64_t f16_bytes(const ds4rt_dweight *w) { return (uint64_t)w->rows * (uint64_t)w->cols * 2; }

/* Whether a copy of `need` bytes stays within the budget after `held` (0: no limit). */
static bool within_budget(uint64_t budget, uint64_t held, uint64_t need) { return budget == 0 || held + need <= budget; }

ds4rt_status ds4rt_cache_plan(const ds4rt_target *t, uint64_t budget, ds4rt_cache_plan_bytes *out) {
    memset(out, 0, sizeof *out);
    const size_t cap = 16 * (size_t)t->hp.n_layer + 8;
    const ds4rt_dweight **list = calloc(cap, sizeof *list);
    if (list == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "cache plan: matrix list");
    size_t n = selected(t, list, cap);
    for (size_t i = 0; i < n; i++) {
        const uint64_t need = f16_bytes(list[i]);
        out->matrices++;
        out->q8_bytes += (uint64_t)list[i]->rows * list[i]->row_bytes;
        out->f16_bytes += need;
        if (within_budget(budget, out->f16_budget_bytes, need)) {
            out->f16_budget_bytes += need;
            out->budget_matrices++;
        }
    }
    free(list);
    return DS4RT_OK;
}

void ds4rt_cache_apply(ds4rt_target *t, ds4rt_cache_policy requested, uint64_t budget, ds4rt_cache_state *out) {
    ds4rt_backend *be = t->be;
    if (!ds4rt_backend_has_cache(be)) {
        ds4rt_cache_resolve_cpu(requested, budget, out);
        return;
    }
    memset(out, 0, sizeof *out);
    out->requested = requested;
    out->budget = budget;
    if (requested == DS4RT_CACHE_OFF) {
        snprintf(out->reason, sizeof out->reason, "off as requested");
        return;
    }
    if (requested == DS4RT_CACHE_AUTO) {
        if (ds4rt_backend_unified(be) && budget == 0)
            snprintf(out->reason, sizeof out->reason,
                     "auto: off on a unified-memory GPU without a budget (the copies would compete with KV and "
                     "context)");
        else
            snprintf(out->reason, sizeof out->reason,
                     "auto: off: F16 copies have not measured faster than the Q8_0 kernels on this device "
                     "(docs/CACHE.md); use on");
        return;
    }
    const size_t cap = 16 * (size_t)t->hp.n_layer + 8;
    const ds4rt_dweight **list = calloc(cap, sizeof *list);
    if (list == NULL) {
        out->fallbacks = 1;
        snprintf(out->reason, sizeof out->reason, "on requested, but the matrix list could not be allocated");
        return;
    }
    size_t n = selected(t, list, cap), done = 0, over_budget = 0;
    for (; done < n; done++) {
        const uint64_t need = f16_bytes(list[done]);
        if (!within_budget(budget, out->bytes, need)) {
            over_budget++;
            continue;
        }
        uint64_t got;
        ds4rt_status st = ds4rt_backend_cache_expand(be, list[done], &got);
        if (st != DS4RT_OK) {
            /* a full device drops the cache for the remaining ranges, counted, never a crash */
            out->fallbacks += n - done;
            snprintf(out->reason, sizeof out->reason, "on: %zu of %zu Q8_0 matrices expanded; the rest dropped: %s",
                     done - over_budget, n, ds4rt_last_error());
            break;
        }
        out->bytes += got;
    }
    out->fallbacks += over_budget;
    out->active = out->bytes > 0;
    if (done == n)
        snprintf(out->reason, sizeof out->reason, "on: %zu of %zu Q8_0 matrices expanded (%zu over the budget)",
                 n - over_budget, n, over_budget);
    free(list);
}
