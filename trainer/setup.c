/* What the loops stand on (DESIGN §4): the default callbacks, the model (store, strategy,
 * step), the optimizer and scheduler from configure_optimizers, ckpt_path resolved and loaded;
 * set up once and kept across calls, dropped when the module changes or a load fails. The
 * loops themselves: trainer/loop.c (fit) and trainer/eval_loop.c (validation, test, predict). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/loop_hooks.h"
#include "trainer/checkpoint_internal.h"

/* The default callbacks (the config's enable_* flags) are the callbacks layer's business:
 * volt_trainer_create installs its hook (callbacks/defaults.c), run once before the first loop. */
volt_status volt__loop_add_defaults(volt_trainer *t) {
    if (t->defaults_added) return VOLT_OK;
    t->defaults_added = true;
    return t->add_defaults ? t->add_defaults(t) : VOLT_OK;
}

/* The optimizer and scheduler go: the next fit (setup_optim) builds them from
 * configure_optimizers again. */
void volt__loop_drop_optim(volt_trainer *t) {
    volt__compile_free(t);   /* graphs captured with this optimizer's state and coefficient buffers */
    volt__strategy_forget_optimizer(t->strategy);   /* its memory report read the freed one */
    volt_optimizer_destroy(t->opt);
    t->opt = NULL;
    t->avg_swapped = false;
    volt_scheduler_destroy(t->sched);
    t->sched = NULL;
}

/* ---- which trainer holds a module's weights ---------------------------------------------------
 * A module's layers point into the store of the trainer that set it up last (nn.h: borrowed
 * pointers). A second trainer that sets the same module up re-points them into its own store: the
 * first one would then run on the second's values, and on freed memory once the second is
 * destroyed. So the live trainers holding a module are listed here: another trainer takes a
 * module over only with a checkpoint to load (ckpt_path), the holder then letting it go; without
 * one it is refused, as its fresh values would silently replace the trained ones the user expects
 * (Lightning's weights live in the module: trainer2.test(model) tests the trained model). */
enum { HOLDERS_MAX = 64 };
static struct { const void *module; volt_trainer *t; } g_holders[HOLDERS_MAX];
static pthread_mutex_t g_holders_mu = PTHREAD_MUTEX_INITIALIZER;

static void holder_set(volt_trainer *t, const void *module) {
    pthread_mutex_lock(&g_holders_mu);
    int free_at = -1;
    for (int i = 0; i < HOLDERS_MAX; i++) {
        if (g_holders[i].t == t) g_holders[i].t = NULL, g_holders[i].module = NULL;
        if (!g_holders[i].t && free_at < 0) free_at = i;
    }
    if (module && free_at >= 0) g_holders[free_at].module = module, g_holders[free_at].t = t;   /* full: unchecked */
    pthread_mutex_unlock(&g_holders_mu);
}

static volt_trainer *holder_of(const void *module, const volt_trainer *self) {
    volt_trainer *h = NULL;
    pthread_mutex_lock(&g_holders_mu);
    for (int i = 0; i < HOLDERS_MAX && !h; i++)
        if (g_holders[i].t && g_holders[i].t != self && g_holders[i].module == module) h = g_holders[i].t;
    pthread_mutex_unlock(&g_holders_mu);
    return h;
}

/* Modules whose trained (or loaded) weights a trainer dropped when it set up another module in
 * their place (Lightning keeps them in the module: trainer.test(model_a) after fit(model_a) and
 * test(model_b) tests the trained model_a). Their next set-up needs a checkpoint: never a
 * silent fresh start. A mark lives as long as the trainer that made it (a module struct on the
 * stack of a loop that makes a trainer per turn is a new model each turn); the oldest goes
 * when the list is full. */
enum { LOST_MAX = 64 };
static struct { const void *module; const volt_trainer *by; } g_lost[LOST_MAX];
static int g_lost_next;

static bool lost_has(const void *module) {
    bool has = false;
    pthread_mutex_lock(&g_holders_mu);
    for (int i = 0; i < LOST_MAX && !has; i++) has = module && g_lost[i].module == module;
    pthread_mutex_unlock(&g_holders_mu);
    return has;
}

