/* validate / test / predict, and the validation inside fit (DESIGN §4): one step per batch
 * with nothing kept for backward, the batch hooks around it, the metrics' epoch means at the
 * end; a SIGINT / SIGTERM stops the loop after the batch it arrived in (with several ranks:
 * whose step it arrived in, or the next), after the same batch on every rank (signals.c), and a
 * step that fails on one rank stops every rank after that batch with its error (after_step). The
 * public calls that run them are in loop.c.
 *
 * Several ranks may run other numbers of batches: one dataset split by the distributed sampler
 * gives each the same count, but a rank given a loader of its own may run more, fewer, or none.
 * As Lightning, every rank runs its own batches; the ranks agree first on the fewest and the
 * most any of them runs (volt__eval_agree), exchange per batch (the interrupt vote with a "my step
 * failed" flag, a step value logged with VOLT_LOG_SYNC) only for the batches every rank runs,
 * and all make the epoch metrics' one reduction at the end (metrics_epoch.c), a rank with no
 * batch included; under fsdp such a loop holds the parameters gathered (hold_if_uneven): no
 * collective is ever made by some ranks only. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "trainer/loop_hooks.h"

typedef struct agree_ctx { int64_t fewest, most; int bad; } agree_ctx;
static bool agree_visit(void *ctx, int r, double v) {   /* v: 1 + the rank's count, 0 when it failed */
    agree_ctx *a = ctx;
    const int64_t n = llround(v) - 1;
    if (n < 0) {
        if (a->bad < 0) a->bad = r;
    } else {
        if (n < a->fewest) a->fewest = n;
        if (n > a->most) a->most = n;
    }
    return true;
}

/* The lowest failing rank `bad` broadcasts its status and message, and every rank fails with its
 * words (as the checkpoint's verdict, checkpoint_source.c). when: where it failed, for the error
 * of a broadcast that did not arrive. */
static volt_status verdict(volt_trainer *t, volt_status mine, int bad, const char *what, const char *when) {
    struct { int32_t st; char msg[sizeof t->errmsg]; } v = { .st = mine };
    if (t->rank == bad) snprintf(v.msg, sizeof v.msg, "%s", t->errmsg);
    volt_status st = volt__strategy_broadcast(t->strategy, &v, sizeof v, bad, "loop verdict message");
    if (st < 0) {
        if (mine < 0) return mine;
        return volt__terr(t, st, "%s: rank %d of %d failed %s, and its error did not arrive: %s", what, bad, t->world, when,
                          volt__strategy_errmsg(t->strategy));
    }
    v.msg[sizeof v.msg - 1] = 0;
    return volt__terr(t, v.st < 0 ? v.st : VOLT_ERR_STATE, "%s (rank %d of %d; every rank stops)", v.msg, bad, t->world);
}

/* One all-reduce of a slot per rank (volt__rank_values: no allocation that one rank could fail
 * alone), and when a rank failed, the verdict of the lowest such one. */
static volt_status agree(volt_trainer *t, volt_status mine, int64_t n, const char *what, const char *when, int64_t *fewest,
                         int64_t *most) {
    *fewest = *most = mine < 0 ? 0 : n;
    if (t->world <= 1 || !t->strategy) return mine;
    agree_ctx a = { .fewest = INT64_MAX, .most = 0, .bad = -1 };
    volt_status st = volt__rank_values(t, mine < 0 ? 0.0 : (double)n + 1.0, "loop batch counts", agree_visit, &a);
    if (st < 0) {
        if (mine < 0) return mine;
        return volt__terr(t, st, "%s: agreeing across ranks: %s", what, volt__strategy_errmsg(t->strategy));
    }
    if (a.bad >= 0) return verdict(t, mine, a.bad, what, when);
    *fewest = a.fewest;
    *most = a.most;
    return VOLT_OK;
}

volt_status volt__eval_agree(volt_trainer *t, volt_status mine, int64_t n, const char *what, int64_t *fewest, int64_t *most) {
    return agree(t, mine, n, what, "before its first batch", fewest, most);
}

