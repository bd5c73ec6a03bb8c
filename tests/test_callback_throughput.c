/* ThroughputMonitor (callbacks/throughput_monitor.c) on a clock the test moves, so every rate is
 * exact: nothing but the totals before the window fills; device batches/s x batch size =
 * samples/s; items only with a length_fn, FLOPs only with a flops_fn, mfu only with a peak;
 * the stage prefixes and the separator; logs only after the steps log_every_n_steps names
 * (accumulation: after the optimizer step); validation inside fit (and the sanity check) not in
 * train's time; validate, test and predict logged at their ends; the metrics reach metrics.csv
 * in the row of their step (predict's in a row of its own, as test's); the global keys (world > 1) on the window alone; the peak table; bad
 * configurations. */
#define _GNU_SOURCE   /* memmem */
#include <dirent.h>
#include <math.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "metric_probe.h"
#include "callbacks/throughput_monitor.h"

enum { NS = 80, IN = 3, BS = 8, NB = NS / BS };
static float X[NS * IN], Y[NS];
static volt_dataset *DS;

typedef struct { volt_tensor *w, *b; } regr;
static volt_status regr_setup(void *self, volt_params *ps) {
    regr *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc"));
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(1, IN), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(1), VOLT_INIT_ZEROS, &m->b);
}
static volt_tensor *regr_loss(regr *m, volt_step *s, const volt_batch *b) {
    return volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b));
}
static volt_status regr_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_step_set_loss(s, regr_loss(self, s, b));
}
static volt_status regr_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_log(s, "val_loss", regr_loss(self, s, b), 0);
}
static volt_status regr_test(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_log(s, "test_loss", regr_loss(self, s, b), 0);
}
static volt_status regr_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    (void)i;
    regr *m = self;
    *out = volt_linear(s, volt_batch_x(b), m->w, m->b);
    return VOLT_OK;
}
static volt_status keep_none(void *ctx, const volt_batch *b, const volt_tensor *pred) {
    (void)ctx; (void)b; (void)pred;
    return VOLT_OK;
}
static volt_status sgd_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}
static const volt_module_ops regr_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "regr", .setup = regr_setup, .configure_optimizers = sgd_opt,
    .training_step = regr_train, .validation_step = regr_val, .test_step = regr_test, .predict_step = regr_predict,
};

/* ---- the clock: train_dt before every train batch, eval_dt after every val / test batch ---- */
typedef struct fake_clock { double now, train_dt, eval_dt; } fake_clock;
static double fake_now(void *ctx) { return ((fake_clock *)ctx)->now; }
static volt_status fc_train(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)t; (void)b; (void)i;
    ((fake_clock *)self)->now += ((fake_clock *)self)->train_dt;
    return VOLT_OK;
}
static volt_status fc_eval(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)t; (void)b; (void)i;
    ((fake_clock *)self)->now += ((fake_clock *)self)->eval_dt;   /* the sanity check too */
    return VOLT_OK;
}
static volt_status fc_predict(void *self, volt_trainer *t, const volt_tensor *pred, const volt_batch *b, int64_t i) {
    (void)pred;
    return fc_eval(self, t, b, i);
}
static const volt_callback_ops fake_clock_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "FakeClock", .on_train_batch_start = fc_train,
    .on_validation_batch_end = fc_eval, .on_test_batch_end = fc_eval, .on_predict_batch_end = fc_predict,
};

/* ---- the probe (tests/metric_probe.h): after each train batch end, the "train..." metrics
 * fresh in that step ---- */
static double metric(const volt_trainer *t, const char *name) {
    double v;
    return volt_trainer_metric(t, name, &v) ? v : NAN;
}

static int64_t len_fn(void *ctx, volt_trainer *t, const volt_batch *b) {
    (void)ctx; (void)t;
    return 3 * b->size + 1;
}
static int64_t pairs_fn(void *ctx, volt_trainer *t, const volt_batch *b) {   /* a sample is two rows' worth */
    (void)ctx; (void)t;
    return 2 * b->size;
}
static double flops_fn(void *ctx, volt_trainer *t, const volt_batch *b) {
    (void)ctx; (void)b;
    return volt_trainer_stage(t) == VOLT_STAGE_FIT ? 1e9 : 2e8;
}