/* by NULL: the module's marks go (its weights were loaded); module NULL: by's marks go */
static void lost_clear(const void *module, const volt_trainer *by) {
    pthread_mutex_lock(&g_holders_mu);
    for (int i = 0; i < LOST_MAX; i++)
        if ((module && g_lost[i].module == module) || (by && g_lost[i].by == by)) g_lost[i].module = NULL, g_lost[i].by = NULL;
    pthread_mutex_unlock(&g_holders_mu);
}

static void lost_mark(const void *module, const volt_trainer *by) {
    lost_clear(module, NULL);
    pthread_mutex_lock(&g_holders_mu);
    const int i = g_lost_next++ % LOST_MAX;
    g_lost[i].module = module;
    g_lost[i].by = by;
    pthread_mutex_unlock(&g_holders_mu);
}

void volt__loop_release_module(volt_trainer *t) {
    holder_set(t, NULL);
    lost_clear(NULL, t);
}

/* The model's store and what is built on it (optimizer, scheduler, step, captured graphs):
 * the next setup_model builds them afresh. The caller has waited for the gathers. */
static void drop_model(volt_trainer *t) {
    holder_set(t, NULL);
    volt__loop_drop_optim(t);   /* and the captured graphs, on the old step's memory too */
    volt_step_destroy(t->step); t->step = NULL;
    volt_params_destroy(t->ps); t->ps = NULL;
    t->mops = NULL;
    t->module = NULL;
    t->weights_pending = false;
}

static volt_status build_model(volt_trainer *t, const volt_module_ops *ops, void *module, bool loads);
static volt_status make_step(volt_trainer *t, volt_step **out);

/* loads: a checkpoint is loaded right after (its path resolved), which overwrites every
 * parameter (the load refuses a file that lacks one), so the inits are not drawn and
 * init_weights (pretrained weights) is not called: the values stay zero until the load. If
 * the load fails, volt__loop_load drops the model, so nothing ever runs on weights never set;
 * a set-up that fails half-way drops it too (the next call builds it afresh). */
volt_status volt__loop_setup_model(volt_trainer *t, const volt_module_ops *ops, void *module, bool loads) {
    if (!ops) return volt__terr(t, VOLT_ERR_INVALID_ARG, "trainer: no module table (ops is NULL)");
    if (!VOLT_VERSION_OK(ops->version, VOLT_MODULE_OPS_VERSION))
        return volt__terr(t, VOLT_ERR_VERSION, "trainer: module table has unknown version %u (want 1..%u: set "
                          "VOLT_MODULE_OPS_VERSION)", ops->version, VOLT_MODULE_OPS_VERSION);
    if (!ops->setup) return volt__terr(t, VOLT_ERR_INVALID_ARG, "module '%s': setup is required", ops->name ? ops->name : "?");
    const char *name = ops->name ? ops->name : "?";
    /* same module: keep its weights, unless they were never set (a load that did not happen); also
     * under another table with the same setup (one that adds predict_step, say): the same store */
    if (t->ps && t->module == module && (t->mops == ops || t->mops->setup == ops->setup) && (loads || !t->weights_pending)) {
        if (t->mops != ops) {
            if (t->mops->configure_optimizers != ops->configure_optimizers) volt__loop_drop_optim(t);   /* the next fit's */
            t->mops = ops;
        }
        return t->step ? VOLT_OK : make_step(t, &t->step);   /* a renew that found no memory left none */
    }
    volt_trainer *h = module ? holder_of(module, t) : NULL;
    if (h && h->fn != VOLT_FN_NONE)   /* e.g. called from one of its callbacks: its store is in use */
        return volt__terr(t, VOLT_ERR_STATE, "module '%s': another trainer is running a call with this module (its "
                          "weights are in use there); use that trainer", name);
    if (h && h->weights_touched && !loads)   /* untouched (the inits alone): taken over as a load would */
        return volt__terr(t, VOLT_ERR_STATE, "module '%s': another trainer set this module up and holds its weights (its "
                          "layers point into that trainer's store): run this with that trainer, load a checkpoint "
                          "(ckpt_path) for this trainer to take the module over, or destroy that trainer first "
                          "to start from fresh weights", name);
    if (!loads && module && t->lost_module == module)   /* its weights went to a trainer that loaded into it */
        return volt__terr(t, VOLT_ERR_STATE, "module '%s': another trainer took this module over (it loaded a checkpoint "
                          "into it), and this trainer's weights for it went with it: load a checkpoint (ckpt_path), "
                          "or use a new trainer to start from fresh weights", name);
    if (!loads && lost_has(module))
        return volt__terr(t, VOLT_ERR_STATE, "module '%s': its trained weights were dropped when its trainer set up another "
                          "module in its place (a trainer holds one model's weights at a time): load a checkpoint "
                          "(ckpt_path), or use a new module struct to start from fresh weights", name);
    if (!loads && t->ps && module && t->module == module && t->mops != ops && t->weights_touched)
        return volt__terr(t, VOLT_ERR_STATE, "module '%s': this trainer holds its trained weights, set up by another "
                          "module table's setup ('%s'); this one's would start from fresh weights: use tables with the "
                          "same setup, or load a checkpoint (ckpt_path)", name, t->mops->name ? t->mops->name : "?");
    if (h) {   /* taken over: the holder lets the module go (its next call with it needs a checkpoint) */
        const bool touched = h->weights_touched;
        (void)volt__loop_wait_params(h, "setup");
        drop_model(h);
        if (touched) h->lost_module = module;
    }
    if (t->ps) VOLT_TRY(volt__loop_wait_params(t, "setup"));   /* no gather may still write into the old store */
    if (t->ps && t->weights_touched && t->module && t->module != module) lost_mark(t->module, t);
    drop_model(t);
    volt_status st = build_model(t, ops, module, loads);
    if (st < 0) {   /* nothing half-built is kept: the same call again would find it "set up" */
        if (t->ps) (void)volt__strategy_wait_params(t->strategy);   /* the set-up's error stays the one reported */
        drop_model(t);
        return st;
    }
    holder_set(t, module);
    return VOLT_OK;
}

