/* ReduceLROnPlateau (VOLT_SCHED_PLATEAU, scheduler config version 2):
 *   - the scheduler alone against torch's ReduceLROnPlateau semantics, worked by hand: relative
 *     and absolute thresholds, min and max, patience, cooldown, min_lr and eps, NaN as a bad step,
 *     several parameter groups; its state restored gives the same lrs;
 *   - in the trainer (Lightning's lr_scheduler_config "monitor"): stepped at each epoch's end
 *     with the monitored metric after validation, and per optimizer step with interval step;
 *     a resumed fit restores its state (the uninterrupted run's lrs); a monitor nobody logged
 *     fails fit naming what was logged (strict) or is skipped with a warning; no monitor, or a
 *     bad setting, is refused at fit start. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

static volt_optimizer *make_opt(volt_params **ps_out, int groups) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    volt_params *ps = NULL;
    CHECK_OK(volt_params_create(&pc, &ps));
    volt_tensor *a, *b;
    CHECK_OK(volt_param_new(ps, "a.weight", VOLT_SHAPE(2), VOLT_INIT_ZEROS, &a));
    CHECK_OK(volt_param_new(ps, "b.weight", VOLT_SHAPE(2), VOLT_INIT_ZEROS, &b));
    CHECK_OK(volt_params_finalize(ps));
    volt_optimizer_config oc;
    volt_optimizer_config_init(&oc);
    oc.kind = VOLT_OPTIM_SGD;
    oc.lr = 0.1f;
    if (groups > 1) {
        oc.n_groups = 1;
        oc.groups[0] = (volt_optim_group){ .params = "b.*", .lr = 0.03f, .weight_decay = NAN };
    }
    volt_optimizer *o = NULL;
    CHECK_OK(volt_optimizer_create(&oc, ps, &o));
    *ps_out = ps;
    return o;
}

/* torch semantics by hand: factor 0.5, patience 1, cooldown 1, rel threshold 0.01, min_lr 0.02 */
static void test_alone(void) {
    volt_params *ps;
    volt_optimizer *o = make_opt(&ps, 2);
    volt_scheduler_config c;
    volt_scheduler_config_init(&c);
    CHECK(c.version == 2 && c.strict && c.factor == 0.1 && c.patience == 10 && c.threshold == 1e-4 && c.eps == 1e-8 &&
          !c.mode_max && !c.threshold_abs && c.cooldown == 0 && c.min_lr == 0.0, "torch's defaults");
    c.kind = VOLT_SCHED_PLATEAU;
    c.factor = 0.5;
    c.patience = 1;
    c.cooldown = 1;
    c.threshold = 0.01;
    c.min_lr = 0.02;
    volt_scheduler *s = NULL;
    CHECK_OK(volt_scheduler_create(&c, o, &s));
    /* metric, then group 0's and group 1's lr after the step (group 1: base 0.03, floor 0.02) */
    static const struct { double m; float lr0, lr1; } seq[] = {
        { 1.0, 0.1f, 0.03f },      /* best 1.0 */
        { 0.995, 0.1f, 0.03f },    /* not better than 1.0 * 0.99: bad 1 */
        { 0.993, 0.05f, 0.02f },   /* bad 2 > patience: reduce (0.03 * 0.5 = 0.015 -> floor 0.02), cooldown 1 */
        { 0.999, 0.05f, 0.02f },   /* bad in the cooldown: not counted (cooldown 0) */
        { 0.998, 0.05f, 0.02f },   /* bad 1 */
        { NAN, 0.025f, 0.02f },    /* NaN is bad: 2 -> reduce; group 1 at its floor stays */
        { 0.5, 0.025f, 0.02f },    /* better (cooldown step): best 0.5 */
        { 0.6, 0.025f, 0.02f },    /* bad 1 */
        { 0.6, 0.02f, 0.02f },     /* bad 2 -> reduce: 0.0125 -> floor 0.02 */
    };
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        CHECK_OK(volt_scheduler_step_metric(s, seq[i].m));
        CHECK(volt_optimizer_group_lr(o, 0) == seq[i].lr0 && volt_optimizer_group_lr(o, 1) == seq[i].lr1,
              "step %zu (metric %g): lr %g / %g, want %g / %g", i, seq[i].m, (double)volt_optimizer_group_lr(o, 0),
              (double)volt_optimizer_group_lr(o, 1), (double)seq[i].lr0, (double)seq[i].lr1);
    }
    volt_plateau_state st;
    CHECK_OK(volt_scheduler_plateau_state(s, &st));
    CHECK(st.best == 0.5 && st.reductions == 3 && st.num_bad == 0 && st.cooldown_left == 1, "state: best %g, %lld reductions",
          st.best, (long long)st.reductions);
    CHECK(volt_scheduler_last_step(s) == 9, "9 steps counted");
    volt_scheduler_step(s);   /* a plain step does nothing to a plateau scheduler */
    CHECK(volt_scheduler_last_step(s) == 9 && volt_optimizer_group_lr(o, 0) == 0.02f, "volt_scheduler_step: nothing");
    /* restored into a fresh one: the same lrs */
    volt_scheduler *s2 = NULL;
    CHECK_OK(volt_scheduler_create(&c, o, &s2));
    CHECK(volt_optimizer_group_lr(o, 0) == 0.1f, "a fresh one starts at the base lr");
    CHECK_OK(volt_scheduler_set_plateau_state(s2, &st));
    CHECK(volt_optimizer_group_lr(o, 0) == 0.02f && volt_optimizer_group_lr(o, 1) == 0.02f, "restored lrs");
    volt_plateau_state bad = st;
    bad.reductions = -1;
    CHECK(volt_scheduler_set_plateau_state(s2, &bad) == VOLT_ERR_INVALID_ARG, "a negative count is refused");
    bad = st;
    bad.num_bad = 2;   /* > patience 1: no step of this config leaves that */
    CHECK(volt_scheduler_set_plateau_state(s2, &bad) == VOLT_ERR_INVALID_ARG, "bad steps past patience refused");
    bad = st;
    bad.cooldown_left = INT64_MAX;
    CHECK(volt_scheduler_set_plateau_state(s2, &bad) == VOLT_ERR_INVALID_ARG, "a cooldown past the config's refused");
    /* at the floor the reductions stop counting (a long run's state stays small) */
    for (int i = 0; i < 50; i++) CHECK_OK(volt_scheduler_step_metric(s2, 10.0 + i));
    volt_plateau_state fl;
    CHECK_OK(volt_scheduler_plateau_state(s2, &fl));
    CHECK(fl.reductions == 3, "at the floor: %lld reductions counted (want 3)", (long long)fl.reductions);
    volt_scheduler_destroy(s2);
    volt_scheduler_destroy(s);

    /* max mode, absolute threshold 0.1, patience 0, no floor, eps 0.03: 0.1 -> 0.05, then 0.025 is
     * a cut of 0.025 < eps: kept at 0.05 */
    volt_scheduler_config m;
    volt_scheduler_config_init(&m);
    m.kind = VOLT_SCHED_PLATEAU;
    m.mode_max = true;
    m.threshold_abs = true;
    m.threshold = 0.1;
    m.patience = 0;
    m.factor = 0.5;
    m.eps = 0.03;
    CHECK_OK(volt_scheduler_create(&m, o, &s));
    CHECK_OK(volt_scheduler_step_metric(s, 1.0));    /* best 1.0 (from -inf) */
    CHECK_OK(volt_scheduler_step_metric(s, 1.05));   /* not > 1.0 + 0.1: bad 1 > 0: reduce */
    CHECK(volt_optimizer_group_lr(o, 0) == 0.05f, "max/abs: reduced to %g", (double)volt_optimizer_group_lr(o, 0));
    CHECK_OK(volt_scheduler_step_metric(s, 1.2));    /* better: best 1.2 */
    CHECK_OK(volt_scheduler_step_metric(s, 1.0));    /* bad: reduce, but by less than eps: stays */
    CHECK(volt_optimizer_group_lr(o, 0) == 0.05f, "eps keeps %g", (double)volt_optimizer_group_lr(o, 0));
    volt_scheduler_destroy(s);
    /* settings refused */
    /* min mode, relative threshold 1e-4 in double as torch: 0.9999 is not better than 1.0 (1.0 * (1 -
     * 1e-4) is 0.9999 exactly in double); absolute 0.1: 0.95 is not better than 1.0, 0.85 is */
    volt_scheduler_config r;
    volt_scheduler_config_init(&r);
    r.kind = VOLT_SCHED_PLATEAU;
    r.patience = 0;
    r.factor = 0.5;
    CHECK_OK(volt_scheduler_create(&r, o, &s));
    CHECK_OK(volt_scheduler_step_metric(s, 1.0));
    CHECK_OK(volt_scheduler_step_metric(s, 0.9999));
    CHECK(volt_optimizer_group_lr(o, 0) == 0.05f, "rel 1e-4: 0.9999 is a bad step (lr %g)", (double)volt_optimizer_group_lr(o, 0));
    volt_scheduler_destroy(s);
    r.threshold_abs = true;
    r.threshold = 0.1;
    CHECK_OK(volt_scheduler_create(&r, o, &s));
    CHECK_OK(volt_scheduler_step_metric(s, 1.0));
    CHECK_OK(volt_scheduler_step_metric(s, 0.85));
    CHECK(volt_optimizer_group_lr(o, 0) == 0.1f, "abs 0.1: 0.85 is better");
    CHECK_OK(volt_scheduler_step_metric(s, 0.8));
    CHECK(volt_optimizer_group_lr(o, 0) == 0.05f, "abs 0.1: 0.8 after 0.85 is not");
    volt_scheduler_destroy(s);
    /* max mode, relative: better means above best * 1.1 */
    r.threshold_abs = false;
    r.mode_max = true;
    CHECK_OK(volt_scheduler_create(&r, o, &s));
    CHECK_OK(volt_scheduler_step_metric(s, 1.0));
    CHECK_OK(volt_scheduler_step_metric(s, 1.2));
    CHECK(volt_optimizer_group_lr(o, 0) == 0.1f, "max rel 0.1: 1.2 is better");
    CHECK_OK(volt_scheduler_step_metric(s, 1.3));
    CHECK(volt_optimizer_group_lr(o, 0) == 0.05f, "max rel 0.1: 1.3 after 1.2 is not");
    volt_scheduler_destroy(s);
    m.factor = 1.0;
    CHECK(volt_scheduler_config_validate(&m) == VOLT_ERR_INVALID_ARG, "factor 1 refused");
    m.factor = 0.5;
    m.patience = -1;
    CHECK(volt_scheduler_config_validate(&m) == VOLT_ERR_INVALID_ARG, "negative patience refused");
    /* a version-1 caller's struct, exactly as long as version 1's (ASan sees a read past it): its
     * kinds still work, PLATEAU is refused */
    volt_scheduler_config v1;
    volt_scheduler_config_init(&v1);
    v1.version = 1;
    v1.kind = VOLT_SCHED_STEP;
    v1.step_size = 2;
    v1.gamma = 0.5f;
    void *v1buf = malloc(offsetof(volt_scheduler_config, monitor));   /* the version-1 size, no more */
    memcpy(v1buf, &v1, offsetof(volt_scheduler_config, monitor));
    CHECK_OK(volt_scheduler_config_validate(v1buf));
    CHECK_OK(volt_scheduler_create(v1buf, o, &s));
    free(v1buf);
    volt_scheduler_step(s);
    volt_scheduler_step(s);
    CHECK(volt_optimizer_group_lr(o, 0) == 0.05f, "a version-1 StepLR: %g", (double)volt_optimizer_group_lr(o, 0));
    volt_scheduler_destroy(s);
    v1.kind = VOLT_SCHED_PLATEAU;
    CHECK(volt_scheduler_config_validate(&v1) == VOLT_ERR_INVALID_ARG, "PLATEAU in a version-1 config refused");
    /* a group added after the scheduler (BackboneFinetuning's) is reduced too, from its own lr, as
     * torch's ReduceLROnPlateau reduces every param group */
    {
        volt_params *ps1;
        volt_optimizer *o1 = make_opt(&ps1, 1);
        volt_scheduler_config_init(&r);
        r.kind = VOLT_SCHED_PLATEAU;
        r.patience = 0;
        r.factor = 0.5;
        CHECK_OK(volt_scheduler_create(&r, o1, &s));
        const volt_optim_group added = { .params = "b.*", .lr = 0.04f, .weight_decay = NAN };
        CHECK_OK(volt_optimizer_add_param_group(o1, &added));
        CHECK_OK(volt_scheduler_step_metric(s, 1.0));
        CHECK_OK(volt_scheduler_step_metric(s, 1.0));
        CHECK(volt_optimizer_group_count(o1) == 2 && volt_optimizer_group_lr(o1, 0) == 0.05f &&
              volt_optimizer_group_lr(o1, 1) == 0.02f, "reduced: %g and the added group's %g (want 0.05, 0.02)",
              (double)volt_optimizer_group_lr(o1, 0), (double)volt_optimizer_group_lr(o1, 1));
        volt_scheduler_destroy(s);
        volt_optimizer_destroy(o1);
        volt_params_destroy(ps1);
    }
    volt_scheduler_config other;
    volt_scheduler_config_init(&other);
    CHECK_OK(volt_scheduler_create(&other, o, &s));
    CHECK(volt_scheduler_step_metric(s, 1.0) == VOLT_ERR_INVALID_ARG, "step_metric on a constant scheduler");
    volt_scheduler_destroy(s);
    volt_optimizer_destroy(o);
    volt_params_destroy(ps);
}