typedef struct run {
    volt_trainer *t;
    fake_clock fc;
    probe pr;
    regr m;
} run;

/* A trainer with the fake clock, the monitor (cfg) and the probe, in that order as added (the
 * defaults then move the monitor to the front). */
static void run_make(run *r, const char *root, volt_trainer_config *c, const volt_throughput_config *tc, double train_dt,
                     double eval_dt) {
    memset(r, 0, sizeof *r);
    r->fc = (fake_clock){ .now = 1000, .train_dt = train_dt, .eval_dt = eval_dt };
    r->pr.prefix = "train";
    vtest_fresh_dir(root);
    c->default_root_dir = root;
    CHECK_OK(volt_trainer_create(c, &r->t));
    CHECK_OK(volt_trainer_add_callback(r->t, &fake_clock_ops, &r->fc));
    CHECK_OK(volt__add_throughput_monitor_clock(r->t, tc, fake_now, &r->fc));
    CHECK_OK(volt_trainer_add_callback(r->t, &probe_ops, &r->pr));
}

/* window 4, a step every batch, a log every 2 steps, 0.25 s a batch of 8 */
static void test_train_rates(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/train_rates", vtest_tmpdir());
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.log_every_n_steps = 2;
    volt_throughput_config tc;
    volt_throughput_config_init(&tc);
    CHECK(tc.window_size == 100 && !strcmp(tc.separator, "/") && tc.peak_tflops == 0, "defaults");
    tc.window_size = 4;
    run r;
    run_make(&r, root, &c, &tc, 0.25, 0);
    volt_loader *l = vtest_loader(DS, BS, false);
    CHECK_OK(volt_trainer_fit(r.t, &regr_ops, &r.m, l, NULL, NULL));
    CHECK(r.pr.n == NB, "%d batch ends", r.pr.n);
    for (int i = 0; i < r.pr.n; i++) {
        const rec *x = &r.pr.at[i];
        const int64_t gs = i + 1;
        CHECK(x->gs == gs, "batch %d: step %lld", i, (long long)x->gs);
        if (gs % 2) { CHECK(x->n == 0, "step %lld: %d train metrics logged off the log steps", (long long)gs, x->n); continue; }
        CHECK(rv(x, "train/time") == 0.25 * (double)gs, "step %lld: time %g", (long long)gs, rv(x, "train/time"));
        CHECK(rv(x, "train/batches") == (double)gs, "step %lld: batches %g", (long long)gs, rv(x, "train/batches"));
        CHECK(rv(x, "train/samples") == (double)(BS * gs), "step %lld: samples %g", (long long)gs, rv(x, "train/samples"));
        const double bps = rv(x, "train/device/batches_per_sec"), sps = rv(x, "train/device/samples_per_sec");
        if (gs < 4) {   /* the window (4 batch ends) is not full yet: totals only */
            CHECK(isnan(bps) && isnan(sps) && x->n == 3, "step %lld: %d metrics before the window filled", (long long)gs, x->n);
        } else {
            CHECK(bps == 4.0 && sps == 32.0, "step %lld: %g batches/s, %g samples/s (4, 32)", (long long)gs, bps, sps);
            CHECK(bps * BS == sps, "batches/s x batch size = samples/s");
            CHECK(x->n == 5, "step %lld: %d metrics (world 1: no global keys, no items, no flops)", (long long)gs, x->n);
        }
        CHECK(isnan(rv(x, "train/samples_per_sec")) && isnan(rv(x, "train/device/items_per_sec")) &&
              isnan(rv(x, "train/lengths")) && isnan(rv(x, "train/device/flops_per_sec")) && isnan(rv(x, "train/device/mfu")),
              "step %lld: a key that needs world > 1, a length_fn or a flops_fn", (long long)gs);
    }
    volt_trainer_destroy(r.t);
    volt_loader_destroy(l);
}

