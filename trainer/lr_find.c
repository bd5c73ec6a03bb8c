/* The learning-rate range test, as Lightning's Tuner.lr_find (include/volt/trainer.h): the
 * state is saved to a hidden checkpoint, num_training eager steps run with the learning rate
 * swept from min_lr to max_lr while the smoothed loss is recorded, the checkpoint is loaded
 * back (weights, grad scaler, loop state) and removed, and the optimizer and scheduler are
 * dropped so the next fit builds them from configure_optimizers. docs/TRAINER.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/fsutil.h"
#include "trainer/trainer_internal.h"

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

/* Lightning's suggestion: skip the first 10 points and the last, take the gradient of the
 * loss over the point index (central differences inside, one-sided at the ends, as
 * numpy.gradient) and the learning rate where it is least. */
static double suggest(const volt_lr_find_result *r) {
    const int64_t a = 10, b = r->n - 1, n = b - a;
    if (n < 3) return NAN;
    const double *L = r->losses + a;
    int64_t best = -1;
    double g_best = 0;
    for (int64_t i = 0; i < n; i++) {
        const double g = i == 0 ? L[1] - L[0] : i == n - 1 ? L[n - 1] - L[n - 2] : (L[i + 1] - L[i - 1]) / 2;
        if (isfinite(g) && (best < 0 || g < g_best)) { best = i; g_best = g; }
    }
    return best < 0 ? NAN : r->lrs[a + best];
}

static volt_status lr_find_run(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                               const volt_lr_find_config *cfg, volt_lr_find_result *out) {
    t->errmsg[0] = 0;
    memset(out, 0, sizeof *out);
    out->suggestion = NAN;
    volt_lr_find_config c;
    volt_lr_find_config_init(&c);
    if (cfg) {
        if (!VOLT_VERSION_OK(cfg->version, VOLT_LR_FIND_CONFIG_VERSION))
            return volt__terr(t, VOLT_ERR_VERSION, "lr_find: config has unknown version %u (want %u)", cfg->version,
                              VOLT_LR_FIND_CONFIG_VERSION);
        c = *cfg;
    }
    if (!(c.min_lr > 0) || !(c.max_lr > c.min_lr) || !isfinite(c.max_lr) || c.num_training < 2 || c.num_training > 100000)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "lr_find: need 0 < min_lr (%g) < max_lr (%g) and 2 <= num_training (%lld) <= 100000",
                          c.min_lr, c.max_lr, (long long)c.num_training);
    if (t->fitting) return volt__terr(t, VOLT_ERR_STATE, "lr_find: not inside fit");
    VOLT_TRY(volt__loop_setup_train(t, ops, module, train));
    const int64_t n_batches = volt_loader_num_batches(train);
    if (n_batches < 1) return volt__terr(t, VOLT_ERR_INVALID_ARG, "lr_find: the train loader yields no batches");
    if (!(out->lrs = malloc(sizeof(double) * (size_t)c.num_training)) || !(out->losses = malloc(sizeof(double) * (size_t)c.num_training))) {
        volt_lr_find_result_free(out);
        return volt__terr(t, VOLT_ERR_NOMEM, "lr_find: out of memory");
    }
    /* the state to come back to, in a hidden file rank 0 names for every rank */
    struct { char path[4096]; } h;
    memset(&h, 0, sizeof h);
    char err[600] = "";
    if (t->rank == 0) {
        const char *root = t->cfg.default_root_dir;
        if (volt__mkdirs(root, err, sizeof err) == VOLT_OK)   /* a new run's root may not exist yet */
            snprintf(h.path, sizeof h.path, "%s/.lr_find-%d-%llx.safetensors", root, (int)getpid(), (unsigned long long)(volt__now() * 1e6));
    }
    volt_status st = volt__strategy_broadcast(t->strategy, &h, sizeof h, 0);
    if (st < 0) {
        volt_lr_find_result_free(out);
        return volt__terr(t, st, "lr_find: strategy '%s': %s", volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    }
    if (!h.path[0]) {   /* rank 0 could not make the root: every rank stops here */
        volt_lr_find_result_free(out);
        return volt__terr(t, VOLT_ERR_IO, "lr_find: default_root_dir: %s", t->rank == 0 ? err : "rank 0 could not create it");
    }
    if ((st = volt_trainer_save_checkpoint(t, h.path)) < 0) {
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
        /* one optimizer step: the micro-batches of one accumulation window (as fit cuts them:
         * accumulate_grad_batches of them, fewer at the end of a pass over the loader); the
         * step's loss is their mean, as Lightning's running loss */
        double sum = 0;
        int64_t micro = 0;
        for (bool ends = false; !ends;) {
            if (batch >= n_batches) {   /* as many passes over the loader as the test needs */
                batch = 0;
                if ((st = volt_loader_start(train, ++epoch, 0)) < 0) { volt__loop_loader_err(t, train, st); break; }
            }
            const volt_batch *b;
            if ((st = volt__loop_next_batch(t, train, NULL, &b)) == VOLT_STOP)
                st = volt__terr(t, VOLT_ERR_STATE, "data loader: ended early");
            if (st < 0) break;
            ends = volt__loop_ends_window(t, batch, n_batches);
            t->capture_loss = true;
            st = volt__loop_train_eager(t, b, batch, n_batches);
            t->capture_loss = false;
            if (st < 0) break;
            batch++;
            sum += t->captured_loss;
            micro++;
        }
        if (st < 0) break;
        /* the loss, and a pending SIGINT / SIGTERM (signals.c): with several ranks one exchange
         * of both, so every rank stops after the same step */
        double v[3] = { sum / (double)micro, 0, 0 };
        if (t->cfg.handle_signals) volt__signal_vote(t, v + 1);
        if (t->world > 1 && (st = volt__strategy_all_reduce_mean(t->strategy, v, t->cfg.handle_signals ? 3 : 1)) < 0) {
            volt__terr(t, st, "lr_find: strategy '%s': %s", volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
            break;
        }
        const int sig = volt__signal_from_vote(v + 1);
        if (sig) {
            char where[64];
            snprintf(where, sizeof where, "lr_find stopped after its step %lld", (long long)i);
            st = volt__signal_stop(t, sig, where);
            break;
        }
        const double loss = v[0];
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
    /* back to where the test started: weights, grad scaler, loop state; then a fresh optimizer at the next fit */
    const volt_status lst = volt__loop_load(t, h.path, true);
    if (t->world > 1) (void)volt__strategy_barrier(t->strategy);   /* every rank has read it */
    if (t->rank == 0) volt_checkpoint_remove(h.path);
    volt__loop_drop_optim(t);
    if (st < 0 || lst < 0) {
        volt_lr_find_result_free(out);
        return st < 0 ? st : lst;
    }
    out->suggestion = suggest(out);
    return VOLT_OK;
}

volt_status volt_trainer_lr_find(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                                 const volt_lr_find_config *cfg, volt_lr_find_result *out) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!out || !train) {
        t->errmsg[0] = 0;
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "lr_find: NULL loader or result");
    }
    /* fn TUNE, not FIT (include/volt/trainer.h): the step hooks it runs are no fit's; `fitting`
     * (internal) is set for the steps all the same, as the accumulation checks read it */
    const volt_trainer_fn prev = volt__loop_call_begin(t, VOLT_STAGE_FIT, VOLT_FN_TUNE);
    volt_status st = volt__signal_settle(t, lr_find_run(t, ops, module, train, cfg, out), "lr_find");
    volt__loop_call_end(t, prev);
    if (st < 0) volt_lr_find_result_free(out);   /* a signal after the last step: no result either */
    return st;
}
