/*
 * gguf_copy.h - opening a GGUF file by reading it into memory the handle owns (the model's
 * DS4RT_LOAD_COPY; docs/ROBUSTNESS.md, "The contract"), or for its header only. Internal: the
 * public reader maps.
 */
#ifndef DS4RT_GGUF_COPY_H
#define DS4RT_GGUF_COPY_H

#include "ds4rt.h"

/* As ds4rt_gguf_open, but the whole file is read into a heap buffer first, so truncating or
 * rewriting the file afterwards cannot reach the handle. A file that changes size while it is
 * read is an IO error. */
ds4rt_status ds4rt_gguf_open_copy(const char *path, ds4rt_gguf **out);

/* As ds4rt_gguf_open, for the header only (the memory plan of a model, docs/PERFORMANCE.md
 * "Memory of the real model"): the file may end anywhere after the tensor infos (a header
 * written alone, as tools/make_big_model.py prepare does), every tensor's `data` is NULL and no
 * byte past the tensor infos is read. The tensor table is validated as ds4rt_gguf_open does
 * (sizes, alignment, overlaps), except that data may lie past the end of the file. */
ds4rt_status ds4rt_gguf_open_header(const char *path, ds4rt_gguf **out);

#endif /* DS4RT_GGUF_COPY_H */
