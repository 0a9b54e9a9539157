/*
 * sizes.c - the size of every public struct and the offset of every field it had in ABI 1.0,
 * one "struct NAME SIZE" / "field NAME.FIELD OFFSET" line each. Built against today's header
 * (abi_sizes) for tests/test_abi_compat.py, which compares the lines with tests/abi/abi_1_0.txt:
 * a struct may grow, never shrink, and a 1.0 field keeps its offset (but in the two structs whose
 * 1.0 layout the library recognises by size and translates). The 1.0 lines of abi_1_0.txt come
 * from this file built against tests/abi/ds4rt_1_0.h (-DDS4RT_SIZES_HEADER_1_0).
 */
#include <stddef.h>
#include <stdio.h>

#ifdef DS4RT_SIZES_HEADER_1_0
#  include "ds4rt_1_0.h"
#else
#  include "ds4rt.h"
#endif

/* The structs of the 1.0 header and their 1.0 fields. */
#define STRUCTS_1_0(S, F) \
    S(ds4rt_type_info) \
    F(ds4rt_type_info, name) \
    F(ds4rt_type_info, block_elems) \
    F(ds4rt_type_info, block_bytes) \
    F(ds4rt_type_info, compute) \
    S(ds4rt_str) \
    F(ds4rt_str, data) \
    F(ds4rt_str, len) \
    S(ds4rt_gguf_kv) \
    F(ds4rt_gguf_kv, key) \
    F(ds4rt_gguf_kv, type) \
    F(ds4rt_gguf_kv, array_type) \
    F(ds4rt_gguf_kv, array_len) \
    F(ds4rt_gguf_kv, data) \
    F(ds4rt_gguf_kv, str) \
    F(ds4rt_gguf_kv, file_offset) \
    F(ds4rt_gguf_kv, value_offset) \
    F(ds4rt_gguf_kv, value_bytes) \
    F(ds4rt_gguf_kv, elem_index) \
    S(ds4rt_gguf_tensor) \
    F(ds4rt_gguf_tensor, name) \
    F(ds4rt_gguf_tensor, type) \
    F(ds4rt_gguf_tensor, n_dims) \
    F(ds4rt_gguf_tensor, ne) \
    F(ds4rt_gguf_tensor, offset) \
    F(ds4rt_gguf_tensor, nbytes) \
    F(ds4rt_gguf_tensor, data) \
    F(ds4rt_gguf_tensor, info_offset) \
    S(ds4rt_model_params) \
    F(ds4rt_model_params, size) \
    F(ds4rt_model_params, n_threads) \
    F(ds4rt_model_params, numerics) \
    F(ds4rt_model_params, cache_policy) \
    F(ds4rt_model_params, cache_budget_bytes) \
    S(ds4rt_model_info) \
    F(ds4rt_model_info, size) \
    F(ds4rt_model_info, n_layer) \
    F(ds4rt_model_info, n_embd) \
    F(ds4rt_model_info, n_vocab) \
    F(ds4rt_model_info, n_head) \
    F(ds4rt_model_info, head_dim) \
    F(ds4rt_model_info, n_expert) \
    F(ds4rt_model_info, n_expert_used) \
    F(ds4rt_model_info, window) \
    F(ds4rt_model_info, n_hc) \
    F(ds4rt_model_info, bos_id) \
    F(ds4rt_model_info, eos_id) \
    F(ds4rt_model_info, numerics) \
    F(ds4rt_model_info, n_threads) \
    F(ds4rt_model_info, file_bytes) \
    F(ds4rt_model_info, cache_requested) \
    F(ds4rt_model_info, cache_active) \
    F(ds4rt_model_info, cache_bytes) \
    F(ds4rt_model_info, cache_hits) \
    F(ds4rt_model_info, cache_fallbacks) \
    F(ds4rt_model_info, cache_reason) \
    S(ds4rt_session_params) \
    F(ds4rt_session_params, size) \
    F(ds4rt_session_params, n_ctx) \
    F(ds4rt_session_params, max_batch) \
    S(ds4rt_sampler_params) \
    F(ds4rt_sampler_params, size) \
    F(ds4rt_sampler_params, temperature) \
    F(ds4rt_sampler_params, top_k) \
    F(ds4rt_sampler_params, top_p) \
    F(ds4rt_sampler_params, min_p) \
    F(ds4rt_sampler_params, seed) \
    S(ds4rt_dspark_params) \
    F(ds4rt_dspark_params, size) \
    F(ds4rt_dspark_params, window) \
    F(ds4rt_dspark_params, self_test) \
    S(ds4rt_dspark_info) \
    F(ds4rt_dspark_info, size) \
    F(ds4rt_dspark_info, layout) \
    F(ds4rt_dspark_info, n_stages) \
    F(ds4rt_dspark_info, block_size) \
    F(ds4rt_dspark_info, markov_rank) \
    F(ds4rt_dspark_info, noise_token) \
    F(ds4rt_dspark_info, window) \
    F(ds4rt_dspark_info, n_target_layers) \
    F(ds4rt_dspark_info, target_layers) \
    F(ds4rt_dspark_info, tensor_types) \
    S(ds4rt_scheduler_params) \
    F(ds4rt_scheduler_params, size) \
    F(ds4rt_scheduler_params, mode) \
    F(ds4rt_scheduler_params, max_draft) \
    F(ds4rt_scheduler_params, warmup_cycles) \
    F(ds4rt_scheduler_params, probe_min) \
    F(ds4rt_scheduler_params, probe_max) \
    F(ds4rt_scheduler_params, history_decay) \
    F(ds4rt_scheduler_params, confidence_weight) \
    F(ds4rt_scheduler_params, measured_costs) \
    F(ds4rt_scheduler_params, verify_cost_base) \
    F(ds4rt_scheduler_params, verify_cost_per_token) \
    F(ds4rt_scheduler_params, propose_cost) \
    S(ds4rt_spec_stats) \
    F(ds4rt_spec_stats, size) \
    F(ds4rt_spec_stats, cycles) \
    F(ds4rt_spec_stats, first_tokens) \
    F(ds4rt_spec_stats, proposed) \
    F(ds4rt_spec_stats, accepted_draft) \
    F(ds4rt_spec_stats, full) \
    F(ds4rt_spec_stats, partial) \
    F(ds4rt_spec_stats, miss_first) \
    F(ds4rt_spec_stats, no_draft) \
    F(ds4rt_spec_stats, no_room) \
    F(ds4rt_spec_stats, invalid) \
    F(ds4rt_spec_stats, scheduler_skips) \
    F(ds4rt_spec_stats, tail_skips) \
    F(ds4rt_spec_stats, verifier_unavailable) \
    F(ds4rt_spec_stats, errors) \
    F(ds4rt_spec_stats, propose) \
    F(ds4rt_spec_stats, prop_stage0) \
    F(ds4rt_spec_stats, prop_setup) \
    F(ds4rt_spec_stats, prop_cache) \
    F(ds4rt_spec_stats, prop_chain) \
    F(ds4rt_spec_stats, prop_hidden) \
    F(ds4rt_spec_stats, prop_conf0) \
    F(ds4rt_spec_stats, prop_logits) \
    F(ds4rt_spec_stats, prop_markov) \
    F(ds4rt_spec_stats, prop_confidence) \
    F(ds4rt_spec_stats, snapshot) \
    F(ds4rt_spec_stats, verify) \
    F(ds4rt_spec_stats, verify_upload) \
    F(ds4rt_spec_stats, verify_layer) \
    F(ds4rt_spec_stats, verify_head) \
    F(ds4rt_spec_stats, verify_read) \
    F(ds4rt_spec_stats, verify_fused_head) \
    F(ds4rt_spec_stats, replay) \
    F(ds4rt_spec_stats, spec_total) \
    F(ds4rt_spec_stats, target) \
    F(ds4rt_spec_stats, saved) \
    F(ds4rt_spec_stats, net_saved) \
    F(ds4rt_spec_stats, draft_len_hist) \
    F(ds4rt_spec_stats, accepted_len_hist) \
    F(ds4rt_spec_stats, no_draft_by_reason) \
    F(ds4rt_spec_stats, proposed_at) \
    F(ds4rt_spec_stats, accepted_at) \
    F(ds4rt_spec_stats, stage_ms) \
    F(ds4rt_spec_stats, confidence_cuts) \
    F(ds4rt_spec_stats, scheduler_trims) \
    F(ds4rt_spec_stats, probes) \
    F(ds4rt_spec_stats, tokens) \
    F(ds4rt_spec_stats, cache_bytes) \
    F(ds4rt_spec_stats, cache_hits) \
    F(ds4rt_spec_stats, cache_fallbacks) \
    F(ds4rt_spec_stats, decode_ms_avg) \
    S(ds4rt_spec_params) \
    F(ds4rt_spec_params, size) \
    F(ds4rt_spec_params, dspark) \
    F(ds4rt_spec_params, draft_fn) \
    F(ds4rt_spec_params, draft_user) \
    F(ds4rt_spec_params, confidence_threshold) \
    F(ds4rt_spec_params, scheduler) \
    F(ds4rt_spec_params, on_stats) \
    F(ds4rt_spec_params, stats_user) \
    S(ds4rt_generate_params) \
    F(ds4rt_generate_params, size) \
    F(ds4rt_generate_params, max_tokens) \
    F(ds4rt_generate_params, stop_at_eos) \
    F(ds4rt_generate_params, sampler) \
    F(ds4rt_generate_params, on_token) \
    F(ds4rt_generate_params, user) \
    F(ds4rt_generate_params, spec) \
    S(ds4rt_tokenizer_arrays) \
    F(ds4rt_tokenizer_arrays, size) \
    F(ds4rt_tokenizer_arrays, n_tokens) \
    F(ds4rt_tokenizer_arrays, tokens) \
    F(ds4rt_tokenizer_arrays, token_lens) \
    F(ds4rt_tokenizer_arrays, token_types) \
    F(ds4rt_tokenizer_arrays, n_merges) \
    F(ds4rt_tokenizer_arrays, merges) \
    F(ds4rt_tokenizer_arrays, merge_lens) \
    F(ds4rt_tokenizer_arrays, bos_id) \
    F(ds4rt_tokenizer_arrays, eos_id) \
    F(ds4rt_tokenizer_arrays, pre) \
    F(ds4rt_tokenizer_arrays, n_normalized_ids) \
    F(ds4rt_tokenizer_arrays, normalized_ids) \
    S(ds4rt_chat_message) \
    F(ds4rt_chat_message, role) \
    F(ds4rt_chat_message, content) \
    F(ds4rt_chat_message, content_len) \
    F(ds4rt_chat_message, reasoning) \
    F(ds4rt_chat_message, reasoning_len) \
    S(ds4rt_chat_options) \
    F(ds4rt_chat_options, size) \
    F(ds4rt_chat_options, think) \
    F(ds4rt_chat_options, add_generation_prompt) \
    F(ds4rt_chat_options, tool_context) \
    F(ds4rt_chat_options, content_flags) \

#define PRINT_STRUCT(s) printf("struct %s %zu\n", #s, sizeof(s));
#define PRINT_FIELD(s, f) printf("field %s.%s %zu\n", #s, #f, offsetof(s, f));

int main(void) {
    STRUCTS_1_0(PRINT_STRUCT, PRINT_FIELD)
    return 0;
}
