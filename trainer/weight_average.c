/* Weight averaging, the trainer's half (Lightning's WeightAveraging; the callback is
 * callbacks/weight_averaging.c): the average is an optimizer state (volt_optimizer_enable_average,
 * updated inside the step on the device); the trainer enables it on the optimizer it creates,
 * swaps it with the values for a checkpoint save (the file's weights are the average, its
 * "optimizer.weight_average.<param>" the current weights, as Lightning's state_dict /
 * current_model_state), and swaps back after a resume's load.
 *
 * Strategies: single and ddp hold whole units on every rank (the same values, the same
 * average): every rank swaps locally. The sharded ones (deepspeed_stage_1/2, fsdp) keep the
 * average like any optimizer state, for this rank's slice only: a swap or copy exchanges the
 * owned slices, then the strategy's after-step gather makes the parameters whole again (ZeRO:
 * all-gathered; FSDP: the rest given back, gathered on use), so every such call is collective
 * (validation hooks, checkpoint saves and loads, train end: every rank at the same point).
 * The one local exception is the swap back after a failure (volt_trainer_swap_back_average). */
#include <stdio.h>
#include "trainer/trainer_internal.h"

volt_status volt_trainer_request_weight_averaging(volt_trainer *t, volt_optim_average mode, float decay) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (mode != VOLT_OPTIM_AVERAGE_EMA && mode != VOLT_OPTIM_AVERAGE_SWA)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "weight averaging: unknown mode %d", (int)mode);
    if (mode == VOLT_OPTIM_AVERAGE_EMA && !(decay >= 0.f && decay < 1.f))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "weight averaging: decay %g is not in [0, 1)", (double)decay);
    /* a module's configure_callbacks adds its WeightAveraging at every call, replacing the
     * trainer's or its own earlier one (module_callbacks.c) */
    const bool same = t->avg_mode == mode && (mode == VOLT_OPTIM_AVERAGE_SWA || t->avg_decay == decay);
    if (t->avg_mode && !t->configuring_cbs)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "weight averaging: asked for twice (one WeightAveraging callback per "
                          "trainer: the model has one average)");
    if (t->opt && !same)
        return volt__terr(t, VOLT_ERR_STATE, "weight averaging: the optimizer exists already (add the callback before fit%s)",
                          t->configuring_cbs ? "; a module's configure_callbacks cannot change the average a fit of this "
                          "trainer made" : "");
    t->avg_mode = mode;
    t->avg_decay = decay;
    return VOLT_OK;
}

volt_status volt__avg_setup(volt_trainer *t) {
    t->avg_swapped = false;
    if (!t->avg_mode || !t->opt) return VOLT_OK;
    volt_status st = volt_optimizer_enable_average(t->opt, t->avg_mode, t->avg_decay);
    if (st < 0) return volt__terr(t, st, "%s", volt_optimizer_errmsg(t->opt));
    return VOLT_OK;
}

/* A sharded strategy over several ranks: the owned slices changed, the parameters become whole
 * again (collective). */
static bool sharded(const volt_trainer *t) {
    return t->world > 1 && volt__strategy_has(t->strategy, VOLT_STRAT_SHARDS_OPTIM | VOLT_STRAT_SHARDS_PARAMS);
}
static volt_status resync(volt_trainer *t) {
    volt_strategy *sg = t->strategy;
    if (!sharded(t) || !sg->ops->after_optimizer_step) return VOLT_OK;
    volt_status st = sg->ops->after_optimizer_step(sg);
    return st < 0 ? volt__terr(t, st, "weight averaging: strategy '%s': parameter gather: %s", volt__strategy_name(sg),
                               volt__strategy_errmsg(sg)) : VOLT_OK;
}

