/* LearningRateFinder and BatchSizeFinder (Lightning's callbacks): the tuner (trainer/tuner.c)
 * run by fit itself. Added to a trainer, each runs in fit once setup("fit") ran and the loaders
 * are sharded, before the optimizer is made and before any on_fit_start (Lightning runs them
 * in their on_fit_start), in the order they were added. LearningRateFinder runs lr_find and
 * hands the suggestion to the module's set_lr (Lightning's update_attr), which
 * configure_optimizers then reads; BatchSizeFinder runs scale_batch_size on fit's train loader
 * and sets fit's loaders to the size found.
 *
 * What they found is their checkpoint state ({"lr": x} / {"batch_size": n}): a fit resumed
 * from a checkpoint does not search again, it applies what the first fit found, read from the
 * checkpoint's header before the optimizer is made (volt__ckpt_callback_state). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "trainer/trainer_internal.h"

typedef struct lrf {
    volt_lr_finder_config cfg;
    volt_lr_find_result result;
    bool have;        /* result holds this fit's search or the checkpoint's value (its state) */
} lrf;

typedef struct bsf {
    volt_batch_size_finder_config cfg;
    volt_batch_size_result result;     /* fit's search, or the checkpoint's size: its state */
    bool have;
    volt_batch_size_result eval;       /* the last validate / test / predict search's (not state) */
    const volt_batch_size_result *last;   /* the last search's: result or eval; NULL: none */
} bsf;

static void lrf_destroy(void *self) {
    lrf *f = self;
    volt_lr_find_result_free(&f->result);
    free(f);
}

static char *lrf_state(void *self) {
    const lrf *f = self;
    if (!f->have) return NULL;
    char buf[64];
    if (isfinite(f->result.suggestion)) snprintf(buf, sizeof buf, "{\"lr\":%.17g}", f->result.suggestion);
    else snprintf(buf, sizeof buf, "{\"lr\":null}");
    return strdup(buf);
}

static char *bsf_state(void *self) {
    const bsf *f = self;
    if (!f->have) return NULL;
    char buf[64];
    snprintf(buf, sizeof buf, "{\"batch_size\":%lld}", (long long)f->result.batch_size);
    return strdup(buf);
}

/* The checkpoint's state of either: {"lr": a positive finite number or null} / {"batch_size":
 * a whole number >= 1}. *v: the value (NAN for a null lr). */
static volt_status parse_state(volt_trainer *t, const char *json, const char *who, const char *key, bool whole,
                               const char *path, double *v) {
    cJSON *o = cJSON_Parse(json);
    const cJSON *x = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    bool ok = false;
    if (cJSON_IsNull(x) && !whole) {
        *v = NAN;
        ok = true;
    } else if (cJSON_IsNumber(x)) {
        *v = x->valuedouble;
        ok = whole ? *v >= 1 && *v <= 9.0e15 && *v == floor(*v) : isfinite(*v) && (float)*v > 0 && *v <= 3.4e38;   /* a float lr */
    }
    cJSON_Delete(o);
    if (!ok && path)
        return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': %s's state is damaged (want {\"%s\": %s})", path, who, key,
                          whole ? "a batch size >= 1" : "a learning rate > 0 or null");
    if (!ok)   /* the load says which checkpoint and which callback */
        return volt__terr(t, VOLT_ERR_CORRUPT, "want {\"%s\": %s}", key, whole ? "a batch size >= 1" : "a learning rate > 0 or null");
    return VOLT_OK;
}

static volt_status lrf_load(void *self, volt_trainer *t, const char *json) {
    double v;
    (void)self;
    return parse_state(t, json, "LearningRateFinder", "lr", false, NULL, &v);
}

static volt_status bsf_load(void *self, volt_trainer *t, const char *json) {
    double v;
    (void)self;
    return parse_state(t, json, "BatchSizeFinder", "batch_size", true, NULL, &v);
}

static const volt_callback_ops lrf_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "LearningRateFinder",
    .state_dict = lrf_state, .load_state_dict = lrf_load, .destroy = lrf_destroy,
};

static const volt_callback_ops bsf_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "BatchSizeFinder",
    .state_dict = bsf_state, .load_state_dict = bsf_load, .destroy = free,
};

/* ---- in fit --------------------------------------------------------------------------------- */
static volt_status lrf_apply(volt_trainer *t, lrf *f, double lr) {
    if (isfinite(lr) && f->cfg.set_lr) f->cfg.set_lr(t->module, (float)lr);
    return VOLT_OK;
}

