/* WeightAveraging / EMAWeightAveraging (callbacks/weight_averaging.c, trainer/weight_average.c):
 * a fit's validation (sanity check too) sees the average, bit for bit the f32 AveragedModel
 * the host computes from the current weights after every step (EMA, SWA, should_update's
 * gating); the model holds the average at train end; a checkpoint holds the average as the
 * weights and the current weights as optimizer.weight_average.*; an exact resume (mid-epoch
 * and at an epoch end) equals the uninterrupted run bit for bit, current weights and average;
 * test from the checkpoint (and from ModelCheckpoint's "best") runs on the average; a
 * checkpoint without the average starts it
 * from its weights; bad configurations. */
#include <math.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "volt/safetensors.h"

enum { NS = 96, IN = 5, BS = 8, NB = NS / BS };
static float X[NS * IN];
static float Y[NS * IN];

typedef struct { volt_tensor *w, *b; } regr;
static volt_status regr_setup(void *self, volt_params *ps) {
    regr *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc"));
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(IN, IN), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(IN), VOLT_INIT_ZEROS, &m->b);
}
static volt_status regr_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    regr *m = self;
    return volt_step_set_loss(s, volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b)));
}
static volt_status regr_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    regr *m = self;
    return volt_log(s, "val_loss", volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b)), 0);
}
static volt_status regr_test(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    regr *m = self;
    return volt_log(s, "test_loss", volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b)), 0);
}
static volt_status sgd_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.05f;
    o->optimizer.momentum = 0.5f;
    return VOLT_OK;
}

/* ---- the host's AveragedModel and the probes ------------------------------------------------- */
enum { NP = IN * IN + IN };
typedef struct {
    volt_weight_averaging_config cfg;
    float avg[NP], cur[NP];
    int64_t n_averaged, latest_update_step;
    bool init;
    int val_checks, val_bad, val_back_bad;   /* validations seen; of them not on the average; not back on current */
    float val_avg[8][NP];                    /* the average each validation ran on, by val_checks */
    int64_t save_epoch, save_batch;          /* save a checkpoint after this batch (-1: none) */
    const char *save_path;
    float saved_avg[NP], saved_cur[NP];
} probe;
static probe P;

static void params_f32(volt_trainer *t, float *out) {
    volt_params *ps = volt_trainer_params(t);
    for (int i = 0; i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        vtest_f32(p, out);
        out += volt_tensor_numel(p);
    }
}

/* the f32 operations of torch's AveragedModel (core/cpu/param_math.c's avg_elem) */
static void host_update(void) {
    for (int i = 0; i < NP; i++) {
        const float a = P.avg[i], p = P.cur[i];
        if (P.n_averaged == 0) P.avg[i] = p;
        else if (P.cfg.mode == VOLT_OPTIM_AVERAGE_EMA) {
            const float x = P.cfg.decay * a, y = (float)(1.0 - (double)P.cfg.decay) * p;
            P.avg[i] = x + y;
        } else {
            const float w = 1.0f / (float)(P.n_averaged + 1);
            P.avg[i] = w < 0.5f ? a + w * (p - a) : p - (p - a) * (1.f - w);
        }
    }
    P.n_averaged++;
}

static bool should_update_step(int64_t idx) {
    return (P.cfg.update_starting_at_step < 0 || idx >= P.cfg.update_starting_at_step) && idx % P.cfg.update_every_n_steps == 0;
}

/* added after WeightAveraging: its hooks see what WeightAveraging left */
static volt_status pr_fit_start(void *self, volt_trainer *t) {
    (void)self;
    if (!P.init) {   /* a fresh fit: the average starts as the weights */
        params_f32(t, P.cur);
        memcpy(P.avg, P.cur, sizeof P.avg);
        P.init = true;
    }
    return VOLT_OK;
}
static volt_status pr_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b;
    const int64_t g = volt_trainer_global_step(t);
    params_f32(t, P.cur);
    if (g > P.latest_update_step && should_update_step(g - 1)) {
        host_update();
        P.latest_update_step = g;
    }
    if (P.save_path && volt_trainer_current_epoch(t) == P.save_epoch && i == P.save_batch) {
        VOLT_TRY(volt_trainer_save_checkpoint(t, P.save_path));
        memcpy(P.saved_avg, P.avg, sizeof P.avg);
        memcpy(P.saved_cur, P.cur, sizeof P.cur);
        float now[NP];
        params_f32(t, now);
        CHECK(!memcmp(now, P.cur, sizeof now), "the save changed the current weights");
    }
    return VOLT_OK;
}
static volt_status pr_epoch_end(void *self, volt_trainer *t) {
    (void)self;
    const int64_t e = volt_trainer_current_epoch(t);
    if (P.cfg.update_starting_at_epoch >= 0 && e >= P.cfg.update_starting_at_epoch) host_update();
    return VOLT_OK;
}
static volt_status pr_val_start(void *self, volt_trainer *t) {
    (void)self;
    float now[NP];
    params_f32(t, now);
    if (P.val_checks < 8) memcpy(P.val_avg[P.val_checks], now, sizeof now);
    P.val_checks++;
    if (memcmp(now, P.avg, sizeof now)) P.val_bad++;
    return VOLT_OK;
}
static volt_status pr_val_end(void *self, volt_trainer *t) {   /* on_validation_end: after the swap back */
    (void)self;
    float now[NP];
    params_f32(t, now);
    if (memcmp(now, P.cur, sizeof now)) P.val_back_bad++;
    return VOLT_OK;
}
static const volt_callback_ops probe_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "AvgProbe",
    .on_fit_start = pr_fit_start, .on_train_batch_end = pr_batch_end, .on_train_epoch_end = pr_epoch_end,
    .on_validation_epoch_start = pr_val_start, .on_validation_end = pr_val_end,
};

