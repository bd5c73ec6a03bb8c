/* ZeRO stage 1 and 2 (DeepSpeed), and the parts FSDP shares with them.
 *
 * Every unit's flat buffer is padded to a multiple of world * 16 floats (configure_params)
 * and split into world equal contiguous slices; rank r owns [r*chunk, (r+1)*chunk). The
 * optimizer only updates, and only keeps states for, the owned slice (volt_optimizer_
 * set_range). At an accumulation boundary the grads are reduce-scattered (average) so each
 * rank holds the averaged grad of its slice in place; after the step the params are
 * all-gathered from the owners, overlapping the next forward (volt__zero_after_step). Stage 1
 * reduce-scatters everything once backward returns; stage 2 (and FSDP) start each unit's
 * reduce-scatter as soon as backward is done with it.
 *
 * Memory: with stage 2 (and FSDP) a unit's grad buffer is written whole by backward, and
 * once its reduce-scatter has completed the pages outside the owned slice are given back to
 * the OS (volt__unit_release; polled while backward goes on, the rest at the boundary); after
 * the optimizer step the whole grad buffer is given back instead of zeroed. Between steps a
 * rank holds no grad memory; during backward, the owned slices plus the units in flight.
 * Micro-steps before an accumulation boundary keep full local grads (like PyTorch's no_sync).
 * The memory report gives the formula and the resident bytes (mincore). */
#include <stdio.h>
#include <stdlib.h>
#include "volt/precision.h"
#include "strategies/parallel/parallel.h"

volt_status volt__zero_configure_params(volt_strategy *st, volt_params *ps) {
    dist_of(st)->ps = NULL;   /* a new store is being declared; setup_params adopts it */
    volt_status s = volt_params_set_unit_padding(ps, st->world);
    if (s < 0) return dist_fail(dist_of(st), s, "configure_params: %s", volt_params_errmsg(ps));
    return VOLT_OK;
}

volt_status volt__zero_setup_optimizer(volt_strategy *st, volt_optimizer *opt) {
    dist *d = dist_of(st);
    for (int i = 0; i < d->n_units; i++) {
        volt_status s = volt_optimizer_set_range(opt, i, d->units[i].lo, d->units[i].hi);
        if (s < 0) return dist_fail(d, s, "setup_optimizer: %s", volt_optimizer_errmsg(opt));
    }
    return VOLT_OK;
}

volt_status volt__zero_grads_ready(void *ctx, volt_unit *u) {
    dist *d = dist_of(ctx);
    const int i = volt_unit_index(u);
    volt__dist_event(d, VOLT_EV_GRADS_READY, i);
    if (!d->sync || !dist_has(d, VOLT_STRAT_OVERLAP_REDUCE)) return VOLT_OK;   /* ZeRO-1: all after backward */
    volt_status s = volt__dist_progress(d);   /* finished reductions give their non-owned grads back */
    return s < 0 ? s : volt__dist_launch_grad(d, i);
}

volt_status volt__zero_reduce_grads(volt_strategy *st) {
    dist *d = dist_of(st);
    volt__dist_event(d, VOLT_EV_BACKWARD_END, -1);
    /* a prefetched gather still running would race with the optimizer on the owned slice */
    volt_status s = volt__dist_wait_gathers(d);
    if (s < 0) return s;
    for (int i = 0; i < d->n_units; i++)   /* stage 1: all of them; else the ones not reported */
        if ((s = volt__dist_launch_grad(d, i)) < 0) { volt__dist_wait_grads(d); return s; }
    return volt__dist_wait_grads(d);
}

/* Σ over this rank's slices (fixed order, double), then summed over ranks. */
volt_status volt__zero_grad_sqnorm(volt_strategy *st, double *out) {
    dist *d = dist_of(st);
    double total = volt_params_grad_sqnorm(d->ps);   /* the grad ranges: this rank's slices */
    volt_status s = volt__comm_all_reduce(d->comm, &total, &total, 1, VOLT_COMM_F64, VOLT_COMM_SUM, "grad norm");
    if (s < 0) return volt__dist_comm_fail(d, s, "gradient norm");
    *out = total;
    return VOLT_OK;
}

/* The updated slices go out to every rank as one all-gather per unit, started here in unit
 * order and not waited for: each unit becomes stale, so the tape fires unit_use before the
 * first op that reads it (the next forward, or a validation step) and that waits for exactly
 * that unit. The first units' gathers are thus the only ones exposed; the later ones travel
 * under the earlier layers' compute (on NCCL: on the comm stream, each start ordered after
 * the optimizer's kernels on the compute stream, each wait ordering the compute stream after
 * the gather). Every other reader waits first: reduce_grads (the next optimizer step writes
 * the owned slices), gather_unit, wait_params/materialize_params (checkpoints, export, the
 * store handed to the user, the end of fit), the strategy's destroy. One process (world 1)
 * has nothing to overlap and keeps the synchronous form (a captured step, compile, sees no
 * hook doing work). */
