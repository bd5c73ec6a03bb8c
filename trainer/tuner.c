/* The tuner, as Lightning's Tuner (include/volt/trainer.h, docs/TRAINER.md): the
 * learning-rate range test (lr_find) and the batch size finder (scale_batch_size). Both save
 * the state to a hidden checkpoint, run eager optimizer steps, load the checkpoint back
 * (weights, grad scaler, loop state), remove it, and drop the optimizer and scheduler so the
 * next fit builds them from configure_optimizers.
 *
 * lr_find: num_training steps with the learning rate swept from min_lr to max_lr while the
 * smoothed loss is recorded. scale_batch_size: trials of steps_per_trial steps at growing
 * batch sizes until one runs out of memory (power), then bisection (binsearch). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/fsutil.h"
#include "trainer/trainer_internal.h"

/* ---- shared: the hidden checkpoint, one optimizer step ---------------------------------------- */
/* The state to come back to, in a hidden file rank 0 names for every rank (path[4096]). */
static volt_status tune_save(volt_trainer *t, const char *what, char *path) {
    struct { char path[4096]; } h;
    memset(&h, 0, sizeof h);
    char err[600] = "";
    if (t->rank == 0) {
        const char *root = t->cfg.default_root_dir;
        if (volt__mkdirs(root, err, sizeof err) == VOLT_OK)   /* a new run's root may not exist yet */
            snprintf(h.path, sizeof h.path, "%s/.%s-%d-%llx.safetensors", root, what, (int)getpid(),
                     (unsigned long long)(volt__now() * 1e6));
    }
    volt_status st = volt__strategy_broadcast(t->strategy, &h, sizeof h, 0, "tuner state path");
    if (st < 0)
        return volt__terr(t, st, "%s: strategy '%s': %s", what, volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    if (!h.path[0])   /* rank 0 could not make the root: every rank stops here */
        return volt__terr(t, VOLT_ERR_IO, "%s: default_root_dir: %s", what, t->rank == 0 ? err : "rank 0 could not create it");
    memcpy(path, h.path, sizeof h.path);
    /* rank 0 writes it alone (unsharded): every rank learns how that went, in the same words */
    st = volt__agree_status(t, volt_trainer_save_checkpoint(t, path), what, "no rank tuned");
    if (st < 0 && t->rank == 0) volt_checkpoint_remove(path);   /* a partial file */
    return st;
}

/* Back to where the tuner started: no grads of a step that failed inside a window, then weights,
 * grad scaler, loop state; the file removed once read (kept, and named, when it could not be: it
 * holds the only copy of the weights from before the tuner); a fresh optimizer at the next fit. */
static volt_status tune_restore(volt_trainer *t, const char *path) {
    volt__strategy_zero_grad(t->strategy);
    volt_status st = volt__loop_load(t, path, true);
    if (t->world > 1) (void)volt__strategy_barrier(t->strategy, "tuner state read");   /* every rank has read it */
    if (st >= 0 && t->rank == 0) volt_checkpoint_remove(path);
    if (st < 0) {
        char was[sizeof t->errmsg];
        memcpy(was, t->errmsg, sizeof was);
        st = volt__terr(t, st, "%s (the state from before the tuner stays in %s: load it back with ckpt_path)", was, path);
    }
    volt__loop_drop_optim(t);
    return st;
}

/* The batches of a pass over the train loader, as fit counts them (limit_train_batches). */
static volt_status tune_batches(volt_trainer *t, volt_loader *train, const char *what, int64_t *n) {
    *n = 0;
    const volt_status sn = volt__loop_stage_batches(t, "train", volt_loader_num_batches(train), t->cfg.limit_train_batches,
                                                    t->cfg.limit_train_fraction, n);
    VOLT_TRY(volt__loop_agree_train_batches(t, sn, *n));
    if (*n < 1) return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: the train loader yields no batches", what);
    return VOLT_OK;
}

/* One optimizer step: the micro-batches of one accumulation window (as fit cuts them:
 * accumulate_grad_batches of them, fewer at the end of a pass over the loader), passes over the
 * loader restarting as needed (*batch, *epoch: where the previous step left it; *batch =
 * n_batches before the first). *loss: the mean of the micro-batches' losses. */
static volt_status tune_step(volt_trainer *t, volt_loader *train, int64_t n_batches, int64_t *batch, int64_t *epoch,
                             double *loss) {
    double sum = 0;
    int64_t micro = 0;
    volt_status st = VOLT_OK;
    for (bool ends = false; !ends;) {
        if (*batch >= n_batches) {
            *batch = 0;
            if ((st = volt_loader_start(train, ++*epoch, 0)) < 0) return volt__loop_loader_err(t, train, st);
        }
        const volt_batch *b;
        if ((st = volt__loop_next_batch(t, train, NULL, &b)) == VOLT_STOP)
            st = volt__terr(t, VOLT_ERR_STATE, "data loader: ended early");
        if (st < 0) return st;
        ends = volt__loop_ends_window(t, *batch, n_batches);
        t->capture_loss = true;
        st = volt__loop_train_eager(t, b, *batch, n_batches);
        t->capture_loss = false;
        if (st < 0) return st;
        ++*batch;
        sum += t->captured_loss;
        micro++;
    }
    *loss = sum / (double)micro;
    return VOLT_OK;
}

/* A tuner call from a hook of a running call (fit, validate, test, predict, the tuner): refused
 * before anything of that call's state (stage, step, batch buffers) is touched. */
static volt_status tune_inside(volt_trainer *t, const char *what) {
    t->errmsg[0] = 0;
    return volt__terr(t, VOLT_ERR_STATE, "%s: not inside fit, validate, test, predict or another tuner call (call it "
                      "before fit)", what);
}

/* ---- lr_find ----------------------------------------------------------------------------------- */
void volt_lr_find_config_init(volt_lr_find_config *c) {
    *c = (volt_lr_find_config){ .version = VOLT_LR_FIND_CONFIG_VERSION, .min_lr = 1e-8, .max_lr = 1.0, .num_training = 100,
                                .linear = false, .early_stop_threshold = 4.0 };
}

void volt_lr_find_result_free(volt_lr_find_result *r) {
    if (!r) return;
    free(r->lrs);
    free(r->losses);
    r->lrs = r->losses = NULL;
    r->n = 0;
}

/* Lightning 2.6's _LRFinder.suggestion: the points after the first skip_begin and before the
 * last skip_end whose loss is finite, the gradient of the loss over the learning rate there
 * (torch.gradient with the rates as coordinates: the second-order formula for uneven spacing
 * inside, one-sided at the ends), and the rate where it is least. */
double volt_lr_find_suggestion(const volt_lr_find_result *r, int64_t skip_begin, int64_t skip_end) {
    if (!r || !r->lrs || !r->losses || skip_begin < 0 || skip_end < 0 || r->n - skip_begin - skip_end < 2) return NAN;
    const int64_t a = skip_begin, b = r->n - skip_end;
    int64_t prev2 = -1, prev = -1, best = -1, m = 0;   /* the finite points' indices, two behind */
    double g_best = 0;
    /* the gradient at finite point `at`, between `lo` and `hi` (-1: an end) */
    #define X(i) r->lrs[i]
    #define F(i) r->losses[i]
    for (int64_t i = a; i <= b; i++) {
        const bool have = i < b && isfinite(r->losses[i]);
        if (!have && i < b) continue;
        /* point prev gets its gradient once its right neighbour (i, or none at the end) is known */
        if (prev >= 0) {
            const int64_t lo = prev2, hi = i < b ? i : -1;
            double g;
            if (lo < 0 && hi < 0) g = NAN;
            else if (lo < 0) g = (F(hi) - F(prev)) / (X(hi) - X(prev));
            else if (hi < 0) g = (F(prev) - F(lo)) / (X(prev) - X(lo));
            else {
                const double h1 = X(prev) - X(lo), h2 = X(hi) - X(prev);
                g = (h1 * h1 * F(hi) - h2 * h2 * F(lo) + (h2 * h2 - h1 * h1) * F(prev)) / (h1 * h2 * (h1 + h2));
            }
            if (best < 0 || g < g_best || (isnan(g_best) && !isnan(g))) { best = prev; g_best = g; }
        }
        if (i < b) { prev2 = prev; prev = i; m++; }
    }
    #undef X
    #undef F
    return m < 2 || best < 0 ? NAN : r->lrs[best];
}

/* The tuner's suggestion: Lightning's defaults, the first 10 points and the last skipped. */
static double suggest(const volt_lr_find_result *r) { return volt_lr_find_suggestion(r, 10, 1); }

/* The config, checked: defaults for NULL. */
static volt_status lr_cfg(volt_trainer *t, const volt_lr_find_config *cfg, volt_lr_find_config *c) {
    volt_lr_find_config_init(c);
    if (cfg) {
        if (!VOLT_VERSION_OK(cfg->version, VOLT_LR_FIND_CONFIG_VERSION))
            return volt__terr(t, VOLT_ERR_VERSION, "lr_find: config has unknown version %u (want %u)", cfg->version,
                              VOLT_LR_FIND_CONFIG_VERSION);
        *c = *cfg;
    }
    /* the sweep sets float learning rates: a min_lr that is 0 as a float trained at lr 0 */
    if (!((float)c->min_lr > 0) || !(c->max_lr > c->min_lr) || !(c->max_lr <= FLT_MAX) || c->num_training < 2 ||
        c->num_training > 100000)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "lr_find: need 0 < min_lr (%g; as a float, at least %g) < max_lr (%g) and "
                          "2 <= num_training (%lld) <= 100000", c->min_lr, (double)FLT_TRUE_MIN, c->max_lr,
                          (long long)c->num_training);
    return VOLT_OK;
}

