/* Several evaluation loaders (Lightning's lists of val / test / predict dataloaders):
 * volt_trainer_validate_loaders / _test_loaders / _predict_loaders / _fit_loaders and a
 * datamodule's val_loaders (table version 3). Each loader's metrics are named
 * "<name>/dataloader_idx_<k>" and equal what that loader alone gives; the stage hooks run once,
 * the batch hooks per batch with the loader's index; fit's sanity check and the limits apply per
 * loader; ModelCheckpoint can monitor one loader's metric (its file stays in dirpath); the
 * results table has a column per loader, the progress bar a line per loader; bad arrays, a
 * BatchSizeFinder over several loaders and a failing val_loaders are errors naming the problem;
 * a failed multi-loader call leaves nothing behind for the next call's metric names. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

/* ---- a 4 -> 3 classifier recording what its steps and hooks see ---------------------------- */
typedef struct cls {
    volt_tensor *w, *b;
    char log[8192];
    int fail_dl;          /* >= 0: validation_step fails on this loader's first batch */
    int sanity_steps;     /* validation steps run while sanity checking */
} cls;

static void rec(cls *m, const char *what) {
    size_t n = strlen(m->log);
    snprintf(m->log + n, sizeof m->log - n, "%s ", what);
}
static void rec2(cls *m, const char *what, int a, int64_t b, int c, int64_t d) {
    char buf[64];
    if (c < 0) snprintf(buf, sizeof buf, "%s(%d,%lld)", what, a, (long long)b);
    else snprintf(buf, sizeof buf, "%s(%d,%lld/%d,%lld)", what, a, (long long)b, c, (long long)d);
    rec(m, buf);
}

static volt_status cls_setup(void *self, volt_params *ps) {
    cls *m = self;
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(3, 4), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(3), VOLT_INIT_ZEROS, &m->b);
}
static volt_status cls_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    cls *m = self;
    return volt_classification_step(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b), "train");
}
static volt_status cls_eval(cls *m, volt_step *s, const volt_batch *b, int64_t i, const char *stage) {
    const int dl = volt_step_dataloader_idx(s);
    rec2(m, "step", dl, i, -1, 0);
    if (m->fail_dl == dl) return volt_step_fail(s, VOLT_ERR_STATE, "injected failure on loader %d", dl);
    VOLT_TRY(volt_classification_step(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b), stage));
    return volt_log_value(s, "k", 10.0 + dl, VOLT_LOG_STEP | VOLT_LOG_EPOCH);   /* "k_step/..." and "k_epoch/..." */
}
static volt_status cls_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    cls *m = self;
    return cls_eval(m, s, b, i, "val");
}
static volt_status cls_test(void *self, volt_step *s, const volt_batch *b, int64_t i) { return cls_eval(self, s, b, i, "test"); }
static volt_status cls_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    cls *m = self;
    *out = volt_linear(s, volt_batch_x(b), m->w, m->b);
    return VOLT_OK;
}
static volt_status cls_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.05f;
    return VOLT_OK;
}
static volt_status cls_vstart(void *self, volt_trainer *t) { rec(self, "start"); return VOLT_OK; }
static volt_status cls_vend(void *self, volt_trainer *t) { rec(self, "end"); return VOLT_OK; }
static volt_status cls_vbatch(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    cls *m = self;
    if (volt_trainer_sanity_checking(t)) { m->sanity_steps++; return VOLT_OK; }
    rec2(m, "batch", volt_trainer_dataloader_idx(t), i, volt_trainer_num_eval_dataloaders(t), volt_trainer_num_eval_batches(t));
    return VOLT_OK;
}
static const volt_module_ops cls_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "cls", .setup = cls_setup, .configure_optimizers = cls_opt,
    .training_step = cls_train, .validation_step = cls_val, .test_step = cls_test, .predict_step = cls_predict,
    .on_validation_start = cls_vstart, .on_validation_end = cls_vend, .on_validation_batch_end = cls_vbatch,
    .on_test_start = cls_vstart, .on_test_end = cls_vend, .on_test_batch_end = cls_vbatch,
};

