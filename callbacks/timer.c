/* Timer (Lightning's callback): how long each stage took, and a time limit for training checked
 * after every optimizer step or every epoch. Lightning's Trainer(max_time) is a Timer at step
 * interval; volt's trainer checks max_time itself (trainer/loop.c), and this callback adds the
 * epoch interval, the queries and a limit of its own.
 *
 * Stages (Lightning's RunningStage): train (the training loop, from on_train_start: a resumed
 * fit adds the time its checkpoint counted), validate (the last validation, the sanity check's
 * included), test, predict (the last of each). The decision to stop is rank 0's clock,
 * broadcast (volt_trainer_broadcast_bool), so every rank stops at the same boundary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>
#include "volt/trainer.h"
#include "callbacks/util.h"

enum { S_TRAIN, S_VALIDATE, S_TEST, S_PREDICT, N_STAGES };
static const char *const stage_names[N_STAGES] = { "train", "validate", "test", "predict" };

struct volt_timer {
    volt_timer_config cfg;
    double duration;              /* seconds; 0: no limit */
    double start[N_STAGES], end[N_STAGES];   /* monotonic seconds; NAN: not started / not ended */
    double offset;                /* train: what a resumed checkpoint counted */
    bool said;                    /* this fit printed the limit */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int stage_index(volt_stage s) {
    switch (s) {
    case VOLT_STAGE_FIT: return S_TRAIN;
    case VOLT_STAGE_VALIDATE: return S_VALIDATE;
    case VOLT_STAGE_TEST: return S_TEST;
    case VOLT_STAGE_PREDICT: return S_PREDICT;
    default: return -1;
    }
}

static double elapsed(const volt_timer *tm, int i) {
    const double off = i == S_TRAIN ? tm->offset : 0;
    if (isnan(tm->start[i])) return off;
    return (isnan(tm->end[i]) ? now_s() : tm->end[i]) - tm->start[i] + off;
}

double volt_timer_time_elapsed(const volt_timer *tm, volt_stage stage) {
    const int i = stage_index(stage);
    return tm && i >= 0 ? elapsed(tm, i) : NAN;
}

double volt_timer_time_remaining(const volt_timer *tm, volt_stage stage) {
    const int i = stage_index(stage);
    if (!tm || i < 0) return NAN;
    return tm->duration > 0 ? tm->duration - elapsed(tm, i) : INFINITY;
}

/* ---- hooks --------------------------------------------------------------------------------------- */
static void mark(volt_timer *tm, int i, bool start) {
    if (start) {
        tm->start[i] = now_s();
        tm->end[i] = NAN;
    } else {
        tm->end[i] = now_s();
    }
}

/* Lightning's words, once a fit, on rank 0 */
static void say_limit(volt_timer *tm, volt_trainer *t, double el) {
    if (tm->cfg.verbose && !tm->said && volt_trainer_is_global_zero(t)) {
        const long long s = (long long)el;
        fprintf(stderr, "Time limit reached. Elapsed time is %lld:%02lld:%02lld. Signaling Trainer to stop.\n", s / 3600,
                s / 60 % 60, s % 60);
    }
    tm->said = true;
}

/* Rank 0's verdict on the training time, on every rank (called alike on every rank: a
 * collective); a stop requested when it is spent, said once a fit. */
static volt_status check(volt_timer *tm, volt_trainer *t) {
    if (tm->duration <= 0) return VOLT_OK;
    const double el = elapsed(tm, S_TRAIN);
    bool stop = false;
    VOLT_TRY(volt_trainer_broadcast_bool(t, el >= tm->duration, &stop));
    if (!stop) return VOLT_OK;
    volt_trainer_request_stop(t);
    say_limit(tm, t, el);
    return VOLT_OK;
}

/* setup("fit") of a fit (not the tuner's): the count starts from zero, before the checkpoint
 * of a resumed fit is loaded (which sets it to that fit's time); a fit that failed after such
 * a load leaves nothing for the next one. No collective. */
static volt_status tm_setup(void *self, volt_trainer *t, volt_stage stage) {
    volt_timer *tm = self;
    if (stage != VOLT_STAGE_FIT || volt_trainer_state_fn(t) != VOLT_FN_FIT) return VOLT_OK;
    tm->offset = 0;
    tm->said = false;
    tm->start[S_TRAIN] = tm->end[S_TRAIN] = NAN;
    return VOLT_OK;
}

/* The training loop starts: a resumed fit whose checkpoint already spent the limit trains no
 * step (Lightning checks at fit start whatever the interval; here after the sanity check). The
 * checkpoint's time is the same on every rank, so each decides alone. */
static volt_status tm_train_start(void *self, volt_trainer *t) {
    volt_timer *tm = self;
    mark(tm, S_TRAIN, true);
    if (tm->duration > 0 && tm->offset >= tm->duration) {
        volt_trainer_request_stop(t);
        say_limit(tm, t, tm->offset);
    }
    return VOLT_OK;
}

static volt_status tm_train_end(void *self, volt_trainer *t) {
    (void)t;
    mark(self, S_TRAIN, false);
    return VOLT_OK;
}

