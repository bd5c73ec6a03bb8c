/* SpikeDetection (callbacks/spike_detection.c, Lightning 2.x's) and the step loss it reads
 * (volt_trainer_step_loss).
 *
 * The module's loss is its batch's x (batch size 1, w = 1 under SGD at lr 1e-30, so w never
 * moves): every batch's loss is set by the data. Checked: a loss 5x the running mean is a
 * spike (fit fails with VOLT_ERR_NUMERIC naming the batch, skip_batches.json under the root
 * lists it and the one before, json.dump's indent=4 layout); a rise within rtol is none; an
 * improvement never is; mode max; atol alone; warmup (each epoch's first batches); a NAN loss
 * with finite_only and without (then untracked, the fit goes on); the loss over
 * accumulate_grad_batches as Lightning's; the state in a checkpoint (a resumed fit finds a spike
 * against the restored window, a fresh callback would not); compile on cuda ("cuda": a GPU or
 * the simulator; replayed steps read their loss too); the step loss itself (false before tracking, the training_step's value after); a
 * folder path and a .json path; an unwritable folder fails at fit start; bad configs. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>
#include "vtest.h"
#include "core/internal.h"
#include "volt/volt.h"
#include "volt/trainer.h"

typedef struct { volt_tensor *w; } mod;
static volt_status mod_setup(void *self, volt_params *ps) {
    mod *m = self;
    VOLT_TRY(volt_params_unit(ps, "lin"));
    return volt_param_new(ps, "lin.weight", VOLT_SHAPE(1, 1), VOLT_INIT_ONES, &m->w);
}
static volt_status mod_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    mod *m = self;
    return volt_step_set_loss(s, volt_mean(s, volt_linear(s, volt_batch_x(b), m->w, NULL)));
}
static volt_status sgd(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 1e-30f;   /* w stays 1: the loss is the data */
    return VOLT_OK;
}
static const volt_module_ops mod_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "ident", .setup = mod_setup,
                                         .configure_optimizers = sgd, .training_step = mod_train };

/* the step loss each batch end saw (a probe after the detector) */
static double g_seen[64];
static int g_n_seen;
static volt_status seen_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b; (void)i;
    double v = NAN;
    if (g_n_seen < 64) g_seen[g_n_seen++] = volt_trainer_step_loss(t, &v) ? v : -999;
    return VOLT_OK;
}
static const volt_callback_ops seen_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Seen", .on_train_batch_end = seen_end };

typedef struct run {
    const float *loss;        /* per batch of an epoch */
    int n;
    int64_t epochs, accumulate;
    bool compile, checkpoint;
    const char *accelerator;  /* NULL: the default */
    const char *name;         /* the root's folder */
    const char *resume;       /* ckpt_path */
    volt_spike_detection_config cfg;
    bool no_detector;
} run;

static char g_root[1024], g_err[2048];
static volt_status fit_run(run *r) {
    snprintf(g_root, sizeof g_root, "%s/%s", vtest_tmpdir(), r->name);
    if (!r->resume) vtest_fresh_dir(g_root);
    volt_field f[1] = { { "x", VOLT_F32, VOLT_SHAPE(1) } };
    const void *d[1] = { r->loss };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(1, f, d, r->n, &ds));
    volt_loader *l = vtest_loader(ds, 1, false);
    volt_trainer_config c;
    vtest_quiet_config(&c, g_root);
    c.max_epochs = r->epochs ? r->epochs : 1;
    c.accumulate_grad_batches = r->accumulate ? r->accumulate : 1;
    c.compile = r->compile;
    if (r->accelerator) c.accelerator = r->accelerator;
    c.enable_checkpointing = r->checkpoint;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    if (!r->no_detector) CHECK_OK(volt_add_spike_detection(t, &r->cfg));
    CHECK_OK(volt_trainer_add_callback(t, &seen_ops, NULL));
    if (r->checkpoint) {
        volt_checkpoint_config cc;
        volt_checkpoint_config_init(&cc);
        cc.save_last = true;
        cc.save_top_k = 0;
        cc.dirpath = g_root;
        CHECK_OK(volt_add_model_checkpoint(t, &cc));
    }
    mod m = { 0 };
    g_n_seen = 0;
    const volt_status st = volt_trainer_fit(t, &mod_ops, &m, l, NULL, r->resume);
    snprintf(g_err, sizeof g_err, "%s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
    return st;
}