/* ---- in the trainer: a model whose val_loss stops improving ---------------------------------- */
typedef struct lin {
    volt_tensor *w, *b;     /* first: vtest_lin4's */
    const char *monitor;
    bool strict, per_step, no_monitor;
    bool validate_first;    /* the trainer validates (logging val_score) before the fit */
} lin;

/* validation logs nothing; its end hook logs val_score 3 at epoch 0, then 2 (no improvement after epoch 1) */
static volt_status lin_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    (void)i;
    return VOLT_OK;
}
static volt_status lin_val_end(void *self, volt_trainer *t) {
    if (volt_trainer_sanity_checking(t)) return VOLT_OK;
    const int64_t e = volt_trainer_current_epoch(t);
    return volt_trainer_log_metric(t, "val_score", e == 0 ? 3.0 : 2.0, VOLT_LOG_EPOCH);
}
static volt_status lin_opt(void *self, volt_optim_setup *o) {
    lin *m = self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.1f;
    o->use_scheduler = true;
    o->scheduler.kind = VOLT_SCHED_PLATEAU;
    o->scheduler.monitor = m->no_monitor ? NULL : m->monitor;
    o->scheduler.strict = m->strict;
    o->scheduler.patience = 1;
    o->scheduler.factor = 0.5f;
    o->scheduler.interval = m->per_step ? VOLT_SCHED_EVERY_STEP : VOLT_SCHED_EVERY_EPOCH;
    return VOLT_OK;
}
static const volt_module_ops lin_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = vtest_lin4_setup, .configure_optimizers = lin_opt,
    .training_step = vtest_lin4_train, .validation_step = lin_val, .on_validation_epoch_end = lin_val_end,
};

