/*
 * backend_choice.h - which compute backend a model is loaded on: the one place that turns
 * ds4rt_model_params.backend/.device into a decision (or an error saying why not), so wiring a
 * real GPU backend changes this file only.
 */
#ifndef DS4RT_BACKEND_CHOICE_H
#define DS4RT_BACKEND_CHOICE_H

#include <stdint.h>

#include "backend.h"
#include "ds4rt.h"

typedef struct ds4rt_backend_choice {
    ds4rt_backend_kind kind;          /* never AUTO */
    int32_t device;                   /* GPU ordinal; -1 on the CPU */
    char name[DS4RT_BACKEND_NAME_LEN]; /* "cpu", "cuda", "hip" */
} ds4rt_backend_choice;

/* DS4RT_ERR_INVALID_ARGUMENT for an unknown kind or a negative device; DS4RT_ERR_BACKEND when
 * the backend is not compiled into this build, no device is visible, or the backend cannot run
 * the model. */
ds4rt_status ds4rt_backend_choose(int32_t requested, int32_t device, ds4rt_backend_choice *out);

/* Opens the chosen backend from the registry. */
ds4rt_status ds4rt_backend_open_choice(const ds4rt_backend_choice *c, int n_threads, ds4rt_backend **out);

#endif /* DS4RT_BACKEND_CHOICE_H */
