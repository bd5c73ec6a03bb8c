/* OnExceptionCheckpoint (Lightning's): when fit fails or is interrupted, save a full
 * checkpoint to resume from (docs/CALLBACKS.md).
 *
 * An interruption (SIGINT / SIGTERM, trainer/signals.c) stops fit at an optimizer step
 * boundary, or after a validation batch, on every rank alike, so the save — collective under sharded strategies — runs on
 * every rank and the file resumes exactly. Other errors: on one process, and with several only
 * an error the ranks agreed on (volt_trainer_error_agreed: every rank failed at the same hook in
 * the same words, so every rank is here; a rank's own error may leave a rank gone or a comm
 * broken, and a sharded save would wait on it); never after a failure of the strategy's own
 * collectives (VOLT_ERR_TIMEOUT, VOLT_ERR_COMM). validate /
 * test / predict save nothing: they change no weights; nor does a fast_dev_run (no files), nor
 * a fit that has no model (it failed before setting one up, or a failed load dropped it), nor
 * one that failed before its sanity check or training began (on_fit_start: a logger's folder
 * that cannot be made is reported once, and the weights are the ones it started from), nor one
 * that made no optimizer step where a file is already there (failed or interrupted before its
 * first: that file, maybe an earlier run's only checkpoint, is kept rather than replaced by the
 * state the fit started from; with no file there it saves, as Lightning does). Its folder is
 * named in on_fit_start and checked before the first batch (trainer/write_check.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "volt/trainer.h"
#include "callbacks/util.h"

typedef struct oec {
    char dir[VOLT_CB_PATH_MAX];
    char path[VOLT_CB_PATH_MAX];
    bool running;      /* from this fit's sanity check or train start to its train end / on_exception */
    int64_t start_step;/* the global step there (after a resume's load) */
} oec;

/* Its folder is checked with ModelCheckpoint's, before the first batch (a save it could not
 * write would be found only when the run has already failed). fast_dev_run saves nothing. */
static volt_status oec_on_fit_start(void *self, volt_trainer *t) {
    const oec *c = self;
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    if (cfg && cfg->fast_dev_run > 0) return VOLT_OK;
    return volt_trainer_check_writable(t, "OnExceptionCheckpoint", "dirpath", c->dir, VOLT_WRITES_CHECKPOINTS);
}

static volt_status oec_on_run_start(void *self, volt_trainer *t) {   /* on_sanity_check_start, on_train_start */
    oec *c = self;
    if (!c->running) c->start_step = volt_trainer_global_step(t);
    c->running = true;
    return VOLT_OK;
}

static volt_status oec_on_train_end(void *self, volt_trainer *t) {
    (void)t;
    ((oec *)self)->running = false;
    return VOLT_OK;
}

