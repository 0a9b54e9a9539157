/* spec_stats.c - speculative statistics: access, reset, ds4's one-line format and JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "api_internal.h"
#include "internal.h"

/* An output struct, and an input of ds4rt_spec_stats_format; it only grows at its end. */
static const ds4rt_struct_desc SPEC_STATS = {
    .name = "ds4rt_spec_stats",
    .size = sizeof(ds4rt_spec_stats),
    .min_size = offsetof(ds4rt_spec_stats, decode_ms_avg) + sizeof(double), /* the 1.0 layout */
    .defaults = ds4rt_spec_stats_clear,
};

void ds4rt_spec_stats_clear(void *stats) {
    ds4rt_spec_stats *st = stats;
    memset(st, 0, sizeof *st);
    st->size = sizeof *st;
}

DS4RT_API ds4rt_status ds4rt_session_spec_stats(const ds4rt_session *s, ds4rt_spec_stats *out) {
    if (s == NULL || out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_spec_stats: NULL argument");
    ds4rt_status st = ds4rt_struct_write(&SPEC_STATS, &s->stats, out);
    return st == DS4RT_OK ? st : ds4rt_fail_context(st, "session_spec_stats");
}

DS4RT_API void ds4rt_session_reset_spec_stats(ds4rt_session *s) {
    if (s != NULL) ds4rt_spec_stats_clear(&s->stats);
}

/* A growing buffer that counts what it could not hold. */
typedef struct sbuf {
    char *p;
    size_t cap, len;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) DS4RT_PRINTF(2, 3);
static void put(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->len < b->cap ? b->cap - b->len : 0;
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) b->len += (size_t)n;
}

static void hist(sbuf *b, const uint64_t *h, size_t n) {
    bool any = false;
    for (size_t i = 0; i < n; i++)
        if (h[i]) {
            put(b, "%s%zu:%llu", any ? "," : "", i, (unsigned long long)h[i]);
            any = true;
        }
    if (!any) put(b, "none");
}

