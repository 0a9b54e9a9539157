/*
 * gpu_graphs.c - the layers of a pass as a captured CUDA/HIP graph, replayed (backend.h:
 * pass_begin / pass_end). The first pass of each static shape (its key: batch size, session
 * buffers, capture targets) is recorded on the context's stream and instantiated; later passes
 * of that shape replay it with one launch. Valid across positions because every op reads the
 * position, the token ids and the counts that follow from them from the pass block on the
 * device. On unless DS4RT_GPU_GRAPHS=0 (never on HIP-CPU, which has no graphs): on the H200 it
 * took decode from 2182 to 1993 µs (docs/GPU.md, "Graphs").
 */
#include <stdlib.h>

#include "gpu_ops.h"

void gpu_graphs_init(gpu_ctx *c) {
    const char *env = getenv("DS4RT_GPU_GRAPHS");
    c->graphs_on = ds4rt_gk_graphs_supported() && !(env != NULL && env[0] == '0');
}

void gpu_graphs_free(gpu_ctx *c) {
    for (size_t i = 0; i < c->n_graphs; i++) ds4rt_gk_graph_destroy(c->graphs[i].exec);
    free(c->graphs);
    c->graphs = NULL;
    c->n_graphs = 0;
}

ds4rt_status gpu_pass_begin(ds4rt_bctx *ctx, uint64_t key, int64_t n, ds4rt_pass_how *how) {
    gpu_ctx *c = gctx(ctx);
    *how = DS4RT_PASS_PLAIN;
    ds4rt_gk_pdl_pass(n); /* this pass's launches (and the head after it) use PDL or not */
    c->recording = false;
    if (!c->graphs_on) return DS4RT_OK;
    for (size_t i = 0; i < c->n_graphs; i++)
        if (c->graphs[i].key == key) {
            GK(ds4rt_gk_graph_launch(c->graphs[i].exec, c->stream), "graph replay");
            c->graph_replays++;
            *how = DS4RT_PASS_REPLAYED;
            return DS4RT_OK;
        }
    if (c->n_graphs == GPU_MAX_GRAPHS) return DS4RT_OK; /* a shape too many: run it plainly */
    GK(ds4rt_gk_capture_begin(c->stream), "graph capture");
    c->recording = true;
    c->recording_key = key;
    *how = DS4RT_PASS_RECORDED;
    return DS4RT_OK;
}

ds4rt_status gpu_pass_end(ds4rt_bctx *ctx, bool ok) {
    gpu_ctx *c = gctx(ctx);
    if (!c->recording) return gpu_side_join(ctx); /* a pass ends joined, recorded or not */
    c->recording = false;
    void *exec = NULL;
    ds4rt_status joined = gpu_side_join(ctx); /* a capture must end with every fork joined */
    int st = ds4rt_gk_capture_end(c->stream, &exec);
    if (joined != DS4RT_OK) {
        ds4rt_gk_graph_destroy(exec);
        return joined;
    }
    if (!ok) {
        ds4rt_gk_graph_destroy(exec); /* a failed op: its error is the pass's */
        return DS4RT_OK;
    }
    GK(st, "graph capture");
    if (c->graphs == NULL && (c->graphs = calloc(GPU_MAX_GRAPHS, sizeof *c->graphs)) == NULL) {
        ds4rt_gk_graph_destroy(exec);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "graphs: table");
    }
    c->graphs[c->n_graphs++] = (gpu_graph){.key = c->recording_key, .exec = exec};
    /* recorded, not run: run it now */
    GK(ds4rt_gk_graph_launch(exec, c->stream), "graph launch");
    return DS4RT_OK;
}