static volt_status avg_op(volt_trainer *t, bool swap) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!t->opt || !volt_optimizer_average_mode(t->opt))
        return volt__terr(t, VOLT_ERR_STATE, "weight averaging: no average (the fit's optimizer has none)");
    VOLT_TRY(volt__loop_wait_params(t, "weight averaging"));   /* no gather may land on the values after the swap */
    volt_status st = swap ? volt_optimizer_average_swap(t->opt) : volt_optimizer_average_copy_to_params(t->opt);
    if (st < 0) return volt__terr(t, st, "%s", volt_optimizer_errmsg(t->opt));
    if (swap) t->avg_swapped = !t->avg_swapped;
    return resync(t);
}
volt_status volt_trainer_swap_average(volt_trainer *t) { return avg_op(t, true); }
volt_status volt_trainer_copy_average(volt_trainer *t) { return avg_op(t, false); }
bool volt_trainer_average_swapped(const volt_trainer *t) { return t && t->avg_swapped; }

/* Local: the optimizer's swap covers this rank's slice of each unit (ddp and one process: the
 * whole unit; ZeRO and fsdp: the owned slice, the parts outside it left as the swap-in's gather
 * wrote them, the peers' averages); the strategy then marks those parts to be gathered from the
 * owners on next use (volt__strategy_regather_params), which hold the current weights once
 * every rank has swapped back. The hold of an uneven validation that failed is dropped first
 * (local, as the next call would), so the parts are given back rather than kept held. A gather
 * that fails to land (a peer gone) is reported after the swap: the owned slice is never a
 * gather's target. */
volt_status volt_trainer_swap_back_average(volt_trainer *t) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!t->avg_swapped) return VOLT_OK;
    if (!t->opt || !volt_optimizer_average_mode(t->opt))
        return volt__terr(t, VOLT_ERR_STATE, "weight averaging: no average (the fit's optimizer has none)");
    volt_strategy *sg = t->strategy;
    if (sg) (void)volt__strategy_hold_params(sg, false);
    const volt_status ws = volt__loop_wait_params(t, "weight averaging: swap back");
    volt_status st = volt_optimizer_average_swap(t->opt);
    if (st < 0) return volt__terr(t, st, "%s", volt_optimizer_errmsg(t->opt));
    t->avg_swapped = false;
    if (sg && t->world > 1 && (st = volt__strategy_regather_params(sg)) < 0)
        return volt__terr(t, st, "weight averaging: swap back: strategy '%s': %s", volt__strategy_name(sg),
                          volt__strategy_errmsg(sg));
    return ws;
}

volt_status volt__avg_save_enter(volt_trainer *t, bool *swapped) {
    *swapped = false;
    if (!t->opt || !volt_optimizer_average_mode(t->opt) || t->avg_swapped) return VOLT_OK;
    VOLT_TRY(volt_trainer_swap_average(t));
    *swapped = true;
    return VOLT_OK;
}

void volt__avg_save_leave(volt_trainer *t, bool swapped) {
    if (swapped) (void)volt_trainer_swap_average(t);   /* D2D copies on memory the save did not free */
}

/* After a full load into a fit's optimizer: the values hold the file's weights (the average)
 * and the state its current weights: swap. A file without the average (saved without
 * averaging): both start from its weights, with a warning (Lightning's on_load_checkpoint). */
volt_status volt__avg_after_load(volt_trainer *t, bool present, const char *path) {
    t->avg_swapped = false;
    if (!t->opt || !volt_optimizer_average_mode(t->opt)) return VOLT_OK;
    if (present) {
        volt_status st = volt_optimizer_average_swap(t->opt);
        return st < 0 ? volt__terr(t, st, "checkpoint '%s': %s", path, volt_optimizer_errmsg(t->opt)) : resync(t);
    }
    if (t->rank == 0)
        fprintf(stderr, "volt: checkpoint '%s' was not saved with weight averaging: the current and the average model both "
                "start from its weights\n", path);
    volt_status st = volt_optimizer_average_reset(t->opt);
    return st < 0 ? volt__terr(t, st, "checkpoint '%s': %s", path, volt_optimizer_errmsg(t->opt)) : VOLT_OK;
}
