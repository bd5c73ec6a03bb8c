/* volt/optim.h — optimizers (SGD, Adam, AdamW) and learning-rate schedulers.
 *
 * An optimizer works on the param store's flat unit buffers: for every unit it keeps its
 * state (momentum buffer; exp_avg and exp_avg_sq) in buffers laid out like the unit's
 * values and grads, allocated at create, so volt_optimizer_step never allocates. The math
 * is PyTorch's single-tensor (non-foreach) torch.optim.SGD / Adam / AdamW, element by
 * element in f32 in the same operation order, with the per-step scalars (bias
 * corrections, step size) computed in double as PyTorch does in Python. Results are
 * bitwise identical run to run and for any number of OpenMP threads.
 *
 * States and the per-step coefficients live on the param store's device and the update is
 * the backend's parameter math (docs/ARCHITECTURE.md, "Parameter math on the device"): one
 * host-to-device copy of the step's scalars per step, no host reads.
 *
 * Sharded strategies (ZeRO) give each rank a contiguous slice [lo, hi) of a unit with
 * volt_optimizer_set_range: the step then updates only that slice and the unit's state
 * holds only hi - lo floats. */
#ifndef VOLT_OPTIM_H
#define VOLT_OPTIM_H

#include "volt/export.h"

#include "volt/core.h"
#include "volt/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct volt_optimizer volt_optimizer;
typedef struct volt_scheduler volt_scheduler;

/* ---- optimizer ------------------------------------------------------------------ */
typedef enum volt_optim_kind {
    VOLT_OPTIM_SGD = 0,    /* torch.optim.SGD: momentum, dampening, nesterov, L2 decay */
    VOLT_OPTIM_ADAM,       /* torch.optim.Adam: L2 decay added to the grad */
    VOLT_OPTIM_ADAMW,      /* torch.optim.AdamW: decoupled decay p *= 1 - lr*wd */
    VOLT_OPTIM_KIND_COUNT
} volt_optim_kind;

/* A parameter group (torch.optim's param_groups): the parameters whose names match
 * `params` get their own lr and weight_decay. `params` is a comma-separated list of
 * fnmatch(3) globs (flags 0: '*' also matches '.'), each matched against the whole
 * parameter name; blanks around an element are ignored. A suffix is "*bias", a name part
 * "*LayerNorm*". A parameter belongs to the first group with a matching element, else to the
 * default group (index 0: the config's lr and weight_decay), so volt_optimizer_group_*
 * index g = 1 + the index in cfg.groups, torch's param_groups order with the default group
 * first. Every element must match some parameter and every group must end up with at least
 * one (else volt_optimizer_create fails naming it: a typo would otherwise change nothing). */
typedef struct volt_optim_group {
    const char *params;    /* the patterns (copied by volt_optimizer_create); not NULL or empty */
    float lr;              /* >= 0, or NAN = the config's lr (the default group's) */
    float weight_decay;    /* >= 0, or NAN = the config's weight_decay */
} volt_optim_group;
#define VOLT_OPTIM_MAX_GROUPS 8

typedef struct volt_optimizer_config {
    uint32_t version;      /* VOLT_OPTIMIZER_CONFIG_VERSION, set by _init */
    volt_optim_kind kind;  /* default VOLT_OPTIM_ADAM */
    float lr;              /* base learning rate, >= 0; default 1e-3 */
    float momentum;        /* SGD only, >= 0; default 0 (no momentum buffer) */
    float dampening;       /* SGD only; default 0 */
    bool nesterov;         /* SGD only; needs momentum > 0 and dampening == 0 */
    float weight_decay;    /* >= 0; default 0. NOTE: torch's AdamW defaults to 0.01 —
                              set it yourself for AdamW */
    float beta1, beta2;    /* Adam/AdamW, in [0, 1); default 0.9, 0.999 */
    float eps;             /* Adam/AdamW, >= 0; default 1e-8 */
    /* ---- appended ---- */
    volt_dtype state_dtype;/* f32 (default), bf16 or f16: the states' storage; the math is
                              f32 and rounds on store (the trainer sets it from the
                              precision: 16-bit for bf16-true/16-true unless
                              cfg.optimizer_dtype asks for f32) */
    /* ---- version 2 ---- */
    int n_groups;          /* parameter groups besides the default one, in [0,
                              VOLT_OPTIM_MAX_GROUPS]; default 0 (one group: everything).
                              A version-1 config has none. */
    volt_optim_group groups[VOLT_OPTIM_MAX_GROUPS];   /* groups[0..n_groups) */
} volt_optimizer_config;
#define VOLT_OPTIMIZER_CONFIG_VERSION 2u