/* the file's text (vtest_slurp), kept until the next call */
static const char *slurp(const char *path) {
    static unsigned char *last;
    size_t n;
    free(last);
    last = vtest_slurp(path, &n);
    return (const char *)last;
}
static const char *skip_file(void) {
    static char p[1100];
    snprintf(p, sizeof p, "%s/skip_batches.json", g_root);
    return p;
}

static void test_spikes(void) {
    run r = { .name = "spike" };
    volt_spike_detection_config_init(&r.cfg);
    /* a loss 5x the mean of [1.0, 1.1, 0.9, 1.0] at batch 4 */
    const float a[] = { 1.0f, 1.1f, 0.9f, 1.0f, 5.0f, 1.0f, 1.0f };
    r.loss = a;
    r.n = 7;
    volt_status st = fit_run(&r);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(g_err, "Training spike detected in batch 4 of epoch 0") && strstr(g_err, "skip_batches.json"),
          "a spike at batch 4: %s (%s)", volt_status_str(st), g_err);
    const char *js = slurp(skip_file());
    CHECK(js && !strcmp(js, "[\n    3,\n    4\n]"), "skip_batches.json: %s", js ? js : "(none)");
    CHECK(g_n_seen == 4, "the fit ended at the spike's batch end (%d batch ends after it ran)", g_n_seen);
    CHECK(g_n_seen >= 4 && g_seen[0] == 1.0 && fabs(g_seen[1] - 1.1) < 1e-6 && g_seen[3] == 1.0,
          "the step loss at each batch end: %g %g %g %g", g_seen[0], g_seen[1], g_seen[2], g_seen[3]);
    /* a rise within rtol (2.5 against a mean of 1: 1.5 < 2), and an improvement: no spike */
    const float b[] = { 1.0f, 2.5f, 0.1f, 0.1f, 0.2f };
    r.loss = b;
    r.n = 5;
    r.name = "nospike";
    CHECK_OK(fit_run(&r));
    CHECK(access(skip_file(), F_OK) != 0, "no spike, yet a skip file");
    /* mode max: a fall is the spike (rtol 0.5: 4.9 >= 2.5), a rise never */
    const float c[] = { 5.0f, 5.0f, 9.0f, 0.1f };
    r.loss = c;
    r.n = 4;
    r.name = "max";
    r.cfg.mode = VOLT_MAX;
    r.cfg.rtol = 0.5;
    st = fit_run(&r);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(g_err, "batch 3"), "mode max: %s (%s)", volt_status_str(st), g_err);
    /* atol alone: 2.5 against 1 is a spike with atol 1 and no rtol */
    const float d[] = { 1.0f, 1.0f, 1.0f, 2.5f };
    r.loss = d;
    r.name = "atol";
    volt_spike_detection_config_init(&r.cfg);
    r.cfg.atol = 1.0;
    r.cfg.rtol = NAN;
    st = fit_run(&r);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(g_err, "batch 3"), "atol 1: %s (%s)", volt_status_str(st), g_err);
    r.cfg.atol = 2.0;   /* 1.5 < 2 */
    r.name = "atol2";
    CHECK_OK(fit_run(&r));
    /* warmup 3: batches 0..2 of each epoch are never spikes (batch 2's 9 is tracked); epoch 1's
     * batch 0 neither; epoch 1's batch 3 (9 again, against a mean pulled up by the 9s) is none */
    const float e[] = { 1.0f, 1.0f, 9.0f, 9.0f };
    r.loss = e;
    r.name = "warmup";
    volt_spike_detection_config_init(&r.cfg);
    r.cfg.warmup = 3;
    r.epochs = 2;
    CHECK_OK(fit_run(&r));
    r.cfg.warmup = 2;   /* batch 2 checked: 9 against 1 */
    r.name = "warmup2";
    st = fit_run(&r);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(g_err, "batch 2 of epoch 0"), "warmup 2: %s (%s)", volt_status_str(st), g_err);
    r.epochs = 0;
}