volt_status volt__tune_lr_check(volt_trainer *t, const volt_lr_find_config *cfg) {
    volt_lr_find_config c;
    return lr_cfg(t, cfg, &c);
}

/* The sweep itself, once the model, setup("fit") and the loader's sharding are done (the
 * standalone call's set-up, or fit's for LearningRateFinder): a fresh optimizer, the hidden
 * checkpoint, the steps, the state back, the optimizer dropped. */
volt_status volt__tune_lr(volt_trainer *t, volt_loader *train, const volt_lr_find_config *cfg, volt_lr_find_result *out) {
    memset(out, 0, sizeof *out);
    out->suggestion = NAN;
    volt_lr_find_config c;
    VOLT_TRY(lr_cfg(t, cfg, &c));
    volt__loop_drop_optim(t);   /* a fresh optimizer, as a new fit's */
    VOLT_TRY(volt__loop_setup_optim(t, train));
    int64_t n_batches;
    VOLT_TRY(tune_batches(t, train, "lr_find", &n_batches));
    if (!(out->lrs = malloc(sizeof(double) * (size_t)c.num_training)) || !(out->losses = malloc(sizeof(double) * (size_t)c.num_training))) {
        volt_lr_find_result_free(out);
        return volt__terr(t, VOLT_ERR_NOMEM, "lr_find: out of memory");
    }
    char path[4096];
    volt_status st = tune_save(t, "lr_find", path);
    if (st < 0) {
        volt_lr_find_result_free(out);
        return st;
    }
    volt_scheduler *sched = t->sched;   /* the learning rate is the test's, step by step */
    t->sched = NULL;
    t->fitting = true;
    double avg = 0, best = INFINITY;
    const double beta = 0.98;
    int64_t batch = n_batches, epoch = -1;
    for (int64_t i = 0; i < c.num_training && st >= 0; i++) {
        const double f = (double)i / (double)(c.num_training - 1);
        const double lr = c.linear ? c.min_lr + (c.max_lr - c.min_lr) * f : c.min_lr * pow(c.max_lr / c.min_lr, f);
        volt_optimizer_set_lr(t->opt, (float)lr);
        double step_loss = 0;
        st = tune_step(t, train, n_batches, &batch, &epoch, &step_loss);
        if (st < 0 && t->world <= 1) break;
        /* whether the step failed, the loss, and a pending SIGINT / SIGTERM (signals.c): with
         * several ranks one exchange of them, so every rank stops after the same step (a rank
         * whose step failed after its collectives does not leave the others waiting) */
        double v[4] = { st < 0, st < 0 ? 0 : step_loss, 0, 0 };
        if (t->cfg.handle_signals) volt__signal_vote(t, v + 2);
        if (t->world > 1) {
            const volt_status cs = volt__strategy_all_reduce_mean(t->strategy, v, t->cfg.handle_signals ? 4 : 2, "lr_find step vote");
            if (st < 0) break;   /* this rank's own error is the one reported */
            if (cs < 0) {
                st = volt__terr(t, cs, "lr_find: strategy '%s': %s", volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
                break;
            }
            if (v[0] > 0) {
                st = volt__terr(t, VOLT_ERR_STATE, "lr_find: the step %lld failed on another rank (its error is said there)",
                                (long long)i);
                break;
            }
        }
        const int sig = volt__signal_from_vote(v + 2);
        if (sig) {
            char where[64];
            snprintf(where, sizeof where, "lr_find stopped after its step %lld", (long long)i);
            st = volt__signal_stop(t, sig, where);
            break;
        }
        const double loss = v[1];
        avg = beta * avg + (1 - beta) * loss;
        const double smoothed = avg / (1 - pow(beta, (double)(i + 1)));
        out->lrs[out->n] = lr;
        out->losses[out->n++] = smoothed;
        if (!isfinite(smoothed)) break;
        if (smoothed < best) best = smoothed;
        if (c.early_stop_threshold > 0 && i > 1 && smoothed > c.early_stop_threshold * best) break;
    }
    t->fitting = false;
    t->sched = sched;
    volt_status lst = tune_restore(t, path);
    if (st < 0 || lst < 0) {
        volt_lr_find_result_free(out);
        return st < 0 ? st : lst;
    }
    out->suggestion = suggest(out);
    return VOLT_OK;
}

static volt_status lr_find_run(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                               const volt_lr_find_config *cfg, volt_lr_find_result *out) {
    t->errmsg[0] = 0;
    memset(out, 0, sizeof *out);
    out->suggestion = NAN;
    VOLT_TRY(volt__tune_lr_check(t, cfg));
    VOLT_TRY(volt__loop_setup_train(t, ops, module, train));
    VOLT_TRY(volt__tune_lr(t, train, cfg, out));
    return volt__loop_stage_hooks(t, VOLT_STAGE_FIT, false);   /* the tuner's fit ends: teardown("fit") */
}

volt_status volt_trainer_lr_find(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                                 const volt_lr_find_config *cfg, volt_lr_find_result *out) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!out || !train) {
        t->errmsg[0] = 0;
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "lr_find: NULL loader or result");
    }
    if (t->fn != VOLT_FN_NONE) return tune_inside(t, "lr_find");
    /* fn TUNE, not FIT (include/volt/trainer.h): the step hooks it runs are no fit's; `fitting`
     * (internal) is set for the steps all the same, as the accumulation checks read it */
    const volt_trainer_fn prev = volt__loop_call_begin(t, VOLT_STAGE_FIT, VOLT_FN_TUNE);
    volt_status st = volt__signal_settle(t, lr_find_run(t, ops, module, train, cfg, out), "lr_find");
    volt__loop_call_end(t, prev);
    if (st < 0) volt_lr_find_result_free(out);   /* a signal after the last step: no result either */
    return st;
}

