/* cpu_workspace.c - sizing and allocating the CPU ops' temporaries. */
#include "cpu_workspace.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "repack.h"

static size_t alloc_count(int64_t n) { return n > 0 ? (size_t)n : 1; }

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

ds4rt_status cpu_workspace_reserve(cpu_workspace *ws, const ds4rt_hparams *hp, const ds4rt_limits *want,
                                   int n_threads) {
    ds4rt_limits lim = {.max_rows = max64(ws->lim.max_rows, want->max_rows),
                        .max_keys = max64(ws->lim.max_keys, want->max_keys),
                        .max_comp = max64(ws->lim.max_comp, want->max_comp)};
    /* a wider model needs wider buffers even when the row limits are unchanged */
    if (ws->normed != NULL && lim.max_rows == ws->lim.max_rows && lim.max_keys == ws->lim.max_keys &&
        lim.max_comp == ws->lim.max_comp && memcmp(&ws->hp, hp, sizeof *hp) == 0)
        return DS4RT_OK;
    cpu_workspace_free(ws);
    ws->lim = lim;
    ws->hp = *hp;
    ws->n_threads = n_threads < 1 ? 1 : n_threads;
    const int64_t cap = lim.max_rows, N = hp->hc, D = hp->n_embd, k = hp->n_expert_used;
    bool ok = true;
    uint64_t bytes = 0;
#define A(ptr, count)                                                                                  \
    do {                                                                                               \
        bytes += alloc_count((int64_t)(count)) * sizeof *(ptr);                                        \
        ok = ok && ((ptr) = calloc(alloc_count((int64_t)(count)), sizeof *(ptr))) != NULL;             \
    } while (0)
    A(ws->normed, cap * N * D);
    A(ws->mix, cap * hp->hc_mix);
    A(ws->og, cap * hp->group_dim);
    A(ws->olow, cap * (hp->o_lora + 2 * (DS4RT_R16_ROWS - 1))); /* + the panels' spare rows (cpu_matmul.c) */
    A(ws->low, cap * hp->o_low_dim);
    A(ws->comp_tmp, 2 * (hp->head_dim + hp->idx_dim) + 4 * hp->rope_dim + 8);
    A(ws->iscores, lim.max_comp);
    A(ws->iscores_tmp, lim.max_comp);
    A(ws->att_scores, (int64_t)ws->n_threads * CPU_ATT_TILE * lim.max_keys);
    A(ws->att_keys, lim.max_keys);
    A(ws->router, cap * hp->n_expert);
    A(ws->sel, cap * k);
    A(ws->selw, cap * k);
    A(ws->etok, cap * k);
    A(ws->ex, cap * k * D);
    A(ws->eg, cap * k * hp->expert_ff);
    A(ws->eu, cap * k * hp->expert_ff);
    A(ws->ey, cap * k * D);
    A(ws->yslot, cap * k * D);
    A(ws->shg, cap * (int64_t)hp->shared_ff);
    A(ws->shu, cap * (int64_t)hp->shared_ff);
    A(ws->shy, cap * D);
#undef A
    ws->bytes = bytes;
    if (!ok) {
        cpu_workspace_free(ws);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "scratch: CPU op workspaces for %lld rows", (long long)cap);
    }
    return DS4RT_OK;
}

void cpu_workspace_free(cpu_workspace *ws) {
    void *ptrs[] = {ws->normed, ws->mix,    ws->og,   ws->olow, ws->low,   ws->comp_tmp, ws->iscores,
                    ws->iscores_tmp, ws->att_scores, (void *)ws->att_keys, ws->router, ws->sel, ws->selw,
                    ws->etok,   ws->ex,     ws->eg,   ws->eu,   ws->ey,    ws->yslot,    ws->shg,
                    ws->shu,    ws->shy};
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(ptrs); i++) free(ptrs[i]);
    memset(ws, 0, sizeof *ws);
}
