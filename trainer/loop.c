/* fit / validate / test / predict: Lightning's loop semantics (DESIGN §4).
 * global_step counts optimizer steps; callback hooks run before the module's hook of the
 * same name (trainer/loop_hooks.h); validation at epoch end runs before on_train_epoch_end.
 * The evaluation loops (validation, test, predict) are in trainer/eval_loop.c, what the loops
 * stand on (model, optimizer, ckpt_path resolved and loaded) in trainer/setup.c. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/loop_hooks.h"
#include "volt/ops.h"
#include "strategies/comm/comm.h"

/* A hook every callback has a chance at, outside the loops (on_fit_start, ...): the first
 * error is recorded and returned. */
static volt_status cb_hooks_each(volt_trainer *t, size_t off, const char *hook) {
    for (int i = 0; i < t->n_cbs; i++) {
        volt_status (*fn)(void *, volt_trainer *);
        memcpy(&fn, (const char *)t->cbs[i].ops + off, sizeof fn);
        if (!fn) continue;
        const double p0 = VOLT__PROF_T0(t);
        volt_status st = fn(t->cbs[i].self, t);
        volt__prof_add(t, "Callback", t->cbs[i].ops->name, hook, p0);
        if (st < 0) return volt__loop_hook_err(t, st, t->cbs[i].ops->name, hook);
    }
    return VOLT_OK;
}
#define CB_EACH(t, hook) cb_hooks_each((t), offsetof(volt_callback_ops, hook), #hook)

/* Lightning's on_exception: every callback whose table has it (version 2), in order. The
 * error stays the one reported; what a callback says of its own failure goes to stderr. */
static void on_exception(volt_trainer *t, volt_status st) {
    for (int i = 0; i < t->n_cbs; i++) {
        const volt_callback_ops *o = t->cbs[i].ops;
        if (o->version < 2u || !o->on_exception) continue;
        const double p0 = VOLT__PROF_T0(t);
        o->on_exception(t->cbs[i].self, t, st);
        volt__prof_add(t, "Callback", o->name, "on_exception", p0);
    }
}

static volt_status hook_err(volt_trainer *t, volt_status st, const char *who, const char *hook) {
    if (!t->errmsg[0]) volt__terr(t, st, "%s: %s failed (%s)", who ? who : "?", hook, volt_status_str(st));
    else {   /* keep the callee's message, add where it came from; an agreed one stays agreed (the
              * same hook on every rank: the same words) */
        const bool agreed = t->err_agreed;
        char prev[sizeof t->errmsg];
        snprintf(prev, sizeof prev, "%s", t->errmsg);
        volt__terr(t, st, "%s.%s: %s", who ? who : "?", hook, prev);
        t->err_agreed = agreed;
    }
    return st;
}

volt_status volt__loop_hook_err(volt_trainer *t, volt_status st, const char *who, const char *hook) {
    return hook_err(t, st, who, hook);
}

/* Lightning's setup(stage) / teardown(stage): every callback's (table version 4), then the
 * module's (version 3); the first error is returned, a positive status is VOLT_OK. */
static volt_status stage_hooks_run(volt_trainer *t, volt_stage stage, bool setup) {
    const char *hook = setup ? "setup" : "teardown";
    for (int i = 0; i < t->n_cbs; i++) {
        const volt_callback_ops *o = t->cbs[i].ops;
        volt_status (*fn)(void *, volt_trainer *, volt_stage) = o->version < 4u ? NULL : setup ? o->setup : o->teardown;
        if (!fn) continue;
        const double p0 = VOLT__PROF_T0(t);
        const volt_status st = fn(t->cbs[i].self, t, stage);
        volt__prof_add(t, "Callback", o->name, hook, p0);
        if (st < 0) return hook_err(t, st, o->name, hook);
    }
    const volt_module_ops *m = t->mops;
    volt_status (*fn)(void *, volt_trainer *, volt_stage) = !m || m->version < 3u ? NULL : setup ? m->setup_stage : m->teardown;
    if (!fn) return VOLT_OK;
    const double p0 = VOLT__PROF_T0(t);
    const volt_status st = fn(t->module, t, stage);
    volt__prof_add(t, "LightningModule", m->name, setup ? "setup_stage" : "teardown", p0);
    return st < 0 ? hook_err(t, st, m->name, setup ? "setup_stage" : "teardown") : VOLT_OK;
}

/* ... and with several ranks one verdict (a pattern one rank's setup refuses fails them all, in
 * the same words, before any collective of the call's work) */
volt_status volt__loop_stage_hooks(volt_trainer *t, volt_stage stage, bool setup) {
    static const char *const ran[] = { "no rank trained", "no rank validated", "no rank tested", "no rank predicted" };
    const volt_status st = stage_hooks_run(t, stage, setup);
    return volt__agree_status(t, st, setup ? "setup" : "teardown",
                              setup ? ran[(unsigned)stage < 4 ? stage : 0] : "every rank finished its work");
}

volt_status volt__loop_strategy_err(volt_trainer *t, volt_status st, const char *what) {
    return volt__terr(t, st, "strategy '%s': %s: %s", volt__strategy_name(t->strategy), what, volt__strategy_errmsg(t->strategy));
}

/* ---- one step -------------------------------------------------------------------------- */
static volt_status step_err(volt_trainer *t, volt_status st, const char *what);
volt_status volt__loop_step_err(volt_trainer *t, volt_status st, const char *what) { return step_err(t, st, what); }
static volt_status step_err(volt_trainer *t, volt_status st, const char *what) {
    const char *m = volt_step_errmsg(t->step);
    /* a strategy hook (unit_use / unit_grads_ready) failed in a collective: say why */
    const char *sm = (st == VOLT_ERR_TIMEOUT || st == VOLT_ERR_COMM) ? volt__strategy_errmsg(t->strategy) : "";
    /* the step's message may name the stage itself ("backward: loss must be a scalar"): once */
    const size_t wl = strlen(what);
    const bool named = !strncmp(m, what, wl) && m[wl] == ':';
    return volt__terr(t, st < 0 ? st : VOLT_ERR_STATE, "module '%s': %s%s%s%s%s", t->mops->name, named ? "" : what, named ? "" : ": ",
                      m[0] ? m : volt_status_str(st), sm && sm[0] ? ": " : "", sm ? sm : "");
}

volt_status volt__loop_wait_params(volt_trainer *t, const char *what) {
    volt_strategy *sg = t->strategy;
    if (!sg) return VOLT_OK;
    volt_status st = volt__strategy_wait_params(sg);
    return st < 0 ? volt__terr(t, st, "%s: strategy '%s': parameter gather: %s", what, volt__strategy_name(sg), volt__strategy_errmsg(sg)) : VOLT_OK;
}

