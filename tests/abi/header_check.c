/* header_check.c - the public header alone compiles, links and runs in a strict C99 (and, via
 * header_check.cpp, C++11) translation unit with every warning an error; the header-inline
 * initialisers run, and the header and the library agree on the ABI version. */
#include "ds4rt.h"

int main(void) {
    ds4rt_model_params mp = ds4rt_model_default_params();
    ds4rt_generate_params gp = ds4rt_generate_default_params();
    ds4rt_chat_options co;
    ds4rt_chat_options_default(&co);
    if (mp.size != sizeof mp || gp.size != sizeof gp || co.size != sizeof co) return 2;
    return ds4rt_api_version() == DS4RT_API_VERSION ? 0 : 1;
}
