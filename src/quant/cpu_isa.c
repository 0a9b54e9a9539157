/*
 * cpu_isa.c - chooses the kernel table at run time.
 *
 * Default: the widest path this CPU runs (x86-64: avx512-vnni > avx512 > avx2 > scalar;
 * aarch64: neon-dotprod > neon). The environment variable DS4RT_CPU_ISA (scalar, avx2, avx512,
 * avx512-vnni, neon, neon-dotprod, auto) read at first use, or ds4rt_cpu_isa_set(), forces one.
 * A path decides how Q8_0 weights are laid out when a model binds them (repack.h); every path
 * multiplies every layout, so forcing another path later stays correct. A forced path the
 * CPU cannot run is never used silently: the environment case falls back to the default and
 * build_info() says why; ds4rt_cpu_isa_set() returns DS4RT_ERR_UNSUPPORTED.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds4rt_testing.h"
#include "internal.h"
#include "kernels.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif
#if defined(__GLIBC__)
#include <gnu/libc-version.h>
#endif

#if defined(__aarch64__) && defined(__linux__)
#  include <sys/auxv.h>
#  ifndef HWCAP_ASIMDDP
#    define HWCAP_ASIMDDP (1 << 20)
#  endif
#endif

static _Atomic(const ds4rt_cpu_kernels *) active_kernels;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static char env_note[192];

typedef struct {
    const char *name;
    const ds4rt_cpu_kernels *table;
} isa_entry;

static const isa_entry compiled[] = {
    {"scalar", &ds4rt_kernels_scalar},
#if defined(__x86_64__) || defined(_M_X64)
    {"avx2", &ds4rt_kernels_avx2},
    {"avx512", &ds4rt_kernels_avx512},
    {"avx512-vnni", &ds4rt_kernels_avx512_vnni},
    {"avx512-vbmi", &ds4rt_kernels_avx512_vbmi},
#endif
#if defined(__aarch64__)
    {"neon", &ds4rt_kernels_neon},
    {"neon-dotprod", &ds4rt_kernels_neon_dotprod},
#endif
};

#if defined(__x86_64__) || defined(_M_X64)
/* F16C and BMI1 from CPUID itself (leaf 1 ECX bit 29, leaf 7 EBX bit 3): clang before 15 has
 * no __builtin_cpu_supports names for them, and the fuzz build uses clang (docs/ROBUSTNESS.md). */
static int cpu_has_f16c_bmi1(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29))) return 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 3));
}
#endif

/* NULL if this CPU runs `name`, else the reason. */
static const char *cpu_lacks(const char *name) {
    if (strcmp(name, "scalar") == 0) return NULL;
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c_bmi1() &&
                     __builtin_cpu_supports("bmi2");
    if (strcmp(name, "avx2") == 0) return avx2 ? NULL : "this CPU lacks AVX2/FMA/F16C/BMI1/BMI2";
    const int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512vl");
    if (strcmp(name, "avx512") == 0) return avx512 ? NULL : "this CPU lacks AVX-512 F/BW/VL";
    if (strcmp(name, "avx512-vnni") == 0)
        return avx512 && __builtin_cpu_supports("avx512vnni") ? NULL : "this CPU lacks AVX-512 F/BW/VL/VNNI";
    if (strcmp(name, "avx512-vbmi") == 0)
        return avx512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi")
                   ? NULL
                   : "this CPU lacks AVX-512 F/BW/VL/VNNI/VBMI";
#endif
#if defined(__aarch64__)
    if (strcmp(name, "neon") == 0) return NULL;
    if (strcmp(name, "neon-dotprod") == 0) {
#  if defined(__linux__)
        return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ? NULL : "this CPU lacks the dot-product extension";
#  elif defined(__APPLE__)
        return NULL; /* every Apple arm64 CPU has it */
#  else
        return "cannot detect the dot-product extension on this OS";
#  endif
    }
#endif
    return "not compiled for this architecture";
}

const ds4rt_cpu_kernels *ds4rt_cpu_lookup(const char *name, const char **why) {
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(compiled); i++) {
        if (strcmp(compiled[i].name, name) != 0) continue;
        const char *lack = cpu_lacks(name);
        if (why) *why = lack;
        return lack ? NULL : compiled[i].table;
    }
    static const char *const known[] = {"avx2", "avx512", "avx512-vnni", "avx512-vbmi", "neon", "neon-dotprod"};
    if (why) *why = "unknown CPU path name (scalar, avx2, avx512, avx512-vnni, avx512-vbmi, neon, neon-dotprod, auto)";
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(known); i++)
        if (strcmp(known[i], name) == 0 && why) *why = "not compiled for this architecture";
    return NULL;
}