/* ---- scale_batch_size -------------------------------------------------------------------------- */
void volt_batch_size_config_init(volt_batch_size_config *c) {
    *c = (volt_batch_size_config){ .version = VOLT_BATCH_SIZE_CONFIG_VERSION, .mode = VOLT_BATCH_SCALE_POWER,
                                   .steps_per_trial = 3, .init_val = 2, .max_trials = 25 };
}

/* A trial's steps at the loader's size: training steps (fit's search) or evaluation steps
 * (validate / test / predict: stage). */
typedef struct bs_kind { bool eval; volt_stage stage; } bs_kind;

/* Evaluation step i of a trial: the loader's batch i % n_batches (started again at its first),
 * nothing kept: what it logs is dropped, a prediction unread. */
static volt_status eval_step(volt_trainer *t, volt_loader *l, volt_stage stage, int64_t i, int64_t n_batches) {
    volt_status st;
    if (i % n_batches == 0 && (st = volt_loader_start(l, 0, 0)) < 0) return volt__loop_loader_err(t, l, st);
    const volt_batch *b;
    if ((st = volt__loop_next_batch(t, l, NULL, &b)) == VOLT_STOP) st = volt__terr(t, VOLT_ERR_STATE, "data loader: ended early");
    if (st < 0) return st;
    const volt_module_ops *m = t->mops;
    t->cur_batch_size = b->size;
    volt_step_begin(t->step, false, 0);
    t->in_step = true;
    volt_tensor *pred = NULL;
    st = stage == VOLT_STAGE_PREDICT ? m->predict_step(t->module, t->step, b, i % n_batches, &pred)
       : stage == VOLT_STAGE_TEST ? m->test_step(t->module, t->step, b, i % n_batches)
       : m->validation_step(t->module, t->step, b, i % n_batches);
    t->in_step = false;
    if (st >= 0) st = volt_step_check(t->step);   /* errors the device flagged, out of memory too */
    if (st >= 0 && stage == VOLT_STAGE_PREDICT && !pred)   /* as the predict loop says it */
        st = volt_step_fail(t->step, VOLT_ERR_STATE, "predict_step returned no prediction");
    volt_step_end(t->step);
    volt__metrics_discard(t);
    return st < 0 ? volt__loop_step_err(t, st, stage == VOLT_STAGE_PREDICT ? "predict_step"
                                               : stage == VOLT_STAGE_TEST ? "test_step" : "validation_step")
                  : VOLT_OK;
}

