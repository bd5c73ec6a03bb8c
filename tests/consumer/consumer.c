/* An out-of-tree program built against an installed volt (tests/consumer/run.sh builds it
 * with find_package, pkg-config shared and static, and add_subdirectory): its own module
 * table, a fit with ModelCheckpoint on val_acc, a test on "best". Prints the result and
 * exits non-zero on any failure, including a header/library version mismatch. */
#include <stdio.h>
#include <string.h>
#include <volt/volt.h>

typedef struct { volt_tensor *w1, *b1, *w2, *b2; } net;

static volt_status net_setup(void *self, volt_params *ps) {
    net *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(16, 2), VOLT_INIT_TORCH_LINEAR, &m->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(16), VOLT_INIT_ZEROS, &m->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(2, 16), VOLT_INIT_TORCH_LINEAR, &m->w2));
    return volt_param_new(ps, "fc2.bias", VOLT_SHAPE(2), VOLT_INIT_ZEROS, &m->b2);
}
static volt_status net_step(net *m, volt_step *s, const volt_batch *b, const char *stage) {
    volt_tensor *h = volt_relu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1));
    return volt_classification_step(s, volt_linear(s, h, m->w2, m->b2), volt_batch_y(b), stage);
}
static volt_status net_train(void *self, volt_step *s, const volt_batch *b, int64_t i) { return net_step(self, s, b, "train"); }
static volt_status net_val(void *self, volt_step *s, const volt_batch *b, int64_t i) { return net_step(self, s, b, "val"); }
static volt_status net_test(void *self, volt_step *s, const volt_batch *b, int64_t i) { return net_step(self, s, b, "test"); }
static volt_status net_optim(void *self, volt_optim_setup *out) {
    out->optimizer.kind = VOLT_OPTIM_ADAM;
    out->optimizer.lr = 0.05f;
    return VOLT_OK;
}
static const volt_module_ops net_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "consumer-net", .setup = net_setup,
    .configure_optimizers = net_optim, .training_step = net_train,
    .validation_step = net_val, .test_step = net_test,
};

/* Two interleaved half-moons, made up here: label = which side of a wavy line. */
static volt_status make_loader(int n, unsigned seed, bool shuffle, volt_loader **out) {
    static float x[2 * 512];
    static int64_t y[512];
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u; float a = (float)((seed >> 8) & 0xffff) / 65536.f * 4.f - 2.f;
        seed = seed * 1103515245u + 12345u; float c = (float)((seed >> 8) & 0xffff) / 65536.f * 4.f - 2.f;
        x[2 * i] = a; x[2 * i + 1] = c;
        y[i] = c > 0.5f * a * a - 1.f;
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(2) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *data[2] = { x, y };
    volt_dataset *ds;
    VOLT_TRY(volt_dataset_from_arrays(2, f, data, n, &ds));
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = 32;
    lc.shuffle = shuffle;
    return volt_loader_create(&lc, ds, out);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s RUN_DIR\n", argv[0]); return 2; }
    if (strcmp(volt_version(), VOLT_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: headers say %s, library is %s\n", VOLT_VERSION_STRING, volt_version());
        return 1;
    }
    volt_loader *train, *val, *test;
    if (make_loader(512, 1, true, &train) < 0 || make_loader(256, 2, false, &val) < 0 ||
        make_loader(256, 3, false, &test) < 0) { fprintf(stderr, "consumer: loaders\n"); return 1; }
    volt_trainer_config cfg;
    volt_trainer_config_init(&cfg);
    cfg.max_epochs = 4;
    cfg.seed = 7;
    cfg.default_root_dir = argv[1];
    cfg.enable_progress_bar = false;
    volt_trainer *t;
    if (volt_trainer_create(&cfg, &t) < 0) { fprintf(stderr, "consumer: trainer\n"); return 1; }
    volt_checkpoint_config ck;
    volt_checkpoint_config_init(&ck);
    ck.monitor = "val_acc";
    ck.mode = VOLT_MAX;
    net m = { 0 };
    volt_status st = volt_add_model_checkpoint(t, &ck);
    if (st >= 0) st = volt_trainer_fit(t, &net_ops, &m, train, val, NULL);
    if (st >= 0) st = volt_trainer_test(t, &net_ops, &m, test, "best");
    double acc = 0;
    if (st < 0 || !volt_trainer_metric(t, "test_acc", &acc)) {
        fprintf(stderr, "consumer: %s: %s\n", volt_status_str(st), volt_trainer_errmsg(t));
        return 1;
    }
    printf("consumer: volt %s, best %s, test_acc %.4f\n", volt_version(), volt_trainer_best_model_path(t), acc);
    volt_trainer_destroy(t);
    volt_loader_destroy(train);
    volt_loader_destroy(val);
    volt_loader_destroy(test);
    return acc > 0.9 ? 0 : 1;
}
