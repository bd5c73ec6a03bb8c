/* callbacks/throughput_monitor.h — ThroughputMonitor's pure part (the rolling window and what
 * it reports, fabric's Throughput) and a clock hook for tests. Private to callbacks/ and
 * tests/: not installed, not part of the public API. */
#ifndef VOLT_CALLBACKS_THROUGHPUT_MONITOR_H
#define VOLT_CALLBACKS_THROUGHPUT_MONITOR_H

#include "volt/trainer.h"

/* The last `cap` updates of one stage, each the running totals at a batch end: time since the
 * stage started, batches, samples, lengths (items) and this batch's FLOPs on this device. A
 * ring made once (volt__cb_tput_init); updates never allocate. */
typedef struct volt_cb_tput {
    int64_t cap, n, head;            /* n entries, the oldest at head */
    double *time, *flops;
    int64_t *batches, *samples, *lengths;
    int64_t n_nolen, n_noflops;      /* entries in the window without lengths / FLOPs */
    bool has_lengths, has_flops;     /* every update in the window gave them */
} volt_cb_tput;

volt_status volt__cb_tput_init(volt_cb_tput *w, int64_t cap);   /* cap >= 2 */
void volt__cb_tput_free(volt_cb_tput *w);
void volt__cb_tput_reset(volt_cb_tput *w);
/* lengths < 0: none; flops < 0: none (a window with any update without them reports none). */
void volt__cb_tput_update(volt_cb_tput *w, double time, int64_t batches, int64_t samples, int64_t lengths, double flops);
/* Lightning's Throughput.compute: emit(ctx, key, value) for "time", "batches", "samples",
 * "lengths" (the latest totals), and once the window is full "device<sep>batches_per_sec",
 * "device<sep>samples_per_sec", "device<sep>items_per_sec", "device<sep>flops_per_sec",
 * "device<sep>mfu" (available_flops > 0), with world > 1 also "batches_per_sec",
 * "samples_per_sec", "items_per_sec", "flops_per_sec" (the device's times world). Rates need
 * time to have moved across the window. */
typedef void (*volt_cb_tput_emit_fn)(void *ctx, const char *key, double value);
void volt__cb_tput_compute(const volt_cb_tput *w, int world, double available_flops, const char *sep,
                           volt_cb_tput_emit_fn emit, void *ctx);

/* volt_add_throughput_monitor reading now(ctx) instead of CLOCK_MONOTONIC (NULL: that clock),
 * so a test decides how long each batch takes; ctx is borrowed for the trainer's life. */
typedef double (*volt_cb_now_fn)(void *ctx);
volt_status volt__add_throughput_monitor_clock(volt_trainer *t, const volt_throughput_config *cfg, volt_cb_now_fn now,
                                               void *ctx);

#endif
