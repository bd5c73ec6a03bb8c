/* GradientAccumulationScheduler (callbacks/accumulation_scheduler.c) and
 * volt_trainer_set_accumulate_grad_batches: a schedule {0: 1, 1: 2, 2: 3} over 3 epochs of 13
 * batches (the last one short) gives 13 + 7 + 5 optimizer steps, and the weights equal a
 * reference written here in double (linear regression, MSE, torch's SGD with momentum, each
 * window's grads summed over its batches and divided by the epoch's factor, the short window
 * too); a schedule of one factor equals the trainer's own accumulate_grad_batches bit for bit;
 * a fit stopped inside epoch 1 and resumed from its checkpoint ends bitwise where the
 * uninterrupted one does (the resumed epoch's factor comes from train start); the setter's
 * and the callback's errors. */
#include <math.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

enum { NS = 100, IN = 4, BS = 8, NB = (NS + BS - 1) / BS, NP = IN * IN + IN };
static float X[NS * IN], Y[NS * IN];
static volt_dataset *DS;

typedef struct { volt_tensor *w, *b; } regr;
static volt_status regr_setup(void *self, volt_params *ps) {
    regr *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc"));
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(IN, IN), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(IN), VOLT_INIT_UNIFORM(-0.3f, 0.3f), &m->b);
}
static volt_status regr_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    regr *m = self;
    return volt_step_set_loss(s, volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b)));
}
static volt_status sgd_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.05f;
    o->optimizer.momentum = 0.5f;
    return VOLT_OK;
}
static const volt_module_ops regr_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "regr", .setup = regr_setup,
                                          .configure_optimizers = sgd_opt, .training_step = regr_train };

static void params_f32(volt_trainer *t, float *out) {
    volt_params *ps = volt_trainer_params(t);
    for (int i = 0; i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        vtest_f32(p, out);
        out += volt_tensor_numel(p);
    }
}

/* the probe: the initial weights, the factor each epoch ran with, a save inside epoch 1 */
typedef struct {
    float init[NP];
    int64_t factor[8];
    int64_t stop_epoch, stop_batch;   /* save and stop after this batch (-1: never) */
    const char *path;
} probe;
static probe P;
static volt_status pr_train_start(void *self, volt_trainer *t) {
    (void)self;
    if (volt_trainer_global_step(t) == 0) params_f32(t, P.init);
    return VOLT_OK;
}
static volt_status pr_epoch_start(void *self, volt_trainer *t) {
    (void)self;
    /* the scheduler was added first: its epoch start has run */
    int64_t e = volt_trainer_current_epoch(t);
    if (e < 8) P.factor[e] = volt_trainer_get_config(t)->accumulate_grad_batches;
    return VOLT_OK;
}
static volt_status pr_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    if (volt_trainer_current_epoch(t) != P.stop_epoch || i != P.stop_batch) return VOLT_OK;
    volt_status st = volt_trainer_save_checkpoint(t, P.path);
    return st < 0 ? st : VOLT_STOP;
}
static const volt_callback_ops probe_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "AccProbe",
                                             .on_train_start = pr_train_start, .on_train_epoch_start = pr_epoch_start,
                                             .on_train_batch_end = pr_batch_end };

static volt_loader *make_loader(void) {
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = BS;
    lc.shuffle = false;
    volt_loader *l = NULL;
    CHECK_OK(volt_loader_create(&lc, DS, &l));
    return l;
}

static const int64_t k_epochs[3] = { 2, 0, 1 }, k_factors[3] = { 3, 1, 2 };   /* unsorted on purpose */

/* a trainer with the schedule (n entries; 0: none) and the probe; acc: its own factor */
static volt_trainer *make_trainer(const char *root, int64_t epochs, int n, int64_t acc) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = epochs;
    c.accumulate_grad_batches = acc;
    c.log_every_n_steps = 1;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    if (n) CHECK_OK(volt_add_gradient_accumulation_scheduler(t, k_epochs, k_factors, n));
    CHECK_OK(volt_trainer_add_callback(t, &probe_ops, NULL));
    return t;
}

/* The reference in double: windows of f batches per epoch (the epoch's last window shorter),
 * the mean of (W x + b - y)^2 per batch, grads summed over the window / f, torch's SGD
 * (buf = g at the first step, then 0.5 buf + g; p -= 0.05 buf). */