volt_status volt__zero_after_step(volt_strategy *st) {
    dist *d = dist_of(st);
    volt_status s = VOLT_OK;
    for (int i = 0; i < d->n_units && s >= 0; i++) s = volt__dist_launch_gather(d, i);
    if (s < 0 || st->world <= 1) {   /* a failed start: the ones started complete before the error goes up */
        volt_status s2 = volt__dist_wait_gathers(d);
        return s < 0 ? s : s2;
    }
    for (int i = 0; i < d->n_units; i++) volt__unit_set_stale(d->units[i].u, true);
    volt__dist_event(d, VOLT_EV_STEP_DONE, -1);
    return VOLT_OK;
}

/* First read of a unit in a step (or any read while stale): its gather, if one is in flight,
 * completes here; the others are poked so they keep moving while this layer computes. */
volt_status volt__zero_unit_use(void *ctx, volt_unit *u) {
    dist *d = dist_of(ctx);
    const int i = volt_unit_index(u);
    dist_unit *du = &d->units[i];
    if (!du->gather_req && !volt__unit_stale(u)) return VOLT_OK;
    volt__dist_event(d, VOLT_EV_UNIT_USE, i);
    volt_status s;
    if (!du->gather_req) {   /* stale with nothing in flight: regather_params's (every rank marked the same units), */
        if (!du->regather)   /* else only after a failed wait, where a lone gather would hang */
            return dist_fail(d, VOLT_ERR_STATE, "%s: parameters not gathered after the last step (an earlier error?)", du->label);
        if ((s = volt__dist_launch_gather(d, i)) < 0) return s;
    }
    s = volt__dist_finish_gather(d, i);
    return s < 0 ? s : volt__dist_poke_gathers(d);
}

/* Every value whole (collective): the units regather_params marked are gathered, then every
 * gather in flight waited for (the ones after a step). */
volt_status volt__zero_materialize(volt_strategy *st) {
    dist *d = dist_of(st);
    volt_status s = VOLT_OK;
    for (int i = 0; i < d->n_units && s >= 0; i++)
        if (d->units[i].regather) s = volt__dist_launch_gather(d, i);
    volt_status s2 = volt__dist_wait_gathers(d);
    return s < 0 ? s : s2;
}

void volt__zero_owned_range(volt_strategy *st, int unit, int64_t *lo, int64_t *hi) {
    dist *d = dist_of(st);
    if (unit < 0 || unit >= d->n_units) { *lo = *hi = 0; return; }
    *lo = d->units[unit].lo;
    *hi = d->units[unit].hi;
}

volt_status volt__zero_gather_unit(volt_strategy *st, int unit, float *dst) {
    dist *d = dist_of(st);
    if (unit < 0 || unit >= d->n_units) return dist_fail(d, VOLT_ERR_INVALID_ARG, "gather_unit: bad unit %d", unit);
    dist_unit *du = &d->units[unit];
    const size_t es = dist_value_size(d);
    const bool f32 = volt_params_dtype(d->ps) == VOLT_F32;
    const char *own = (const char *)volt_unit_values(du->u) + (size_t)du->lo * es;   /* device memory */
    /* a gather after the step or a prefetch may be using the unit (and its host buffer) */
    volt_status s0 = volt__dist_finish_gather(d, unit);
    if (s0 < 0) return s0;
    if (dist_staged(d)) {   /* the owned slice into the unit's host buffer, gathered there in place */
        volt_status s;
        char *h = du->h_vals;
        volt__dev_d2h(d->comm->dev, h + (size_t)du->lo * es, own, (size_t)du->chunk * es);
        s = volt__comm_all_gather(d->comm, h + (size_t)du->lo * es, h, (size_t)du->chunk * es, VOLT_COMM_BYTE, du->label);
        if (s < 0) return volt__dist_comm_fail(d, s, "unit gather");
        volt_convert(dst, VOLT_F32, h, volt_params_dtype(d->ps), du->numel);   /* exact; a copy for f32 */
        return VOLT_OK;
    }
    void *into = f32 ? (void *)dst : malloc(es * (size_t)du->numel);   /* 16-bit: gathered as stored, then widened */
    if (!into) return dist_fail(d, VOLT_ERR_NOMEM, "gather_unit: out of memory");
    volt_status s = volt__comm_all_gather(d->comm, own, into, (size_t)du->chunk * es, VOLT_COMM_BYTE, du->label);
    if (!f32) {
        if (s >= 0) volt_convert(dst, VOLT_F32, into, volt_params_dtype(d->ps), du->numel);   /* exact */
        free(into);
    }
    return s < 0 ? volt__dist_comm_fail(d, s, "unit gather") : VOLT_OK;
}

void volt__zero_zero_grad(volt_strategy *st) {
    dist *d = dist_of(st);
    if (!dist_grads_sharded(d)) { volt_params_clear_grad(d->ps); return; }
    for (int i = 0; i < d->n_units; i++) volt__unit_release(d->units[i].u, VOLT_UNIT_GRADS, 0, d->units[i].numel);
}
