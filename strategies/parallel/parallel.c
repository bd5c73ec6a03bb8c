/* Multi-process strategies: creation from a registry row, the parts every row shares (unit
 * table, parameter broadcast, grad/gather bookkeeping and staging, metric sync, memory
 * report, trace). The row-specific hooks live in ddp.c, zero.c and fsdp.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "strategies/parallel/parallel.h"
#include "core/clock.h"

#define TRACE_CAP 16384   /* the first events of a run; later ones are dropped */

volt_status volt__dist_comm_fail(dist *d, volt_status st, const char *what) {
    if (!what) return dist_fail(d, st, "%s", volt__comm_errmsg(d->comm));
    return dist_fail(d, st, "%s: %s", what, volt__comm_errmsg(d->comm));
}

void volt__dist_event(dist *d, volt_dist_ev kind, int unit) {
    if (!d->trace || d->n_trace >= d->cap_trace) return;
    d->trace[d->n_trace++] = (volt_dist_event){ kind, unit, volt__now() };
}

/* A unit's grad reduction has completed: a staged result goes back to the device (the whole
 * buffer for an all-reduce, this rank's slice for a reduce-scatter). */
static void grad_done(dist *d, int u) {
    dist_unit *du = &d->units[u];
    volt_device *dev = d->comm->dev;
    const size_t es = dist_red_size(d), n = (size_t)(du->hi - du->lo);
    /* where the reduced slice is now: the host staging buffer or the device bucket */
    void *dst = dist_red16(d) ? (void *)((char *)du->g16 + (size_t)du->lo * es) : (void *)(volt_unit_grad(du->u) + du->lo);
    if (dist_staged(d)) volt__dev_h2d(dev, dst, (const char *)du->h_grad + (size_t)du->lo * es, n * es);
    if (dist_red16(d))   /* widened back into the f32 grads (exact) */
        dev->be->pm->convert(dev, volt_unit_grad(du->u) + du->lo, VOLT_F32, dst, VOLT_BF16, (int64_t)n);
    volt__dist_event(d, VOLT_EV_GRAD_DONE, u);
    if (dist_grads_sharded(d)) volt__dist_release_grads(d, u);
}

volt_status volt__dist_progress(dist *d) {
    if (!d->comm->ops->test) return VOLT_OK;
    for (int i = 0; i < d->n_launched; i++) {
        const int u = d->launch_order[i];
        dist_unit *du = &d->units[u];
        bool done = false;
        if (!du->grad_req || d->comm->ops->test(d->comm, du->grad_req, &done) < 0 || !done || !dist_grads_sharded(d)) continue;
        volt_status st = d->comm->ops->wait(d->comm, du->grad_req);   /* done: returns at once */
        du->grad_req = NULL;
        if (st < 0) return volt__dist_comm_fail(d, st, "gradient reduction");
        grad_done(d, u);
    }
    return VOLT_OK;
}

void volt__dist_release_grads(dist *d, int u) {
    dist_unit *du = &d->units[u];
    volt__unit_release(du->u, VOLT_UNIT_GRADS, 0, du->lo);
    volt__unit_release(du->u, VOLT_UNIT_GRADS, du->hi, du->numel);
}

void volt__dist_release_values(dist *d, int u) {
    dist_unit *du = &d->units[u];
    if (du->gather_req || volt__unit_stale(du->u)) return;
    if (volt__unit_release(du->u, VOLT_UNIT_VALUES, 0, du->lo) < 0) return;   /* an op reads it right now */
    volt__unit_release(du->u, VOLT_UNIT_VALUES, du->hi, du->numel);
    volt__unit_set_stale(du->u, true);
}

/* ---- unit table and parameter broadcast ------------------------------------------------ */
static void free_units(dist *d) {
    for (int i = 0; i < d->n_units; i++) {
        free(d->units[i].h_grad);
        free(d->units[i].h_vals);
        if (d->units[i].g16) volt__dev_free(d->dev, d->units[i].g16);
    }
    free(d->units);
    free(d->launch_order);
}