/* Every parameter's full value valid in this process (FSDP gathers stale units). */
static volt_status materialize_params(volt_trainer *t) {
    volt_strategy *sg = t->strategy;
    volt_status st = volt__strategy_materialize_params(sg);
    return st < 0 ? volt__terr(t, st, "strategy '%s': parameter gather: %s", volt__strategy_name(sg), volt__strategy_errmsg(sg)) : VOLT_OK;
}

volt_status volt__loop_loader_err(volt_trainer *t, volt_loader *l, volt_status st) {
    return volt__terr(t, st, "data loader: %s", volt_loader_errmsg(l));
}

/* The loader's next batch, on the device (the batch hooks get it there), timed under `prof`
 * (NULL: not timed). VOLT_STOP when the loader ended early; a loader's error names it. */
volt_status volt__loop_next_batch(volt_trainer *t, volt_loader *l, const char *prof, const volt_batch **b) {
    const double p0 = prof ? VOLT__PROF_T0(t) : 0;
    const volt_batch *hb;
    volt_status st = volt_loader_next(l, &hb);
    if (st == VOLT_STOP) return st;
    if (st < 0) return volt__loop_loader_err(t, l, st);
    VOLT_TRY(volt__transfer_batch(t, hb, b));   /* host -> device, before the batch hooks */
    if (prof) volt__prof_add(t, NULL, NULL, prof, p0);
    return VOLT_OK;
}

/* ---- training --------------------------------------------------------------------------- */
/* on_before_optimizer_step, after the unscale and before clipping and the step (the boundary calls it back) */
static volt_status before_optimizer_step(void *ctx) {
    volt_trainer *t = ctx;
    CB_HOOK(t, on_before_optimizer_step);
    MOD_HOOK(t, on_before_optimizer_step);
    return VOLT_OK;
}

/* on_before_zero_grad, after the step and before the grads are cleared (callback table version
 * 6, module table version 5) */
static volt_status before_zero_grad(void *ctx) {
    volt_trainer *t = ctx;
    CB_HOOK_V(t, 6u, on_before_zero_grad);
    MOD_HOOK_V(t, 5u, on_before_zero_grad);
    return VOLT_OK;
}

/* The module's configure_gradient_clipping (table version 6), in place of the config's clip. */
static volt_status configure_clip(void *ctx) {
    volt_trainer *t = ctx;
    const double p0 = VOLT__PROF_T0(t);
    t->in_clip_hook = true;
    const volt_status st = t->mops->configure_gradient_clipping(t->module, t, t->cfg.gradient_clip_val,
                                                                t->cfg.gradient_clip_algorithm);
    t->in_clip_hook = false;
    volt__prof_add(t, "LightningModule", t->mops->name, "configure_gradient_clipping", p0);
    if (st == VOLT_STOP) t->should_stop = true;
    return st < 0 ? volt__loop_hook_err(t, st, t->mops->name, "configure_gradient_clipping") : VOLT_OK;
}

volt_status volt_trainer_clip_gradients(volt_trainer *t, float clip_val, const char *algorithm) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!t->in_clip_hook)
        return volt__terr(t, VOLT_ERR_STATE, "clip_gradients: only inside the module's configure_gradient_clipping (the "
                          "grads are whole and unscaled there)");
    if (!(clip_val >= 0) || !isfinite(clip_val))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "clip_gradients: clip_val must be a finite number >= 0, got %g",
                          (double)clip_val);
    if (algorithm && strcmp(algorithm, "norm") && strcmp(algorithm, "value"))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "clip_gradients: algorithm must be \"norm\" or \"value\", got \"%s\"",
                          algorithm);
    /* Lightning's rule: the trainer's clipping, when set, and the call's are one (the hook's
     * arguments passed on pass); NULL is the trainer's algorithm */
    const float cfg_val = t->cfg.gradient_clip_val;
    const char *cfg_algo = t->cfg.gradient_clip_algorithm;
    if (cfg_val > 0 && clip_val != cfg_val)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "clip_gradients: the trainer's gradient_clip_val is %g and clip_gradients "
                          "was given %g: use only one of them (gradient_clip_val = 0 leaves the value to the hook)",
                          (double)cfg_val, (double)clip_val);
    if (cfg_val > 0 && algorithm && strcmp(algorithm, cfg_algo))
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "clip_gradients: the trainer's gradient_clip_algorithm is \"%s\" and "
                          "clip_gradients was given \"%s\": use only one of them", cfg_algo, algorithm);
    if (!algorithm) algorithm = cfg_algo;
    char err[sizeof t->errmsg] = "";
    const volt_status st = volt__strategy_clip(t->strategy, clip_val, !strcmp(algorithm, "value"), false, err, sizeof err);
    return st < 0 ? volt__terr(t, st, "clip_gradients: %s", err[0] ? err : volt_status_str(st)) : VOLT_OK;
}

/* The boundary itself is the strategy's (strategies/boundary.c); the loop adds its counters. */
static volt_status optimizer_step(volt_trainer *t) {
    const bool own_clip = t->mops->version >= 6u && t->mops->configure_gradient_clipping;
    const volt_boundary b = {
        .clip_val = t->cfg.gradient_clip_val, .clip_by_value = !strcmp(t->cfg.gradient_clip_algorithm, "value"),
        .before_step = before_optimizer_step, .before_zero_grad = before_zero_grad, .ctx = t,
        .configure_clip = own_clip ? configure_clip : NULL,
    };
    bool skip = false, ended = false;
    char err[sizeof t->errmsg] = "";
    volt_status st = volt__strategy_optimizer_boundary(t->strategy, &b, &skip, &ended, err, sizeof err);
    if (st < 0 && !ended) return err[0] ? volt__terr(t, st, "%s", err) : st;
    if (skip) return st < 0 ? st : VOLT_OK;   /* not an optimizer step: global_step and the scheduler stay */
    t->global_step++;   /* the weights moved: counted, a failing on_before_zero_grad too (its error returned) */
    if (t->sched && volt_scheduler_get_config(t->sched)->interval == VOLT_SCHED_EVERY_STEP) volt_scheduler_step(t->sched);
    return st < 0 ? st : VOLT_OK;
}

static volt_status train_batch(volt_trainer *t, const volt_batch *b, int64_t idx, int64_t n_batches) {
    if (t->cfg.compile) return volt__compile_train_batch(t, b, idx, n_batches);
    return volt__loop_train_eager(t, b, idx, n_batches);
}

/* What backward starts from, eager and captured alike: the loss over the accumulation (Lightning
 * normalises by accumulate_grad_batches, the last, shorter window of an epoch too: a constant of
 * the fit, so a graph may keep it), times 16-mixed's grad scale (a device value). */
volt_tensor *volt__loop_backward_loss(volt_trainer *t, volt_step *s, volt_tensor *loss) {
    if (t->cfg.accumulate_grad_batches > 1) loss = volt_scale(s, loss, 1.0f / (float)t->cfg.accumulate_grad_batches);
    return volt__prec_scale_loss(t, s, loss);
}