/* n rows of 4 features, 3 classes; `off` makes another dataset */
static volt_dataset *rows(int n, int off) {
    float *x = malloc(sizeof(float) * 4 * (size_t)n);
    int64_t *y = malloc(sizeof(int64_t) * (size_t)n);
    for (int i = 0; i < n; i++) {
        y[i] = (i + off) % 3;
        for (int j = 0; j < 4; j++) x[i * 4 + j] = sinf((float)((i + off) * 4 + j)) + (j == y[i] ? 0.7f : 0.f);
    }
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(4) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { x, y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, d, n, &ds));
    free(x);
    free(y);
    return ds;
}

static volt_trainer *trainer(const char *root) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.seed = 11;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    return t;
}

static double metric(volt_trainer *t, const char *name) {
    double v = NAN;
    CHECK(volt_trainer_metric(t, name, &v), "metric '%s' exists", name);
    return v;
}

/* validate over two loaders: per-loader names, values equal to each loader alone, hooks */
static void test_validate_two(volt_dataset *da, volt_dataset *db) {
    volt_loader *la = vtest_loader(da, 2, false), *lb = vtest_loader(db, 3, false);
    double single[2][3];
    for (int k = 0; k < 2; k++) {   /* each loader alone: the reference */
        cls m = { .fail_dl = -1 };
        volt_trainer *t = trainer(vtest_tmpdir());
        CHECK_OK(volt_trainer_validate(t, &cls_ops, &m, k ? lb : la, NULL));
        single[k][0] = metric(t, "val_loss");
        single[k][1] = metric(t, "val_acc");
        single[k][2] = metric(t, "val_f1");
        CHECK(!volt_trainer_metric(t, "val_loss/dataloader_idx_0", NULL), "one loader: no suffix");
        CHECK(volt_trainer_dataloader_idx(t) == -1 && volt_trainer_num_eval_dataloaders(t) == 0, "outside a loop");
        volt_trainer_destroy(t);
    }
    cls m = { .fail_dl = -1 };
    volt_trainer *t = trainer(vtest_tmpdir());
    volt_loader *both[2] = { la, lb };
    CHECK_OK(volt_trainer_validate_loaders(t, &cls_ops, &m, both, 2, NULL));
    static const char *const base[3] = { "val_loss", "val_acc", "val_f1" };
    for (int k = 0; k < 2; k++)
        for (int q = 0; q < 3; q++) {
            char nm[64];
            snprintf(nm, sizeof nm, "%s/dataloader_idx_%d", base[q], k);
            double v = metric(t, nm);
            CHECK(v == single[k][q], "%s = %.9g, the loader alone gives %.9g", nm, v, single[k][q]);
        }
    CHECK(single[0][0] != single[1][0], "the two loaders differ (the test bites)");
    CHECK(!volt_trainer_metric(t, "val_loss", NULL), "several loaders: no unsuffixed val_loss");
    CHECK(metric(t, "k_epoch/dataloader_idx_1") == 11.0 && metric(t, "k_epoch/dataloader_idx_0") == 10.0,
          "STEP|EPOCH: '_epoch' before the suffix");
    CHECK(metric(t, "k_step/dataloader_idx_1") == 11.0, "STEP|EPOCH: '_step' before the suffix");
    int C;
    const int64_t *counts;
    CHECK(volt_trainer_confusion_matrix(t, "val/dataloader_idx_1", &C, &counts) && C == 3, "loader 1's confusion matrix");
    int64_t total = 0;
    for (int i = 0; i < C * C; i++) total += counts[i];
    CHECK(total == 7, "loader 1's matrix counts its 7 rows, got %lld", (long long)total);
    const char *want = "start step(0,0) batch(0,0/2,4) step(0,1) batch(0,1/2,4) step(0,2) batch(0,2/2,4) step(0,3) "
                       "batch(0,3/2,4) step(1,0) batch(1,0/2,3) step(1,1) batch(1,1/2,3) step(1,2) batch(1,2/2,3) end ";
    CHECK(!strcmp(m.log, want), "hooks and steps:\n  got  %s\n  want %s", m.log, want);

    /* n = 1 through the array call is the single call exactly */
    cls m1 = { .fail_dl = -1 };
    volt_trainer *t1 = trainer(vtest_tmpdir());
    CHECK_OK(volt_trainer_validate_loaders(t1, &cls_ops, &m1, both + 1, 1, NULL));
    CHECK(metric(t1, "val_loss") == single[1][0], "one loader in an array: the plain names");
    volt_trainer_destroy(t1);

    /* a failure in loader 1 fails the call naming it; the next call's names are plain again */
    m.fail_dl = 1;
    volt_status st = volt_trainer_validate_loaders(t, &cls_ops, &m, both, 2, NULL);
    CHECK(st == VOLT_ERR_STATE && strstr(volt_trainer_errmsg(t), "injected failure on loader 1"), "failure: %s",
          volt_trainer_errmsg(t));
    m.fail_dl = -1;
    CHECK(volt_trainer_num_eval_dataloaders(t) == 0 && volt_trainer_dataloader_idx(t) == -1, "no loop after the failed call");
    CHECK_OK(volt_trainer_fit(t, &cls_ops, &m, la, NULL, NULL));   /* training steps log plain names */
    CHECK(volt_trainer_metric(t, "train_loss", NULL) && !volt_trainer_metric(t, "train_loss/dataloader_idx_1", NULL),
          "after a failed two-loader call, fit's training logs plain names");
    CHECK(volt_trainer_dataloader_idx(t) == -1 && volt_trainer_num_eval_dataloaders(t) == 0, "no loop after fit");
    CHECK_OK(volt_trainer_validate(t, &cls_ops, &m, la, NULL));
    CHECK(volt_trainer_metric(t, "val_loss", NULL), "one loader logs plain names");
    volt_trainer_destroy(t);

    /* limit_val_batches per loader */
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.limit_val_batches = 2;
    CHECK_OK(volt_trainer_create(&c, &t));
    m.log[0] = 0;
    CHECK_OK(volt_trainer_validate_loaders(t, &cls_ops, &m, both, 2, NULL));
    want = "start step(0,0) batch(0,0/2,2) step(0,1) batch(0,1/2,2) step(1,0) batch(1,0/2,2) step(1,1) batch(1,1/2,2) end ";
    CHECK(!strcmp(m.log, want), "limit_val_batches=2 per loader:\n  got  %s\n  want %s", m.log, want);
    volt_trainer_destroy(t);
    volt_loader_destroy(la);
    volt_loader_destroy(lb);
}

