/* Strategy interface (private to trainer/ and strategies/): how parameters, gradients and
 * optimizer states are placed and synchronised across ranks (DESIGN §3, §7). The trainer
 * picks one by name ("single", "ddp", "deepspeed_stage_1"/"zero1", "deepspeed_stage_2"/
 * "zero2", "fsdp", "fsdp_shard_grad_op") and calls it at fixed points of the loop. */
#ifndef VOLT_STRATEGY_H
#define VOLT_STRATEGY_H

#include "volt/core.h"
#include "volt/params.h"
#include "volt/optim.h"
#include "volt/data.h"

typedef struct volt_strategy volt_strategy;

typedef struct volt_strategy_config {
    const char *name;            /* strategy name as the user wrote it */
    double timeout_s;            /* collective timeout (dead/diverged rank => VOLT_ERR_TIMEOUT) */
    int devices, num_nodes;      /* from the trainer config; checked against the world size */
} volt_strategy_config;

/* Per-rank bytes of model state, for the memory report. param/grad/optim_bytes follow the
 * strategy's ZeRO formula (docs/STRATEGIES.md) over the padded parameter count; the fields
 * after activation_peak_bytes were appended (version 2). */
typedef struct volt_memory_report {
    int64_t param_bytes, grad_bytes, optim_bytes, master_bytes, activation_peak_bytes;
    int64_t numel;             /* Ψ: parameters (unpadded) */
    int64_t padded_numel;      /* Σ unit buffer lengths (padding to 16 floats, and to world slices) */
    int64_t allocated_bytes;   /* what this process really holds for params, grads, optimizer
                                  states and strategy scratch (the flat CPU store keeps full
                                  param and grad buffers, so this can exceed the formula) */
} volt_memory_report;

typedef struct volt_strategy_ops {
    uint32_t version;
    const char *name;
    /* After the parameter store is finalized (and pretrained weights loaded): make the
     * parameters consistent across ranks (broadcast from rank 0), shard what this strategy
     * shards, install volt_params_set_hooks. */
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
    /* Checkpoint save, every rank in the same order: the full state k of unit `unit` (unit
     * numel floats) into dst on every rank. Only called for units whose optimizer range is
     * not the whole unit (sharded states). */
    volt_status (*gather_optim_state)(volt_strategy *st, volt_optimizer *opt, int unit, int k, float *dst);
} volt_strategy_ops;
#define VOLT_STRATEGY_OPS_VERSION 2u

struct volt_strategy {
    const volt_strategy_ops *ops;
    int rank, world;
    void *impl;
};

/* Create the named strategy (MPI is initialised here when a distributed one is asked for).
 * Unknown name => VOLT_ERR_UNSUPPORTED with the list of valid names in err. */
volt_status volt_strategy_create(const volt_strategy_config *cfg, volt_strategy **out, char *err, size_t errlen);
void volt_strategy_destroy(volt_strategy *st);
/* The single-process strategy (strategies/single.c). */
volt_status volt_strategy_single(volt_strategy **out);
#endif
