/* LearningRateMonitor: logs "lr-<Optimizer>" (e.g. "lr-AdamW") through volt_trainer_log_metric.
 * With several parameter groups, one metric per group named as Lightning names unnamed groups:
 * "lr-AdamW/pg1" (the default group), "lr-AdamW/pg2", ... With log_momentum / log_weight_decay
 * (Lightning's flags) also "<name>-momentum" (Adam's beta1, SGD's momentum) and
 * "<name>-weight_decay" (the group's).
 *
 * When (logging_interval, Lightning's): "step" at every optimizer step, the lr that step uses
 * (read in on_before_optimizer_step, after the scheduler set it), a step metric; "epoch" once per
 * epoch, the lr at the epoch's start, an epoch metric; None (VOLT_LR_LOG_AUTO, the default) the
 * scheduler's own interval, every step without one. Lightning writes an epoch value straight to
 * its loggers at on_train_epoch_start; volt's loggers write rows at fixed points (the step rows,
 * the epoch row), so the value read at the epoch's start is logged there (callbacks see it from
 * then on) and again at the epoch's end (its validation's start, then on_train_epoch_end), which
 * this callback reaches before the loggers (callbacks/defaults.c orders it first), so the epoch's
 * row carries it. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/trainer.h"
#include "callbacks/util.h"

enum { LRM_GROUPS = VOLT_OPTIM_MAX_GROUPS + 1 };   /* the default group and the most besides it */

/* What one logging reads: each group's lr and decay, the optimizer's momentum. */
typedef struct lrm_values {
    int n;                           /* groups read; 0: none yet */
    volt_optim_kind kind;
    bool has_cfg;                    /* the optimizer's config was there (momentum) */
    double momentum;
    double lr[LRM_GROUPS], wd[LRM_GROUPS];
} lrm_values;

typedef struct lrm {
    volt_lr_monitor_config cfg;
    lrm_values epoch;                /* "epoch": the lr at this epoch's start */
} lrm;

static const char *optim_name(volt_optim_kind k) {
    switch (k) {
    case VOLT_OPTIM_SGD: return "SGD";
    case VOLT_OPTIM_ADAM: return "Adam";
    case VOLT_OPTIM_ADAMW: return "AdamW";
    default: return "Optimizer";
    }
}

/* Lightning's None: the scheduler's interval ("step" without a scheduler) */
static volt_lr_logging_interval interval_of(const lrm *m, const volt_trainer *t) {
    if (m->cfg.logging_interval != VOLT_LR_LOG_AUTO) return m->cfg.logging_interval;
    const volt_scheduler *s = volt_trainer_scheduler(t);
    const volt_scheduler_config *sc = s ? volt_scheduler_get_config(s) : NULL;
    return sc && sc->interval == VOLT_SCHED_EVERY_EPOCH ? VOLT_LR_LOG_EPOCH : VOLT_LR_LOG_STEP;
}

/* Nothing to log: no optimizer, or fast_dev_run (Lightning's DummyLogger takes it all). */
static volt_optimizer *logging_optimizer(volt_trainer *t) {
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    return cfg && cfg->fast_dev_run > 0 ? NULL : volt_trainer_optimizer(t);
}

static void read_values(volt_optimizer *opt, lrm_values *v) {
    const volt_optimizer_config *oc = volt_optimizer_get_config(opt);
    const int ng = volt_optimizer_group_count(opt);
    v->n = ng < LRM_GROUPS ? ng : LRM_GROUPS;
    v->kind = oc ? oc->kind : VOLT_OPTIM_KIND_COUNT;
    v->has_cfg = oc != NULL;
    /* Lightning: betas[0] where the group has betas, else its momentum (0) */
    v->momentum = !oc ? 0.0 : oc->kind == VOLT_OPTIM_ADAM || oc->kind == VOLT_OPTIM_ADAMW ? (double)oc->beta1 : (double)oc->momentum;
    for (int g = 0; g < v->n; g++) {
        v->lr[g] = ng <= 1 ? (double)volt_optimizer_lr(opt) : (double)volt_optimizer_group_lr(opt, g);
        v->wd[g] = (double)volt_optimizer_group_weight_decay(opt, g);
    }
}

/* name, and with the flags name-momentum and name-weight_decay, for every group read */
static volt_status emit(const lrm *m, volt_trainer *t, const lrm_values *v, unsigned flags) {
    const char *on = optim_name(v->kind);
    char name[64], n2[96];
    for (int g = 0; g < v->n; g++) {
        if (v->n <= 1) snprintf(name, sizeof name, "lr-%s", on);
        else snprintf(name, sizeof name, "lr-%s/pg%d", on, g + 1);
        VOLT_TRY(volt_trainer_log_metric(t, name, v->lr[g], flags));
        if (m->cfg.log_momentum && v->has_cfg) {
            snprintf(n2, sizeof n2, "%s-momentum", name);
            VOLT_TRY(volt_trainer_log_metric(t, n2, v->momentum, flags));
        }
        if (m->cfg.log_weight_decay) {
            snprintf(n2, sizeof n2, "%s-weight_decay", name);
            VOLT_TRY(volt_trainer_log_metric(t, n2, v->wd[g], flags));
        }
    }
    return VOLT_OK;
}

/* Lightning's on_train_start check, made at fit start (before the sanity check; a failed
 * on_fit_start fails every rank alike): without a logger the lrs would reach nothing. */