volt_status volt__dist_setup_units(dist *d, volt_params *ps) {
    for (int i = 0; i < d->n_units; i++)
        if (d->units[i].grad_req || d->units[i].gather_req)
            return dist_fail(d, VOLT_ERR_STATE, "setup_params: collectives still in flight");
    free_units(d);
    d->units = NULL;
    d->launch_order = NULL;
    d->n_units = d->n_launched = 0;
    d->ps = ps;
    d->first_use = d->last_used = -1;
    const int n = volt_params_unit_count(ps), w = d->st->world, r = d->st->rank;
    d->units = calloc((size_t)(n ? n : 1), sizeof *d->units);
    d->launch_order = calloc((size_t)(n ? n : 1), sizeof *d->launch_order);
    if (!d->units || !d->launch_order) return dist_fail(d, VOLT_ERR_NOMEM, "setup_params: out of memory");
    d->n_units = n;
    for (int i = 0; i < n; i++) {
        dist_unit *du = &d->units[i];
        du->u = volt_params_unit_at(ps, i);
        du->numel = volt_unit_numel(du->u);
        du->next_use = du->prev_use = -1;
        volt__unit_set_stale(du->u, false);
        snprintf(du->label, sizeof du->label, "unit '%s'", volt_unit_name(du->u));
        if (dist_sharded(d)) {
            if (du->numel % w)
                return dist_fail(d, VOLT_ERR_STATE, "setup_params: unit '%s' has %lld floats, not a multiple of the "
                                 "world size %d (configure_params must run before finalize)",
                                 volt_unit_name(du->u), (long long)du->numel, w);
            du->chunk = du->numel / w;
            du->lo = (int64_t)r * du->chunk;
            du->hi = du->lo + du->chunk;
            volt__unit_set_grad_range(du->u, du->lo, du->hi);   /* after the reduce-scatter, only this slice */
        } else {
            du->chunk = du->numel;
            du->lo = 0;
            du->hi = du->numel;
        }
        if (dist_red16(d) && !(du->g16 = volt__dev_alloc(d->comm->dev, 2 * (size_t)du->numel)))
            return dist_fail(d, VOLT_ERR_NOMEM, "setup_params: out of device memory (bf16 reduction bucket of %s)", du->label);
        if (dist_staged(d)) {   /* preallocated here, never per collective */
            du->h_grad = malloc(dist_red_size(d) * (size_t)du->numel);
            du->h_vals = malloc(dist_value_size(d) * (size_t)du->numel);
            if (!du->h_grad || !du->h_vals) return dist_fail(d, VOLT_ERR_NOMEM, "setup_params: out of memory (staging)");
        }
    }
    /* rank 0's values everywhere (a module's init_weights may differ per rank); all units
     * start before the first wait. Sharded parameters (fsdp over several ranks): each unit's
     * part outside this rank's slice is given back as soon as its broadcast has completed
     * (stale: its first use, materialize_params or a hold gathers it from the owners' slices,
     * which hold rank 0's values: the same bits), so set-up leaves each rank its shard rather
     * than the whole model until the first step. The whole broadcast stays (the comm has no
     * scatter); every rank held the whole model already, drawn by its inits. Not while a hold
     * is set (its units must stay gathered). */
    const bool give_back = dist_params_sharded(d) && !d->st->hold_values;
    volt_comm_req **reqs = calloc((size_t)(n ? n : 1), sizeof *reqs);
    if (!reqs) return dist_fail(d, VOLT_ERR_NOMEM, "setup_params: out of memory");
    volt_status st = VOLT_OK;
    int started = 0;
    for (; started < n; started++) {
        dist_unit *du = &d->units[started];
        const size_t bytes = (size_t)du->numel * dist_value_size(d);
        void *buf = volt_unit_values(du->u);
        if (dist_staged(d)) {
            if (d->st->rank == 0) volt__dev_d2h(d->comm->dev, du->h_vals, buf, bytes);
            buf = du->h_vals;
        }
        st = d->comm->ops->broadcast(d->comm, buf, bytes, VOLT_COMM_BYTE, 0, du->label, &reqs[started]);   /* values in the store's dtype */
        if (st < 0) { volt__dist_comm_fail(d, st, "parameter broadcast"); break; }
    }
    for (int i = 0; i < started; i++) {
        volt_status s2 = d->comm->ops->wait(d->comm, reqs[i]);
        if (s2 < 0 && st >= 0) st = volt__dist_comm_fail(d, s2, "parameter broadcast");
        if (s2 >= 0 && dist_staged(d))
            volt__dev_h2d(d->comm->dev, volt_unit_values(d->units[i].u), d->units[i].h_vals,
                          (size_t)d->units[i].numel * dist_value_size(d));
        if (s2 >= 0 && give_back) volt__dist_release_values(d, i);
    }
    free(reqs);
    if (st < 0) return st;
    volt_params_zero_grad(ps);
    st = volt__params_set_hooks(ps, &d->hooks, d->st);
    if (st < 0) return dist_fail(d, st, "%s", volt_params_errmsg(ps));
    return VOLT_OK;
}