static void oec_on_exception(void *self, volt_trainer *t, volt_status st) {
    oec *c = self;
    const bool ran = c->running;
    c->running = false;
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    if (volt_trainer_state_fn(t) != VOLT_FN_FIT || (cfg && cfg->fast_dev_run > 0)) return;   /* fast_dev_run: no files */
    if (!ran) return;   /* failed in on_fit_start, before the sanity check and training */
    /* no model to save: fit failed before it existed, or a failed load dropped it (so the file
     * a resume named, maybe this callback's own, is never replaced by fresh weights) */
    const volt_params *ps = volt_trainer_params(t);
    if (!ps || !volt_params_finalized(ps)) return;
    const bool interrupted = st == VOLT_ERR_INTERRUPTED;
    /* every rank is here, at the same point: an interruption (they stop at the same step), or an
     * error the ranks agreed on (the same hook, the same words: a loss spike); then the save is
     * safe under every strategy (collective, sharded). A comm failure never is */
    const bool together = interrupted || (volt_trainer_world_size(t) > 1 && volt_trainer_error_agreed(t) &&
                                          st != VOLT_ERR_TIMEOUT && st != VOLT_ERR_COMM);
    /* no optimizer step since the fit began: the weights and position are the ones it started
     * from (its initial weights, or the file it resumed from). A file already at this path (an
     * earlier failure's, maybe that run's only checkpoint) is worth more than a copy of that
     * start: kept. Rank 0's view decides under several ranks (an interruption: every rank is
     * here, and the save would be collective). */
    if (volt_trainer_global_step(t) == c->start_step) {
        bool there = access(c->path, F_OK) == 0;
        if (together && volt_trainer_world_size(t) > 1 && volt_trainer_broadcast_bool(t, there, &there) < 0) return;
        if (there) {
            if (volt_trainer_is_global_zero(t))
                fprintf(stderr, "volt: OnExceptionCheckpoint: keeping %s: no training step since this fit began (step %lld), "
                        "so a save after %s would replace it with the state the fit started from\n", c->path,
                        (long long)c->start_step, volt_status_str(st));
            return;
        }
    }
    if (!together && (volt_trainer_world_size(t) > 1 || st == VOLT_ERR_TIMEOUT || st == VOLT_ERR_COMM)) {
        if (volt_trainer_is_global_zero(t))
            fprintf(stderr, "volt: OnExceptionCheckpoint: not saving after %s%s\n", volt_status_str(st),
                    volt_trainer_world_size(t) > 1 ? " with several processes (one rank's own error: a rank may be gone)"
                                                   : " (the comm failed)");
        return;
    }
    /* the failure's message is the one the caller reports: keep it across the save, and
     * whether the ranks agreed on it */
    const bool agreed = volt_trainer_error_agreed(t);
    char why[1024];
    snprintf(why, sizeof why, "%s", volt_trainer_errmsg(t));
    char err[512] = "";
    volt_status s = volt__mkdirs(c->dir, err, sizeof err);
    if (s >= 0) s = volt_trainer_save_checkpoint(t, c->path);
    else volt_trainer_fail(t, s, "%s", err);
    if (volt_trainer_is_global_zero(t)) {
        if (s >= 0)
            fprintf(stderr, "volt: OnExceptionCheckpoint: saved %s (step %lld): resume with ckpt_path=%s\n", c->path,
                    (long long)volt_trainer_global_step(t), c->path);
        else
            fprintf(stderr, "volt: OnExceptionCheckpoint: could not save %s: %s\n", c->path, volt_trainer_errmsg(t));
    }
    if (agreed) volt_trainer_fail_agreed(t, st, "%s", why);   /* still the ranks' verdict */
    else volt_trainer_fail(t, st, "%s", why);
}

static const volt_callback_ops oec_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION,
    .name = "OnExceptionCheckpoint",
    .destroy = free,
    .on_exception = oec_on_exception,
    .on_fit_start = oec_on_fit_start,
    .on_sanity_check_start = oec_on_run_start,
    .on_train_start = oec_on_run_start,
    .on_train_end = oec_on_train_end,
};

volt_status volt_add_on_exception_checkpoint(volt_trainer *t, const char *dirpath, const char *filename) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!dirpath || !*dirpath) return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "OnExceptionCheckpoint: dirpath is required");
    const char *name = filename && *filename ? filename : "on_exception";
    if (strchr(name, '/'))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "OnExceptionCheckpoint: filename '%s' must be a name, not a path "
                                 "(the folder is dirpath)", name);
    oec *c = calloc(1, sizeof *c);
    if (!c) return volt_trainer_fail(t, VOLT_ERR_NOMEM, "OnExceptionCheckpoint: out of memory");
    int n1 = snprintf(c->dir, sizeof c->dir, "%s", dirpath);
    int n2 = snprintf(c->path, sizeof c->path, "%s/%s.safetensors", dirpath, name);
    if (n1 < 0 || n2 < 0 || (size_t)n2 >= sizeof c->path) {
        free(c);
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "OnExceptionCheckpoint: the path is too long");
    }
    volt_status st = volt_trainer_add_callback(t, &oec_ops, c);   /* owns c from here, even on failure */
    /* ckpt_path="last" weighs this file too (Lightning's "last" does) */
    return st < 0 ? st : volt_trainer_add_last_candidate(t, c->path);
}