/* ---- every rank builds the same model under the same settings ------------------------------
 * Ranks that built different models (a hidden size read from a per-rank file, say) or run other
 * settings would otherwise train "successfully" on mixed bytes (sharded strategies) or fail in
 * MPI with a raw size error. At each model set-up, after finalize and before the first
 * collective that depends on the layout (the strategy's parameter broadcast), rank 0's
 * fingerprints are broadcast (one small message), each rank compares them with its own, and
 * one all-reduce of a slot per rank (volt__rank_values) says which ranks differ in what: when
 * none does, that is all. Otherwise, when the parameters differ, rank 0's parameter list is
 * broadcast so each differing rank names the first difference, and the ranks agree on the
 * lowest differing rank's words (volt__agree_status). FNV-1a, 64 bits. */
enum { FP_MODEL, FP_STRATEGY, FP_PRECISION, FP_ACCUMULATE, FP_CLIP, FP_LENGTH, FP_N };
static const char *const fp_what[FP_N] = { "the model's parameters differ", "the strategy differs", "the precision differs",
                                           "accumulate_grad_batches differs", "the gradient clipping differs",
                                           "max_steps / max_epochs differ" };
enum { FP_DESC = 192 };   /* one parameter's description in the list a mismatch broadcasts */

typedef struct fp_summary {
    uint64_t h[FP_N];
    int64_t n_params, acc, max_steps, max_epochs;
    double clip;
    char strategy[40], precision[24], clip_algo[16];
} fp_summary;


static void param_desc(const volt_tensor *p, char *out) {
    char sh[96];
    snprintf(out, FP_DESC, "%.120s %s %s", p->name ? p->name : "?", volt_shape_str(p->shape, sh, sizeof sh),
             volt_dtype_name(p->dtype));
}

