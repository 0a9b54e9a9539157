# Tokenizer, streaming decoder and chat template (include/ds4rt.h, "Tokenizer and chat template").
# Included at the end of _core.pyx; the public Python API is ds4rt/tokenizer.py.

from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc

import os

cdef extern from "ds4rt.h":
    ctypedef struct ds4rt_tokenizer:
        pass
    ctypedef struct ds4rt_detok_stream:
        pass
    ctypedef struct ds4rt_tokenizer_arrays:
        size_t size
        uint32_t n_tokens
        const char *const *tokens
        const uint32_t *token_lens
        const int32_t *token_types
        uint32_t n_merges
        const char *const *merges
        const uint32_t *merge_lens
        int32_t bos_id
        int32_t eos_id
        const char *pre
        uint32_t n_normalized_ids
        const int32_t *normalized_ids
    ctypedef struct ds4rt_chat_message:
        int32_t role
        const char *content
        size_t content_len
        const char *reasoning
        size_t reasoning_len
    ctypedef struct ds4rt_chat_options:
        size_t size
        int32_t think
        int32_t add_generation_prompt
        int32_t tool_context
        uint32_t content_flags

    void ds4rt_tokenizer_arrays_default(ds4rt_tokenizer_arrays *arrays)
    ds4rt_status ds4rt_tokenizer_from_arrays(const ds4rt_tokenizer_arrays *arrays,
                                             ds4rt_tokenizer **out) nogil
    void ds4rt_tokenizer_free(ds4rt_tokenizer *tok)
    uint32_t ds4rt_tokenizer_n_tokens(const ds4rt_tokenizer *tok)
    uint32_t ds4rt_tokenizer_n_merges(const ds4rt_tokenizer *tok)
    int32_t ds4rt_tokenizer_bos(const ds4rt_tokenizer *tok)
    int32_t ds4rt_tokenizer_eos(const ds4rt_tokenizer *tok)
    size_t ds4rt_tokenizer_max_token_bytes(const ds4rt_tokenizer *tok)
    ds4rt_status ds4rt_tokenizer_token(const ds4rt_tokenizer *tok, int32_t id, const char **text,
                                       size_t *len, int32_t *type)
    ds4rt_status ds4rt_tokenizer_find(const ds4rt_tokenizer *tok, const char *text, size_t len,
                                      int32_t *id)
    ds4rt_status ds4rt_tokenize(const ds4rt_tokenizer *tok, const char *text, size_t len,
                                uint32_t flags, int32_t *ids, size_t cap, size_t *n_ids) nogil
    ds4rt_status ds4rt_tokenizer_split(const ds4rt_tokenizer *tok, const char *text, size_t len,
                                       uint32_t flags, size_t *ends, size_t cap,
                                       size_t *n_pieces) nogil
    ds4rt_status ds4rt_detokenize(const ds4rt_tokenizer *tok, const int32_t *ids, size_t n,
                                  uint32_t flags, char *out, size_t cap, size_t *out_len) nogil
    ds4rt_status ds4rt_detok_stream_create(const ds4rt_tokenizer *tok, uint32_t flags,
                                           ds4rt_detok_stream **out)
    void ds4rt_detok_stream_free(ds4rt_detok_stream *stream)
    ds4rt_status ds4rt_detok_stream_push(ds4rt_detok_stream *stream, int32_t id, char *out,
                                         size_t cap, size_t *out_len)
    ds4rt_status ds4rt_detok_stream_flush(ds4rt_detok_stream *stream, char *out, size_t cap,
                                          size_t *out_len)
    size_t ds4rt_detok_stream_pending(const ds4rt_detok_stream *stream)
    void ds4rt_chat_options_default(ds4rt_chat_options *options)
    ds4rt_status ds4rt_chat_render(const ds4rt_chat_message *messages, size_t n_messages,
                                   const ds4rt_chat_options *options, char *out, size_t cap,
                                   size_t *out_len)
    ds4rt_status ds4rt_chat_render_ids(const ds4rt_tokenizer *tok,
                                       const ds4rt_chat_message *messages, size_t n_messages,
                                       const ds4rt_chat_options *options, int32_t *ids,
                                       size_t cap, size_t *n_ids)

