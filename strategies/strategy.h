/* Strategy interface (private to trainer/ and strategies/): how parameters, gradients and
 * optimizer states are placed and synchronised across ranks (DESIGN §3, §7).
 *
 * One registry row per strategy (strategies/registry.c): name, aliases, description,
 * capability flags and the ops table. Validation, the unknown-name error, the apps' --help
 * text and docs/ARCHITECTURE.md's table all read the rows (volt__strategy_find/_at/_names).
 *
 * Every op is optional: NULL means the single-process behaviour written once in
 * strategies/strategy.c (the volt__strategy_* wrappers below), which is what callers use.
 * "single" is a row whose ops are all NULL.
 *
 * The optimizer boundary (strategies/boundary.c) is written once for every strategy:
 * reduce -> unscale + all-rank inf vote -> clip -> step -> gather -> zero -> scaler update.
 * The strategy owns the precision plugin that takes part in it (Lightning's
 * Strategy.precision_plugin). */
#ifndef VOLT_STRATEGY_H
#define VOLT_STRATEGY_H

#include "volt/core.h"
#include "core/units.h"
#include "volt/params.h"
#include "volt/optim.h"
#include "volt/data.h"
#include "volt/memory.h"
#include "precision/precision.h"

typedef struct volt_strategy volt_strategy;
typedef struct volt_strategy_row volt_strategy_row;

typedef struct volt_strategy_config {
    const char *name;            /* strategy name or alias as the user wrote it (NULL = "single") */
    double timeout_s;            /* collective timeout (dead/diverged rank => VOLT_ERR_TIMEOUT) */
    int devices, num_nodes;      /* from the trainer config; checked against the world size */
    const char *accelerator;     /* device the comm serves (NULL = "auto", as volt_params_config) */
    /* Multi-process strategies only (an error on "single" unless NULL / the default): */
    const char *reduce_dtype;    /* gradient reduction dtype: NULL / "fp32" (default) or "bf16" */
    const char *comm;            /* comm backend: NULL / "auto" (by device), "mpi", "nccl" */
} volt_strategy_config;

/* ---- capability flags of a row ------------------------------------------------------------ */
enum {
    VOLT_STRAT_MULTI_PROCESS = 1u << 0,      /* ranks over a comm backend (built with MPI) */
    VOLT_STRAT_SHARDS_OPTIM = 1u << 1,       /* each rank keeps the optimizer states of its slice */
    VOLT_STRAT_SHARDS_GRADS = 1u << 2,       /* only the owned grad slice is kept after reduction */
    VOLT_STRAT_SHARDS_PARAMS = 1u << 3,      /* only the owned param slice between steps; gathered on use */
    VOLT_STRAT_FREES_AFTER_FORWARD = 1u << 4,/* a unit's params are given back when forward moves on */
    VOLT_STRAT_OVERLAP_REDUCE = 1u << 5,     /* grad reductions start during backward, per unit */
};

