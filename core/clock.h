/* core/clock.h — the library's one monotonic clock (timeouts, the step profile, traces). */
#ifndef VOLT_CLOCK_H
#define VOLT_CLOCK_H
double volt__now(void);   /* CLOCK_MONOTONIC, seconds */
#endif