/* Ranks that run other numbers of batches make other numbers of forwards: under a strategy that
 * gathers parameters on use (fsdp) each forward may gather (full shard gives a unit back when
 * forward moves on), a collective. Such a loop gathers every parameter first, on every rank,
 * and keeps them for its length (the full model in memory, as fsdp's summon_full_params);
 * drop_hold gives them back. */
static volt_status hold_if_uneven(volt_trainer *t, int64_t fewest, int64_t most, const char *what) {
    if (fewest == most || !t->strategy || !volt__strategy_has(t->strategy, VOLT_STRAT_SHARDS_PARAMS)) return VOLT_OK;
    volt_status st = volt__strategy_hold_params(t->strategy, true);
    if (st < 0) return volt__terr(t, st, "%s: gathering the parameters for batch counts that differ across ranks: %s", what,
                                  volt__strategy_errmsg(t->strategy));
    return VOLT_OK;
}

/* The loop's loader started and the ranks agreed (volt__eval_agree: *span, the batches every
 * rank runs, the ones they vote and sync after; a rank's failure to start, every rank's error);
 * the parameters held when the counts differ. */
static volt_status start_agreed(volt_trainer *t, volt_loader *l, volt_status ls, int64_t n, const char *what, int64_t *span) {
    if (ls >= 0 && (ls = volt_loader_start(l, 0, 0)) < 0) ls = volt__loop_loader_err(t, l, ls);
    int64_t most;
    VOLT_TRY(volt__eval_agree(t, ls, n, what, span, &most));
    return hold_if_uneven(t, *span, most, what);
}

/* The loop ended: forward gives units back again, and what the hold gathered is given back
 * (local; every rank drops at the same point, so the units left stale, and the gathers of
 * the next forwards, are alike; a hold not taken: nothing). */
static void drop_hold(volt_trainer *t) {
    if (t->strategy) (void)volt__strategy_hold_params(t->strategy, false);
}

/* The exchange after evaluation batch idx's step, with several ranks: the SIGINT / SIGTERM vote
 * (signals.c; every rank stops after the same batch) and whether the step failed. It comes
 * right after the step and its device check, before the step's logged values are read (a value
 * logged with VOLT_LOG_STEP | VOLT_LOG_SYNC is all-reduced there) and the batch-end hooks run, so
 * that a rank whose step failed is in the same collective as the others.
 *
 * A failed step makes the exchange (with its flag) where every rank's step makes no collective
 * of its own: parameters replicated (ddp, deepspeed stages 1 / 2; under fsdp the forward
 * gathers, and a rank that failed inside it left the others in a gather) and idx < span (the
 * batches every rank runs). Then every rank returns the lowest failing rank's error; elsewhere
 * the failing rank returns its own at once, as before (the others: the comm's timeout). The
 * exchange is made, for idx < span, whenever the vote or the flag is carried: with handle_signals
 * off under fsdp it is skipped. mine: the step's status (its message on t). *sig: the signal to
 * stop on after this batch (0: go on). */
static volt_status after_step(volt_trainer *t, volt_status mine, int64_t idx, int64_t span, const char *what, int *sig) {
    *sig = 0;
    const bool armed = t->cfg.handle_signals;
    if (t->world <= 1 || !t->strategy) return mine;   /* one process looks at its record at the batch end */
    const bool flag = idx < span && !volt__strategy_has(t->strategy, VOLT_STRAT_SHARDS_PARAMS);
    if (mine < 0 && !flag) return mine;
    if (idx >= span || (!armed && !flag)) return VOLT_OK;
    double v[3] = { 0, 0, mine < 0 ? 1.0 : 0.0 };   /* SIGINT here, SIGTERM here, the step failed here */
    if (armed) volt__signal_vote(t, v);
    volt_status st = volt__strategy_all_reduce_mean(t->strategy, v, 3, "eval batch exchange");
    if (st < 0) {
        if (mine < 0) return mine;
        return volt__terr(t, st, "%s: the exchange after batch %lld across ranks: %s", what, (long long)idx,
                          volt__strategy_errmsg(t->strategy));
    }
    if (v[2] > 0) {
        char when[64];
        int64_t f, m;
        snprintf(when, sizeof when, "in batch %lld", (long long)idx);
        VOLT_TRY(agree(t, mine, 0, what, when, &f, &m));
    }
    if (mine < 0) return mine;   /* (agree found it: not reached) */
    if (armed) *sig = volt__signal_from_vote(v);
    return VOLT_OK;
}

