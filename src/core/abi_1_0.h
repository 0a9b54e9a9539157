/*
 * abi_1_0.h - the input structs as ABI 1.0 laid them out (tests/abi/ds4rt_1_0.h is that header),
 * frozen under *_1_0 names. The library needs them to keep 1.0 binaries working (abi.h):
 *   - the 1.0 by-value initialisers (ds4rt_model_default_params() and friends) stay exported
 *     and return these layouts, since a 1.0 caller reserved exactly this many bytes for the
 *     result; callers built against a newer header get header-inline initialisers that pass
 *     their own sizeof to ds4rt_*_init();
 *   - layouts that changed in place (a struct once embedded by value) are recognised by their
 *     size and translated;
 *   - every later layout must start its new fields at or after these sizes.
 * Never edit these definitions.
 */
#ifndef DS4RT_ABI_1_0_H
#define DS4RT_ABI_1_0_H

#include <stddef.h>
#include <stdint.h>

#include "ds4rt.h"

typedef struct ds4rt_model_params_1_0 {
    size_t size;
    int32_t n_threads;
    ds4rt_numerics numerics;
    ds4rt_cache_policy cache_policy;
    uint64_t cache_budget_bytes;
} ds4rt_model_params_1_0;

typedef struct ds4rt_session_params_1_0 {
    size_t size;
    int64_t n_ctx;
    uint32_t max_batch;
} ds4rt_session_params_1_0;

typedef struct ds4rt_sampler_params_1_0 {
    size_t size;
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
    uint64_t seed;
} ds4rt_sampler_params_1_0;

typedef struct ds4rt_dspark_params_1_0 {
    size_t size;
    uint32_t window;
    int32_t self_test;
} ds4rt_dspark_params_1_0;

typedef struct ds4rt_scheduler_params_1_0 {
    size_t size;
    ds4rt_scheduler_mode mode;
    int32_t max_draft;
    int32_t warmup_cycles;
    int32_t probe_min;
    int32_t probe_max;
    float history_decay;
    float confidence_weight;
    int32_t measured_costs;
    float verify_cost_base;
    float verify_cost_per_token;
    float propose_cost;
} ds4rt_scheduler_params_1_0;

typedef struct ds4rt_spec_params_1_0 {
    size_t size;
    ds4rt_dspark *dspark;
    ds4rt_draft_fn draft_fn;
    void *draft_user;
    float confidence_threshold;
    ds4rt_scheduler_params_1_0 scheduler; /* embedded by value in 1.0 */
    ds4rt_stats_fn on_stats;
    void *stats_user;
} ds4rt_spec_params_1_0;

typedef struct ds4rt_generate_params_1_0 {
    size_t size;
    int32_t max_tokens;
    int32_t stop_at_eos;
    ds4rt_sampler_params_1_0 sampler; /* embedded by value in 1.0 */
    ds4rt_token_fn on_token;
    void *user;
    const void *spec; /* a ds4rt_spec_params of any layout (its size says which) */
} ds4rt_generate_params_1_0;

typedef struct ds4rt_tokenizer_arrays_1_0 {
    size_t size;
    uint32_t n_tokens;
    const char *const *tokens;
    const uint32_t *token_lens;
    const int32_t *token_types;
    uint32_t n_merges;
    const char *const *merges;
    const uint32_t *merge_lens;
    int32_t bos_id;
    int32_t eos_id;
    const char *pre;
    uint32_t n_normalized_ids;
    const int32_t *normalized_ids;
} ds4rt_tokenizer_arrays_1_0;

typedef struct ds4rt_chat_options_1_0 {
    size_t size;
    int32_t think;
    int32_t add_generation_prompt;
    int32_t tool_context;
    uint32_t content_flags;
} ds4rt_chat_options_1_0;

/* The 1.0 initialisers, still exported under their 1.0 names (compat_1_0.c). */
DS4RT_API ds4rt_model_params_1_0 ds4rt_model_default_params(void);
DS4RT_API ds4rt_session_params_1_0 ds4rt_session_default_params(void);
DS4RT_API ds4rt_sampler_params_1_0 ds4rt_sampler_default_params(void);
DS4RT_API ds4rt_dspark_params_1_0 ds4rt_dspark_default_params(void);
DS4RT_API ds4rt_scheduler_params_1_0 ds4rt_scheduler_default_params(void);
DS4RT_API ds4rt_spec_params_1_0 ds4rt_spec_default_params(void);
DS4RT_API ds4rt_generate_params_1_0 ds4rt_generate_default_params(void);
DS4RT_API void ds4rt_tokenizer_arrays_default(ds4rt_tokenizer_arrays_1_0 *arrays);
DS4RT_API void ds4rt_chat_options_default(ds4rt_chat_options_1_0 *options);

#endif /* DS4RT_ABI_1_0_H */