/* ---- grad reductions ---------------------------------------------------------------------- */
volt_status volt__dist_launch_grad(dist *d, int u) {
    dist_unit *du = &d->units[u];
    if (du->launched) return VOLT_OK;
    volt_device *dev = d->comm->dev;
    const size_t es = dist_red_size(d);
    if (volt__unit_commit(du->u, VOLT_UNIT_GRADS) < 0)   /* a unit backward never wrote is still given back */
        return dist_fail(d, VOLT_ERR_NOMEM, "gradient reduction: out of device memory recommitting the grads of %s", du->label);
    char *g = (char *)volt_unit_grad(du->u);   /* device memory */
    if (dist_red16(d)) {   /* the bf16 bucket travels; grad_done widens the result back */
        dev->be->pm->convert(dev, du->g16, VOLT_BF16, g, VOLT_F32, du->numel);
        g = du->g16;
    }
    if (dist_staged(d)) {   /* the whole local grad goes in; grad_done brings the result back */
        volt__dev_d2h(dev, du->h_grad, g, es * (size_t)du->numel);
        g = du->h_grad;
    }
    volt_status st;
    if (!dist_sharded(d))
        st = d->comm->ops->all_reduce(d->comm, g, g, (size_t)du->numel, d->red_dt, VOLT_COMM_AVG, du->label,
                                      &du->grad_req);
    else   /* in place: this rank's averaged slice lands in g[lo, hi) */
        st = d->comm->ops->reduce_scatter(d->comm, g, g + (size_t)du->lo * es, (size_t)du->chunk, d->red_dt, VOLT_COMM_AVG,
                                          du->label, &du->grad_req);
    if (st < 0) return volt__dist_comm_fail(d, st, "gradient reduction");
    du->launched = true;
    d->launch_order[d->n_launched++] = u;
    volt__dist_event(d, VOLT_EV_GRAD_LAUNCH, u);
    return VOLT_OK;
}

volt_status volt__dist_wait_grads(dist *d) {
    volt_status st = VOLT_OK;
    for (int i = 0; i < d->n_launched; i++) {
        dist_unit *du = &d->units[d->launch_order[i]];
        if (!du->grad_req) continue;
        volt_status s2 = d->comm->ops->wait(d->comm, du->grad_req);
        du->grad_req = NULL;
        if (s2 < 0) { if (st >= 0) st = volt__dist_comm_fail(d, s2, NULL); continue; }
        grad_done(d, d->launch_order[i]);
    }
    for (int i = 0; i < d->n_units; i++) d->units[i].launched = false;
    d->n_launched = 0;
    return st;
}

/* ---- param gathers ------------------------------------------------------------------------- */
volt_status volt__dist_launch_gather(dist *d, int u) {
    dist_unit *du = &d->units[u];
    if (du->gather_req) return VOLT_OK;
    if (volt__unit_commit(du->u, VOLT_UNIT_VALUES) < 0)   /* the pages given back after the last use */
        return dist_fail(d, VOLT_ERR_NOMEM, "parameter all-gather: out of device memory recommitting the values of %s", du->label);
    char *v = volt_unit_values(du->u);   /* f32 or 16-bit: gathered as bytes, no arithmetic */
    const size_t es = dist_value_size(d);
    if (dist_staged(d)) {   /* the owned slice goes in; finish_gather brings the unit back */
        volt__dev_d2h(d->comm->dev, (char *)du->h_vals + (size_t)du->lo * es, v + (size_t)du->lo * es, (size_t)du->chunk * es);
        v = du->h_vals;
    }
    volt_status st = d->comm->ops->all_gather(d->comm, v + (size_t)du->lo * es, v, (size_t)du->chunk * es, VOLT_COMM_BYTE,
                                              du->label, &du->gather_req);
    if (st < 0) return volt__dist_comm_fail(d, st, "parameter all-gather");
    volt__dist_event(d, VOLT_EV_GATHER_LAUNCH, u);
    return VOLT_OK;
}