static void fp_make(volt_trainer *t, fp_summary *f) {
    memset(f, 0, sizeof *f);
    uint64_t h = VOLT__FNV_START;
    for (int u = 0; u < volt_params_unit_count(t->ps); u++) {
        const volt_unit *un = volt_params_unit_at(t->ps, u);
        const int64_t n = volt_unit_numel(un);
        h = volt__fnv(volt__fnv_str(h, volt_unit_name(un)), &n, sizeof n);
    }
    for (int i = 0; i < volt_params_count(t->ps); i++) {
        char d[FP_DESC];
        const volt_tensor *p = volt_params_at(t->ps, i);
        param_desc(p, d);
        const int64_t where[2] = { volt_unit_index(p->unit), volt_param_offset(p) };
        h = volt__fnv(volt__fnv_str(h, d), where, sizeof where);
    }
    f->h[FP_MODEL] = h;
    f->n_params = volt_params_count(t->ps);
    snprintf(f->strategy, sizeof f->strategy, "%s", volt__strategy_name(t->strategy));
    snprintf(f->precision, sizeof f->precision, "%s", t->prec && t->prec->ops ? t->prec->ops->info.name : "32-true");
    f->acc = t->cfg.accumulate_grad_batches;
    f->clip = t->cfg.gradient_clip_val;
    snprintf(f->clip_algo, sizeof f->clip_algo, "%s", t->cfg.gradient_clip_algorithm ? t->cfg.gradient_clip_algorithm : "norm");
    f->max_steps = t->cfg.max_steps;
    f->max_epochs = t->cfg.max_epochs;
    const uint64_t b = VOLT__FNV_START;
    f->h[FP_STRATEGY] = volt__fnv_str(b, f->strategy);
    f->h[FP_PRECISION] = volt__fnv_str(b, f->precision);
    f->h[FP_ACCUMULATE] = volt__fnv(b, &f->acc, sizeof f->acc);
    f->h[FP_CLIP] = volt__fnv_str(volt__fnv(b, &f->clip, sizeof f->clip), f->clip_algo);
    f->h[FP_LENGTH] = volt__fnv(volt__fnv(b, &f->max_steps, sizeof f->max_steps), &f->max_epochs, sizeof f->max_epochs);
}

static bool any_mask(void *ctx, int r, double v) {
    (void)r;
    *(unsigned *)ctx |= (unsigned)v;
    return true;
}

/* The first parameter where this rank's list differs from rank 0's (rank 0's list, broadcast
 * by every rank alike: n0 is rank 0's count, known to all). */
static volt_status first_param_diff(volt_trainer *t, int64_t n0, bool mine_differs, char *msg, size_t msglen) {
    const int64_t n = volt_params_count(t->ps);
    bool found = false;
    for (int64_t i = 0; i < n0; i++) {   /* one description a broadcast: only when some rank differs */
        char r0[FP_DESC] = "";
        if (t->rank == 0) param_desc(volt_params_at(t->ps, (int)i), r0);
        volt_status st = volt__strategy_broadcast(t->strategy, r0, sizeof r0, 0, "rank 0's parameter");
        if (st < 0) return st;
        if (!mine_differs || found) continue;
        char d[FP_DESC] = "(none)";
        r0[FP_DESC - 1] = 0;
        if (i < n) param_desc(volt_params_at(t->ps, (int)i), d);
        if (strcmp(d, r0)) {
            snprintf(msg, msglen, "rank %d: %.190s vs rank 0: %.190s", t->rank, d, r0);
            found = true;
        }
    }
    if (mine_differs && !found) {
        if (n > n0) {
            char d[FP_DESC];
            param_desc(volt_params_at(t->ps, (int)n0), d);
            snprintf(msg, msglen, "rank %d has %lld parameters, rank 0 %lld: rank %d's %s is extra", t->rank, (long long)n,
                     (long long)n0, t->rank, d);
        } else {
            snprintf(msg, msglen, "rank %d's units differ from rank 0's (names or padded sizes: the strategy's padding?)", t->rank);
        }
    }
    return VOLT_OK;
}

