/* gguf_open.c - opening a GGUF file: mapping it, parsing and validating the header in stages
 * (fixed header, metadata, tensor infos, data placement), and the handle's plain accessors.
 * Only header bytes are read; tensor data stays untouched in the mapping. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_copy.h"
#include "gguf_internal.h"

static ds4rt_status parse_header(ds4rt_gguf *g) {
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe != 1) {
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "GGUF reading needs a little-endian host");
    }
    gguf_cursor c = {.base = g->base, .size = g->size, .pos = 0};
    if (g->size < 4) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "file is %llu bytes long, too short for the 4-byte GGUF magic",
                          (unsigned long long)g->size);
    }
    if (memcmp(g->base, "GGUF", 4) != 0) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "bad magic %02x %02x %02x %02x at byte 0 (expected \"GGUF\"): not a "
                          "GGUF file",
                          g->base[0], g->base[1], g->base[2], g->base[3]);
    }
    c.pos = 4;
    uint64_t n_tensors, n_kv;
    if (!gguf_read_u32(&c, &g->version)) {
        return ds4rt_fail(DS4RT_ERR_FORMAT, "header truncated: version at byte 4 (file is %llu "
                          "bytes)", (unsigned long long)g->size);
    }
    if (g->version == 1) {
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED,
                          "GGUF version 1 (at byte 4) is not supported: v1 used 32-bit counts and "
                          "lengths; convert the model again with a current tool");
    }
    if (g->version != 0 && (g->version & 0xffffu) == 0) {
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED,
                          "version field at byte 4 reads 0x%08x: a big-endian GGUF file, which "
                          "ds4rt does not read", g->version);
    }
    if (g->version != 2 && g->version != 3) {
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED,
                          "GGUF version %u (at byte 4) is not supported; ds4rt reads versions 2 "
                          "and 3", g->version);
    }
    if (!gguf_read_u64(&c, &n_tensors) || !gguf_read_u64(&c, &n_kv)) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "header truncated: the tensor and key counts at bytes 8..24 need 16 "
                          "bytes (file is %llu bytes)", (unsigned long long)g->size);
    }
    if (n_kv > gguf_left(&c) / GGUF_MIN_KV_BYTES) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "header: n_kv = %llu (at byte 16) metadata records cannot fit in the "
                          "%llu bytes after the header (each takes at least %u)",
                          (unsigned long long)n_kv, (unsigned long long)gguf_left(&c),
                          GGUF_MIN_KV_BYTES);
    }
    if (n_tensors > gguf_left(&c) / GGUF_MIN_TENSOR_INFO_BYTES) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "header: n_tensors = %llu (at byte 8) tensor records cannot fit in "
                          "the %llu bytes after the header (each takes at least %u)",
                          (unsigned long long)n_tensors, (unsigned long long)gguf_left(&c),
                          GGUF_MIN_TENSOR_INFO_BYTES);
    }

    ds4rt_status st = gguf_parse_metadata(g, &c, n_kv);
    if (st != DS4RT_OK) return st;
    if (n_tensors > gguf_left(&c) / GGUF_MIN_TENSOR_INFO_BYTES) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "header: n_tensors = %llu (at byte 8) tensor records cannot fit in "
                          "the %llu bytes left after the metadata, which ends at byte %llu "
                          "(each takes at least %u)",
                          (unsigned long long)n_tensors, (unsigned long long)gguf_left(&c),
                          (unsigned long long)c.pos, GGUF_MIN_TENSOR_INFO_BYTES);
    }
    st = gguf_parse_tensor_infos(g, &c, n_tensors);
    if (st != DS4RT_OK) return st;

    /* The data section starts at the first aligned byte after the tensor infos. A file
     * without tensors may end before that padding. */
    uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
    if (!ds4rt_add_u64(c.pos, pad, &g->data_offset)) {
        return ds4rt_fail(DS4RT_ERR_FORMAT, "data section offset overflows");
    }
    if (g->n_tensors > 0 && g->data_offset > g->size && !g->header_only) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "the data section would start at byte %llu (tensor infos end at byte "
                          "%llu, alignment %llu), past the end of the file (%llu bytes)",
                          (unsigned long long)g->data_offset, (unsigned long long)c.pos,
                          (unsigned long long)g->alignment, (unsigned long long)g->size);
    }
    return gguf_place_tensors(g);
}

/* Takes ownership of nothing: on failure g is freed (and its mapping unmapped). */
static ds4rt_status finish_open(ds4rt_gguf *g, const char *what, ds4rt_gguf **out) {
    ds4rt_status st = parse_header(g);
    if (st != DS4RT_OK) {
        ds4rt_gguf_close(g);
        return ds4rt_fail_context(st, "%s", what);
    }
    *out = g;
    return DS4RT_OK;
}

/* Reads all `len` bytes of fd into a new buffer (*buf; len 0: NULL). */
static ds4rt_status read_whole(int fd, const char *path, size_t len, void **buf) {
    *buf = NULL;
    if (len == 0) return DS4RT_OK;
    uint8_t *b = malloc(len);
    if (b == NULL)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "%s: no memory to copy its %llu bytes", path,
                          (unsigned long long)len);
    size_t got = 0;
    while (got < len) {
        const size_t want = len - got < ((size_t)1 << 30) ? len - got : ((size_t)1 << 30);
        const ssize_t r = read(fd, b + got, want);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            const int e = errno;
            free(b);
            if (r == 0)
                return ds4rt_fail(DS4RT_ERR_IO, "%s: the file ended at byte %llu while it was copied (%llu expected)",
                                  path, (unsigned long long)got, (unsigned long long)len);
            return ds4rt_fail(DS4RT_ERR_IO, "%s: read failed at byte %llu: %s", path, (unsigned long long)got,
                              strerror(e));
        }
        got += (size_t)r;
    }
    *buf = b;
    return DS4RT_OK;
}