static int64_t reference(const float *init, const int64_t *factor, int epochs, double *w) {
    double buf[NP] = { 0 }, g[NP];
    for (int i = 0; i < NP; i++) w[i] = init[i];
    int64_t steps = 0;
    for (int e = 0; e < epochs; e++) {
        const int64_t f = factor[e];
        memset(g, 0, sizeof g);
        for (int bi = 0; bi < NB; bi++) {
            const int lo = bi * BS, hi = lo + BS < NS ? lo + BS : NS, nb = hi - lo;
            for (int r = lo; r < hi; r++)
                for (int o = 0; o < IN; o++) {
                    double pred = w[IN * IN + o];
                    for (int k = 0; k < IN; k++) pred += w[o * IN + k] * X[r * IN + k];
                    const double d = 2.0 * (pred - Y[r * IN + o]) / (double)(nb * IN) / (double)f;
                    for (int k = 0; k < IN; k++) g[o * IN + k] += d * X[r * IN + k];
                    g[IN * IN + o] += d;
                }
            if ((bi + 1) % f == 0 || bi + 1 == NB) {
                for (int i = 0; i < NP; i++) {
                    buf[i] = steps == 0 ? g[i] : 0.5 * buf[i] + g[i];
                    w[i] -= 0.05 * buf[i];
                }
                steps++;
                memset(g, 0, sizeof g);
            }
        }
    }
    return steps;
}

static void test_schedule(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/acc_sched", vtest_tmpdir());
    vtest_fresh_dir(root);
    memset(&P, 0, sizeof P);
    P.stop_epoch = -1;
    volt_trainer *t = make_trainer(root, 3, 3, 1);
    volt_loader *l = make_loader();
    regr m = { 0 };
    CHECK_OK(volt_trainer_fit(t, &regr_ops, &m, l, NULL, NULL));
    CHECK(P.factor[0] == 1 && P.factor[1] == 2 && P.factor[2] == 3, "factors by epoch %lld %lld %lld",
          (long long)P.factor[0], (long long)P.factor[1], (long long)P.factor[2]);
    /* 13 batches: 13 windows of 1, 7 of 2 (the last one batch), 5 of 3 (the last one batch) */
    CHECK(volt_trainer_global_step(t) == 13 + 7 + 5, "global_step %lld, want 25", (long long)volt_trainer_global_step(t));
    double ref[NP];
    static const int64_t want_factor[3] = { 1, 2, 3 };
    const int64_t ref_steps = reference(P.init, want_factor, 3, ref);
    CHECK(ref_steps == 25, "the reference took %lld steps", (long long)ref_steps);
    float got[NP];
    params_f32(t, got);
    double worst = 0;
    for (int i = 0; i < NP; i++) {
        const double e = fabs(got[i] - ref[i]) / (1e-6 + fabs(ref[i]));
        if (e > worst) worst = e;
    }
    CHECK(worst < 1e-4, "weights against the double reference: worst relative error %.3g", worst);
    /* the factor is the fit's: after it the trainer's own again (Lightning leaves the last epoch's in
     * trainer.accumulate_grad_batches; a second fit resuming inside an epoch of another factor
     * then failed, test_callback_states) */
    CHECK(volt_trainer_get_config(t)->accumulate_grad_batches == 1, "factor after fit %lld",
          (long long)volt_trainer_get_config(t)->accumulate_grad_batches);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

/* {0: 3} alone is the trainer's accumulate_grad_batches = 3, bit for bit */
static void test_same_as_fixed(void) {
    char root[512];
    snprintf(root, sizeof root, "%s/acc_fixed", vtest_tmpdir());
    vtest_fresh_dir(root);
    memset(&P, 0, sizeof P);
    P.stop_epoch = -1;
    volt_loader *l = make_loader();
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 2;
    volt_trainer *a = NULL, *b = NULL;
    CHECK_OK(volt_trainer_create(&c, &a));
    const int64_t e0 = 0, f3 = 3;
    CHECK_OK(volt_add_gradient_accumulation_scheduler(a, &e0, &f3, 1));
    regr ma = { 0 }, mb = { 0 };
    CHECK_OK(volt_trainer_fit(a, &regr_ops, &ma, l, NULL, NULL));
    c.accumulate_grad_batches = 3;
    CHECK_OK(volt_trainer_create(&c, &b));
    CHECK_OK(volt_trainer_fit(b, &regr_ops, &mb, l, NULL, NULL));
    float wa[NP], wb[NP];
    params_f32(a, wa);
    params_f32(b, wb);
    CHECK(volt_trainer_global_step(a) == 10 && volt_trainer_global_step(b) == 10, "steps %lld / %lld, want 10",
          (long long)volt_trainer_global_step(a), (long long)volt_trainer_global_step(b));
    CHECK(!memcmp(wa, wb, sizeof wa), "schedule {0: 3} differs from accumulate_grad_batches 3");
    volt_trainer_destroy(a);
    volt_trainer_destroy(b);
    volt_loader_destroy(l);
}

/* stopped after batch 5 of epoch 1 (windows of 2: batch 5 ends one), resumed: bitwise the
 * uninterrupted run (epoch 1 keeps windows of 2 though no epoch start runs for it) */
static void test_resume(void) {
    char root[512], path[600];
    snprintf(root, sizeof root, "%s/acc_resume", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(path, sizeof path, "%s/mid.safetensors", root);
    volt_loader *l = make_loader();
    memset(&P, 0, sizeof P);
    P.stop_epoch = -1;
    volt_trainer *a = make_trainer(root, 3, 3, 1);
    regr ma = { 0 };
    CHECK_OK(volt_trainer_fit(a, &regr_ops, &ma, l, NULL, NULL));
    float wa[NP];
    params_f32(a, wa);
    P.stop_epoch = 1;
    P.stop_batch = 5;
    P.path = path;
    volt_trainer *b = make_trainer(root, 3, 3, 1);
    regr mb = { 0 };
    CHECK_OK(volt_trainer_fit(b, &regr_ops, &mb, l, NULL, NULL));
    CHECK(volt_trainer_global_step(b) == 13 + 3, "stopped at step %lld, want 16", (long long)volt_trainer_global_step(b));
    P.stop_epoch = -1;
    volt_trainer *c = make_trainer(root, 3, 3, 1);
    regr mc = { 0 };
    volt_status st = volt_trainer_fit(c, &regr_ops, &mc, l, NULL, path);
    CHECK(st == VOLT_OK, "resume: %s", volt_trainer_errmsg(c));
    float wc[NP];
    params_f32(c, wc);
    CHECK(volt_trainer_global_step(c) == 25, "resumed run ends at step %lld, want 25", (long long)volt_trainer_global_step(c));
    CHECK(!memcmp(wa, wc, sizeof wa), "the resumed run's weights differ from the uninterrupted run's");
    volt_trainer_destroy(a);
    volt_trainer_destroy(b);
    volt_trainer_destroy(c);
    volt_loader_destroy(l);
}

/* set inside a window: STATE, naming it */
static volt_status bad_set(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    if (i != 0) return VOLT_OK;
    return volt_trainer_set_accumulate_grad_batches(t, 4);
}
static const volt_callback_ops bad_set_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "BadSet",
                                               .on_train_batch_end = bad_set };

static void expect_add_err(const int64_t *e, const int64_t *f, int n, int64_t acc, int64_t vci, const char *want) {
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.accumulate_grad_batches = acc;
    c.val_check_interval = vci;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_status st = volt_add_gradient_accumulation_scheduler(t, e, f, n);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), want), "want INVALID_ARG with '%s': %s (%s)", want,
          volt_status_str(st), volt_trainer_errmsg(t));
    CHECK(volt_trainer_num_callbacks(t) == 0, "a refused schedule added a callback");
    volt_trainer_destroy(t);
}