# The GGUF reader, under names of this file's own (_gguf.pxi declares the same C entities).
cdef extern from "ds4rt.h":
    ctypedef struct tk_gguf "ds4rt_gguf":
        pass
    ds4rt_status tk_gguf_open "ds4rt_gguf_open"(const char *path, tk_gguf **out) nogil
    void tk_gguf_close "ds4rt_gguf_close"(tk_gguf *gguf) nogil
    ds4rt_status tk_tokenizer_from_gguf "ds4rt_tokenizer_from_gguf"(const tk_gguf *gguf,
                                                                   ds4rt_tokenizer **out) nogil


cdef class _StringArray:
    """Byte strings held alive with C pointer/length arrays over them."""
    cdef list keep
    cdef const char **ptrs
    cdef uint32_t *lens
    cdef size_t n

    def __cinit__(self, items):
        self.keep = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in items]
        self.n = len(self.keep)
        self.ptrs = <const char **>malloc((self.n + 1) * sizeof(char *))
        self.lens = <uint32_t *>malloc((self.n + 1) * sizeof(uint32_t))
        if self.ptrs == NULL or self.lens == NULL:
            raise MemoryError()
        cdef size_t i
        cdef bytes b
        for i in range(self.n):
            b = self.keep[i]
            if len(b) > 0xFFFFFFFF:
                raise ValueError("string too long")
            self.ptrs[i] = <const char *>b
            self.lens[i] = <uint32_t>len(b)

    def __dealloc__(self):
        free(self.ptrs)
        free(self.lens)


