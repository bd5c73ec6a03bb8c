/* Datamodules across ranks (trainer/datamodule.c): prepare_data runs on rank 0 alone, and every
 * other rank waits for it before its setup (Lightning's "download once, then every process
 * reads"); a prepare_data that fails on rank 0 ends every rank with the same error, at once.
 *
 *   mpirun -np N test_mpi_datamodule ok S     rank 0's prepare_data sleeps 0.4 s, then writes
 *       the file every rank's setup reads (a rank that did not wait finds no file and fails);
 *       fit_dm, validate_dm, test_dm and predict_dm, each with prepare_data on rank 0 only
 *       (counted per rank) and setup / teardown on every rank with the call's stage.
 *   mpirun -np N test_mpi_datamodule fail S   rank 0's prepare_data fails: every rank returns
 *       VOLT_ERR_IO naming it ("prepare_data failed" on rank 0; the others "on rank 0"),
 *       no rank calls setup, and no rank waits for the comm's timeout.
 *
 * A test_mpi_ program: registered only with its launches (tests/mpi_datamodule.cmake). */
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#ifdef VOLT_HAVE_MPI
#include "vtest_mpi.h"

static int g_rank, g_world;

typedef struct lin { volt_tensor *w, *b; } lin;
static volt_status lin_setup(void *self, volt_params *ps) {
    lin *m = self;
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(1, 4), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(1), VOLT_INIT_ZEROS, &m->b);
}
static volt_status lin_step(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    lin *m = self;
    volt_tensor *loss = volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b));
    VOLT_TRY(volt_log(s, "val_loss", loss, 0));
    return volt_step_set_loss(s, loss);
}
static volt_status lin_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    lin *m = self;
    *out = volt_linear(s, volt_batch_x(b), m->w, m->b);
    return VOLT_OK;
}
static volt_status lin_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}
static const volt_module_ops lin_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = lin_setup,
                                         .configure_optimizers = lin_opt, .training_step = lin_step,
                                         .validation_step = lin_step, .test_step = lin_step,
                                         .predict_step = lin_predict };

/* ---- the datamodule: rank 0 "downloads" (writes a file late), every rank's setup reads it ---- */
typedef struct {
    char path[600];     /* what prepare_data writes: one name per run (rank 0's pid) */
    bool fail;          /* prepare_data fails */
    int fail_list;      /* val_loaders (dm_ops2) fails on this rank (-1: none) */
    int prepared, setups, teardowns;
    volt_stage last_setup, last_teardown;
    volt_dataset *ds, *ds2;
    volt_loader *loader, *loader2;   /* loader2: the second of val_loaders (dm_ops2) */
} dm_state;

static volt_status dm_prepare(void *self) {
    dm_state *d = self;
    d->prepared++;
    usleep(400 * 1000);   /* a slow download: a rank that does not wait reads before the file exists */
    if (d->fail) return VOLT_ERR_IO;
    FILE *f = fopen(d->path, "w");
    if (!f) return VOLT_ERR_IO;
    fprintf(f, "%d\n", 8 * g_world);
    return fclose(f) == 0 ? VOLT_OK : VOLT_ERR_IO;
}

static volt_status dm_setup(void *self, volt_stage stage) {
    dm_state *d = self;
    d->setups++;
    d->last_setup = stage;
    if (d->loader) return VOLT_OK;
    FILE *f = fopen(d->path, "r");
    int n = 0;
    if (!f) return VOLT_ERR_IO;   /* rank 0's prepare_data has not run yet */
    if (fscanf(f, "%d", &n) != 1) n = 0;
    fclose(f);
    if (n <= 0) return VOLT_ERR_IO;
    if (!(d->ds = vtest_rows4(n)) || !(d->ds2 = vtest_rows4(3 * g_world + 1))) return VOLT_ERR_NOMEM;
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = 2;
    VOLT_TRY(volt_loader_create(&lc, d->ds2, &d->loader2));
    return volt_loader_create(&lc, d->ds, &d->loader);
}
static void dm_teardown(void *self, volt_stage stage) {
    dm_state *d = self;
    d->teardowns++;
    d->last_teardown = stage;
}
static volt_loader *dm_loader(void *self) { return ((dm_state *)self)->loader; }
static const volt_datamodule_ops dm_ops = {
    .version = VOLT_DATAMODULE_OPS_VERSION, .name = "slow-download", .prepare_data = dm_prepare, .setup = dm_setup,
    .train_loader = dm_loader, .val_loader = dm_loader, .test_loader = dm_loader, .predict_loader = dm_loader,
    .teardown = dm_teardown,
};
/* the same with two val loaders: the first, and 3 * world + 1 rows (the sampler pads a rank's) */
static int dm_two(void *self, volt_loader **out, int cap) {
    dm_state *d = self;
    if (cap < 2 || d->fail_list == g_rank) return VOLT_ERR_IO;
    out[0] = d->loader;
    out[1] = d->loader2;
    return 2;
}
static const volt_datamodule_ops dm_ops2 = {
    .version = VOLT_DATAMODULE_OPS_VERSION, .name = "slow-download", .prepare_data = dm_prepare, .setup = dm_setup,
    .train_loader = dm_loader, .val_loader = dm_loader, .val_loaders = dm_two, .teardown = dm_teardown,
};

