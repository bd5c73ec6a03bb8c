/* SpikeDetection (Lightning 2.x's lightning.pytorch.callbacks.SpikeDetection, include/volt/trainer.h,
 * docs/CALLBACKS.md): at each training batch end the step's loss (volt_trainer_step_loss, over
 * accumulate_grad_batches as Lightning's outputs["loss"]) is checked against the running mean
 * of the last `window` tracked losses and the previous one. A spike on any rank writes the
 * batches to skip (the spike's and the one before it) to a JSON list on rank 0 and fails the
 * fit on every rank (Lightning's TrainingSpikeException). Lightning's semantics, kept:
 *  - batch_idx < warmup (each epoch's first batches) is never a spike, but is tracked;
 *  - a loss that is not finite is a spike with finite_only; without it the rules below judge
 *    it (NAN fails every tolerance; +inf under min passes them), and it is not tracked (nor is
 *    anyone's loss of that batch when one rank's is not finite). A non-finite loss is never
 *    tracked, not even in warmup (Lightning's MeanMetric ignores a NAN too);
 *  - an improvement on the previous tracked loss (<= it with mode min) is never a spike;
 *  - otherwise a spike when |loss - mean| >= |atol| and >= |rtol x mean| (a NAN tolerance
 *    passes; an empty window's NAN mean fails a tolerance that is set);
 *  - the batches found accumulate over the fit and go to the file whole each time.
 * The default file is <default_root_dir>/skip_batches.json (Lightning's: the working folder),
 * so a run writes nothing outside its root unless told to; its folder is checked at fit start. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "volt/trainer.h"
#include "callbacks/util.h"

typedef struct spike {
    volt_spike_detection_config cfg;
    char *path_cfg;              /* the config's path, copied (NULL: the default) */
    char path[VOLT_CB_PATH_MAX]; /* the file, resolved at fit start ... */
    char dir[VOLT_CB_PATH_MAX];  /* ... and its folder (checked then, made again at a write) */
    double *win;                 /* the last `window` tracked losses, a ring */
    int64_t n_win, head;         /* how many it holds; where the next goes */
    double last_val;             /* the previous tracked loss (0 before any, as Lightning's) */
    int64_t *bad, n_bad, cap_bad;   /* the batches to skip, in the order found */
} spike;

static double running_mean(const spike *s) {
    if (s->n_win == 0) return NAN;   /* torchmetrics' MeanMetric with nothing in it */
    double sum = 0;
    for (int64_t i = 0; i < s->n_win; i++) sum += s->win[i];
    return sum / (double)s->n_win;
}

static void track(spike *s, double v) {
    s->win[s->head] = v;
    s->head = (s->head + 1) % s->cfg.window;
    if (s->n_win < s->cfg.window) s->n_win++;
    s->last_val = v;
}

static bool is_spike(const spike *s, double loss, double mean) {
    if (s->cfg.finite_only && !isfinite(loss)) return true;
    const double diff = loss - s->last_val;
    if (s->cfg.mode == VOLT_MIN ? diff <= 0 : diff >= 0) return false;   /* better (NAN: not) */
    const double dev = fabs(loss - mean);
    return (isnan(s->cfg.atol) || dev >= fabs(s->cfg.atol)) && (isnan(s->cfg.rtol) || dev >= fabs(s->cfg.rtol * mean));
}

/* ---- the file ----------------------------------------------------------------------------------- */
static bool resolve_path(spike *s, volt_trainer *t) {
    const volt_trainer_config *c = volt_trainer_get_config(t);
    const char *p = s->path_cfg ? s->path_cfg : c && c->default_root_dir ? c->default_root_dir : ".";
    const size_t n = strlen(p);
    const int k = n >= 5 && !strcmp(p + n - 5, ".json") ? snprintf(s->path, sizeof s->path, "%s", p)
                  : snprintf(s->path, sizeof s->path, "%s%sskip_batches.json", p, n && p[n - 1] == '/' ? "" : "/");
    if (k < 0 || (size_t)k >= sizeof s->path) return false;
    memcpy(s->dir, s->path, sizeof s->dir);
    char *slash = strrchr(s->dir, '/');
    if (!slash) snprintf(s->dir, sizeof s->dir, ".");
    else if (slash == s->dir) s->dir[1] = 0;
    else *slash = 0;
    return true;
}

