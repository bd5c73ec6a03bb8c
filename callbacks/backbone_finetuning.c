/* BackboneFinetuning (Lightning's BaseFinetuning / BackboneFinetuning): train the head first
 * with the backbone frozen, then the backbone too, in its own parameter group whose lr starts
 * low and grows each epoch.
 *
 * Lightning's sequence, kept: the backbone is frozen before training (in setup("fit"), so the
 * tuner's lr_find sweeps the head only, as Lightning's; on_fit_start, after a resume has been
 * read, thaws it again when the checkpoint's optimizer has the backbone's group); at the start of epoch unfreeze_backbone_at_epoch it is made trainable
 * and added to the optimizer (optimizer.add_param_group: volt_optimizer_add_param_group) with lr
 * backbone_initial_lr or group 0's current lr x backbone_initial_ratio_lr; at each later epoch
 * start its lr becomes lambda_func(epoch + 1) x the previous one, no higher than group 0's with
 * should_align. The group is the optimizer's last, which no scheduler moves (torch's schedulers
 * know the groups they were made with).
 *
 * Resume: the checkpoint holds the added group (its patterns, lr and step count:
 * trainer/checkpoint.c) and this callback's state (whether the backbone was thawed and its
 * previous lr). The trainer adds the group back before on_fit_start, which then finds it and
 * thaws the backbone instead of freezing it. A fit whose optimizer has no such group (a
 * checkpoint from before the unfreeze) starts frozen again; a second fit on the same trainer
 * keeps its optimizer, the group with it, and so a trainable backbone.
 *
 * Unlike Lightning (epoch == unfreeze_backbone_at_epoch), the unfreeze happens at the first
 * epoch start at or after that epoch: a fit resumed past it, with the callback newly added,
 * still unfreezes (at its next epoch start). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "volt/trainer.h"
#include "callbacks/util.h"

typedef struct bf {
    volt_backbone_finetuning_config cfg;
    char *backbone;        /* cfg.backbone's copy */
    int64_t unfrozen_at;   /* the epoch it was unfrozen at, -1 while frozen: the lr grows after it */
    double previous_lr;    /* Lightning's previous_backbone_lr (NAN before the unfreeze) */
} bf;

static bool in_backbone(const bf *b, const char *name) { return volt_pattern_match(b->backbone, name); }

/* requires_grad of every backbone parameter; the count of them */
static int set_trainable(const bf *b, volt_trainer *t, bool on) {
    volt_params *ps = volt_trainer_params(t);
    int n = 0;
    for (int i = 0; ps && i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        if (!in_backbone(b, p->name)) continue;
        volt_param_set_requires_grad(p, on);
        n++;
    }
    return n;
}

/* The optimizer's group that is the backbone's (added, same patterns); -1 if none. */
static int backbone_group(const bf *b, const volt_optimizer *opt) {
    for (int g = volt_optimizer_group_count(opt) - 1; g >= volt_optimizer_config_group_count(opt); g--) {
        const char *pp = volt_optimizer_group_params(opt, g);
        if (pp && !strcmp(pp, b->backbone)) return g;
    }
    return -1;
}

/* Lightning's freeze_before_training, in setup("fit") (fit and the tuner's runs): every element
 * of the pattern names some parameter (a typo would otherwise train the whole model) */
static volt_status bf_setup(void *self, volt_trainer *t, volt_stage stage) {
    const bf *b = self;
    if (stage != VOLT_STAGE_FIT) return VOLT_OK;
    char why[512];
    if (volt_patterns_check(b->backbone, volt_trainer_params(t), why, sizeof why) < 0)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "backbone %s (Lightning's pl_module.backbone)", why);
    set_trainable(b, t, false);
    return VOLT_OK;
}