VOLT_API void volt_optimizer_config_init(volt_optimizer_config *cfg);
/* Checks a config without creating anything (the trainer validates early); the groups'
 * patterns are checked against the parameters by volt_optimizer_create. */
VOLT_API volt_status volt_optimizer_config_validate(const volt_optimizer_config *cfg);
/* The same with the reason in err (errlen bytes), and when ps (finalized) is not NULL also
 * the groups against its parameter names: what volt_optimizer_create would reject, said. */
VOLT_API volt_status volt_optimizer_config_check(const volt_optimizer_config *cfg, const volt_params *ps,
                                                 char *err, size_t errlen);

/* ps must be finalized and outlive the optimizer (borrowed). State buffers (zeroed) cover
 * every unit's full range until volt_optimizer_set_range. Errors: INVALID_ARG (bad config;
 * with groups also a pattern element matching no parameter or a group left with none:
 * volt_optimizer_config_check says which), VERSION, STATE (store not finalized), NOMEM. */
VOLT_API volt_status volt_optimizer_create(const volt_optimizer_config *cfg, volt_params *ps,
                                  volt_optimizer **out);
VOLT_API void volt_optimizer_destroy(volt_optimizer *opt);                   /* NULL-safe */
VOLT_API const char *volt_optimizer_errmsg(const volt_optimizer *opt);       /* last error, "" if none */
/* The config as created (cfg->lr stays the base lr; the current lr is volt_optimizer_lr). */
VOLT_API const volt_optimizer_config *volt_optimizer_get_config(const volt_optimizer *opt);

/* One update of every unit's range with the current lr and the grads in the store;
 * parameters without VOLT_TENSOR_REQUIRES_GRAD (frozen) are left untouched, and so is
 * their state. Increments the step count once. Never allocates. The SGD momentum buffer
 * is initialised to the grad (PyTorch's first step) when the step count is 0, so a run
 * resumed with volt_optimizer_set_step_count continues exactly. A group whose lr is not finite
 * or is negative (a scheduler's overflow: StepLR with gamma > 1 past float's range) fails it
 * with VOLT_ERR_NUMERIC before anything moves (volt_optimizer_check_lr). */
VOLT_API volt_status volt_optimizer_step(volt_optimizer *opt);
/* VOLT_OK when every group's lr is finite and >= 0; else VOLT_ERR_NUMERIC with a message
 * (volt_optimizer_errmsg) naming the step, the group, the lr and, when a scheduler set it, the
 * scheduler's kind, its step and the numbers. volt_optimizer_step checks it first; a loop that
 * replays a captured step (compile) calls it itself. */
VOLT_API volt_status volt_optimizer_check_lr(volt_optimizer *opt);

/* Restrict unit `unit` to floats [lo, hi) of its buffers (0 <= lo <= hi <= unit numel;
 * lo == hi = nothing to update). The state is reallocated to hi - lo floats; the part
 * overlapping the old range is kept, the rest is zero. Call before training or restore. */
VOLT_API volt_status volt_optimizer_set_range(volt_optimizer *opt, int unit, int64_t lo, int64_t hi);
/* The unit's current range; returns INVALID_ARG for a bad unit index. */
VOLT_API volt_status volt_optimizer_range(const volt_optimizer *opt, int unit, int64_t *lo, int64_t *hi);