volt_status volt__loop_train_eager(volt_trainer *t, const volt_batch *b, int64_t idx, int64_t n_batches) {
    t->cur_batch_size = b->size;
    volt_step *s = t->step;
    volt_step_begin(s, true, t->micro_step++);
    t->in_step = true;
    volt_status st = t->mops->training_step(t->module, s, b, idx);
    t->in_step = false;
    if (st >= 0 && volt_step_status(s) < 0) st = volt_step_status(s);
    if (st < 0) { volt_step_end(s); volt__metrics_discard(t); return step_err(t, st, "training_step"); }
    if (!s->loss) {
        volt_step_end(s);
        volt__metrics_discard(t);
        return volt__terr(t, VOLT_ERR_STATE, "module '%s': training_step did not set a loss (volt_step_set_loss)", t->mops->name);
    }
    if ((st = volt__metrics_stage_loss(t, s)) < 0) { volt_step_end(s); volt__metrics_discard(t); return step_err(t, st, "training_step"); }
    volt_tensor *loss = volt__loop_backward_loss(t, s, s->loss);
    for (int i = 0; i < t->n_cbs; i++)
        if (t->cbs[i].ops->on_before_backward) {
            st = t->cbs[i].ops->on_before_backward(t->cbs[i].self, t, s->loss);
            if (st < 0) { volt_step_end(s); volt__metrics_discard(t); return hook_err(t, st, t->cbs[i].ops->name, "on_before_backward"); }
        }
    if (t->mops->version >= 2u && t->mops->on_before_backward) {
        st = t->mops->on_before_backward(t->module, t, s->loss);
        if (st < 0) { volt_step_end(s); volt__metrics_discard(t); return hook_err(t, st, t->mops->name, "on_before_backward"); }
    }
    bool boundary = volt__loop_ends_window(t, idx, n_batches);
    volt__strategy_begin_backward(t->strategy, boundary);
    st = volt_step_backward(s, loss);
    if (st >= 0) st = volt_step_check(s);   /* errors the device flagged (cuda: bad ids, targets) */
    if (st >= 0 && t->capture_loss) t->captured_loss = volt_tensor_item(s->loss);   /* lr_find: one read */
    volt_step_end(s);
    if (st < 0) { volt__metrics_discard(t); return step_err(t, st, "backward"); }
    VOLT_TRY(volt__metrics_flush(t));   /* the step's logged values: one device->host read, after backward */
    CB_HOOK(t, on_after_backward);
    MOD_HOOK2(t, on_after_backward);
    if (boundary) VOLT_TRY(optimizer_step(t));
    return VOLT_OK;
}

static bool val_this_epoch(volt_trainer *t, const volt__loaders *val) {
    return val->n && t->mops->validation_step && (t->cfg.limit_val_batches != 0 || t->cfg.limit_val_fraction > 0) &&
           (t->cfg.check_val_every_n_epoch == 0 || (t->epoch + 1) % t->cfg.check_val_every_n_epoch == 0);
}

/* check_val_every_n_epoch = 0 (Lightning's None): validation every val_check_interval train
 * batches counted across epochs. */
static bool by_total(const volt_trainer *t) { return t->cfg.check_val_every_n_epoch == 0; }
static bool total_due(const volt_trainer *t) { return t->total_batches > 0 && t->total_batches % t->cfg.val_check_interval == 0; }

/* ReduceLROnPlateau (VOLT_SCHED_PLATEAU) at the end of its interval, after that interval's
 * validation (Lightning: after on_train_epoch_end; with interval "step" after the batch's
 * validation check): stepped with its monitor's latest value. With several ranks, rank 0's value
 * (a step metric may differ per rank; the lr must not). A monitor nobody logged: strict, the
 * error naming what was logged; else a warning (once) and no step. */
static bool is_plateau(const volt_trainer *t, volt_sched_interval when) {
    const volt_scheduler_config *c = t->sched ? volt_scheduler_get_config(t->sched) : NULL;
    return c && c->kind == VOLT_SCHED_PLATEAU && c->interval == when;
}

static volt_status plateau_step(volt_trainer *t) {
    const volt_scheduler_config *c = volt_scheduler_get_config(t->sched);
    double v = 0;
    bool have = volt_trainer_metric(t, c->monitor, &v);
    if (t->world > 1 && t->strategy) {
        double b[2] = { have ? 1.0 : 0.0, v };
        volt_status st = volt__strategy_broadcast(t->strategy, b, sizeof b, 0, "plateau metric");
        if (st < 0) return volt__loop_strategy_err(t, st, "ReduceLROnPlateau's metric");
        have = b[0] > 0;
        v = b[1];
    }
    if (have) return volt_scheduler_step_metric(t->sched, v);
    if (c->strict) {
        char names[512];
        volt_trainer_metric_names(t, names, sizeof names);
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "ReduceLROnPlateau conditioned on metric '%s', which is not available at "
                          "epoch %lld, step %lld (logged: %s): set the scheduler's monitor to one of them, or strict = false to "
                          "skip its steps until it is", c->monitor, (long long)t->epoch, (long long)t->global_step,
                          names[0] ? names : "none");
    }
    if (t->rank == 0 && !t->plateau_warned)
        fprintf(stderr, "volt: warning: ReduceLROnPlateau conditioned on metric '%s', which is not available: its step is "
                "skipped (strict = false; said once)\n", c->monitor);
    t->plateau_warned = true;
    return VOLT_OK;
}

/* The per-epoch scheduler's step, once an epoch (epoch_sched_done; in checkpoints). */
static void epoch_sched_step(volt_trainer *t) {
    if (t->epoch_sched_done) return;
    if (t->sched && volt_scheduler_get_config(t->sched)->interval == VOLT_SCHED_EVERY_EPOCH) volt_scheduler_step(t->sched);
    t->epoch_sched_done = true;
}

static bool max_steps_reached(volt_trainer *t) {
    return t->cfg.max_steps >= 0 && t->global_step >= t->cfg.max_steps;
}

/* A stop (should_stop: EarlyStopping, a hook, max_time) takes effect once min_epochs and
 * min_steps are met; before that it is put off, said once, and training goes on until they
 * are: the request stays (Lightning's _can_stop_early), so fit stops at the first boundary
 * where both are met. */
static bool stop_allowed(volt_trainer *t) {
    const volt_trainer_config *c = &t->cfg;
    if ((c->min_epochs < 0 || t->epoch >= c->min_epochs) && (c->min_steps < 0 || t->global_step >= c->min_steps)) return true;
    if (t->rank == 0 && !t->min_note_printed)
        fprintf(stderr, "volt: a stop was asked for at epoch %lld, step %lld, but min_epochs=%lld / min_steps=%lld are not met: "
                "training goes on\n", (long long)t->epoch, (long long)t->global_step, (long long)c->min_epochs, (long long)c->min_steps);
    t->min_note_printed = true;
    return false;
}

