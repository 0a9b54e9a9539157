/* clock.c - the monotonic clock behind stage timers and the scheduler's cost model. */
#include <time.h>

#include "internal.h"

double ds4rt_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
