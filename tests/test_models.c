/* Built-in models (models/): parameter names, counts and init bounds; forward shapes;
 * overfitting a fixed batch; the step hooks; a short trainer run on synthetic data. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/core.h"
#include "volt/ops.h"
#include "volt/params.h"
#include "volt/optim.h"
#include "volt/data.h"
#include "volt/trainer.h"
#include "volt/models.h"
#include "vtest.h"

typedef volt_tensor *(*forward_fn)(void *self, volt_step *s, volt_tensor *x);

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) {                    /* U(-1, 1), a fixed LCG stream */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.f;
}

/* A finalized store with the module's parameters, and a step on it. */
static bool build(const volt_module_ops *ops, void *m, volt_params **ps, volt_step **s) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.seed = 7;
    *ps = NULL; *s = NULL;
    if (volt_params_create(&pc, ps) != VOLT_OK) return false;
    volt_status st = ops->setup(m, *ps);
    CHECK(st == VOLT_OK, "%s setup: %s (%s)", ops->name, volt_status_str(st), volt_params_errmsg(*ps));
    CHECK_OK(volt_params_finalize(*ps));
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = *ps;
    sc.seed = 3;
    CHECK_OK(volt_step_create(&sc, s));
    return st == VOLT_OK && *s;
}

typedef struct expect_param { const char *name; volt_shape shape; float bound; } expect_param;

static void check_params(const char *model, volt_params *ps, const expect_param *ex, int n, int64_t numel,
                         const char *const *units, int n_units) {
    CHECK(volt_params_count(ps) == n, "%s: %d params, want %d", model, volt_params_count(ps), n);
    CHECK(volt_params_numel(ps) == numel, "%s: %lld weights, want %lld", model,
          (long long)volt_params_numel(ps), (long long)numel);
    CHECK(volt_params_unit_count(ps) == n_units, "%s: %d units, want %d", model, volt_params_unit_count(ps), n_units);
    for (int u = 0; u < n_units && u < volt_params_unit_count(ps); u++)
        CHECK(!strcmp(volt_unit_name(volt_params_unit_at(ps, u)), units[u]), "%s: unit %d is '%s', want '%s'", model,
              u, volt_unit_name(volt_params_unit_at(ps, u)), units[u]);
    for (int i = 0; i < n && i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        char a[64], b[64];
        CHECK(!strcmp(p->name, ex[i].name), "%s: param %d is '%s', want '%s'", model, i, p->name, ex[i].name);
        CHECK(volt_shape_eq(p->shape, ex[i].shape), "%s: %s shape %s, want %s", model, ex[i].name,
              volt_shape_str(p->shape, a, sizeof a), volt_shape_str(ex[i].shape, b, sizeof b));
        /* nn.Linear / nn.Conv2d default init: everything within ±1/sqrt(fan_in), not all zero */
        float mx = 0.f;
        float *d = malloc(volt_tensor_bytes(p));   /* parameters are device memory: read a copy */
        CHECK_OK(volt_tensor_to_host(p, d));
        for (int64_t k = 0; k < volt_tensor_numel(p); k++) mx = fmaxf(mx, fabsf(d[k]));
        free(d);
        CHECK(mx <= ex[i].bound * 1.0001f && mx > 0.5f * ex[i].bound, "%s: %s max |value| %g, bound %g", model,
              ex[i].name, mx, ex[i].bound);
    }
}