static void list(sbuf *b, const uint64_t *v, size_t n) {
    put(b, "[");
    for (size_t i = 0; i < n; i++) put(b, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
    put(b, "]");
}

static const char *const REASONS[] = {"scheduler", "tail", "confidence", "not_ready", "op_unavailable",
                                      "no_room", "error", "scheduler_off", "empty"};
_Static_assert(DS4RT_ARRAY_LEN(REASONS) == DS4RT_NO_DRAFT_REASON_COUNT, "one name per ds4rt_no_draft_reason");

#define U(name) (unsigned long long)st->name
#define C(name) put(&b, json ? "\"" #name "\":%llu," : " " #name "=%llu", U(name))
#define T(name) put(&b, json ? "\"" #name "\":%.3f," : " " #name "=%.3f", st->name)

DS4RT_API ds4rt_status ds4rt_spec_stats_format(const ds4rt_spec_stats *caller, int json, char *buf, size_t cap,
                                               size_t *needed) {
    if (caller == NULL || needed == NULL || (cap > 0 && buf == NULL))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "spec_stats_format: NULL argument");
    ds4rt_spec_stats copy; /* a caller's older struct reads as zeros in the fields it lacks */
    ds4rt_status rst = ds4rt_struct_read(&SPEC_STATS, caller, &copy);
    if (rst != DS4RT_OK) return ds4rt_fail_context(rst, "spec_stats_format");
    const ds4rt_spec_stats *st = &copy;
    sbuf b = {.p = buf, .cap = cap, .len = 0};
    double rate = st->proposed ? 100.0 * (double)st->accepted_draft / (double)st->proposed : 0.0;
    double avg = st->cycles ? (double)st->accepted_draft / (double)st->cycles : 0.0;
    /* committed tokens per verified cycle: a cycle that verified drafts is exactly one of full,
     * partial, miss_first, and commits its accepted drafts plus one token of the target's own */
    uint64_t verified = st->full + st->partial + st->miss_first;
    double per_verify = verified ? (double)(st->accepted_draft + verified) / (double)verified : 0.0;
    put(&b, json ? "{" : "ds4: DSpark stats");
    C(cycles);
    C(first_tokens);
    C(proposed);
    C(accepted_draft);
    put(&b, json ? "\"accept_rate\":%.2f,\"avg_accept\":%.3f,\"committed_per_verify\":%.3f,"
                 : " accept_rate=%.2f%% avg_accept=%.3f committed_per_verify=%.3f",
        rate, avg, per_verify);
    C(full);
    C(partial);
    C(miss_first);
    C(no_draft);
    C(no_room);
    C(invalid);
    C(scheduler_skips);
    C(tail_skips);
    C(verifier_unavailable);
    C(errors);
    if (!json) put(&b, " time_ms");
    T(propose);
    T(prop_stage0);
    T(prop_setup);
    T(prop_cache);
    T(prop_chain);
    T(prop_hidden);
    T(prop_conf0);
    T(prop_logits);
    T(prop_markov);
    T(prop_confidence);
    T(snapshot);
    T(verify);
    T(verify_upload);
    T(verify_layer);
    T(verify_head);
    T(verify_read);
    C(verify_fused_head);
    T(replay);
    T(spec_total);
    T(target);
    T(saved);
    T(net_saved);
    if (json) {
        put(&b, "\"draft_len_hist\":");
        list(&b, st->draft_len_hist, DS4RT_DRAFT_HIST_LEN);
        put(&b, ",\"accepted_len_hist\":");
        list(&b, st->accepted_len_hist, DS4RT_DRAFT_HIST_LEN);
        put(&b, ",\"no_draft_by_reason\":{");
        for (size_t i = 0; i < DS4RT_ARRAY_LEN(REASONS); i++)
            put(&b, "%s\"%s\":%llu", i ? "," : "", REASONS[i], (unsigned long long)st->no_draft_by_reason[i]);
        put(&b, "},\"proposed_at\":");
        list(&b, st->proposed_at, DS4RT_MAX_DRAFT);
        put(&b, ",\"accepted_at\":");
        list(&b, st->accepted_at, DS4RT_MAX_DRAFT);
        put(&b, ",\"stage_ms\":[");
        for (int i = 0; i < DS4RT_MAX_DRAFTER_STAGES; i++) put(&b, "%s%.3f", i ? "," : "", st->stage_ms[i]);
        put(&b, "],");
    } else {
        put(&b, " draft_len_hist=");
        hist(&b, st->draft_len_hist, DS4RT_DRAFT_HIST_LEN);
        put(&b, " accepted_len_hist=");
        hist(&b, st->accepted_len_hist, DS4RT_DRAFT_HIST_LEN);
        put(&b, " no_draft_reasons=");
        for (size_t i = 0; i < DS4RT_ARRAY_LEN(REASONS); i++)
            put(&b, "%s%s:%llu", i ? "," : "", REASONS[i], (unsigned long long)st->no_draft_by_reason[i]);
        put(&b, " accepted_at=");
        hist(&b, st->accepted_at, DS4RT_MAX_DRAFT);
        put(&b, " stage_ms=");
        for (int i = 0; i < DS4RT_MAX_DRAFTER_STAGES; i++) put(&b, "%s%.3f", i ? "," : "", st->stage_ms[i]);
    }
    C(confidence_cuts);
    C(scheduler_trims);
    C(probes);
    C(tokens);
    C(cache_bytes);
    C(cache_hits);
    C(cache_fallbacks);
    put(&b, json ? "\"decode_ms_avg\":%.3f}" : " decode_ms_avg=%.3f", st->decode_ms_avg);
    *needed = b.len + 1;
    if (b.len >= cap) {
        if (cap > 0) buf[cap - 1] = '\0';
        return cap == 0 ? DS4RT_OK
                        : ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "spec_stats_format: %zu bytes needed", b.len + 1);
    }
    return DS4RT_OK;
}