static volt_status lrf_fit(volt_trainer *t, lrf *f, volt_loader *train) {
    volt_lr_find_result_free(&f->result);
    f->have = false;
    VOLT_TRY(volt__tune_lr(t, train, &f->cfg.find, &f->result));
    f->have = true;
    const volt_lr_find_result *r = &f->result;
    if (t->rank == 0) {
        if (!isfinite(r->suggestion))
            fprintf(stderr, "volt: LearningRateFinder: %lld steps%s: no suggestion (fewer than 2 points after the first 10 "
                    "before the loss diverged): the module's learning rate stays\n", (long long)r->n,
                    r->n ? "" : " (none ran)");
        else
            fprintf(stderr, "volt: LearningRateFinder: %lld steps from %g to %g: suggested learning rate %g%s\n",
                    (long long)r->n, r->lrs[0], r->lrs[r->n - 1], r->suggestion,
                    f->cfg.set_lr ? ", set on the module" : " (no set_lr: the module's stays)");
    }
    return lrf_apply(t, f, r->suggestion);
}

/* The train loader and every val loader to the size, or none (those set back when one fails). */
static volt_status set_sizes(volt_trainer *t, volt_loader *train, const volt__loaders *val, int64_t size) {
    volt_loader *l[1 + VOLT_MAX_EVAL_DATALOADERS];
    int64_t was[1 + VOLT_MAX_EVAL_DATALOADERS];
    int n = 0;
    l[n++] = train;
    for (int k = 0; val && k < val->n; k++) l[n++] = val->l[k];
    for (int i = 0; i < n; i++) was[i] = volt_loader_batch_size(l[i]);
    for (int i = 0; i < n; i++) {
        if (was[i] == size) continue;
        volt_status st = volt_loader_set_batch_size(l[i], size);
        if (st < 0) {
            char which[32];
            if (i == 0) snprintf(which, sizeof which, "train");
            else if (val->n == 1) snprintf(which, sizeof which, "val");
            else snprintf(which, sizeof which, "val (dataloader %d)", i - 1);
            volt__terr(t, st, "BatchSizeFinder: the %s loader could not be set to batch size %lld: %s", which,
                       (long long)size, volt_loader_errmsg(l[i]));
            for (int j = 0; j < i; j++)
                if (volt_loader_batch_size(l[j]) != was[j]) (void)volt_loader_set_batch_size(l[j], was[j]);
            return st;
        }
    }
    return VOLT_OK;
}

static volt_status bsf_fit(volt_trainer *t, bsf *f, volt_loader *train, const volt__loaders *val) {
    f->have = false;
    VOLT_TRY(volt__tune_batch_size(t, train, &f->cfg.find, &f->result));
    f->have = true;
    f->last = &f->result;
    if (t->rank == 0)
        fprintf(stderr, "volt: BatchSizeFinder: batch size %lld after %d trial%s: fit's loaders use it\n",
                (long long)f->result.batch_size, f->result.n_trials, f->result.n_trials == 1 ? "" : "s");
    return set_sizes(t, train, val, f->result.batch_size);
}

/* A resumed fit: what the saved fit found, from the checkpoint's header. */
static volt_status resume_one(volt_trainer *t, int i, volt_loader *train, const volt__loaders *val, const char *path) {
    const bool is_lr = t->cbs[i].ops == &lrf_ops;
    const char *who = t->cbs[i].ops->name;
    char *json = NULL;
    double v = 0;
    /* every rank reads the header; one verdict before anything is applied (a rank that cannot
     * read the file, or reads a damaged state, stops every rank here, not in a later collective) */
    volt_status st = volt__ckpt_callback_state(t, path, i, &json);
    if (st >= 0 && json) st = parse_state(t, json, who, is_lr ? "lr" : "batch_size", !is_lr, path, &v);
    st = volt__agree_status(t, st, who, "no rank applied it");
    if (st < 0) {
        free(json);
        return st;
    }
    if (!json) {
        if (t->rank == 0)
            fprintf(stderr, "volt: %s: the checkpoint at %s holds no state of it (saved without it): the resumed fit keeps "
                    "%s\n", who, path, is_lr ? "the module's learning rate" : "the loaders' batch size");
        return VOLT_OK;
    }
    free(json);
    if (is_lr) {
        lrf *f = t->cbs[i].self;
        volt_lr_find_result_free(&f->result);
        f->result.suggestion = v;
        f->have = true;
        if (t->rank == 0 && isfinite(v))
            fprintf(stderr, "volt: LearningRateFinder: a resumed fit does not search again: learning rate %g from the "
                    "checkpoint%s\n", v, f->cfg.set_lr ? ", set on the module" : " (no set_lr: the module's stays)");
        else if (t->rank == 0)
            fprintf(stderr, "volt: LearningRateFinder: a resumed fit does not search again: the checkpoint's fit found no "
                    "suggestion, the module's learning rate stays\n");
        return lrf_apply(t, f, v);
    }
    bsf *f = t->cbs[i].self;
    memset(&f->result, 0, sizeof f->result);
    f->result.batch_size = (int64_t)v;
    f->have = true;
    f->last = &f->result;
    if (t->rank == 0)
        fprintf(stderr, "volt: BatchSizeFinder: a resumed fit does not search again: batch size %lld from the checkpoint\n",
                (long long)f->result.batch_size);
    return set_sizes(t, train, val, f->result.batch_size);
}