/* v the same on every rank (bit for bit) */
static bool same_everywhere(double v) {
    double lo = v, hi = v;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

static volt_status count_pred(void *ctx, const volt_batch *b, const volt_tensor *pred) {
    *(int64_t *)ctx += b->size;
    return VOLT_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volt_trainer *make_trainer(const char *strategy) {
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.strategy = strategy;
    c.seed = 7;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer_create(%s): %s", strategy, t ? volt_trainer_errmsg(t) : volt_status_str(st));
    if (st < 0) { volt_trainer_destroy(t); return NULL; }
    return t;
}

/* one file name per run, the same on every rank: rank 0's pid */
static void run_path(dm_state *d) {
    int pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(d->path, sizeof d->path, "%s/datamodule_prepared.%d", vtest_tmpdir(), pid);
}

static void test_ok(const char *strategy) {
    dm_state d = { .fail_list = -1 };
    run_path(&d);
    volt_trainer *t = make_trainer(strategy);
    if (!t) return;
    lin m;
    const int want_prep = g_rank == 0;
    CHECK_OK(volt_trainer_fit_dm(t, &lin_ops, &m, &dm_ops, &d, NULL));
    CHECK(d.prepared == want_prep && d.setups == 1 && d.last_setup == VOLT_STAGE_FIT && d.teardowns == 1 &&
          d.last_teardown == VOLT_STAGE_FIT, "fit_dm on rank %d: prepare_data %d times (want %d), setup %d, teardown %d",
          g_rank, d.prepared, want_prep, d.setups, d.teardowns);
    CHECK(volt_trainer_global_step(t) == 4, "fit_dm: %lld steps (want 4: 8 rows a rank in batches of 2)",
          (long long)volt_trainer_global_step(t));
    CHECK_OK(volt_trainer_validate_dm(t, &lin_ops, &m, &dm_ops, &d, NULL));
    CHECK(d.prepared == 2 * want_prep && d.last_setup == VOLT_STAGE_VALIDATE && d.last_teardown == VOLT_STAGE_VALIDATE,
          "validate_dm on rank %d: prepare_data %d, stage %d/%d", g_rank, d.prepared, (int)d.last_setup,
          (int)d.last_teardown);
    double v = -1;
    CHECK(volt_trainer_metric(t, "val_loss", &v) && v >= 0, "validate_dm logged val_loss (%g)", v);
    CHECK_OK(volt_trainer_test_dm(t, &lin_ops, &m, &dm_ops, &d, NULL));
    CHECK(d.prepared == 3 * want_prep && d.last_setup == VOLT_STAGE_TEST, "test_dm on rank %d", g_rank);
    int64_t n = 0;
    CHECK_OK(volt_trainer_predict_dm(t, &lin_ops, &m, &dm_ops, &d, NULL, count_pred, &n));
    CHECK(d.prepared == 4 * want_prep && d.last_setup == VOLT_STAGE_PREDICT && d.setups == 4 && d.teardowns == 4,
          "predict_dm on rank %d", g_rank);
    CHECK(n == 8, "predict_dm on rank %d: %lld rows (this rank's share of %d)", g_rank, (long long)n, 8 * g_world);
    /* two val loaders (table version 3): each loader's mean over every rank, the first equal to
     * the single loader's val_loss above */
    CHECK_OK(volt_trainer_validate_dm(t, &lin_ops, &m, &dm_ops2, &d, NULL));
    double v0 = -1, v1 = -1;
    CHECK(volt_trainer_metric(t, "val_loss/dataloader_idx_0", &v0) && volt_trainer_metric(t, "val_loss/dataloader_idx_1", &v1),
          "rank %d: both loaders' val_loss", g_rank);
    CHECK(v0 == v, "rank %d: loader 0's val_loss %.9g is the single loader's %.9g", g_rank, v0, v);
    CHECK(same_everywhere(v1) && v1 != v0, "rank %d: loader 1's val_loss %.9g reduced across ranks", g_rank, v1);
    /* ranks with other numbers of loaders: every rank fails at once, naming the counts (a rank
     * running a loader's loop alone would wait in its collectives) */
    volt_loader *two[2] = { d.loader, d.loader2 };
    const double t0 = now_s();
    volt_status st = volt_trainer_validate_loaders(t, &lin_ops, &m, two, g_rank == 0 ? 2 : 1, NULL);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "1 to 2 evaluation loaders"), "rank %d: %s", g_rank,
          volt_trainer_errmsg(t));
    CHECK(now_s() - t0 < 5.0, "rank %d: the mismatch ended the call at once", g_rank);
    st = volt_trainer_validate_loaders(t, &lin_ops, &m, two, g_rank == 0 ? 2 : 0, NULL);   /* a rank with none */
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "0 to 2 evaluation loaders"), "rank %d: %s", g_rank,
          volt_trainer_errmsg(t));
    /* a datamodule whose val_loaders fails on one rank: every rank fails with its words */
    d.fail_list = g_world - 1;
    st = volt_trainer_validate_dm(t, &lin_ops, &m, &dm_ops2, &d, NULL);
    CHECK(st == VOLT_ERR_IO && strstr(volt_trainer_errmsg(t), "val_loaders failed"), "rank %d: %s", g_rank,
          volt_trainer_errmsg(t));
    d.fail_list = -1;
    CHECK(now_s() - t0 < 8.0, "rank %d: the failures ended the calls at once", g_rank);
    CHECK_OK(volt_trainer_validate_loaders(t, &lin_ops, &m, two, 2, NULL));   /* the ranks still agree after it */
    volt_trainer_destroy(t);
    volt_loader_destroy(d.loader);
    volt_loader_destroy(d.loader2);
    volt_dataset_destroy(d.ds);
    volt_dataset_destroy(d.ds2);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) unlink(d.path);
}