/* max_time: training time so far (a resumed fit counts its checkpoint's) at a boundary. */
static void check_time(volt_trainer *t) {
    if (t->max_time_s <= 0 || t->should_stop) return;
    const double el = volt__now() - t->train_t0;
    if (el < t->max_time_s) return;
    t->should_stop = true;
    if (t->rank == 0 && !t->time_note_printed)
        fprintf(stderr, "volt: max_time %s reached (%.1f s of training): stopping at step %lld\n", t->cfg.max_time, el,
                (long long)t->global_step);
    t->time_note_printed = true;
}

double volt__loop_fit_time(const volt_trainer *t) { return t->fitting ? volt__now() - t->train_t0 : 0; }

/* The batches of an epoch over train (after the limits), and a val fraction checked: at the
 * start of the loop and after a reload of the loaders. */
volt_status volt__loop_agree_train_batches(volt_trainer *t, volt_status st, int64_t n) {
    if (t->world <= 1 || t->cfg.use_distributed_sampler) return st;   /* the shards are alike (padded) */
    int64_t lo = 0, hi = 0;
    VOLT_TRY(volt__eval_agree(t, st, n, "training", &lo, &hi));
    if (lo != hi)   /* the ranks would step apart: one waits in a collective the other never starts */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "fit: use_distributed_sampler=false and the ranks' train loaders yield "
                          "%lld to %lld batches an epoch (this rank %lld): every rank must run the same number of batches",
                          (long long)lo, (long long)hi, (long long)n);
    return VOLT_OK;
}

static volt_status loaders_batches(volt_trainer *t, volt_loader *train, const volt__loaders *val, int64_t *n_batches) {
    *n_batches = 0;
    const volt_status sn = volt__loop_stage_batches(t, "train", volt_loader_num_batches(train), t->cfg.limit_train_batches,
                                                    t->cfg.limit_train_fraction, n_batches);
    VOLT_TRY(volt__loop_agree_train_batches(t, sn, *n_batches));   /* after the count is known (argument order) */
    t->num_train_batches = *n_batches;
    if (*n_batches == 0) return volt__terr(t, VOLT_ERR_INVALID_ARG, "fit: the train loader yields no batches");
    if (!by_total(t) && t->cfg.val_check_interval > *n_batches && val->n && t->mops->validation_step &&
        (t->cfg.limit_val_batches != 0 || t->cfg.limit_val_fraction > 0))   /* Lightning refuses it too: it would never run */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "fit: val_check_interval (%lld) is more than the %lld train batches of an "
                          "epoch: to validate every %lld batches across epochs set check_val_every_n_epoch = 0 (Lightning's "
                          "None); to validate at each epoch's end set val_check_interval = 0", (long long)t->cfg.val_check_interval,
                          (long long)*n_batches, (long long)t->cfg.val_check_interval);
    for (int d = 0; d < val->n && t->cfg.limit_val_fraction > 0; d++) {   /* a fraction that leaves no val batch fails now,
                                                                             not after an epoch */
        int64_t nv = 0, lo, hi;   /* on every rank, when one rank's loader is too short for it */
        volt_status sv = volt__loop_stage_batches(t, "val", volt_loader_num_batches(val->l[d]), -1, t->cfg.limit_val_fraction, &nv);
        VOLT_TRY(volt__eval_agree(t, sv, nv, "validation", &lo, &hi));
    }
    return VOLT_OK;
}

/* After a batch's end hooks: the mid-epoch validation due after it (val_due: kept until the
 * validation reached its end hooks, so a checkpoint written before them, or in one the
 * validation failed or was interrupted in, runs it again on resume), then the step-interval
 * ReduceLROnPlateau when this batch stepped, the time limit and the ranks' stop vote at an
 * optimizer boundary. *leave: the stop is allowed here (the epoch loop ends). A fit resumed from
 * a checkpoint written in the batch's end hooks or in this validation runs what was left of it
 * first (tail_pending), as the uninterrupted fit did; each part clears its flag once done, so a
 * checkpoint written after it does not run it twice. */
static volt_status batch_tail(volt_trainer *t, const volt__loaders *val, bool boundary, bool *leave, bool *validated) {
    *leave = false;
    *validated = t->tail_validated;   /* a resumed tail's validation ran before its checkpoint */
    t->tail_validated = false;
    if (t->val_due) {
        if (by_total(t)) t->val_pending = false;
        t->val_due_ran = false;
        if (val_this_epoch(t, val)) VOLT_TRY(volt__loop_run_validation(t, val, false, &t->val_due_ran));
        *validated = *validated || t->val_due_ran;
        t->val_due = t->val_due_ran = false;
    }
    /* a step 16-mixed skipped (inf/NaN) counts for no scheduler: global_step stayed */
    if (t->batch_stepped && is_plateau(t, VOLT_SCHED_EVERY_STEP)) VOLT_TRY(plateau_step(t));
    t->batch_stepped = false;
    if (boundary) check_time(t);
    int sig = 0;   /* SIGINT / SIGTERM (signals.c): stop here, min_epochs or not */
    if (boundary && t->world > 1) {   /* every rank stops at the same step */
        double f[3] = { t->should_stop ? 1.0 : 0.0, 0, 0 };
        volt__signal_vote(t, f + 1);
        volt_status st2 = volt__strategy_all_reduce_mean(t->strategy, f, 3, "stop vote");
        if (st2 < 0) return volt__loop_strategy_err(t, st2, "stop flag");
        t->should_stop = f[0] > 0;
        sig = volt__signal_from_vote(f + 1);
    } else if (boundary && t->cfg.handle_signals && (sig = volt__signal_pending()) != 0) {
        t->interrupted_local = true;
    }
    t->tail_pending = false;   /* a stop's checkpoint resumes at the next batch */
    if (sig) return volt__signal_stop(t, sig, "fit stopped after the optimizer step");
    *leave = t->should_stop && boundary && stop_allowed(t);
    return VOLT_OK;
}

/* What the batch index of a mid-epoch checkpoint means: the train loader's batch size, samples,
 * ranks and shuffle. A resume at a batch inside an epoch with other ones goes on (as Lightning
 * does) but says that the rest of that epoch sees other samples than the interrupted run would. */
static void train_desc(volt_trainer *t, volt_loader *train) {
    t->train_desc[0] = volt_loader_batch_size(train);
    t->train_desc[1] = volt_dataset_len(volt_loader_dataset(train));
    t->train_desc[2] = t->world;
    t->train_desc[3] = volt_loader_shuffles(train);
}