/* items, FLOPs, mfu; a separator of its own; 76 samples: the last batch has 4; a batch_size_fn */
static void test_items_flops(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/items_flops", vtest_tmpdir());
    volt_dataset *sub = NULL;
    CHECK_OK(volt_dataset_subset(DS, 0, 76, &sub));
    for (int with_peak = 0; with_peak < 2; with_peak++) {
        volt_trainer_config c;
        vtest_quiet_config(&c, root);
        c.log_every_n_steps = 1;
        volt_throughput_config tc;
        volt_throughput_config_init(&tc);
        tc.window_size = 4;
        tc.separator = "|";
        tc.length_fn = len_fn;
        tc.flops_fn = flops_fn;
        tc.peak_tflops = with_peak ? 0.01 : 0;   /* 1e10 FLOP/s */
        tc.batch_size_fn = with_peak ? pairs_fn : NULL;
        const double k = with_peak ? 2 : 1;
        run r;
        run_make(&r, root, &c, &tc, 0.5, 0);
        volt_loader *l = vtest_loader(sub, BS, false);
        CHECK_OK(volt_trainer_fit(r.t, &regr_ops, &r.m, l, NULL, NULL));
        CHECK(r.pr.n == NB, "%d batch ends", r.pr.n);
        const rec *x = &r.pr.at[3];   /* the window's first full step */
        CHECK(rv(x, "train|device|batches_per_sec") == 2.0, "%g batches/s", rv(x, "train|device|batches_per_sec"));
        CHECK(rv(x, "train|lengths") == 4 * 25, "lengths %g", rv(x, "train|lengths"));
        CHECK(rv(x, "train|device|items_per_sec") == 3 * 25 / 1.5, "items/s %g", rv(x, "train|device|items_per_sec"));
        CHECK(rv(x, "train|device|flops_per_sec") == 3e9 / 1.5, "flops/s %g", rv(x, "train|device|flops_per_sec"));
        if (with_peak) CHECK_CLOSE(rv(x, "train|device|mfu"), 0.2, 1e-12, 0);
        else CHECK(isnan(rv(x, "train|device|mfu")), "mfu without a peak");
        CHECK(isnan(rv(x, "train/time")) && isnan(rv(x, "train|device/mfu")), "the separator is used throughout");
        CHECK(isnan(rv(x, "train|samples_per_sec")) && isnan(rv(x, "train|items_per_sec")) && isnan(rv(x, "train|flops_per_sec")) &&
              isnan(rv(x, "train|batches_per_sec")), "world 1: no global keys");
        x = &r.pr.at[NB - 1];   /* the last batch, 4 samples */
        CHECK(rv(x, "train|samples") == 76 * k && rv(x, "train|lengths") == 9 * 25 + 13, "totals %g %g", rv(x, "train|samples"),
              rv(x, "train|lengths"));
        CHECK(rv(x, "train|device|samples_per_sec") == k * (2 * 8 + 4) / 1.5, "samples/s with a short batch %g",
              rv(x, "train|device|samples_per_sec"));
        volt_trainer_destroy(r.t);
        volt_loader_destroy(l);
    }
    volt_dataset_destroy(sub);
}

/* Two epochs, each validating 5 batches that take 100 s each (and a sanity check of 2): train's
 * time and rates do not see them; validate/ and test/ metrics at those loops' ends. */