/* records the lr at each train epoch's start (what that epoch trains with) */
typedef struct { float lr[16]; int n; } lr_rec;
static volt_status rec_epoch_start(void *self, volt_trainer *t) {
    lr_rec *r = self;
    if (r->n < 16) r->lr[r->n++] = volt_optimizer_lr(volt_trainer_optimizer(t));
    return VOLT_OK;
}
/* with g_save_at set: saves g_save_at in on_train_batch_end at epoch 1, batch_in_epoch 2 (before
 * that batch's step-interval plateau step) */
static const char *g_save_at;
static volt_status rec_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    if (!g_save_at || volt_trainer_current_epoch(t) != 1 || i != 1) return VOLT_OK;
    return volt_trainer_save_checkpoint(t, g_save_at);
}
static const volt_callback_ops rec_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "LrRec",
                                           .on_train_epoch_start = rec_epoch_start, .on_train_batch_end = rec_batch_end };

static volt_status fit(volt_dataset *tr, lin *m, int64_t epochs, const char *ckpt_in, const char *ckpt_out, lr_rec *r,
                       char *err, size_t errlen, char *serr, size_t serrlen) {
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.max_epochs = epochs;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK_OK(volt_trainer_add_callback(t, &rec_ops, r));
    volt_loader *lt = vtest_loader(tr, 4, false), *lv = vtest_loader(tr, 8, false);
    char path[1100];
    snprintf(path, sizeof path, "%s/plateau_stderr.txt", vtest_tmpdir());
    int saved = vtest_stderr_to(path);
    volt_status st = m->validate_first ? volt_trainer_validate(t, &lin_ops, m, lv, NULL) : VOLT_OK;
    if (st >= 0 && m->validate_first && !volt_trainer_metric(t, "val_score", NULL)) st = VOLT_ERR_STATE;   /* it did log */
    if (st >= 0) st = volt_trainer_fit(t, &lin_ops, m, lt, lv, ckpt_in);
    if (st >= 0 && ckpt_out) st = volt_trainer_save_checkpoint(t, ckpt_out);
    char buf[4096];
    vtest_stderr_back(saved, path, buf, sizeof buf);
    if (serr) snprintf(serr, serrlen, "%s", buf);
    snprintf(err, errlen, "%s", volt_trainer_errmsg(t));
    volt_loader_destroy(lt);
    volt_loader_destroy(lv);
    volt_trainer_destroy(t);
    return st;
}