static void test_nonfinite_and_accumulation(void) {
    run r = { .name = "nan" };
    volt_spike_detection_config_init(&r.cfg);
    const float a[] = { 1.0f, 1.0f, NAN, 1.0f };
    r.loss = a;
    r.n = 4;
    volt_status st = fit_run(&r);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(g_err, "batch 2"), "a NAN loss is a spike: %s (%s)", volt_status_str(st), g_err);
    r.cfg.finite_only = false;   /* no spike, not tracked: the fit goes on (w is NAN after, so every loss is) */
    r.name = "nan_ok";
    CHECK_OK(fit_run(&r));
    CHECK(g_n_seen == 4 && isnan(g_seen[2]), "finite_only false: %d batch ends, batch 2's loss %g", g_n_seen, g_seen[2]);
    /* the loss over accumulate_grad_batches, as Lightning's outputs["loss"]: 3 against 1 is 1.5
     * against 0.5 with 2, under atol 1.5 only with 1 */
    const float b[] = { 1.0f, 1.0f, 1.0f, 1.0f, 3.0f, 1.0f };
    r.loss = b;
    r.n = 6;
    volt_spike_detection_config_init(&r.cfg);
    r.cfg.atol = 1.5;
    r.cfg.rtol = NAN;
    r.name = "acc1";
    st = fit_run(&r);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(g_err, "batch 4"), "accumulate 1: %s (%s)", volt_status_str(st), g_err);
    r.accumulate = 2;
    r.name = "acc2";
    CHECK_OK(fit_run(&r));
    CHECK(g_n_seen == 6 && g_seen[4] == 3.0, "the step loss is the training_step's (%g), not divided", g_seen[4]);
    r.accumulate = 0;
}

/* the running mean in the checkpoint, warmup 0: epoch 0 tracks 1s; the resumed epoch 1's 4.0 at
 * its batch 0 is a spike against the restored window, where a fresh detector's empty window
 * (NAN mean) finds none */
static void test_resume(void) {
    const float ones[] = { 1.0f, 1.0f, 1.0f, 1.0f }, a[] = { 4.0f, 1.0f, 1.0f, 1.0f };
    run r = { .name = "resume", .checkpoint = true, .epochs = 1, .loss = ones, .n = 4 };
    volt_spike_detection_config_init(&r.cfg);
    r.cfg.warmup = 0;
    CHECK_OK(fit_run(&r));
    char last[1200];
    snprintf(last, sizeof last, "%s/last.safetensors", g_root);
    CHECK(access(last, R_OK) == 0, "no last checkpoint at %s", last);
    r.loss = a;
    r.epochs = 2;
    r.resume = last;
    volt_status st = fit_run(&r);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(g_err, "batch 0 of epoch 1"), "resumed: %s (%s)", volt_status_str(st), g_err);
    const char *js = slurp(skip_file());
    CHECK(js && !strcmp(js, "[\n    -1,\n    0\n]"), "resumed: skip_batches.json: %s", js ? js : "(none)");
    r.resume = NULL;
    r.checkpoint = false;
    r.epochs = 1;
    r.name = "resume_control";
    CHECK_OK(fit_run(&r));   /* the same data, no state: none */
    /* a NAN inside warmup is not tracked: the checkpoint after it loads (JSON has no NAN) */
    const float nan_in_warmup[] = { 1.0f, NAN };
    run q = { .name = "resume_nan", .checkpoint = true, .epochs = 1, .loss = nan_in_warmup, .n = 2 };
    volt_spike_detection_config_init(&q.cfg);
    q.cfg.warmup = 5;
    CHECK_OK(fit_run(&q));
    snprintf(last, sizeof last, "%s/last.safetensors", g_root);
    q.resume = last;
    q.epochs = 2;
    st = fit_run(&q);
    CHECK(st == VOLT_OK, "resumed after a NAN in warmup: %s (%s)", volt_status_str(st), g_err);
}

static void test_compile(void) {
    const float a[] = { 1.0f, 1.1f, 0.9f, 1.0f, 5.0f, 1.0f };
    run r = { .name = "compile", .compile = true, .loss = a, .n = 6, .accelerator = "cuda" };
    volt_spike_detection_config_init(&r.cfg);
    volt_status st = fit_run(&r);
    CHECK(st == VOLT_ERR_NUMERIC && strstr(g_err, "batch 4"), "compile: %s (%s)", volt_status_str(st), g_err);
    CHECK(g_n_seen == 4 && g_seen[4 - 1] == 1.0 && fabs(g_seen[1] - 1.1) < 1e-6, "compile: the replayed steps' losses %g %g",
          g_seen[1], g_seen[3]);
    /* without a detector nothing tracks the loss */
    run q = { .name = "untracked", .loss = a, .n = 3, .no_detector = true, .compile = true, .accelerator = "cuda" };
    CHECK_OK(fit_run(&q));
    CHECK(g_n_seen == 3 && g_seen[0] == -999, "untracked: volt_trainer_step_loss gave %g", g_seen[0]);
}