static void test_stages(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/stages", vtest_tmpdir());
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 2;
    c.log_every_n_steps = 2;
    c.num_sanity_val_steps = 2;
    c.limit_val_batches = 5;
    volt_throughput_config tc;
    volt_throughput_config_init(&tc);
    tc.window_size = 4;
    tc.flops_fn = flops_fn;
    tc.peak_tflops = 1e-3;
    run r;
    run_make(&r, root, &c, &tc, 0.25, 100);
    volt_loader *l = vtest_loader(DS, BS, false), *vl = vtest_loader(DS, BS, false);
    CHECK_OK(volt_trainer_fit(r.t, &regr_ops, &r.m, l, vl, NULL));
    CHECK(r.pr.n == 2 * NB, "%d batch ends", r.pr.n);
    for (int i = 1; i < r.pr.n; i += 2) {
        const rec *x = &r.pr.at[i];
        CHECK(rv(x, "train/time") == 0.25 * (double)(i + 1), "batch %d: train time %g (validation excluded)", i,
              rv(x, "train/time"));
        if (i >= 3) CHECK(rv(x, "train/device/batches_per_sec") == 4.0, "batch %d: %g batches/s across a validation", i,
                          rv(x, "train/device/batches_per_sec"));
    }
    /* the window spans the epoch-0 validation at batch 11 (batch ends 9..12) */
    CHECK(rv(&r.pr.at[11], "train/device/flops_per_sec") == 4e9, "flops/s %g", rv(&r.pr.at[11], "train/device/flops_per_sec"));
    /* the last validation: 5 batches (not the sanity check's 2 on top), its clock 100 s a batch
     * (its first batch end is at its start: the clock moves after the monitor has read it) */
    CHECK(metric(r.t, "validate/batches") == 5 && metric(r.t, "validate/samples") == 40, "validate totals %g %g",
          metric(r.t, "validate/batches"), metric(r.t, "validate/samples"));
    CHECK(metric(r.t, "validate/time") == 400, "validate time %g", metric(r.t, "validate/time"));
    CHECK(metric(r.t, "validate/device/samples_per_sec") == 0.08, "validate samples/s %g",
          metric(r.t, "validate/device/samples_per_sec"));
    CHECK_CLOSE(metric(r.t, "validate/device/mfu"), 2e8 / 100 / 1e9, 1e-12, 0);
    /* test: 10 batches, window 4 */
    r.fc.eval_dt = 2;
    CHECK_OK(volt_trainer_test(r.t, &regr_ops, &r.m, vl, NULL));
    CHECK(metric(r.t, "test/batches") == NB && metric(r.t, "test/samples") == NS && metric(r.t, "test/time") == 2 * (NB - 1),
          "test totals %g %g %g", metric(r.t, "test/batches"), metric(r.t, "test/samples"), metric(r.t, "test/time"));
    CHECK(metric(r.t, "test/device/batches_per_sec") == 0.5, "test batches/s %g", metric(r.t, "test/device/batches_per_sec"));
    /* a second test starts afresh (Lightning keeps counting, and its window then fails) */
    CHECK_OK(volt_trainer_test(r.t, &regr_ops, &r.m, vl, NULL));
    CHECK(metric(r.t, "test/batches") == NB && metric(r.t, "test/time") == 2 * (NB - 1), "a second test: %g batches in %g s",
          metric(r.t, "test/batches"), metric(r.t, "test/time"));
    /* predict: the same figures under its own prefix (Lightning's "predict" stage), 4 s a batch */
    r.fc.eval_dt = 4;
    CHECK_OK(volt_trainer_predict(r.t, &regr_ops, &r.m, vl, NULL, keep_none, NULL));
    CHECK(metric(r.t, "predict/batches") == NB && metric(r.t, "predict/samples") == NS && metric(r.t, "predict/time") == 4 * (NB - 1),
          "predict totals %g %g %g", metric(r.t, "predict/batches"), metric(r.t, "predict/samples"), metric(r.t, "predict/time"));
    CHECK(metric(r.t, "predict/device/batches_per_sec") == 0.25 && metric(r.t, "predict/device/samples_per_sec") == 2.0,
          "predict %g batches/s, %g samples/s", metric(r.t, "predict/device/batches_per_sec"),
          metric(r.t, "predict/device/samples_per_sec"));
    CHECK(metric(r.t, "predict/device/flops_per_sec") == 5e7, "predict flops/s %g", metric(r.t, "predict/device/flops_per_sec"));
    CHECK_CLOSE(metric(r.t, "predict/device/mfu"), 2e8 / 4 / 1e9, 1e-12, 0);
    CHECK(!volt_trainer_metric(r.t, "test/batches", NULL), "predict starts with none of test's figures (Lightning resets "
          "the metrics at every run's start)");
    volt_trainer_destroy(r.t);
    volt_loader_destroy(l);
    volt_loader_destroy(vl);
}

/* accumulate_grad_batches 2, log every step: logs at the optimizer steps, batches count them all */
static void test_accumulation(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/accumulation", vtest_tmpdir());
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.accumulate_grad_batches = 2;
    c.log_every_n_steps = 1;
    volt_throughput_config tc;
    volt_throughput_config_init(&tc);
    tc.window_size = 4;
    run r;
    run_make(&r, root, &c, &tc, 0.25, 0);
    volt_loader *l = vtest_loader(DS, BS, false);
    CHECK_OK(volt_trainer_fit(r.t, &regr_ops, &r.m, l, NULL, NULL));
    for (int i = 0; i < r.pr.n; i++) {
        const rec *x = &r.pr.at[i];
        if (i % 2 == 0) { CHECK(x->n == 0, "batch %d: logged while accumulating", i); continue; }
        CHECK(rv(x, "train/batches") == i + 1, "batch %d: batches %g", i, rv(x, "train/batches"));
        if (i >= 3) CHECK(rv(x, "train/device/batches_per_sec") == 4.0, "batch %d: %g batches/s", i,
                          rv(x, "train/device/batches_per_sec"));
    }
    volt_trainer_destroy(r.t);
    volt_loader_destroy(l);
}