static const ds4rt_cpu_kernels *best(void) {
    const ds4rt_cpu_kernels *pick = &ds4rt_kernels_scalar;
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(compiled); i++)
        if (cpu_lacks(compiled[i].name) == NULL) pick = compiled[i].table; /* listed narrow to wide */
    return pick;
}

static void init_active(void) {
    const ds4rt_cpu_kernels *pick = NULL;
    const char *env = getenv("DS4RT_CPU_ISA");
    if (env && *env && strcmp(env, "auto") != 0) {
        const char *why = NULL;
        pick = ds4rt_cpu_lookup(env, &why);
        if (pick == NULL) snprintf(env_note, sizeof env_note, "DS4RT_CPU_ISA=%.40s ignored: %s", env, why);
    }
    atomic_store(&active_kernels, pick ? pick : best());
}

const ds4rt_cpu_kernels *ds4rt_cpu_active(void) {
    const ds4rt_cpu_kernels *k = atomic_load_explicit(&active_kernels, memory_order_acquire);
    if (k) return k;
    pthread_once(&init_once, init_active);
    return atomic_load(&active_kernels);
}

/* ---- expf of an array: the 8-wide form or the C library's, and why --------------------------- */

static bool expf_vector;
static char expf_note[96];
static pthread_once_t expf_once = PTHREAD_ONCE_INIT;

/* The 8-wide form reproduces glibc's expf as glibc 2.28+ builds it for CPUs with AVX2 and FMA
 * (the variant its resolver picks on them); on any other C library or CPU the library's own
 * expf is called, so the bits are the library's either way and only the speed differs. */
static void expf_choose(void) {
#if defined(__x86_64__) && defined(__GLIBC__)
    const char *v = gnu_get_libc_version();
    char *end;
    long major = strtol(v, &end, 10), minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
    __builtin_cpu_init();
    const bool new_glibc = major > 2 || (major == 2 && minor >= 28);
    const bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    expf_vector = new_glibc && fma;
    if (expf_vector)
        snprintf(expf_note, sizeof expf_note, "expf 8-wide (glibc %s, AVX2+FMA)", v);
    else
        snprintf(expf_note, sizeof expf_note, "expf per element: %s",
                 !new_glibc ? "glibc older than 2.28" : "no AVX2+FMA");
#else
    snprintf(expf_note, sizeof expf_note, "expf per element: not x86-64 with glibc");
#endif
}

bool ds4rt_cpu_expf_vector(void) {
    pthread_once(&expf_once, expf_choose);
    return expf_vector;
}

void ds4rt_cpu_describe(char *buf, size_t len) {
    const ds4rt_cpu_kernels *k = ds4rt_cpu_active();
    int used = snprintf(buf, len, "cpu=%s (compiled:", k->name);
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(compiled) && used >= 0 && (size_t)used < len; i++)
        used += snprintf(buf + used, len - (size_t)used, " %s", compiled[i].name);
    if (used >= 0 && (size_t)used < len)
        used += snprintf(buf + used, len - (size_t)used, ")%s%s", env_note[0] ? "; " : "", env_note);
    (void)ds4rt_cpu_expf_vector();
    if (used >= 0 && (size_t)used < len) snprintf(buf + used, len - (size_t)used, "; %s", expf_note);
}

DS4RT_API const char *ds4rt_cpu_isa(void) { return ds4rt_cpu_active()->name; }

DS4RT_API int ds4rt_cpu_isa_supported(const char *name) {
    if (name == NULL) return 0;
    if (strcmp(name, "auto") == 0) return 1;
    return ds4rt_cpu_lookup(name, NULL) != NULL;
}

DS4RT_API ds4rt_status ds4rt_cpu_isa_set(const char *name) {
    if (name == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "cpu_isa_set: name is NULL");
    (void)ds4rt_cpu_active(); /* consume the environment once, so it cannot override this later */
    if (strcmp(name, "auto") == 0) {
        atomic_store(&active_kernels, best());
        return DS4RT_OK;
    }
    const char *why = NULL;
    const ds4rt_cpu_kernels *k = ds4rt_cpu_lookup(name, &why);
    if (k == NULL) {
        const int unknown = strncmp(why, "unknown", 7) == 0;
        return ds4rt_fail(unknown ? DS4RT_ERR_INVALID_ARGUMENT : DS4RT_ERR_UNSUPPORTED,
                          "cpu_isa_set(\"%.40s\"): %s", name, why);
    }
    atomic_store(&active_kernels, k);
    return DS4RT_OK;
}
