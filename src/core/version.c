/* version.c - version and build description. */
#include <stdio.h>

#include "internal.h"
#include "quant/kernels.h" /* ds4rt_cpu_describe */

#ifndef DS4RT_VERSION_STRING
#  define DS4RT_VERSION_STRING "0.0.0"
#endif
#ifndef DS4RT_GPU_BACKEND
#  define DS4RT_GPU_BACKEND "none"
#endif

DS4RT_API uint32_t ds4rt_api_version(void) { return DS4RT_API_VERSION; }

DS4RT_API const char *ds4rt_version(void) { return DS4RT_VERSION_STRING; }

DS4RT_API const char *ds4rt_build_info(void) {
    static char info[512];
    char cpu[320];
    ds4rt_cpu_describe(cpu, sizeof cpu);
    snprintf(info, sizeof info, "ds4rt %s; api %d; gpu=%s; %s", DS4RT_VERSION_STRING, DS4RT_API_VERSION,
             DS4RT_GPU_BACKEND, cpu);
    return info;
}