/* test and predict over loaders; bad arrays; a BatchSizeFinder over several loaders */
static int64_t g_rows[2];
static volt_trainer *g_t;
static volt_status count_pred(void *ctx, const volt_batch *b, const volt_tensor *pred) {
    const int dl = volt_trainer_dataloader_idx(g_t);
    if (dl < 0 || dl > 1) return VOLT_ERR_STATE;
    g_rows[dl] += b->size;
    return VOLT_OK;
}

static void test_test_predict_errors(volt_dataset *da, volt_dataset *db) {
    volt_loader *la = vtest_loader(da, 2, false), *lb = vtest_loader(db, 3, false);
    volt_loader *both[2] = { la, lb };
    cls m = { .fail_dl = -1 };
    volt_trainer *t = trainer(vtest_tmpdir());
    CHECK_OK(volt_trainer_test_loaders(t, &cls_ops, &m, both, 2, NULL));
    CHECK(metric(t, "test_acc/dataloader_idx_0") >= 0 && metric(t, "test_loss/dataloader_idx_1") > 0, "test: per-loader metrics");
    g_t = t;
    CHECK_OK(volt_trainer_predict_loaders(t, &cls_ops, &m, both, 2, NULL, count_pred, NULL));
    CHECK(g_rows[0] == 8 && g_rows[1] == 7, "predict: every row of each loader, by index (%lld, %lld)", (long long)g_rows[0],
          (long long)g_rows[1]);

    volt_loader *holes[2] = { la, NULL };
    volt_status st = volt_trainer_validate_loaders(t, &cls_ops, &m, holes, 2, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "loader 1 of 2 is NULL"), "NULL entry: %s",
          volt_trainer_errmsg(t));
    st = volt_trainer_test_loaders(t, &cls_ops, &m, both, VOLT_MAX_EVAL_DATALOADERS + 1, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "17 loaders"), "too many: %s", volt_trainer_errmsg(t));
    st = volt_trainer_fit_loaders(t, &cls_ops, &m, la, both, -1, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG, "n < 0 refused");
    st = volt_trainer_validate_loaders(t, &cls_ops, &m, NULL, 0, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "no loader"), "none: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);

    t = trainer(vtest_tmpdir());
    CHECK_OK(volt_add_batch_size_finder(t, NULL));
    st = volt_trainer_validate_loaders(t, &cls_ops, &m, both, 2, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "given 2 loaders"), "BatchSizeFinder: %s",
          volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_loader_destroy(la);
    volt_loader_destroy(lb);
}