/* The metrics are in metrics.csv's rows of their steps (the monitor runs before the logger) */
static void test_csv(void) {
    char root[512], path[700];
    snprintf(root, sizeof root, "%s/csv", vtest_tmpdir());
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.enable_logger = c.enable_tensorboard = true;
    c.enable_plots = false;
    c.log_every_n_steps = 2;
    volt_throughput_config tc;
    volt_throughput_config_init(&tc);
    tc.window_size = 4;
    run r;
    run_make(&r, root, &c, &tc, 0.25, 0);
    volt_loader *l = vtest_loader(DS, BS, false);
    CHECK_OK(volt_trainer_fit(r.t, &regr_ops, &r.m, l, NULL, NULL));
    snprintf(path, sizeof path, "%s/metrics.csv", volt_trainer_log_dir(r.t) ? volt_trainer_log_dir(r.t) : root);
    size_t n = 0;
    char *csv = (char *)vtest_slurp(path, &n);
    CHECK(csv != NULL, "no %s", path);
    int col = -1, step_col = -1, rows = 0, ok = 0;
    for (char *line = csv ? strtok(csv, "\n") : NULL; line; line = strtok(NULL, "\n"), rows++) {
        char *cells[32];
        const int nc = vtest_csv_cells(line, cells, 32);
        if (rows == 0) {
            for (int i = 0; i < nc; i++) {
                if (!strcmp(cells[i], "train/device/samples_per_sec")) col = i;
                if (!strcmp(cells[i], "step")) step_col = i;
            }
            continue;
        }
        if (col < 0 || step_col < 0 || col >= nc || !*cells[col]) continue;
        const long step = strtol(cells[step_col], NULL, 10);
        CHECK(atof(cells[col]) == 32.0 && step % 2 == 1 && step >= 3, "row step %ld: %s samples/s", step, cells[col]);
        ok++;
    }
    CHECK(col >= 0 && ok == 4, "metrics.csv: column %d, %d rows with samples/s (steps 4, 6, 8, 10)", col, ok);
    free(csv);
    /* predict writes its figures in a row of its own at its end, as test does (Lightning's
     * loggers take the monitor's predict metrics too) */
    r.fc.eval_dt = 0.5;
    CHECK_OK(volt_trainer_predict(r.t, &regr_ops, &r.m, l, NULL, keep_none, NULL));
    csv = (char *)vtest_slurp(path, &n);
    int pcol = -1, scol = -1, prows = 0;
    double pv = 0;
    long pstep = -1;
    rows = 0;
    for (char *line = csv ? strtok(csv, "\n") : NULL; line; line = strtok(NULL, "\n"), rows++) {
        char *cells[40];
        const int nc = vtest_csv_cells(line, cells, 40);
        for (int i = 0; rows == 0 && i < nc; i++) {
            if (!strcmp(cells[i], "predict/device/samples_per_sec")) pcol = i;
            if (!strcmp(cells[i], "step")) scol = i;
        }
        if (rows == 0 || pcol < 0 || pcol >= nc || !*cells[pcol]) continue;
        prows++;
        pv = atof(cells[pcol]);
        pstep = scol >= 0 && scol < nc ? strtol(cells[scol], NULL, 10) : -1;
    }
    CHECK(pcol >= 0 && prows == 1 && pv == 16.0 && pstep == volt_trainer_global_step(r.t),
          "metrics.csv after predict: column %d, %d rows with predict samples/s (%g at step %ld)", pcol, prows, pv, pstep);
    free(csv);
    /* and the TensorBoard event file has the scalar's tag */
    const char *ld = volt_trainer_log_dir(r.t);
    DIR *d = ld ? opendir(ld) : NULL;
    bool tagged = false;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20)) continue;
        char ev[1024];
        snprintf(ev, sizeof ev, "%s/%s", ld, e->d_name);
        size_t en = 0;
        char *evd = (char *)vtest_slurp(ev, &en);
        static const char tag[] = "predict/device/samples_per_sec";
        tagged = tagged || (evd && memmem(evd, en, tag, sizeof tag - 1));
        free(evd);
    }
    if (d) closedir(d);
    CHECK(tagged, "no TensorBoard scalar predict/device/samples_per_sec in %s", ld ? ld : "(no log dir)");
    volt_trainer_destroy(r.t);
    volt_loader_destroy(l);
}

