/*
 * example.c - a minimal host program embedding ds4rt through its C ABI.
 *
 * Build against an installed Python package, through its pkg-config file:
 *   export PKG_CONFIG_PATH="$(python -c 'import ds4rt; print(ds4rt.get_pkgconfig_dir())')"
 *   cc example.c $(pkg-config --cflags --libs ds4rt) -o example
 * (tests/meson.build builds it so, as the Meson target `example`.)
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