/* json.dump(bad_batches, f, indent=4), atomically */
static volt_status write_batches(const spike *s, char *err, size_t errlen) {
    size_t cap = 8 + (size_t)s->n_bad * 28, k = 0;
    char *text = malloc(cap);
    if (!text) return VOLT_ERR_NOMEM;
    k += (size_t)snprintf(text + k, cap - k, "[");
    for (int64_t i = 0; i < s->n_bad; i++)
        k += (size_t)snprintf(text + k, cap - k, "%s\n    %lld", i ? "," : "", (long long)s->bad[i]);
    snprintf(text + k, cap - k, "%s]", s->n_bad ? "\n" : "");
    volt_status st = volt__mkdirs(s->dir, err, errlen);
    if (st >= 0) st = volt__cb_write_text(s->path, text, err, errlen);
    free(text);
    return st;
}

/* ---- hooks -------------------------------------------------------------------------------------- */
static volt_status sd_setup(void *self, volt_trainer *t, volt_stage stage) {
    (void)self;
    return stage == VOLT_STAGE_FIT ? volt_trainer_track_step_loss(t) : VOLT_OK;
}

static volt_status sd_fit_start(void *self, volt_trainer *t) {
    spike *s = self;
    if (!resolve_path(s, t))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "SpikeDetection: the skip file's path (under default_root_dir, or "
                                 "exclude_batches_path) is longer than %d bytes", VOLT_CB_PATH_MAX - 1);
    return volt_trainer_check_writable(t, "SpikeDetection", "exclude_batches_path", s->dir, 0);
}

static volt_status sd_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t idx) {
    (void)b;
    spike *s = self;
    double loss;
    if (!volt_trainer_step_loss(t, &loss))
        return volt_trainer_fail(t, VOLT_ERR_STATE, "SpikeDetection: no loss for training batch %lld", (long long)idx);
    const volt_trainer_config *c = volt_trainer_get_config(t);
    if (c && c->accumulate_grad_batches > 1) loss /= (double)c->accumulate_grad_batches;   /* Lightning's outputs["loss"] */
    const double mean = running_mean(s);
    const bool mine = idx >= s->cfg.warmup && is_spike(s, loss, mean);
    bool any = mine;
    VOLT_TRY(volt_trainer_reduce_boolean_decision(t, mine, false, &any));   /* one rank's spike stops all */
    if (!any) {
        bool finite = true;
        if (!s->cfg.finite_only) VOLT_TRY(volt_trainer_reduce_boolean_decision(t, isfinite(loss) != 0, true, &finite));
        if (finite && isfinite(loss)) track(s, loss);   /* a warmup batch's NAN neither (torchmetrics ignores it too) */
        return VOLT_OK;
    }
    if (s->n_bad + 2 > s->cap_bad) {
        int64_t cap = s->cap_bad ? 2 * s->cap_bad : 8;
        while (cap < s->n_bad + 2) cap *= 2;
        int64_t *nb = realloc(s->bad, sizeof *nb * (size_t)cap);
        if (!nb) return volt_trainer_fail(t, VOLT_ERR_NOMEM, "SpikeDetection: out of memory");
        s->bad = nb;
        s->cap_bad = cap;
    }
    s->bad[s->n_bad++] = idx - 1;   /* the batch before may have moved the weights to where this one spikes */
    s->bad[s->n_bad++] = idx;
    char err[600] = "";
    if (volt_trainer_is_global_zero(t) && write_batches(s, err, sizeof err) < 0)   /* said apart: every rank's error reads alike */
        fprintf(stderr, "SpikeDetection: the batches to skip could not be written to %s: %s\n", s->path, err);
    if (mine)
        fprintf(stderr, "SpikeDetection: rank %d: batch %lld: loss %.7g, previous %.7g, running mean of the last %lld %.7g\n",
                volt_trainer_rank(t), (long long)idx, loss, s->last_val, (long long)s->n_win, mean);
    /* every rank decided on the same all-reduced loss: the same words everywhere, said once */
    return volt_trainer_fail_agreed(t, VOLT_ERR_NUMERIC, "Training spike detected in batch %lld of epoch %lld (step %lld): "
                             "batches to skip on a rerun: %s", (long long)idx, (long long)volt_trainer_current_epoch(t),
                             (long long)volt_trainer_global_step(t), s->path);
}

