/* propose_api.c - one DSpark proposal on a session's context, for hosts and tests. */
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "dspark.h"
#include "internal.h"

DS4RT_API ds4rt_status ds4rt_dspark_propose(ds4rt_session *s, const ds4rt_dspark *d, int32_t anchor, int32_t max_draft,
                                            float threshold, int32_t *tokens, int32_t *n_tokens, float *conf,
                                            int32_t *n_conf, float *logits) {
    if (s == NULL || d == NULL || tokens == NULL || n_tokens == NULL || conf == NULL || n_conf == NULL)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "dspark_propose: NULL argument");
    ds4rt_status st = ds4rt_session_attach_drafter(s, d);
    if (st != DS4RT_OK) return ds4rt_session_error(s, st);
    if (s->drafter.end != s->st.n_pos || s->st.n_pos == 0)
        return ds4rt_session_error(s, ds4rt_fail(DS4RT_ERR_STATE, "dspark_propose: the drafter has no context row for "
                                                                  "position %lld (attach before evaluating)",
                                                 (long long)s->st.n_pos - 1));
    const uint32_t V = d->target->hp.n_vocab;
    float *work_val = malloc(2 * (size_t)V * sizeof(float));
    int32_t *work_idx = malloc((size_t)V * sizeof(int32_t));
    if (work_val == NULL || work_idx == NULL) {
        free(work_val);
        free(work_idx);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "proposal buffers");
    }
    ds4rt_proposal prop;
    st = ds4rt_drafter_propose(&s->drafter, s->pool, anchor, max_draft, threshold, NULL, NULL, work_val, work_idx,
                               &prop);
    free(work_val);
    free(work_idx);
    if (st != DS4RT_OK) return ds4rt_session_error(s, st);
    *n_tokens = prop.n;
    *n_conf = prop.n_conf;
    memcpy(tokens, prop.tokens, (size_t)prop.n * sizeof(int32_t));
    memcpy(conf, prop.conf, (size_t)prop.n_conf * sizeof(float));
    if (logits != NULL) memcpy(logits, prop.corrected, (size_t)prop.n * V * sizeof(float));
    return DS4RT_OK;
}
