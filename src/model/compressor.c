/* compressor.c - streaming KV compression with per-feature softmax pooling (§5.5). */
#include "compressor.h"

#include <math.h>
#include <string.h>

bool ds4rt_compressor_push(const ds4rt_compressor *c, ds4rt_frontier *f, const float *u, const float *g,
                           int64_t pos, float *rows, uint32_t *n_rows, float *tmp) {
    const uint32_t R = c->ratio, d = c->dim;
    const bool overlap = R == 4;
    const uint32_t width = f->width; /* coff * d */
    const uint32_t r = (uint32_t)(pos % R);
    const uint32_t slot = overlap ? R + r : r;
    const float *ape = c->ape + (size_t)r * width;
    float *kv = f->kv + (size_t)slot * width;
    float *sc = f->score + (size_t)slot * width;
    for (uint32_t j = 0; j < width; j++) {
        kv[j] = u[j];
        sc[j] = g[j] + ape[j];
    }
    if ((pos + 1) % R != 0) return false;

    float *z = tmp;
    for (uint32_t j = 0; j < d; j++) {
        /* candidates: (overlap) previous block's first half, then this block's second half */
        float mx = -INFINITY;
        if (overlap) {
            for (uint32_t i = 0; i < R; i++) mx = fmaxf(mx, f->score[(size_t)i * width + j]);
            for (uint32_t i = R; i < 2 * R; i++) mx = fmaxf(mx, f->score[(size_t)i * width + d + j]);
        } else {
            for (uint32_t i = 0; i < R; i++) mx = fmaxf(mx, f->score[(size_t)i * width + j]);
        }
        double num = 0.0, den = 0.0;
        if (overlap) {
            for (uint32_t i = 0; i < R; i++) {
                float s = f->score[(size_t)i * width + j];
                if (s == -INFINITY) continue;
                double e = exp((double)s - mx);
                den += e;
                num += e * f->kv[(size_t)i * width + j];
            }
            for (uint32_t i = R; i < 2 * R; i++) {
                double e = exp((double)f->score[(size_t)i * width + d + j] - mx);
                den += e;
                num += e * f->kv[(size_t)i * width + d + j];
            }
        } else {
            for (uint32_t i = 0; i < R; i++) {
                double e = exp((double)f->score[(size_t)i * width + j] - mx);
                den += e;
                num += e * f->kv[(size_t)i * width + j];
            }
        }
        z[j] = (float)(num / den);
    }
    if (overlap) {
        /* this block becomes the previous block of the next emission */
        memcpy(f->kv, f->kv + (size_t)R * width, (size_t)R * width * sizeof(float));
        memcpy(f->score, f->score + (size_t)R * width, (size_t)R * width * sizeof(float));
    }

    ds4rt_rms_norm(z, d, c->norm, c->rms_eps, z);
    double *cs = (double *)(tmp + d + (d & 1));
    double *sn = cs + c->rope->n_rot / 2;
    ds4rt_rope_angles(c->rope, pos + 1 - R, cs, sn);
    ds4rt_rope_apply(z, d, c->rope, cs, sn, +1);
    switch (c->post) {
    case DS4RT_COMP_POST_FP8: ds4rt_fp8_roundtrip(z, c->d_nope); break;
    case DS4RT_COMP_POST_HADAMARD_FP4:
        ds4rt_hadamard(z, d);
        ds4rt_fp4_roundtrip(z, d);
        break;
    case DS4RT_COMP_POST_HADAMARD: ds4rt_hadamard(z, d); break;
    case DS4RT_COMP_POST_NONE: break;
    }
    memcpy(rows + (size_t)(*n_rows) * d, z, d * sizeof(float));
    (*n_rows)++;
    return true;
}