/* ---- checkpoint state ----------------------------------------------------------------------------- */
static char *sd_state_dict(void *self) {
    const spike *s = self;
    cJSON *o = cJSON_CreateObject(), *bad = cJSON_CreateArray(), *win = cJSON_CreateArray();
    if (!o || !bad || !win) {
        cJSON_Delete(o);
        cJSON_Delete(bad);
        cJSON_Delete(win);
        return NULL;
    }
    cJSON_AddNumberToObject(o, "last_val", s->last_val);
    for (int64_t i = 0; i < s->n_bad; i++) cJSON_AddItemToArray(bad, cJSON_CreateNumber((double)s->bad[i]));
    cJSON_AddItemToObject(o, "bad_batches", bad);
    if (s->path[0]) cJSON_AddStringToObject(o, "bad_batches_path", s->path);
    const int64_t first = (s->head - s->n_win + s->cfg.window) % s->cfg.window;   /* oldest first */
    for (int64_t i = 0; i < s->n_win; i++) cJSON_AddItemToArray(win, cJSON_CreateNumber(s->win[(first + i) % s->cfg.window]));
    cJSON_AddItemToObject(o, "running", win);
    char *js = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return js;
}

static bool finite_number(const cJSON *v) { return cJSON_IsNumber(v) && isfinite(v->valuedouble); }

/* The run's own settings stay (a rerun may change rtol); the tracked losses and the batches come back.
 * A window shorter than the saved one keeps the newest. */
static volt_status sd_load_state_dict(void *self, volt_trainer *t, const char *json) {
    spike *s = self;
    cJSON *o = cJSON_Parse(json);
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(o, "last_val"), *bad = cJSON_GetObjectItemCaseSensitive(o, "bad_batches"),
                *win = cJSON_GetObjectItemCaseSensitive(o, "running");
    bool ok = finite_number(lv) && cJSON_IsArray(bad) && cJSON_IsArray(win);
    const int nb = ok ? cJSON_GetArraySize(bad) : 0, nw = ok ? cJSON_GetArraySize(win) : 0;
    ok = ok && nb % 2 == 0;   /* a spike adds two batches: the one before it and its own */
    for (int i = 0; ok && i < nb; i++) {
        const cJSON *v = cJSON_GetArrayItem(bad, i);
        ok = finite_number(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= -1 && v->valuedouble < 1e15;
    }
    for (int i = 0; ok && i < nw; i++) ok = finite_number(cJSON_GetArrayItem(win, i));
    int64_t *nbad = NULL;
    if (ok && nb > 0 && !(nbad = malloc(sizeof *nbad * (size_t)nb))) {
        cJSON_Delete(o);
        return volt_trainer_fail(t, VOLT_ERR_NOMEM, "SpikeDetection: out of memory");
    }
    if (!ok) {
        cJSON_Delete(o);
        return volt_trainer_fail(t, VOLT_ERR_CORRUPT, "SpikeDetection: the checkpoint's state is damaged");
    }
    for (int i = 0; i < nb; i++) nbad[i] = (int64_t)cJSON_GetArrayItem(bad, i)->valuedouble;
    free(s->bad);
    s->bad = nbad;
    s->n_bad = s->cap_bad = nb;
    s->n_win = s->head = 0;
    for (int i = nw > s->cfg.window ? nw - (int)s->cfg.window : 0; i < nw; i++) track(s, cJSON_GetArrayItem(win, i)->valuedouble);
    s->last_val = lv->valuedouble;
    cJSON_Delete(o);
    return VOLT_OK;
}

static void sd_destroy(void *self) {
    spike *s = self;
    if (!s) return;
    free(s->path_cfg);
    free(s->win);
    free(s->bad);
    free(s);
}

static const volt_callback_ops sd_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "SpikeDetection",
    .setup = sd_setup,
    .on_fit_start = sd_fit_start,
    .on_train_batch_end = sd_batch_end,
    .state_dict = sd_state_dict,
    .load_state_dict = sd_load_state_dict,
    .destroy = sd_destroy,
};