static ds4rt_status open_file(const char *path, bool copy, bool header_only, ds4rt_gguf **out) {
    if (out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "gguf_open: out is NULL");
    *out = NULL;
    if (path == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "gguf_open: path is NULL");

    /* O_NONBLOCK: opening a FIFO by mistake must not hang; regular files ignore it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ds4rt_fail(DS4RT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ds4rt_fail(DS4RT_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return ds4rt_fail(DS4RT_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return ds4rt_fail(DS4RT_ERR_IO, "%s: %llu bytes cannot be mapped on this platform",
                          path, (unsigned long long)sb.st_size);
    }
    size_t len = (size_t)sb.st_size;
    /* An empty file cannot be mapped; it is parsed (and rejected) like any other image. */
    static const uint8_t empty[1];
    const void *image = empty;
    void *owned = NULL;
    size_t map_len = 0;
    if (copy) {
        ds4rt_status st = read_whole(fd, path, len, &owned);
        close(fd);
        if (st != DS4RT_OK) return st;
        if (owned) image = owned;
    } else {
        void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : (void *)empty;
        int map_errno = errno;
        close(fd);
        if (map == MAP_FAILED) {
            return ds4rt_fail(DS4RT_ERR_IO, "%s: cannot map %llu bytes: %s", path,
                              (unsigned long long)len, strerror(map_errno));
        }
        image = map;
        map_len = len;
    }
    ds4rt_gguf *g = calloc(1, sizeof *g);
    if (g == NULL) {
        if (map_len) munmap((void *)image, map_len);
        free(owned);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "%s: no memory for the GGUF handle", path);
    }
    g->base = image;
    g->size = (uint64_t)len;
    g->map_len = map_len;
    g->owned = owned;
    g->header_only = header_only;
    return finish_open(g, path, out);
}

DS4RT_API ds4rt_status ds4rt_gguf_open(const char *path, ds4rt_gguf **out) {
    return open_file(path, false, false, out);
}

ds4rt_status ds4rt_gguf_open_copy(const char *path, ds4rt_gguf **out) { return open_file(path, true, false, out); }

ds4rt_status ds4rt_gguf_open_header(const char *path, ds4rt_gguf **out) { return open_file(path, false, true, out); }

DS4RT_API ds4rt_status ds4rt_gguf_open_memory(const void *data, size_t size, ds4rt_gguf **out) {
    if (out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "gguf_open_memory: out is NULL");
    *out = NULL;
    if (data == NULL && size != 0) {
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "gguf_open_memory: data is NULL");
    }
    static const uint8_t empty[1];
    ds4rt_gguf *g = calloc(1, sizeof *g);
    if (g == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "no memory for the GGUF handle");
    g->base = data ? data : empty;
    g->size = (uint64_t)size;
    return finish_open(g, "<memory>", out);
}

DS4RT_API void ds4rt_gguf_close(ds4rt_gguf *g) {
    if (g == NULL) return;
    gguf_free_metadata(g);
    free(g->tensors);
    gguf_index_free(&g->tensor_index);
    if (g->map_len) munmap((void *)g->base, g->map_len);
    free(g->owned);
    free(g);
}

DS4RT_API uint32_t ds4rt_gguf_version(const ds4rt_gguf *g) { return g ? g->version : 0; }

DS4RT_API uint64_t ds4rt_gguf_alignment(const ds4rt_gguf *g) { return g ? g->alignment : 0; }

DS4RT_API uint64_t ds4rt_gguf_data_offset(const ds4rt_gguf *g) { return g ? g->data_offset : 0; }

DS4RT_API uint64_t ds4rt_gguf_file_size(const ds4rt_gguf *g) { return g ? g->size : 0; }

DS4RT_API uint64_t ds4rt_gguf_kv_count(const ds4rt_gguf *g) { return g ? g->n_kv : 0; }

DS4RT_API const ds4rt_gguf_kv *ds4rt_gguf_kv_at(const ds4rt_gguf *g, uint64_t i) {
    return g && i < g->n_kv ? &g->kvs[i] : NULL;
}

DS4RT_API const ds4rt_gguf_kv *ds4rt_gguf_find_kv(const ds4rt_gguf *g, const char *key) {
    if (g == NULL || key == NULL) return NULL;
    uint64_t i = gguf_index_find(&g->kv_index, g, gguf_kv_name_at, key, strlen(key));
    return i == UINT64_MAX ? NULL : &g->kvs[i];
}

DS4RT_API uint64_t ds4rt_gguf_tensor_count(const ds4rt_gguf *g) { return g ? g->n_tensors : 0; }

DS4RT_API const ds4rt_gguf_tensor *ds4rt_gguf_tensor_at(const ds4rt_gguf *g, uint64_t i) {
    return g && i < g->n_tensors ? &g->tensors[i] : NULL;
}

DS4RT_API const ds4rt_gguf_tensor *ds4rt_gguf_find_tensor(const ds4rt_gguf *g, const char *name) {
    if (g == NULL || name == NULL) return NULL;
    uint64_t i = gguf_index_find(&g->tensor_index, g, gguf_tensor_name_at, name, strlen(name));
    return i == UINT64_MAX ? NULL : &g->tensors[i];
}
