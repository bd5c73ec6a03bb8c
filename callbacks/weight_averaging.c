/* WeightAveraging / EMAWeightAveraging: Lightning 2.6's callbacks of those names, written
 * against the public API only.
 *
 * The average is the optimizer's "weight_average" state (volt_optimizer_enable_average), asked
 * for when the callback is added (volt_trainer_request_weight_averaging) and updated inside the
 * optimizer step on the device; this callback decides which steps update it (should_update,
 * through volt_optimizer_set_average_updates before each batch: a step that does not update it
 * still runs the launch, with a coefficient that changes nothing), updates it at an epoch end
 * when should_update(epoch_idx) says so, swaps it into the model for validation (sanity check
 * included) and back, and copies it into the model at train end. The trainer writes the average
 * as the model's weights in checkpoints (volt_trainer_request_weight_averaging).
 *
 * should_update is EMAWeightAveraging's: a step index (0-based, the step being taken) at or past
 * update_starting_at_step (when set) and a multiple of update_every_n_steps; an epoch index at or
 * past update_starting_at_epoch (when set). WeightAveraging's default (every step, no epoch) is
 * the defaults; volt applies the same gating to SWA. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "volt/trainer.h"
#include "callbacks/util.h"

typedef struct wa {
    volt_weight_averaging_config cfg;
    volt_trainer *t;                 /* borrowed: the trainer owns this callback */
    bool active;                     /* between on_fit_start and on_fit_end */
    bool gate;                       /* the step being taken updates the average */
    int64_t latest_update_step;      /* Lightning's _latest_update_step: global_step after the last update */
    int64_t latest_update_epoch;     /* Lightning's _latest_update_epoch: -1 = none */
    /* a checkpoint's state, taken at on_fit_start: a load that something after this callback
     * refuses (another callback's state, the module's, a rank's) then leaves this callback and
     * the optimizer's average count as they were (setup(fit) drops what such a load left) */
    bool pending;
    int64_t pending_step, pending_epoch, pending_n;
} wa;

static bool should_update_step(const wa *w, int64_t step_idx) {
    const volt_weight_averaging_config *c = &w->cfg;
    return (c->update_starting_at_step < 0 || step_idx >= c->update_starting_at_step) &&
           c->update_every_n_steps > 0 && step_idx % c->update_every_n_steps == 0;
}
static bool should_update_epoch(const wa *w, int64_t epoch_idx) {
    return w->cfg.update_starting_at_epoch >= 0 && epoch_idx >= w->cfg.update_starting_at_epoch;
}

static volt_status wa_setup(void *self, volt_trainer *t, volt_stage stage) {
    (void)t;
    if (stage == VOLT_STAGE_FIT) ((wa *)self)->pending = false;
    return VOLT_OK;
}

static volt_status wa_on_fit_start(void *self, volt_trainer *t) {
    wa *w = self;
    if (volt_optimizer_average_mode(volt_trainer_optimizer(t)) == VOLT_OPTIM_AVERAGE_NONE)
        return volt_trainer_fail(t, VOLT_ERR_STATE, "WeightAveraging: the fit's optimizer holds no average");
    if (w->pending) {   /* the resumed checkpoint's, now that the load was accepted */
        w->latest_update_step = w->pending_step;
        w->latest_update_epoch = w->pending_epoch;
        volt_optimizer_set_average_count(volt_trainer_optimizer(t), w->pending_n);
        w->pending = false;
    }
    w->active = true;
    return VOLT_OK;
}
static volt_status wa_on_fit_end(void *self, volt_trainer *t) {
    (void)t;
    ((wa *)self)->active = false;
    return VOLT_OK;
}

/* The step this batch may take is step_idx = global_step (Lightning asks after it, with
 * global_step - 1: the same index). Set on every batch: with accumulation the step comes at
 * the last micro-batch, global_step unchanged until then. */
static volt_status wa_on_train_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    wa *w = self;
    const int64_t g = volt_trainer_global_step(t);
    w->gate = g + 1 > w->latest_update_step && should_update_step(w, g);
    volt_optimizer_set_average_updates(volt_trainer_optimizer(t), w->gate);
    return VOLT_OK;
}
static volt_status wa_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    wa *w = self;
    const int64_t g = volt_trainer_global_step(t);
    if (w->gate && g > w->latest_update_step) w->latest_update_step = g;   /* the step happened (not skipped) */
    return VOLT_OK;
}

