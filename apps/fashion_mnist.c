/* volt-fashion-mnist: train the built-in MLP or CNN on Fashion-MNIST, the Lightning recipe.
 *
 *   train = first 55,000 of the 60,000 training images, val = the last 5,000,
 *   test = the 10,000 t10k images; x normalised with mean 0.2860, std 0.3530;
 *   ModelCheckpoint(monitor="val_acc", mode="max", save_top_k=1, save_last=True);
 *   fit, then test with the best checkpoint; prints "test_acc: 0.xxxx".
 * Under a distributed --strategy (scripts/volt-run -n N) only rank 0 prints; --memory-report
 * and --export-full are in apps/app_common.c, shared with volt-text-classification.
 *
 * Written only against the public headers (docs/FASHION_MNIST.md has the numbers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "volt/core.h"
#include "volt/data.h"
#include "volt/trainer.h"
#include "volt/models.h"
#include "app_common.h"

#define APP "volt-fashion-mnist"
#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f
#define N_TRAIN 55000
#define N_VAL 5000

typedef struct opts {
    const char *data, *model;
    int64_t epochs;               /* -1 = the model's default */
    int64_t batch_size;           /* per rank */
    float lr;                     /* < 0 = the model's default */
    float dropout;                /* < 0 = the model's default */
    app_trainer_opts tr;          /* --seed, --root, --strategy, ... (apps/app_common.h) */
} opts;

static void usage(FILE *f, const char *argv0) {
    fprintf(f,
            "usage: %s [options]\n"
            "Train a classifier on Fashion-MNIST (55k train / 5k val / 10k test) and report test accuracy.\n"
            "\n"
            "  --data DIR                 folder with the IDX files, plain or .gz\n"
            "                             (default /usr/share/datasets/fashion-mnist)\n"
            "  --model mlp|cnn            784-256-128-10 MLP or the small 2-conv CNN (default mlp)\n"
            "  --epochs N                 max epochs (default: mlp 15, cnn 4)\n"
            "  --batch-size N             per rank (default 64)\n"
            "  --lr F                     Adam learning rate (default 1e-3)\n"
            "  --dropout F                dropout probability (default: mlp 0.2, cnn 0.25)\n"
            "  --seed N                   init, shuffle and dropout seed (default 42)\n"
            "  --root DIR                 logs and checkpoints (default ./runs/fashion_mnist)\n"
            "  --resume                   continue from the last checkpoint in ROOT/checkpoints/MODEL\n",
            argv0);
    app_trainer_usage(f);
    fputs("  -h, --help                 this text\n", f);
}

/* Returns 0 to go on, 1 after --help, 2 on a usage error. */
static int parse_args(int argc, char **argv, opts *o) {
    *o = (opts){ .data = "/usr/share/datasets/fashion-mnist", .model = "mlp", .epochs = -1, .batch_size = 64,
                 .lr = -1.f, .dropout = -1.f };
    app_trainer_opts_init(&o->tr, "./runs/fashion_mnist");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout, argv[0]); return 1; }
        if (app_trainer_switch(a, &o->tr)) continue;
        static const char *const own[] = { "--data", "--model", "--epochs", "--batch-size", "--lr", "--dropout", NULL };
        bool known = app_trainer_has_flag(a);
        for (int k = 0; own[k]; k++) known = known || !strcmp(a, own[k]);
        if (!known) { fprintf(stderr, "%s: unknown option '%s' (try --help)\n", argv[0], a); return 2; }
        if (i + 1 >= argc) { fprintf(stderr, "%s: %s needs a value (try --help)\n", argv[0], a); return 2; }
        const char *v = argv[++i];
        const char *why = "";
        int r = app_trainer_flag(a, v, &o->tr, &why);
        bool ok = r >= 0;
        if (r == 0) {
            if (!strcmp(a, "--data")) o->data = v;
            else if (!strcmp(a, "--model")) o->model = v;
            else if (!strcmp(a, "--epochs")) { ok = app_parse_i64(v, 1, INT64_MAX / 4, &o->epochs); why = " (want an integer >= 1)"; }
            else if (!strcmp(a, "--batch-size")) { ok = app_parse_i64(v, 1, 1 << 20, &o->batch_size); why = " (want an integer >= 1)"; }
            else if (!strcmp(a, "--lr")) { ok = app_parse_f(v, 0.f, 1e3f, &o->lr); why = " (want a number >= 0)"; }
            else { ok = app_parse_f(v, 0.f, 0.999f, &o->dropout); why = " (want a number in [0, 1))"; }   /* --dropout */
        }
        if (!ok) { fprintf(stderr, "%s: bad value '%s' for %s%s\n", argv[0], v, a, why); return 2; }
    }
    if (strcmp(o->model, "mlp") && strcmp(o->model, "cnn")) {
        fprintf(stderr, "%s: --model must be mlp or cnn, got '%s'\n", argv[0], o->model);
        return 2;
    }
    return 0;
}

