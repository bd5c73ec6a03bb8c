/* volt-fashion-mnist: train the built-in MLP or CNN on Fashion-MNIST, the Lightning recipe.
 *
 *   train = first 55,000 of the 60,000 training images, val = the last 5,000,
 *   test = the 10,000 t10k images; x normalised with mean 0.2860, std 0.3530;
 *   ModelCheckpoint(monitor="val_acc", mode="max", save_top_k=1, save_last=True);
 *   fit, then test with the best checkpoint; prints "Test accuracy 0.xxxx" (the text app's closing lines);
 *   the command line is volt_cli (docs/CLI.md): fit / validate / test, --config, --trainer.*.
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
#include "volt/cli.h"
#include "app_common.h"

#define APP "volt-fashion-mnist"
#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f
#define N_TRAIN 55000
#define N_VAL 5000

static const volt_cli_key fm_keys[] = {
    { "data.path", VOLT_CLI_STRING, "/usr/share/datasets/fashion-mnist", "folder with the IDX files, plain or .gz", "data", NULL, 0, 0 },
    { "data.batch_size", VOLT_CLI_INT, "64", "batch size per rank (the global batch is N times it on N ranks)", "batch-size", NULL, 1, 1 << 20 },
    { "data.drop_last", VOLT_CLI_BOOL, "false", "drop the last incomplete train batch", "drop-last", NULL, 0, 0 },
    { "model.name", VOLT_CLI_STRING, "mlp", "784-256-128-10 MLP or the small 2-conv CNN", "model", "mlp|cnn", 0, 0 },
    { "model.lr", VOLT_CLI_FLOAT, NULL, "Adam learning rate (null = 1e-3)", "lr", NULL, 0, 1e3 },
    { "model.dropout", VOLT_CLI_FLOAT, NULL, "dropout probability (null = mlp 0.2, cnn 0.25)", "dropout", NULL, 0, 0.999 },
};

typedef struct opts {
    const char *data, *model;
    bool epochs_null;             /* trainer.max_epochs null (unset): the model's default */
    int64_t batch_size;           /* per rank */
    bool drop_last;
    float lr;                     /* < 0 = the model's default */
    float dropout;                /* < 0 = the model's default */
    app_trainer_opts tr;
} opts;

/* Returns 0 to go on, else the exit status. */
static int parse_args(int argc, char **argv, volt_cli_key *buf, volt_cli **c, opts *o) {
    static const char *const defaults[] = { "trainer.default_root_dir", "./runs/fashion_mnist", NULL };
    int r = app_cli_parse(APP, "Train a classifier on Fashion-MNIST (55k train / 5k val / 10k test) and report test accuracy.\n"
                          "fit trains (then tests the best checkpoint); validate / test run a checkpoint (--ckpt_path).",
                          fm_keys, (int)(sizeof fm_keys / sizeof fm_keys[0]), buf, defaults, "fit|validate|test", argc, argv, c);
    if (r) return r;
    *o = (opts){ .data = volt_cli_str(*c, "data.path"), .model = volt_cli_str(*c, "model.name"),
                 .epochs_null = volt_cli_is_null(*c, "trainer.max_epochs"),   /* -1 = no limit, as Lightning */
                 .batch_size = volt_cli_int(*c, "data.batch_size"), .drop_last = volt_cli_bool(*c, "data.drop_last"),
                 .lr = -1.f, .dropout = -1.f };
    /* null (the default, or given) = the model's own */
    o->lr = !volt_cli_is_null(*c, "model.lr") ? (float)volt_cli_float(*c, "model.lr") : -1.f;
    o->dropout = !volt_cli_is_null(*c, "model.dropout") ? (float)volt_cli_float(*c, "model.dropout") : -1.f;
    app_trainer_opts_from_cli(*c, &o->tr);
    /* data.path, model.name: never null (volt_cli refuses null for a key with a value default) */
    if (strcmp(volt_cli_subcommand(*c), "fit") && !volt_cli_str(*c, "ckpt_path"))
        return app_usage(APP, "%s needs --ckpt_path (a checkpoint file, or \"last\" of the run's checkpoint folder)", volt_cli_subcommand(*c));
    return 0;
}

/* DIR/name if it exists, else DIR/name.gz (the loader reads both). */
static void data_file(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s", dir, name);
    if (access(buf, R_OK) == 0) return;
    snprintf(buf, n, "%s/%s.gz", dir, name);
}

static int fail(const char *what, volt_status st, const char *msg) { return app_fail(APP, what, st, msg); }