/* fit over two val loaders: the sanity check per loader, a ModelCheckpoint on loader 1's loss
 * (its file in dirpath), the results table and progress lines per loader */
static int count_files(const char *dir, const char *part, bool *subdir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[1400];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) *subdir = true;
        else if (strstr(e->d_name, part)) n++;
    }
    if (d) closedir(d);
    return n;
}

static void test_fit_two(volt_dataset *dt, volt_dataset *da, volt_dataset *db) {
    char root[1024], dir[1100], out[1100], err[1100];
    snprintf(root, sizeof root, "%s/eval_loaders_fit", vtest_tmpdir());
    vtest_fresh_dir(root);
    snprintf(dir, sizeof dir, "%s/ck", root);
    snprintf(out, sizeof out, "%s/stdout.txt", root);
    snprintf(err, sizeof err, "%s/stderr.txt", root);
    volt_loader *lt = vtest_loader(dt, 4, true), *la = vtest_loader(da, 2, false), *lb = vtest_loader(db, 3, false);
    volt_loader *both[2] = { la, lb };
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 2;
    c.num_sanity_val_steps = 2;
    c.enable_model_summary = true;
    c.enable_progress_bar = true;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_checkpoint_config mc;
    volt_checkpoint_config_init(&mc);
    mc.dirpath = dir;
    mc.monitor = "val_loss/dataloader_idx_1";
    mc.filename = "{epoch}-{val_loss/dataloader_idx_1:.3f}";
    CHECK_OK(volt_add_model_checkpoint(t, &mc));
    cls m = { .fail_dl = -1 };
    fflush(stdout);
    int so = dup(STDOUT_FILENO), fd = open(out, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    int se = vtest_stderr_to(err);
    volt_status st = volt_trainer_fit_loaders(t, &cls_ops, &m, lt, both, 2, NULL);
    if (st >= 0) st = volt_trainer_validate_loaders(t, &cls_ops, &m, both, 2, NULL);
    char ebuf[16384];
    vtest_stderr_back(se, err, ebuf, sizeof ebuf);
    fflush(stdout);
    dup2(so, STDOUT_FILENO);
    close(so);
    CHECK(st >= 0, "fit over two val loaders: %s", volt_trainer_errmsg(t));
    CHECK(m.sanity_steps == 4, "the sanity check ran 2 batches of each loader, got %d", m.sanity_steps);
    bool subdir = false;
    CHECK(count_files(dir, "val_loss_dataloader_idx_1=", &subdir) == 1 && !subdir,
          "one best file named with loader 1's loss ('/' written '_'), no folder made");
    const char *best = volt_trainer_best_model_path(t);
    CHECK(best && strstr(best, "val_loss_dataloader_idx_1="), "best path %s", best ? best : "(none)");
    size_t n = 0;
    char *so_txt = (char *)vtest_slurp(out, &n);
    CHECK(so_txt && strstr(so_txt, "DataLoader 0") && strstr(so_txt, "DataLoader 1") &&
          strstr(so_txt, "val_loss/dataloader_idx_1"), "results table with a column per loader:\n%s", so_txt ? so_txt : "");
    free(so_txt);
    CHECK(strstr(ebuf, "Validation DataLoader 0: 4/4") && strstr(ebuf, "Validation DataLoader 1: 3/3"),
          "progress lines per loader:\n%s", ebuf);
    volt_trainer_destroy(t);
    volt_loader_destroy(lt);
    volt_loader_destroy(la);
    volt_loader_destroy(lb);
}

/* a datamodule of version 3: its val_loaders replace val_loader; a failing one is named */
typedef struct dm { volt_loader *l[2]; int fail; int asked_single; } dm;
static volt_loader *dm_one(void *self) { ((dm *)self)->asked_single++; return ((dm *)self)->l[0]; }
static int dm_many(void *self, volt_loader **out, int cap) {
    dm *d = self;
    if (d->fail) return VOLT_ERR_IO;
    if (cap < 2) return VOLT_ERR_INVALID_ARG;
    out[0] = d->l[0];
    out[1] = d->l[1];
    return 2;
}

static void test_datamodule(volt_dataset *dt, volt_dataset *da, volt_dataset *db) {
    dm d = { .l = { vtest_loader(da, 2, false), vtest_loader(db, 3, false) } };
    volt_loader *lt = vtest_loader(dt, 4, false);
    static volt_datamodule_ops ops;
    ops = (volt_datamodule_ops){ .version = VOLT_DATAMODULE_OPS_VERSION, .name = "two-val", .val_loader = dm_one,
                                 .val_loaders = dm_many, .test_loaders = dm_many };
    cls m = { .fail_dl = -1 };
    volt_trainer *t = trainer(vtest_tmpdir());
    CHECK_OK(volt_trainer_validate_dm(t, &cls_ops, &m, &ops, &d, NULL));
    CHECK(volt_trainer_metric(t, "val_loss/dataloader_idx_0", NULL) && volt_trainer_metric(t, "val_loss/dataloader_idx_1", NULL),
          "validate_dm ran both of val_loaders");
    CHECK(d.asked_single == 0, "val_loader is not asked when val_loaders is set");
    CHECK_OK(volt_trainer_test_dm(t, &cls_ops, &m, &ops, &d, NULL));
    CHECK(volt_trainer_metric(t, "test_loss/dataloader_idx_1", NULL), "test_dm ran test_loaders");
    d.fail = 1;
    volt_status st = volt_trainer_validate_dm(t, &cls_ops, &m, &ops, &d, NULL);
    CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), "val_loaders failed"), "failing val_loaders: %s",
          volt_trainer_errmsg(t));
    /* a version-2 table has no list hooks: its val_loader is the one loader */
    d.fail = 0;
    static volt_datamodule_ops v2;
    v2 = (volt_datamodule_ops){ .version = 2, .name = "v2", .val_loader = dm_one };
    CHECK_OK(volt_trainer_validate_dm(t, &cls_ops, &m, &v2, &d, NULL));
    CHECK(d.asked_single == 1, "version 2: val_loader asked");
    volt_trainer_destroy(t);
    volt_loader_destroy(lt);
    volt_loader_destroy(d.l[0]);
    volt_loader_destroy(d.l[1]);
}

int main(void) {
    vtest_check_accelerator();
    volt_dataset *dt = rows(24, 0), *da = rows(8, 100), *db = rows(7, 300);
    test_validate_two(da, db);
    test_test_predict_errors(da, db);
    test_fit_two(dt, da, db);
    test_datamodule(dt, da, db);
    volt_dataset_destroy(dt);
    volt_dataset_destroy(da);
    volt_dataset_destroy(db);
    return vtest_finish();
}
