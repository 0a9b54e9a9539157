/*
 * chat.c - the DeepSeek V4 Flash prompt template as ds4 renders it (its server's
 * render_chat_prompt_text; the CLI's encode_chat_prompt is the one-user-turn case). The
 * rendering is a sequence of template markers and text; ds4rt_chat_render writes the markers
 * as their strings, ds4rt_chat_render_ids inserts their ids and encodes the text between two
 * markers as one span, so message text never turns into markers unless the host asks for it.
 */
#include <string.h>

#include "abi.h"
#include "abi_1_0.h"
#include "tokenizer_internal.h"

enum marker { M_BOS, M_USER, M_ASSISTANT, M_THINK, M_END_THINK, M_EOS, M_COUNT };

static const char *const MARKER_TEXT[M_COUNT] = {
    "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>",
    "<｜end▁of▁sentence｜>",
};

/* DS4's Think-Max prompt prefix (placed right after BOS). */
static const char THINK_MAX_PREFIX[] =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate "
    "step, considered alternative, and rejected hypothesis to ensure absolutely no assumption "
    "is left unchecked.\n\n";

static const char TOOL_OPEN[] = "<tool_result>";
static const char TOOL_CLOSE[] = "</tool_result>";

typedef struct mark {
    size_t begin, end;
    int kind;
} mark;

/* The rendering: its text, and where each marker sits in it. */
typedef struct rendering {
    ds4rt_bytebuf text;
    ds4rt_bytebuf marks; /* array of mark */
    size_t n_marks;
    ds4rt_status st;
} rendering;

static void put_text(rendering *r, const char *s, size_t n) {
    if (r->st == DS4RT_OK && n) r->st = ds4rt_bytebuf_append(&r->text, s, n);
}

static void put_marker(rendering *r, int kind) {
    size_t begin = r->text.len;
    put_text(r, MARKER_TEXT[kind], strlen(MARKER_TEXT[kind]));
    if (r->st != DS4RT_OK) return;
    mark m = {begin, r->text.len, kind};
    r->st = ds4rt_bytebuf_append(&r->marks, &m, sizeof m);
    r->n_marks++;
}

static const mark *marks_of(const rendering *r) { return (const mark *)(void *)r->marks.p; }

/* Tool output is data: only the wrapper's closing tag inside it is defused, as ds4 does. */
static void put_tool_text(rendering *r, const char *s, size_t n) {
    size_t close = sizeof TOOL_CLOSE - 1, from = 0;
    for (size_t i = 0; i + close <= n; i++) {
        if (s[i] == '<' && memcmp(s + i, TOOL_CLOSE, close) == 0) {
            put_text(r, s + from, i - from);
            put_text(r, "&lt;", 4);
            from = i + 1;
        }
    }
    put_text(r, s + from, n - from);
}

static ds4rt_status check_messages(const ds4rt_chat_message *msgs, size_t n,
                                   const ds4rt_chat_options *o) {
    if (n && !msgs) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "chat: NULL messages");
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].role < DS4RT_ROLE_SYSTEM || msgs[i].role > DS4RT_ROLE_TOOL)
            return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "chat: message %zu has unknown role %d",
                              i, msgs[i].role);
        if ((!msgs[i].content && msgs[i].content_len) ||
            (!msgs[i].reasoning && msgs[i].reasoning_len))
            return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "chat: message %zu has a NULL text", i);
    }
    if (o->think < DS4RT_THINK_NONE || o->think > DS4RT_THINK_MAX)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "chat: unknown think mode %d", o->think);
    if (o->content_flags & ~(uint32_t)(DS4RT_TOKENIZE_PARSE_SPECIAL | DS4RT_TOKENIZE_STRICT_UTF8))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "chat: content_flags 0x%x not allowed",
                          o->content_flags);
    return DS4RT_OK;
}

static void options_defaults(void *out) {
    ds4rt_chat_options *o = out;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->think = DS4RT_THINK_NONE;
    o->add_generation_prompt = 1;
}

/* The versioning rule of abi.h. */
static const ds4rt_struct_desc CHAT_OPTIONS = {
    .name = "ds4rt_chat_options",
    .size = sizeof(ds4rt_chat_options),
    .min_size = sizeof(ds4rt_chat_options_1_0),
    .defaults = options_defaults,
};

DS4RT_API ds4rt_status ds4rt_chat_options_init(ds4rt_chat_options *options, size_t size) {
    return ds4rt_struct_init(&CHAT_OPTIONS, options, size);
}

static ds4rt_status read_options(const ds4rt_chat_options *in, ds4rt_chat_options *o) {
    return ds4rt_struct_read(&CHAT_OPTIONS, in, o);
}