static void test_errors(void) {
    const int64_t e01[2] = { 0, 1 }, e00[2] = { 0, 0 }, en[1] = { -1 }, f12[2] = { 1, 2 }, f0[2] = { 0, 2 }, f3[2] = { 3, 2 };
    expect_add_err(e01, f12, 0, 1, 0, "empty schedule");
    expect_add_err(en, f12, 1, 1, 0, "epochs are 0-based");
    expect_add_err(e01, f0, 2, 1, 0, "factor 0");
    expect_add_err(e00, f12, 2, 1, 0, "epoch 0 is given twice");
    expect_add_err(e01, f12, 2, 2, 0, "accumulate_grad_batches is 2");
    expect_add_err(e01, f3, 2, 1, 4, "factor 3 does not divide val_check_interval (4)");
    /* the setter */
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.val_check_interval = 4;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    CHECK(volt_trainer_set_accumulate_grad_batches(t, 0) == VOLT_ERR_INVALID_ARG, "n = 0 accepted");
    CHECK(volt_trainer_set_accumulate_grad_batches(t, 3) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_trainer_errmsg(t), "val_check_interval (4)"), "3 with val_check_interval 4: %s", volt_trainer_errmsg(t));
    CHECK_OK(volt_trainer_set_accumulate_grad_batches(t, 2));
    CHECK(volt_trainer_get_config(t)->accumulate_grad_batches == 2, "the config does not read the new factor");
    CHECK_OK(volt_trainer_set_accumulate_grad_batches(t, 1));
    /* inside a window: batch 0 of windows of 2 */
    CHECK_OK(volt_trainer_set_accumulate_grad_batches(t, 2));
    CHECK_OK(volt_trainer_add_callback(t, &bad_set_ops, NULL));
    volt_loader *l = make_loader();
    regr m = { 0 };
    volt_status st = volt_trainer_fit(t, &regr_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_ERR_STATE && strstr(volt_trainer_errmsg(t), "inside an accumulation window (batch 1"),
          "set inside a window: %s (%s)", volt_status_str(st), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
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
    vtest_check_accelerator();
    test_schedule();
    test_same_as_fixed();
    test_resume();
    test_errors();
    volt_dataset_destroy(DS);
    return vtest_finish();
}
