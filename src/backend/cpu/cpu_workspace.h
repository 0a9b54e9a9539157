/*
 * cpu_workspace.h - temporaries of the CPU ops of one execution context, sized once (grown by
 * ctx_reserve) so the hot path never allocates.
 */
#ifndef DS4RT_CPU_WORKSPACE_H
#define DS4RT_CPU_WORKSPACE_H

#include <stdint.h>

#include "backend.h"

/* Attention heads whose scores one thread forms together (cpu_attention.c). */
#define CPU_ATT_TILE 4

typedef struct cpu_workspace {
    ds4rt_limits lim;       /* what it is sized for */
    ds4rt_hparams hp;       /* ... and for which model shape */
    int n_threads;
    uint64_t bytes;
    /* hyper-connections */
    float *normed;          /* [rows][N*D] */
    float *mix;             /* [rows][hc_mix] */
    /* grouped output */
    float *og;              /* [rows][group_dim] gathered group input */
    float *olow;            /* [rows][Ro + 30] one group's output (+ rows of its panels) */
    float *low;             /* [rows][G*Ro] */
    /* compressor, indexer, attention */
    float *comp_tmp;        /* compressor scratch (8-byte aligned) */
    float *iscores;         /* [max_comp] indexer scores of one row */
    float *iscores_tmp;     /* [max_comp] */
    float *att_scores;      /* [threads][CPU_ATT_TILE][max_keys] */
    const float **att_keys; /* [max_keys] key row pointers of one row */
    /* MoE */
    float *router;          /* [rows][E] */
    int32_t *sel;           /* [rows][k] */
    float *selw;            /* [rows][k] */
    int32_t *etok;          /* [rows*k] (row*k + slot) entries routed to one expert */
    float *ex;              /* [rows*k][D] gathered inputs */
    float *eg, *eu;         /* [rows*k][F] */
    float *ey;              /* [rows*k][D] */
    float *yslot;           /* [rows][k][D] expert outputs per slot */
    float *shg, *shu;       /* [rows][F*ns] */
    float *shy;             /* [rows][D] */
} cpu_workspace;

/* (Re)allocates for `lim` (each limit the max of the old and the new). */
ds4rt_status cpu_workspace_reserve(cpu_workspace *ws, const ds4rt_hparams *hp, const ds4rt_limits *lim,
                                   int n_threads);
void cpu_workspace_free(cpu_workspace *ws);

#endif /* DS4RT_CPU_WORKSPACE_H */