static volt_status eval_batch(volt_trainer *t, volt__step_fn fn, const char *step_what, const volt_batch *b, int64_t idx,
                              int64_t span, const char *what, int *sig) {
    t->cur_batch_size = b->size;
    volt_step_begin(t->step, false, 0);
    t->in_step = true;
    volt_status st = fn(t->module, t->step, b, idx);
    t->in_step = false;
    if (st >= 0) {   /* errors the device flagged (cuda: bad ids) */
        volt_status c = volt_step_check(t->step);
        if (c < 0) st = c;
    }
    volt_step_end(t->step);
    if (st < 0) st = volt__loop_step_err(t, st, step_what);
    st = after_step(t, st, idx, span, what, sig);
    if (st < 0) {   /* this step's or another rank's: nothing it logged is kept for the next flush */
        volt__metrics_discard(t);
        return st;
    }
    return volt__metrics_flush(t);   /* the step's logged values: one device->host read */
}

/* SIGINT / SIGTERM (signals.c) at the end of evaluation batch idx: one process looks at its
 * record; several ranks act on sig, from the batch's exchange (after_step). A stop ends the loop
 * there, its state back to what it was around it, with VOLT_ERR_INTERRUPTED naming `what`. */
static volt_status stop_if_interrupted(volt_trainer *t, volt_stage prev, int64_t idx, int sig, const char *what) {
    if ((t->world <= 1 || !t->strategy) && t->cfg.handle_signals && (sig = volt__signal_pending()) != 0)
        t->interrupted_local = true;
    if (!sig) return VOLT_OK;
    t->sanity = false;
    t->stage = prev;
    drop_hold(t);
    char where[160];
    snprintf(where, sizeof where, "%s stopped after batch %lld", what, (long long)idx);
    return volt__signal_stop(t, sig, where);
}

/* ---- a stage over its loaders --------------------------------------------------------------- */
typedef struct eval_kind {
    volt_stage stage;
    bool sanity;               /* fit's sanity check: num_sanity_val_steps of each loader, nothing logged */
    const char *what;          /* in messages: "validation", "the sanity check", "test", "predict" */
    const char *key;           /* limit_<key>_batches */
    const char *next_prof;     /* the profiler's action for fetching a batch (NULL: none) */
    const char *step_what;     /* the step's name, in messages and the profile */
    volt_predict_fn out;       /* predict: the caller's output callback */
    void *ctx;
} eval_kind;

static const eval_kind VALIDATION = { VOLT_STAGE_VALIDATE, false, "validation", "val", "val_dataloader_next", "validation_step",
                                      NULL, NULL };
static const eval_kind SANITY = { VOLT_STAGE_VALIDATE, true, "the sanity check", "val", "val_dataloader_next",
                                  "validation_step", NULL, NULL };

/* The batches loader l runs in this loop: the stage's limit (a count or a fraction), and for the
 * sanity check num_sanity_val_steps at most (-1: all). */
static volt_status loader_batches(volt_trainer *t, const eval_kind *k, volt_loader *l, int64_t *n) {
    const volt_trainer_config *c = &t->cfg;
    const int64_t limit = k->stage == VOLT_STAGE_VALIDATE ? c->limit_val_batches : k->stage == VOLT_STAGE_TEST ? c->limit_test_batches
                        : c->limit_predict_batches;
    const double frac = k->stage == VOLT_STAGE_VALIDATE ? c->limit_val_fraction : k->stage == VOLT_STAGE_TEST ? c->limit_test_fraction
                      : c->limit_predict_fraction;
    *n = 0;
    const volt_status st = volt__loop_stage_batches(t, k->key, volt_loader_num_batches(l), limit, frac, n);
    if (k->sanity && c->num_sanity_val_steps >= 0 && c->num_sanity_val_steps < *n) *n = c->num_sanity_val_steps;
    return st;
}

volt_status volt__loop_sanity_batches(volt_trainer *t, volt_loader *val, int64_t *n) {
    return loader_batches(t, &SANITY, val, n);
}