typedef struct volt_strategy_ops {
    uint32_t version;            /* VOLT_STRATEGY_OPS_VERSION (append-only; checked at creation) */
    /* Before the module declares its parameters (before finalize): e.g. pad units so they
     * split into equal per-rank slices (volt_params_set_unit_padding). */
    volt_status (*configure_params)(volt_strategy *st, volt_params *ps);
    /* After the store is finalized (and pretrained weights loaded): parameters consistent
     * across ranks (broadcast from rank 0), shard, install volt__params_set_hooks. */
    volt_status (*setup_params)(volt_strategy *st, volt_params *ps);
    /* After the optimizer exists: restrict it to this rank's shard (volt_optimizer_set_range). */
    volt_status (*setup_optimizer)(volt_strategy *st, volt_optimizer *opt);
    /* Before each backward: sync = this backward ends an accumulation cycle (communicate). */
    void (*begin_backward)(volt_strategy *st, bool sync);
    /* At an accumulation boundary, after backward: every grad this rank updates holds the
     * average over ranks. NULL: the local grads are the result. */
    volt_status (*reduce_grads)(volt_strategy *st);
    /* Global sum of squared grads (over shards) for clipping by norm. NULL: the local sum. */
    volt_status (*grad_sqnorm)(volt_strategy *st, double *out);
    /* After the optimizer step: parameters consistent again (all-gather of shards). The
     * gathers may be left in flight: each unit they write is stale until its gather is
     * waited for (the tape's unit_use, wait_params, materialize_params). */
    volt_status (*after_optimizer_step)(volt_strategy *st);
    /* Grads zeroed for the next cycle. NULL: volt_params_zero_grad. */
    void (*zero_grad)(volt_strategy *st);
    /* The control collectives (version 10 gave them `what`: the call site's name, "stop vote",
     * "ckpt_path agreement", for the comm's messages and its envelope; the same string on every
     * rank at one call site, never one that depends on the rank). */
    /* Element-wise mean over ranks of n host doubles (metric sync, stop flags, inf vote). */
    volt_status (*all_reduce_mean)(volt_strategy *st, double *v, int n, const char *what);
    /* Host bytes from root to every rank. */
    volt_status (*broadcast)(volt_strategy *st, void *buf, size_t n, int root, const char *what);
    volt_status (*barrier)(volt_strategy *st, const char *what);
    /* Every parameter's full value valid in this process (FSDP gathers stale units); every
     * rank calls it at the same point (checkpoint save, end of fit). */
    volt_status (*materialize_params)(volt_strategy *st);
    /* This rank's slice [lo, hi) of unit `unit`. NULL: the whole unit. */
    void (*owned_range)(volt_strategy *st, int unit, int64_t *lo, int64_t *hi);
    /* Collective, every rank in the same order: the unit's values from the owners' slices
     * into host dst (numel f32, whatever the storage) on every rank. NULL: not sharded. */
    volt_status (*gather_unit)(volt_strategy *st, int unit, float *dst);
    /* The model-state fields of the report. NULL: full replicas (param, grad, states). */
    void (*memory_report)(volt_strategy *st, volt_memory_report *out);
    /* Free the implementation (st->impl); the wrapper frees the rest. */
    void (*destroy)(volt_strategy *st);
    /* ---- version 5 ---- */
    /* Local, not collective (a rank may call it alone, at any point between steps): every
     * parameter all-gather this process has in flight has completed, so every value it holds
     * may be read or overwritten (ZeRO leaves the gathers after the step running into the
     * next forward; FSDP prefetches). Whatever was never gathered (FSDP's stale units) stays
     * so: that is materialize_params. NULL: nothing is ever left in flight. */
    volt_status (*wait_params)(volt_strategy *st);
    /* ---- version 6: a captured step (compile) over several processes ---- */
    /* VOLT_OK when this strategy's training step can be captured into a device graph and
     * replayed; else VOLT_ERR_UNSUPPORTED with the reason in errmsg. NULL: it can (nothing
     * of it runs on the host). */
    volt_status (*check_capture)(volt_strategy *st);
    /* In place over device memory: buf[i] = sum over ranks of buf[i], i < n (f32, or f64
     * when f64), ordered on the device; awaited on the host only outside a capture. The inf
     * vote and the grad norm of a captured step. */
    volt_status (*device_sum)(volt_strategy *st, void *buf, size_t n, bool f64, const char *what);
    /* Block the host until the device work issued so far (a graph launch with collectives
     * inside) has run, within the comm's deadline: a timeout or a comm error ends it with
     * the comm's message, never a hang. NULL: a plain device synchronisation suffices. */
    volt_status (*drain)(volt_strategy *st, const char *what);
    /* ---- version 7: the hold of an evaluation whose ranks run other numbers of batches ---- */
    /* hold true: every parameter gathered (collective, every rank at the same point) and kept
     * so while st->hold_values is set. hold false (local, called once the flag is cleared):
     * what the hold kept gathered is given back the way the strategy gives a unit back after
     * its use, so the resident parameters are those of an even loop; nothing is scattered
     * back (evaluation changes no parameter: the gathered values are the owners' slices).
     * NULL: hold = materialize_params, and nothing to give back. */
    volt_status (*hold_params)(volt_strategy *st, bool hold);
    /* ---- version 8: a checkpoint load leaves each rank its shard ---- */
    /* Local, not collective: the values of unit `unit` were just written whole on this rank,
     * its owned slice included (trainer/checkpoint.c's load, unit by unit): give back the part
     * outside this rank's slice the way the strategy gives a unit back after its use, and mark
     * the unit stale so its next use gathers it from the owners. Not called while hold_values
     * is set. NULL: parameters are whole replicas (nothing to give back). */
    volt_status (*release_unit)(volt_strategy *st, int unit);
    /* ---- version 9: the current weights back after a failure, with no collective ---- */
    /* Local, not collective: this rank's owned slice of every unit holds the values the model
     * is to have and the parts outside it do not (each rank swapped the weight average out of
     * its own slice on its own, after a failure its peers may not have survived: trainer/
     * weight_average.c). Mark those parts to be gathered from the owners' slices at their next
     * use (the tape's unit_use, materialize_params, a hold), giving back what the strategy gives
     * back after a unit's use. Not called while hold_values is set. NULL: each rank's optimizer
     * covers whole units (single, ddp): nothing to do. */
    volt_status (*regather_params)(volt_strategy *st);
    /* ---- version 10: all_reduce_mean, broadcast and barrier (above) take `what` ---- */
    /* Changed in place, not appended: a table below 10 that sets any of the three was written
     * for the old signatures and is refused at creation. */
} volt_strategy_ops;
#define VOLT_STRATEGY_OPS_VERSION 10u