static volt_status agree_layout(volt_trainer *t) {
    if (t->world <= 1 || !t->strategy) return VOLT_OK;
    fp_summary mine, r0;
    fp_make(t, &mine);
    r0 = mine;
    volt_status st = volt__strategy_broadcast(t->strategy, &r0, sizeof r0, 0, "model fingerprint");
    unsigned mask = 0, all = 0;
    for (int k = 0; st >= 0 && k < FP_N; k++)
        if (mine.h[k] != r0.h[k]) mask |= 1u << k;
    if (st >= 0) st = volt__rank_values(t, (double)mask, "model differences", any_mask, &all);
    if (st < 0)
        return volt__terr(t, st, "setup: the ranks could not compare their models and settings (strategy '%s'): %s",
                          volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    if (!all) return VOLT_OK;
    char detail[512] = "";
    if (all & (1u << FP_MODEL)) {   /* every rank takes part: rank 0's list */
        r0.strategy[sizeof r0.strategy - 1] = r0.precision[sizeof r0.precision - 1] = r0.clip_algo[sizeof r0.clip_algo - 1] = 0;
        if ((st = first_param_diff(t, r0.n_params, (mask & 1u << FP_MODEL) != 0, detail, sizeof detail)) < 0)
            return volt__terr(t, st, "setup: the ranks could not compare their models (strategy '%s'): %s",
                              volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    }
    st = VOLT_OK;
    if (mask) {
        int k = 0;
        while (!(mask & 1u << k)) k++;
        r0.strategy[sizeof r0.strategy - 1] = r0.precision[sizeof r0.precision - 1] = r0.clip_algo[sizeof r0.clip_algo - 1] = 0;
        if (k == FP_STRATEGY) snprintf(detail, sizeof detail, "rank %d: '%s' vs rank 0: '%s'", t->rank, mine.strategy, r0.strategy);
        else if (k == FP_PRECISION) snprintf(detail, sizeof detail, "rank %d: '%s' vs rank 0: '%s'", t->rank, mine.precision, r0.precision);
        else if (k == FP_ACCUMULATE) snprintf(detail, sizeof detail, "rank %d: %lld vs rank 0: %lld", t->rank, (long long)mine.acc, (long long)r0.acc);
        else if (k == FP_CLIP) snprintf(detail, sizeof detail, "rank %d: %g (%s) vs rank 0: %g (%s)", t->rank, mine.clip, mine.clip_algo, r0.clip, r0.clip_algo);
        else if (k == FP_LENGTH) snprintf(detail, sizeof detail, "rank %d: %lld / %lld vs rank 0: %lld / %lld", t->rank,
                                          (long long)mine.max_steps, (long long)mine.max_epochs, (long long)r0.max_steps, (long long)r0.max_epochs);
        st = volt__terr(t, VOLT_ERR_INVALID_ARG, "setup: %s between ranks (%s): every rank must build the same model with "
                        "the same trainer settings", fp_what[k], detail);
    }
    return volt__agree_status(t, st, "setup: the ranks' models and settings", "no rank trained");
}

static volt_status build_model(volt_trainer *t, const volt_module_ops *ops, void *module, bool loads) {
    t->weights_touched = false;   /* the inits (or nothing yet, for a load) */
    t->mops = ops;
    t->module = module;
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.seed = t->cfg.seed;
    pc.accelerator = t->dev->be->name;   /* resolved at create (trainer.c) */
    pc.device = t->dev->ordinal;
    VOLT_TRY(volt_params_create(&pc, &t->ps));
    volt_strategy *sg = t->strategy;
    volt_status st;
    if ((st = volt__strategy_configure_params(sg, t->ps)) < 0)
        return volt__terr(t, st, "strategy '%s': %s", volt__strategy_name(sg), volt__strategy_errmsg(sg));
    st = ops->setup(module, t->ps);
    if (st < 0) {
        const char *why = volt_params_errmsg(t->ps);
        return volt__terr(t, st, "module '%s': setup failed: %s", ops->name ? ops->name : "?",
                          why && *why ? why : volt_status_str(st));   /* its own status when the store says nothing */
    }
    if (loads) volt__params_skip_init(t->ps);
    st = volt_params_finalize(t->ps);
    if (st < 0) return volt__terr(t, st, "module '%s': %s", ops->name, volt_params_errmsg(t->ps));
    VOLT_TRY(agree_layout(t));
    t->weights_pending = loads;
    if (!loads && ops->init_weights && (st = ops->init_weights(module, t->ps)) < 0)
        return volt__terr(t, st, "module '%s': init_weights failed%s%s", ops->name,
                          volt_params_errmsg(t->ps)[0] ? ": " : "", volt_params_errmsg(t->ps));
    VOLT_TRY(volt__prec_setup_params(t));   /* 16-bit storage (bf16-true, 16-true) */
    st = volt__strategy_setup_params(t->strategy, t->ps);
    if (st < 0) return volt__terr(t, st, "strategy '%s': %s", volt__strategy_name(sg), volt__strategy_errmsg(sg));
    return make_step(t, &t->step);
}

/* The model's step (arena + tape) on the trainer's device, set up as the trainer runs it. */
static volt_status make_step(volt_trainer *t, volt_step **out) {
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = t->ps;
    sc.seed = t->cfg.seed;
    sc.backend = t->dev->be->name;
    VOLT_TRY(volt_step_create(&sc, out));
    volt__params_forget_step(t->ps);   /* its stamps count from 0 again */
    volt_step *s = *out;
    s->log_fn = volt__trainer_log;
    s->log_ctx = t;
    volt__prec_setup_step(t, s);            /* GEMM operand dtype */
    s->matmul_tf32 = strcmp(t->cfg.matmul_precision, "highest") != 0;   /* TF32 (checked at create) */
    s->detect_anomaly = t->cfg.detect_anomaly;
    return VOLT_OK;
}

volt_status volt__loop_renew_step(volt_trainer *t) {
    if (!t->ps || !t->step) return VOLT_OK;
    volt__compile_free(t);   /* graphs captured on this step's memory */
    volt__transfer_free(t);
    volt_step *fresh = NULL;
    volt_step_destroy(t->step);   /* first: its memory is what a fresh one may need */
    t->step = NULL;
    t->dev->be->synchronize(t->dev);   /* the frees done (stream-ordered on cuda) before the new step allocates */
    volt_status st = make_step(t, &fresh);
    if (st < 0)   /* t->step stays NULL: the next set-up of this model makes one (volt__loop_setup_model) */
        return volt__terr(t, st, "trainer: a new step on %s:%d: %s", t->dev->be->name, t->dev->ordinal, volt_status_str(st));
    t->step = fresh;
    return VOLT_OK;
}

volt_status volt__loop_ensure_step(volt_trainer *t) {
    if (t->step || !t->ps) return VOLT_OK;
    volt_status st = make_step(t, &t->step);
    return st < 0 ? volt__terr(t, st, "trainer: a new step on %s:%d: %s", t->dev->be->name, t->dev->ordinal, volt_status_str(st))
                  : VOLT_OK;
}

/* A stage's batches: limit_<what>_batches as a count, or its fraction f of the loader's n
 * (int(f x n), as Lightning; an error when that leaves none of n > 0). */
volt_status volt__loop_stage_batches(volt_trainer *t, const char *what, int64_t n, int64_t count, double frac, int64_t *out) {
    if (!(frac > 0)) {
        *out = count >= 0 && count < n ? count : n;   /* -1: all */
        return VOLT_OK;
    }
    *out = (int64_t)(frac * (double)n);
    if (n > 0 && *out == 0)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: limit_%s_batches=%g of the loader's %lld batches is less than one batch "
                          "(give at least %g, or a count)", what, what, frac, (long long)n, 1.0 / (double)n);
    return VOLT_OK;
}

/* Lightning's estimated_stepping_batches: the optimizer steps this fit takes (-1: unbounded). */
static volt_status estimate_steps(volt_trainer *t, volt_loader *train) {
    int64_t n;
    VOLT_TRY(volt__loop_stage_batches(t, "train", volt_loader_num_batches(train), t->cfg.limit_train_batches, t->cfg.limit_train_fraction, &n));
    const int64_t acc = t->cfg.accumulate_grad_batches, per_epoch = (n + acc - 1) / acc, max_steps = t->cfg.max_steps;
    int64_t est = t->cfg.max_epochs < 0 ? -1 : per_epoch * t->cfg.max_epochs;
    if (max_steps >= 0 && (est < 0 || max_steps < est)) est = max_steps;
    t->est_steps = est;
    return VOLT_OK;
}

/* train: its shard set up (the estimate counts one rank's batches). */
volt_status volt__loop_setup_optim(volt_trainer *t, volt_loader *train) {
    VOLT_TRY(estimate_steps(t, train));
    if (t->opt) return VOLT_OK;
    if (!t->mops->configure_optimizers)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "module '%s': configure_optimizers is required for fit", t->mops->name);
    volt_optim_setup *o = &t->osetup;
    memset(o, 0, sizeof *o);
    volt_optimizer_config_init(&o->optimizer);
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    volt_scheduler_config_init(&o->scheduler);
    o->estimated_stepping_batches = t->est_steps;
    volt_status st = t->mops->configure_optimizers(t->module, o);
    if (st < 0) return volt__terr(t, st, "module '%s': configure_optimizers failed", t->mops->name);
    volt__prec_setup_optim(t, &o->optimizer);   /* optimizer state dtype */
    char why[512];
    st = volt_optimizer_config_check(&o->optimizer, t->ps, why, sizeof why);   /* the reason (groups too), not just the status */
    if (st < 0) return volt__terr(t, st, "module '%s': configure_optimizers: %s", t->mops->name, why);
    st = volt_optimizer_create(&o->optimizer, t->ps, &t->opt);
    if (st < 0) return volt__terr(t, st, "optimizer: %s", t->opt ? volt_optimizer_errmsg(t->opt) : volt_status_str(st));
    st = volt__strategy_setup_optimizer(t->strategy, t->opt);
    if (st < 0) return volt__terr(t, st, "strategy '%s': %s", volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    VOLT_TRY(volt__avg_setup(t));   /* weight averaging: its state over the ranges the strategy set, from the owned values */
    if (o->use_scheduler) {
        st = volt__scheduler_config_check(&o->scheduler, why, sizeof why);
        if (st < 0) return volt__terr(t, st, "module '%s': configure_optimizers: %s", t->mops->name, why);
        if (o->scheduler.kind == VOLT_SCHED_PLATEAU && !o->scheduler.monitor)   /* Lightning refuses the same */
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "module '%s': configure_optimizers: a ReduceLROnPlateau scheduler "
                              "(VOLT_SCHED_PLATEAU) steps with a metric: set scheduler.monitor (e.g. \"val_loss\")",
                              t->mops->name);
        st = volt_scheduler_create(&o->scheduler, t->opt, &t->sched);
        if (st < 0) return volt__terr(t, st, "scheduler: %s (base lr %g)", volt_status_str(st), (double)volt_optimizer_base_lr(t->opt));
    }
    return VOLT_OK;
}