/* One trial: `steps` steps at batch size `size` from the loader's first batch (optimizer steps,
 * or evaluation steps). VOLT_OK: it ran; VOLT_ERR_NOMEM: it ran out of memory; other errors are
 * the search's. Either way the step is made anew for the next trial; *renew gets that status (an
 * error: no step to go on with, the search stops). */
static volt_status bs_trial(volt_trainer *t, volt_loader *train, const bs_kind *kind, int64_t size, int64_t steps,
                            volt_status *renew) {
    *renew = VOLT_OK;
    volt_status st = volt_loader_set_batch_size(train, size);
    if (st < 0) return volt__terr(t, st, "scale_batch_size: %s", volt_loader_errmsg(train));   /* NOMEM: a trial that ran out */
    int64_t n_batches = volt_loader_num_batches(train), batch, epoch = -1;
    if (!kind->eval) VOLT_TRY(tune_batches(t, train, "scale_batch_size", &n_batches));
    else if (n_batches < 1) return volt__terr(t, VOLT_ERR_INVALID_ARG, "scale_batch_size: the loader yields no batches");
    batch = n_batches;
    for (int64_t i = 0; i < steps && st >= 0; i++) {
        double loss;
        st = kind->eval ? eval_step(t, train, kind->stage, i, n_batches) : tune_step(t, train, n_batches, &batch, &epoch, &loss);
        int sig = 0;
        if (st >= 0 && t->cfg.handle_signals && (sig = volt__signal_pending()) != 0) {
            char where[96];
            snprintf(where, sizeof where, "scale_batch_size stopped after a step at batch size %lld", (long long)size);
            st = volt__signal_stop(t, sig, where);
        }
    }
    if (st < 0 && !kind->eval) volt__strategy_zero_grad(t->strategy);   /* a step that failed may have written some */
    char err[sizeof t->errmsg];
    memcpy(err, t->errmsg, sizeof err);
    *renew = volt__loop_renew_step(t);   /* what this size grew comes back */
    if (*renew < 0 && st < 0) {   /* both failed: the trial's message first */
        char again[sizeof t->errmsg];
        memcpy(again, t->errmsg, sizeof again);
        volt__terr(t, st, "%s; then %s", err, again);
    }
    return st;
}

