/*
 * example.c - a minimal host program embedding ds4rt through its C ABI.
 *
 * Build against an installed Python package:
 *   cc example.c -I"$(python -c 'import ds4rt; print(ds4rt.get_include())')" \
 *      -L"$(python -c 'import ds4rt; print(ds4rt.get_library_dir())')" -lds4rt \
 *      -Wl,-rpath,"$(python -c 'import ds4rt; print(ds4rt.get_library_dir())')" -o example
 */
#include <stdio.h>

#include "ds4rt.h"

int main(void) {
    if (ds4rt_api_version() != DS4RT_API_VERSION) {
        fprintf(stderr, "header/library ABI mismatch: %u vs %d\n", ds4rt_api_version(),
                DS4RT_API_VERSION);
        return 1;
    }
    printf("%s\n", ds4rt_build_info());
    return 0;
}