/* record: keep the message (the first failure of a batch of waits is the one to report) */
static volt_status finish_gather(dist *d, int u, bool record) {
    dist_unit *du = &d->units[u];
    if (!du->gather_req) return VOLT_OK;
    volt_status st = d->comm->ops->wait(d->comm, du->gather_req);
    du->gather_req = NULL;
    if (st < 0) return record ? volt__dist_comm_fail(d, st, "parameter all-gather") : st;
    if (dist_staged(d))
        volt__dev_h2d(d->comm->dev, volt_unit_values(du->u), du->h_vals, (size_t)du->numel * dist_value_size(d));
    volt__unit_set_stale(du->u, false);
    du->regather = false;
    volt__dist_event(d, VOLT_EV_GATHER_DONE, u);
    return VOLT_OK;
}

volt_status volt__dist_finish_gather(dist *d, int u) { return finish_gather(d, u, true); }

volt_status volt__dist_poke_gathers(dist *d) {
    if (!d->comm->ops->test) return VOLT_OK;
    int i = 0;   /* one test, on the first gather in flight, drives the whole progress engine */
    while (i < d->n_units && !d->units[i].gather_req) i++;
    if (i == d->n_units) return VOLT_OK;
    bool done = false;
    volt_status st = d->comm->ops->test(d->comm, d->units[i].gather_req, &done);
    return st < 0 ? volt__dist_comm_fail(d, st, "parameter all-gather") : VOLT_OK;
}

volt_status volt__dist_wait_gathers(dist *d) {
    volt_status st = VOLT_OK;
    for (int i = 0; i < d->n_units; i++) {
        volt_status s2 = finish_gather(d, i, st >= 0);
        if (s2 < 0 && st >= 0) st = s2;
    }
    return st;
}

/* ---- ops every kind shares ------------------------------------------------------------------ */
static volt_status d_setup_params(volt_strategy *st, volt_params *ps) { return volt__dist_setup_units(dist_of(st), ps); }

/* wait_params for every kind */
static volt_status d_wait_params(volt_strategy *st) { return volt__dist_wait_gathers(dist_of(st)); }

static void d_begin_backward(volt_strategy *st, bool sync) {
    dist *d = dist_of(st);
    d->sync = sync;
    d->last_used = -1;
    d->in_backward = true;
    d->n_ready = 0;
    volt__dist_event(d, VOLT_EV_BACKWARD_BEGIN, sync ? 1 : 0);
}

/* what: the caller's name for the call site; the comm's messages and envelope carry it */
static volt_status d_all_reduce_mean(volt_strategy *st, double *v, int n, const char *what) {
    dist *d = dist_of(st);
    if (n <= 0) return VOLT_OK;
    volt_status s = volt__comm_all_reduce(d->comm, v, v, (size_t)n, VOLT_COMM_F64, VOLT_COMM_AVG, what);
    return s < 0 ? volt__dist_comm_fail(d, s, "all_reduce_mean") : VOLT_OK;
}

static volt_status d_broadcast(volt_strategy *st, void *buf, size_t n, int root, const char *what) {
    dist *d = dist_of(st);
    volt_status s = volt__comm_broadcast(d->comm, buf, n, VOLT_COMM_BYTE, root, what);
    return s < 0 ? volt__dist_comm_fail(d, s, "broadcast") : VOLT_OK;
}

static volt_status d_barrier(volt_strategy *st, const char *what) {
    dist *d = dist_of(st);
    volt_status s = volt__comm_barrier(d->comm, what);
    return s < 0 ? volt__dist_comm_fail(d, s, "barrier") : VOLT_OK;
}

