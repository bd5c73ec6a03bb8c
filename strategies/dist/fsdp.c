/* FSDP (ZeRO-3): params sharded like ZeRO's slices; after the optimizer step each rank only
 * updates its slice and the rest of every unit becomes stale. unit_use(U) (the tape: a
 * forward op is about to read U for the first time this step) all-gathers U, then starts the
 * gather of the unit that followed U last time (prefetch), and after_optimizer_step starts
 * the gather of the first unit of the next forward. Grads are reduce-scattered as units
 * become ready (zero.c), the optimizer runs on the owned slice, clipping sums the squared
 * norms over the shards.
 *
 * On the flat CPU store a gathered unit is never freed: the store keeps every unit's full
 * buffer, so FULL_SHARD cannot drop a unit after its forward and regather it for backward;
 * "fsdp" and "fsdp_shard_grad_op" therefore communicate the same (one all-gather per stale
 * unit per step, one reduce-scatter per unit) and differ in the memory figures they report
 * (docs/STRATEGIES.md). */
#include "strategies/dist/dist.h"

volt_status fsdp_unit_use(void *ctx, volt_unit *u) {
    dist *d = dist_of(ctx);
    const int i = volt_unit_index(u);
    dist_event(d, VOLT_EV_UNIT_USE, i);
    if (d->last_used >= 0 && d->last_used != i) d->units[d->last_used].next_use = i;
    else if (d->last_used < 0 && d->first_use < 0) d->first_use = i;
    d->last_used = i;
    dist_unit *du = &d->units[i];
    volt_status s;
    if (du->stale && (s = dist_launch_gather(d, i)) < 0) return s;
    if ((s = dist_finish_gather(d, i)) < 0) return s;
    const int nx = du->next_use;
    if (nx >= 0 && nx != i && d->units[nx].stale) return dist_launch_gather(d, nx);
    return VOLT_OK;
}

volt_status fsdp_after_step(volt_strategy *st) {
    dist *d = dist_of(st);
    if (st->world == 1) return VOLT_OK;
    for (int i = 0; i < d->n_units; i++) d->units[i].stale = true;
    if (d->first_use >= 0) return dist_launch_gather(d, d->first_use);
    return VOLT_OK;
}

volt_status fsdp_materialize(volt_strategy *st) {
    dist *d = dist_of(st);
    volt_status s = VOLT_OK;
    for (int i = 0; i < d->n_units && s >= 0; i++)
        if (d->units[i].stale) s = dist_launch_gather(d, i);
    volt_status s2 = dist_wait_gathers(d);
    return s < 0 ? s : s2;
}