static volt_status tm_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    volt_timer *tm = self;
    return tm->cfg.interval == VOLT_TIMER_STEP ? check(tm, t) : VOLT_OK;
}

static volt_status tm_train_epoch_end(void *self, volt_trainer *t) {
    volt_timer *tm = self;
    return tm->cfg.interval == VOLT_TIMER_EPOCH ? check(tm, t) : VOLT_OK;
}

#define MARK_HOOK(fn, stage, start) \
    static volt_status fn(void *self, volt_trainer *t) { (void)t; mark(self, stage, start); return VOLT_OK; }
MARK_HOOK(tm_val_start, S_VALIDATE, true)
MARK_HOOK(tm_val_end, S_VALIDATE, false)
MARK_HOOK(tm_test_start, S_TEST, true)
MARK_HOOK(tm_test_end, S_TEST, false)
MARK_HOOK(tm_predict_start, S_PREDICT, true)
MARK_HOOK(tm_predict_end, S_PREDICT, false)
#undef MARK_HOOK

/* {"time_elapsed": {"train": s, "validate": s, "test": s, "predict": s}} (Lightning's); a
 * resumed fit counts the train time on from it */
static char *tm_state(void *self) {
    const volt_timer *tm = self;
    char buf[512];   /* four numbers of at most 24 characters each: room to spare */
    snprintf(buf, sizeof buf, "{\"time_elapsed\":{\"%s\":%.17g,\"%s\":%.17g,\"%s\":%.17g,\"%s\":%.17g}}", stage_names[0],
             elapsed(tm, 0), stage_names[1], elapsed(tm, 1), stage_names[2], elapsed(tm, 2), stage_names[3], elapsed(tm, 3));
    return strdup(buf);
}

static volt_status tm_load(void *self, volt_trainer *t, const char *json) {
    volt_timer *tm = self;
    cJSON *o = cJSON_Parse(json);
    const cJSON *te = cJSON_GetObjectItemCaseSensitive(o, "time_elapsed");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(te, "train");
    const bool ok = cJSON_IsNumber(tr) && isfinite(tr->valuedouble) && tr->valuedouble >= 0 && tr->valuedouble < 1e12;
    const double v = ok ? tr->valuedouble : 0;
    cJSON_Delete(o);
    if (!ok) return volt_trainer_fail(t, VOLT_ERR_CORRUPT, "Timer: the checkpoint's state has no train time_elapsed >= 0");
    tm->offset = v;
    tm->start[S_TRAIN] = tm->end[S_TRAIN] = NAN;
    return VOLT_OK;
}

static const volt_callback_ops tm_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "Timer",
    .on_train_start = tm_train_start,
    .on_train_end = tm_train_end,
    .on_train_batch_end = tm_train_batch_end,
    .on_train_epoch_end = tm_train_epoch_end,
    .on_validation_start = tm_val_start,
    .on_validation_end = tm_val_end,
    .on_test_start = tm_test_start,
    .on_test_end = tm_test_end,
    .on_predict_start = tm_predict_start,
    .on_predict_end = tm_predict_end,
    .state_dict = tm_state,
    .load_state_dict = tm_load,
    .destroy = free,
    .setup = tm_setup,
};

void volt_timer_config_init(volt_timer_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_TIMER_CONFIG_VERSION;
    cfg->interval = VOLT_TIMER_STEP;
    cfg->verbose = true;
}

volt_status volt_add_timer(volt_trainer *t, const volt_timer_config *cfg, volt_timer **out) {
    if (out) *out = NULL;
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt_timer_config def;
    if (!cfg) {
        volt_timer_config_init(&def);
        cfg = &def;
    }
    if (cfg->version < 1 || cfg->version > VOLT_TIMER_CONFIG_VERSION)
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "Timer: config version %u, this library knows 1..%u (call "
                                 "volt_timer_config_init)", cfg->version, VOLT_TIMER_CONFIG_VERSION);
    if (cfg->interval != VOLT_TIMER_STEP && cfg->interval != VOLT_TIMER_EPOCH)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "Timer: interval must be step or epoch, got %d", (int)cfg->interval);
    double duration = 0;
    if (cfg->duration && *cfg->duration && (volt_parse_duration(cfg->duration, &duration) < 0 || !(duration > 0)))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "Timer: duration must be \"DD:HH:MM:SS\" (days, hours, minutes, "
                                 "seconds) and more than no time, got \"%s\"", cfg->duration);
    if (volt__cb_has(t, tm_ops.name)) return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "Timer: the trainer has one already");
    volt_timer *tm = calloc(1, sizeof *tm);
    if (!tm) return volt_trainer_fail(t, VOLT_ERR_NOMEM, "Timer: out of memory");
    tm->cfg = *cfg;
    tm->cfg.duration = NULL;   /* not kept: the caller's string */
    tm->duration = duration;
    for (int i = 0; i < N_STAGES; i++) tm->start[i] = tm->end[i] = NAN;
    volt_status st = volt_trainer_add_callback(t, &tm_ops, tm);
    if (st < 0) return st;   /* the trainer destroyed it */
    if (out) *out = tm;
    return VOLT_OK;
}
