/* volt-fashion-mnist: train the built-in MLP or CNN on Fashion-MNIST, the Lightning recipe.
 *
 *   train = first 55,000 of the 60,000 training images, val = the last 5,000,
 *   test = the 10,000 t10k images; x normalised with mean 0.2860, std 0.3530;
 *   ModelCheckpoint(monitor="val_acc", mode="max", save_top_k=1, save_last=True);
 *   fit, then test with the best checkpoint; prints "test_acc: 0.xxxx".
 *
 * Written only against the public headers (docs/FASHION_MNIST.md has the numbers). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "volt/core.h"
#include "volt/data.h"
#include "volt/trainer.h"
#include "volt/models.h"

#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f
#define N_TRAIN 55000
#define N_VAL 5000

typedef struct opts {
    const char *data, *model, *root, *precision, *strategy;
    int64_t epochs;               /* -1 = the model's default */
    int64_t batch_size;
    float lr;                     /* < 0 = the model's default */
    uint64_t seed;
    int workers;
    int64_t limit_train, limit_val, limit_test;
    bool resume, progress;
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
            "  --batch-size N             (default 64)\n"
            "  --lr F                     Adam learning rate (default 1e-3)\n"
            "  --seed N                   init, shuffle and dropout seed (default 42)\n"
            "  --workers N                data loader threads (default 1; 0 = load in the main thread)\n"
            "  --limit-train-batches N    at most N train batches per epoch (default all)\n"
            "  --limit-val-batches N      at most N val batches (default all)\n"
            "  --limit-test-batches N     at most N test batches (default all)\n"
            "  --root DIR                 logs and checkpoints (default ./runs/fashion_mnist)\n"
            "  --precision P              trainer precision, e.g. 32-true (default), bf16-mixed\n"
            "  --strategy S               single (default), ddp, fsdp, ...\n"
            "  --resume                   continue from the last checkpoint in ROOT/checkpoints/MODEL\n"
            "  --no-progress              no progress bar\n"
            "  -h, --help                 this text\n",
            argv0);
}

static bool parse_i64(const char *s, int64_t lo, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo) return false;
    *out = v;
    return true;
}