volt_status volt__loaders_from(volt_trainer *t, volt_loader *const *l, int n, const char *what, volt__loaders *out) {
    out->n = 0;
    if (n < 0 || n > VOLT_MAX_EVAL_DATALOADERS || (n > 0 && !l))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: %d loaders%s (0 to %d)", what, n, n > 0 && !l ? " but no array" : "",
                          VOLT_MAX_EVAL_DATALOADERS);
    for (int i = 0; i < n; i++) {
        if (!l[i]) return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: loader %d of %d is NULL", what, i, n);
        out->l[i] = l[i];
    }
    out->n = n;
    return VOLT_OK;
}

volt_status volt__loaders_agree(volt_trainer *t, const volt__loaders *set, const char *what) {
    if (t->world <= 1 || !t->strategy) return VOLT_OK;
    int64_t lo, hi;
    VOLT_TRY(agree(t, VOLT_OK, set->n, what, "before its first batch", &lo, &hi));
    if (lo != hi)   /* a rank would run a loop, or a loader's loop, the others do not: they would wait in its collectives */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: the ranks were given %lld to %lld evaluation loaders (this rank %d): "
                          "every rank must have the same number", what, (long long)lo, (long long)hi, set->n);
    return VOLT_OK;
}

/* on_predict_batch_end: inside the step, where the prediction still lives */
static volt_status predict_batch_end(volt_trainer *t, const volt_tensor *pred, const volt_batch *b, int64_t i) {
    CB_HOOK3(t, on_predict_batch_end, pred, b, i);
    MOD_HOOK2(t, on_predict_batch_end, pred, b, i);
    return VOLT_OK;
}

/* predict's batch: the step, the output callback, on_predict_batch_end inside the step (where
 * the prediction still lives) */
static volt_status predict_batch(volt_trainer *t, const eval_kind *k, const volt_batch *b, int64_t i, int64_t span,
                                 const char *what, int *sig) {
    volt_tensor *pred = NULL;
    volt_step_begin(t->step, false, 0);
    t->in_step = true;
    volt_status st = t->mops->predict_step(t->module, t->step, b, i, &pred);
    t->in_step = false;
    if (st >= 0) {   /* errors the device flagged (cuda: bad ids), before the prediction is handed out */
        volt_status c = volt_step_check(t->step);
        if (c < 0) st = c;
    }
    if (st < 0) st = volt__loop_step_err(t, st, "predict_step");
    else if (!pred) st = volt__terr(t, VOLT_ERR_STATE, "module '%s': predict_step returned no prediction", t->mops->name);
    st = after_step(t, st, i, span, what, sig);
    if (st >= 0) st = volt__metrics_flush(t);
    if (st >= 0) {
        t->errmsg[0] = 0;
        if ((st = k->out(k->ctx, b, pred)) < 0) {   /* the caller's output callback, not the module */
            char why[sizeof t->errmsg];
            snprintf(why, sizeof why, "%s", t->errmsg);
            st = volt__terr(t, st, "%s: the output callback failed at batch %lld (%s)%s%s", what, (long long)i,
                            volt_status_str(st), why[0] ? ": " : "", why);
        }
    }
    if (st >= 0) st = predict_batch_end(t, pred, b, i);
    volt_step_end(t->step);
    volt__metrics_discard(t);
    if (st < 0) return t->errmsg[0] ? st : volt__loop_step_err(t, st, "predict_step");
    return VOLT_OK;
}