static void warn_resume_data(volt_trainer *t, int64_t n_batches) {
    static const char *const what[4] = { "batch size", "samples", "ranks", "shuffle" };
    if (!t->ck_train_have || t->batch_in_epoch <= 0 || t->batch_in_epoch >= n_batches || t->rank != 0) return;
    for (int k = 0; k < 4; k++)
        if (t->ck_train[k] != t->train_desc[k]) {
            fprintf(stderr, "volt: warning: fit resumes at batch %lld of epoch %lld with a train loader of %s %lld where the "
                    "checkpoint's run had %lld: the rest of this epoch sees other samples than the interrupted run would "
                    "(later epochs are whole)\n", (long long)t->batch_in_epoch, (long long)t->epoch, what[k],
                    (long long)t->train_desc[k], (long long)t->ck_train[k]);
            return;
        }
}

/* The callbacks' on_train_batch_start, then the module's: VOLT_SKIP_EPOCH from the module's
 * (Lightning's -1; as there, only the module's return is read: a callback's is refused, naming
 * it) sets *skip. With several ranks one rank's skip is every rank's: a vote each batch when the
 * module has the hook (the ranks leave the epoch at the same batch, or one would wait in a
 * collective the others never start). */
static volt_status batch_start(volt_trainer *t, const volt_batch *b, int64_t idx, bool *skip) {
    *skip = false;
    for (int i = 0; i < t->n_cbs; i++) {
        const volt_callback_ops *o = t->cbs[i].ops;
        if (!o->on_train_batch_start) continue;
        const double p0 = VOLT__PROF_T0(t);
        const volt_status st = o->on_train_batch_start(t->cbs[i].self, t, b, idx);
        volt__prof_add(t, "Callback", o->name, "on_train_batch_start", p0);
        if (st == VOLT_STOP) t->should_stop = true;
        else if (st == VOLT_SKIP_EPOCH)
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s.on_train_batch_start returned VOLT_SKIP_EPOCH: only the module's "
                              "on_train_batch_start skips the rest of an epoch (Lightning's -1)", o->name ? o->name : "?");
        else if (st < 0) return hook_err(t, st, o->name, "on_train_batch_start");
    }
    const volt_module_ops *m = t->mops;
    if (!m->on_train_batch_start) return VOLT_OK;
    const double p0 = VOLT__PROF_T0(t);
    const volt_status st = m->on_train_batch_start(t->module, t, b, idx);
    volt__prof_add(t, "LightningModule", m->name, "on_train_batch_start", p0);
    if (st == VOLT_STOP) t->should_stop = true;
    else if (st < 0) return hook_err(t, st, m->name, "on_train_batch_start");
    *skip = st == VOLT_SKIP_EPOCH;
    if (t->world > 1) {
        double f = *skip ? 1.0 : 0.0;
        const volt_status sv = volt__strategy_all_reduce_mean(t->strategy, &f, 1, "skip epoch vote");
        if (sv < 0) return volt__loop_strategy_err(t, sv, "on_train_batch_start's skip vote");
        *skip = f > 0;
    }
    return VOLT_OK;
}

/* The rest of the epoch skipped at batch idx: its batches count as done (a checkpoint written in
 * the epoch's end resumes at the next epoch, as after a whole one), total_batches stays what ran.
 * A window the skip cuts short loses the grads of its batches before idx, so that no step and no
 * checkpoint holds part of a window. */
static void skip_rest(volt_trainer *t, int64_t idx, int64_t n_batches) {
    const int64_t acc = t->cfg.accumulate_grad_batches, first = idx / acc * acc;
    if (idx > first) {
        volt__strategy_zero_grad(t->strategy);
        if (t->rank == 0)
            fprintf(stderr, "volt: warning: on_train_batch_start skipped the rest of epoch %lld at batch %lld, inside an "
                    "accumulation window of %lld: the grads of its batches %lld to %lld are dropped\n", (long long)t->epoch,
                    (long long)idx, (long long)acc, (long long)first, (long long)idx - 1);
    }
    t->batch_in_epoch = n_batches;
}