static volt_status bf_fit_start(void *self, volt_trainer *t) {
    bf *b = self;
    volt_optimizer *opt = volt_trainer_optimizer(t);
    if (!opt) return volt_trainer_fail(t, VOLT_ERR_STATE, "the fit has no optimizer");
    volt_params *ps = volt_trainer_params(t);
    const bool zero = volt_trainer_is_global_zero(t);
    const int64_t epoch = volt_trainer_current_epoch(t);
    if (backbone_group(b, opt) >= 0) {   /* a resumed fit: the checkpoint's group is back */
        if (isnan(b->previous_lr)) b->previous_lr = volt_optimizer_group_lr(opt, backbone_group(b, opt));   /* no saved state */
        if (b->unfrozen_at < 0) b->unfrozen_at = b->cfg.unfreeze_backbone_at_epoch < epoch ? b->cfg.unfreeze_backbone_at_epoch : epoch;
        if (b->unfrozen_at != b->cfg.unfreeze_backbone_at_epoch && zero)
            fprintf(stderr, "note: BackboneFinetuning: the checkpoint's backbone was unfrozen at epoch %lld; this run's "
                    "unfreeze_backbone_at_epoch %lld changes nothing now (its lr grows at every later epoch start)\n",
                    (long long)b->unfrozen_at, (long long)b->cfg.unfreeze_backbone_at_epoch);
        set_trainable(b, t, true);
        return VOLT_OK;
    }
    b->unfrozen_at = -1;   /* a new fit, or a checkpoint from before the unfreeze: frozen since setup */
    b->previous_lr = NAN;
    /* nothing left to train until the unfreeze: a backward with no parameter would fail later,
     * naming no pattern */
    if (epoch < b->cfg.unfreeze_backbone_at_epoch) {
        int free_params = 0;
        for (int i = 0; i < volt_params_count(ps); i++) free_params += (volt_params_at(ps, i)->flags & VOLT_TENSOR_REQUIRES_GRAD) != 0;
        if (!free_params)
            return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "backbone '%s' holds every trainable parameter of the model: "
                                     "nothing would train before epoch %lld (the backbone is the part frozen first; the "
                                     "head must stay out of it)", b->backbone, (long long)b->cfg.unfreeze_backbone_at_epoch);
    }
    const volt_trainer_config *tc = volt_trainer_get_config(t);
    if (zero && tc && tc->max_epochs >= 0 && b->cfg.unfreeze_backbone_at_epoch >= tc->max_epochs)
        fprintf(stderr, "warning: BackboneFinetuning: unfreeze_backbone_at_epoch %lld is not before max_epochs %lld: the backbone "
                "stays frozen for the whole fit\n", (long long)b->cfg.unfreeze_backbone_at_epoch, (long long)tc->max_epochs);
    return VOLT_OK;
}

static double lambda_at(const bf *b, int64_t epoch) {
    return b->cfg.lambda_func ? b->cfg.lambda_func(epoch) : b->cfg.multiplier;
}