/* DIR/name if it exists, else DIR/name.gz (the loader reads both). */
static void data_file(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s", dir, name);
    if (access(buf, R_OK) == 0) return;
    snprintf(buf, n, "%s/%s.gz", dir, name);
}

static int fail(const char *what, volt_status st, const char *msg) { return app_fail(APP, what, st, msg); }

int main(int argc, char **argv) {
    opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr) return pr == 1 ? 0 : 2;
    bool cnn = !strcmp(o.model, "cnn");
    if (o.epochs < 0) o.epochs = cnn ? 4 : 15;

    /* ---- data ---- */
    char img[4096], lbl[4096], err[512] = "";
    volt_dataset *full = NULL, *train = NULL, *val = NULL, *test = NULL;
    data_file(img, sizeof img, o.data, "train-images-idx3-ubyte");
    data_file(lbl, sizeof lbl, o.data, "train-labels-idx1-ubyte");
    volt_status st = volt_idx_dataset(img, lbl, FMNIST_MEAN, FMNIST_STD, &full, err, sizeof err);
    if (st < 0) return fail("reading the training set", st, err);
    if (volt_dataset_len(full) != N_TRAIN + N_VAL) {
        fprintf(stderr, APP ": '%s' has %lld images, want %d\n", img, (long long)volt_dataset_len(full),
                N_TRAIN + N_VAL);
        return 1;
    }
    data_file(img, sizeof img, o.data, "t10k-images-idx3-ubyte");
    data_file(lbl, sizeof lbl, o.data, "t10k-labels-idx1-ubyte");
    st = volt_idx_dataset(img, lbl, FMNIST_MEAN, FMNIST_STD, &test, err, sizeof err);
    if (st < 0) return fail("reading the test set", st, err);
    if ((st = volt_dataset_subset(full, 0, N_TRAIN, &train)) < 0 ||
        (st = volt_dataset_subset(full, N_TRAIN, N_VAL, &val)) < 0)
        return fail("splitting train/val", st, NULL);

    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = o.batch_size;
    lc.num_workers = o.tr.workers;
    lc.seed = o.tr.seed;
    volt_loader *train_l = NULL, *val_l = NULL, *test_l = NULL;
    volt_loader_config tlc = lc;
    tlc.shuffle = true;
    if ((st = volt_loader_create(&tlc, train, &train_l)) < 0 || (st = volt_loader_create(&lc, val, &val_l)) < 0 ||
        (st = volt_loader_create(&lc, test, &test_l)) < 0)
        return fail("creating the data loaders", st, NULL);

    /* ---- model ---- */
    void *model = NULL;
    const volt_module_ops *ops;
    float dropout;
    if (cnn) {
        volt_cnn_config cc;
        volt_cnn_config_init(&cc);
        if (o.lr >= 0.f) cc.lr = o.lr;
        if (o.dropout >= 0.f) cc.dropout = o.dropout;
        dropout = cc.dropout;
        st = volt_cnn_create(&cc, &model);
        ops = &volt_cnn_ops;
    } else {
        volt_mlp_config mc;
        volt_mlp_config_init(&mc);
        if (o.lr >= 0.f) mc.lr = o.lr;
        if (o.dropout >= 0.f) mc.dropout = o.dropout;
        dropout = mc.dropout;
        st = volt_mlp_create(&mc, &model);
        ops = &volt_mlp_ops;
    }
    if (st < 0) return fail("creating the model", st, NULL);

    /* ---- trainer ---- */
    char run_json[1024];
    snprintf(run_json, sizeof run_json,
             "{\"app\": \"" APP "\", \"model\": \"%s\", \"epochs\": %lld, \"batch_size\": %lld, "
             "\"lr\": %g, \"dropout\": %g, \"seed\": %llu, \"workers\": %d, \"precision\": \"%s\", "
             "\"strategy\": \"%s\", \"train\": %d, \"val\": %d, \"mean\": %g, \"std\": %g}",
             o.model, (long long)o.epochs, (long long)o.batch_size, o.lr >= 0.f ? o.lr : 1e-3, dropout,
             (unsigned long long)o.tr.seed, o.tr.workers, o.tr.precision, o.tr.strategy, N_TRAIN, N_VAL, FMNIST_MEAN,
             FMNIST_STD);
    volt_trainer_config tc;
    volt_trainer_config_init(&tc);
    app_trainer_config(&o.tr, &tc);
    tc.max_epochs = o.epochs;
    tc.run_config_json = run_json;
    volt_trainer *t = NULL;
    st = volt_trainer_create(&tc, &t);
    if (st < 0) {
        int rc = fail("creating the trainer", st, t ? volt_trainer_errmsg(t) : NULL);
        volt_trainer_destroy(t);
        return rc;
    }
    /* A fixed checkpoint folder per model (not per run version) so --resume finds "last". */
    char ckdir[4096];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints/%s", o.tr.root, o.model);
    if ((st = app_add_checkpoint(t, ckdir, "{epoch}-{val_acc:.4f}")) < 0)
        return fail("adding ModelCheckpoint", st, volt_trainer_errmsg(t));
    if (o.tr.memory_report && (st = app_add_memory_report(t)) < 0)
        return fail("adding the memory report", st, volt_trainer_errmsg(t));

    /* Informational lines come from rank 0 only; errors from the rank that hit them. */
    const bool zero = volt_trainer_is_global_zero(t);
    const int world = volt_trainer_world_size(t);
    if (zero) {
        printf(APP ": %s, %lld epochs, batch %lld", o.model, (long long)o.epochs, (long long)o.batch_size);
        if (world > 1) printf(" per rank x %d ranks = %lld (%s)", world, (long long)o.batch_size * world, o.tr.strategy);
        printf(", %lld/%lld/%lld train/val/test images, seed %llu\n", (long long)volt_dataset_len(train),
               (long long)volt_dataset_len(val), (long long)volt_dataset_len(test), (unsigned long long)o.tr.seed);
        fflush(stdout);
    }
    double t0 = app_now_s();
    st = volt_trainer_fit(t, ops, model, train_l, val_l, o.tr.resume ? "last" : NULL);
    double fit_s = app_now_s() - t0;
    if (st < 0) return fail("fit", st, volt_trainer_errmsg(t));
    if (app_after_fit(t, &o.tr, APP)) return 1;
    const char *best = volt_trainer_best_model_path(t);
    if (best && zero) printf("best checkpoint: %s (val_acc %.4f)\n", best, volt_trainer_best_model_score(t));
    /* Lightning's trainer.test(ckpt_path="best"): the weights test runs with are the ones
     * --export-full writes, so the exported file is the model whose test_acc is printed. */
    st = volt_trainer_test(t, ops, model, test_l, best ? "best" : NULL);
    if (st < 0) return fail("test", st, volt_trainer_errmsg(t));
    double acc = 0.0;
    int rc = 0;
    if (volt_trainer_metric(t, "test_acc", &acc)) {
        if (zero) printf("test_acc: %.4f\n", acc);
    } else {
        fprintf(stderr, APP ": test ran but logged no test_acc\n");
        rc = 1;
    }
    if (app_after_test(t, &o.tr, APP)) rc = 1;
    if (zero) {
        printf("fit took %.1f min\n", fit_s / 60.0);
        if (volt_trainer_log_dir(t)) printf("logs: %s\n", volt_trainer_log_dir(t));
    }

    volt_trainer_destroy(t);
    volt_loader_destroy(train_l);
    volt_loader_destroy(val_l);
    volt_loader_destroy(test_l);
    volt_dataset_destroy(train);
    volt_dataset_destroy(val);
    volt_dataset_destroy(test);
    volt_dataset_destroy(full);
    if (cnn) volt_cnn_destroy(model);
    else volt_mlp_destroy(model);
    return rc;
}