/* The default group's lr (schedulers and lr_find call this). Every other group follows with
 * its own base lr times lr / cfg.lr (LambdaLR: one factor for every group's initial lr;
 * a group without its own lr gets lr itself); with cfg.lr == 0 there is no ratio to keep
 * and every group gets lr. A volt_scheduler sets each group to lr_at(group base lr) itself,
 * which also holds with cfg.lr == 0. lr must be finite and >= 0: else INVALID_ARG (message on
 * the optimizer) and every lr stays as it was, as volt_optimizer_set_group_lr. */
VOLT_API volt_status volt_optimizer_set_lr(volt_optimizer *opt, float lr);
VOLT_API float volt_optimizer_lr(const volt_optimizer *opt);             /* current lr (group 0) */
VOLT_API float volt_optimizer_base_lr(const volt_optimizer *opt);        /* cfg.lr */
/* Parameter groups: 1 + cfg.n_groups + the groups added since (group 0 = the default group,
 * possibly empty); 0 for NULL. The getters return 0 for a bad g. */
VOLT_API int volt_optimizer_group_count(const volt_optimizer *opt);
VOLT_API float volt_optimizer_group_lr(const volt_optimizer *opt, int g);            /* current */
VOLT_API float volt_optimizer_group_base_lr(const volt_optimizer *opt, int g);       /* resolved */
VOLT_API float volt_optimizer_group_weight_decay(const volt_optimizer *opt, int g);  /* resolved */
VOLT_API int volt_optimizer_group_param_count(const volt_optimizer *opt, int g);     /* members */
/* Parameter-name patterns as groups take them (comma-separated fnmatch globs on the whole
 * name, blanks around an element ignored), for callbacks that name parameters the same way
 * (BackboneFinetuning). volt_pattern_match: some element matches name. volt_patterns_check:
 * VOLT_OK when every element is non-empty and shorter than 256 bytes and, with ps (NULL: the
 * syntax alone), matches some parameter of ps; else INVALID_ARG and err says which element
 * and why, in the words the optimizer's own group checks use. */
VOLT_API bool volt_pattern_match(const char *patterns, const char *name);
VOLT_API volt_status volt_patterns_check(const char *patterns, const volt_params *ps, char *err, size_t errlen);
/* torch's optimizer.add_param_group, as Lightning's BaseFinetuning uses it: a new last group
 * of the parameters matching g->params (the patterns as in cfg.groups), with g->lr and
 * g->weight_decay (NAN: the config's). volt's parameters are always in some group, so the
 * matching ones MOVE into the new group from where they were (torch's rule is that a
 * parameter is in one group; Lightning adds frozen parameters that were in none). An added
 * group is not scheduled: a volt_scheduler and volt_optimizer_set_lr leave its lr alone (torch's
 * schedulers zip their base lrs with the groups they were made with; PLATEAU reduces it from its
 * current lr, as torch's ReduceLROnPlateau reduces every param group);
 * volt_optimizer_set_group_lr moves it. Its Adam bias correction and its SGD momentum start
 * at its own first step (torch's per-parameter step count starts at a parameter's first
 * update). Call between steps; a compiled step is captured again. Checkpoints keep added
 * groups and a resumed fit adds them back (docs/OPTIMIZERS.md). INVALID_ARG for an element
 * matching no parameter, or past VOLT_OPTIM_MAX_GROUPS groups besides the default. */
VOLT_API volt_status volt_optimizer_add_param_group(volt_optimizer *opt, const volt_optim_group *g);
/* optimizer.param_groups[g]["lr"] = lr: any group; lr >= 0 and finite (else INVALID_ARG). A
 * scheduler sets the config's groups again at its next step. */