/* One registry row. */
struct volt_strategy_row {
    const char *name;            /* "fsdp" */
    const char *aliases[3];      /* other accepted names ("zero2"), NULL-terminated */
    const char *description;     /* one line: --help, errors, docs */
    unsigned flags;              /* VOLT_STRAT_* */
    /* NULL when this build lacks what the row needs (MULTI_PROCESS without MPI). */
    const volt_strategy_ops *ops;
    /* Make the implementation (st->rank/world/comm are set by it). NULL: nothing to make. */
    volt_status (*create)(volt_strategy *st, const volt_strategy_config *cfg, char *err, size_t errlen);
};

struct volt_strategy {
    const volt_strategy_ops *ops;
    const volt_strategy_row *row;
    int rank, world;
    volt_params *ps;             /* borrowed, from setup_params */
    volt_optimizer *opt;         /* borrowed, from setup_optimizer */
    volt_precision *prec;        /* owned (volt__strategy_set_precision); NULL = 32-true behaviour */
    void *impl;
    char errmsg[1024];
    bool hold_values;            /* params gathered stay gathered: forward gives none back
                                    (volt__strategy_hold_params) */
};

/* ---- registry (strategies/registry.c) ------------------------------------------------------ */
int volt__strategy_count(void);
const volt_strategy_row *volt__strategy_at(int i);
/* The row whose name or alias is `name`, or NULL ("auto" is no row: resolve it first). */
const volt_strategy_row *volt__strategy_find(const char *name);
/* Lightning's "auto": "ddp" when devices or num_nodes is above 1 or the launcher started several
 * processes (volt__comm_launched_size), else "single"; any other name as it is. */
const char *volt__strategy_resolve(const char *name, int devices, int num_nodes);
/* "auto, single, ddp, deepspeed_stage_1 (zero1), ..." — every row, aliases in parentheses. */
const char *volt__strategy_names(void);
/* "auto" and every name and alias as "a|b|...": the CLI's choices for trainer.strategy. */
const char *volt__strategy_choices(void);
/* Create the named strategy (MPI is initialised here when a multi-process one is asked for).
 * Unknown name => VOLT_ERR_UNSUPPORTED naming the valid ones; a row this build lacks =>
 * VOLT_ERR_UNSUPPORTED saying why. */