static volt_status fit_loop(volt_trainer *t, volt_loader *train, volt__loaders *val) {
    int64_t n_batches;
    VOLT_TRY(loaders_batches(t, train, val, &n_batches));
    train_desc(t, train);
    warn_resume_data(t, n_batches);
    const int64_t reload_every = t->dm ? t->cfg.reload_dataloaders_every_n_epochs : 0;
    int64_t reloaded_at = t->epoch;   /* fit_dm asked for the loaders at this epoch */
    t->train_t0 = volt__now() - t->fit_time_loaded;
    if (t->total_batches < 0)   /* an older checkpoint's: counted from its epoch and batch */
        t->total_batches = t->epoch < ((int64_t)1 << 40) / n_batches ? t->epoch * n_batches + t->batch_in_epoch : 0;
    CB_HOOK(t, on_train_start);
    MOD_HOOK2(t, on_train_start);
    while ((t->cfg.max_epochs < 0 || t->epoch < t->cfg.max_epochs) && !(t->should_stop && stop_allowed(t)) && !max_steps_reached(t)) {
        const double pe = VOLT__PROF_T0(t);
        bool resuming_mid = t->batch_in_epoch > 0;
        if (!resuming_mid && reload_every > 0 && t->epoch - reloaded_at >= reload_every) {   /* Lightning's reload */
            VOLT_TRY(volt__dm_reload_loaders(t, &train, val));
            VOLT_TRY(loaders_batches(t, train, val, &n_batches));
            train_desc(t, train);
            reloaded_at = t->epoch;
        }
        if (!resuming_mid) {
            t->epoch_sched_done = t->epoch_val_done = t->epoch_done = false;
            volt__metrics_drop_accums(t, VOLT_STAGE_FIT);
            CB_HOOK(t, on_train_epoch_start);
            MOD_HOOK(t, on_train_epoch_start);
        }
        /* val_check_fraction: every int(f x n) batches, down to whole optimizer steps (at least
         * one) of this epoch's factor (GradientAccumulationScheduler sets it at the epoch start) */
        const int64_t acc = t->cfg.accumulate_grad_batches;
        int64_t val_every = t->cfg.val_check_interval;
        if (t->cfg.val_check_fraction > 0 && t->cfg.val_check_fraction < 1) {
            val_every = (int64_t)(t->cfg.val_check_fraction * (double)n_batches) / acc * acc;
            if (val_every < acc) val_every = acc;
        }
        bool leave = false, validated = false;   /* validated: at the last batch's tail */
        if (resuming_mid && t->tail_pending)   /* the checkpoint was written between a batch and what follows it */
            VOLT_TRY(batch_tail(t, val, volt__loop_ends_window(t, t->batch_in_epoch - 1, n_batches), &leave, &validated));
        if (t->batch_in_epoch < n_batches && !leave) {
            volt_status st = volt_loader_start(train, t->epoch, t->batch_in_epoch);
            if (st < 0) return volt__loop_loader_err(t, train, st);
        }
        while (!leave && t->batch_in_epoch < n_batches && !max_steps_reached(t)) {
            int64_t idx = t->batch_in_epoch;
            const volt_batch *b;
            volt_status st = volt__loop_next_batch(t, train, "train_dataloader_next", &b);
            if (st == VOLT_STOP) break;
            VOLT_TRY(st);
            volt__metrics_clear_fresh(t);
            t->step_loss_set = false;   /* volt_trainer_step_loss: this batch's, once its step ran */
            bool skip;
            VOLT_TRY(batch_start(t, b, idx, &skip));
            if (skip) {   /* the epoch ends here: the time limit and the ranks' stop vote as at a boundary */
                skip_rest(t, idx, n_batches);
                VOLT_TRY(batch_tail(t, val, true, &leave, &validated));
                break;
            }
            const double p0 = VOLT__PROF_T0(t);
            const int64_t steps_before = t->global_step;
            VOLT_TRY(train_batch(t, b, idx, n_batches));
            volt__prof_add(t, NULL, NULL, "run_training_batch", p0);
            t->batch_in_epoch = idx + 1;
            t->total_batches++;
            bool boundary = volt__loop_ends_window(t, idx, n_batches);
            /* a count that falls inside an accumulation window (epochs whose batches are not a multiple
             * of the factor shift it against the windows) validates at that window's end: no
             * validation, so no checkpoint, holds part of a window's grads */
            if (by_total(t) && total_due(t)) t->val_pending = true;
            /* mid-epoch validation, after the end hooks (a checkpoint they write resumes with it:
             * val_due); an epoch's last batch validates at the epoch's end below */
            const bool due = by_total(t) ? t->val_pending && boundary : val_every > 0 && (idx + 1) % val_every == 0;
            t->val_due = due && idx + 1 < n_batches;
            t->batch_stepped = t->global_step > steps_before;
            if (t->batch_in_epoch == n_batches) epoch_sched_step(t);   /* before the last batch's end hooks (Lightning) */
            t->tail_pending = true;
            CB_HOOK(t, on_train_batch_end, b, idx);
            MOD_HOOK(t, on_train_batch_end, b, idx);
            VOLT_TRY(batch_tail(t, val, boundary, &leave, &validated));
        }
        /* The epoch ends when its batches ran out (or the module skipped the rest), at a stop
         * (a boundary where should_stop was allowed) and at max_steps; the loader ending early
         * ends fit. As Lightning: a stop validates there (unless that batch just did) and a
         * max_steps cut does not; either way the epoch's end hooks run and the epoch counts,
         * but only an epoch whose batches all ran steps the per-epoch schedulers. */
        const bool finished = t->batch_in_epoch >= n_batches, cut = !finished && max_steps_reached(t);
        if (!finished && !cut && !leave) break;
        if (finished) epoch_sched_step(t);   /* a skipped rest of the epoch: here */
        t->epoch_sched_done = true;
        volt__metrics_clear_fresh(t);
        VOLT_TRY(volt__metrics_finish_epoch(t, VOLT_STAGE_FIT, "fit"));
        /* at its end, an epoch validates when its interval lands there (Lightning's
         * (batch_idx + 1) % val_check_batch; none at an epoch end the interval passes over) */
        const bool val_end = finished ? (by_total(t) ? t->val_pending : val_every == 0 || n_batches % val_every == 0)
                                      : !cut && !validated;
        if (!t->epoch_val_done && val_this_epoch(t, val) && val_end)
            VOLT_TRY(volt__loop_run_validation(t, val, false, &t->epoch_val_done));
        t->val_pending = false;
        t->epoch_val_done = true;
        t->epoch_done = true;   /* a checkpoint written from here on resumes at the next epoch */
        CB_HOOK(t, on_train_epoch_end);
        MOD_HOOK(t, on_train_epoch_end);
        if (finished && is_plateau(t, VOLT_SCHED_EVERY_EPOCH)) VOLT_TRY(plateau_step(t));   /* not an epoch max_steps cut */
        volt__prof_add(t, NULL, NULL, "run_training_epoch", pe);
        t->epoch++;
        t->batch_in_epoch = 0;
        t->epoch_done = false;
    }
    CB_HOOK(t, on_train_end);
    MOD_HOOK2(t, on_train_end);
    return VOLT_OK;
}


static volt_status fit_run(volt_trainer *t, const volt_module_ops *ops, void *module,
                           volt_loader *train, const volt__loaders *val_in, const char *ckpt_path) {
    volt_status st0;
    t->errmsg[0] = 0;
    if (!train) return volt__terr(t, VOLT_ERR_INVALID_ARG, "fit: no train loader");
    volt__loaders val_set = *val_in, *val = &val_set;   /* a reload replaces them */
    volt__prof_stage(t, "fit");
    const double p0 = VOLT__PROF_T0(t);
    char path[VOLT__CKPT_PATH_CAP];
    VOLT_TRY(volt__loop_add_defaults(t));   /* the resolver of "best" / "last" is ModelCheckpoint's */
    VOLT_TRY(volt__loop_resolve(t, ckpt_path, ckpt_path && !strcmp(ckpt_path, "last"), "fit", path));
    VOLT_TRY(volt__loop_setup_model(t, ops, module, path[0] != 0));
    if (!path[0] && ckpt_path && t->rank == 0)   /* "last" with none saved: a fresh start, said (Lightning warns) */
        fprintf(stderr, "volt: fit: ckpt_path=\"%s\" is set, but there is no last checkpoint available: no checkpoint is "
                "loaded, fit starts from the model's current weights (ModelCheckpoint's save_last keeps one)\n", ckpt_path);
    if (!ops->training_step) return volt__terr(t, VOLT_ERR_INVALID_ARG, "module '%s': training_step is required for fit", ops->name);
    if (t->cfg.reload_dataloaders_every_n_epochs > 0 && !t->dm)   /* Lightning reloads the same loaders: nothing */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "fit: reload_dataloaders_every_n_epochs=%lld needs the loaders from a "
                          "datamodule (volt_trainer_fit_dm): fit was given loaders, there is nothing to ask again",
                          (long long)t->cfg.reload_dataloaders_every_n_epochs);
    VOLT_TRY(volt__loop_module_callbacks(t));   /* configure_callbacks: before any callback hook runs */
    VOLT_TRY(volt__loop_stage_hooks(t, VOLT_STAGE_FIT, true));   /* before the checkpoint, the optimizer, on_fit_start */
    if ((st0 = volt__loop_shard(t, train)) < 0) return volt__loop_strategy_err(t, st0, "data sharding");
    for (int d = 0; d < val->n; d++)
        if ((st0 = volt__loop_shard(t, val->l[d])) < 0) return volt__loop_strategy_err(t, st0, "data sharding");
    VOLT_TRY(volt__loaders_agree(t, val, "fit"));
    if (t->cfg.compile) VOLT_TRY(volt__compile_check_hooks(t));   /* before a finder's sweep runs the hooks */
    VOLT_TRY(volt__tune_fit_finders(t, train, val, path));   /* LearningRateFinder, BatchSizeFinder: before the optimizer */
    VOLT_TRY(volt__loop_ensure_step(t));   /* a finder's trial renews the step; a renew that found no memory left none */
    VOLT_TRY(volt__loop_setup_optim(t, train));
    volt__prof_add(t, NULL, NULL, "setup", p0);
    t->fitting = true;
    t->weights_touched = true;   /* trained from here (setup.c: a module switched away from them is marked) */
    t->should_stop = false;
    t->epoch = t->global_step = t->batch_in_epoch = t->micro_step = t->total_batches = 0;
    t->epoch_sched_done = t->epoch_val_done = t->epoch_done = false;
    t->val_pending = t->val_due = t->val_due_ran = t->batch_stepped = t->tail_pending = t->tail_validated = false;   /* a checkpoint's next */
    t->ck_train_have = false;
    t->fit_time_loaded = 0;
    t->train_t0 = volt__now();
    t->min_note_printed = t->time_note_printed = t->plateau_warned = false;
    if (path[0]) {
        volt_status st = volt__loop_load(t, path, true);
        if (st < 0) { t->fitting = false; return st; }
        const bool nothing_left = (t->cfg.max_epochs >= 0 && t->epoch >= t->cfg.max_epochs) || max_steps_reached(t);
        if (t->rank == 0)
            fprintf(stderr, "volt: fit: restored the training state of the checkpoint at %s (resuming at epoch %lld, step %lld)%s\n", path,
                    (long long)t->epoch, (long long)t->global_step,
                    nothing_left ? ": it already meets max_epochs / max_steps, so this fit trains nothing" : "");
    }
    volt_status st = VOLT_OK;
    bool restore_shuffle = false;