static void test_mlp_params(void) {
    volt_mlp_config mc;
    volt_mlp_config_init(&mc);
    void *m;
    CHECK_OK(volt_mlp_create(&mc, &m));
    volt_params *ps; volt_step *s;
    if (build(&volt_mlp_ops, m, &ps, &s)) {
        float b1 = 1.f / sqrtf(784.f), b2 = 1.f / sqrtf(256.f), b3 = 1.f / sqrtf(128.f);
        const expect_param ex[] = {
            { "fc1.weight", VOLT_SHAPE(256, 784), b1 }, { "fc1.bias", VOLT_SHAPE(256), b1 },
            { "fc2.weight", VOLT_SHAPE(128, 256), b2 }, { "fc2.bias", VOLT_SHAPE(128), b2 },
            { "fc3.weight", VOLT_SHAPE(10, 128), b3 },  { "fc3.bias", VOLT_SHAPE(10), b3 },
        };
        const char *units[] = { "fc1", "fc2", "fc3" };
        check_params("mlp", ps, ex, 6, 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10, units, 3);
    }
    volt_step_destroy(s); volt_params_destroy(ps); volt_mlp_destroy(m);

    /* configs that must be refused */
    volt_mlp_config bad = mc;
    bad.n_hidden = VOLT_MLP_MAX_HIDDEN + 1;
    CHECK(volt_mlp_create(&bad, &m) == VOLT_ERR_INVALID_ARG && m == NULL, "n_hidden too large accepted");
    bad = mc; bad.dropout = 1.f;
    CHECK(volt_mlp_create(&bad, &m) == VOLT_ERR_INVALID_ARG, "dropout 1 accepted");
    bad = mc; bad.hidden[1] = 0;
    CHECK(volt_mlp_create(&bad, &m) == VOLT_ERR_INVALID_ARG, "zero width accepted");
    bad = mc; bad.version = 99;
    CHECK(volt_mlp_create(&bad, &m) == VOLT_ERR_VERSION, "bad version accepted");
    volt_mlp_destroy(NULL);

    /* no hidden layer: plain logistic regression, one unit "fc1" */
    volt_mlp_config lin = mc;
    lin.n_hidden = 0;
    CHECK_OK(volt_mlp_create(&lin, &m));
    if (build(&volt_mlp_ops, m, &ps, &s)) {
        CHECK(volt_params_count(ps) == 2 && volt_params_find(ps, "fc1.weight") &&
              volt_shape_eq(volt_params_find(ps, "fc1.weight")->shape, VOLT_SHAPE(10, 784)), "n_hidden 0 layout");
    }
    volt_step_destroy(s); volt_params_destroy(ps); volt_mlp_destroy(m);
}

static void test_cnn_params(void) {
    volt_cnn_config cc;
    volt_cnn_config_init(&cc);
    void *m;
    CHECK_OK(volt_cnn_create(&cc, &m));
    volt_params *ps; volt_step *s;
    if (build(&volt_cnn_ops, m, &ps, &s)) {
        float b1 = 1.f / 3.f, b2 = 1.f / sqrtf(32.f * 9.f), b3 = 1.f / sqrtf(3136.f), b4 = 1.f / sqrtf(128.f);
        const expect_param ex[] = {
            { "conv1.weight", VOLT_SHAPE(32, 1, 3, 3), b1 },  { "conv1.bias", VOLT_SHAPE(32), b1 },
            { "conv2.weight", VOLT_SHAPE(64, 32, 3, 3), b2 }, { "conv2.bias", VOLT_SHAPE(64), b2 },
            { "fc1.weight", VOLT_SHAPE(128, 3136), b3 },      { "fc1.bias", VOLT_SHAPE(128), b3 },
            { "fc2.weight", VOLT_SHAPE(10, 128), b4 },        { "fc2.bias", VOLT_SHAPE(10), b4 },
        };
        const char *units[] = { "conv1", "conv2", "fc1", "fc2" };
        check_params("cnn", ps, ex, 8, 320 + 18496 + 401536 + 1290, units, 4);
    }
    volt_step_destroy(s); volt_params_destroy(ps); volt_cnn_destroy(m);
    volt_cnn_config bad = cc;
    bad.height = 3;
    CHECK(volt_cnn_create(&bad, &m) == VOLT_ERR_INVALID_ARG && m == NULL, "3-pixel image accepted");
    bad = cc;   /* fc1's input count overflows: refused, not wrapped */
    bad.conv2_channels = (int64_t)1 << 40;
    bad.height = bad.width = (int64_t)1 << 30;
    CHECK(volt_cnn_create(&bad, &m) == VOLT_ERR_INVALID_ARG && m == NULL, "overflowing fc1 inputs accepted");
    volt_cnn_destroy(NULL);
}

/* A forward on a random batch gives (B, classes) logits in both step modes, and the
 * module's own steps run (volt_log is a no-op without a trainer). */
