/* ddp: every rank holds the full params, grads and optimizer states. When a backward ends an
 * accumulation cycle, each unit's grad buffer (one bucket) is all-reduced (average) as soon
 * as backward is done with the unit, overlapping the rest of backward; micro-steps before
 * the boundary accumulate locally without communication (no_sync). */
#include "strategies/parallel/parallel.h"

volt_status volt__ddp_grads_ready(void *ctx, volt_unit *u) {
    dist *d = dist_of(ctx);
    const int i = volt_unit_index(u);
    volt__dist_event(d, VOLT_EV_GRADS_READY, i);
    if (!d->sync) return VOLT_OK;
    volt__dist_progress(d);
    return volt__dist_launch_grad(d, i);
}

volt_status volt__ddp_reduce_grads(volt_strategy *st) {
    dist *d = dist_of(st);
    volt__dist_event(d, VOLT_EV_BACKWARD_END, -1);
    /* units the tape never reported (no backward ran this cycle) go now, in unit order,
     * which is the same on every rank */
    for (int i = 0; i < d->n_units; i++) {
        volt_status s = volt__dist_launch_grad(d, i);
        if (s < 0) { volt__dist_wait_grads(d); return s; }
    }
    return volt__dist_wait_grads(d);
}