cdef class _Tokenizer:
    """A ds4rt_tokenizer handle (see ds4rt.tokenizer.Tokenizer), freed with this object unless
    `borrowed`. Another .pxi can wrap a tokenizer that an object of its own holds (e.g. a
    model's): t = _Tokenizer.__new__(_Tokenizer); t.ptr = ...; t.borrowed = True;
    t.owner = that_object (kept alive); then ds4rt.tokenizer.Tokenizer(t)."""
    cdef ds4rt_tokenizer *ptr
    cdef bint borrowed
    cdef object owner

    def __dealloc__(self):
        if self.ptr != NULL and not self.borrowed:
            ds4rt_tokenizer_free(self.ptr)
        self.ptr = NULL

    cdef ds4rt_tokenizer *live(self) except NULL:
        if self.ptr == NULL:
            raise ClosedError("the tokenizer is closed" if not self.borrowed else
                              "the tokenizer's model is closed")
        return self.ptr

    @property
    def closed(self):
        return self.ptr == NULL

    def close(self):
        """Frees an owned tokenizer (idempotent); a model's tokenizer closes with its model."""
        if self.borrowed:
            return
        if self.ptr != NULL:
            ds4rt_tokenizer_free(self.ptr)
            self.ptr = NULL

    @staticmethod
    def from_arrays(tokens, merges, token_types=None, int32_t bos_id=-1, int32_t eos_id=-1,
                    pre=None, normalized_ids=None):
        cdef _StringArray toks = _StringArray(tokens)
        cdef _StringArray mrg = _StringArray(merges)
        cdef int32_t[::1] types_v
        cdef int32_t[::1] norm_v
        cdef ds4rt_tokenizer_arrays a
        ds4rt_tokenizer_arrays_default(&a)
        a.n_tokens = <uint32_t>toks.n
        a.tokens = toks.ptrs
        a.token_lens = toks.lens
        a.n_merges = <uint32_t>mrg.n
        a.merges = mrg.ptrs
        a.merge_lens = mrg.lens
        a.bos_id = bos_id
        a.eos_id = eos_id
        if token_types is not None:
            types_arr = np.ascontiguousarray(token_types, dtype=np.int32)
            if types_arr.shape[0] != toks.n:
                raise ValueError("token_types must have one entry per token")
            types_v = types_arr
            if toks.n:
                a.token_types = &types_v[0]
        pre_b = pre.encode() if pre is not None else None
        if pre_b is not None:
            a.pre = pre_b
        norm_arr = np.ascontiguousarray(normalized_ids if normalized_ids is not None else [],
                                        dtype=np.int32)
        norm_v = norm_arr
        a.n_normalized_ids = <uint32_t>norm_arr.shape[0]
        if norm_arr.shape[0]:
            a.normalized_ids = &norm_v[0]
        cdef _Tokenizer t = _Tokenizer.__new__(_Tokenizer)
        cdef ds4rt_status st
        with nogil:
            st = ds4rt_tokenizer_from_arrays(&a, &t.ptr)
        check(st)
        return t

    @staticmethod
    def from_gguf(path):
        """From the tokenizer.* metadata of a GGUF file (opened, read, closed)."""
        cdef bytes p = os.fsencode(path)
        cdef const char *cp = p
        cdef tk_gguf *g = NULL
        cdef _Tokenizer t = _Tokenizer.__new__(_Tokenizer)
        cdef ds4rt_status st
        with nogil:
            st = tk_gguf_open(cp, &g)
            if st == DS4RT_OK:
                st = tk_tokenizer_from_gguf(g, &t.ptr)
                tk_gguf_close(g)
        check(st)
        return t

    @property
    def n_tokens(self):
        return ds4rt_tokenizer_n_tokens(self.live())

    @property
    def n_merges(self):
        return ds4rt_tokenizer_n_merges(self.live())

    @property
    def bos(self):
        return ds4rt_tokenizer_bos(self.live())

    @property
    def eos(self):
        return ds4rt_tokenizer_eos(self.live())

    @property
    def max_token_bytes(self):
        return ds4rt_tokenizer_max_token_bytes(self.live())

    def token(self, int32_t id):
        """(stored string as bytes, token type) of one id."""
        cdef const char *text = NULL
        cdef size_t n = 0
        cdef int32_t ty = 0
        check(ds4rt_tokenizer_token(self.live(), id, &text, &n, &ty))
        return text[:n], ty

    def find(self, bytes text):
        """Id of the token stored as exactly `text`, or -1."""
        cdef int32_t id = -1
        cdef ds4rt_status st = ds4rt_tokenizer_find(self.live(), text, len(text), &id)
        if st != DS4RT_OK:
            ds4rt_clear_error()
            return -1
        return id

    def encode(self, const unsigned char[::1] text, uint32_t flags):
        """ids (numpy int32) of UTF-8 bytes."""
        cdef size_t n = text.shape[0]
        cdef const char *p = <const char *>&text[0] if n else NULL
        cdef size_t need = 0
        cdef size_t cap = n + 2
        cdef ds4rt_status st
        cdef int32_t[::1] view
        cdef ds4rt_tokenizer *tp = self.live()
        while True:
            out = np.empty(cap, dtype=np.int32)
            view = out
            with nogil:
                st = ds4rt_tokenize(tp, p, n, flags, &view[0], cap, &need)
            if st == DS4RT_OK:
                return out[:need]
            if st != DS4RT_ERR_OUT_OF_RANGE or need <= cap:
                check(st)
            cap = need

    def split(self, const unsigned char[::1] text, uint32_t flags):
        """(text after U+FFFD substitution, piece end offsets)."""
        cdef size_t n = text.shape[0]
        cdef const char *p = <const char *>&text[0] if n else NULL
        cdef size_t need = 0
        cdef ds4rt_status st
        cdef ds4rt_tokenizer *tp = self.live()
        with nogil:
            st = ds4rt_tokenizer_split(tp, p, n, flags, NULL, 0, &need)
        check(st)
        ends = np.empty(need + 1, dtype=np.uintp)
        cdef size_t[::1] ev = ends
        with nogil:
            st = ds4rt_tokenizer_split(tp, p, n, flags, &ev[0], need + 1, &need)
        check(st)
        return ends[:need]

    def decode(self, ids, uint32_t flags):
        """Bytes of a sequence of ids."""
        ids32 = token_ids(ids, "ids")
        cdef int32_t[::1] iv = ids32
        cdef size_t n = ids32.shape[0]
        cdef const int32_t *ip = &iv[0] if n else NULL
        cdef size_t need = 0
        cdef ds4rt_status st
        cdef ds4rt_tokenizer *tp = self.live()
        with nogil:
            st = ds4rt_detokenize(tp, ip, n, flags, NULL, 0, &need)
        check(st)
        buf = bytearray(need + 1)
        cdef char *bp = buf
        with nogil:
            st = ds4rt_detokenize(tp, ip, n, flags, bp, need + 1, &need)
        check(st)
        return bytes(buf[:need])