static void test_paths_and_configs(void) {
    const float a[] = { 1.0f, 1.0f, 9.0f };
    run r = { .name = "paths", .loss = a, .n = 3 };
    volt_spike_detection_config_init(&r.cfg);
    char dir[1200], file[1300];
    snprintf(dir, sizeof dir, "%s/paths_out/skips", vtest_tmpdir());
    vtest_fresh_dir(dir);
    r.cfg.exclude_batches_path = dir;
    CHECK(fit_run(&r) == VOLT_ERR_NUMERIC, "a folder path");
    snprintf(file, sizeof file, "%s/skip_batches.json", dir);
    CHECK(access(file, R_OK) == 0, "no %s", file);
    snprintf(file, sizeof file, "%s/mine.json", dir);
    r.cfg.exclude_batches_path = file;
    CHECK(fit_run(&r) == VOLT_ERR_NUMERIC && access(file, R_OK) == 0, "a .json path: %s", file);
    /* a folder that cannot be made: refused at fit start, before any batch */
    char blocker[1200], under[1300];
    snprintf(blocker, sizeof blocker, "%s/paths_out/a_file", vtest_tmpdir());
    FILE *f = fopen(blocker, "w");
    if (f) fclose(f);
    snprintf(under, sizeof under, "%s/sub", blocker);
    r.cfg.exclude_batches_path = under;
    volt_status st = fit_run(&r);
    CHECK(st < 0 && st != VOLT_ERR_NUMERIC && strstr(g_err, "SpikeDetection") && strstr(g_err, "exclude_batches_path") &&
              g_n_seen == 0, "an unwritable folder: %s (%s), %d batches ran", volt_status_str(st), g_err, g_n_seen);
    /* bad configs */
    volt_trainer_config c;
    vtest_quiet_config(&c, g_root);
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_spike_detection_config b;
    volt_spike_detection_config_init(&b);
    b.window = 0;
    CHECK(volt_add_spike_detection(t, &b) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "window"), "window 0: %s",
          volt_trainer_errmsg(t));
    volt_spike_detection_config_init(&b);
    b.rtol = -1;
    CHECK(volt_add_spike_detection(t, &b) == VOLT_ERR_INVALID_ARG, "rtol -1 accepted");
    volt_spike_detection_config_init(&b);
    b.atol = INFINITY;
    CHECK(volt_add_spike_detection(t, &b) == VOLT_ERR_INVALID_ARG, "atol inf accepted");
    volt_spike_detection_config_init(&b);
    b.mode = (volt_mode)5;
    CHECK(volt_add_spike_detection(t, &b) == VOLT_ERR_INVALID_ARG, "mode 5 accepted");
    volt_spike_detection_config_init(&b);
    b.exclude_batches_path = "";
    CHECK(volt_add_spike_detection(t, &b) == VOLT_ERR_INVALID_ARG, "an empty path accepted");
    volt_spike_detection_config_init(&b);
    b.version = 99;
    CHECK(volt_add_spike_detection(t, &b) == VOLT_ERR_VERSION, "version 99 accepted");
    CHECK_OK(volt_add_spike_detection(t, NULL));
    CHECK(volt_add_spike_detection(t, NULL) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "one already"),
          "a second one: %s", volt_trainer_errmsg(t));
    CHECK(volt_trainer_track_step_loss(NULL) == VOLT_ERR_INVALID_ARG && !volt_trainer_step_loss(NULL, NULL), "NULL trainer");
    volt_trainer_destroy(t);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "cuda")) {   /* compile's captured and replayed steps (a GPU, or the simulator) */
        const volt_backend *be = volt__backend_find("cuda");
        if (!be || be->device_count() == 0) { printf("SKIP: no cuda device (the simulator build runs this)\n"); return 77; }
        test_compile();
        return vtest_finish();
    }
    test_spikes();
    test_nonfinite_and_accumulation();
    test_resume();
    test_paths_and_configs();
    return vtest_finish();
}