static volt_status lrm_on_fit_start(void *self, volt_trainer *t) {
    (void)self;
    if (!volt__cb_has_logger(t))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "LearningRateMonitor: the trainer has no logger (enable_logger is "
                                 "false and no *Logger callback was added): cannot use LearningRateMonitor without one, the "
                                 "learning rates would reach nothing");
    return VOLT_OK;
}

/* A fit resumed inside an epoch has no epoch start: the lr now is that epoch's (an epoch
 * scheduler moves it only at the epoch's end). */
static volt_status lrm_on_train_start(void *self, volt_trainer *t) {
    lrm *m = self;
    volt_optimizer *opt = logging_optimizer(t);
    m->epoch.n = 0;
    if (opt && interval_of(m, t) == VOLT_LR_LOG_EPOCH) read_values(opt, &m->epoch);
    return VOLT_OK;
}

static volt_status lrm_on_train_epoch_start(void *self, volt_trainer *t) {
    lrm *m = self;
    volt_optimizer *opt = logging_optimizer(t);
    if (!opt || interval_of(m, t) != VOLT_LR_LOG_EPOCH) return VOLT_OK;
    read_values(opt, &m->epoch);
    return emit(m, t, &m->epoch, VOLT_LOG_EPOCH);
}

static volt_status lrm_on_before_optimizer_step(void *self, volt_trainer *t) {
    lrm *m = self;
    volt_optimizer *opt = logging_optimizer(t);
    if (!opt || interval_of(m, t) != VOLT_LR_LOG_STEP) return VOLT_OK;
    lrm_values v;
    read_values(opt, &v);
    return emit(m, t, &v, VOLT_LOG_STEP);
}

/* The epoch's value again where the loggers read the epoch's row: an epoch-end validation's
 * start (the TensorBoard logger writes the epoch's scalars there, the CSV logger keeps them for
 * the row) and the train epoch's end. A mid-epoch validation comes before the epoch's last batch
 * and with no stop pending (a stop or max_steps ends the epoch where it is). */
static volt_status lrm_on_validation_start(void *self, volt_trainer *t) {
    lrm *m = self;
    if (!m->epoch.n || volt_trainer_state_fn(t) != VOLT_FN_FIT || volt_trainer_sanity_checking(t) ||
        !logging_optimizer(t) || interval_of(m, t) != VOLT_LR_LOG_EPOCH)
        return VOLT_OK;
    const volt_trainer_config *c = volt_trainer_get_config(t);
    const bool ending = volt_trainer_batch_in_epoch(t) >= volt_trainer_num_train_batches(t) || volt_trainer_should_stop(t) ||
                        (c && c->max_steps >= 0 && volt_trainer_global_step(t) >= c->max_steps);
    return ending ? emit(m, t, &m->epoch, VOLT_LOG_EPOCH) : VOLT_OK;
}

static volt_status lrm_on_train_epoch_end(void *self, volt_trainer *t) {
    lrm *m = self;
    if (!m->epoch.n || !logging_optimizer(t) || interval_of(m, t) != VOLT_LR_LOG_EPOCH) return VOLT_OK;
    return emit(m, t, &m->epoch, VOLT_LOG_EPOCH);
}

static void lrm_destroy(void *self) { free(self); }

static const volt_callback_ops lrm_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "LearningRateMonitor",
    .on_fit_start = lrm_on_fit_start,
    .on_train_start = lrm_on_train_start,
    .on_train_epoch_start = lrm_on_train_epoch_start,
    .on_before_optimizer_step = lrm_on_before_optimizer_step,
    .on_validation_start = lrm_on_validation_start,
    .on_train_epoch_end = lrm_on_train_epoch_end,
    .destroy = lrm_destroy,
};

void volt_lr_monitor_config_init(volt_lr_monitor_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_LR_MONITOR_CONFIG_VERSION;
    cfg->logging_interval = VOLT_LR_LOG_AUTO;
}

volt_status volt_add_lr_monitor_ex(volt_trainer *t, const volt_lr_monitor_config *cfg) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt_lr_monitor_config def;
    if (!cfg) {
        volt_lr_monitor_config_init(&def);
        cfg = &def;
    }
    if (!VOLT_VERSION_OK(cfg->version, VOLT_LR_MONITOR_CONFIG_VERSION))
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "LearningRateMonitor: config version %u, this library knows 1..%u "
                                 "(call volt_lr_monitor_config_init)", cfg->version, VOLT_LR_MONITOR_CONFIG_VERSION);
    if (cfg->version >= 2 && ((int)cfg->logging_interval < (int)VOLT_LR_LOG_AUTO || (int)cfg->logging_interval > (int)VOLT_LR_LOG_EPOCH))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "LearningRateMonitor: logging_interval must be VOLT_LR_LOG_AUTO "
                                 "(Lightning's None), VOLT_LR_LOG_STEP or VOLT_LR_LOG_EPOCH, got %d", (int)cfg->logging_interval);
    lrm *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    if (cfg->version >= 2) {
        m->cfg = *cfg;
    } else {   /* an older caller's struct ends before logging_interval: it logged every step */
        memcpy(&m->cfg, cfg, offsetof(volt_lr_monitor_config, logging_interval));
        m->cfg.logging_interval = VOLT_LR_LOG_STEP;
    }
    m->cfg.version = VOLT_LR_MONITOR_CONFIG_VERSION;
    return volt_trainer_add_callback(t, &lrm_ops, m);
}

volt_status volt_add_lr_monitor(volt_trainer *t) { return volt_add_lr_monitor_ex(t, NULL); }