static void render(rendering *r, const ds4rt_chat_message *msgs, size_t n,
                   const ds4rt_chat_options *o) {
    int think = o->think != DS4RT_THINK_NONE;
    int tool_context = o->tool_context != 0;
    size_t last_user = 0;
    int any_user = 0;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].role == DS4RT_ROLE_TOOL) tool_context = 1;
        if (msgs[i].role == DS4RT_ROLE_USER || msgs[i].role == DS4RT_ROLE_TOOL) {
            last_user = i;
            any_user = 1;
        }
    }

    put_marker(r, M_BOS);
    if (o->think == DS4RT_THINK_MAX) put_text(r, THINK_MAX_PREFIX, sizeof THINK_MAX_PREFIX - 1);
    int first_system = 1;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].role != DS4RT_ROLE_SYSTEM) continue;
        if (!first_system) put_text(r, "\n\n", 2);
        put_text(r, msgs[i].content, msgs[i].content_len);
        first_system = 0;
    }

    int pending_assistant = 0, pending_tool = 0;
    for (size_t i = 0; i < n; i++) {
        const ds4rt_chat_message *m = &msgs[i];
        switch (m->role) {
        case DS4RT_ROLE_USER:
            put_marker(r, M_USER);
            put_text(r, m->content, m->content_len);
            pending_assistant = 1;
            pending_tool = 0;
            break;
        case DS4RT_ROLE_TOOL:
            if (!pending_tool) put_marker(r, M_USER);
            put_text(r, TOOL_OPEN, sizeof TOOL_OPEN - 1);
            put_tool_text(r, m->content, m->content_len);
            put_text(r, TOOL_CLOSE, sizeof TOOL_CLOSE - 1);
            pending_assistant = 1;
            pending_tool = 1;
            break;
        case DS4RT_ROLE_ASSISTANT:
            if (pending_assistant) {
                put_marker(r, M_ASSISTANT);
                if (think && (tool_context || !any_user || i > last_user)) {
                    put_marker(r, M_THINK);
                    put_text(r, m->reasoning, m->reasoning_len);
                }
                put_marker(r, M_END_THINK);
            }
            put_text(r, m->content, m->content_len);
            put_marker(r, M_EOS);
            pending_assistant = 0;
            pending_tool = 0;
            break;
        default: break; /* system: gathered above */
        }
    }
    if (o->add_generation_prompt && pending_assistant) {
        put_marker(r, M_ASSISTANT);
        put_marker(r, think ? M_THINK : M_END_THINK);
    }
}

static void rendering_free(rendering *r) {
    ds4rt_bytebuf_free(&r->text);
    ds4rt_bytebuf_free(&r->marks);
}

DS4RT_API ds4rt_status ds4rt_chat_render(const ds4rt_chat_message *messages, size_t n_messages,
                                         const ds4rt_chat_options *options, char *out, size_t cap,
                                         size_t *out_len) {
    if (!out_len) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_chat_render: NULL out_len");
    *out_len = 0;
    ds4rt_chat_options o;
    ds4rt_status st = read_options(options, &o);
    if (st == DS4RT_OK) st = check_messages(messages, n_messages, &o);
    if (st != DS4RT_OK) return st;
    rendering r = {0};
    render(&r, messages, n_messages, &o);
    st = r.st;
    if (st == DS4RT_OK)
        st = ds4rt_tok_copy_out(r.text.p, r.text.len, 1, out, cap, out_len, 1, "ds4rt_chat_render");
    rendering_free(&r);
    return st;
}

DS4RT_API ds4rt_status ds4rt_chat_render_ids(const ds4rt_tokenizer *tok,
                                             const ds4rt_chat_message *messages, size_t n_messages,
                                             const ds4rt_chat_options *options, int32_t *ids,
                                             size_t cap, size_t *n_ids) {
    if (!tok || !n_ids)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_chat_render_ids: NULL argument");
    *n_ids = 0;
    ds4rt_chat_options o;
    ds4rt_status st = read_options(options, &o);
    if (st == DS4RT_OK) st = check_messages(messages, n_messages, &o);
    if (st != DS4RT_OK) return st;

    int32_t marker_id[M_COUNT];
    for (int k = 0; k < M_COUNT; k++) {
        marker_id[k] = ds4rt_tok_lookup(tok, MARKER_TEXT[k], strlen(MARKER_TEXT[k]));
        if (marker_id[k] < 0)
            return ds4rt_fail(DS4RT_ERR_NOT_FOUND,
                              "ds4rt_chat_render_ids: the vocabulary has no token \"%s\"",
                              MARKER_TEXT[k]);
    }

    rendering r = {0};
    render(&r, messages, n_messages, &o);
    st = r.st;
    ds4rt_idvec out = {0};
    size_t at = 0;
    const mark *marks = marks_of(&r);
    for (size_t k = 0; k <= r.n_marks && st == DS4RT_OK; k++) {
        size_t begin = k < r.n_marks ? marks[k].begin : r.text.len;
        if (begin > at)
            st = ds4rt_tok_encode(tok, (const char *)r.text.p + at, begin - at, o.content_flags,
                                  &out);
        if (st == DS4RT_OK && k < r.n_marks) {
            st = ds4rt_idvec_push(&out, marker_id[marks[k].kind]);
            at = marks[k].end;
        }
    }
    if (st == DS4RT_OK)
        st = ds4rt_tok_copy_out(out.v, out.len, sizeof(int32_t), ids, cap, n_ids, 0,
                                "ds4rt_chat_render_ids");
    ds4rt_idvec_free(&out);
    rendering_free(&r);
    return st;
}