volt_status volt__strategy_create(const volt_strategy_config *cfg, volt_strategy **out, char *err, size_t errlen);
/* Its checks of the settings alone, making nothing (no MPI, no comm). */
volt_status volt__strategy_config_check(const volt_strategy_config *cfg, char *err, size_t errlen);
void volt__strategy_destroy(volt_strategy *st);       /* NULL-safe; destroys the precision plugin */
/* Hand the precision plugin to the strategy (it owns it from here, even on error). */
void volt__strategy_set_precision(volt_strategy *st, volt_precision *prec);
static inline bool volt__strategy_has(const volt_strategy *st, unsigned flag) { return (st->row->flags & flag) != 0; }
static inline const char *volt__strategy_name(const volt_strategy *st) { return st->row->name; }

/* ---- the ops with their defaults (strategies/strategy.c) ------------------------------------ */
volt_status volt__strategy_configure_params(volt_strategy *st, volt_params *ps);
volt_status volt__strategy_setup_params(volt_strategy *st, volt_params *ps);
volt_status volt__strategy_setup_optimizer(volt_strategy *st, volt_optimizer *opt);
/* The optimizer is going away (the trainer drops it: lr_find, the batch size finder, a new
 * configure_optimizers): the strategy holds no pointer to it (its memory report reads none). */
void volt__strategy_forget_optimizer(volt_strategy *st);
/* This rank's shard of a loader (volt_loader_set_shard(rank, world)). */
volt_status volt__strategy_setup_loader(volt_strategy *st, volt_loader *l);
void volt__strategy_begin_backward(volt_strategy *st, bool sync);
/* The grads cleared for the next cycle (the strategy's zero_grad, else volt_params_clear_grad):
 * what the optimizer boundary does after a step, and the batch size finder after a failed one. */
void volt__strategy_zero_grad(volt_strategy *st);
/* The control collectives; what: the call site's name, the same on every rank (the ops above). */
volt_status volt__strategy_all_reduce_mean(volt_strategy *st, double *v, int n, const char *what);
volt_status volt__strategy_broadcast(volt_strategy *st, void *buf, size_t n, int root, const char *what);
volt_status volt__strategy_barrier(volt_strategy *st, const char *what);
volt_status volt__strategy_materialize_params(volt_strategy *st);
/* hold: every parameter gathered (the hold_params op, else materialize_params: collective,
 * every rank calls it) and kept so until hold is dropped: forward gives no unit back, so it
 * makes no collective. An evaluation loop whose ranks run other numbers of batches holds them
 * (trainer/eval_loop.c). Dropping it is local and gives back what the hold kept gathered
 * (the hold_params op: fsdp's units, as after an even loop), so the full model does not stay
 * resident until the next optimizer step; dropping a hold not taken does nothing. */
volt_status volt__strategy_hold_params(volt_strategy *st, bool hold);
/* Local: unit `unit`'s values were just written whole on this rank (a checkpoint load): a
 * strategy that shards parameters gives back what this rank does not own and marks the unit
 * stale (the release_unit op; its next use, materialize_params or a hold gathers it from the
 * owners' slices), so the load leaves each rank its shard instead of the whole model. Nothing
 * while hold_values is set (the held units must stay gathered), and nothing for replicated
 * parameters (NULL op: single, ddp, ZeRO stage 1/2). */
volt_status volt__strategy_release_unit(volt_strategy *st, int unit);
/* Local: this rank's owned slices hold the values, the rest of each unit is to be gathered
 * from the owners at its next use (the regather_params op: ZeRO stage 1/2, whose replicas
 * then hold other values outside the slice, and fsdp, which gives that part back). Nothing
 * while hold_values is set, nothing for ranks that own whole units (single, ddp). */
volt_status volt__strategy_regather_params(volt_strategy *st);
/* Local: the parameter gathers in flight have completed (wait_params). Callers that read or
 * write unit values outside the tape between steps (checkpoints, export, the store handed to
 * the user) call it first. */