void volt_spike_detection_config_init(volt_spike_detection_config *c) {
    *c = (volt_spike_detection_config){ .version = VOLT_SPIKE_DETECTION_CONFIG_VERSION, .mode = VOLT_MIN, .window = 10,
                                        .warmup = 1, .atol = NAN, .rtol = 2.0, .exclude_batches_path = NULL,
                                        .finite_only = true };
}

volt_status volt_add_spike_detection(volt_trainer *t, const volt_spike_detection_config *cfg) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt_spike_detection_config def;
    if (!cfg) {
        volt_spike_detection_config_init(&def);
        cfg = &def;
    }
    if (cfg->version < 1 || cfg->version > VOLT_SPIKE_DETECTION_CONFIG_VERSION)
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "SpikeDetection: config version %u, this library knows 1..%u (call "
                                 "volt_spike_detection_config_init)", cfg->version, VOLT_SPIKE_DETECTION_CONFIG_VERSION);
    if (cfg->mode != VOLT_MIN && cfg->mode != VOLT_MAX)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "SpikeDetection: mode must be min or max, got %d", (int)cfg->mode);
    if (cfg->window < 1 || cfg->window > 1000000 || cfg->warmup < 0)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "SpikeDetection: need 1 <= window (%lld) <= 1000000 and warmup "
                                 "(%lld) >= 0", (long long)cfg->window, (long long)cfg->warmup);
    if ((!isnan(cfg->atol) && !(isfinite(cfg->atol) && cfg->atol >= 0)) ||
        (!isnan(cfg->rtol) && !(isfinite(cfg->rtol) && cfg->rtol >= 0)))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "SpikeDetection: atol (%g) and rtol (%g) must be finite and >= 0, "
                                 "or NAN for none", cfg->atol, cfg->rtol);
    if (cfg->exclude_batches_path && !cfg->exclude_batches_path[0])
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "SpikeDetection: exclude_batches_path is empty (NULL: "
                                 "<default_root_dir>/skip_batches.json)");
    if (cfg->exclude_batches_path && strlen(cfg->exclude_batches_path) > VOLT_CB_PATH_MAX - 32)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "SpikeDetection: exclude_batches_path is too long");
    if (volt__cb_has(t, sd_ops.name)) return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "SpikeDetection: the trainer has one already");
    spike *s = calloc(1, sizeof *s);
    if (!s) return VOLT_ERR_NOMEM;
    s->cfg = *cfg;
    s->win = calloc((size_t)cfg->window, sizeof *s->win);
    s->path_cfg = cfg->exclude_batches_path ? strdup(cfg->exclude_batches_path) : NULL;
    if (!s->win || (cfg->exclude_batches_path && !s->path_cfg)) {
        sd_destroy(s);
        return VOLT_ERR_NOMEM;
    }
    s->cfg.exclude_batches_path = NULL;   /* the copy is path_cfg */
    return volt_trainer_add_callback(t, &sd_ops, s);
}