cdef class _DetokStream:
    """Owner of a ds4rt_detok_stream; keeps its tokenizer alive."""
    cdef ds4rt_detok_stream *ptr
    cdef _Tokenizer tok
    cdef bytearray buf

    def __cinit__(self, _Tokenizer tok, uint32_t flags):
        self.tok = tok
        check(ds4rt_detok_stream_create(tok.live(), flags, &self.ptr))
        self.buf = bytearray(3 * (ds4rt_tokenizer_max_token_bytes(tok.ptr) + 4))

    def __dealloc__(self):
        if self.ptr != NULL:
            ds4rt_detok_stream_free(self.ptr)
            self.ptr = NULL

    def push(self, int32_t id):
        cdef size_t n = 0
        cdef char *bp = self.buf
        self.tok.live()  # the stream reads its tokenizer's tables
        check(ds4rt_detok_stream_push(self.ptr, id, bp, len(self.buf), &n))
        return bytes(self.buf[:n])

    def flush(self):
        cdef size_t n = 0
        cdef char *bp = self.buf
        self.tok.live()
        check(ds4rt_detok_stream_flush(self.ptr, bp, len(self.buf), &n))
        return bytes(self.buf[:n])

    @property
    def pending(self):
        return ds4rt_detok_stream_pending(self.ptr)


cdef class _ChatMessages:
    """C message array over Python (role, content bytes, reasoning bytes or None) tuples."""
    cdef ds4rt_chat_message *msgs
    cdef size_t n
    cdef list keep

    def __cinit__(self, messages):
        self.keep = list(messages)
        self.n = len(self.keep)
        self.msgs = <ds4rt_chat_message *>malloc((self.n + 1) * sizeof(ds4rt_chat_message))
        if self.msgs == NULL:
            raise MemoryError()
        cdef size_t i
        cdef bytes content, reasoning
        for i in range(self.n):
            role, content, reasoning = self.keep[i]
            self.msgs[i].role = <int32_t>role
            self.msgs[i].content = <const char *>content
            self.msgs[i].content_len = len(content)
            if reasoning is None:
                self.msgs[i].reasoning = NULL
                self.msgs[i].reasoning_len = 0
            else:
                self.msgs[i].reasoning = <const char *>reasoning
                self.msgs[i].reasoning_len = len(reasoning)

    def __dealloc__(self):
        free(self.msgs)


cdef ds4rt_chat_options _chat_options(int32_t think, int32_t add_generation_prompt,
                                      int32_t tool_context, uint32_t content_flags):
    cdef ds4rt_chat_options o
    ds4rt_chat_options_default(&o)
    o.think = think
    o.add_generation_prompt = add_generation_prompt
    o.tool_context = tool_context
    o.content_flags = content_flags
    return o


def _chat_render(messages, int32_t think, int32_t add_generation_prompt, int32_t tool_context):
    """Prompt text (bytes) of (role, content, reasoning) tuples."""
    cdef _ChatMessages m = _ChatMessages(messages)
    cdef ds4rt_chat_options o = _chat_options(think, add_generation_prompt, tool_context, 0)
    cdef size_t need = 0
    check(ds4rt_chat_render(m.msgs, m.n, &o, NULL, 0, &need))
    buf = bytearray(need + 1)
    cdef char *bp = buf
    check(ds4rt_chat_render(m.msgs, m.n, &o, bp, need + 1, &need))
    return bytes(buf[:need])


def _chat_render_ids(_Tokenizer tok, messages, int32_t think, int32_t add_generation_prompt,
                     int32_t tool_context, uint32_t content_flags):
    """Prompt token ids (numpy int32) of (role, content, reasoning) tuples."""
    cdef _ChatMessages m = _ChatMessages(messages)
    cdef ds4rt_chat_options o = _chat_options(think, add_generation_prompt, tool_context,
                                              content_flags)
    cdef size_t need = 0
    check(ds4rt_chat_render_ids(tok.live(), m.msgs, m.n, &o, NULL, 0, &need))
    out = np.empty(need + 1, dtype=np.int32)
    cdef int32_t[::1] view = out
    check(ds4rt_chat_render_ids(tok.live(), m.msgs, m.n, &o, &view[0], need + 1, &need))
    return out[:need]