static volt_status bf_epoch_start(void *self, volt_trainer *t) {
    bf *b = self;
    volt_optimizer *opt = volt_trainer_optimizer(t);
    const int64_t epoch = volt_trainer_current_epoch(t);
    const bool unfrozen = b->unfrozen_at >= 0;
    if (!opt || (!unfrozen && epoch < b->cfg.unfreeze_backbone_at_epoch)) return VOLT_OK;
    const double current = volt_optimizer_group_lr(opt, 0);
    if (!unfrozen) {
        const double lr = isnan(b->cfg.backbone_initial_lr) ? current * b->cfg.backbone_initial_ratio_lr : b->cfg.backbone_initial_lr;
        /* torch's add_param_group gives the group the optimizer's defaults: a backbone parameter
         * of a group with another weight decay (a no-decay group) changes it, said once */
        const volt_optimizer_config *oc = volt_optimizer_get_config(opt);
        volt_params *ps = volt_trainer_params(t);
        int other_wd = 0;
        for (int i = 0; oc && i < volt_params_count(ps); i++) {
            volt_tensor *p = volt_params_at(ps, i);
            const int pg = volt_optimizer_param_group(opt, p);
            other_wd += in_backbone(b, p->name) && pg >= 0 && volt_optimizer_group_weight_decay(opt, pg) != oc->weight_decay;
        }
        if (other_wd && volt_trainer_is_global_zero(t))
            fprintf(stderr, "note: BackboneFinetuning: %d backbone parameters were in a parameter group with another weight decay "
                    "(a no-decay group); in the backbone's group they get the optimizer's, %g (torch's add_param_group "
                    "defaults, as in Lightning)\n", other_wd, (double)oc->weight_decay);
        const int n = set_trainable(b, t, true);
        const volt_optim_group g = { .params = b->backbone, .lr = (float)lr, .weight_decay = NAN };
        volt_status st = volt_optimizer_add_param_group(opt, &g);
        if (st < 0) {
            set_trainable(b, t, false);
            return volt_trainer_fail(t, st, "adding the backbone's parameter group: %s", volt_optimizer_errmsg(opt));
        }
        b->unfrozen_at = epoch;
        b->previous_lr = lr;   /* in double, as Lightning's chain; the group holds it as a float */
        if (b->cfg.verbose && volt_trainer_is_global_zero(t))
            fprintf(stderr, "BackboneFinetuning: epoch %lld: %d backbone parameters unfrozen; current lr: %.7g, backbone lr: %.7g\n",
                    (long long)epoch, n, current, lr);
        return VOLT_OK;
    }
    if (epoch <= b->unfrozen_at) return VOLT_OK;   /* the unfreeze's own epoch, resumed at its start */
    const int g = backbone_group(b, opt);
    if (g < 0) return volt_trainer_fail(t, VOLT_ERR_STATE, "the optimizer lost the backbone's group");
    double next = lambda_at(b, epoch + 1) * b->previous_lr;
    if (b->cfg.should_align && next > current) next = current;
    if (!(next >= 0) || !isfinite(next))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "epoch %lld: the backbone's lr would be %g (lambda_func "
                                 "gave %g)", (long long)epoch, next, lambda_at(b, epoch + 1));
    volt_status st = volt_optimizer_set_group_lr(opt, g, (float)next);
    if (st < 0) return volt_trainer_fail(t, st, "%s", volt_optimizer_errmsg(opt));
    b->previous_lr = next;
    if (b->cfg.verbose && volt_trainer_is_global_zero(t))
        fprintf(stderr, "BackboneFinetuning: epoch %lld: current lr: %.7g, backbone lr: %.7g\n", (long long)epoch, current, next);
    return VOLT_OK;
}

static char *bf_state_dict(void *self) {
    const bf *b = self;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "backbone", b->backbone);
    cJSON_AddNumberToObject(o, "unfrozen_at_epoch", (double)b->unfrozen_at);   /* -1: still frozen */
    if (isfinite(b->previous_lr)) cJSON_AddNumberToObject(o, "previous_backbone_lr", b->previous_lr);
    else cJSON_AddNullToObject(o, "previous_backbone_lr");
    char *js = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return js;
}

static volt_status bf_load_state_dict(void *self, volt_trainer *t, const char *json) {
    bf *b = self;
    cJSON *o = cJSON_Parse(json);
    const cJSON *bb = cJSON_GetObjectItemCaseSensitive(o, "backbone"), *pl = cJSON_GetObjectItemCaseSensitive(o, "previous_backbone_lr"),
                *ua = cJSON_GetObjectItemCaseSensitive(o, "unfrozen_at_epoch");
    const bool ua_ok = cJSON_IsNumber(ua) && ua->valuedouble >= -1 && ua->valuedouble <= 1e15 && ua->valuedouble == floor(ua->valuedouble);
    volt_status st = VOLT_OK;
    if (!cJSON_IsString(bb) || !ua_ok ||
        !(cJSON_IsNull(pl) || (cJSON_IsNumber(pl) && pl->valuedouble >= 0 && isfinite(pl->valuedouble) && pl->valuedouble < 1e30)) ||
        (ua->valuedouble >= 0 && !cJSON_IsNumber(pl)))
        st = volt_trainer_fail(t, VOLT_ERR_CORRUPT, "the checkpoint's state is damaged");
    else if (strcmp(bb->valuestring, b->backbone))
        st = volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "the checkpoint's backbone is '%s', this run's '%s'",
                               bb->valuestring, b->backbone);
    else {
        b->unfrozen_at = (int64_t)ua->valuedouble;
        b->previous_lr = cJSON_IsNumber(pl) ? pl->valuedouble : NAN;
    }
    cJSON_Delete(o);
    return st;
}

