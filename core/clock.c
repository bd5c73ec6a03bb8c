/* The monotonic clock of core/clock.h. */
#include <time.h>
#include "core/clock.h"

double volt__now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