VOLT_API volt_status volt_optimizer_set_group_lr(volt_optimizer *opt, int g, float lr);
/* 1 + cfg.n_groups: groups [0, this) are the config's, the rest were added. */
VOLT_API int volt_optimizer_config_group_count(const volt_optimizer *opt);
/* Group g's patterns (NULL for the default group or a bad g). */
VOLT_API const char *volt_optimizer_group_params(const volt_optimizer *opt, int g);
/* The step count when group g was added (0 for the config's groups). */
VOLT_API int64_t volt_optimizer_group_first_step(const volt_optimizer *opt, int g);
/* The group parameter p (of the optimizer's store) belongs to; -1 if it is not there. */
VOLT_API int volt_optimizer_param_group(const volt_optimizer *opt, const volt_tensor *p);
VOLT_API int64_t volt_optimizer_step_count(const volt_optimizer *opt);   /* steps taken */
/* On restore; negative counts are taken as 0. */
VOLT_API void volt_optimizer_set_step_count(volt_optimizer *opt, int64_t steps);

/* ---- checkpoint access to the state ---------------------------------------------- */
/* SGD with momentum: 1 ("momentum_buffer"); Adam/AdamW: 2 ("exp_avg", "exp_avg_sq");
 * SGD without momentum: 0; plus "weight_average" last when averaging is on. Names follow
 * torch.optim's state_dict keys. */
VOLT_API int volt_optimizer_state_count(const volt_optimizer *opt);
VOLT_API const char *volt_optimizer_state_name(const volt_optimizer *opt, int k);  /* NULL if k bad */
/* State k of unit `unit`: a buffer of hi - lo floats holding unit floats [lo, hi) (lo, hi
 * may be NULL). Valid until the next set_range of that unit or destroy; NULL for bad
 * arguments or an empty range, and when the states are not f32. A DEVICE pointer (the
 * param store's device, like the unit buffers): read and fill it with copies through the
 * backend (checkpoint save/restore do), never by dereferencing it on the host. */
VOLT_API float *volt_optimizer_state(volt_optimizer *opt, int unit, int k, int64_t *lo, int64_t *hi);
/* The same buffer in any state dtype: hi - lo elements of volt_optimizer_state_dtype. */
VOLT_API void *volt_optimizer_state_raw(volt_optimizer *opt, int unit, int k, int64_t *lo, int64_t *hi);
VOLT_API volt_dtype volt_optimizer_state_dtype(const volt_optimizer *opt);
/* Bytes of state this optimizer holds (all units' ranges, all states). */
VOLT_API int64_t volt_optimizer_state_bytes(const volt_optimizer *opt);

/* ---- weight averaging (EMA / SWA; Lightning's WeightAveraging, torch's AveragedModel) ---- */
typedef enum volt_optim_average {
    VOLT_OPTIM_AVERAGE_NONE = 0,
    VOLT_OPTIM_AVERAGE_EMA,    /* avg = decay*avg + (1-decay)*p (torch get_ema_avg_fn) */
    VOLT_OPTIM_AVERAGE_SWA,    /* the equal average of every update: lerp_(p, 1/(n+1)) */
} volt_optim_average;
/* The extra state's name (volt_optimizer_state_name; checkpoints "optimizer.weight_average.<param>"). */
#define VOLT_OPTIM_AVERAGE_STATE "weight_average"

/* Add a state holding an average of the parameter values, started as a copy of them (as
 * AveragedModel copies the model), updated inside every volt_optimizer_step after the
 * parameter update, one launch per unit over the unit's range (all its elements, frozen
 * parameters too); the first update copies the values (n_averaged == 0). It is the last state
 * (volt_optimizer_state_count grows by one), so checkpoints, set_range, resharding and
 * state_dtype hold for it as for the others. Before the first step; over the ranges set so far
 * (a later set_range starts the new part from the values).
 * mode EMA: decay in [0, 1). UNSUPPORTED when the parameters' dtype is not the states' (the
 * swap must be exact) or the backend has no averaging kernel. */
VOLT_API volt_status volt_optimizer_enable_average(volt_optimizer *opt, volt_optim_average mode, float decay);
VOLT_API volt_optim_average volt_optimizer_average_mode(const volt_optimizer *opt);   /* NONE when off */
/* Whether the next steps update the average (default true): false makes them leave it (the
 * launch stays, with a coefficient that changes nothing, so a captured step is unchanged). */
