/* LearningRateMonitor: logs "lr-<Optimizer>" (e.g. "lr-AdamW") at every optimizer step,
 * with the lr that step uses (read just before it, after the scheduler set it), as a step
 * metric that loggers pick up. With several parameter groups, one metric per group named as
 * Lightning names unnamed groups: "lr-AdamW/pg1" (the default group), "lr-AdamW/pg2", ... */
#include <stdio.h>
#include <stdlib.h>
#include "volt/trainer.h"

static const char *optim_name(volt_optim_kind k) {
    switch (k) {
    case VOLT_OPTIM_SGD: return "SGD";
    case VOLT_OPTIM_ADAM: return "Adam";
    case VOLT_OPTIM_ADAMW: return "AdamW";
    default: return "Optimizer";
    }
}

static volt_status lrm_on_before_optimizer_step(void *self, volt_trainer *t) {
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    volt_optimizer *opt = volt_trainer_optimizer(t);
    if (!opt || (cfg && cfg->fast_dev_run > 0)) return VOLT_OK;
    const volt_optimizer_config *oc = volt_optimizer_get_config(opt);
    char name[64];
    const char *on = optim_name(oc ? oc->kind : VOLT_OPTIM_KIND_COUNT);
    const int ng = volt_optimizer_group_count(opt);
    if (ng <= 1) {
        snprintf(name, sizeof name, "lr-%s", on);
        return volt_trainer_log_metric(t, name, (double)volt_optimizer_lr(opt), VOLT_LOG_STEP);
    }
    for (int g = 0; g < ng; g++) {
        snprintf(name, sizeof name, "lr-%s/pg%d", on, g + 1);
        VOLT_TRY(volt_trainer_log_metric(t, name, (double)volt_optimizer_group_lr(opt, g), VOLT_LOG_STEP));
    }
    return VOLT_OK;
}

static void lrm_destroy(void *self) { free(self); }

static const volt_callback_ops lrm_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "LearningRateMonitor",
    .on_before_optimizer_step = lrm_on_before_optimizer_step,
    .destroy = lrm_destroy,
};

volt_status volt_add_lr_monitor(volt_trainer *t) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    int *self = calloc(1, sizeof *self);       /* no state; a real pointer all the same */
    if (!self) return VOLT_ERR_NOMEM;
    return volt_trainer_add_callback(t, &lrm_ops, self);
}
