/* EarlyStopping: Lightning's callback of that name, written against the public API only.
 *
 * Where it checks (check_on_train_epoch_end): 0 after each validation in fit (not the sanity
 * check); 1 at each train epoch's end; -1 (Lightning's None) resolved at fit start as Lightning's
 * setup() does, "trainer.val_check_interval == 1.0 and trainer.check_val_every_n_epoch == 1":
 * false is 0; true checks once per epoch at its end — after the epoch-end validation when one
 * ran (every validation of such a fit is at an epoch's end), else at train epoch end (es_resolve
 * says why not at on_train_epoch_end itself). The decision itself is volt__cb_es_update (below);
 * its state (wait count, best score, stopped epoch, patience) travels in checkpoints, so a
 * resumed run stops where the uninterrupted one would. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "volt/trainer.h"
#include "callbacks/early_stopping.h"
#include "callbacks/util.h"

/* ---- EarlyStopping --------------------------------------------------------------------------- */

void volt__cb_es_init(volt_cb_es_state *st, volt_mode mode) {
    st->best = mode == VOLT_MAX ? -INFINITY : INFINITY;
    st->wait = 0;
    st->stopped_epoch = 0;
}

bool volt__cb_es_update(const volt_early_stopping_config *cfg, volt_cb_es_state *st, double current,
                       char *reason, size_t n) {
    char dummy[8];
    if (!reason || !n) { reason = dummy; n = sizeof dummy; }
    reason[0] = 0;
    const char *mon = cfg->monitor ? cfg->monitor : "?";
    volt_mode mode = cfg->mode;
    const char *op = mode == VOLT_MAX ? ">" : "<";
    char cur[64];
    volt__cb_repr(current, cur, sizeof cur);
    if (cfg->check_finite && !isfinite(current)) {
        snprintf(reason, n, "Monitored metric %s = %s is not finite. Previous best value was %.3f. "
                 "Signaling Trainer to stop.", mon, cur, st->best);
        return true;
    }
    if (cfg->has_stopping_threshold && volt__cb_better(current, cfg->stopping_threshold, mode)) {
        snprintf(reason, n, "Stopping threshold reached: %s = %s %s %g. Signaling Trainer to stop.",
                 mon, cur, op, (double)cfg->stopping_threshold);
        return true;
    }
    if (cfg->has_divergence_threshold && volt__cb_better(-current, -(double)cfg->divergence_threshold, mode)) {
        snprintf(reason, n, "Divergence threshold reached: %s = %s %s %g. Signaling Trainer to stop.",
                 mon, cur, mode == VOLT_MAX ? "<" : ">", (double)cfg->divergence_threshold);
        return true;
    }
    double delta = fabs((double)cfg->min_delta);
    bool improved = mode == VOLT_MAX ? current - delta > st->best : current + delta < st->best;
    if (improved) {
        if (isfinite(st->best))
            snprintf(reason, n, "Metric %s improved by %.3f >= min_delta = %g. New best score: %.3f",
                     mon, fabs(st->best - current), (double)cfg->min_delta, current);
        else
            snprintf(reason, n, "Metric %s improved. New best score: %.3f", mon, current);
        st->best = current;
        st->wait = 0;
        return false;
    }
    st->wait++;
    if (st->wait >= cfg->patience) {
        snprintf(reason, n, "Monitored metric %s did not improve in the last %lld records. "
                 "Best score: %.3f. Signaling Trainer to stop.", mon, (long long)st->wait, st->best);
        return true;
    }
    return false;
}

typedef struct es {
    volt_early_stopping_config cfg;  /* cfg.monitor points at monitor below */
    char *monitor;
    volt_cb_es_state st;
    int64_t last_check_step;         /* checkpointed: one check per global step, also across a resume */
    bool restored;
    bool at_val_end, at_train_end;   /* where this fit checks (es_resolve, at fit start) */
    bool val_ran_epoch;
} es;