#define RUN(x) do { st = (x); if (st < 0) goto out; } while (0)
    /* the folders the callbacks will write are named in on_fit_start and checked once it ran
     * (write_check.c): a folder that cannot be written, or any rank's failed on_fit_start, fails
     * every rank here, before the sanity check and the first batch */
    if (val->n && !ops->validation_step && t->rank == 0)   /* Lightning warns the same */
        fprintf(stderr, "volt: warning: fit was given a val loader but module '%s' has no validation_step: no validation "
                "runs\n", ops->name ? ops->name : "?");
    for (int d = 0; d < val->n; d++)
        if (ops->validation_step && t->rank == 0 && volt_dataset_len(volt_loader_dataset(val->l[d])) == 0) {   /* Lightning warns too */
            char which[32] = "";
            if (val->n > 1) snprintf(which, sizeof which, " (dataloader %d)", d);
            fprintf(stderr, "volt: warning: fit was given a val loader%s with no samples: no validation runs on it, and no "
                    "val_* metric of it is logged (a monitor on one fails at the first epoch's end)\n", which);
        }
    volt__write_check_begin(t);
    st = CB_EACH(t, on_fit_start);
    if (st >= 0 && ops->on_fit_start && (st = ops->on_fit_start(module, t)) < 0) hook_err(t, st, ops->name, "on_fit_start");
    RUN(volt__write_check_run(t, st));
    /* the sanity check: num_sanity_val_steps of the batches validation runs (-1: all of them;
     * none when limit_val_batches is 0), as Lightning. With several ranks it runs when any rank
     * has a batch for it, on every rank (one with none too: its loop's agreement is collective).
     * None in a fit resumed inside an epoch, or resumed at all with max_steps set (Lightning's
     * restarting loop skips it) */
    const bool restarting = path[0] && (t->batch_in_epoch > 0 || t->cfg.max_steps >= 0);
    int64_t any_sanity = 0;
    for (int d = 0; d < val->n && !restarting && ops->validation_step && t->cfg.num_sanity_val_steps != 0 &&
                    (t->cfg.limit_val_batches != 0 || t->cfg.limit_val_fraction > 0); d++) {
        int64_t n_sanity = 0, fewest, most;
        volt_status sv = volt__loop_sanity_batches(t, val->l[d], &n_sanity);
        RUN(volt__eval_agree(t, sv, n_sanity, "the sanity check", &fewest, &most));
        any_sanity += most;
    }
    if (any_sanity > 0) {   /* sanity_checking from its start hook to its end hook (Lightning) */
        t->sanity = true;
        RUN(CB_EACH(t, on_sanity_check_start));
        RUN(volt__loop_run_validation(t, val, true, NULL));
        RUN(CB_EACH(t, on_sanity_check_end));
        t->sanity = false;
    }
    /* overfit_batches: the same first N batches every epoch (Lightning turns shuffling off) */
    restore_shuffle = (t->cfg.overfit_batches > 0 || t->cfg.overfit_fraction > 0) && volt_loader_shuffles(train);
    if (restore_shuffle) {
        if (t->rank == 0)
            fprintf(stderr, "volt: overfit_batches=%g: the train loader's shuffling is off during fit\n",
                    t->cfg.overfit_batches > 0 ? (double)t->cfg.overfit_batches : t->cfg.overfit_fraction);
        RUN(volt_loader_set_shuffle(train, false));
    }
    RUN(fit_loop(t, train, val));
    RUN(materialize_params(t));   /* full weights on every rank after fit */
    RUN(CB_EACH(t, on_fit_end));
    if (ops->on_fit_end && (st = ops->on_fit_end(module, t)) < 0) { hook_err(t, st, ops->name, "on_fit_end"); goto out; }
    RUN(volt__loop_stage_hooks(t, VOLT_STAGE_FIT, false));
    volt__prof_report(t);
#undef RUN
out:
    /* an error between a step and the next forward: the gathers still complete (no request
     * left dangling, values whole for whoever reads them next); a broken comm answers at once */
    if (st < 0 && t->ps) (void)volt__strategy_wait_params(t->strategy);   /* fit's error stays the one reported */
    if (restore_shuffle) (void)volt_loader_set_shuffle(train, true);
    return st < 0 ? st : VOLT_OK;   /* still fitting: the caller settles signals and runs on_exception */
}

/* ---- the public calls: signals armed for their length, on_exception on failure ------------ */
/* A call starts: signals armed, no interruption yet, its stage and fn set from its first line, so
 * a failure in its set-up is this call's (on_exception sees both; Lightning's state.stage, state.fn). */