volt_status volt__tune_fit_finders(volt_trainer *t, volt_loader *train, const volt__loaders *val, const char *path) {
    for (int i = 0; i < t->n_cbs; i++) {
        const volt_callback_ops *ops = t->cbs[i].ops;
        if (ops != &lrf_ops && ops != &bsf_ops) continue;
        if (ops == &lrf_ops) {   /* this fit's finding, or none: nothing of an earlier fit's */
            lrf *f = t->cbs[i].self;
            volt_lr_find_result_free(&f->result);
            f->result.suggestion = NAN;
            f->have = false;
        } else {
            bsf *f = t->cbs[i].self;
            memset(&f->result, 0, sizeof f->result);
            f->have = false;
            f->last = NULL;
        }
        if (path && path[0]) {
            VOLT_TRY(resume_one(t, i, train, val, path));
            continue;
        }
        if (t->cfg.fast_dev_run > 0) {   /* Lightning: "Skipping learning rate finder since fast_dev_run is enabled." */
            if (t->rank == 0) fprintf(stderr, "volt: %s: skipped, fast_dev_run is set\n", ops->name);
            continue;
        }
        /* the sweep's step hooks see VOLT_FN_TUNE, as the Tuner's calls: no callback takes its
         * steps for fit's (Lightning swaps the user's callbacks out instead) */
        const volt_trainer_fn fn = t->fn;
        t->fn = VOLT_FN_TUNE;
        const volt_status st = ops == &lrf_ops ? lrf_fit(t, t->cbs[i].self, train) : bsf_fit(t, t->cbs[i].self, train, val);
        t->fn = fn;
        VOLT_TRY(st);
    }
    return VOLT_OK;
}

/* validate, test and predict (Lightning's BatchSizeFinder.on_validation_start / on_test_start /
 * on_predict_start; not the validation inside fit): the call's loader scaled with evaluation
 * steps, the size found its result until the next search */
volt_status volt__tune_eval_finder(volt_trainer *t, const volt__loaders *set, volt_stage stage) {
    static const char *const names[] = { "fit", "validate", "test", "predict" };
    /* a call made from another call's hook leaves the loaders and the step of the one running */
    if (t->call_depth > 1) return VOLT_OK;
    const volt_trainer_config *c = &t->cfg;
    const int64_t limit = stage == VOLT_STAGE_VALIDATE ? c->limit_val_batches : stage == VOLT_STAGE_TEST ? c->limit_test_batches
                        : c->limit_predict_batches;
    const double frac = stage == VOLT_STAGE_VALIDATE ? c->limit_val_fraction : stage == VOLT_STAGE_TEST ? c->limit_test_fraction
                      : c->limit_predict_fraction;
    if (limit == 0 && !(frac > 0)) return VOLT_OK;   /* the call runs no batch (Lightning skips the loop) */
    for (int i = 0; i < t->n_cbs; i++) {
        if (t->cbs[i].ops != &bsf_ops) continue;
        bsf *f = t->cbs[i].self;
        if (set->n > 1)   /* Lightning refuses the same: which loader's size would it be? */
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "BatchSizeFinder: %s was given %d loaders: the batch size finder "
                              "scales one (Lightning's refuses several dataloaders too); remove the callback for this call, "
                              "or run the loaders one call each", names[(unsigned)stage < 4 ? stage : 0], set->n);
        volt_loader *l = set->l[0];
        if (t->cfg.fast_dev_run > 0) {
            if (t->rank == 0) fprintf(stderr, "volt: BatchSizeFinder: skipped, fast_dev_run is set\n");
            return VOLT_OK;
        }
        f->last = NULL;   /* fit's finding (its checkpoint state) stays as it is */
        const volt_trainer_fn fn = t->fn;
        t->fn = VOLT_FN_TUNE;   /* as fit's search: no hook takes its steps for the call's */
        const volt_status st = volt__tune_eval_batch_size(t, l, stage, &f->cfg.find, &f->eval);
        t->fn = fn;
        if (st < 0) {
            char was[sizeof t->errmsg];
            memcpy(was, t->errmsg, sizeof was);
            return volt__terr(t, st, "BatchSizeFinder: %s", was);
        }
        f->last = &f->eval;
        if (t->rank == 0)
            fprintf(stderr, "volt: BatchSizeFinder: batch size %lld after %d trial%s: %s's loader uses it\n",
                    (long long)f->eval.batch_size, f->eval.n_trials, f->eval.n_trials == 1 ? "" : "s",
                    names[(unsigned)stage < 4 ? stage : 0]);
        return VOLT_OK;
    }
    return VOLT_OK;
}