volt_status volt__strategy_wait_params(volt_strategy *st);
void volt__strategy_owned_range(volt_strategy *st, int unit, int64_t *lo, int64_t *hi);
/* The unit's values from the owners (sharded strategies) or this process, into host f32 dst. */
volt_status volt__strategy_gather_unit(volt_strategy *st, int unit, float *dst);
static inline bool volt__strategy_gathers_units(const volt_strategy *st) { return st->ops->gather_unit != NULL; }
void volt__strategy_memory_report(volt_strategy *st, volt_memory_report *out);
/* compile (trainer/compile.c): whether the step can be captured (check_capture; one process:
 * yes, several: the strategy's op must say so), the device sum over ranks (one process:
 * nothing to do) and the bounded wait after a graph launch (one process: nothing to bound). */
volt_status volt__strategy_check_capture(volt_strategy *st);
volt_status volt__strategy_device_sum(volt_strategy *st, void *buf, size_t n, bool f64, const char *what);
volt_status volt__strategy_drain(volt_strategy *st, const char *what);
/* The comm of a multi-process strategy (its graph owners: comm.h), NULL for single. */
struct volt_comm *volt__strategy_comm(volt_strategy *st);
const char *volt__strategy_errmsg(const volt_strategy *st);

/* ---- the optimizer boundary (strategies/boundary.c) ----------------------------------------- */
typedef struct volt_boundary {
    float clip_val;              /* > 0: clip the grads (gradient_clip_val) */
    bool clip_by_value;          /* else by global norm over shards (clip_grad_norm_) */
    /* Runs after the unscale, before clipping and the step (on_before_optimizer_step hooks,
     * as Lightning's: they see the grads unclipped). A failure is reported by the callee (err
     * stays empty). */
    volt_status (*before_step)(void *ctx);
    /* When set, runs in place of the clip above (the module's configure_gradient_clipping): it
     * clips with volt__strategy_clip as it likes, or not at all. A failure is the callee's to
     * report. Not with on_device. */
    volt_status (*configure_clip)(void *ctx);
    /* Runs after the step (taken or skipped), before the grads are cleared (on_before_zero_grad
     * hooks); a failure is the callee's to report, and the boundary still ends as usual (grads
     * cleared, scaler updated, *skipped set) before returning it. */
    volt_status (*before_zero_grad)(void *ctx);
    void *ctx;
    /* A captured step (compile): nothing is read on the host. The clip by norm takes its
     * coefficient from the device norm (volt_params_clip_grad_norm; sharded grads: the
     * slices' sums of squares summed over ranks on the device first), and 16-mixed's inf/NaN
     * skip is the device flag (summed over ranks: any rank's inf skips everywhere) that the
     * optimizer's updates and the scaler update read; the caller learns after the launch
     * whether the step was skipped (the precision's read_back), *skipped stays false. The
     * parameter gathers after the step complete inside it (none is left for the next
     * forward: a graph must end with every collective joined). */
    bool on_device;
} volt_boundary;
/* The clip of the boundary (clip_val <= 0: none): by value, or by the global norm over shards
 * (collective under a sharding strategy: every rank calls it alike). */
volt_status volt__strategy_clip(volt_strategy *st, float clip_val, bool by_value, bool on_device, char *err, size_t errlen);
/* One accumulation boundary, after backward: reduce -> unscale + all-rank inf vote -> before_step
 * -> clip (or configure_clip) -> optimizer step (skipped on inf/NaN) -> gather -> before_zero_grad -> zero
 * grads -> scaler update. *skipped: the step was skipped (global_step and schedulers stay).
 * *ended: the boundary got past the step (it counts, taken or skipped, even when an error is
 * returned: before_zero_grad's). On error err says where (empty when a hook failed). */
volt_status volt__strategy_optimizer_boundary(volt_strategy *st, const volt_boundary *b, bool *skipped, bool *ended,
                                              char *err, size_t errlen);
#endif