static void bf_destroy(void *self) {
    bf *b = self;
    if (!b) return;
    free(b->backbone);
    free(b);
}

static const volt_callback_ops bf_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "BackboneFinetuning",
    .on_fit_start = bf_fit_start,
    .on_train_epoch_start = bf_epoch_start,
    .setup = bf_setup,
    .state_dict = bf_state_dict,
    .load_state_dict = bf_load_state_dict,
    .destroy = bf_destroy,
};

void volt_backbone_finetuning_config_init(volt_backbone_finetuning_config *cfg) {
    if (!cfg) return;
    *cfg = (volt_backbone_finetuning_config){
        .version = VOLT_BACKBONE_FINETUNING_CONFIG_VERSION, .unfreeze_backbone_at_epoch = 10, .multiplier = 1.5,
        .backbone_initial_ratio_lr = 0.1, .backbone_initial_lr = NAN, .should_align = true,
    };
}

volt_status volt_add_backbone_finetuning(volt_trainer *t, const volt_backbone_finetuning_config *cfg) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!cfg) return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "BackboneFinetuning: NULL config");
    if (cfg->version < 1 || cfg->version > VOLT_BACKBONE_FINETUNING_CONFIG_VERSION)
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "volt_backbone_finetuning_config: version %u, this library knows 1..%u (call "
                                 "volt_backbone_finetuning_config_init)", cfg->version, VOLT_BACKBONE_FINETUNING_CONFIG_VERSION);
    if (!cfg->backbone || !cfg->backbone[0])
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "BackboneFinetuning: backbone (the patterns of its parameters, e.g. "
                                 "\"distilbert.*\") is required");
    char why[512];
    if (volt_patterns_check(cfg->backbone, NULL, why, sizeof why) < 0)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "BackboneFinetuning: backbone %s", why);
    if (cfg->unfreeze_backbone_at_epoch < 0)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "BackboneFinetuning: unfreeze_backbone_at_epoch %lld (epochs are 0-based, "
                                 ">= 0)", (long long)cfg->unfreeze_backbone_at_epoch);
    if (!cfg->lambda_func && !(cfg->multiplier > 0 && isfinite(cfg->multiplier)))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "BackboneFinetuning: multiplier %g (must be > 0)", cfg->multiplier);
    if (!(cfg->backbone_initial_ratio_lr >= 0 && isfinite(cfg->backbone_initial_ratio_lr)))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "BackboneFinetuning: backbone_initial_ratio_lr %g (must be >= 0)",
                                 cfg->backbone_initial_ratio_lr);
    if (!isnan(cfg->backbone_initial_lr) && !(cfg->backbone_initial_lr >= 0 && isfinite(cfg->backbone_initial_lr)))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "BackboneFinetuning: backbone_initial_lr %g (must be >= 0, or NAN for the "
                                 "ratio's)", cfg->backbone_initial_lr);
    if (volt__cb_has(t, bf_ops.name))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "BackboneFinetuning: the trainer has one already");
    bf *b = calloc(1, sizeof *b);
    if (!b || !(b->backbone = strdup(cfg->backbone))) {
        bf_destroy(b);
        return volt_trainer_fail(t, VOLT_ERR_NOMEM, "BackboneFinetuning: out of memory");
    }
    b->cfg = *cfg;
    b->cfg.backbone = b->backbone;
    b->previous_lr = NAN;
    b->unfrozen_at = -1;
    return volt_trainer_add_callback(t, &bf_ops, b);
}
