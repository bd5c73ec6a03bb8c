/* The strategy ops with their defaults: what a NULL op means, written once. The defaults are
 * the single-process behaviour (grads local, every unit whole, nothing to communicate), so
 * "single" is a registry row with no ops at all. */
#include <stdio.h>
#include <string.h>
#include "strategies/strategy.h"
#if defined(VOLT_HAVE_MPI) || defined(VOLT_HAVE_NCCL)
#include "strategies/parallel/parallel.h"   /* volt__dist_comm */
#endif
#include "core/err.h"

#define sfail(st, s, ...) VOLT__OBJ_ERRF(st, s, __VA_ARGS__)

volt_status volt__strategy_configure_params(volt_strategy *st, volt_params *ps) {
    st->ps = NULL;   /* a new store is being declared; setup_params adopts it */
    return st->ops->configure_params ? st->ops->configure_params(st, ps) : VOLT_OK;
}

volt_status volt__strategy_setup_params(volt_strategy *st, volt_params *ps) {
    st->ps = ps;
    st->opt = NULL;
    return st->ops->setup_params ? st->ops->setup_params(st, ps) : VOLT_OK;
}

volt_status volt__strategy_setup_optimizer(volt_strategy *st, volt_optimizer *opt) {
    st->opt = opt;
    return st->ops->setup_optimizer ? st->ops->setup_optimizer(st, opt) : VOLT_OK;
}

void volt__strategy_forget_optimizer(volt_strategy *st) {
    if (st) st->opt = NULL;
}

volt_status volt__strategy_setup_loader(volt_strategy *st, volt_loader *l) {
    volt_status s = volt_loader_set_shard(l, st->rank, st->world);
    return s < 0 ? sfail(st, s, "%s", volt_loader_errmsg(l)) : VOLT_OK;
}

void volt__strategy_begin_backward(volt_strategy *st, bool sync) {
    if (st->ops->begin_backward) st->ops->begin_backward(st, sync);
}

void volt__strategy_zero_grad(volt_strategy *st) {
    if (st->ops->zero_grad) st->ops->zero_grad(st);
    else volt_params_clear_grad(st->ps);   /* set_to_none: the next backward stores */
}

volt_status volt__strategy_all_reduce_mean(volt_strategy *st, double *v, int n, const char *what) {
    return st->ops->all_reduce_mean && n > 0 ? st->ops->all_reduce_mean(st, v, n, what) : VOLT_OK;
}

volt_status volt__strategy_broadcast(volt_strategy *st, void *buf, size_t n, int root, const char *what) {
    return st->ops->broadcast ? st->ops->broadcast(st, buf, n, root, what) : VOLT_OK;
}

volt_status volt__strategy_barrier(volt_strategy *st, const char *what) {
    return st->ops->barrier ? st->ops->barrier(st, what) : VOLT_OK;
}

volt_status volt__strategy_materialize_params(volt_strategy *st) {
    return st->ops->materialize_params ? st->ops->materialize_params(st) : VOLT_OK;
}

volt_status volt__strategy_hold_params(volt_strategy *st, bool hold) {
    if (hold == st->hold_values) return VOLT_OK;
    const bool op = st->ops->version >= 7u && st->ops->hold_params;   /* a version-6 table ends before the field */
    if (hold) {
        volt_status s = op ? st->ops->hold_params(st, true) : volt__strategy_materialize_params(st);
        if (s < 0) return s;
        st->hold_values = true;
        return VOLT_OK;
    }
    st->hold_values = false;   /* forward gives units back again; then the op gives back the held ones */
    return op ? st->ops->hold_params(st, false) : VOLT_OK;
}

volt_status volt__strategy_release_unit(volt_strategy *st, int unit) {
    /* a version-7 table ends before the field */
    if (!st || st->hold_values || st->ops->version < 8u || !st->ops->release_unit) return VOLT_OK;
    return st->ops->release_unit(st, unit);
}

volt_status volt__strategy_regather_params(volt_strategy *st) {
    /* a version-8 table ends before the field */
    if (!st || st->hold_values || st->ops->version < 9u || !st->ops->regather_params) return VOLT_OK;
    return st->ops->regather_params(st);
}

volt_status volt__strategy_wait_params(volt_strategy *st) {
    /* a version-4 table ends before the field */
    return st && st->ops->version >= 5u && st->ops->wait_params ? st->ops->wait_params(st) : VOLT_OK;
}

volt_status volt__strategy_check_capture(volt_strategy *st) {
    if (st->ops->version >= 6u && st->ops->check_capture) return st->ops->check_capture(st);
    if (st->world <= 1) return VOLT_OK;
    return sfail(st, VOLT_ERR_UNSUPPORTED, "strategy '%s' cannot run its collectives inside a captured step", st->row->name);
}

volt_status volt__strategy_device_sum(volt_strategy *st, void *buf, size_t n, bool f64, const char *what) {
    if (st->world <= 1 || !n) return VOLT_OK;
    if (st->ops->version >= 6u && st->ops->device_sum) return st->ops->device_sum(st, buf, n, f64, what);
    return sfail(st, VOLT_ERR_UNSUPPORTED, "strategy '%s': %s: no sum over ranks on the device", st->row->name, what);
}

volt_status volt__strategy_drain(volt_strategy *st, const char *what) {
    return st->ops->version >= 6u && st->ops->drain ? st->ops->drain(st, what) : VOLT_OK;
}

struct volt_comm *volt__strategy_comm(volt_strategy *st) {
#if defined(VOLT_HAVE_MPI) || defined(VOLT_HAVE_NCCL)
    return st ? volt__dist_comm(st) : NULL;
#else
    (void)st;
    return NULL;
#endif
}

void volt__strategy_owned_range(volt_strategy *st, int unit, int64_t *lo, int64_t *hi) {
    if (st->ops->owned_range) { st->ops->owned_range(st, unit, lo, hi); return; }
    *lo = 0;
    *hi = st->ps && unit >= 0 && unit < volt_params_unit_count(st->ps) ? volt_unit_numel(volt_params_unit_at(st->ps, unit)) : 0;
}

volt_status volt__strategy_gather_unit(volt_strategy *st, int unit, float *dst) {
    if (st->ops->gather_unit) return st->ops->gather_unit(st, unit, dst);
    return sfail(st, VOLT_ERR_UNSUPPORTED, "gather_unit: strategy '%s' does not shard parameters", st->row->name);
}

/* Full replicas: every value, grad and optimizer state of the padded store on this rank. */
void volt__strategy_memory_report(volt_strategy *st, volt_memory_report *m) {
    if (st->ops->memory_report) { st->ops->memory_report(st, m); return; }
    memset(m, 0, sizeof *m);
    if (!st->ps) return;
    int64_t n = 0;
    for (int u = 0; u < volt_params_unit_count(st->ps); u++) n += volt_unit_numel(volt_params_unit_at(st->ps, u));
    m->param_bytes = n * 4;
    m->grad_bytes = n * 4;
    m->optim_bytes = st->opt ? (int64_t)volt_optimizer_state_count(st->opt) * n * 4 : 0;
    m->numel = volt_params_numel(st->ps);
    m->padded_numel = n;
    m->held_param_bytes = volt_params_value_bytes(st->ps);   /* 2 bytes a value under bf16-true */
    m->held_grad_bytes = volt__params_grad_bytes_held(st->ps);   /* none before a backward or optimizer */
    m->held_optim_bytes = st->opt ? volt_optimizer_state_bytes(st->opt) : 0;
}

const char *volt__strategy_errmsg(const volt_strategy *st) { return st ? st->errmsg : ""; }
