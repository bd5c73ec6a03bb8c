/* core/optim_internal.h — the optimizer's object, shared by core/optim.c,
 * core/optim_average.c (weight averaging) and core/sched.c (the lr notes). Private to core/. */
#ifndef VOLT_CORE_OPTIM_INTERNAL_H
#define VOLT_CORE_OPTIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include "volt/optim.h"
#include "core/internal.h"
#include "core/err.h"

#define OPT_MAX_STATES 3   /* SGD momentum or Adam's two, and the weight average */
#define OPT_GROUPS (VOLT_OPTIM_MAX_GROUPS + 1)   /* the default group and cfg.groups */
#define PAT_MAX 256                               /* bytes of one pattern element */

typedef struct opt_unit {
    volt_unit *u;
    int64_t lo, hi;                 /* range of the unit this optimizer updates */
    void *state[OPT_MAX_STATES];    /* hi - lo elements of state_dt each, NULL when empty (device) */
    uint8_t *group;                 /* group of each of the unit's parameters; NULL: all group 0 */
} opt_unit;

struct volt_optimizer {
    volt_optimizer_config cfg;
    volt_params *ps;                /* borrowed */
    volt_device *dev;               /* ps->dev: states and coef live there */
    int n_units;
    opt_unit *units;
    int n_states;
    volt_dtype state_dt;            /* cfg.state_dtype */
    int n_groups;                   /* 1 + cfg.n_groups + the groups added since */
    int n_cfg_groups;               /* 1 + cfg.n_groups: the groups a scheduler and set_lr move */
    char *pattern[OPT_GROUPS];      /* copies of cfg.groups[g - 1].params (cfg points at them),
                                       then the added groups' */
    int64_t group_step0[OPT_GROUPS];   /* the step count when the group was added (0: config's) */
    float group_base_lr[OPT_GROUPS], group_wd[OPT_GROUPS], group_lr[OPT_GROUPS];
    int group_params[OPT_GROUPS];   /* parameters in each group */
    volt_opt_coef coef_host[OPT_GROUPS];   /* this step's scalars per group (the H2D copy's fixed source) */
    volt_opt_coef *coef_dev;        /* device copy the update reads: room for OPT_GROUPS, n_groups used */
    float lr;                       /* group 0's current lr (group_lr[0]) */
    int64_t steps;
    int64_t launches;               /* backend updates issued, all steps (tests) */
    /* weight averaging (volt_optimizer_enable_average): the last state, avg_k, is the average */
    volt_optim_average avg_mode;    /* VOLT_OPTIM_AVERAGE_NONE: off */
    int avg_k;
    float avg_decay;                /* EMA */
    bool avg_next;                  /* the next step updates the average */
    int64_t avg_count;              /* updates so far (AveragedModel's n_averaged) */
    /* per group, what last gave it a non-finite or negative lr (a scheduler's overflow), for the
     * step's refusal (volt_optimizer_check_lr); only read while that group's lr is bad */
    char bad_lr_note[OPT_GROUPS][128];
    char errmsg[256];
};

#define opt_fail(opt, st, ...) VOLT__OBJ_ERRF(opt, st, __VA_ARGS__)

/* A scheduler's lr for group g whatever its value (core/sched.c): a non-finite or negative one
 * is kept with `fmt`'s note on what made it (the scheduler's kind, step and numbers), and the
 * next step refuses it with VOLT_ERR_NUMERIC naming it (volt_optimizer_check_lr). */
void volt__optimizer_set_group_lr_noted(volt_optimizer *opt, int g, float lr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Weight averaging (core/optim_average.c). The average's part of a step's coefficients: what
 * an update with `on` does (every group's the same). */
void volt__optim_avg_coef(const volt_optimizer *opt, bool on, volt_opt_coef *c);
/* The unit's average updated from its values over its range, as coef_dev says (one launch). */
void volt__optim_average_unit(volt_optimizer *opt, const opt_unit *ou, const float *skip);

#endif