/* The real clock: rates positive and consistent; fast_dev_run logs nothing. */
static void test_real_clock(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/real_clock", vtest_tmpdir());
    for (int dev = 0; dev < 2; dev++) {
        volt_trainer_config c;
        vtest_quiet_config(&c, root);
        c.log_every_n_steps = 5;
        c.fast_dev_run = dev ? 3 : 0;
        volt_trainer *t = NULL;
        CHECK_OK(volt_trainer_create(&c, &t));
        volt_throughput_config tc;
        volt_throughput_config_init(&tc);
        tc.window_size = 3;
        CHECK_OK(volt_add_throughput_monitor(t, &tc));
        volt_loader *l = vtest_loader(DS, BS, false);
        regr m;
        CHECK_OK(volt_trainer_fit(t, &regr_ops, &m, l, NULL, NULL));
        const double bps = metric(t, "train/device/batches_per_sec"), sps = metric(t, "train/device/samples_per_sec");
        if (dev) {
            CHECK(isnan(bps) && isnan(metric(t, "train/batches")), "fast_dev_run: logged");
        } else {
            CHECK(bps > 0 && isfinite(bps) && metric(t, "train/batches") == NB && metric(t, "train/time") > 0, "real clock: %g",
                  bps);
            CHECK_CLOSE(sps, bps * BS, 1e-12, 0);
        }
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
    }
}

/* The window alone: world 2 adds the global keys (the device's times 2) */
typedef struct kv { int n; char k[24][48]; double v[24]; } kv;
static void kv_emit(void *ctx, const char *key, double v) {
    kv *o = ctx;
    if (o->n == 24) return;
    snprintf(o->k[o->n], sizeof o->k[0], "%s", key);
    o->v[o->n++] = v;
}
static double kvget(const kv *o, const char *key) {
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->k[i], key)) return o->v[i];
    return NAN;
}
static void test_window(void) {
    volt_cb_tput w;
    CHECK(volt__cb_tput_init(&w, 1) == VOLT_ERR_INVALID_ARG, "a window of 1");
    CHECK_OK(volt__cb_tput_init(&w, 3));
    kv o = { 0 };
    volt__cb_tput_compute(&w, 2, 1e12, "/", kv_emit, &o);
    CHECK(o.n == 0, "an empty window emits nothing");
    for (int i = 1; i <= 5; i++) volt__cb_tput_update(&w, 0.5 * i, i, 8 * i, 100 * i, 3e11);
    volt__cb_tput_compute(&w, 2, 1e12, "/", kv_emit, &o);   /* window: i = 3, 4, 5 */
    CHECK(kvget(&o, "device/batches_per_sec") == 2 && kvget(&o, "batches_per_sec") == 4, "batches/s %g %g",
          kvget(&o, "device/batches_per_sec"), kvget(&o, "batches_per_sec"));
    CHECK(kvget(&o, "device/samples_per_sec") == 16 && kvget(&o, "samples_per_sec") == 32, "samples/s");
    CHECK(kvget(&o, "device/items_per_sec") == 200 && kvget(&o, "items_per_sec") == 400, "items/s");
    CHECK(kvget(&o, "device/flops_per_sec") == 6e11 && kvget(&o, "flops_per_sec") == 1.2e12, "flops/s %g",
          kvget(&o, "device/flops_per_sec"));
    CHECK_CLOSE(kvget(&o, "device/mfu"), 0.6, 1e-12, 0);
    CHECK(kvget(&o, "samples") == 40 && kvget(&o, "batches") == 5 && kvget(&o, "time") == 2.5 && kvget(&o, "lengths") == 500,
          "totals: this device's");
    /* an update without FLOPs: none until it leaves the window */
    volt__cb_tput_update(&w, 3.0, 6, 48, 600, -1);
    o.n = 0;
    volt__cb_tput_compute(&w, 1, 1e12, "/", kv_emit, &o);
    CHECK(isnan(kvget(&o, "device/flops_per_sec")) && isnan(kvget(&o, "samples_per_sec")) &&
          kvget(&o, "device/samples_per_sec") == 16, "world 1, a batch without flops");
    CHECK(isnan(kvget(&o, "items_per_sec")) && isnan(kvget(&o, "batches_per_sec")) && kvget(&o, "device/items_per_sec") == 200,
          "world 1: device keys only");
    for (int i = 7; i <= 9; i++) volt__cb_tput_update(&w, 0.5 * i, i, 8 * i, 100 * i, 1e11);
    o.n = 0;
    volt__cb_tput_compute(&w, 1, 0, "/", kv_emit, &o);
    CHECK(kvget(&o, "device/flops_per_sec") == 2e11 && isnan(kvget(&o, "device/mfu")), "flops back, no peak: no mfu");
    /* a clock that did not move: totals, no rates */
    volt__cb_tput_reset(&w);
    for (int i = 1; i <= 3; i++) volt__cb_tput_update(&w, 1.0, i, i, -1, -1);
    o.n = 0;
    volt__cb_tput_compute(&w, 1, 0, "/", kv_emit, &o);
    CHECK(o.n == 3 && isnan(kvget(&o, "device/batches_per_sec")), "a still clock: %d keys", o.n);
    volt__cb_tput_free(&w);
}

