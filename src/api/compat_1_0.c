/*
 * compat_1_0.c - the ABI 1.0 initialisers. A 1.0 binary calls these library functions and
 * reserves exactly the 1.0 layout for the result (a struct returned by value, or one filled
 * through a pointer), so they fill the 1.0 layouts through the same *_init() calls newer
 * headers reach through their inline initialisers (abi.h, abi_1_0.h).
 */
#include "abi_1_0.h"

#define RETURN_INIT_1_0(type, init)                                                             \
    do {                                                                                        \
        type##_1_0 p;                                                                           \
        (void)init((type *)(void *)&p, sizeof p);                                               \
        return p;                                                                               \
    } while (0)

DS4RT_API ds4rt_model_params_1_0 ds4rt_model_default_params(void) {
    RETURN_INIT_1_0(ds4rt_model_params, ds4rt_model_params_init);
}

DS4RT_API ds4rt_session_params_1_0 ds4rt_session_default_params(void) {
    RETURN_INIT_1_0(ds4rt_session_params, ds4rt_session_params_init);
}

DS4RT_API ds4rt_sampler_params_1_0 ds4rt_sampler_default_params(void) {
    RETURN_INIT_1_0(ds4rt_sampler_params, ds4rt_sampler_params_init);
}

DS4RT_API ds4rt_dspark_params_1_0 ds4rt_dspark_default_params(void) {
    RETURN_INIT_1_0(ds4rt_dspark_params, ds4rt_dspark_params_init);
}

DS4RT_API ds4rt_scheduler_params_1_0 ds4rt_scheduler_default_params(void) {
    RETURN_INIT_1_0(ds4rt_scheduler_params, ds4rt_scheduler_params_init);
}

DS4RT_API ds4rt_spec_params_1_0 ds4rt_spec_default_params(void) {
    RETURN_INIT_1_0(ds4rt_spec_params, ds4rt_spec_params_init);
}

DS4RT_API ds4rt_generate_params_1_0 ds4rt_generate_default_params(void) {
    RETURN_INIT_1_0(ds4rt_generate_params, ds4rt_generate_params_init);
}

DS4RT_API void ds4rt_tokenizer_arrays_default(ds4rt_tokenizer_arrays_1_0 *arrays) {
    if (arrays != NULL) (void)ds4rt_tokenizer_arrays_init((ds4rt_tokenizer_arrays *)(void *)arrays, sizeof *arrays);
}

DS4RT_API void ds4rt_chat_options_default(ds4rt_chat_options_1_0 *options) {
    if (options != NULL) (void)ds4rt_chat_options_init((ds4rt_chat_options *)(void *)options, sizeof *options);
}