static volt_status es_check(es *e, volt_trainer *t) {
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    int64_t gs = volt_trainer_global_step(t);
    if ((cfg && cfg->fast_dev_run > 0) || volt_trainer_state_fn(t) != VOLT_FN_FIT || volt_trainer_sanity_checking(t) ||
        gs == e->last_check_step)
        return VOLT_OK;
    double cur;
    if (!volt_trainer_metric(t, e->monitor, &cur)) {
        char avail[2048];
        volt_trainer_metric_names(t, avail, sizeof avail);
        return volt_trainer_fail(t, VOLT_ERR_NOT_FOUND,
            "EarlyStopping conditioned on metric '%s' which is not available. Pass in or modify your "
            "EarlyStopping callback to use any of the following: [%s]", e->monitor, avail);
    }
    e->last_check_step = gs;
    char reason[512];
    bool stop = volt__cb_es_update(&e->cfg, &e->st, cur, reason, sizeof reason);
    if (stop) {
        e->st.stopped_epoch = volt_trainer_current_epoch(t);
        volt_trainer_request_stop(t);
        if (volt_trainer_is_global_zero(t)) fprintf(stderr, "EarlyStopping: %s\n", reason);
    } else if (e->cfg.verbose && reason[0] && volt_trainer_is_global_zero(t)) {
        fprintf(stderr, "EarlyStopping: %s\n", reason);   /* an improvement (Lightning's verbose) */
    }
    return VOLT_OK;
}

/* check_on_train_epoch_end at fit start. -1 is Lightning's None, which its setup() resolves to
 * "trainer.val_check_interval == 1.0 and trainer.check_val_every_n_epoch == 1": 1.0 is volt's
 * val_check_interval 0 (at epoch end) or val_check_fraction 1; a count of batches is not 1.0
 * (Python's int 1 == 1.0 would be: validation after every batch, where Lightning's own comment
 * wants validation ends), check_val_every_n_epoch 0 is Lightning's None. False: validation ends
 * only, so a fit validating every other epoch never looks for a val metric after an epoch that
 * had none. True: once per epoch at its end. Under that resolution every validation in fit runs
 * at an epoch's end, after that epoch's train metrics are final (trainer/loop.c), so the check
 * runs at the end of that validation: the same step and the same metrics as Lightning's
 * on_train_epoch_end check, but before the ModelCheckpoint save at that validation (volt saves
 * there; Lightning's default saves at train epoch end, after the check), so the checkpoint holds
 * the check, and a run resumed from it does not redo the epoch's end without that validation's
 * metrics. At train epoch end only in an epoch without a validation (no val loader, or
 * limit_val_batches = 0). */
static void es_resolve(es *e, const volt_trainer *t) {
    const int c = e->cfg.check_on_train_epoch_end;
    if (c >= 0) {
        e->at_val_end = c == 0;
        e->at_train_end = c == 1;
        return;
    }
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    const bool interval_one = !cfg || (cfg->val_check_fraction > 0 ? cfg->val_check_fraction == 1.0 : cfg->val_check_interval == 0);
    const bool every_one = !cfg || cfg->check_val_every_n_epoch == 1;
    e->at_val_end = true;
    e->at_train_end = interval_one && every_one;
}

/* Validation inside fit runs with stage VALIDATE; volt_trainer_state_fn says it is fit's. */
static volt_status es_on_fit_start(void *self, volt_trainer *t) {
    es *e = self;
    if (!e->restored) e->last_check_step = -1;
    e->restored = false;
    e->val_ran_epoch = false;
    es_resolve(e, t);
    return VOLT_OK;
}

static volt_status es_on_train_epoch_start(void *self, volt_trainer *t) {
    ((es *)self)->val_ran_epoch = false;
    return VOLT_OK;
}

static volt_status es_on_validation_end(void *self, volt_trainer *t) {
    es *e = self;
    if (volt_trainer_sanity_checking(t) || volt_trainer_state_fn(t) != VOLT_FN_FIT) return VOLT_OK;
    e->val_ran_epoch = true;
    return e->at_val_end ? es_check(e, t) : VOLT_OK;
}