static void test_peaks_and_errors(void) {
    CHECK(volt_available_flops("NVIDIA H100 80GB HBM3", "bf16-mixed", NULL) == 989.4e12, "H100 SXM bf16");
    CHECK(volt_available_flops("H100 SXM", "32-true", "high") == 494.7e12, "H100 tf32");
    CHECK(volt_available_flops("NVIDIA H100 PCIe", "16-mixed", NULL) == 756e12, "H100 PCIe f16");
    CHECK(volt_available_flops("NVIDIA H200", "bf16-true", NULL) == 989.4e12, "H200");
    CHECK(volt_available_flops("NVIDIA A100-SXM4-80GB", "32-true", "highest") == 19.5e12, "A100 f32");
    CHECK(volt_available_flops("NVIDIA L40S", "bf16-mixed", NULL) == 181e12, "L40 before L4");
    CHECK(volt_available_flops("NVIDIA L4", "bf16-mixed", NULL) == 121e12, "L4");
    CHECK(volt_available_flops("Tesla T4", "bf16-mixed", NULL) == 0, "T4 has no bf16");
    CHECK(volt_available_flops("cpu", "32-true", NULL) == 0 && volt_available_flops(NULL, NULL, NULL) == 0, "unknown");
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_throughput_config tc;
    volt_throughput_config_init(&tc);
    tc.window_size = 1;
    CHECK(volt_add_throughput_monitor(t, &tc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "window_size"),
          "window 1: %s", volt_trainer_errmsg(t));
    volt_throughput_config_init(&tc);
    tc.separator = "";
    CHECK(volt_add_throughput_monitor(t, &tc) == VOLT_ERR_INVALID_ARG, "empty separator");
    volt_throughput_config_init(&tc);
    tc.peak_tflops = -1;
    CHECK(volt_add_throughput_monitor(t, &tc) == VOLT_ERR_INVALID_ARG, "negative peak");
    tc.version = 99;
    CHECK(volt_add_throughput_monitor(t, &tc) == VOLT_ERR_VERSION, "version");
    CHECK(volt_trainer_num_callbacks(t) == 0, "nothing added");
    volt_trainer_destroy(t);
}

int main(void) {
    for (int i = 0; i < NS; i++) {
        for (int k = 0; k < IN; k++) X[i * IN + k] = sinf((float)(3 * i + k));
        Y[i] = 0.5f * X[i * IN] - 0.25f * X[i * IN + 1] + 0.1f;
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_F32, VOLT_SHAPE(1) } };
    const void *d[2] = { X, Y };
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &DS));
    test_window();
    test_peaks_and_errors();
    test_train_rates();
    test_items_flops();
    test_stages();
    test_accumulation();
    test_csv();
    test_real_clock();
    volt_dataset_destroy(DS);
    return vtest_finish();
}
