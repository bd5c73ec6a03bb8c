/* The README's user module, compiled and run: an MLP on volt/nn.h layers with validation,
 * ModelCheckpoint (best by val_acc + last), resume from "last" and test on "best", on a
 * synthetic 10-class problem with Fashion-MNIST's shapes. The test also checks that the
 * module code between the markers is at most 30 lines and that README.md shows it verbatim. */
#include "vtest.h"
#include <volt/volt.h>

#ifndef VOLT_README
#define VOLT_README "README.md"
#endif

/* ---- README module begin ---- */
typedef struct { volt_nn_linear fc1, fc2, fc3; } mlp;                 /* layers from volt/nn.h */
static volt_status mlp_setup(void *self, volt_params *ps) {       /* declare, don't allocate */
    mlp *m = self;                                                  /* fc1.weight, fc1.bias: unit fc1 */
    VOLT_TRY(volt_nn_linear_declare(ps, "fc1", 784, 256, &m->fc1));
    VOLT_TRY(volt_nn_linear_declare(ps, "fc2", 256, 128, &m->fc2));
    return volt_nn_linear_declare(ps, "fc3", 128, 10, &m->fc3);
}
static volt_status mlp_step(mlp *m, volt_step *s, const volt_batch *b, const char *stage) {
    volt_tensor *h = volt_relu(s, volt_nn_linear_forward(s, &m->fc1, volt_batch_x(b)));
    h = volt_dropout(s, volt_relu(s, volt_nn_linear_forward(s, &m->fc2, h)), 0.2f);
    return volt_classification_step(s, volt_nn_linear_forward(s, &m->fc3, h), volt_batch_y(b), stage);
}
static volt_status mlp_training_step(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    return mlp_step(self, s, b, "train");              /* logs train_loss/acc and sets the loss */
}
static volt_status mlp_validation_step(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    return mlp_step(self, s, b, "val");
}
static volt_status mlp_test_step(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    return mlp_step(self, s, b, "test");
}
static volt_status mlp_configure_optimizers(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_ADAMW;                          /* lr 1e-3 by default */
    return VOLT_OK;
}
static const volt_module_ops mlp_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "mlp", .setup = mlp_setup,
    .configure_optimizers = mlp_configure_optimizers, .training_step = mlp_training_step,
    .validation_step = mlp_validation_step, .test_step = mlp_test_step,
};
/* ---- README module end ---- */

/* n samples of class prototypes (random ±1 patterns over 784 pixels) plus noise. */
static volt_loader *synthetic(int64_t n, uint64_t seed, bool shuffle, volt_dataset **ds) {
    float *x = malloc(sizeof(float) * (size_t)(n * 784));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
    uint64_t st = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < n; i++) {
        y[i] = (int32_t)(i % 10);
        uint64_t r = seed * 7919 + (uint64_t)i * 104729;
        for (int j = 0; j < 784; j++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull + r;
            uint64_t h = (uint64_t)y[i] * 1000003u + (uint64_t)j;          /* the prototype: splitmix64 */
            h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
            h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
            h ^= h >> 31;
            x[i * 784 + j] = (h & 1 ? 0.5f : -0.5f) + (float)((double)(st >> 11) / 9007199254740992.0 - 0.5) * 2.f;
        }
    }
    volt_field fields[2] = { { "x", VOLT_F32, VOLT_SHAPE(784) }, { "y", VOLT_I32, VOLT_SCALAR } };
    const void *data[2] = { x, y };
    CHECK_OK(volt_dataset_from_arrays(2, fields, data, n, ds));
    free(x);
    free(y);
    return vtest_loader(*ds, 32, shuffle);
}

static bool exists(const char *path) { struct stat sb; return stat(path, &sb) == 0; }

/* The module code as the README must show it: the lines between the markers. */
static void test_readme_matches(void) {
    FILE *src = fopen(__FILE__, "r"), *rd = fopen(VOLT_README, "r");
    CHECK(src && rd, "open %s and %s", __FILE__, VOLT_README);
    if (!src || !rd) { if (src) fclose(src); if (rd) fclose(rd); return; }
    static char readme[1 << 16];
    size_t n = fread(readme, 1, sizeof readme - 1, rd);
    readme[n] = 0;
    char line[512];
    int in = 0, lines = 0, missing = 0;
    const char *at = readme;
    while (fgets(line, sizeof line, src)) {
        if (strstr(line, "---- README module begin")) { in = 1; continue; }
        if (strstr(line, "---- README module end")) break;
        if (!in) continue;
        lines++;
        const char *hit = strstr(at, line);                  /* in order, whole line with its newline */
        if (!hit) { if (missing++ < 3) fprintf(stderr, "README lacks: %s", line); continue; }
        at = hit + strlen(line);
    }
    fclose(src);
    fclose(rd);
    CHECK(lines > 10 && lines <= 30, "the README module is %d lines (at most 30)", lines);
    CHECK(missing == 0, "%d module lines are not in README.md (in order)", missing);
    printf("README module: %d lines\n", lines);
}

int main(void) {
    test_readme_matches();
    char root[512], best[1024], last[1024];
    snprintf(root, sizeof root, "%s/run", vtest_tmpdir());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) VTEST_SKIP("cannot clear the run folder");
    volt_dataset *dtr, *dva, *dte;
    volt_loader *train = synthetic(640, 1, true, &dtr), *val = synthetic(160, 2, false, &dva),
                *test = synthetic(160, 3, false, &dte);

    volt_trainer_config cfg;
    volt_trainer_config_init(&cfg);
    cfg.max_epochs = 2;
    cfg.default_root_dir = root;
    cfg.enable_progress_bar = false;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&cfg, &t));
    volt_checkpoint_config ck;
    volt_checkpoint_config_init(&ck);
    ck.monitor = "val_acc";
    ck.mode = VOLT_MAX;
    ck.save_last = true;
    CHECK_OK(volt_add_model_checkpoint(t, &ck));
    mlp model;
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &model, train, val, "last"));
    double acc = 0;
    CHECK(volt_trainer_metric(t, "val_acc", &acc) && acc > 0.9, "val_acc after 2 epochs %.3f", acc);
    snprintf(best, sizeof best, "%s", volt_trainer_best_model_path(t) ? volt_trainer_best_model_path(t) : "");
    CHECK(*best && exists(best), "best checkpoint '%s'", best);
    volt_trainer_destroy(t);

    /* a new trainer resumes from last (epoch 2 of 3) and tests the best weights */
    cfg.max_epochs = 3;
    CHECK_OK(volt_trainer_create(&cfg, &t));
    CHECK_OK(volt_add_model_checkpoint(t, &ck));
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &model, train, val, "last"));
    snprintf(last, sizeof last, "%s", volt_trainer_best_model_path(t) ? volt_trainer_best_model_path(t) : "");
    CHECK(*last && exists(last), "best after resume '%s'", last);
    CHECK_OK(volt_trainer_test(t, &mlp_ops, &model, test, "best"));
    CHECK(volt_trainer_metric(t, "test_acc", &acc) && acc > 0.9, "test_acc %.3f", acc);
    printf("readme mlp: test_acc %.3f (best %s)\n", acc, last);
    volt_trainer_destroy(t);
    volt_loader_destroy(train);
    volt_loader_destroy(val);
    volt_loader_destroy(test);
    volt_dataset_destroy(dtr);
    volt_dataset_destroy(dva);
    volt_dataset_destroy(dte);
    return vtest_finish();
}