/* With -1 resolved true, only an epoch without a validation is checked here (es_resolve). */
static volt_status es_on_train_epoch_end(void *self, volt_trainer *t) {
    es *e = self;
    if (!e->at_train_end || (e->at_val_end && e->val_ran_epoch)) return VOLT_OK;
    return es_check(e, t);
}

static char *es_state_dict(void *self) {
    es *e = self;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "monitor", e->monitor);
    cJSON_AddStringToObject(o, "mode", e->cfg.mode == VOLT_MAX ? "max" : "min");
    cJSON_AddNumberToObject(o, "wait_count", (double)e->st.wait);
    cJSON_AddNumberToObject(o, "stopped_epoch", (double)e->st.stopped_epoch);
    cJSON_AddItemToObject(o, "best_score", volt__cb_json_score(e->st.best));
    cJSON_AddNumberToObject(o, "patience", (double)e->cfg.patience);
    cJSON_AddNumberToObject(o, "last_check_step", (double)e->last_check_step);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* A whole number in [lo, 2^53] (a double's integers; what a run reaches); false for other JSON. */
static bool es_whole(const cJSON *j, double lo, int64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    const double v = j->valuedouble;
    if (!(v >= lo && v <= 9007199254740992.0 && v == floor(v))) return false;
    *out = (int64_t)v;
    return true;
}

/* Lightning keys the callback's state by monitor and mode: a state of another pair is not this
 * callback's, and a resumed run that changed them starts fresh (said on rank 0) instead of
 * comparing the new metric with the old one's best. Only last_check_step is taken from it: the
 * checkpoint's step was checked before it was written, and a run resumed at an epoch's end (a
 * checkpoint from the epoch-end validation) redoes that end without the validation's metrics.
 * Lightning restores patience too: a resumed run keeps the saved one. Nothing is taken until
 * every field checked out: a damaged state is refused (VOLT_ERR_CORRUPT naming the field) and
 * changes nothing. */
static volt_status es_load_state_dict(void *self, volt_trainer *t, const char *json) {
    es *e = self;
    cJSON *o = cJSON_Parse(json);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return volt_trainer_fail(t, VOLT_ERR_CORRUPT, "EarlyStopping: checkpoint state is not a JSON object");
    }
    const cJSON *mon = cJSON_GetObjectItemCaseSensitive(o, "monitor"), *mode = cJSON_GetObjectItemCaseSensitive(o, "mode"),
                *lc = cJSON_GetObjectItemCaseSensitive(o, "last_check_step");
    volt_cb_es_state st = e->st;
    int64_t patience = 0, last = -1;
    const char *bad = NULL, *want = NULL;
    if (!cJSON_IsString(mon) || !*mon->valuestring) {
        bad = "monitor", want = "a metric name";
    } else if (!cJSON_IsString(mode) || (strcmp(mode->valuestring, "min") && strcmp(mode->valuestring, "max"))) {
        bad = "mode", want = "'min' or 'max'";
    } else if (!es_whole(cJSON_GetObjectItemCaseSensitive(o, "wait_count"), 0, &st.wait)) {
        bad = "wait_count", want = "a whole number in [0, 2^53]";
    } else if (!es_whole(cJSON_GetObjectItemCaseSensitive(o, "stopped_epoch"), 0, &st.stopped_epoch)) {
        bad = "stopped_epoch", want = "a whole number in [0, 2^53]";
    } else if (!volt__cb_json_get_score(cJSON_GetObjectItemCaseSensitive(o, "best_score"), &st.best)) {
        bad = "best_score", want = "a number, \"inf\", \"-inf\" or \"nan\"";
    } else if (!es_whole(cJSON_GetObjectItemCaseSensitive(o, "patience"), 0, &patience)) {
        bad = "patience", want = "a whole number in [0, 2^53]";
    } else if (lc && !es_whole(lc, -1, &last)) {
        bad = "last_check_step", want = "a whole number in [-1, 2^53]";
    }
    if (bad) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, bad);
        char *got = v ? cJSON_PrintUnformatted(v) : NULL;
        volt_status rc = volt_trainer_fail(t, VOLT_ERR_CORRUPT, "EarlyStopping: the checkpoint's %s is %.60s, not %s "
                                           "(damaged state)", bad, got ? got : "missing", want);
        free(got);
        cJSON_Delete(o);
        return rc;
    }
    const char *my_mode = e->cfg.mode == VOLT_MAX ? "max" : "min";
    if (strcmp(mon->valuestring, e->monitor) == 0 && strcmp(mode->valuestring, my_mode) == 0) {
        e->st = st;
        e->cfg.patience = patience;
    } else if (volt_trainer_is_global_zero(t)) {
        fprintf(stderr, "volt: warning: EarlyStopping: the checkpoint's state is for monitor '%.200s' (mode '%s'), this "
                "callback monitors '%.200s' (mode '%s'): its wait count and best score are not restored (another "
                "metric's); this run starts fresh\n", mon->valuestring, mode->valuestring, e->monitor, my_mode);
    }
    e->last_check_step = last;
    e->restored = true;
    cJSON_Delete(o);
    return VOLT_OK;
}