VOLT_API void volt_optimizer_set_average_updates(volt_optimizer *opt, bool update);
/* Updates so far (AveragedModel.n_averaged); set on restore. */
VOLT_API int64_t volt_optimizer_average_count(const volt_optimizer *opt);
VOLT_API void volt_optimizer_set_average_count(volt_optimizer *opt, int64_t n);
/* One update of the average now, outside a step (Lightning's epoch-end update). */
VOLT_API volt_status volt_optimizer_average_update(volt_optimizer *opt);
/* Exchange the parameter values and the average over every unit's range (bit for bit: twice
 * is the identity); copy the average into the values; restart the average from the values
 * (n_averaged = 0). Under a sharded strategy these touch this rank's ranges only. */
VOLT_API volt_status volt_optimizer_average_swap(volt_optimizer *opt);
VOLT_API volt_status volt_optimizer_average_copy_to_params(volt_optimizer *opt);
VOLT_API volt_status volt_optimizer_average_reset(volt_optimizer *opt);

/* ---- schedulers ------------------------------------------------------------------ */
typedef enum volt_sched_kind {
    VOLT_SCHED_CONSTANT = 0,   /* base */
    VOLT_SCHED_LINEAR_WARMUP,  /* 0 -> base over warmup_steps, then base
                                  (HF get_constant_schedule_with_warmup) */
    VOLT_SCHED_LINEAR,         /* warmup, then linear decay to 0 at total_steps
                                  (HF get_linear_schedule_with_warmup) */
    VOLT_SCHED_COSINE,         /* warmup, then half-cosine to min_lr_ratio*base at total_steps
                                  (HF get_cosine_[with_min_lr_]schedule_with_warmup) */
    VOLT_SCHED_STEP,           /* base * gamma^floor(step / step_size) (torch StepLR) */
    VOLT_SCHED_PLATEAU,        /* config version 2: torch ReduceLROnPlateau, stepped with a metric
                                  (volt_scheduler_step_metric; the trainer: `monitor`'s value) */
    VOLT_SCHED_KIND_COUNT
} volt_sched_kind;

typedef enum volt_sched_interval {
    VOLT_SCHED_EVERY_STEP = 0, /* the trainer calls volt_scheduler_step per optimizer step */
    VOLT_SCHED_EVERY_EPOCH,    /* ... per epoch */
} volt_sched_interval;

typedef struct volt_scheduler_config {
    uint32_t version;          /* VOLT_SCHEDULER_CONFIG_VERSION, set by _init */
    volt_sched_kind kind;      /* default CONSTANT */
    int64_t warmup_steps;      /* LINEAR_WARMUP, LINEAR, COSINE; >= 0; default 0 */
    int64_t total_steps;       /* LINEAR, COSINE: > warmup_steps; default 0 (must be set) */
    int64_t step_size;         /* STEP: > 0; default 0 (must be set) */
    float gamma;               /* STEP: finite, >= 0; default 0.1 (> 1 is accepted, as torch: an lr
                                  that overflows float fails the optimizer step that would use it) */
    float min_lr_ratio;        /* COSINE: floor as a fraction of base, in [0, 1]; default 0 */
    volt_sched_interval interval;  /* read by the trainer; default EVERY_STEP */
    /* ---- version 2: PLATEAU, torch's ReduceLROnPlateau with its defaults (_init) ---- */
    const char *monitor;       /* the trainer steps it with this metric's latest value (Lightning's
                                  lr_scheduler_config "monitor"): required in a trainer; default NULL */
    bool strict;               /* default true: a monitor nobody logged fails fit; false: a warning and
                                  that step is skipped (Lightning's "strict") */
    bool mode_max;             /* default false: lower is better ("min"); true: "max" */
    double factor;             /* lr *= factor on a plateau; in [0, 1); default 0.1 */
    int64_t patience;          /* bad steps tolerated before a reduction; >= 0; default 10 */
    double threshold;          /* what counts as better; >= 0; default 1e-4 (compared in double, as torch) */
    bool threshold_abs;        /* default false: relative (best * (1 -/+ threshold)); true: absolute */
    int64_t cooldown;          /* steps after a reduction in which bad steps are not counted; default 0 */
    double min_lr;             /* no group's lr goes below it; >= 0; default 0 */
    double eps;                /* a reduction smaller than this is not made; >= 0; default 1e-8 */
} volt_scheduler_config;
#define VOLT_SCHEDULER_CONFIG_VERSION 2u