/* The config, checked (defaults for NULL); one process only. */
static volt_status bs_cfg(volt_trainer *t, const volt_batch_size_config *cfg, volt_batch_size_config *c) {
    volt_batch_size_config_init(c);
    if (cfg) {
        if (!VOLT_VERSION_OK(cfg->version, VOLT_BATCH_SIZE_CONFIG_VERSION))
            return volt__terr(t, VOLT_ERR_VERSION, "scale_batch_size: config has unknown version %u (want 1..%u: "
                              "volt_batch_size_config_init sets it)", cfg->version, VOLT_BATCH_SIZE_CONFIG_VERSION);
        *c = *cfg;
    }
    if (c->mode != VOLT_BATCH_SCALE_POWER && c->mode != VOLT_BATCH_SCALE_BINSEARCH)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "scale_batch_size: mode must be power or binsearch, got %d", (int)c->mode);
    if (c->steps_per_trial < 1 || c->init_val < 1 || c->max_trials < 1 || c->steps_per_trial > 100000 || c->max_trials > 100000)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "scale_batch_size: need 1 <= steps_per_trial (%lld) <= 100000, init_val "
                          "(%lld) >= 1 and 1 <= max_trials (%lld) <= 100000", (long long)c->steps_per_trial,
                          (long long)c->init_val, (long long)c->max_trials);
    if (t->world > 1)   /* Lightning: "Tuning the batch size is currently not supported with distributed strategies." */
        return volt__terr(t, VOLT_ERR_UNSUPPORTED, "scale_batch_size: not supported with distributed strategies (%d "
                          "processes under '%s'): run it on one process, then train with the size it finds", t->world,
                          volt__strategy_name(t->strategy));
    return VOLT_OK;
}