static void test_fail(const char *strategy) {
    dm_state d = { .fail = true, .fail_list = -1 };
    run_path(&d);
    volt_trainer *t = make_trainer(strategy);
    if (!t) return;
    lin m;
    double t0 = now_s();
    volt_status st = volt_trainer_fit_dm(t, &lin_ops, &m, &dm_ops, &d, NULL);
    double dt = now_s() - t0;
    const char *e = volt_trainer_errmsg(t);
    CHECK(st == VOLT_ERR_IO && strstr(e, "datamodule 'slow-download': prepare_data failed"), "rank %d: %s (%s)", g_rank,
          e, volt_status_str(st));
    if (g_rank > 0) CHECK(strstr(e, "on rank 0") != NULL, "rank %d names the rank that failed: %s", g_rank, e);
    CHECK(d.setups == 0 && d.teardowns == 0 && d.prepared == (g_rank == 0), "rank %d: setup %d, teardown %d, prepare %d",
          g_rank, d.setups, d.teardowns, d.prepared);
    CHECK(dt < 5.0, "rank %d learnt of the failure in %.2f s (the comm's timeout is 20 s)", g_rank, dt);
    CHECK(volt_trainer_global_step(t) == 0, "no training");
    volt_trainer_destroy(t);
}
#endif

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifndef VOLT_HAVE_MPI
    (void)argc;
    (void)argv;
    VTEST_SKIP("built without MPI (apt-get install libopenmpi-dev openmpi-bin)");
#else
    if (argc < 3) {
        fprintf(stderr, "usage: mpirun -np N test_mpi_datamodule ok|fail STRATEGY\n");
        return 2;
    }
    const int skip = vtest_mpi_start(&argc, &argv, &g_rank, &g_world);
    if (skip) return skip;
    if (!strcmp(argv[1], "ok")) test_ok(argv[2]);
    else if (!strcmp(argv[1], "fail")) test_fail(argv[2]);
    else {
        fprintf(stderr, "unknown mode '%s'\n", argv[1]);
        MPI_Finalize();
        return 2;
    }
    return vtest_mpi_finish();
#endif
}