static volt_module_ops regr_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "regr", .setup = regr_setup,
                                    .configure_optimizers = sgd_opt, .training_step = regr_train,
                                    .validation_step = regr_val, .test_step = regr_test };

static volt_dataset *DS;
static volt_loader *make_loader(bool shuffle) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = BS;
    lc.shuffle = shuffle;
    lc.seed = 11;
    volt_loader *l = NULL;
    CHECK_OK(volt_loader_create(&lc, DS, &l));
    return l;
}

static const char *g_precision;   /* NULL: 32-true */
static float g_init_scale;        /* 16-mixed: the grad scaler's first scale (0: the default) */

static volt_trainer *make_trainer(const char *root, int64_t epochs, const volt_weight_averaging_config *wc) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = epochs;
    if (g_precision) c.precision = g_precision;
    if (g_init_scale > 0) {
        c.grad_scaler_init_scale = g_init_scale;
        c.grad_scaler_growth_interval = 4;
    }
    c.num_sanity_val_steps = 2;
    c.seed = 5;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    if (wc) CHECK_OK(volt_add_weight_averaging(t, wc));
    CHECK_OK(volt_trainer_add_callback(t, &probe_ops, NULL));
    return t;
}

static void probe_reset(const volt_weight_averaging_config *wc) {
    memset(&P, 0, sizeof P);
    P.cfg = *wc;
    P.save_epoch = P.save_batch = -1;
}

/* A fit with averaging: validation on the average (sanity check included), back on the current
 * weights after, the average in the model at the end. */