/* ckpt_path ("best", "last" or a file) resolved before the model is set up, into path[VOLT__CKPT_PATH_CAP]:
 * "" when there is none (an error unless missing_ok) */
/* With several ranks every rank takes part, given a ckpt_path or not: rank 0's request (NULL
 * travels as none) is compared with each rank's own, and a different kind (none, "last",
 * "best", a file) is an error on every rank naming it (the ranks would otherwise make
 * different collectives: one loads, the other trains from fresh weights). Files are not
 * compared by name: rank 0's file is the one every rank loads (volt__resolve_ckpt), and the
 * load checks that every rank opened the same bytes. */
static volt_status agree_ckpt_path(volt_trainer *t, const char *ckpt_path, const char *stage) {
    if (t->world <= 1 || !t->strategy) return VOLT_OK;
    char r0[VOLT__CKPT_PATH_CAP];
    bool has = ckpt_path != NULL;
    snprintf(r0, sizeof r0, "%s", ckpt_path ? ckpt_path : "");
    volt_status st = ck_bcast_str(t, r0, sizeof r0, &has, "ckpt_path agreement");
    if (st < 0)
        return volt__terr(t, st, "%s: ckpt_path: the ranks could not agree (strategy '%s'): %s", stage,
                          volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    /* the kind of request must agree (none, "last", "best", a file); a file's spelling may differ per
     * rank (a node-local mount, a relative path): rank 0's is the one loaded, and the load compares
     * what every rank opened (checkpoint_source.c) */
    const int k0 = !has ? 0 : !strcmp(r0, "last") ? 1 : !strcmp(r0, "best") ? 2 : 3;
    const int kr = !ckpt_path ? 0 : !strcmp(ckpt_path, "last") ? 1 : !strcmp(ckpt_path, "best") ? 2 : 3;
    const bool same = k0 == kr;
    st = VOLT_OK;
    if (!same)
        st = volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: ckpt_path differs between ranks: rank 0 has %s%.1000s%s, rank %d has "
                        "%s%.1000s%s (every rank must be given the same ckpt_path: none, \"last\", \"best\" or a file)", stage, has ? "'" : "", has ? r0 : "none",
                        has ? "'" : "", t->rank, ckpt_path ? "'" : "", ckpt_path ? ckpt_path : "none", ckpt_path ? "'" : "");
    return volt__agree_status(t, st, "ckpt_path", "no rank loaded anything");
}

