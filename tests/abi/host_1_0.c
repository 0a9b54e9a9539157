/*
 * host_1_0.c - a host program built against the frozen ABI 1.0 header (ds4rt_1_0.h) and run
 * against today's library (tests/test_abi_compat.py): every struct it hands over has a 1.0
 * layout - model params without backend fields, generate params with the sampler embedded,
 * spec params with the scheduler embedded, 1.0-sized info and stats - and the 1.0 by-value
 * initialisers are the library's exported functions. It prints what it gets, one "key: values"
 * line per result, and the test compares that with today's API doing the same things.
 *
 *   host_1_0 TARGET.gguf SUPPORT.gguf
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds4rt_1_0.h"

#define CHECK(call)                                                                             \
    do {                                                                                        \
        ds4rt_status st_ = (call);                                                              \
        if (st_ != DS4RT_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call,                  \
                    ds4rt_status_name(st_), ds4rt_last_error());                                \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#define N_GEN 16
static const int32_t PROMPT[] = {1, 2, 3, 4, 5};
#define N_PROMPT (sizeof PROMPT / sizeof PROMPT[0])

static void print_ids(const char *key, const int32_t *ids, size_t n) {
    printf("%s:", key);
    for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n");
}

/* A 1.0 struct returned by value between two canaries: the library must write exactly the
 * 1.0 layout (a larger write would reach the second canary when the compiler returns in place). */
#define CANARY 0x5eedc0dedeadbeefULL
typedef struct guarded_model_params {
    unsigned long long before;
    ds4rt_model_params p;
    unsigned long long after;
} guarded_model_params;

static int32_t gen(ds4rt_session *s, const ds4rt_generate_params *gp, int32_t *out) {
    size_t n = 0;
    ds4rt_session_reset(s);
    CHECK(ds4rt_generate(s, PROMPT, N_PROMPT, gp, out, N_GEN, &n));
    return (int32_t)n;
}

/* A host drafter proposing the continuation it was given (the plain greedy output), so every
 * draft is accepted. */
typedef struct oracle {
    const int32_t *want;
    size_t n_want;
    int calls;
} oracle;

static int32_t oracle_draft(void *user, const int32_t *context, size_t n_context, int32_t max_draft, int32_t *draft,
                            float *probs, uint32_t n_vocab, int32_t *have_probs) {
    oracle *o = user;
    (void)probs;
    (void)n_vocab;
    *have_probs = 0;
    o->calls++;
    /* context = prompt + generated so far (ending with the anchor = want[k]) */
    size_t k = n_context - N_PROMPT - 1; /* index of the anchor in want */
    int32_t n = 0;
    while (n < max_draft && k + 1 + (size_t)n < o->n_want) {
        draft[n] = o->want[k + 1 + (size_t)n];
        n++;
    }
    (void)context;
    return n;
}

static int stats_calls, stats_final;
static void on_stats(void *user, const ds4rt_spec_stats *st, int final) {
    (void)user;
    if (st->size < sizeof *st) abort(); /* the library passes at least the 1.0 struct */
    stats_calls++;
    stats_final += final;
}

