/* LearningRateMonitor: logs "lr-<Optimizer>" (e.g. "lr-AdamW") at every optimizer step,
 * with the lr that step uses (read just before it, after the scheduler set it), as a step
 * metric that loggers pick up. With several parameter groups, one metric per group named as
 * Lightning names unnamed groups: "lr-AdamW/pg1" (the default group), "lr-AdamW/pg2", ...
 * With log_momentum / log_weight_decay (Lightning's flags) also "<name>-momentum" (Adam's
 * beta1, SGD's momentum) and "<name>-weight_decay" (the group's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/trainer.h"

static const char *optim_name(volt_optim_kind k) {
    switch (k) {
    case VOLT_OPTIM_SGD: return "SGD";
    case VOLT_OPTIM_ADAM: return "Adam";
    case VOLT_OPTIM_ADAMW: return "AdamW";
    default: return "Optimizer";
    }
}

/* name, and with the flags name-momentum and name-weight_decay, for group g */
static volt_status log_group(const volt_lr_monitor_config *c, volt_trainer *t, volt_optimizer *opt,
                             const volt_optimizer_config *oc, const char *name, int g, double lr) {
    char n[96];
    VOLT_TRY(volt_trainer_log_metric(t, name, lr, VOLT_LOG_STEP));
    if (c->log_momentum && oc) {   /* Lightning: betas[0] where the group has betas, else its momentum (0) */
        const bool betas = oc->kind == VOLT_OPTIM_ADAM || oc->kind == VOLT_OPTIM_ADAMW;
        snprintf(n, sizeof n, "%s-momentum", name);
        VOLT_TRY(volt_trainer_log_metric(t, n, (double)(betas ? oc->beta1 : oc->momentum), VOLT_LOG_STEP));
    }
    if (c->log_weight_decay) {
        snprintf(n, sizeof n, "%s-weight_decay", name);
        VOLT_TRY(volt_trainer_log_metric(t, n, (double)volt_optimizer_group_weight_decay(opt, g), VOLT_LOG_STEP));
    }
    return VOLT_OK;
}

static volt_status lrm_on_before_optimizer_step(void *self, volt_trainer *t) {
    const volt_lr_monitor_config *c = self;
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    volt_optimizer *opt = volt_trainer_optimizer(t);
    if (!opt || (cfg && cfg->fast_dev_run > 0)) return VOLT_OK;
    const volt_optimizer_config *oc = volt_optimizer_get_config(opt);
    char name[64];
    const char *on = optim_name(oc ? oc->kind : VOLT_OPTIM_KIND_COUNT);
    const int ng = volt_optimizer_group_count(opt);
    if (ng <= 1) {
        snprintf(name, sizeof name, "lr-%s", on);
        return log_group(c, t, opt, oc, name, 0, (double)volt_optimizer_lr(opt));
    }
    for (int g = 0; g < ng; g++) {
        snprintf(name, sizeof name, "lr-%s/pg%d", on, g + 1);
        VOLT_TRY(log_group(c, t, opt, oc, name, g, (double)volt_optimizer_group_lr(opt, g)));
    }
    return VOLT_OK;
}

static void lrm_destroy(void *self) { free(self); }

static const volt_callback_ops lrm_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "LearningRateMonitor",
    .on_before_optimizer_step = lrm_on_before_optimizer_step,
    .destroy = lrm_destroy,
};

void volt_lr_monitor_config_init(volt_lr_monitor_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_LR_MONITOR_CONFIG_VERSION;
}

volt_status volt_add_lr_monitor_ex(volt_trainer *t, const volt_lr_monitor_config *cfg) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt_lr_monitor_config def;
    if (!cfg) {
        volt_lr_monitor_config_init(&def);
        cfg = &def;
    }
    if (cfg->version < 1 || cfg->version > VOLT_LR_MONITOR_CONFIG_VERSION)
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "LearningRateMonitor: config version %u, this library knows 1..%u "
                                 "(call volt_lr_monitor_config_init)", cfg->version, VOLT_LR_MONITOR_CONFIG_VERSION);
    volt_lr_monitor_config *self = malloc(sizeof *self);
    if (!self) return VOLT_ERR_NOMEM;
    *self = *cfg;
    return volt_trainer_add_callback(t, &lrm_ops, self);
}

volt_status volt_add_lr_monitor(volt_trainer *t) { return volt_add_lr_monitor_ex(t, NULL); }