volt_status volt__loop_resolve(volt_trainer *t, const char *ckpt_path, bool missing_ok, const char *stage, char *path) {
    path[0] = 0;
    VOLT_TRY(agree_ckpt_path(t, ckpt_path, stage));
    if (!ckpt_path) return VOLT_OK;
    if (!ckpt_path[0])   /* Lightning's ckpt_path=None is NULL here; "" names no file */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: ckpt_path is empty (give a file's path, \"last\" or \"best\"; "
                          "NULL for none)", stage);
    const char *p = volt__resolve_ckpt(t, ckpt_path);
    if (!p && !missing_ok) {
        const bool best = !strcmp(ckpt_path, "best"), last = !strcmp(ckpt_path, "last");
        const char *why = !(best || last) ? ""
            : !t->has_resolver ? ": no ModelCheckpoint is configured (give the file's path)"
            : best ? ": the ModelCheckpoint has no best checkpoint (it keeps one from a fit of this trainer, with "
                     "save_top_k != 0; from another process give the file's path, or \"last\")"
            : ": the ModelCheckpoint has saved none and found no last*.safetensors in its folder";
        return volt__terr(t, VOLT_ERR_NOT_FOUND, "%s: no checkpoint for ckpt_path=\"%s\"%s", stage, ckpt_path, why);
    }
    if (!p) return VOLT_OK;   /* fit from "last" with none: it says so once the model is set up (loop.c) */
    if (strlen(p) >= VOLT__CKPT_PATH_CAP) return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: checkpoint path longer than %d bytes", stage, VOLT__CKPT_PATH_CAP - 1);
    strcpy(path, p);
    return VOLT_OK;
}