/* Fashion-MNIST's shape, checked before any model or trainer exists: 28x28 images (the
 * models' 784 inputs; the IDX header's rows and columns reach the dataset as their product)
 * and labels 0..9 (the 10 classes). 0, or 1 with the file named. */
static int check_idx(const volt_dataset *ds, const char *img, const char *lbl) {
    const volt_field *x = &ds->fields[0];
    const int64_t px = x->shape.ndim == 1 ? x->shape.d[0] : -1;
    if (ds->n_fields != 2 || px != 28 * 28) {
        fprintf(stderr, APP ": '%s' holds images of %lld pixels, want 28x28 (784): not Fashion-MNIST's images\n", img,
                (long long)px);
        return 1;
    }
    float *xb = malloc(sizeof *xb * 28 * 28);
    int64_t y = 0;
    void *dst[2] = { xb, &y };
    const int64_t n = volt_dataset_len(ds);
    for (int64_t i = 0; xb && i < n; i++) {
        volt_status st = ds->ops->get(ds->self, i, dst);
        if (st < 0) { free(xb); return fail("reading the labels", st, lbl); }
        if (y < 0 || y > 9) {
            fprintf(stderr, APP ": '%s': label %lld of item %lld is not a class of Fashion-MNIST (want 0..9)\n", lbl,
                    (long long)y, (long long)i);
            free(xb);
            return 1;
        }
    }
    if (!xb) return fail("reading the labels", VOLT_ERR_NOMEM, lbl);
    free(xb);
    return 0;
}

