/* Multi-process strategies (private to strategies/ and the tests): ddp, ZeRO stage 1/2,
 * FSDP over a comm backend. One implementation object for all of them; the registry row's
 * capability flags (strategies/registry.c) select what the hooks do (docs/STRATEGIES.md has
 * the full picture). Unit buffers are device memory: they reach the comm directly when the
 * comm takes the device's memory, else through per-unit host staging buffers allocated at
 * setup (the comm is "staged": mpi over cpu-strict, or cuda without NCCL). */
#ifndef VOLT_DIST_H
#define VOLT_DIST_H

#include "strategies/strategy.h"
#include "strategies/comm/comm.h"
#include "core/err.h"
#include "core/device.h"

/* Trace of what the strategy did, in order, for tests and debugging. */
typedef enum volt_dist_ev {
    VOLT_EV_BACKWARD_BEGIN = 0,  /* begin_backward (unit = sync ? 1 : 0) */
    VOLT_EV_UNIT_USE,            /* unit_use hook */
    VOLT_EV_GRADS_READY,         /* unit_grads_ready hook */
    VOLT_EV_GRAD_LAUNCH,         /* the unit's grad reduction started */
    VOLT_EV_GRAD_DONE,           /* ... and completed (waited) */
    VOLT_EV_BACKWARD_END,        /* reduce_grads entered (backward has returned) */
    VOLT_EV_GATHER_LAUNCH,       /* a unit's param all-gather started (fsdp, zero) */
    VOLT_EV_GATHER_DONE,         /* ... and completed (waited): the unit's values are whole */
    VOLT_EV_STEP_DONE,           /* after_optimizer_step returned (zero: its gathers still in flight) */
} volt_dist_ev;

typedef struct volt_dist_event {
    volt_dist_ev kind;
    int unit;                    /* unit index, -1 when none */
    double t;                    /* CLOCK_MONOTONIC seconds */
} volt_dist_event;

/* ---- for tests (NULL / -1 when st is not a distributed strategy) ---------------------- */
int volt__dist_trace(const volt_strategy *st, const volt_dist_event **events);
void volt__dist_trace_clear(volt_strategy *st);
volt_comm *volt__dist_comm(const volt_strategy *st);
const char *volt__dist_ev_name(volt_dist_ev ev);

/* ---- shared between parallel.c, ddp.c, zero.c, fsdp.c --------------------------------- */
typedef struct dist_unit {
    volt_unit *u;
    int64_t numel;               /* padded length of the unit buffers */
    int64_t chunk, lo, hi;       /* sharded kinds: this rank's slice [lo, hi), hi - lo = chunk */
    volt_comm_req *grad_req;     /* grad reduction in flight */
    volt_comm_req *gather_req;   /* param all-gather in flight */
    bool launched;               /* grad reduction started in this accumulation cycle */
    int next_use;                /* fsdp: unit first used right after this one in forward (prefetch), -1 */
    int prev_use;                /* fsdp: unit first used right before it (backward prefetch), -1 */
    bool held;                   /* fsdp: gathered by the hold (stale or in flight when it began) */
    bool regather;               /* zero: stale, to be gathered on next use (regather_params), no gather in flight */
    char label[96];              /* "unit 'fc1'" for messages */
    void *h_grad, *h_vals;       /* staged comm: host copies of the grads / values (NULL otherwise) */
    void *g16;                   /* reduce_dtype bf16: the grads as bf16 (device memory, numel), reduced in place */
} dist_unit;

typedef struct dist {
    unsigned flags;              /* the row's VOLT_STRAT_* */
    volt_strategy *st;
    volt_comm *comm;
    volt_device *dev;            /* the comm's device (comm->dev), kept for freeing after the comm */
    volt_comm_dtype red_dt;      /* gradient reduction dtype: F32 (default) or BF16 (reduce_dtype) */
    volt_params *ps;             /* borrowed, from setup_params */
    int n_units;
    dist_unit *units;
    int *launch_order, n_launched;   /* units whose grads were launched, in launch order */
    bool sync;                   /* current backward ends an accumulation cycle */
    int last_used;               /* fsdp: previous unit_use, -1 at the start of a forward */
    int first_use;               /* fsdp: first unit a training forward uses (prefetched), -1 */
    bool in_backward;            /* between begin_backward and the last unit_grads_ready */
    int n_ready;                 /* unit_grads_ready calls in this backward */
    volt_unit_hooks hooks;
    volt_dist_event *trace;
    int n_trace, cap_trace;
} dist;