/* ---- a captured step (compile) ---------------------------------------------------------------- */
static volt_status d_check_capture(volt_strategy *st) {
    dist *d = dist_of(st);
    if (st->world <= 1) return VOLT_OK;   /* nothing goes between ranks */
    const volt_comm *c = d->comm;
    if (!(c->ops->flags & VOLT_COMM_STREAM_ORDERED) || c->ops->version < 3u || !c->ops->drain || c->staged)
        return dist_fail(d, VOLT_ERR_UNSUPPORTED, "strategy '%s': comm '%s' runs its collectives from the host, which a "
                         "captured step cannot replay (compile over %d processes needs the nccl comm on cuda)",
                         st->row->name, c->ops->name, st->world);
    if (dist_grads_sharded(d) || dist_params_sharded(d))
        return dist_fail(d, VOLT_ERR_UNSUPPORTED, "strategy '%s' gives device memory back and maps it again within every "
                         "step (sharded %s), which a captured step cannot do; compile runs ddp and deepspeed_stage_1 "
                         "over several processes", st->row->name, dist_params_sharded(d) ? "parameters" : "gradients");
    return VOLT_OK;
}

static volt_status d_device_sum(volt_strategy *st, void *buf, size_t n, bool f64, const char *what) {
    dist *d = dist_of(st);
    volt_status s = volt__comm_all_reduce(d->comm, buf, buf, n, f64 ? VOLT_COMM_F64 : VOLT_COMM_F32, VOLT_COMM_SUM, what);
    return s < 0 ? volt__dist_comm_fail(d, s, what) : VOLT_OK;
}

static volt_status d_drain(volt_strategy *st, const char *what) {
    dist *d = dist_of(st);
    if (d->comm->ops->version < 3u || !d->comm->ops->drain) return VOLT_OK;
    volt_status s = d->comm->ops->drain(d->comm, what);
    return s < 0 ? volt__dist_comm_fail(d, s, NULL) : VOLT_OK;
}

/* The per-rank figures of docs/STRATEGIES.md over Ψ' = padded numel, 4-byte f32 values,
 * S = optimizer states per parameter (Adam 2, SGD+momentum 1, SGD 0), N ranks:
 *   ddp          params 4Ψ'            grads 4Ψ'    states 4SΨ'
 *   zero1        params 4Ψ'            grads 4Ψ'    states 4SΨ'/N
 *   zero2        params 4Ψ'            grads 4Ψ'/N  states 4SΨ'/N
 *   fsdp         params 4Ψ'/N + 4U     grads 4Ψ'/N  states 4SΨ'/N   (U = largest unit, gathered)
 *   fsdp_sgo     params 4Ψ'            grads 4Ψ'/N  states 4SΨ'/N   (all units gathered fwd..bwd)
 * allocated_bytes is what the flat CPU store really holds: full param and grad buffers for
 * every kind, plus the optimizer's (sharded) states. */
static void d_memory_report(volt_strategy *st, volt_memory_report *m) {
    dist *d = dist_of(st);
    memset(m, 0, sizeof *m);
    if (!d->ps) return;
    const int64_t N = st->world;
    int64_t P = 0, U = 0;
    for (int i = 0; i < d->n_units; i++) {
        P += d->units[i].numel;
        if (d->units[i].numel > U) U = d->units[i].numel;
    }
    const int64_t S = d->st->opt ? volt_optimizer_state_count(d->st->opt) : 0;
    m->numel = volt_params_numel(d->ps);
    m->padded_numel = P;
    /* the row's flags are the formula */
    m->param_bytes = dist_has(d, VOLT_STRAT_FREES_AFTER_FORWARD) ? 4 * P / N + 4 * U : 4 * P;
    m->grad_bytes = dist_has(d, VOLT_STRAT_SHARDS_GRADS) ? 4 * P / N : 4 * P;
    m->optim_bytes = dist_has(d, VOLT_STRAT_SHARDS_OPTIM) ? 4 * S * P / N : 4 * S * P;
    int64_t hp = 0, hg = 0;
    for (int i = 0; i < d->n_units; i++) {
        hp += volt__unit_resident_bytes(d->units[i].u, VOLT_UNIT_VALUES);
        hg += volt__unit_resident_bytes(d->units[i].u, VOLT_UNIT_GRADS);
    }
    m->held_param_bytes = hp;
    m->held_grad_bytes = hg;
    m->held_optim_bytes = d->st->opt ? volt_optimizer_state_bytes(d->st->opt) : 0;
}

