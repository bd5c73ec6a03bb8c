/* "single": one process; every strategy call is local. */
#include <stdlib.h>
#include <string.h>
#include "strategies/strategy.h"

typedef struct { volt_params *ps; volt_optimizer *opt; } single_impl;

static volt_status s_setup_params(volt_strategy *st, volt_params *ps) { ((single_impl *)st->impl)->ps = ps; return VOLT_OK; }
static volt_status s_setup_optimizer(volt_strategy *st, volt_optimizer *o) { ((single_impl *)st->impl)->opt = o; return VOLT_OK; }
static volt_status s_setup_loader(volt_strategy *st, volt_loader *l) { return volt_loader_set_shard(l, 0, 1); }
static void s_begin_backward(volt_strategy *st, bool sync) {}
static volt_status s_reduce(volt_strategy *st) { return VOLT_OK; }
static volt_status s_sqnorm(volt_strategy *st, double *out) {
    *out = volt_params_grad_sqnorm(((single_impl *)st->impl)->ps);
    return VOLT_OK;
}
static volt_status s_after(volt_strategy *st) { return VOLT_OK; }
static volt_status s_mean(volt_strategy *st, double *v, int n) { return VOLT_OK; }
static volt_status s_bcast(volt_strategy *st, void *b, size_t n, int root) { return VOLT_OK; }
static volt_status s_barrier(volt_strategy *st) { return VOLT_OK; }
static void s_mem(volt_strategy *st, volt_memory_report *m) {
    single_impl *im = st->impl;
    memset(m, 0, sizeof *m);
    if (!im->ps) return;
    int64_t n = 0;
    for (int u = 0; u < volt_params_unit_count(im->ps); u++) n += volt_unit_numel(volt_params_unit_at(im->ps, u));
    m->param_bytes = n * 4;
    m->grad_bytes = n * 4;
    m->optim_bytes = im->opt ? (int64_t)volt_optimizer_state_count(im->opt) * n * 4 : 0;
    m->numel = volt_params_numel(im->ps);
    m->padded_numel = n;
    m->held_param_bytes = volt_params_value_bytes(im->ps);   /* 2 bytes a value under bf16-true */
    m->held_grad_bytes = volt_params_grad_bytes(im->ps);
    m->held_optim_bytes = im->opt ? volt_optimizer_state_bytes(im->opt) : 0;
}
static const char *s_err(volt_strategy *st) { return ""; }
static void s_destroy(volt_strategy *st) { free(st->impl); free(st); }

static const volt_strategy_ops single_ops = {
    VOLT_STRATEGY_OPS_VERSION, "single", s_setup_params, s_setup_optimizer, s_setup_loader, s_begin_backward,
    s_reduce, s_sqnorm, s_after, s_mean, s_bcast, s_barrier, s_mem, s_err, s_destroy,
    NULL, NULL, NULL, NULL, NULL, /* configure_params ... zero_grad: the defaults (whole units) */
};

volt_status volt__strategy_single(volt_strategy **out) {
    volt_strategy *st = calloc(1, sizeof *st);
    single_impl *im = calloc(1, sizeof *im);
    if (!st || !im) { free(st); free(im); return VOLT_ERR_NOMEM; }
    st->ops = &single_ops;
    st->rank = 0;
    st->world = 1;
    st->impl = im;
    *out = st;
    return VOLT_OK;
}

void volt__strategy_destroy(volt_strategy *st) {
    if (st) st->ops->destroy(st);
}