VOLT_API void volt_scheduler_config_init(volt_scheduler_config *cfg);
VOLT_API volt_status volt_scheduler_config_validate(const volt_scheduler_config *cfg);
/* The lr at scheduler step `step` (pure; the HF/torch lambda, in double, times base_lr).
 * As in HF, COSINE past total_steps follows the cosine back up, LINEAR stays at 0.
 * An invalid config gives base_lr; a negative step is step 0. */
VOLT_API float volt_scheduler_lr_at(const volt_scheduler_config *cfg, float base_lr, int64_t step);

/* opt is borrowed and must outlive the scheduler; base lr = volt_optimizer_base_lr(opt).
 * Sets the optimizer's lr to lr_at(0) (as torch's LambdaLR constructor does). */
VOLT_API volt_status volt_scheduler_create(const volt_scheduler_config *cfg, volt_optimizer *opt,
                                  volt_scheduler **out);
VOLT_API void volt_scheduler_destroy(volt_scheduler *s);                      /* NULL-safe */
VOLT_API const volt_scheduler_config *volt_scheduler_get_config(const volt_scheduler *s);
/* Advance the counter by one (it stays at INT64_MAX once there) and set the optimizer's lr to
 * lr_at(counter). PLATEAU: nothing (it steps with a metric). An lr that is not finite (STEP with
 * gamma > 1 overflows float: PyTorch accepts such a gamma, and so does the config check) is set
 * all the same, noted: the optimizer's next step fails with VOLT_ERR_NUMERIC naming this
 * scheduler's kind, its step and the value (volt_optimizer_check_lr). */
VOLT_API void volt_scheduler_step(volt_scheduler *s);
/* PLATEAU (torch's ReduceLROnPlateau.step(metric)): count the step; a metric better than the
 * best by the threshold resets the bad count, another (NaN too) adds one, none counted during a
 * cooldown; past `patience` bad steps every group's lr becomes max(lr * factor, min_lr) (when that
 * lowers it by more than eps) and the cooldown starts. VOLT_ERR_INVALID_ARG for another kind. */
VOLT_API volt_status volt_scheduler_step_metric(volt_scheduler *s, double metric);
/* PLATEAU's state (what a checkpoint keeps): the best metric so far, the bad steps counted, the
 * cooldown left and the reductions that lowered an lr. The lrs of the config's groups follow from
 * these and their base lrs (an lr set by hand in between is not kept, unlike torch's, which
 * reduces whatever lr is current); a group added since (volt_optimizer_add_param_group) is
 * reduced from its current lr at each reduction, as torch reduces every param group. */
typedef struct volt_plateau_state { double best; int64_t num_bad, cooldown_left, reductions; } volt_plateau_state;
VOLT_API volt_status volt_scheduler_plateau_state(const volt_scheduler *s, volt_plateau_state *out);
/* Restores one (and sets the config groups' lrs); VOLT_ERR_INVALID_ARG for another kind, a NaN
 * best, or counts outside [0, patience], [0, cooldown] and [0, 100000]. */
VOLT_API volt_status volt_scheduler_set_plateau_state(volt_scheduler *s, const volt_plateau_state *st);
VOLT_API int64_t volt_scheduler_last_step(const volt_scheduler *s);
/* Checkpoint restore: set the counter (>= 0) and the optimizer's lr to lr_at(step);
 * VOLT_ERR_NUMERIC when that lr is not finite (set and noted as volt_scheduler_step does). */
VOLT_API volt_status volt_scheduler_set_last_step(volt_scheduler *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