/* Load the checkpoint setup_model left the values to. On failure a model whose inits were
 * skipped is dropped (its values were never set): the next fit/validate/test/predict sets it
 * up afresh, with its inits. */
volt_status volt__loop_load(volt_trainer *t, const char *path, bool full) {
    const double p0 = VOLT__PROF_T0(t);
    volt_status st = volt__ckpt_load(t, path, full);
    volt__prof_add(t, NULL, NULL, "load_checkpoint", p0);
    if (st >= 0) {
        t->weights_pending = false;
        t->weights_touched = true;
        if (t->lost_module == t->module) t->lost_module = NULL;   /* weights of its own again */
        lost_clear(t->module, NULL);
    } else if (t->weights_pending) {
        (void)volt__strategy_wait_params(t->strategy);   /* the load's error stays the one reported */
        drop_model(t);
    }
    return st;
}

/* lr_find and scale_batch_size (trainer/tuner.c): the model, the defaults, setup("fit") and the
 * train loader's shard, as fit sets them up (the tuner makes its optimizer: volt__tune_lr). */
volt_status volt__loop_setup_train(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train) {
    VOLT_TRY(volt__loop_add_defaults(t));
    VOLT_TRY(volt__loop_setup_model(t, ops, module, false));
    if (!ops->training_step) return volt__terr(t, VOLT_ERR_INVALID_ARG, "module '%s': training_step is required", ops->name);
    VOLT_TRY(volt__loop_module_callbacks(t));
    VOLT_TRY(volt__loop_stage_hooks(t, VOLT_STAGE_FIT, true));   /* Lightning's Tuner runs a fit: setup("fit") first */
    volt_status st = volt__loop_shard(t, train);
    if (st < 0) return volt__loop_strategy_err(t, st, "data sharding");
    return VOLT_OK;
}

/* ---- an evaluation call's set-up (validate / test / predict) ------------------------------- */
volt_status volt__loop_prepare_eval(volt_trainer *t, const volt_module_ops *ops, void *module, const char *ckpt_path,
                                const char *stage) {
    t->errmsg[0] = 0;
    volt__prof_stage(t, stage);
    const double p0 = VOLT__PROF_T0(t);
    char path[VOLT__CKPT_PATH_CAP];
    VOLT_TRY(volt__loop_add_defaults(t));
    VOLT_TRY(volt__loop_resolve(t, ckpt_path, false, stage, path));
    VOLT_TRY(volt__loop_setup_model(t, ops, module, path[0] != 0));
    VOLT_TRY(volt__loop_module_callbacks(t));
    VOLT_TRY(volt__loop_stage_hooks(t, t->stage, true));   /* before the checkpoint is read */
    volt__prof_add(t, NULL, NULL, "setup", p0);
    if (!path[0]) return VOLT_OK;
    VOLT_TRY(volt__loop_load(t, path, false));
    if (t->rank == 0) fprintf(stderr, "volt: %s: loaded the model weights of the checkpoint at %s\n", stage, path);
    return VOLT_OK;
}