int64_t volt__tune_fit_batch_size(const volt_trainer *t) {
    for (int i = 0; i < t->n_cbs; i++)
        if (t->cbs[i].ops == &bsf_ops) {
            const bsf *f = t->cbs[i].self;
            return f->have ? f->result.batch_size : 0;
        }
    return 0;
}

/* ---- registration ----------------------------------------------------------------------------- */
static const void *find(const volt_trainer *t, const volt_callback_ops *ops) {
    for (int i = 0; t && i < t->n_cbs; i++)
        if (t->cbs[i].ops == ops) return t->cbs[i].self;
    return NULL;
}

/* One per trainer: inside a module's configure_callbacks the trainer's are being replaced. */
static bool have_one(const volt_trainer *t, const volt_callback_ops *ops) {
    for (int i = t->configuring_cbs ? t->cbs_first_module : 0; i < t->n_cbs; i++)
        if (t->cbs[i].ops == ops) return true;
    return false;
}

void volt_lr_finder_config_init(volt_lr_finder_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_LR_FINDER_CONFIG_VERSION;
    volt_lr_find_config_init(&cfg->find);
}

void volt_batch_size_finder_config_init(volt_batch_size_finder_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_BATCH_SIZE_FINDER_CONFIG_VERSION;
    volt_batch_size_config_init(&cfg->find);
}

volt_status volt_add_lr_finder(volt_trainer *t, const volt_lr_finder_config *cfg) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    t->errmsg[0] = 0;
    volt_lr_finder_config def;
    if (!cfg) {
        volt_lr_finder_config_init(&def);
        cfg = &def;
    }
    if (!VOLT_VERSION_OK(cfg->version, VOLT_LR_FINDER_CONFIG_VERSION))
        return volt__terr(t, VOLT_ERR_VERSION, "LearningRateFinder: config version %u, this library knows 1..%u (call "
                          "volt_lr_finder_config_init)", cfg->version, VOLT_LR_FINDER_CONFIG_VERSION);
    VOLT_TRY(volt__tune_lr_check(t, &cfg->find));
    if (have_one(t, &lrf_ops)) return volt__terr(t, VOLT_ERR_INVALID_ARG, "LearningRateFinder: the trainer has one already");
    lrf *f = calloc(1, sizeof *f);
    if (!f) return volt__terr(t, VOLT_ERR_NOMEM, "LearningRateFinder: out of memory");
    f->cfg = *cfg;
    f->result.suggestion = NAN;
    return volt_trainer_add_callback(t, &lrf_ops, f);   /* destroys f when it fails */
}

volt_status volt_add_batch_size_finder(volt_trainer *t, const volt_batch_size_finder_config *cfg) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    t->errmsg[0] = 0;
    volt_batch_size_finder_config def;
    if (!cfg) {
        volt_batch_size_finder_config_init(&def);
        cfg = &def;
    }
    if (!VOLT_VERSION_OK(cfg->version, VOLT_BATCH_SIZE_FINDER_CONFIG_VERSION))
        return volt__terr(t, VOLT_ERR_VERSION, "BatchSizeFinder: config version %u, this library knows 1..%u (call "
                          "volt_batch_size_finder_config_init)", cfg->version, VOLT_BATCH_SIZE_FINDER_CONFIG_VERSION);
    VOLT_TRY(volt__tune_batch_size_check(t, &cfg->find));
    if (have_one(t, &bsf_ops)) return volt__terr(t, VOLT_ERR_INVALID_ARG, "BatchSizeFinder: the trainer has one already");
    bsf *f = calloc(1, sizeof *f);
    if (!f) return volt__terr(t, VOLT_ERR_NOMEM, "BatchSizeFinder: out of memory");
    f->cfg = *cfg;
    return volt_trainer_add_callback(t, &bsf_ops, f);   /* destroys f when it fails */
}

const volt_lr_find_result *volt_lr_finder_result(const volt_trainer *t) {
    const lrf *f = find(t, &lrf_ops);
    return f && f->have ? &f->result : NULL;
}

const volt_batch_size_result *volt_batch_size_finder_result(const volt_trainer *t) {
    const bsf *f = find(t, &bsf_ops);
    return f ? f->last : NULL;
}