static volt_status wa_on_train_epoch_end(void *self, volt_trainer *t) {
    wa *w = self;
    const int64_t e = volt_trainer_current_epoch(t);
    if (e > w->latest_update_epoch && should_update_epoch(w, e)) {
        volt_optimizer *opt = volt_trainer_optimizer(t);
        volt_status st = volt_optimizer_average_update(opt);
        if (st < 0) return volt_trainer_fail(t, st, "WeightAveraging: %s", volt_optimizer_errmsg(opt));
        w->latest_update_epoch = e;
    }
    return VOLT_OK;
}

static volt_status wa_swap(void *self, volt_trainer *t) {
    wa *w = self;
    return w->active ? volt_trainer_swap_average(t) : VOLT_OK;
}

static volt_status wa_on_train_end(void *self, volt_trainer *t) {
    wa *w = self;
    return w->active ? volt_trainer_copy_average(t) : VOLT_OK;
}

static char *wa_state_dict(void *self) {
    wa *w = self;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "mode", w->cfg.mode == VOLT_OPTIM_AVERAGE_SWA ? "swa" : "ema");
    cJSON_AddNumberToObject(o, "latest_update_step", (double)w->latest_update_step);
    cJSON_AddNumberToObject(o, "latest_update_epoch", (double)w->latest_update_epoch);
    cJSON_AddNumberToObject(o, "n_averaged", (double)volt_optimizer_average_count(volt_trainer_optimizer(w->t)));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static volt_status wa_load_state_dict(void *self, volt_trainer *t, const char *json) {
    wa *w = self;
    cJSON *o = cJSON_Parse(json);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "latest_update_step"),
                *e = cJSON_GetObjectItemCaseSensitive(o, "latest_update_epoch"),
                *n = cJSON_GetObjectItemCaseSensitive(o, "n_averaged"),
                *m = cJSON_GetObjectItemCaseSensitive(o, "mode");
    if (!cJSON_IsObject(o) || !cJSON_IsNumber(s) || !cJSON_IsNumber(e) || !cJSON_IsNumber(n) || !cJSON_IsString(m)) {
        cJSON_Delete(o);
        return volt_trainer_fail(t, VOLT_ERR_CORRUPT, "WeightAveraging: checkpoint state is not the callback's JSON object");
    }
    if (strcmp(m->valuestring, "swa") && strcmp(m->valuestring, "ema")) {
        volt_status st = volt_trainer_fail(t, VOLT_ERR_CORRUPT, "WeightAveraging: the checkpoint's mode is '%.40s', not "
                                           "'ema' or 'swa'", m->valuestring);
        cJSON_Delete(o);
        return st;
    }
    /* whole numbers a run can reach: -1 (none yet) up to 2^53 (a double's integers) */
    const double top = 9007199254740992.0;
    const cJSON *const nums[3] = { s, e, n };
    for (int i = 0; i < 3; i++) {
        const double v = nums[i]->valuedouble;
        if (!(v >= (i == 2 ? 0 : -1) && v <= top && v == floor(v))) {
            volt_status st = volt_trainer_fail(t, VOLT_ERR_CORRUPT, "WeightAveraging: the checkpoint's %s is %g, not a whole "
                                               "number in [%d, 2^53]", nums[i]->string, v, i == 2 ? 0 : -1);
            cJSON_Delete(o);
            return st;
        }
    }
    const bool swa = !strcmp(m->valuestring, "swa");
    if (swa != (w->cfg.mode == VOLT_OPTIM_AVERAGE_SWA)) {
        volt_status st = volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "WeightAveraging: the checkpoint averaged with mode '%s', "
                                           "this run with '%s'", m->valuestring, swa ? "ema" : "swa");
        cJSON_Delete(o);
        return st;
    }
    w->pending_step = (int64_t)s->valuedouble;
    w->pending_epoch = (int64_t)e->valuedouble;
    w->pending_n = (int64_t)n->valuedouble;
    w->pending = true;
    cJSON_Delete(o);
    return VOLT_OK;
}