int main(int argc, char **argv) {
    opts o;
    volt_cli_key keybuf[APP_MAX_KEYS];
    volt_cli *cli = NULL;
    int pr = parse_args(argc, argv, keybuf, &cli, &o);
    if (pr) { volt_cli_destroy(cli); return pr < 0 ? 0 : pr; }
    const char *sub = volt_cli_subcommand(cli);
    bool cnn = !strcmp(o.model, "cnn");

    /* ---- data ---- */
    char img[4096], lbl[4096], err[512] = "";
    volt_dataset *full = NULL, *train = NULL, *val = NULL, *test = NULL;
    data_file(img, sizeof img, o.data, "train-images-idx3-ubyte");
    data_file(lbl, sizeof lbl, o.data, "train-labels-idx1-ubyte");
    volt_status st = volt_idx_dataset(img, lbl, FMNIST_MEAN, FMNIST_STD, &full, err, sizeof err);
    if (st < 0) return fail("reading the training set", st, err);
    if (check_idx(full, img, lbl)) return 1;
    if (volt_dataset_len(full) != N_TRAIN + N_VAL) {
        fprintf(stderr, APP ": '%s' has %lld images, want %d\n", img, (long long)volt_dataset_len(full),
                N_TRAIN + N_VAL);
        return 1;
    }
    data_file(img, sizeof img, o.data, "t10k-images-idx3-ubyte");
    data_file(lbl, sizeof lbl, o.data, "t10k-labels-idx1-ubyte");
    st = volt_idx_dataset(img, lbl, FMNIST_MEAN, FMNIST_STD, &test, err, sizeof err);
    if (st < 0) return fail("reading the test set", st, err);
    if (check_idx(test, img, lbl)) return 1;
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
    tlc.drop_last = o.drop_last;
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
    char fingerprint[4096 + 128];
    snprintf(fingerprint, sizeof fingerprint, "data=fashion-mnist:%s;train=%d;val=%d;model=%s", o.data, N_TRAIN, N_VAL, o.model);
    volt_trainer_config tc;
    volt_trainer_config_init(&tc);
    volt_cli_trainer_config(cli, &tc);           /* every trainer.* key; the merged config as run_config_json */
    if (o.epochs_null) tc.max_epochs = cnn ? 4 : 15;
    tc.run_fingerprint = !strcmp(sub, "fit") ? fingerprint : NULL;   /* only fit resumes */
    (void)dropout;
    volt_trainer *t = NULL;
    st = volt_trainer_create(&tc, &t);
    if (st < 0) {
        int rc = fail("creating the trainer", st, t ? volt_trainer_errmsg(t) : NULL);
        volt_trainer_destroy(t);
        volt_cli_destroy(cli);
        return rc;
    }
    /* A fixed checkpoint folder per model (not per run version) so --resume finds "last". */
    char ckdir[4096];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints/%s", o.tr.root, o.model);
    if ((st = app_add_checkpoint(t, cli, ckdir, "{epoch}-{val_acc:.4f}")) < 0)
        return fail("adding EarlyStopping / ModelCheckpoint", st, volt_trainer_errmsg(t));
    if ((st = app_add_weight_averaging(t, cli)) < 0) return fail("adding WeightAveraging", st, volt_trainer_errmsg(t));
    if ((st = app_add_backbone_finetuning(t, cli)) < 0) return fail("adding BackboneFinetuning", st, volt_trainer_errmsg(t));
    if ((st = app_add_accumulation_scheduler(t, cli)) < 0)
        return fail("adding GradientAccumulationScheduler", st, volt_trainer_errmsg(t));
    if ((st = app_add_lr_monitor(t, cli)) < 0) return fail("adding LearningRateMonitor", st, volt_trainer_errmsg(t));
    /* images: samples only (no items, no FLOP count for these models) */
    if ((st = app_add_throughput(t, cli, NULL, NULL, NULL)) < 0) return fail("adding ThroughputMonitor", st, volt_trainer_errmsg(t));
    if ((st = app_add_device_stats(t, cli)) < 0) return fail("adding DeviceStatsMonitor", st, volt_trainer_errmsg(t));
    if ((st = app_add_spike_detection(t, cli)) < 0) return fail("adding SpikeDetection", st, volt_trainer_errmsg(t));
    if ((st = app_add_timer(t, cli)) < 0) return fail("adding Timer", st, volt_trainer_errmsg(t));
    if (o.tr.memory_report && (st = app_add_memory_report(t)) < 0)
        return fail("adding the memory report", st, volt_trainer_errmsg(t));

    /* Informational lines come from rank 0 only; errors from the rank that hit them. */
    const bool zero = volt_trainer_is_global_zero(t);
    const int world = volt_trainer_world_size(t);
    if (zero) {
        const int64_t me = volt_trainer_get_config(t)->max_epochs;
        if (strcmp(sub, "fit")) printf(APP ": %s %s, batch %lld", sub, o.model, (long long)o.batch_size);   /* no training */
        else if (me < 0) printf(APP ": %s, no epoch limit, batch %lld", o.model, (long long)o.batch_size);
        else printf(APP ": %s, %lld epochs, batch %lld", o.model, (long long)me, (long long)o.batch_size);
        if (world > 1) printf(" per rank x %d ranks = %lld (%s)", world, (long long)o.batch_size * world, volt_trainer_get_config(t)->strategy);
        printf(", %lld/%lld/%lld train/val/test images, seed %llu\n", (long long)volt_dataset_len(train),
               (long long)volt_dataset_len(val), (long long)volt_dataset_len(test), (unsigned long long)o.tr.seed);
        fflush(stdout);
    }
    int rc = 0;
    const char *test_ckpt = volt_cli_str(cli, "ckpt_path");
    if (!strcmp(sub, "fit")) {
        double t0 = app_now_s();
        int64_t bs_was;
        if ((rc = app_scale_batch_size(t, cli, train_l, &bs_was, APP)) || (rc = app_add_tuner_report(t, cli, bs_was, 0, APP)))
            return rc;
        st = volt_trainer_fit(t, ops, model, train_l, val_l, app_fit_ckpt(cli));
        double fit_s = app_now_s() - t0;
        if (st < 0) return app_fail_run(APP, "fit", st, t);
        if (app_after_fit(t, &o.tr, APP)) return 1;
        app_print_fit_end(t, volt_cli_str(cli, "checkpoint.monitor"), fit_s);
        /* Lightning's trainer.test(ckpt_path="best"): the weights test runs with are the ones
         * --export-full writes, so the exported file is the model whose accuracy is printed. */
        test_ckpt = volt_trainer_best_model_path(t) ? "best" : NULL;
        if (!volt_cli_bool(cli, "test_after_fit")) sub = NULL;
        else sub = "test";
    } else if (!strcmp(sub, "validate")) {
        st = volt_trainer_validate(t, ops, model, val_l, test_ckpt);
        if (st < 0) return app_fail_run(APP, "validate", st, t);
        sub = NULL;
    }
    if (sub && !strcmp(sub, "test") && !app_skip_test(t, cli)) {
        st = volt_trainer_test(t, ops, model, test_l, test_ckpt);
        if (st < 0) return app_fail_run(APP, "test", st, t);
        double acc = 0.0;
        if (volt_trainer_metric(t, "test_acc", &acc)) app_print_test_end(t, acc);
        else {
            fprintf(stderr, APP ": test ran but logged no test_acc\n");
            rc = 1;
        }
        if (app_after_test(t, &o.tr, APP)) rc = 1;
    }
    app_print_logs(t);

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
    volt_cli_destroy(cli);
    return rc;
}
