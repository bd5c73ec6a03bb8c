/* Strategy interface (private to trainer/ and strategies/): how parameters, gradients and
 * optimizer states are placed and synchronised across ranks (DESIGN §3, §7). The trainer
 * picks one by name ("single", "ddp", "deepspeed_stage_1"/"zero1", "deepspeed_stage_2"/
 * "zero2", "fsdp", "fsdp_shard_grad_op") and calls it at fixed points of the loop. */
#ifndef VOLT_STRATEGY_H
#define VOLT_STRATEGY_H

#include "volt/core.h"
#include "core/units.h"
#include "volt/params.h"
#include "volt/optim.h"
#include "volt/data.h"
#include "volt/memory.h"

typedef struct volt_strategy volt_strategy;

typedef struct volt_strategy_config {
    const char *name;            /* strategy name as the user wrote it */
    double timeout_s;            /* collective timeout (dead/diverged rank => VOLT_ERR_TIMEOUT) */
    int devices, num_nodes;      /* from the trainer config; checked against the world size */
} volt_strategy_config;


typedef struct volt_strategy_ops {
    uint32_t version;
    const char *name;
    /* After the parameter store is finalized (and pretrained weights loaded): make the
     * parameters consistent across ranks (broadcast from rank 0), shard what this strategy
     * shards, install volt__params_set_hooks. */
    volt_status (*setup_params)(volt_strategy *st, volt_params *ps);
    /* After the optimizer exists: restrict it to this rank's shard (volt_optimizer_set_range). */
    volt_status (*setup_optimizer)(volt_strategy *st, volt_optimizer *opt);
    /* Give a loader this rank's shard (volt_loader_set_shard). */
    volt_status (*setup_loader)(volt_strategy *st, volt_loader *l);
    /* Before each backward: true when this backward ends an accumulation cycle (communicate),
     * false on the micro-steps before it (no communication: grads accumulate locally). */
    void (*begin_backward)(volt_strategy *st, bool sync);
    /* At an accumulation boundary, after backward: every grad this rank updates holds the
     * average over ranks (wait for in-flight reductions). */
    volt_status (*reduce_grads)(volt_strategy *st);
    /* Global sum of squared grads (over shards), for clipping by norm. */
    volt_status (*grad_sqnorm)(volt_strategy *st, double *out);
    /* After the optimizer step: parameters consistent again (all-gather of shards). */
    volt_status (*after_optimizer_step)(volt_strategy *st);
    /* Element-wise mean over ranks of n doubles (metric sync, stop flags). */
    volt_status (*all_reduce_mean)(volt_strategy *st, double *v, int n);
    /* Broadcast bytes from root. */
    volt_status (*broadcast)(volt_strategy *st, void *buf, size_t n, int root);
    volt_status (*barrier)(volt_strategy *st);
    /* The model-state fields of the report (formula and held bytes); the trainer adds the
     * name, rank, world and activation peak. */
    void (*memory_report)(volt_strategy *st, volt_memory_report *out);
    const char *(*errmsg)(volt_strategy *st);
    void (*destroy)(volt_strategy *st);
    /* ---- version 2 (appended; NULL = nothing to do) ---- */
    /* Before the module declares its parameters (before finalize): e.g. pad units so they
     * split into equal per-rank slices (volt_params_set_unit_padding). */
    volt_status (*configure_params)(volt_strategy *st, volt_params *ps);
    /* Make every parameter's full value valid in this process (FSDP gathers the units whose
     * non-owned part is stale). Every rank calls it at the same point: checkpoint save, end
     * of fit. */
    volt_status (*materialize_params)(volt_strategy *st);
    /* ---- version 3 (appended; NULL = the whole unit is this rank's) ---- */
    /* This rank's slice [lo, hi) of unit `unit`: the part of the params it keeps current and
     * of the optimizer states it holds (checkpoint shards write it). */
    void (*owned_range)(volt_strategy *st, int unit, int64_t *lo, int64_t *hi);
    /* Collective, every rank in the same order: the unit's parameter values from the owners'
     * slices into dst (the unit's numel floats, f32 whatever the storage) on every rank. */
    volt_status (*gather_unit)(volt_strategy *st, int unit, float *dst);
    /* After the optimizer step: grads zeroed for the next accumulation cycle (NULL:
     * volt_params_zero_grad). Sharded grads give their pages back instead of a memset. */
    void (*zero_grad)(volt_strategy *st);
} volt_strategy_ops;
#define VOLT_STRATEGY_OPS_VERSION 3u

struct volt_strategy {
    const volt_strategy_ops *ops;
    int rank, world;
    void *impl;
};

/* Create the named strategy (MPI is initialised here when a distributed one is asked for).
 * Unknown name => VOLT_ERR_UNSUPPORTED with the list of valid names in err. */
volt_status volt__strategy_create(const volt_strategy_config *cfg, volt_strategy **out, char *err, size_t errlen);
void volt__strategy_destroy(volt_strategy *st);
/* The single-process strategy (strategies/single.c). */
volt_status volt__strategy_single(volt_strategy **out);
#endif