static void d_destroy(volt_strategy *st) {
    dist *d = dist_of(st);
    /* d->ps is not touched: the trainer may already have replaced (destroyed) that store;
     * it destroys its current store right after the strategy, without running a step */
    /* ZeRO's gathers after the last step (when nothing read the params since) write into the
     * current store, which the trainer destroys right after: they complete first (the other
     * ranks started them too; a broken comm answers at once, a dead peer by the deadline).
     * Other collectives still in flight (an earlier error) are abandoned with the comm. */
    volt__dist_wait_gathers(d);
    volt__comm_destroy(d->comm);
    free_units(d);
    free(d->trace);
    free(d);
}

/* regather_params (local): the owned slices hold the values and the rest of each unit does
 * not (a weight-average swap back that each rank made on its own slice after a failure).
 * Every unit becomes stale, gathered from the owners at its next use (forward, a hold,
 * materialize, ZeRO's after-step gathers): fsdp gives the rest back as after a unit's use;
 * ZeRO keeps its replica and marks the unit `regather` (unit_use then launches the gather).
 * Every rank that swaps back marks every unit, so those gathers match across ranks. A gather
 * still in flight is waited for first (its values are the ones replaced; a peer that died
 * fails it within the comm's deadline); a unit an op still reads keeps its pages but is stale
 * all the same. */
static volt_status d_regather(volt_strategy *st) {
    dist *d = dist_of(st);
    if (st->world <= 1 || !d->ps || st->ps != d->ps) return VOLT_OK;
    const bool sharded = dist_params_sharded(d);
    volt_status s = volt__dist_wait_gathers(d);
    for (int i = 0; i < d->n_units; i++) {
        if (!sharded) d->units[i].regather = true;
        else if (!d->units[i].gather_req) volt__dist_release_values(d, i);
        volt__unit_set_stale(d->units[i].u, true);
    }
    return s;
}

/* ---- the tables (one per hook set; the registry rows add the flags) ---------------------------- */
#define COMMON .version = VOLT_STRATEGY_OPS_VERSION, .setup_params = d_setup_params, .begin_backward = d_begin_backward, \
    .all_reduce_mean = d_all_reduce_mean, .broadcast = d_broadcast, .barrier = d_barrier, \
    .memory_report = d_memory_report, .destroy = d_destroy, .wait_params = d_wait_params, \
    .check_capture = d_check_capture, .device_sum = d_device_sum, .drain = d_drain

const volt_strategy_ops volt__ddp_ops = { COMMON, .reduce_grads = volt__ddp_reduce_grads };
#define ZERO_COMMON COMMON, .configure_params = volt__zero_configure_params, .setup_optimizer = volt__zero_setup_optimizer, \
    .reduce_grads = volt__zero_reduce_grads, .grad_sqnorm = volt__zero_grad_sqnorm, .owned_range = volt__zero_owned_range, \
    .gather_unit = volt__zero_gather_unit, .zero_grad = volt__zero_zero_grad, .regather_params = d_regather
const volt_strategy_ops volt__zero_ops = { ZERO_COMMON, .after_optimizer_step = volt__zero_after_step,
                                           .materialize_params = volt__zero_materialize };
const volt_strategy_ops volt__fsdp_ops = { ZERO_COMMON, .after_optimizer_step = volt__fsdp_after_step,
                                           .materialize_params = volt__fsdp_materialize, .hold_params = volt__fsdp_hold,
                                           .release_unit = volt__fsdp_release_unit };

static bool is_dist(const volt_strategy *st) {
    return st && (st->row->flags & VOLT_STRAT_MULTI_PROCESS) && st->impl;
}