static void fit_case(const char *name, const volt_weight_averaging_config *wc, int64_t epochs) {
    char root[512];
    snprintf(root, sizeof root, "%s/%s", vtest_tmpdir(), name);
    vtest_fresh_dir(root);
    probe_reset(wc);
    regr m;
    volt_trainer *t = make_trainer(root, epochs, wc);
    volt_loader *tl = make_loader(true), *vl = make_loader(false);
    volt_status st = volt_trainer_fit(t, &regr_ops, &m, tl, vl, NULL);
    CHECK(st == VOLT_OK, "%s: fit: %s", name, volt_trainer_errmsg(t));
    CHECK(P.val_checks == 1 + (int)epochs && P.val_bad == 0, "%s: %d of %d validations not on the average", name, P.val_bad,
          P.val_checks);
    CHECK(P.val_back_bad == 0, "%s: %d validations left the average in the model", name, P.val_back_bad);
    CHECK(volt_optimizer_average_count(volt_trainer_optimizer(t)) == P.n_averaged, "%s: n_averaged %lld, expected %lld", name,
          (long long)volt_optimizer_average_count(volt_trainer_optimizer(t)), (long long)P.n_averaged);
    float now[NP];
    params_f32(t, now);
    CHECK(!memcmp(now, P.avg, sizeof now), "%s: the model does not hold the average at train end", name);
    CHECK(memcmp(P.avg, P.cur, sizeof now) != 0, "%s: the average equals the current weights (the test proves nothing)", name);
    printf("  %-28s %lld updates over %lld steps, %lld skipped\n", name, (long long)P.n_averaged,
           (long long)volt_trainer_global_step(t), (long long)volt_trainer_skipped_steps(t));
    if (g_init_scale > 0) CHECK(volt_trainer_skipped_steps(t) >= 2, "%s: %lld steps skipped", name, (long long)volt_trainer_skipped_steps(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

static void test_fit(void) {
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    wc.decay = 0.8f;
    fit_case("ema", &wc, 2);
    wc.update_every_n_steps = 3;
    wc.update_starting_at_step = 4;
    fit_case("ema_gated", &wc, 2);
    volt_weight_averaging_config_init(&wc);
    wc.decay = 0.5f;
    wc.update_starting_at_step = 1000;   /* no step updates; epoch ends from epoch 1 */
    wc.update_starting_at_epoch = 1;
    fit_case("ema_epochs", &wc, 3);
    volt_weight_averaging_config_init(&wc);
    wc.mode = VOLT_OPTIM_AVERAGE_SWA;
    fit_case("swa", &wc, 2);
    /* 16-mixed from a loss scale whose grads overflow: the skipped steps are no optimizer
     * steps (global_step stays), so they leave the average, as the host's reference does */
    g_precision = "16-mixed";
    g_init_scale = 16777216.f;   /* 2^24 */
    volt_weight_averaging_config_init(&wc);
    wc.decay = 0.8f;
    fit_case("ema_16mixed_skips", &wc, 2);
    g_precision = NULL;
    g_init_scale = 0;
}

static void read_file(const char *path, const char *prefix, float *out) {
    volt_st_file *f = NULL;
    char err[512];
    CHECK_OK(volt_st_open(path, &f, err, sizeof err));
    if (!f) return;
    const char *names[2] = { "fc.weight", "fc.bias" };
    const int64_t n[2] = { IN * IN, IN };
    for (int k = 0; k < 2; k++) {
        char nm[128];
        snprintf(nm, sizeof nm, "%s%s", prefix, names[k]);
        CHECK_OK(volt_st_read_f32(f, nm, out, n[k], err, sizeof err));
        out += n[k];
    }
    volt_st_close(f);
}

/* A checkpoint saved mid-fit holds the average as the weights and the current weights as the
 * state; a resume from it ends bit for bit where the uninterrupted run ends; test from it runs
 * on the average. */
static void resume_case(const char *name, int64_t save_epoch, int64_t save_batch) {
    char root[512], path[600];
    snprintf(root, sizeof root, "%s/%s", vtest_tmpdir(), name);
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/mid.safetensors", root);
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    wc.decay = 0.75f;
    wc.update_every_n_steps = 2;
    volt_loader *tl = make_loader(true), *vl = make_loader(false);
    /* A: 3 epochs, a save in between (which must not disturb it) */
    probe_reset(&wc);
    P.save_epoch = save_epoch;
    P.save_batch = save_batch;
    P.save_path = path;
    regr ma;
    volt_trainer *ta = make_trainer(root, 3, &wc);
    volt_status st = volt_trainer_fit(ta, &regr_ops, &ma, tl, vl, NULL);
    CHECK(st == VOLT_OK, "%s: fit A: %s", name, volt_trainer_errmsg(ta));
    float a_avg[NP], a_cur[NP], saved_avg[NP], saved_cur[NP], file_w[NP], file_s[NP];
    params_f32(ta, a_avg);
    memcpy(a_cur, P.cur, sizeof a_cur);
    memcpy(saved_avg, P.saved_avg, sizeof saved_avg);
    memcpy(saved_cur, P.saved_cur, sizeof saved_cur);
    const int64_t a_n = volt_optimizer_average_count(volt_trainer_optimizer(ta));
    CHECK(!memcmp(a_avg, P.avg, sizeof a_avg), "%s: A's model is not the average at the end", name);
    /* the file: weights = the average, optimizer.weight_average.* = the current weights */
    read_file(path, "", file_w);
    read_file(path, "optimizer.weight_average.", file_s);
    CHECK(!memcmp(file_w, saved_avg, sizeof file_w), "%s: the checkpoint's weights are not the average", name);
    CHECK(!memcmp(file_s, saved_cur, sizeof file_s), "%s: the checkpoint's weight_average state is not the current weights", name);
    CHECK(memcmp(saved_avg, saved_cur, sizeof saved_cur) != 0, "%s: average == current at the save (proves nothing)", name);
    volt_trainer_destroy(ta);
    /* B: resumed from the file, in a fresh trainer */
    probe_reset(&wc);
    P.init = true;   /* the probe's average: what the file restores */
    memcpy(P.avg, saved_avg, sizeof P.avg);
    memcpy(P.cur, saved_cur, sizeof P.cur);
    regr mb;
    volt_trainer *tb = make_trainer(root, 3, &wc);
    st = volt_trainer_fit(tb, &regr_ops, &mb, tl, vl, path);
    CHECK(st == VOLT_OK, "%s: resume: %s", name, volt_trainer_errmsg(tb));
    float b_avg[NP];
    params_f32(tb, b_avg);
    CHECK(!memcmp(a_avg, b_avg, sizeof a_avg), "%s: the resumed run's average differs from the uninterrupted run's", name);
    CHECK(!memcmp(a_cur, P.cur, sizeof a_cur), "%s: the resumed run's current weights differ from the uninterrupted run's", name);
    CHECK(volt_optimizer_average_count(volt_trainer_optimizer(tb)) == a_n, "%s: n_averaged %lld after the resume, %lld straight",
          name, (long long)volt_optimizer_average_count(volt_trainer_optimizer(tb)), (long long)a_n);
    volt_trainer_destroy(tb);
    /* test from the checkpoint (no averaging callback): the average's loss */
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    volt_trainer *tt = NULL;
    CHECK_OK(volt_trainer_create(&c, &tt));
    regr mt;
    CHECK_OK(volt_trainer_test(tt, &regr_ops, &mt, vl, path));
    float t_w[NP];
    params_f32(tt, t_w);
    CHECK(!memcmp(t_w, saved_avg, sizeof t_w), "%s: test from the checkpoint does not run on the average", name);
    volt_trainer_destroy(tt);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

static void test_resume(void) {
    resume_case("resume_mid", 1, 4);           /* mid-epoch */
    resume_case("resume_epoch_end", 0, NB - 1);   /* the last batch of epoch 0 */
}

/* ModelCheckpoint's best file (by val_loss, computed on the average) holds that validation's
 * average as its weights; test from "best" runs on it. */
static void test_best(void) {
    char root[512], dir[600];
    snprintf(root, sizeof root, "%s/best", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(dir, sizeof dir, "%s/ckpt", root);
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    wc.decay = 0.6f;
    probe_reset(&wc);
    regr m;
    volt_trainer *t = make_trainer(root, 3, &wc);
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.filename = "{epoch}";
    cc.monitor = "val_loss";
    cc.mode = VOLT_MIN;
    cc.save_top_k = 1;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    volt_loader *tl = make_loader(true), *vl = make_loader(false);
    volt_status st = volt_trainer_fit(t, &regr_ops, &m, tl, vl, NULL);
    CHECK(st == VOLT_OK, "best: fit: %s", volt_trainer_errmsg(t));
    const char *best = volt_trainer_best_model_path(t);
    const char *eq = best ? strstr(best, "epoch=") : NULL;
    CHECK(eq != NULL, "best: no best checkpoint (%s)", best ? best : "none");
    if (!eq) { volt_trainer_destroy(t); volt_loader_destroy(tl); volt_loader_destroy(vl); return; }
    const int e = atoi(eq + 6);   /* validation 1 + e (0 is the sanity check) */
    float file_w[NP], now[NP];
    read_file(best, "", file_w);
    CHECK(e >= 0 && e < 3 && !memcmp(file_w, P.val_avg[1 + e], sizeof file_w), "best: epoch %d's file does not hold the "
          "average that validation ran on", e);
    CHECK_OK(volt_trainer_test(t, &regr_ops, &m, vl, "best"));
    params_f32(t, now);
    CHECK(!memcmp(now, file_w, sizeof now), "best: test from \"best\" does not run on the checkpoint's average");
    printf("  best                         epoch %d, its average tested\n", e);
    volt_trainer_destroy(t);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* A checkpoint saved without averaging: the average starts from its weights (Lightning warns
 * and initialises both from state_dict). */
static void test_resume_without_average(void) {
    char root[512], path[600];
    snprintf(root, sizeof root, "%s/plain", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/plain.safetensors", root);
    volt_loader *tl = make_loader(true), *vl = make_loader(false);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    volt_trainer *t0 = NULL;
    CHECK_OK(volt_trainer_create(&c, &t0));
    regr m0;
    CHECK_OK(volt_trainer_fit(t0, &regr_ops, &m0, tl, vl, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t0, path));
    float w0[NP];
    params_f32(t0, w0);
    volt_trainer_destroy(t0);
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    probe_reset(&wc);
    P.init = true;
    memcpy(P.avg, w0, sizeof w0);
    memcpy(P.cur, w0, sizeof w0);
    regr m;
    volt_trainer *t = make_trainer(root, 2, &wc);
    volt_status st = volt_trainer_fit(t, &regr_ops, &m, tl, vl, path);
    CHECK(st == VOLT_OK, "resume without average: %s", volt_trainer_errmsg(t));
    CHECK(P.val_checks == 2 && P.val_bad == 0, "resume without average: %d of %d validations not on the expected average",
          P.val_bad, P.val_checks);
    volt_trainer_destroy(t);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

static void test_errors(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/errors", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    wc.decay = 1.0f;
    CHECK(volt_add_weight_averaging(t, &wc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "decay"), "decay 1: %s",
          volt_trainer_errmsg(t));
    wc.decay = -0.5f;
    CHECK(volt_add_weight_averaging(t, &wc) == VOLT_ERR_INVALID_ARG, "decay -0.5 accepted");
    volt_weight_averaging_config_init(&wc);
    wc.update_every_n_steps = 0;
    CHECK(volt_add_weight_averaging(t, &wc) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "update_every_n_steps"),
          "update_every_n_steps 0: %s", volt_trainer_errmsg(t));
    volt_weight_averaging_config_init(&wc);
    wc.version = 99;
    CHECK(volt_add_weight_averaging(t, &wc) == VOLT_ERR_VERSION, "version 99 accepted");
    CHECK(volt_trainer_num_callbacks(t) == 0, "a refused config added a callback");
    CHECK_OK(volt_add_weight_averaging(t, NULL));
    CHECK(volt_add_weight_averaging(t, NULL) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "one"),
          "a second WeightAveraging: %s", volt_trainer_errmsg(t));
    CHECK(volt_trainer_swap_average(t) == VOLT_ERR_STATE, "swap before fit");
    volt_trainer_destroy(t);
    /* 16-bit weights with f32 optimizer states: refused at fit, named */
    vtest_quiet_config(&c, root);
    c.precision = "bf16-true";
    c.optimizer_dtype = "f32";
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK_OK(volt_add_weight_averaging(t, NULL));
    volt_loader *tl = make_loader(false);
    regr m;
    volt_status st = volt_trainer_fit(t, &regr_ops, &m, tl, NULL, NULL);
    CHECK(st == VOLT_ERR_UNSUPPORTED && strstr(volt_trainer_errmsg(t), "optimizer_dtype"), "bf16-true + f32 states: %s",
          volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    /* bf16-true with the default (16-bit) states: the average in bf16, fit runs */
    vtest_quiet_config(&c, root);
    c.precision = "bf16-true";
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK_OK(volt_add_weight_averaging(t, NULL));
    st = volt_trainer_fit(t, &regr_ops, &m, tl, NULL, NULL);
    CHECK(st == VOLT_OK, "bf16-true averaging: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(tl);
}

/* A fit that fails inside a validation, with the average swapped in: the current weights go back
 * into the model (one process), so what follows starts from them. */
static float g_cur[NP];
static volt_status cur_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)b; (void)i;
    params_f32(t, g_cur);   /* after the optimizer step: the current weights */
    return VOLT_OK;
}
static int g_val_calls;
static volt_status failing_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    if (++g_val_calls == 4) return volt_step_fail(s, VOLT_ERR_NUMERIC, "validation went NaN (on purpose)");
    return regr_val(self, s, b, i);
}
static void test_failed_validation(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/failed_val", vtest_tmpdir());
    vtest_fresh_dir(root);
    volt_weight_averaging_config wc;
    volt_weight_averaging_config_init(&wc);
    probe_reset(&wc);
    volt_trainer *t = make_trainer(root, 3, &wc);
    volt_module_ops ops = regr_ops;
    ops.validation_step = failing_val;
    ops.on_train_batch_end = cur_batch_end;
    regr m;
    volt_loader *tl = make_loader(false), *vl = make_loader(false);
    g_val_calls = 0;
    volt_status st = volt_trainer_fit(t, &ops, &m, tl, vl, NULL);
    CHECK(st == VOLT_ERR_NUMERIC, "the fit fails in a validation: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    CHECK(!volt_trainer_average_swapped(t), "the average is still swapped into the model after the failed fit");
    float now[NP];
    params_f32(t, now);
    CHECK(!memcmp(now, g_cur, sizeof now), "the model holds the current weights again after the failed fit");
    volt_trainer_destroy(t);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

int main(void) {
    for (int i = 0; i < NS; i++)
        for (int k = 0; k < IN; k++) {
            X[i * IN + k] = sinf((float)(3 * i + k));
            Y[i * IN + k] = 0.5f * X[i * IN + (k + 1) % IN] - 0.25f * X[i * IN + k] + 0.1f;
        }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_F32, VOLT_SHAPE(IN) } };
    const void *d[2] = { X, Y };
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &DS));
    test_fit();
    test_resume();
    test_best();
    test_resume_without_average();
    test_errors();
    test_failed_validation();
    volt_dataset_destroy(DS);
    return vtest_finish();
}
