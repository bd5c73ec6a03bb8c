/* FSDP (ZeRO-3): params sharded like ZeRO's slices. After the optimizer step each rank has
 * updated only its slice: the pages of every unit outside the slice are given back to the OS
 * and the unit is marked stale (volt__unit_set_stale). The tape fires unit_use before any op
 * reads a stale unit, in forward and in backward; unit_use all-gathers the unit into the
 * same addresses (saved tensors of the tape stay valid) and prefetches the next one: in
 * forward the unit that followed it last time, in backward the one that preceded it.
 *
 * FULL_SHARD ("fsdp"): when forward moves on to another unit, the previous one is given back
 * (stale again; the op reading both is never cut short: busy units are kept), and backward
 * gathers it again when it gets there; when backward is done with a unit (unit_grads_ready)
 * it is given back once more. SHARD_GRAD_OP ("fsdp_shard_grad_op"): units stay gathered from
 * their first use in forward to the end of backward. Grads as ZeRO-2 (zero.c): reduce-
 * scattered as units become ready, non-owned pages given back. Clipping sums the squared
 * norms over the shards. Views of a parameter must be consumed by the same unit's ops (a
 * view keeps no unit, so reading it after the unit was given back would read zeros).
 * An evaluation whose ranks run other numbers of forwards holds every unit gathered for its
 * length and gives them back at its end (volt__fsdp_hold, below). Set-up leaves the units as
 * after a step: each one's part outside the slice is given back as soon as its broadcast from
 * rank 0 has completed (volt__dist_setup_units), so the first forward gathers every unit. */
#include "strategies/parallel/parallel.h"

volt_status volt__fsdp_unit_use(void *ctx, volt_unit *u) {
    dist *d = dist_of(ctx);
    const int i = volt_unit_index(u);
    dist_unit *du = &d->units[i];
    volt__dist_event(d, VOLT_EV_UNIT_USE, i);
    /* held (volt__strategy_hold_params: every unit gathered for an evaluation whose ranks run
     * other numbers of forwards): no release, no prefetch, and nothing learned of the forward
     * order, which the ranks that ran no such forward would not know */
    if (d->st->hold_values) return VOLT_OK;
    volt_status s;
    if (d->in_backward) {   /* a stale unit backward needs: gather it, prefetch the one before */
        if ((s = volt__dist_launch_gather(d, i)) < 0 || (s = volt__dist_finish_gather(d, i)) < 0) return s;
        const int pv = du->prev_use;
        if (pv >= 0 && pv != i && volt__unit_stale(d->units[pv].u)) return volt__dist_launch_gather(d, pv);
        return VOLT_OK;
    }
    const int prev = d->last_used;
    if (prev >= 0 && prev != i) {
        if (d->units[prev].next_use < 0) d->units[prev].next_use = i;
        if (du->prev_use < 0) du->prev_use = prev;
    } else if (prev < 0 && d->first_use < 0) d->first_use = i;
    d->last_used = i;
    if (volt__unit_stale(u) && (s = volt__dist_launch_gather(d, i)) < 0) return s;
    if ((s = volt__dist_finish_gather(d, i)) < 0) return s;
    /* FULL_SHARD: forward has moved on from the previous unit */
    if (dist_has(d, VOLT_STRAT_FREES_AFTER_FORWARD) && dist_params_sharded(d) && prev >= 0 && prev != i) volt__dist_release_values(d, prev);
    const int nx = du->next_use;
    if (nx >= 0 && nx != i && volt__unit_stale(d->units[nx].u)) return volt__dist_launch_gather(d, nx);
    return VOLT_OK;
}

volt_status volt__fsdp_grads_ready(void *ctx, volt_unit *u) {
    dist *d = dist_of(ctx);
    const int i = volt_unit_index(u);
    if (++d->n_ready >= d->n_units) d->in_backward = false;
    /* FULL_SHARD: backward is done with the unit's values */
    if (dist_has(d, VOLT_STRAT_FREES_AFTER_FORWARD) && dist_params_sharded(d)) volt__dist_release_values(d, i);
    return volt__zero_grads_ready(ctx, u);
}

volt_status volt__fsdp_after_step(volt_strategy *st) {
    dist *d = dist_of(st);
    if (!dist_params_sharded(d)) return VOLT_OK;
    volt_status s = volt__dist_wait_gathers(d);   /* nothing may write into a unit being given back */
    if (s < 0) return s;
    for (int i = 0; i < d->n_units; i++) {
        volt__unit_set_stale(d->units[i].u, false);   /* the owned slice is current: give back the rest */
        volt__dist_release_values(d, i);
    }
    if (d->first_use >= 0) return volt__dist_launch_gather(d, d->first_use);
    return VOLT_OK;
}

volt_status volt__fsdp_materialize(volt_strategy *st) {
    dist *d = dist_of(st);
    volt_status s = VOLT_OK;
    for (int i = 0; i < d->n_units && s >= 0; i++)
        if (volt__unit_stale(d->units[i].u)) s = volt__dist_launch_gather(d, i);
    volt_status s2 = volt__dist_wait_gathers(d);
    return s < 0 ? s : s2;
}

/* The hold of an evaluation whose ranks run other numbers of forwards (volt__strategy_hold_params).
 * hold: note the units it gathers (stale, or a prefetch in flight) and gather every one. Dropped
 * (local: every rank drops at the same point of the same loop with the same units gathered, so
 * the units left stale, and the gathers of the next forwards, are alike on every rank):
 * FULL_SHARD gives back every gathered unit, as forward does when it moves on (an even loop ends
 * with at most the last unit it used); SHARD_GRAD_OP gives back what the hold gathered and keeps
 * the units gathered before it (by a training forward since the last step, or materialize_params
 * at the end of fit), which it keeps until the next step by design. Nothing is scattered back:
 * the gathered values are the owners' slices, unchanged by evaluation. On cuda the give-back is
 * volt__unit_release's (VMM granules unmapped), as after a unit's use. A store the hold did not
 * see (st->ps cleared or replaced: a new model being set up) is left alone. */
volt_status volt__fsdp_hold(volt_strategy *st, bool hold) {
    dist *d = dist_of(st);
    if (hold) {
        for (int i = 0; i < d->n_units; i++)
            d->units[i].held = volt__unit_stale(d->units[i].u) || d->units[i].gather_req != NULL;
        return volt__fsdp_materialize(st);
    }
    if (!dist_params_sharded(d) || !d->ps || st->ps != d->ps) return VOLT_OK;
    const bool all = dist_has(d, VOLT_STRAT_FREES_AFTER_FORWARD);
    for (int i = 0; i < d->n_units; i++) {
        if (all || d->units[i].held) volt__dist_release_values(d, i);
        d->units[i].held = false;
    }
    return VOLT_OK;
}

/* A checkpoint load wrote the unit whole on this rank (volt__strategy_release_unit): every rank
 * wrote the same file's values, so each owned slice holds the loaded values and the rest is
 * given back as after a unit's use (stale: the next forward, backward, hold or materialize
 * gathers it from the owners, the same bits). Before the load's first step SHARD_GRAD_OP keeps
 * nothing gathered either: its forward gathers what it uses. Local: no collective, so a rank
 * whose load failed part-way (the ranks then agree to drop the model) waits on no other. */
volt_status volt__fsdp_release_unit(volt_strategy *st, int unit) {
    dist *d = dist_of(st);
    if (!dist_params_sharded(d) || !d->ps || st->ps != d->ps || unit < 0 || unit >= d->n_units) return VOLT_OK;
    volt__dist_release_values(d, unit);
    return VOLT_OK;
}