/* One batch with its hooks around it; *sig: the signal to stop on after it (after_step). */
static volt_status run_batch(volt_trainer *t, const eval_kind *k, const volt_batch *b, int64_t i, int64_t span,
                             const char *what, int *sig) {
    double p0;   /* the step's time: after the batch-start hooks (timed as their own actions) */
    switch (k->stage) {
    case VOLT_STAGE_VALIDATE:
        CB_HOOK3(t, on_validation_batch_start, b, i);
        MOD_HOOK2(t, on_validation_batch_start, b, i);
        p0 = VOLT__PROF_T0(t);
        VOLT_TRY(eval_batch(t, t->mops->validation_step, k->step_what, b, i, span, what, sig));
        volt__prof_add(t, NULL, NULL, k->step_what, p0);
        CB_HOOK(t, on_validation_batch_end, b, i);
        MOD_HOOK2(t, on_validation_batch_end, b, i);
        return VOLT_OK;
    case VOLT_STAGE_TEST:
        CB_HOOK3(t, on_test_batch_start, b, i);
        MOD_HOOK2(t, on_test_batch_start, b, i);
        p0 = VOLT__PROF_T0(t);
        VOLT_TRY(eval_batch(t, t->mops->test_step, k->step_what, b, i, span, what, sig));
        volt__prof_add(t, NULL, NULL, k->step_what, p0);
        CB_HOOK(t, on_test_batch_end, b, i);
        MOD_HOOK2(t, on_test_batch_end, b, i);
        return VOLT_OK;
    default: {
        CB_HOOK3(t, on_predict_batch_start, b, i);
        MOD_HOOK2(t, on_predict_batch_start, b, i);
        p0 = VOLT__PROF_T0(t);
        const volt_status st = predict_batch(t, k, b, i, span, what, sig);
        volt__prof_add(t, NULL, NULL, k->step_what, p0);
        return st;
    }
    }
}

static volt_status start_hooks(volt_trainer *t, volt_stage stage) {
    switch (stage) {
    case VOLT_STAGE_VALIDATE:
        CB_HOOK(t, on_validation_start);
        MOD_HOOK2(t, on_validation_start);
        CB_HOOK(t, on_validation_epoch_start);
        MOD_HOOK(t, on_validation_epoch_start);
        break;
    case VOLT_STAGE_TEST:
        CB_HOOK(t, on_test_start);
        MOD_HOOK2(t, on_test_start);
        CB_HOOK3(t, on_test_epoch_start);
        MOD_HOOK(t, on_test_epoch_start);
        break;
    default:
        CB_HOOK3(t, on_predict_start);
        MOD_HOOK2(t, on_predict_start);
        CB_HOOK3(t, on_predict_epoch_start);
        MOD_HOOK2(t, on_predict_epoch_start);
        break;
    }
    return VOLT_OK;
}

static volt_status end_hooks(volt_trainer *t, volt_stage stage) {
    switch (stage) {
    case VOLT_STAGE_VALIDATE:
        CB_HOOK(t, on_validation_epoch_end);
        MOD_HOOK(t, on_validation_epoch_end);
        CB_HOOK(t, on_validation_end);
        MOD_HOOK2(t, on_validation_end);
        break;
    case VOLT_STAGE_TEST:
        CB_HOOK(t, on_test_epoch_end);
        MOD_HOOK(t, on_test_epoch_end);
        CB_HOOK(t, on_test_end);
        MOD_HOOK2(t, on_test_end);
        break;
    default:
        CB_HOOK3(t, on_predict_epoch_end);
        MOD_HOOK2(t, on_predict_epoch_end);
        CB_HOOK3(t, on_predict_end);
        MOD_HOOK2(t, on_predict_end);
        break;
    }
    return VOLT_OK;
}

/* In messages: "validation", or "validation (dataloader 1)" with several loaders. */
static void loader_what(const eval_kind *k, const volt__loaders *set, int dl, char *what, size_t n) {
    if (set->n > 1) snprintf(what, n, "%s (dataloader %d)", k->what, dl);
    else snprintf(what, n, "%s", k->what);
}

/* Loader dl of the stage's started and agreed across ranks (*span: the batches every rank runs). */
static volt_status start_loader(volt_trainer *t, const volt__loaders *set, int dl, int64_t n, volt_status ls,
                                const char *what, int64_t *span) {
    t->eval_dl = dl;
    t->num_eval_batches = n;
    return start_agreed(t, set->l[dl], ls, n, what, span);
}

/* Its batches (the loader started: eval_dl and num_eval_batches are its). */
static volt_status run_loader(volt_trainer *t, const eval_kind *k, volt_loader *l, int64_t n, int64_t span, volt_stage prev,
                              const char *what) {
    t->eval_span = span;
    for (int64_t i = 0; i < n; i++) {
        const volt_batch *b;
        t->eval_idx = i;
        volt_status st = volt__loop_next_batch(t, l, k->next_prof, &b);
        if (st == VOLT_STOP) break;
        VOLT_TRY(st);
        int sig = 0;
        VOLT_TRY(run_batch(t, k, b, i, span, what, &sig));
        /* a stop skips the epoch end: a partial validation ranks no checkpoint */
        VOLT_TRY(stop_if_interrupted(t, prev, i, sig, what));
    }
    return VOLT_OK;
}