static void es_destroy(void *self) {
    es *e = self;
    if (!e) return;
    free(e->monitor);
    free(e);
}

/* Several EarlyStoppings are told apart by the trainer by the order they were added in. */
static const volt_callback_ops es_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "EarlyStopping",
    .on_fit_start = es_on_fit_start,
    .on_train_epoch_start = es_on_train_epoch_start,
    .on_train_epoch_end = es_on_train_epoch_end,
    .on_validation_end = es_on_validation_end,
    .state_dict = es_state_dict,
    .load_state_dict = es_load_state_dict,
    .destroy = es_destroy,
};

void volt_early_stopping_config_init(volt_early_stopping_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_EARLY_STOPPING_CONFIG_VERSION;
    cfg->mode = VOLT_MIN;
    cfg->patience = 3;
    cfg->check_finite = true;
    cfg->check_on_train_epoch_end = -1;
}

volt_status volt_add_early_stopping(volt_trainer *t, const volt_early_stopping_config *cfg) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (cfg && !VOLT_VERSION_OK(cfg->version, VOLT_EARLY_STOPPING_CONFIG_VERSION))
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "volt_early_stopping_config: version %u, this library knows 1..%u "
                                 "(call volt_early_stopping_config_init)", cfg->version, VOLT_EARLY_STOPPING_CONFIG_VERSION);
    if (!cfg || !cfg->monitor || !*cfg->monitor)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "EarlyStopping: monitor is required");
    if (cfg->mode != VOLT_MIN && cfg->mode != VOLT_MAX)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "EarlyStopping: mode must be VOLT_MIN or VOLT_MAX");
    if (cfg->patience < 0 || !isfinite(cfg->min_delta))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "EarlyStopping: patience must be >= 0 and min_delta finite");
    if (cfg->version >= 3 && (cfg->check_on_train_epoch_end < -1 || cfg->check_on_train_epoch_end > 1))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "EarlyStopping: check_on_train_epoch_end must be -1 (auto), 0 or 1, "
                                 "got %d", cfg->check_on_train_epoch_end);
    es *e = calloc(1, sizeof *e);
    if (!e || !(e->monitor = strdup(cfg->monitor))) { free(e); return VOLT_ERR_NOMEM; }
    /* an older caller's struct ends before verbose (version 1) or check_on_train_epoch_end (2) */
    if (cfg->version >= 3) e->cfg = *cfg;
    else {
        memcpy(&e->cfg, cfg, cfg->version >= 2 ? offsetof(volt_early_stopping_config, check_on_train_epoch_end)
                                               : offsetof(volt_early_stopping_config, verbose));
        e->cfg.check_on_train_epoch_end = -1;
    }
    e->cfg.version = VOLT_EARLY_STOPPING_CONFIG_VERSION;
    e->cfg.monitor = e->monitor;
    volt__cb_es_init(&e->st, e->cfg.mode);
    e->last_check_step = -1;
    return volt_trainer_add_callback(t, &es_ops, e);
}