/* Returns 0 to go on, 1 after --help, 2 on a usage error. */
static int parse_args(int argc, char **argv, opts *o) {
    *o = (opts){ .data = "/usr/share/datasets/fashion-mnist", .model = "mlp", .root = "./runs/fashion_mnist",
                 .precision = "32-true", .strategy = "single", .epochs = -1, .batch_size = 64, .lr = -1.f,
                 .seed = 42, .workers = 1, .limit_train = -1, .limit_val = -1, .limit_test = -1,
                 .resume = false, .progress = true };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout, argv[0]); return 1; }
        if (!strcmp(a, "--resume")) { o->resume = true; continue; }
        if (!strcmp(a, "--no-progress")) { o->progress = false; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "%s: %s needs a value (try --help)\n", argv[0], a); return 2; }
        const char *v = argv[++i];
        int64_t n = 0;
        bool ok = true;
        if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--root")) o->root = v;
        else if (!strcmp(a, "--precision")) o->precision = v;
        else if (!strcmp(a, "--strategy")) o->strategy = v;
        else if (!strcmp(a, "--epochs")) { ok = parse_i64(v, 1, &n); o->epochs = n; }
        else if (!strcmp(a, "--batch-size")) { ok = parse_i64(v, 1, &n); o->batch_size = n; }
        else if (!strcmp(a, "--seed")) { ok = parse_i64(v, 0, &n); o->seed = (uint64_t)n; }
        else if (!strcmp(a, "--workers")) { ok = parse_i64(v, 0, &n) && n <= 64; o->workers = (int)n; }
        else if (!strcmp(a, "--limit-train-batches")) { ok = parse_i64(v, 1, &n); o->limit_train = n; }
        else if (!strcmp(a, "--limit-val-batches")) { ok = parse_i64(v, 0, &n); o->limit_val = n; }
        else if (!strcmp(a, "--limit-test-batches")) { ok = parse_i64(v, 1, &n); o->limit_test = n; }
        else if (!strcmp(a, "--lr")) {
            char *end;
            o->lr = strtof(v, &end);
            ok = end != v && !*end && o->lr >= 0.f;
        } else {
            fprintf(stderr, "%s: unknown option '%s' (try --help)\n", argv[0], a);
            return 2;
        }
        if (!ok) { fprintf(stderr, "%s: bad value '%s' for %s\n", argv[0], v, a); return 2; }
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

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what, volt_status st, const char *msg) {
    fprintf(stderr, "volt-fashion-mnist: %s failed (%s)%s%s\n", what, volt_status_str(st), msg && *msg ? ": " : "",
            msg ? msg : "");
    return 1;
}

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
        fprintf(stderr, "volt-fashion-mnist: '%s' has %lld images, want %d\n", img, (long long)volt_dataset_len(full),
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
    lc.num_workers = o.workers;
    lc.seed = o.seed;
    volt_loader *train_l = NULL, *val_l = NULL, *test_l = NULL;
    volt_loader_config tlc = lc;
    tlc.shuffle = true;
    if ((st = volt_loader_create(&tlc, train, &train_l)) < 0 || (st = volt_loader_create(&lc, val, &val_l)) < 0 ||
        (st = volt_loader_create(&lc, test, &test_l)) < 0)
        return fail("creating the data loaders", st, NULL);

    /* ---- model ---- */
    void *model = NULL;
    const volt_module_ops *ops;
    if (cnn) {
        volt_cnn_config cc;
        volt_cnn_config_init(&cc);
        if (o.lr >= 0.f) cc.lr = o.lr;
        st = volt_cnn_create(&cc, &model);
        ops = &volt_cnn_ops;
    } else {
        volt_mlp_config mc;
        volt_mlp_config_init(&mc);
        if (o.lr >= 0.f) mc.lr = o.lr;
        st = volt_mlp_create(&mc, &model);
        ops = &volt_mlp_ops;
    }
    if (st < 0) return fail("creating the model", st, NULL);

    /* ---- trainer ---- */
    char run_json[1024];
    snprintf(run_json, sizeof run_json,
             "{\"app\": \"volt-fashion-mnist\", \"model\": \"%s\", \"epochs\": %lld, \"batch_size\": %lld, "
             "\"lr\": %g, \"seed\": %llu, \"workers\": %d, \"precision\": \"%s\", \"strategy\": \"%s\", "
             "\"train\": %d, \"val\": %d, \"mean\": %g, \"std\": %g}",
             o.model, (long long)o.epochs, (long long)o.batch_size, o.lr >= 0.f ? o.lr : 1e-3, (unsigned long long)o.seed,
             o.workers, o.precision, o.strategy, N_TRAIN, N_VAL, FMNIST_MEAN, FMNIST_STD);
    volt_trainer_config tc;
    volt_trainer_config_init(&tc);
    tc.max_epochs = o.epochs;
    tc.seed = o.seed;
    tc.limit_train_batches = o.limit_train;
    tc.limit_val_batches = o.limit_val;
    tc.limit_test_batches = o.limit_test;
    tc.default_root_dir = o.root;
    tc.enable_progress_bar = o.progress;
    tc.precision = o.precision;
    tc.strategy = o.strategy;
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
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints/%s", o.root, o.model);
    volt_checkpoint_config ck;
    volt_checkpoint_config_init(&ck);
    ck.dirpath = ckdir;
    ck.monitor = "val_acc";
    ck.mode = VOLT_MAX;
    ck.save_top_k = 1;
    ck.save_last = true;
    ck.filename = "{epoch}-{val_acc:.4f}";
    if ((st = volt_add_model_checkpoint(t, &ck)) < 0) return fail("adding ModelCheckpoint", st, volt_trainer_errmsg(t));

    printf("volt-fashion-mnist: %s, %lld epochs, batch %lld, %lld/%lld/%lld train/val/test images, seed %llu\n",
           o.model, (long long)o.epochs, (long long)o.batch_size, (long long)volt_dataset_len(train),
           (long long)volt_dataset_len(val), (long long)volt_dataset_len(test), (unsigned long long)o.seed);
    fflush(stdout);
    double t0 = now_s();
    st = volt_trainer_fit(t, ops, model, train_l, val_l, o.resume ? "last" : NULL);
    double fit_s = now_s() - t0;
    if (st < 0) return fail("fit", st, volt_trainer_errmsg(t));
    const char *best = volt_trainer_best_model_path(t);
    if (best) printf("best checkpoint: %s (val_acc %.4f)\n", best, volt_trainer_best_model_score(t));
    st = volt_trainer_test(t, ops, model, test_l, best ? "best" : NULL);
    if (st < 0) return fail("test", st, volt_trainer_errmsg(t));
    double acc = 0.0;
    int rc = 0;
    if (volt_trainer_metric(t, "test_acc", &acc)) {
        printf("test_acc: %.4f\n", acc);
    } else {
        fprintf(stderr, "volt-fashion-mnist: test ran but logged no test_acc\n");
        rc = 1;
    }
    printf("fit took %.1f min\n", fit_s / 60.0);
    if (volt_trainer_log_dir(t)) printf("logs: %s\n", volt_trainer_log_dir(t));

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