/* The stage over its loaders: start hooks once, each loader's batches, the epoch metrics (each
 * loader's under its own names) and the end hooks once. Test and predict start their first
 * loader before the start hooks (a loader that cannot start fails the call before them), as
 * they did with one loader; validation after them. *done (may be NULL): set once the epoch end
 * was reached (a checkpoint saved by the end hooks resumes after this validation). */
static volt_status stage_body(volt_trainer *t, const eval_kind *k, const volt__loaders *set, bool *done) {
    int64_t n[VOLT_MAX_EVAL_DATALOADERS];
    volt_status ls[VOLT_MAX_EVAL_DATALOADERS];
    for (int d = 0; d < set->n; d++) {
        ls[d] = loader_batches(t, k, set->l[d], &n[d]);
        if (ls[d] < 0 && (t->world <= 1 || !t->strategy)) return ls[d];   /* with several ranks: agreed on per loader */
    }
    t->n_eval_dl = set->n;
    int64_t span0 = 0;
    char what[64];
    const bool first_early = k->stage != VOLT_STAGE_VALIDATE && set->n > 0;
    if (first_early) {
        loader_what(k, set, 0, what, sizeof what);
        VOLT_TRY(start_loader(t, set, 0, n[0], ls[0], what, &span0));
    }
    const volt_stage prev = t->stage;
    const bool prev_sanity = t->sanity;   /* fit's sanity check sets it around its hooks too */
    t->stage = k->stage;
    t->sanity = k->sanity;
    volt__metrics_drop_accums(t, k->stage);
    t->eval_dl = 0;
    t->num_eval_batches = set->n ? n[0] : 0;
    t->eval_span = span0;
    VOLT_TRY(start_hooks(t, k->stage));
    for (int d = 0; d < set->n; d++) {
        int64_t span = span0;
        loader_what(k, set, d, what, sizeof what);
        if (d > 0 || !first_early) VOLT_TRY(start_loader(t, set, d, n[d], ls[d], what, &span));
        VOLT_TRY(run_loader(t, k, set->l[d], n[d], span, prev, what));
    }
    if (k->stage == VOLT_STAGE_PREDICT) {
        /* predict has no epoch means (Lightning refuses self.log there); what the epoch-end hooks
         * log (ThroughputMonitor's predict keys) is the fresh set the loggers' predict row reads */
        volt__metrics_drop_accums(t, VOLT_STAGE_PREDICT);
        volt__metrics_clear_fresh(t);
    } else if (!k->sanity) {
        volt__metrics_clear_fresh(t);
        VOLT_TRY(volt__metrics_finish_epoch(t, k->stage, k->what));
    } else {
        volt__metrics_drop_accums(t, VOLT_STAGE_VALIDATE);
    }
    if (done) *done = true;
    VOLT_TRY(end_hooks(t, k->stage));
    drop_hold(t);
    t->sanity = prev_sanity;
    t->stage = prev;
    return VOLT_OK;
}

/* The loop's counters back to what they were around it however it ends (a call made from a
 * hook of another's loop leaves that loop's as they were; the top-level call's are "none"). */
static volt_status run_stage(volt_trainer *t, const eval_kind *k, const volt__loaders *set, bool *done) {
    const int64_t nb = t->num_eval_batches, span = t->eval_span, idx = t->eval_idx;
    const int ndl = t->n_eval_dl, dl = t->eval_dl;
    const volt_status st = stage_body(t, k, set, done);
    t->num_eval_batches = nb;
    t->eval_span = span;
    t->eval_idx = idx;
    t->n_eval_dl = ndl;
    t->eval_dl = dl;
    return st;
}

/* Validation (inside fit, or standalone). sanity: num_sanity_val_steps of each loader, log nothing. */
volt_status volt__loop_run_validation(volt_trainer *t, const volt__loaders *val, bool sanity, bool *done) {
    if (!t->mops->validation_step || !val || !val->n) return VOLT_OK;
    return run_stage(t, sanity ? &SANITY : &VALIDATION, val, done);
}