volt_status volt__parallel_create(volt_strategy *st, const volt_strategy_config *cfg, char *err, size_t errlen) {
    const char *name = st->row->name;
    volt_comm_dtype red_dt = VOLT_COMM_F32;
    if (cfg->reduce_dtype && !strcmp(cfg->reduce_dtype, "bf16")) red_dt = VOLT_COMM_BF16;
    else if (cfg->reduce_dtype && strcmp(cfg->reduce_dtype, "fp32")) {
        snprintf(err, errlen, "strategy '%s': strategy_reduce_dtype must be \"fp32\" or \"bf16\", got \"%s\"", name,
                 cfg->reduce_dtype);
        return VOLT_ERR_INVALID_ARG;
    }
    volt_device *dev = NULL;
    volt_status s = volt__device_get(cfg->accelerator, 0, &dev, err, errlen);
    if (s < 0) return s;
    if (!volt__dev_host_addressable(dev)) {   /* one device per rank: the one of this rank's place on its node */
        const int count = dev->be->device_count(), local = volt__comm_local_rank();
        if (cfg->devices > count) {
            snprintf(err, errlen, "strategy '%s': devices=%d but accelerator '%s' has %d visible device%s "
                     "(CUDA_VISIBLE_DEVICES?): one device per rank", name, cfg->devices, dev->be->name, count, count == 1 ? "" : "s");
            return VOLT_ERR_INVALID_ARG;
        }
        if (count > 1 && local % count && (s = volt__device_get(dev->be->name, local % count, &dev, err, errlen)) < 0) return s;
    }
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    if (cfg->timeout_s > 0) cc.timeout_s = cfg->timeout_s;
    cc.backend = cfg->comm;
    volt_comm *comm = NULL;
    char cerr[768] = "";
    s = volt__comm_create_for(dev, &cc, &comm, cerr, sizeof cerr);
    if (s < 0) {
        snprintf(err, errlen, "strategy '%s': cannot set up communication: %s", name, cerr);
        return s;
    }
    const int nodes = cfg->num_nodes > 1 ? cfg->num_nodes : 1;
    if (cfg->devices > 1 && cfg->devices * nodes != comm->world) {
        snprintf(err, errlen, "strategy '%s': devices=%d x num_nodes=%d = %d processes, but the MPI world has %d "
                 "(launch with mpirun -np %d, or leave devices at 1 to use the world as launched)", name,
                 cfg->devices, nodes, cfg->devices * nodes, comm->world, cfg->devices * nodes);
        volt__comm_destroy(comm);
        return VOLT_ERR_INVALID_ARG;
    }
    dist *d = calloc(1, sizeof *d);
    volt_dist_event *trace = malloc(sizeof *trace * TRACE_CAP);
    if (!d || !trace) {
        free(d); free(trace);
        volt__comm_destroy(comm);
        return VOLT_ERR_NOMEM;
    }
    d->flags = st->row->flags;
    d->st = st;
    d->comm = comm;
    d->red_dt = red_dt;
    d->dev = comm->dev;
    d->trace = trace;
    d->cap_trace = TRACE_CAP;
    d->last_used = d->first_use = -1;
    d->hooks.version = VOLT_UNIT_HOOKS_VERSION;
    d->hooks.unit_grads_ready = !dist_sharded(d) ? volt__ddp_grads_ready
                                : dist_has(d, VOLT_STRAT_SHARDS_PARAMS) ? volt__fsdp_grads_ready : volt__zero_grads_ready;
    d->hooks.unit_use = !dist_sharded(d) ? NULL : dist_has(d, VOLT_STRAT_SHARDS_PARAMS) ? volt__fsdp_unit_use : volt__zero_unit_use;
    st->rank = comm->rank;
    st->world = comm->world;
    st->impl = d;
    return VOLT_OK;
}

/* ---- test access -------------------------------------------------------------------------------- */
int volt__dist_trace(const volt_strategy *st, const volt_dist_event **events) {
    if (!is_dist(st)) { *events = NULL; return -1; }
    const dist *d = st->impl;
    *events = d->trace;
    return d->n_trace;
}

void volt__dist_trace_clear(volt_strategy *st) {
    if (is_dist(st)) dist_of(st)->n_trace = 0;
}

volt_comm *volt__dist_comm(const volt_strategy *st) { return is_dist(st) ? ((const dist *)st->impl)->comm : NULL; }

const char *volt__dist_ev_name(volt_dist_ev ev) {
    static const char *const names[] = { "backward_begin", "use", "ready", "grad_launch", "grad_done",
                                         "backward_end", "gather_launch", "gather_done", "step_done" };
    return (unsigned)ev < sizeof names / sizeof names[0] ? names[ev] : "?";
}