static void check_forward(const char *model, const volt_module_ops *ops, void *m, forward_fn fwd,
                          int64_t in, int64_t classes) {
    enum { B = 5 };
    volt_params *ps; volt_step *s;
    if (!build(ops, m, &ps, &s)) { volt_step_destroy(s); volt_params_destroy(ps); return; }
    static float X[B * 3 * 32 * 32];
    int64_t Y[B];
    for (int64_t i = 0; i < B * in; i++) X[i] = frand();
    for (int i = 0; i < B; i++) Y[i] = i % classes;
    for (int training = 0; training < 2; training++) {
        volt_step_begin(s, training, 0);
        volt_tensor *x = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, in), X);
        volt_tensor *logits = fwd(m, s, x);
        char buf[64];
        CHECK(logits && volt_shape_eq(logits->shape, VOLT_SHAPE(B, classes)), "%s forward (training %d): %s %s",
              model, training, logits ? volt_shape_str(logits->shape, buf, sizeof buf) : "NULL", volt_step_errmsg(s));
        volt_step_end(s);
    }
    /* the vtable's steps on a hand-made batch */
    volt_batch b;
    memset(&b, 0, sizeof b);
    b.size = B;
    b.n_fields = 2;
    b.names[0] = "x"; b.names[1] = "y";
    b.fields[0] = (volt_tensor){ .dtype = VOLT_F32, .shape = VOLT_SHAPE(B, in), .node = -1, .data = X };
    b.fields[1] = (volt_tensor){ .dtype = VOLT_I64, .shape = VOLT_SHAPE(B), .node = -1, .data = Y };
    volt_step_begin(s, true, 1);
    volt_status st = ops->training_step(m, s, &b, 0);
    CHECK(st == VOLT_OK, "%s training_step: %s %s", model, volt_status_str(st), volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, false, 0);
    st = ops->validation_step(m, s, &b, 0);
    CHECK(st == VOLT_OK, "%s validation_step: %s %s", model, volt_status_str(st), volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, false, 0);
    st = ops->test_step(m, s, &b, 0);
    CHECK(st == VOLT_OK, "%s test_step: %s %s", model, volt_status_str(st), volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, false, 0);
    volt_tensor *pred = NULL;
    st = ops->predict_step(m, s, &b, 0, &pred);
    CHECK(st == VOLT_OK && pred && volt_shape_eq(pred->shape, VOLT_SHAPE(B, classes)), "%s predict_step: %s %s",
          model, volt_status_str(st), volt_step_errmsg(s));
    volt_step_end(s);
    /* a batch without "y" is an error naming the field, not a crash */
    b.n_fields = 1;
    volt_step_begin(s, false, 0);
    st = ops->validation_step(m, s, &b, 0);
    char want[96];
    snprintf(want, sizeof want, "%s: batch has no field 'y'", ops->name);
    CHECK(st == VOLT_ERR_NOT_FOUND && !strcmp(volt_step_errmsg(s), want), "%s missing field: %s '%s'", model,
          volt_status_str(st), volt_step_errmsg(s));
    volt_step_end(s);
    /* predict needs "x" only: a batch with "y" alone names "x" */
    b.names[0] = "y";
    b.fields[0] = b.fields[1];
    volt_step_begin(s, false, 0);
    pred = NULL;
    st = ops->predict_step(m, s, &b, 0, &pred);
    snprintf(want, sizeof want, "%s: batch has no field 'x'", ops->name);
    CHECK(st == VOLT_ERR_NOT_FOUND && !pred && !strcmp(volt_step_errmsg(s), want), "%s predict, missing field: %s '%s'",
          model, volt_status_str(st), volt_step_errmsg(s));
    volt_step_end(s);
    /* configure_optimizers follows the config (Adam, lr 1e-3 by default) */
    volt_optim_setup os;
    memset(&os, 0, sizeof os);
    volt_optimizer_config_init(&os.optimizer);
    os.optimizer.kind = VOLT_OPTIM_SGD;
    CHECK_OK(ops->configure_optimizers(m, &os));
    CHECK(os.optimizer.kind == VOLT_OPTIM_ADAM && os.optimizer.lr == 1e-3f && !os.use_scheduler,
          "%s optimizer kind %d lr %g", model, (int)os.optimizer.kind, os.optimizer.lr);
    volt_step_destroy(s); volt_params_destroy(ps);
}