volt_trainer_fn volt__loop_call_begin(volt_trainer *t, volt_stage stage, volt_trainer_fn fn) {
    const volt_trainer_fn prev = t->fn;
    volt__signal_arm(t);
    if (t->strategy) (void)volt__strategy_hold_params(t->strategy, false);   /* a loop the last call left by an error */
    if (t->call_depth == 0) {   /* nor its evaluation loop's state (a call from a hook leaves the running one's) */
        volt__metrics_reset_call(t);   /* nor the last call's metrics (Lightning's reset at every run's start) */
        t->call_acc = t->cfg.accumulate_grad_batches;
        t->num_eval_batches = -1;
        t->n_eval_dl = 0;
        t->eval_dl = -1;
    }
    t->interrupted = 0;
    t->stage = stage;
    t->fn = fn;
    t->call_depth++;
    return prev;
}

void volt__loop_call_end(volt_trainer *t, volt_trainer_fn prev) {
    t->call_depth--;
    if (t->call_depth == 0) {   /* a loop an error ended is over too */
        if (t->cfg.accumulate_grad_batches != t->call_acc) {   /* GradientAccumulationScheduler's last epoch's
                                                                  factor is not the next call's (a resume there,
                                                                  the scheduler added again, the step estimate) */
            t->cfg.accumulate_grad_batches = t->call_acc;
            volt__compile_free(t);
        }
        t->num_eval_batches = -1;
        t->n_eval_dl = 0;
        t->eval_dl = -1;
    }
    t->fn = prev;
    volt__signal_disarm(t);
}

/* Under several ranks the process keeps the last call's failure: the words its leave notice
 * gives the other ranks if it then ends (strategies/comm/comm.h). */
static volt_status call_outcome(volt_trainer *t, volt_status st) {
    if (t->world > 1) volt__comm_note_failure(st < 0 ? t->errmsg : NULL);
    return st;
}

volt_status volt__loop_fit(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                           const volt__loaders *val, const char *ckpt_path) {
    const volt_trainer_fn prev = volt__loop_call_begin(t, VOLT_STAGE_FIT, VOLT_FN_FIT);
    volt_status st = volt__signal_settle(t, fit_run(t, ops, module, train, val, ckpt_path), "fit");
    if (st < 0) {
        t->stage = VOLT_STAGE_FIT;     /* a validation inside fit that failed left its own stage */
        on_exception(t, st);           /* still fitting: OnExceptionCheckpoint saves the loop state */
    }
    t->fitting = false;
    t->sanity = false;
    volt__loop_call_end(t, prev);
    return call_outcome(t, st);
}

static volt_status eval_end(volt_trainer *t, volt_trainer_fn prev, volt_status st, const char *what) {
    st = volt__signal_settle(t, st, what);
    if (st < 0) on_exception(t, st);
    volt__loop_call_end(t, prev);
    return call_outcome(t, st);
}

volt_status volt_trainer_fit(volt_trainer *t, const volt_module_ops *ops, void *module,
                             volt_loader *train, volt_loader *val, const char *ckpt_path) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    const volt__loaders set = { .l = { val }, .n = val ? 1 : 0 };
    return volt__loop_fit(t, ops, module, train, &set, ckpt_path);
}

volt_status volt_trainer_fit_loaders(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                                     volt_loader *const *val, int n_val, const char *ckpt_path) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt__loaders set;
    t->errmsg[0] = 0;
    VOLT_TRY(volt__loaders_from(t, val, n_val, "fit", &set));
    return volt__loop_fit(t, ops, module, train, &set, ckpt_path);
}

static volt_status validate_set(volt_trainer *t, const volt_module_ops *ops, void *module, const volt__loaders *set,
                                const char *ckpt_path) {
    const volt_trainer_fn prev = volt__loop_call_begin(t, VOLT_STAGE_VALIDATE, VOLT_FN_VALIDATE);
    return eval_end(t, prev, volt__eval_validate(t, ops, module, set, ckpt_path), "validate");
}

static volt_status test_set(volt_trainer *t, const volt_module_ops *ops, void *module, const volt__loaders *set,
                            const char *ckpt_path) {
    const volt_trainer_fn prev = volt__loop_call_begin(t, VOLT_STAGE_TEST, VOLT_FN_TEST);
    return eval_end(t, prev, volt__eval_test(t, ops, module, set, ckpt_path), "test");
}

static volt_status predict_set(volt_trainer *t, const volt_module_ops *ops, void *module, const volt__loaders *set,
                               const char *ckpt_path, volt_predict_fn out, void *ctx) {
    const volt_trainer_fn prev = volt__loop_call_begin(t, VOLT_STAGE_PREDICT, VOLT_FN_PREDICT);
    return eval_end(t, prev, volt__eval_predict(t, ops, module, set, ckpt_path, out, ctx), "predict");
}

volt_status volt_trainer_validate(volt_trainer *t, const volt_module_ops *ops, void *module,
                                  volt_loader *val, const char *ckpt_path) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    const volt__loaders set = { .l = { val }, .n = val ? 1 : 0 };
    return validate_set(t, ops, module, &set, ckpt_path);
}

volt_status volt_trainer_test(volt_trainer *t, const volt_module_ops *ops, void *module,
                              volt_loader *test, const char *ckpt_path) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    const volt__loaders set = { .l = { test }, .n = test ? 1 : 0 };
    return test_set(t, ops, module, &set, ckpt_path);
}

volt_status volt_trainer_predict(volt_trainer *t, const volt_module_ops *ops, void *module,
                                 volt_loader *loader, const char *ckpt_path, volt_predict_fn out, void *ctx) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    const volt__loaders set = { .l = { loader }, .n = loader ? 1 : 0 };
    return predict_set(t, ops, module, &set, ckpt_path, out, ctx);
}

volt_status volt_trainer_validate_loaders(volt_trainer *t, const volt_module_ops *ops, void *module,
                                          volt_loader *const *val, int n, const char *ckpt_path) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt__loaders set;
    t->errmsg[0] = 0;
    VOLT_TRY(volt__loaders_from(t, val, n, "validate", &set));
    return validate_set(t, ops, module, &set, ckpt_path);
}

volt_status volt_trainer_test_loaders(volt_trainer *t, const volt_module_ops *ops, void *module,
                                      volt_loader *const *test, int n, const char *ckpt_path) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt__loaders set;
    t->errmsg[0] = 0;
    VOLT_TRY(volt__loaders_from(t, test, n, "test", &set));
    return test_set(t, ops, module, &set, ckpt_path);
}

volt_status volt_trainer_predict_loaders(volt_trainer *t, const volt_module_ops *ops, void *module,
                                         volt_loader *const *loaders, int n, const char *ckpt_path,
                                         volt_predict_fn out, void *ctx) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt__loaders set;
    t->errmsg[0] = 0;
    VOLT_TRY(volt__loaders_from(t, loaders, n, "predict", &set));
    return predict_set(t, ops, module, &set, ckpt_path, out, ctx);
}