volt_status volt__eval_validate(volt_trainer *t, const volt_module_ops *ops, void *module,
                                const volt__loaders *val, const char *ckpt_path) {
    if (!val->n && t->world <= 1) return volt__terr(t, VOLT_ERR_INVALID_ARG, "validate: no loader");
    VOLT_TRY(volt__loop_prepare_eval(t, ops, module, ckpt_path, "validate"));
    for (int d = 0; d < val->n; d++) {
        volt_status st = volt__loop_shard(t, val->l[d]);
        if (st < 0) return volt__loop_strategy_err(t, st, "data sharding");
    }
    VOLT_TRY(volt__loaders_agree(t, val, "validate"));
    if (!val->n)   /* several ranks: none on any (a rank without one is refused just above, on every rank) */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "validate: no loader");
    if (!ops->validation_step) return volt__terr(t, VOLT_ERR_INVALID_ARG, "module '%s': validation_step is required", ops->name);
    VOLT_TRY(volt__tune_eval_finder(t, val, VOLT_STAGE_VALIDATE));
    VOLT_TRY(volt__loop_run_validation(t, val, false, NULL));
    VOLT_TRY(volt__loop_stage_hooks(t, VOLT_STAGE_VALIDATE, false));
    volt__prof_report(t);
    return VOLT_OK;
}

volt_status volt__eval_test(volt_trainer *t, const volt_module_ops *ops, void *module,
                            const volt__loaders *test, const char *ckpt_path) {
    if (!test->n && t->world <= 1) return volt__terr(t, VOLT_ERR_INVALID_ARG, "test: no loader");
    VOLT_TRY(volt__loop_prepare_eval(t, ops, module, ckpt_path, "test"));
    for (int d = 0; d < test->n; d++) {
        volt_status st = volt__loop_shard(t, test->l[d]);
        if (st < 0) return volt__loop_strategy_err(t, st, "data sharding");
    }
    VOLT_TRY(volt__loaders_agree(t, test, "test"));
    if (!test->n)   /* several ranks: none on any (a rank without one is refused just above, on every rank) */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "test: no loader");
    if (!ops->test_step) return volt__terr(t, VOLT_ERR_INVALID_ARG, "module '%s': test_step is required", ops->name);
    VOLT_TRY(volt__tune_eval_finder(t, test, VOLT_STAGE_TEST));
    static const eval_kind TEST = { VOLT_STAGE_TEST, false, "test", "test", "test_dataloader_next", "test_step", NULL, NULL };
    VOLT_TRY(run_stage(t, &TEST, test, NULL));
    VOLT_TRY(volt__loop_stage_hooks(t, VOLT_STAGE_TEST, false));
    volt__prof_report(t);
    return VOLT_OK;
}

volt_status volt__eval_predict(volt_trainer *t, const volt_module_ops *ops, void *module,
                               const volt__loaders *loaders, const char *ckpt_path, volt_predict_fn out, void *ctx) {
    if (!out || (!loaders->n && t->world <= 1))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "predict: loader and output callback are required");
    VOLT_TRY(volt__loop_prepare_eval(t, ops, module, ckpt_path, "predict"));
    for (int d = 0; d < loaders->n; d++) {
        volt_status st = volt__loop_shard(t, loaders->l[d]);
        if (st < 0) return volt__loop_strategy_err(t, st, "data sharding");
    }
    VOLT_TRY(volt__loaders_agree(t, loaders, "predict"));
    if (!loaders->n)   /* several ranks: none on any (a rank without one is refused just above, on every rank) */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "predict: no loader");
    if (!ops->predict_step) return volt__terr(t, VOLT_ERR_INVALID_ARG, "module '%s': predict_step is required", ops->name);
    VOLT_TRY(volt__tune_eval_finder(t, loaders, VOLT_STAGE_PREDICT));
    const eval_kind k = { VOLT_STAGE_PREDICT, false, "predict", "predict", NULL, "predict_step", out, ctx };
    VOLT_TRY(run_stage(t, &k, loaders, NULL));
    VOLT_TRY(volt__loop_stage_hooks(t, VOLT_STAGE_PREDICT, false));
    volt__prof_report(t);
    return VOLT_OK;
}