static void test_forward(void) {
    volt_mlp_config mc; volt_mlp_config_init(&mc);
    void *m;
    CHECK_OK(volt_mlp_create(&mc, &m));
    check_forward("mlp", &volt_mlp_ops, m, volt_mlp_forward, 784, 10);
    volt_mlp_destroy(m);

    volt_cnn_config cc; volt_cnn_config_init(&cc);
    CHECK_OK(volt_cnn_create(&cc, &m));
    check_forward("cnn", &volt_cnn_ops, m, volt_cnn_forward, 784, 10);
    volt_cnn_destroy(m);

    /* configurable geometry: 3-channel 32x32 images, odd widths, 5 classes */
    volt_cnn_config_init(&cc);
    cc.in_channels = 3; cc.height = 32; cc.width = 30; cc.conv1_channels = 5; cc.conv2_channels = 7;
    cc.hidden = 11; cc.out_features = 5;
    CHECK_OK(volt_cnn_create(&cc, &m));
    check_forward("cnn 3x32x30", &volt_cnn_ops, m, volt_cnn_forward, 3 * 32 * 30, 5);
    volt_cnn_destroy(m);
}

/* Overfit 16 random samples with Adam through volt_step: loss falls, accuracy > 90%. */
static void check_overfit(const char *model, const volt_module_ops *ops, void *m, forward_fn fwd, int steps) {
    enum { N = 16, IN = 784 };
    volt_params *ps; volt_step *s;
    if (!build(ops, m, &ps, &s)) { volt_step_destroy(s); volt_params_destroy(ps); return; }
    static float X[N * IN];
    int64_t Y[N];
    for (int i = 0; i < N * IN; i++) X[i] = frand();
    for (int i = 0; i < N; i++) Y[i] = (i * 7) % 10;
    volt_optim_setup os;
    memset(&os, 0, sizeof os);
    volt_optimizer_config_init(&os.optimizer);
    CHECK_OK(ops->configure_optimizers(m, &os));
    volt_optimizer *opt = NULL;
    CHECK_OK(volt_optimizer_create(&os.optimizer, ps, &opt));
    double first = NAN, last = NAN;
    for (int it = 0; it < steps && opt; it++) {
        volt_step_begin(s, true, (uint64_t)it);
        volt_tensor *loss = volt_cross_entropy(s, fwd(m, s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N, IN), X)),
                                               volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(N), Y));
        volt_status st = volt_step_backward(s, loss);
        if (st != VOLT_OK) { CHECK(0, "%s backward: %s", model, volt_step_errmsg(s)); volt_step_end(s); break; }
        last = volt_tensor_item(loss);
        if (it == 0) first = last;
        volt_step_end(s);
        CHECK_OK(volt_optimizer_step(opt));
        volt_params_zero_grad(ps);
    }
    volt_step_begin(s, false, 0);
    volt_tensor *acc = volt_accuracy(s, fwd(m, s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N, IN), X)),
                                     volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(N), Y));
    double a = acc ? volt_tensor_item(acc) : 0.0;
    volt_step_end(s);
    CHECK(last < 0.5 * first, "%s: loss %.4f -> %.4f after %d steps", model, first, last, steps);
    CHECK(a > 0.9, "%s: accuracy %.3f on the 16 samples it trained on", model, a);
    printf("%s overfit: loss %.4f -> %.4f in %d Adam steps, accuracy %.3f\n", model, first, last, steps, a);
    volt_optimizer_destroy(opt); volt_step_destroy(s); volt_params_destroy(ps);
}

static void test_overfit(void) {
    volt_mlp_config mc; volt_mlp_config_init(&mc);
    void *m;
    CHECK_OK(volt_mlp_create(&mc, &m));
    check_overfit("mlp", &volt_mlp_ops, m, volt_mlp_forward, 30);
    volt_mlp_destroy(m);
    volt_cnn_config cc; volt_cnn_config_init(&cc);
    CHECK_OK(volt_cnn_create(&cc, &m));
    check_overfit("cnn", &volt_cnn_ops, m, volt_cnn_forward, 30);
    volt_cnn_destroy(m);
}