volt_status volt__tune_batch_size_check(volt_trainer *t, const volt_batch_size_config *cfg) {
    volt_batch_size_config c;
    return bs_cfg(t, cfg, &c);
}

/* The trials: power (doubling until one runs out of memory) or binsearch, at most n (the
 * samples); *best gets the largest size that ran (an error when none did). */
static volt_status bs_search(volt_trainer *t, volt_loader *train, const bs_kind *kind, const volt_batch_size_config *cfg,
                             int64_t n, volt_batch_size_result *out, int64_t *best_out) {
    const volt_batch_size_config c = *cfg;
    int64_t size = c.init_val < n ? c.init_val : n, best = 0, low = 0, high = 0, ran = 0, failed = 0;
    char oom[sizeof t->errmsg] = "";   /* the last trial that ran out of memory: its message */
    volt_status st = VOLT_OK;
    for (int64_t trial = 0;; trial++) {
        volt_status renew;
        st = bs_trial(t, train, kind, size, c.steps_per_trial, &renew);
        if (st < 0 && st != VOLT_ERR_NOMEM) break;   /* the search's own error (a signal included) stands */
        const bool ok = st >= 0;
        if (out->n_trials < VOLT_BATCH_SIZE_TRIALS_MAX) {   /* every trial that ran or ran out is listed */
            out->sizes[out->n_trials] = size;
            out->ran[out->n_trials] = ok;
        }
        out->n_trials++;
        if (renew < 0) {   /* no step to go on with: the search ends; a size found stands (the next set-up makes a step) */
            if (ok && size > best) best = size;
            st = best > 0 ? VOLT_OK : renew;
            break;
        }
        if (!ok) {
            failed = size;
            memcpy(oom, t->errmsg, sizeof oom);
        }
        t->errmsg[0] = 0;
        st = VOLT_OK;
        if (ok) {
            if (size > best) best = size;
            low = size;
            ran++;
            if (c.mode == VOLT_BATCH_SCALE_POWER ? trial + 1 >= c.max_trials : ran >= c.max_trials) break;
            if (high) {   /* binsearch, after a failure: between the largest that ran and the smallest that did not */
                if (high - low <= 1) break;
                size = (low + high) / 2;
            } else {
                const int64_t next = size > n / 2 ? n : 2 * size;   /* never past the samples there are */
                if (next == size) break;
                size = next;
            }
        } else {
            if (c.mode == VOLT_BATCH_SCALE_POWER) {
                if (best > 0 || trial + 1 >= c.max_trials) break;   /* the size before it ran: that is the answer */
                size /= 2;   /* nothing ran yet: smaller until one does */
            } else {
                high = size;
                if (high - low <= 1) break;
                size = (low + high) / 2;
            }
            if (size < 1) break;
        }
    }
    if (st >= 0 && best == 0)
        st = volt__terr(t, VOLT_ERR_NOMEM, "scale_batch_size: no batch size ran: the smallest tried, %lld, ran out of "
                        "memory (%s)", (long long)failed, oom[0] ? oom : "out of memory");
    *best_out = best;
    return st;
}

/* The search, once the model, setup("fit") and the loader's sharding are done (the standalone
 * call's set-up, or fit's for BatchSizeFinder). */