static void test_trainer(void) {
    volt_dataset *tr = vtest_rows4(16);
    char err[1024], serr[4096], ck[1100];
    snprintf(ck, sizeof ck, "%s/plateau.safetensors", vtest_tmpdir());
    /* val_score 3, 2, 2, 2, 2, 2: best 2 at epoch 1; bad at 2, 3 (> patience 1: reduce after epoch 3),
     * bad 1 at 4, 2 at 5 (reduce after 5): epochs train with 0.1 0.1 0.1 0.1 0.05 0.05 */
    lin a = { .monitor = "val_score", .strict = true };
    lr_rec ra = { .n = 0 };
    CHECK_OK(fit(tr, &a, 6, NULL, NULL, &ra, err, sizeof err, NULL, 0));
    static const float want[6] = { 0.1f, 0.1f, 0.1f, 0.1f, 0.05f, 0.05f };
    CHECK(ra.n == 6 && !memcmp(ra.lr, want, sizeof want), "epoch lrs %g %g %g %g %g %g", (double)ra.lr[0], (double)ra.lr[1],
          (double)ra.lr[2], (double)ra.lr[3], (double)ra.lr[4], (double)ra.lr[5]);
    /* resumed after 3 epochs (best 2, one bad step counted): the same lrs from epoch 3 on */
    lin b1 = { .monitor = "val_score", .strict = true }, b2 = b1;
    lr_rec rb1 = { .n = 0 }, rb2 = { .n = 0 };
    CHECK_OK(fit(tr, &b1, 3, NULL, ck, &rb1, err, sizeof err, NULL, 0));
    CHECK_OK(fit(tr, &b2, 6, ck, NULL, &rb2, err, sizeof err, NULL, 0));
    CHECK(rb2.n == 3 && !memcmp(rb2.lr, want + 3, sizeof(float) * 3), "resumed lrs %g %g %g (want 0.1 0.05 0.05)",
          (double)rb2.lr[0], (double)rb2.lr[1], (double)rb2.lr[2]);
    /* interval step: the metric is logged at epoch ends only, so steps see the last epoch's value
     * (strict: a step before the first validation fails, naming what was logged) */
    lin s = { .monitor = "val_score", .strict = true, .per_step = true };
    lr_rec rs = { .n = 0 };
    volt_status st = fit(tr, &s, 2, NULL, NULL, &rs, err, sizeof err, NULL, 0);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "ReduceLROnPlateau conditioned on metric 'val_score'") &&
          strstr(err, "not available"), "interval step before any validation: %s", err);
    /* ... also when an earlier validate call on the same trainer logged it: every call starts
     * without the last call's metrics (Lightning's reset), so the fit's first step sees none */
    lin sv = { .monitor = "val_score", .strict = true, .per_step = true, .validate_first = true };
    st = fit(tr, &sv, 2, NULL, NULL, &rs, err, sizeof err, NULL, 0);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "'val_score', which is not available at epoch 0, step 1"),
          "interval step after a validate call, before the fit's validation: %s", err);
    lin ns = { .monitor = "val_score", .strict = false, .per_step = true };
    lr_rec rns = { .n = 0 };
    CHECK_OK(fit(tr, &ns, 3, NULL, NULL, &rns, err, sizeof err, serr, sizeof serr));
    CHECK(strstr(serr, "strict = false") != NULL, "non-strict: warned: %s", serr);
    /* epoch 0's 4 steps skipped; epoch 1's see 3: best, then bad 1, bad 2 -> reduce at its third
     * step: epoch 2 trains with 0.05 */
    CHECK(rns.n == 3 && rns.lr[0] == 0.1f && rns.lr[1] == 0.1f && rns.lr[2] == 0.05f, "per-step lrs %g %g %g",
          (double)rns.lr[0], (double)rns.lr[1], (double)rns.lr[2]);
    /* resumed from a checkpoint written in on_train_batch_end at epoch 1's second batch, before that
     * batch's plateau step: the step runs first with the monitor's value the checkpoint kept (the
     * resumed call starts without metrics), so epoch 2 trains at 0.05 as above */
    char ckt[1100];
    snprintf(ckt, sizeof ckt, "%s/plateau_tail.safetensors", vtest_tmpdir());
    lin nt1 = { .monitor = "val_score", .strict = false, .per_step = true }, nt2 = nt1;
    lr_rec rt1 = { .n = 0 }, rt2 = { .n = 0 };
    g_save_at = ckt;
    CHECK_OK(fit(tr, &nt1, 3, NULL, NULL, &rt1, err, sizeof err, NULL, 0));
    g_save_at = NULL;
    CHECK_OK(fit(tr, &nt2, 3, ckt, NULL, &rt2, err, sizeof err, serr, sizeof serr));
    CHECK(rt1.n == 3 && rt1.lr[2] == 0.05f && rt2.n == 1 && rt2.lr[0] == 0.05f && !strstr(serr, "not available"),
          "resumed before a batch's plateau step: epoch 2 at %g (want 0.05; uninterrupted %g); stderr: %s",
          (double)(rt2.n ? rt2.lr[0] : -1), (double)rt1.lr[2], serr);
    /* a monitor nobody logs */
    lin x = { .monitor = "val_los", .strict = true };
    lr_rec rx = { .n = 0 };
    st = fit(tr, &x, 2, NULL, NULL, &rx, err, sizeof err, NULL, 0);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "'val_los'") && strstr(err, "val_score"), "typo'd monitor: %s", err);
    /* no monitor */
    lin nm = { .no_monitor = true, .strict = true };
    st = fit(tr, &nm, 1, NULL, NULL, &rx, err, sizeof err, NULL, 0);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "set scheduler.monitor"), "no monitor: %s", err);
    volt_dataset_destroy(tr);
}

/* volt_trainer_metric_names, the list a missing monitor's error gives: quoted, comma-separated,
 * "..." where the buffer runs out */
static void test_metric_names(void) {
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    char buf[64] = "x";
    volt_trainer_metric_names(t, buf, sizeof buf);
    CHECK(!strcmp(buf, ""), "none logged: '%s'", buf);
    CHECK_OK(volt_trainer_log_metric(t, "a", 1.0, VOLT_LOG_EPOCH));
    CHECK_OK(volt_trainer_log_metric(t, "bb", 2.0, VOLT_LOG_EPOCH));
    volt_trainer_metric_names(t, buf, sizeof buf);
    CHECK(!strcmp(buf, "'a', 'bb'"), "two: '%s'", buf);
    volt_trainer_metric_names(t, buf, 8);
    CHECK(!strcmp(buf, "'a'..."), "cut: '%s'", buf);
    volt_trainer_metric_names(NULL, buf, sizeof buf);
    CHECK(!strcmp(buf, ""), "no trainer: '%s'", buf);
    volt_trainer_destroy(t);
}

int main(void) {
    vtest_check_accelerator();
    test_alone();
    test_trainer();
    test_metric_names();
    return vtest_finish();
}
