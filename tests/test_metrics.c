/* Classification metrics as integer counts (issue 14, item 7): the same predictions over
 * the same rows give bitwise-equal val_acc however the rows are batched (per-batch f32 means
 * weighted by batch size did not), the confusion matrix adds up, and precision / recall /
 * F1 match hand-computed values. */
#include "vtest.h"
#include "volt/trainer.h"
#include "volt/models.h"

#define N 480
#define IN 8
#define C 3

static volt_dataset *make_ds(void) {
    static float x[N * IN];
    static int32_t y[N];
    uint32_t s = 12345;
    for (int i = 0; i < N * IN; i++) { s = s * 1664525u + 1013904223u; x[i] = (float)((s >> 8) & 0xffff) / 65536.f - 0.5f; }
    for (int i = 0; i < N; i++) { s = s * 1664525u + 1013904223u; y[i] = (int32_t)((s >> 16) % C); }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I32, VOLT_SCALAR } };
    const void *data[2] = { x, y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, data, N, &ds));
    return ds;
}

/* validate the (untrained, seeded) MLP with batch size bs under a strategy; returns val_acc,
 * fills the matrix */
static double val_acc_strategy(volt_dataset *ds, int64_t bs, int64_t cm[C * C], double *f1, const char *strategy) {
    volt_mlp_config mc;
    volt_mlp_config_init(&mc);
    mc.in_features = IN;
    mc.n_hidden = 1;
    mc.hidden[0] = 16;
    mc.out_features = C;
    void *m = NULL;
    CHECK_OK(volt_mlp_create(&mc, &m));
    volt_trainer_config tc;
    volt_trainer_config_init(&tc);
    tc.enable_logger = false;
    tc.enable_progress_bar = false;
    tc.enable_checkpointing = false;
    tc.seed = 7;
    tc.strategy = strategy;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&tc, &t));
    volt_loader *l = vtest_loader(ds, bs, false);
    CHECK_OK(volt_trainer_validate(t, &volt_mlp_ops, m, l, NULL));
    double acc = -1;
    CHECK(volt_trainer_metric(t, "val_acc", &acc), "no val_acc");
    CHECK(volt_trainer_metric(t, "val_f1", f1), "no val_f1");
    int nc = 0;
    const int64_t *counts = NULL;
    CHECK(volt_trainer_confusion_matrix(t, "val", &nc, &counts) && nc == C, "no %dx%d confusion matrix", C, C);
    if (counts && nc == C) memcpy(cm, counts, sizeof(int64_t) * C * C);
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
    volt_mlp_destroy(m);
    return acc;
}

static double val_acc_with(volt_dataset *ds, int64_t bs, int64_t cm[C * C], double *f1) {
    return val_acc_strategy(ds, bs, cm, f1, "single");
}

/* Under mpirun -np 2 (tests/cli.cmake): ddp, where each rank validates half the rows in
 * batches of 7, gives bitwise the single-process val_acc, F1 and confusion matrix. */
static int run_dist(const char *strategy) {
    volt_dataset *ds = make_ds();
    int64_t cm1[C * C] = { 0 }, cm2[C * C] = { 0 };
    double f1a = -1, f1b = -2;
    double a = val_acc_with(ds, 13, cm1, &f1a);
    double b = val_acc_strategy(ds, 7, cm2, &f1b, strategy);
    CHECK(a == b, "%s val_acc %.17g != single %.17g", strategy, b, a);
    CHECK(f1a == f1b, "%s val_f1 %.17g != single %.17g", strategy, f1b, f1a);
    CHECK(!memcmp(cm1, cm2, sizeof cm1), "%s confusion matrix differs from single's", strategy);
    volt_dataset_destroy(ds);
    return vtest_finish();
}

int main(int argc, char **argv) {
    if (argc > 1) return run_dist(argv[1]);
    volt_dataset *ds = make_ds();
    static const int64_t sizes[] = { 480, 7, 16, 13 };
    double acc0 = 0, f10 = 0;
    int64_t cm0[C * C];
    for (int k = 0; k < 4; k++) {
        int64_t cm[C * C] = { 0 };
        double f1 = -1;
        double acc = val_acc_with(ds, sizes[k], cm, &f1);
        int64_t total = 0, hits = 0;
        for (int i = 0; i < C; i++)
            for (int j = 0; j < C; j++) { total += cm[i * C + j]; hits += i == j ? cm[i * C + j] : 0; }
        CHECK(total == N, "batch %lld: confusion matrix counts %lld rows, want %d", (long long)sizes[k], (long long)total, N);
        /* the exact ratio of the counts, the same double whatever the batching */
        CHECK(acc == (double)hits / (double)N, "batch %lld: val_acc %.17g != %lld/%d = %.17g", (long long)sizes[k], acc,
              (long long)hits, N, (double)hits / N);
        if (k == 0) { acc0 = acc; f10 = f1; memcpy(cm0, cm, sizeof cm0); }
        else {
            CHECK(acc == acc0, "batch %lld: val_acc %.17g differs from batch 480's %.17g", (long long)sizes[k], acc, acc0);
            CHECK(f1 == f10, "batch %lld: val_f1 %.17g differs from %.17g", (long long)sizes[k], f1, f10);
            CHECK(!memcmp(cm, cm0, sizeof cm0), "batch %lld: confusion matrix differs", (long long)sizes[k]);
        }
    }
    /* scores of a known matrix: rows = true class, columns = predicted */
    const int64_t m[9] = { 5, 1, 0,
                           2, 3, 1,
                           0, 0, 4 };
    volt_class_scores sc;
    volt_confusion_scores(3, m, &sc);
    CHECK(sc.total == 16 && sc.correct == 12, "total %lld correct %lld", (long long)sc.total, (long long)sc.correct);
    double p0 = 5.0 / 7, p1 = 3.0 / 4, p2 = 4.0 / 5, r0 = 5.0 / 6, r1 = 3.0 / 6, r2 = 1.0;
    CHECK_CLOSE(sc.precision, (p0 + p1 + p2) / 3, 1e-15, 0);
    CHECK_CLOSE(sc.recall, (r0 + r1 + r2) / 3, 1e-15, 0);
    double f = (2 * p0 * r0 / (p0 + r0) + 2 * p1 * r1 / (p1 + r1) + 2 * p2 * r2 / (p2 + r2)) / 3;
    CHECK_CLOSE(sc.f1, f, 1e-15, 0);
    CHECK(sc.accuracy == 12.0 / 16, "accuracy %.17g", sc.accuracy);
    volt_dataset_destroy(ds);
    return vtest_finish();
}