volt_status volt__tune_batch_size(volt_trainer *t, volt_loader *train, const volt_batch_size_config *cfg,
                                  volt_batch_size_result *out) {
    memset(out, 0, sizeof *out);
    volt_batch_size_config c;
    VOLT_TRY(bs_cfg(t, cfg, &c));
    volt__loop_drop_optim(t);   /* a fresh optimizer, as a new fit's */
    VOLT_TRY(volt__loop_setup_optim(t, train));
    const int64_t n = volt_dataset_len(volt_loader_dataset(train));   /* one process: every sample */
    if (n < 1) return volt__terr(t, VOLT_ERR_INVALID_ARG, "scale_batch_size: the train loader's dataset is empty");
    const int64_t size0 = volt_loader_batch_size(train);
    char path[4096];
    VOLT_TRY(tune_save(t, "scale_batch_size", path));
    volt_scheduler *sched = t->sched;   /* the trials' learning rate stays put */
    t->sched = NULL;
    t->fitting = true;
    const bs_kind kind = { false, VOLT_STAGE_FIT };
    int64_t best = 0;
    volt_status st = bs_search(t, train, &kind, &c, n, out, &best);
    t->fitting = false;
    t->sched = sched;
    const volt_status lst = tune_restore(t, path);
    /* the size found, or the one the loader had when there is none */
    const int64_t keep = st >= 0 && lst >= 0 ? best : size0;
    const volt_status bst = volt_loader_set_batch_size(train, keep);
    if (bst < 0) {   /* said, after whatever went wrong before */
        char was[sizeof t->errmsg];
        memcpy(was, t->errmsg, sizeof was);
        volt__terr(t, bst, "scale_batch_size: %s%sthe train loader could not be set to batch size %lld (%s)", was,
                   was[0] ? "; and " : "", (long long)keep, volt_loader_errmsg(train));
        return st < 0 ? st : lst < 0 ? lst : bst;
    }
    if (st < 0 || lst < 0) return st < 0 ? st : lst;
    out->batch_size = best;
    return VOLT_OK;
}

/* BatchSizeFinder in validate / test / predict (Lightning's on_validation_start, ...): trials of
 * steps_per_trial evaluation steps of the call's stage; the loader keeps the size found (its own
 * on failure). Nothing to save: an evaluation step changes no weight. */
volt_status volt__tune_eval_batch_size(volt_trainer *t, volt_loader *l, volt_stage stage, const volt_batch_size_config *cfg,
                                       volt_batch_size_result *out) {
    memset(out, 0, sizeof *out);
    volt_batch_size_config c;
    VOLT_TRY(bs_cfg(t, cfg, &c));
    const int64_t n = volt_dataset_len(volt_loader_dataset(l));
    if (n < 1) return volt__terr(t, VOLT_ERR_INVALID_ARG, "scale_batch_size: the loader's dataset is empty");
    const int64_t size0 = volt_loader_batch_size(l);
    const bs_kind kind = { true, stage };
    int64_t best = 0;
    volt_status st = bs_search(t, l, &kind, &c, n, out, &best);
    if (st >= 0) st = volt__loop_ensure_step(t);   /* the call's loop goes on with one */
    const int64_t keep = st >= 0 ? best : size0;
    const volt_status bst = volt_loader_set_batch_size(l, keep);
    if (bst < 0) {
        char was[sizeof t->errmsg];
        memcpy(was, t->errmsg, sizeof was);
        volt__terr(t, bst, "scale_batch_size: %s%sthe loader could not be set to batch size %lld (%s)", was,
                   was[0] ? "; and " : "", (long long)keep, volt_loader_errmsg(l));
        return st < 0 ? st : bst;
    }
    if (st < 0) return st;
    out->batch_size = best;
    return VOLT_OK;
}

static volt_status bs_run(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                          const volt_batch_size_config *cfg, volt_batch_size_result *out) {
    t->errmsg[0] = 0;
    memset(out, 0, sizeof *out);
    VOLT_TRY(volt__tune_batch_size_check(t, cfg));
    VOLT_TRY(volt__loop_setup_train(t, ops, module, train));
    VOLT_TRY(volt__tune_batch_size(t, train, cfg, out));
    return volt__loop_stage_hooks(t, VOLT_STAGE_FIT, false);   /* the tuner's fit ends: teardown("fit") */
}

volt_status volt_trainer_scale_batch_size(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                                          const volt_batch_size_config *cfg, volt_batch_size_result *out) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!out || !train) {
        t->errmsg[0] = 0;
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "scale_batch_size: NULL loader or result");
    }
    if (t->fn != VOLT_FN_NONE) return tune_inside(t, "scale_batch_size");
    const int64_t size0 = volt_loader_batch_size(train);
    const volt_trainer_fn prev = volt__loop_call_begin(t, VOLT_STAGE_FIT, VOLT_FN_TUNE);
    const volt_status run = bs_run(t, ops, module, train, cfg, out);
    volt_status st = volt__signal_settle(t, run, "scale_batch_size");
    volt__loop_call_end(t, prev);
    if (st < 0) {
        out->batch_size = 0;
        /* any failure (a signal after the search, a teardown's): the loader goes back to its size */
        if (volt_loader_batch_size(train) != size0) (void)volt_loader_set_batch_size(train, size0);
    }
    return st;
}