/* A fit that failed inside a validation (the average swapped in) never swaps back nor reaches
 * on_fit_end: the current weights go back into the model, so a later fit trains from them and
 * a later validate sees them. With no collective (volt_trainer_swap_back_average): the other
 * ranks may have failed elsewhere or died; each rank swaps its own slice, and under a sharded
 * strategy the rest is gathered from the owners at its next use. */
static void wa_on_exception(void *self, volt_trainer *t, volt_status st) {
    (void)st;
    wa *w = self;
    if (volt_trainer_state_fn(t) != VOLT_FN_FIT) return;
    w->active = false;
    if (volt_trainer_average_swapped(t) && volt_trainer_swap_back_average(t) < 0)
        fprintf(stderr, "volt: WeightAveraging: could not swap the current weights back: %s\n", volt_trainer_errmsg(t));
}

static const volt_callback_ops wa_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "WeightAveraging",
    .on_exception = wa_on_exception,
    .setup = wa_setup,
    .on_fit_start = wa_on_fit_start,
    .on_fit_end = wa_on_fit_end,
    .on_train_end = wa_on_train_end,
    .on_train_epoch_end = wa_on_train_epoch_end,
    .on_train_batch_start = wa_on_train_batch_start,
    .on_train_batch_end = wa_on_train_batch_end,
    .on_validation_epoch_start = wa_swap,
    .on_validation_epoch_end = wa_swap,
    .state_dict = wa_state_dict,
    .load_state_dict = wa_load_state_dict,
    .destroy = free,
};

void volt_weight_averaging_config_init(volt_weight_averaging_config *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_WEIGHT_AVERAGING_CONFIG_VERSION;
    cfg->mode = VOLT_OPTIM_AVERAGE_EMA;
    cfg->decay = 0.999f;
    cfg->update_every_n_steps = 1;
    cfg->update_starting_at_step = -1;
    cfg->update_starting_at_epoch = -1;
}

volt_status volt_add_weight_averaging(volt_trainer *t, const volt_weight_averaging_config *cfg) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt_weight_averaging_config c;
    if (!cfg) volt_weight_averaging_config_init(&c);
    else if (!VOLT_VERSION_OK(cfg->version, VOLT_WEIGHT_AVERAGING_CONFIG_VERSION))
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "volt_weight_averaging_config: version %u, this library knows 1..%u "
                                 "(call volt_weight_averaging_config_init)", cfg->version, VOLT_WEIGHT_AVERAGING_CONFIG_VERSION);
    else c = *cfg;
    if (c.mode != VOLT_OPTIM_AVERAGE_EMA && c.mode != VOLT_OPTIM_AVERAGE_SWA)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "WeightAveraging: mode must be EMA or SWA (got %d)", (int)c.mode);
    if (c.mode == VOLT_OPTIM_AVERAGE_EMA && !(c.decay >= 0.f && c.decay < 1.f))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "WeightAveraging: decay %g is not in [0, 1)", (double)c.decay);
    if (c.update_every_n_steps < 1)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "WeightAveraging: update_every_n_steps must be >= 1 (got %lld)",
                                 (long long)c.update_every_n_steps);
    if (c.update_starting_at_step < -1 || c.update_starting_at_epoch < -1)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "WeightAveraging: update_starting_at_step / _epoch must be >= 0, or "
                                 "-1 for none (got %lld / %lld)", (long long)c.update_starting_at_step,
                                 (long long)c.update_starting_at_epoch);
    if (volt__cb_has(t, wa_ops.name))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "WeightAveraging: the trainer has one already (the model has one "
                                 "average)");
    volt_status st = volt_trainer_request_weight_averaging(t, c.mode, c.decay);
    if (st < 0) return st;
    wa *w = calloc(1, sizeof *w);
    if (!w) return VOLT_ERR_NOMEM;
    w->cfg = c;
    w->t = t;
    w->latest_update_epoch = -1;
    return volt_trainer_add_callback(t, &wa_ops, w);
}