/* A short trainer run on a synthetic, linearly separable 10-class set: the module's
 * metrics reach the trainer and the model learns. */
static void check_trainer(const char *model, const volt_module_ops *ops, void *m, int64_t epochs, double min_acc) {
    enum { N = 320, NV = 80, IN = 784, C = 10 };
    static float X[(N + NV) * IN];
    static int64_t Y[N + NV];
    for (int i = 0; i < N + NV; i++) {
        Y[i] = (i * 3) % C;
        for (int k = 0; k < IN; k++)   /* class c lights up pixels [78c, 78c+78) */
            X[(size_t)i * IN + k] = 0.5f * frand() + (k / 78 == Y[i] ? 1.f : 0.f);
    }
    const volt_field fields[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *tr[2] = { X, Y }, *va[2] = { X + (size_t)N * IN, Y + N };
    volt_dataset *dtr = NULL, *dva = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, fields, tr, N, &dtr));
    CHECK_OK(volt_dataset_from_arrays(2, fields, va, NV, &dva));
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = 32;
    volt_loader *lva = NULL, *ltr = NULL;
    CHECK_OK(volt_loader_create(&lc, dva, &lva));
    lc.shuffle = true;
    lc.seed = 1;
    CHECK_OK(volt_loader_create(&lc, dtr, &ltr));
    volt_trainer_config tc;
    volt_trainer_config_init(&tc);
    tc.max_epochs = epochs;
    tc.enable_progress_bar = false;
    tc.enable_checkpointing = false;
    tc.enable_logger = false;
    tc.default_root_dir = vtest_tmpdir();
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&tc, &t));
    if (t && ltr && lva) {
        volt_status st = volt_trainer_fit(t, ops, m, ltr, lva, NULL);
        CHECK(st == VOLT_OK, "%s fit: %s %s", model, volt_status_str(st), volt_trainer_errmsg(t));
        double v = NAN, l = NAN, tl = NAN;
        CHECK(volt_trainer_metric(t, "val_acc", &v), "%s: val_acc was not logged", model);
        CHECK(volt_trainer_metric(t, "val_loss", &l), "%s: val_loss was not logged", model);
        CHECK(volt_trainer_metric(t, "train_loss", &tl), "%s: train_loss was not logged", model);
        CHECK(v >= min_acc, "%s: val_acc %.3f after %lld epochs, want >= %.2f", model, v, (long long)epochs, min_acc);
        CHECK(volt_trainer_global_step(t) == epochs * (N / 32), "%s: global_step %lld", model,
              (long long)volt_trainer_global_step(t));
        st = volt_trainer_test(t, ops, m, lva, NULL);
        double ta = NAN;
        CHECK(st == VOLT_OK && volt_trainer_metric(t, "test_acc", &ta) && ta == v,
              "%s test: %s, test_acc %.4f vs val_acc %.4f %s", model, volt_status_str(st), ta, v, volt_trainer_errmsg(t));
        printf("%s trainer: %lld epochs, train_loss %.4f, val_loss %.4f, val_acc %.3f, test_acc %.3f\n", model,
               (long long)epochs, tl, l, v, ta);
    }
    volt_trainer_destroy(t);
    volt_loader_destroy(ltr); volt_loader_destroy(lva);
    volt_dataset_destroy(dtr); volt_dataset_destroy(dva);
}

static void test_trainer(void) {
    volt_mlp_config mc; volt_mlp_config_init(&mc);
    void *m;
    CHECK_OK(volt_mlp_create(&mc, &m));
    check_trainer("mlp", &volt_mlp_ops, m, 2, 0.95);
    volt_mlp_destroy(m);
    volt_cnn_config cc; volt_cnn_config_init(&cc);
    cc.conv1_channels = 4; cc.conv2_channels = 8; cc.hidden = 32; cc.lr = 3e-3f;   /* keep the test quick */
    CHECK_OK(volt_cnn_create(&cc, &m));
    check_trainer("cnn", &volt_cnn_ops, m, 3, 0.9);
    volt_cnn_destroy(m);
}

int main(void) {
    vtest_check_accelerator();
    test_mlp_params();
    test_cnn_params();
    test_forward();
    test_overfit();
    test_trainer();
    return vtest_finish();
}