static void print_stats(const char *key, ds4rt_session *s) {
    ds4rt_spec_stats st;
    memset(&st, 0xee, sizeof st);
    st.size = sizeof st;
    CHECK(ds4rt_session_spec_stats(s, &st));
    printf("%s: size=%zu cycles=%llu proposed=%llu accepted=%llu tokens=%llu off=%llu\n", key, st.size,
           (unsigned long long)st.cycles, (unsigned long long)st.proposed, (unsigned long long)st.accepted_draft,
           (unsigned long long)st.tokens, (unsigned long long)st.no_draft_by_reason[DS4RT_NO_DRAFT_SCHEDULER_OFF]);
    size_t needed = 0;
    CHECK(ds4rt_spec_stats_format(&st, 0, NULL, 0, &needed));
    char *line = malloc(needed);
    CHECK(ds4rt_spec_stats_format(&st, 0, line, needed, &needed));
    printf("%s_line_starts: %.17s\n", key, line);
    free(line);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s TARGET.gguf SUPPORT.gguf\n", argv[0]);
        return 2;
    }
    printf("api: %u %d\n", ds4rt_api_version(), DS4RT_API_VERSION);

    guarded_model_params g = {CANARY, {0}, CANARY};
    g.p = ds4rt_model_default_params();
    if (g.before != CANARY || g.after != CANARY || g.p.size != sizeof g.p) {
        fprintf(stderr, "model_default_params wrote outside the 1.0 layout\n");
        return 1;
    }
    g.p.n_threads = 2;
    g.p.numerics = DS4RT_NUMERICS_LLAMACPP;
    ds4rt_model *model;
    CHECK(ds4rt_model_load(argv[1], &g.p, &model));

    ds4rt_model_info info;
    memset(&info, 0xee, sizeof info);
    info.size = sizeof info;
    CHECK(ds4rt_model_get_info(model, &info));
    printf("info: size=%zu n_layer=%u n_vocab=%u n_embd=%u eos=%d threads=%d numerics=%d reason_nul=%d\n", info.size,
           info.n_layer, info.n_vocab, info.n_embd, info.eos_id, info.n_threads, (int)info.numerics,
           memchr(info.cache_reason, 0, sizeof info.cache_reason) != NULL);

    ds4rt_session_params sp = ds4rt_session_default_params();
    sp.n_ctx = 256;
    ds4rt_session *s;
    CHECK(ds4rt_session_create(model, &sp, &s));

    int32_t greedy[N_GEN], out[N_GEN];
    ds4rt_generate_params gp = ds4rt_generate_default_params();
    gp.max_tokens = N_GEN;
    gp.stop_at_eos = 0;
    int32_t n_greedy = gen(s, &gp, greedy);
    print_ids("greedy", greedy, (size_t)n_greedy);

    gp.sampler.temperature = 0.8f;
    gp.sampler.top_k = 20;
    gp.sampler.seed = 42;
    print_ids("sampled", out, (size_t)gen(s, &gp, out));
    gp.sampler = ds4rt_sampler_default_params(); /* greedy again */

    /* the sampler on its own, on the logits after the prompt */
    ds4rt_session_reset(s);
    CHECK(ds4rt_session_eval(s, PROMPT, N_PROMPT, NULL));
    ds4rt_sampler_params smp = ds4rt_sampler_default_params();
    smp.temperature = 1.0f;
    smp.top_p = 0.9f;
    smp.seed = 3;
    ds4rt_sampler *sampler;
    CHECK(ds4rt_sampler_create(&smp, info.n_vocab, &sampler));
    float *probs = malloc(info.n_vocab * sizeof(float));
    CHECK(ds4rt_sampler_probs(sampler, ds4rt_session_logits(s), probs));
    double total = 0;
    for (uint32_t i = 0; i < info.n_vocab; i++) total += probs[i];
    int32_t drawn[4];
    for (int i = 0; i < 4; i++) CHECK(ds4rt_sampler_sample(sampler, ds4rt_session_logits(s), &drawn[i]));
    printf("sampler: total=%.4f\n", total);
    print_ids("drawn", drawn, 4);
    free(probs);
    ds4rt_sampler_free(sampler);

    /* speculative: the default DSpark pair, scheduler ALWAYS (embedded 1.0 scheduler params) */
    ds4rt_dspark_params dp = ds4rt_dspark_default_params();
    ds4rt_dspark *dspark;
    CHECK(ds4rt_dspark_load(model, argv[2], &dp, &dspark));
    ds4rt_dspark_info di;
    memset(&di, 0xee, sizeof di);
    di.size = sizeof di;
    CHECK(ds4rt_dspark_get_info(dspark, &di));
    printf("dspark: size=%zu block=%u stages=%u n_target_layers=%u\n", di.size, di.block_size, di.n_stages,
           di.n_target_layers);
    ds4rt_spec_params spec = ds4rt_spec_default_params();
    spec.dspark = dspark;
    spec.scheduler.mode = DS4RT_SCHEDULER_ALWAYS;
    spec.on_stats = on_stats;
    gp.spec = &spec;
    ds4rt_session_reset_spec_stats(s);
    print_ids("dspark", out, (size_t)gen(s, &gp, out));
    print_stats("dspark_stats", s);
    printf("callbacks: %d final=%d\n", stats_calls > 0, stats_final);

    /* the same with the scheduler off: no drafts, same tokens */
    spec.scheduler.mode = DS4RT_SCHEDULER_OFF;
    ds4rt_session_reset_spec_stats(s);
    print_ids("dspark_off", out, (size_t)gen(s, &gp, out));
    print_stats("off_stats", s);

    /* a host drafter that knows the answer */
    oracle o = {greedy, (size_t)n_greedy, 0};
    ds4rt_spec_params host = ds4rt_spec_default_params();
    host.draft_fn = oracle_draft;
    host.draft_user = &o;
    host.scheduler.mode = DS4RT_SCHEDULER_ALWAYS;
    host.scheduler.max_draft = 4;
    gp.spec = &host;
    ds4rt_session_reset_spec_stats(s);
    print_ids("host", out, (size_t)gen(s, &gp, out));
    print_stats("host_stats", s);

    /* tokenizer and chat template, through the 1.0 pointer initialisers */
    const ds4rt_tokenizer *tok = ds4rt_model_tokenizer(model);
    if (tok != NULL) {
        int32_t ids[64];
        size_t n = 0;
        CHECK(ds4rt_tokenize(tok, "Hello world", 11, 0, ids, 64, &n));
        print_ids("tokens", ids, n);
        ds4rt_chat_options co;
        ds4rt_chat_options_default(&co);
        ds4rt_chat_message m = {DS4RT_ROLE_USER, "Hi", 2, NULL, 0};
        CHECK(ds4rt_chat_render_ids(tok, &m, 1, &co, ids, 64, &n));
        print_ids("chat", ids, n);
    }
    ds4rt_tokenizer_arrays ta;
    ds4rt_tokenizer_arrays_default(&ta);
    const char *vocab[] = {"a", "b", "c"};
    ta.n_tokens = 3;
    ta.tokens = vocab;
    ds4rt_tokenizer *small;
    CHECK(ds4rt_tokenizer_from_arrays(&ta, &small));
    printf("arrays: n_tokens=%u bos=%d\n", ds4rt_tokenizer_n_tokens(small), ds4rt_tokenizer_bos(small));
    ds4rt_tokenizer_free(small);

    ds4rt_dspark_free(dspark);
    ds4rt_session_free(s);
    ds4rt_model_free(model);
    printf("done\n");
    return 0;
}