static inline dist *dist_of(volt_strategy *st) { return (dist *)st->impl; }
static inline bool dist_has(const dist *d, unsigned f) { return (d->flags & f) != 0; }
/* Units split into per-rank slices (optimizer states, reduce-scatter) vs. whole replicas. */
static inline bool dist_sharded(const dist *d) { return dist_has(d, VOLT_STRAT_SHARDS_OPTIM); }
static inline bool dist_staged(const dist *d) { return d->comm->staged; }
/* Grads reduced in 16 bits: converted into the unit's g16 bucket, reduced, converted back. */
static inline bool dist_red16(const dist *d) { return d->red_dt != VOLT_COMM_F32; }
/* Bytes of one element of a grad as it travels (4, or 2 under reduce_dtype bf16). */
static inline size_t dist_red_size(const dist *d) { return volt__comm_dtype_size(d->red_dt); }
/* Bytes of one parameter value in the store (4, or 2 under bf16-true / 16-true). */
static inline size_t dist_value_size(const dist *d) { return volt_dtype_size(volt_params_dtype(d->ps)); }
/* Only the owned slice of the grads is kept once a unit's reduce-scatter is done. */
static inline bool dist_grads_sharded(const dist *d) { return dist_has(d, VOLT_STRAT_SHARDS_GRADS) && d->st->world > 1; }
/* Params sharded: the non-owned part is given back after the step and gathered on use. */
static inline bool dist_params_sharded(const dist *d) {
    return dist_has(d, VOLT_STRAT_SHARDS_PARAMS) && d->st->world > 1;
}

#define dist_fail(d, s, ...) VOLT__OBJ_ERRF((d)->st, s, __VA_ARGS__)
/* Copy the comm's message (timeouts, MPI errors) into the strategy's, with a prefix. */
volt_status volt__dist_comm_fail(dist *d, volt_status st, const char *what);
void volt__dist_event(dist *d, volt_dist_ev kind, int unit);
/* Poke progress of in-flight grad reductions (MPI progresses only inside MPI calls); with
 * sharded grads, finish the ones that are done and give back their non-owned part. */
volt_status volt__dist_progress(dist *d);
/* Give back the pages of the unit's values (or grads) outside this rank's slice. Values: not
 * while a gather into them is in flight or an op reads them; they become stale. */
void volt__dist_release_values(dist *d, int u);
void volt__dist_release_grads(dist *d, int u);
/* Build the unit table from ps (sharded kinds check the padding), broadcast params from rank 0. */
volt_status volt__dist_setup_units(dist *d, volt_params *ps);
/* Wait for every in-flight grad reduction / param gather. */
volt_status volt__dist_wait_grads(dist *d);
volt_status volt__dist_wait_gathers(dist *d);
/* Drive the gathers in flight without waiting (MPI progresses only inside MPI calls). */
volt_status volt__dist_poke_gathers(dist *d);
/* Start the unit's grad reduction (all-reduce for ddp, reduce-scatter otherwise). */
volt_status volt__dist_launch_grad(dist *d, int u);
/* Start / finish the all-gather of the unit's params from the owned slices. */
volt_status volt__dist_launch_gather(dist *d, int u);
volt_status volt__dist_finish_gather(dist *d, int u);

/* The rows' ops tables and constructor (strategies/registry.c). */
extern const volt_strategy_ops volt__ddp_ops, volt__zero_ops, volt__fsdp_ops;
volt_status volt__parallel_create(volt_strategy *st, const volt_strategy_config *cfg, char *err, size_t errlen);

/* kind-specific ops (ddp.c, zero.c, fsdp.c) */
volt_status volt__ddp_grads_ready(void *ctx, volt_unit *u);
volt_status volt__ddp_reduce_grads(volt_strategy *st);

volt_status volt__zero_configure_params(volt_strategy *st, volt_params *ps);
volt_status volt__zero_setup_optimizer(volt_strategy *st, volt_optimizer *opt);
volt_status volt__zero_grads_ready(void *ctx, volt_unit *u);
volt_status volt__zero_reduce_grads(volt_strategy *st);
volt_status volt__zero_grad_sqnorm(volt_strategy *st, double *out);
volt_status volt__zero_after_step(volt_strategy *st);
void volt__zero_owned_range(volt_strategy *st, int unit, int64_t *lo, int64_t *hi);
volt_status volt__zero_gather_unit(volt_strategy *st, int unit, float *dst);
volt_status volt__zero_unit_use(void *ctx, volt_unit *u);
volt_status volt__zero_materialize(volt_strategy *st);

volt_status volt__fsdp_unit_use(void *ctx, volt_unit *u);
volt_status volt__fsdp_grads_ready(void *ctx, volt_unit *u);
void volt__zero_zero_grad(volt_strategy *st);
volt_status volt__fsdp_after_step(volt_strategy *st);
volt_status volt__fsdp_materialize(volt_strategy *st);
volt_status volt__fsdp_release_unit(volt_strategy *st, int unit);
volt_status volt__fsdp_hold(volt_strategy *st, bool hold);
#endif
