/* Callbacks across ranks: the collectives for callbacks (volt_trainer_reduce_boolean_decision,
 * volt_trainer_broadcast_bool) and ModelCheckpoint's train_time_interval, whose decision is
 * rank 0's clock's on every rank.
 *
 *   mpirun -np N test_mpi_callbacks collective S      S a distributed strategy (ddp): any / all
 *       with the ranks disagreeing, rank 0's value broadcast; then rank 0 alone calls (the
 *       others never do): VOLT_ERR_TIMEOUT after the comm's timeout (1 s here), the trainer's
 *       message naming the call, and the broken comm answers the next call at once.
 *   mpirun -np N test_mpi_callbacks time_interval S   the ranks' clocks run at different speeds
 *       (a clock the test moves: rank 0 1 s a batch, rank 1 0.25 s, others 3 s; rank 1 also
 *       sleeps longer in real time): every rank saves at the steps rank 0's clock gives (3, 6,
 *       9, 12 for 2.5 s), no hang (under a sharded strategy the save is collective). Then on
 *       the real clock with rank 1 slower: every rank saves at the same steps, at least once.
 *
 *   mpirun -np N test_mpi_callbacks interrupt S    rank 1 alone gets SIGTERM during a batch of
 *       epoch 1: every rank stops at the same optimizer step with VOLT_ERR_INTERRUPTED (the
 *       others say "on another rank"), OnExceptionCheckpoint saves (collective under a sharded
 *       strategy), and a fit resumed from that file ends with the uninterrupted run's weights.
 *
 *   mpirun -np N test_mpi_callbacks interrupt_eval S   rank 1 alone raises SIGTERM inside an
 *       evaluation step at batch 2 (of 100 per rank): in fit's validation, its sanity check (batch
 *       1), and standalone validate / test / predict. Every rank returns VOLT_ERR_INTERRUPTED
 *       naming the loop and the batch, every rank ran the same steps, none waited for the comm's
 *       timeout; in fit OnExceptionCheckpoint saved, ModelCheckpoint(val_loss) ranked nothing and
 *       the file resumes to the uninterrupted weights. Then each rank a dataset of its own (5 + 2r
 *       batches): no hang, a stop after batch 2, and a signal past batch 4 acted on at the end.
 *
 *   mpirun -np N test_mpi_callbacks throughput S   ThroughputMonitor with each rank's clock at its
 *       own speed (rank r: 0.5 (r + 1) s a batch): every rank logs its own device rates and
 *       totals, and the global keys are the device's times N (Lightning's rule: the ranks are
 *       taken to be alike); the per-rank totals summed are N times a rank's (equal shards).
 *
 *   mpirun -np N test_mpi_callbacks unwritable S   a ModelCheckpoint dirpath, then the logger's
 *       folder, under a regular file: every rank fails at fit start with rank 0's message, no
 *       epoch begun, in well under the comm's timeout; a dirpath rank 1 does not see (it moves it
 *       away before its probe: ranks without a shared file system): a sharded strategy fails every
 *       rank with rank 1's message, ddp (rank 0 writes) trains; then a fit into a fine folder on
 *       every rank leaves no test file there.
 *
 * A test_mpi_ program: registered only with its launches (tests/mpi_callbacks.cmake). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "callbacks/model_checkpoint.h"
#include "callbacks/throughput_monitor.h"
#include "trainer/trainer_internal.h"   /* volt__write_check_set_hook */
#include "volt/safetensors.h"
#ifdef VOLT_HAVE_MPI
#include "vtest_mpi.h"

enum { BS = 2 /* per rank */, NB = 4 /* batches per epoch */, EPOCHS = 3 };

static int g_rank, g_world;

/* ---- a linear model on 4 features ---------------------------------------------------------------- */
typedef struct lin { volt_tensor *w, *b; } lin;

static volt_status lin_setup(void *self, volt_params *ps) {
    lin *m = self;
    VOLT_TRY(volt_param_new(ps, "fc.weight", VOLT_SHAPE(1, 4), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "fc.bias", VOLT_SHAPE(1), VOLT_INIT_ZEROS, &m->b);
}
static volt_status lin_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    lin *m = self;
    return volt_step_set_loss(s, volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b)));
}
static volt_status lin_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    return VOLT_OK;
}
static const volt_module_ops lin_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = lin_setup,
                                         .configure_optimizers = lin_opt, .training_step = lin_train };

static volt_dataset *make_data(void) { return vtest_rows4(g_world * BS * NB); }

/* ReduceLROnPlateau over ranks: a monitored value that differs per rank (rank 0: never better;
 * the others: better every epoch); every rank steps with rank 0's, so every lr is the same. */
static volt_status plat_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.01f;
    o->use_scheduler = true;
    o->scheduler.kind = VOLT_SCHED_PLATEAU;
    o->scheduler.interval = VOLT_SCHED_EVERY_EPOCH;
    o->scheduler.monitor = "rank_score";
    o->scheduler.patience = 0;
    o->scheduler.factor = 0.5f;
    return VOLT_OK;
}
static volt_status plat_epoch_end(void *self, volt_trainer *t) {
    const double e = (double)volt_trainer_current_epoch(t);
    return volt_trainer_log_metric(t, "rank_score", g_rank == 0 ? 1.0 : 1.0 - 0.1 * e, VOLT_LOG_EPOCH);
}
static const volt_module_ops plat_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = lin_setup,
                                          .configure_optimizers = plat_opt, .training_step = lin_train,
                                          .on_train_epoch_end = plat_epoch_end };

static volt_trainer *make_trainer(const char *strategy, const char *root) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = EPOCHS;
    c.strategy = strategy;
    c.seed = 7;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer_create(%s): %s", strategy, t ? volt_trainer_errmsg(t) : volt_status_str(st));
    if (st < 0) { volt_trainer_destroy(t); return NULL; }
    return t;
}

/* Every rank has the same text. */
static bool same_everywhere(const char *s) {
    uint64_t h = 1469598103934665603ull, lo, hi;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

/* ---- strategy "auto" in a launched job ---------------------------------------------------------------- */
/* In a job mpirun started: "auto" is ddp over every process (Lightning's auto picks DDP for several),
 * and "single" trains alone on each, which launched rank 0 warns about (once per job). */
static void test_auto_strategy(void) {
    char errpath[600], err[4096], want[256];
    snprintf(errpath, sizeof errpath, "%s/auto_stderr_%d.txt", vtest_tmpdir(), g_rank);
    int saved = vtest_stderr_to(errpath);
    volt_trainer *s = make_trainer("single", vtest_tmpdir());
    vtest_stderr_back(saved, errpath, err, sizeof err);
    CHECK(s && volt_trainer_world_size(s) == 1, "rank %d: single: a world of its own", g_rank);
    snprintf(want, sizeof want, "volt: warning: strategy 'single' in a job of %d launched processes: each trains alone", g_world);
    CHECK(g_rank == 0 ? strstr(err, want) != NULL : strstr(err, "warning: strategy") == NULL,
          "rank %d: the warning on launched rank 0 alone: %s", g_rank, err);
    volt_trainer_destroy(s);
    volt_trainer *a = make_trainer("auto", vtest_tmpdir());
    CHECK(a && !strcmp(volt_trainer_get_config(a)->strategy, "ddp") && volt_trainer_world_size(a) == g_world,
          "rank %d: auto is ddp over the %d processes (%s, world %d)", g_rank, g_world,
          a ? volt_trainer_get_config(a)->strategy : "-", a ? volt_trainer_world_size(a) : 0);
    volt_trainer_destroy(a);
}

/* ---- the collectives -------------------------------------------------------------------------------- */
/* lin with the evaluation steps (vlin_ops, below); see vl_count */
typedef struct vlin {
    lin m;
    int64_t calls, raise_at, skip;
    bool raised;
} vlin;
static const volt_module_ops vlin_ops;
static int64_t g_val_batches;
static volt_status count_val(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)t; (void)b; (void)i;
    g_val_batches++;
    return VOLT_OK;
}
static volt_status add_val_counter(volt_trainer *t) {
    static const volt_callback_ops ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "ValCount",
                                           .on_validation_batch_end = count_val };
    return volt_trainer_add_callback(t, &ops, NULL);
}

/* one epoch under strategy name, the loaders sharded or not */
static volt_trainer *sampler_trainer(const char *name, bool shard) {
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.strategy = name;
    c.use_distributed_sampler = shard;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    return t;
}

/* Lightning's reduce_fx across ranks: validation batch i of rank r logs VALS[i] + 10 r under one
 * name per reduce (and rank 0 alone "only0", by max); training_step logs synced step values r +
 * i / 8 by max and min, and 1 by sum (also as a step-and-epoch value). The epoch values fold every
 * rank's, exactly, each batch once; a synced step value is the ranks' max / min / sum at that step,
 * on every rank. */
enum { RV = 4 /* validation batches per rank */ };
static const double RVALS[RV] = { 3.5, -1.25, 8.0, 0.5 };
static int g_step_bad = -1;   /* the first training batch whose synced values were wrong */
static volt_status red_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    const double x = g_rank + (double)i / 8;
    VOLT_TRY(volt_log_value(s, "s_max", x, VOLT_LOG_STEP | VOLT_LOG_SYNC | VOLT_LOG_REDUCE_MAX));
    VOLT_TRY(volt_log_value(s, "s_min", x, VOLT_LOG_STEP | VOLT_LOG_SYNC | VOLT_LOG_REDUCE_MIN));
    VOLT_TRY(volt_log_value(s, "s_sum", 1.0, VOLT_LOG_STEP | VOLT_LOG_SYNC | VOLT_LOG_REDUCE_SUM));
    /* step and epoch, synced: the step value the ranks' sum, the epoch's every batch of every rank once */
    VOLT_TRY(volt_log_value(s, "e_sum", 1.0, VOLT_LOG_STEP | VOLT_LOG_EPOCH | VOLT_LOG_SYNC | VOLT_LOG_REDUCE_SUM));
    return lin_train(self, s, b, i);
}
static volt_status red_train_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    double mx = 0, mn = 0, sm = 0;
    const bool ok = volt_trainer_metric(t, "s_max", &mx) && volt_trainer_metric(t, "s_min", &mn) &&
                    volt_trainer_metric(t, "s_sum", &sm) && mx == g_world - 1 + (double)i / 8 && mn == (double)i / 8 &&
                    sm == g_world;
    if (!ok && g_step_bad < 0) {
        g_step_bad = (int)i;
        fprintf(stderr, "rank %d batch %lld: s_max %g s_min %g s_sum %g\n", g_rank, (long long)i, mx, mn, sm);
    }
    return VOLT_OK;
}
static volt_status red_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    const double v = RVALS[i % RV] + 10.0 * g_rank;
    VOLT_TRY(volt_log_value(s, "r_mean", v, 0));
    VOLT_TRY(volt_log_value(s, "r_sum", v, VOLT_LOG_REDUCE_SUM));
    VOLT_TRY(volt_log_value(s, "r_max", v, VOLT_LOG_REDUCE_MAX));
    VOLT_TRY(volt_log_value(s, "r_min", v, VOLT_LOG_REDUCE_MIN));
    return g_rank == 0 ? volt_log_value(s, "only0", v, VOLT_LOG_REDUCE_MAX) : VOLT_OK;
}
static const volt_module_ops red_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = lin_setup,
                                         .configure_optimizers = lin_opt, .training_step = red_train,
                                         .validation_step = red_val, .on_train_batch_end = red_train_end };

static void test_log_reduce(const char *name) {
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    if (!t) return;
    volt_dataset *tr = make_data(), *va = vtest_rows4(g_world * BS * RV);
    volt_loader *lt = vtest_loader(tr, BS, false), *lv = vtest_loader(va, BS, false);
    lin m;
    CHECK_OK(volt_trainer_fit(t, &red_ops, &m, lt, lv, NULL));
    CHECK(g_step_bad < 0, "rank %d: synced step values by max / min / sum wrong from batch %d", g_rank, g_step_bad);
    const double W = g_world;
    double mean = 0, sum = 0, mx = 0, mn = 0, o = 0;
    CHECK(volt_trainer_metric(t, "r_mean", &mean) && volt_trainer_metric(t, "r_sum", &sum) &&
          volt_trainer_metric(t, "r_max", &mx) && volt_trainer_metric(t, "r_min", &mn) &&
          volt_trainer_metric(t, "only0", &o), "rank %d: the epoch metrics", g_rank);
    CHECK(sum == W * 10.75 + 40 * W * (W - 1) / 2 && mx == 8 + 10 * (W - 1) && mn == -1.25 && o == 8.0 &&
          fabs(mean - (2.6875 + 5 * (W - 1))) < 1e-12, "rank %d of %d: mean %.17g (want %g), sum %.17g (want %g), max %g, "
          "min %g, only0 %g (want 8)", g_rank, g_world, mean, 2.6875 + 5 * (W - 1), sum, W * 10.75 + 20 * W * (W - 1), mx,
          mn, o);
    double es = 0, ee = 0;
    CHECK(volt_trainer_metric(t, "e_sum_step", &es) && volt_trainer_metric(t, "e_sum_epoch", &ee) && es == W && ee == W * NB,
          "rank %d: a synced step-and-epoch sum: step %g (want %g), epoch %g (want %g: each batch once)", g_rank, es, W, ee,
          W * NB);
    volt_loader_destroy(lt);
    volt_loader_destroy(lv);
    volt_dataset_destroy(tr);
    volt_dataset_destroy(va);
    volt_trainer_destroy(t);
}

static void test_collective(const char *name) {
    test_auto_strategy();
    test_log_reduce(name);
    volt_trainer *t = make_trainer(name, vtest_tmpdir());
    if (!t) return;
    const int W = g_world, last = W - 1;
    /* each case: this rank's decision from its rank */
    for (int c = 0; c < 5; c++) {
        bool mine[8], any = false, every = true;
        for (int r = 0; r < W && r < 8; r++) {
            mine[r] = c == 0 ? true : c == 1 ? false : c == 2 ? r == 0 : c == 3 ? r == last : (r % 2) == 1;
            any |= mine[r];
            every &= mine[r];
        }
        bool a = !every, o = !any, b = !mine[0];
        CHECK_OK(volt_trainer_reduce_boolean_decision(t, mine[g_rank], true, &a));
        CHECK_OK(volt_trainer_reduce_boolean_decision(t, mine[g_rank], false, &o));
        CHECK_OK(volt_trainer_broadcast_bool(t, mine[g_rank], &b));
        CHECK(a == every && o == any && b == mine[0], "case %d, rank %d (of %d) says %d: all %d (want %d), any %d (want %d), "
              "broadcast %d (want rank 0's %d)", c, g_rank, W, mine[g_rank], a, every, o, any, b, mine[0]);
    }
    /* bytes from each rank in turn (volt_trainer_broadcast): every rank holds the root's */
    for (int r = 0; r < W; r++) {
        int64_t v[3] = { g_rank, 100 + g_rank, -g_rank };
        CHECK_OK(volt_trainer_broadcast(t, v, sizeof v, r));
        CHECK(v[0] == r && v[1] == 100 + r && v[2] == -r, "broadcast from rank %d: rank %d holds %lld %lld %lld", r, g_rank,
              (long long)v[0], (long long)v[1], (long long)v[2]);
    }
    /* past the comm's 64 KiB piece: 300,000 bytes from the last rank, whole on every rank */
    enum { BIG = 300000 };
    unsigned char *big = malloc(BIG);
    CHECK(big != NULL, "out of memory");
    if (big) {
        for (int i = 0; i < BIG; i++) big[i] = (unsigned char)(g_rank == last ? (i * 7 + 3) & 0xff : 0);
        CHECK_OK(volt_trainer_broadcast(t, big, BIG, last));
        int bad = -1;
        for (int i = 0; i < BIG && bad < 0; i++)
            if (big[i] != (unsigned char)((i * 7 + 3) & 0xff)) bad = i;
        CHECK(bad < 0, "a 300,000-byte broadcast from rank %d: rank %d differs at byte %d", last, g_rank, bad);
        free(big);
    }
    /* all_gather: every rank's three numbers, in rank order; then 100,000 bytes each (past the
     * 64 KiB piece), the send buffer being the rank's own slot */
    {
        int64_t mine[3] = { g_rank, 100 + g_rank, -7 * g_rank }, all[3 * 8];
        memset(all, 0xff, sizeof all);
        CHECK_OK(volt_trainer_all_gather(t, mine, sizeof mine, all));
        int bad = -1;
        for (int r = 0; r < W && r < 8 && bad < 0; r++)
            if (all[3 * r] != r || all[3 * r + 1] != 100 + r || all[3 * r + 2] != -7 * r) bad = r;
        CHECK(bad < 0, "all_gather: rank %d holds a wrong slot for rank %d", g_rank, bad);
        enum { EACH = 100000 };
        unsigned char *g = malloc((size_t)EACH * (size_t)W);
        CHECK(g != NULL, "out of memory");
        if (g) {
            for (int i = 0; i < EACH; i++) g[(size_t)g_rank * EACH + (size_t)i] = (unsigned char)((i * 13 + g_rank * 5) & 0xff);
            CHECK_OK(volt_trainer_all_gather(t, g + (size_t)g_rank * EACH, EACH, g));
            long wrong = -1;
            for (int r = 0; r < W && wrong < 0; r++)
                for (int i = 0; i < EACH && wrong < 0; i++)
                    if (g[(size_t)r * EACH + (size_t)i] != (unsigned char)((i * 13 + r * 5) & 0xff)) wrong = (long)r * EACH + i;
            CHECK(wrong < 0, "all_gather of %d bytes a rank: rank %d differs at byte %ld", EACH, g_rank, wrong);
            free(g);
        }
        /* all_reduce over 5000 values (several blocks): value i of rank r is r + i * 0.25, and
         * the last rank's value 7 is NaN; sum, mean, max and min, the same bits on every rank */
        enum { NV = 5000 };
        double *v = malloc(sizeof *v * NV);
        CHECK(v != NULL, "out of memory");
        for (int op = 0; v && op < 4; op++) {
            for (int i = 0; i < NV; i++) v[i] = g_rank + i * 0.25;
            if (g_rank == last) v[7] = NAN;
            CHECK_OK(volt_trainer_all_reduce(t, v, NV, (volt_reduce_op)op));
            int badi = -1;
            for (int i = 0; i < NV && badi < 0; i++) {
                double sum = 0;
                for (int r = 0; r < W; r++) sum += r + i * 0.25;
                const double want = op == VOLT_REDUCE_SUM ? sum : op == VOLT_REDUCE_MEAN ? sum / W
                                  : op == VOLT_REDUCE_MAX ? last + i * 0.25 : i * 0.25;
                if (i == 7 ? !isnan(v[i]) : v[i] != want) badi = i;
            }
            CHECK(badi < 0, "all_reduce op %d: rank %d value %d is %g", op, g_rank, badi, badi >= 0 ? v[badi] : 0.0);
            uint64_t h = 1469598103934665603ull;
            const unsigned char *p = (const unsigned char *)v;
            for (size_t i = 0; i < sizeof *v * NV; i++) h = (h ^ p[i]) * 1099511628211ull;
            uint64_t lo, hi;
            MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
            MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
            CHECK(lo == hi, "all_reduce op %d: the ranks hold different bits", op);
        }
        free(v);
        double neg = 1;
        CHECK(volt_trainer_all_reduce(t, &neg, -1, VOLT_REDUCE_SUM) == VOLT_ERR_INVALID_ARG, "a negative count accepted");
        CHECK(volt_trainer_all_gather(t, NULL, 8, all) == VOLT_ERR_INVALID_ARG, "a NULL send buffer accepted");
    }
    int64_t one = 7;
    CHECK(volt_trainer_broadcast(t, &one, sizeof one, W) == VOLT_ERR_INVALID_ARG && one == 7 &&
          strstr(volt_trainer_errmsg(t), "no such root"), "a root past the ranks: %s", volt_trainer_errmsg(t));
    CHECK(volt_trainer_broadcast(t, NULL, 8, 0) == VOLT_ERR_INVALID_ARG, "a NULL buffer accepted");
    volt_trainer_destroy(t);

    /* ReduceLROnPlateau: rank 0's value on every rank (3 epochs: best 1, then bad, bad: patience 0
     * reduces after epochs 1 and 2: 0.01 -> 0.005 -> 0.0025); the others' own would keep 0.01 */
    {
        t = make_trainer(name, vtest_tmpdir());
        volt_dataset *ds = make_data();
        volt_loader *l = vtest_loader(ds, BS, false);
        lin m;
        CHECK_OK(volt_trainer_fit(t, &plat_ops, &m, l, NULL, NULL));
        const float lr = volt_optimizer_lr(volt_trainer_optimizer(t));
        float all[8] = { 0 };
        CHECK_OK(volt_trainer_all_gather(t, &lr, sizeof lr, all));
        for (int r = 0; r < W && r < 8; r++)
            CHECK(all[r] == 0.0025f, "ReduceLROnPlateau: rank %d's lr %g (want rank 0's decisions: 0.0025)", r, (double)all[r]);
        volt_loader_destroy(l);
        volt_dataset_destroy(ds);
        volt_trainer_destroy(t);
    }

    /* use_distributed_sampler: true (the default) cuts the loader into the rank's NB batches of
     * the W x NB; false leaves each rank all W x NB of it */
    for (int shard = 1; shard >= 0; shard--) {
        t = sampler_trainer(name, shard);
        volt_dataset *ds = make_data();
        volt_loader *l = vtest_loader(ds, BS, false);
        lin m = { 0 };
        CHECK_OK(add_val_counter(t));
        CHECK_OK(volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL));
        const int64_t want = shard ? NB : (int64_t)W * NB;
        CHECK(volt_trainer_num_train_batches(t) == want && volt_trainer_global_step(t) == want,
              "use_distributed_sampler=%d: rank %d ran %lld batches, %lld steps (want %lld)", shard, g_rank,
              (long long)volt_trainer_num_train_batches(t), (long long)volt_trainer_global_step(t), (long long)want);
        g_val_batches = 0;
        vlin vm = { .raise_at = -1 };
        CHECK_OK(volt_trainer_validate(t, &vlin_ops, &vm, l, NULL));
        CHECK(g_val_batches == want, "use_distributed_sampler=%d: rank %d validated %lld batches (want %lld)", shard, g_rank,
              (long long)g_val_batches, (long long)want);
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
        volt_dataset_destroy(ds);
    }
    /* unsharded loaders of other lengths (the last rank's one batch longer): fit refuses on every rank */
    {
        t = sampler_trainer(name, false);
        volt_dataset *ds = vtest_rows4(BS * NB + (g_rank == last ? BS : 0));
        volt_loader *l = vtest_loader(ds, BS, false);
        lin m = { 0 };
        volt_status st = volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL);
        CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "yield 4 to 5 batches an epoch") &&
              volt_trainer_global_step(t) == 0, "uneven unsharded loaders: rank %d: %s (%s)", g_rank, volt_status_str(st),
              volt_trainer_errmsg(t));
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
        volt_dataset_destroy(ds);
    }

    /* rank 0 calls alone: a timeout, not a hang; then the broken comm fails at once. The ranks
     * meet first: the 1 s timeout also bounds the comm's creation in make_trainer */
    MPI_Barrier(MPI_COMM_WORLD);
    setenv("VOLT_COMM_TIMEOUT", "1", 1);
    t = make_trainer(name, vtest_tmpdir());
    if (t && g_rank == 0) {
        bool out = true;
        double t0 = vtest_now();
        volt_status st = volt_trainer_broadcast_bool(t, false, &out);
        double el = vtest_now() - t0;
        const char *e = volt_trainer_errmsg(t);
        CHECK(st == VOLT_ERR_TIMEOUT && out && strstr(e, "volt_trainer_broadcast_bool: sync across ranks failed") &&
              strstr(e, "timed out"), "rank 0 alone: %s after %.2f s: %s", volt_status_str(st), el, e);
        CHECK(el >= 0.9 && el < 10, "timed out after %.2f s (timeout 1 s)", el);
        t0 = vtest_now();
        st = volt_trainer_reduce_boolean_decision(t, true, true, &out);
        el = vtest_now() - t0;
        e = volt_trainer_errmsg(t);
        CHECK(st < 0 && strstr(e, "volt_trainer_reduce_boolean_decision: sync across ranks failed") && el < 0.9,
              "the next call on the broken comm: %s after %.2f s: %s", volt_status_str(st), el, e);
        printf("rank 0: %s\n", e);
    }
    volt_trainer_destroy(t);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- ModelCheckpoint(train_time_interval) --------------------------------------------------------- */
/* At each batch start: this rank's clock moves (and rank 1 sleeps longer); "best" (no monitor:
 * the latest save) is read, so `steps` lists the step of each save as this rank's callback
 * made it. Added before the ModelCheckpoint (checkpointing callbacks run last). */
typedef struct probe {
    double now, adv, sleep_s;
    char steps[256];
    char last_best[1024];
} probe;
static void probe_note(probe *p, const volt_trainer *t) {
    const char *b = volt_trainer_best_model_path(t);
    if (!b || !strcmp(b, p->last_best)) return;
    snprintf(p->last_best, sizeof p->last_best, "%s", b);
    const char *s = strstr(b, "step=");
    snprintf(p->steps + strlen(p->steps), sizeof p->steps - strlen(p->steps), "%s%lld", p->steps[0] ? "," : "",
             s ? atoll(s + 5) : -1ll);
}
static volt_status probe_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    probe *p = self;
    probe_note(p, t);
    p->now += p->adv;
    if (p->sleep_s > 0) usleep((useconds_t)(p->sleep_s * 1e6));
    return VOLT_OK;
}
static const volt_callback_ops probe_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "ClockProbe",
                                             .on_train_batch_start = probe_batch_start };
static double probe_now(void *ctx) { return ((probe *)ctx)->now; }

/* A fit with train_time_interval = iv on every rank; fake: this rank's probe is its clock. */
static volt_status tti_fit(const char *name, const char *dir, double iv, bool fake, probe *p) {
    volt_dataset *ds = make_data();
    volt_loader *l = vtest_loader(ds, BS, false);
    volt_trainer *t = make_trainer(name, dir);
    volt_status st = t ? volt_trainer_add_callback(t, &probe_ops, p) : VOLT_ERR_STATE;
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.filename = "{step}";
    cc.save_top_k = -1;
    cc.train_time_interval = iv;
    if (st >= 0) st = volt__add_model_checkpoint_clock(t, &cc, fake ? probe_now : NULL, p);
    lin m = { 0 };
    if (st >= 0) st = volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL);
    if (st < 0) printf("rank %d: fit: %s: %s\n", g_rank, volt_status_str(st), t ? volt_trainer_errmsg(t) : "");
    if (t) probe_note(p, t);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
    return st;
}

static void test_time_interval(const char *name) {
    char dir[2][1024];
    for (int k = 0; k < 2; k++) {
        snprintf(dir[k], sizeof dir[k], "%s/tti_%s_np%d_%d", vtest_tmpdir(), name, g_world, k);
        if (g_rank == 0) vtest_fresh_dir(dir[k]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* clocks the test moves, at other speeds on each rank: rank 0's decides */
    probe p = { .now = 1000.0 * g_rank, .adv = g_rank == 0 ? 1.0 : g_rank == 1 ? 0.25 : 3.0, .sleep_s = g_rank == 1 ? 0.02 : 0 };
    volt_status st = tti_fit(name, dir[0], 2.5, true, &p);
    CHECK(st == VOLT_OK, "%s: rank %d: fit with the ranks' clocks apart", name, g_rank);
    CHECK(!strcmp(p.steps, "3,6,9,12"), "%s: rank %d saved at steps [%s], want rank 0's clock's [3,6,9,12]", name, g_rank, p.steps);
    CHECK(same_everywhere(p.steps), "%s: rank %d's saves [%s] differ from another rank's", name, g_rank, p.steps);
    /* the real clock, rank 1 slower */
    probe q = { .sleep_s = g_rank == 1 ? 0.03 : 0.01 };
    st = tti_fit(name, dir[1], 0.05, false, &q);
    CHECK(st == VOLT_OK, "%s: rank %d: fit on the real clock", name, g_rank);
    CHECK(q.steps[0] && same_everywhere(q.steps), "%s: rank %d: real clock: saves at [%s], the same on every rank, at least one",
          name, g_rank, q.steps);
    if (g_rank == 0) printf("%s np%d: fake clocks: saves at [%s]; real clock: [%s]\n", name, g_world, p.steps, q.steps);
}
/* ---- SIGTERM on one rank ------------------------------------------------------------------------------ */
static volt_status term_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    if (g_rank == 1 && volt_trainer_current_epoch(t) == 1 && i == 1) raise(SIGTERM);
    return VOLT_OK;
}
static const volt_callback_ops term_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Terminator",
                                            .on_train_batch_end = term_batch_end, .destroy = free };

static bool want_none(const char *name, void *ctx) { (void)name; (void)ctx; return false; }

static void weights(lin *m, float out[5]) {
    CHECK_OK(volt_tensor_to_host(m->w, out));
    CHECK_OK(volt_tensor_to_host(m->b, out + 4));
}

static void test_interrupt(const char *name) {
    char root[512], dir[600], path[700];
    snprintf(root, sizeof root, "%s/interrupt_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(dir, sizeof dir, "%s/ckpt", root);
    snprintf(path, sizeof path, "%s/on_exception.safetensors", dir);
    volt_dataset *ds = make_data();
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    lc.batch_size = BS;
    lc.shuffle = true;
    lc.seed = 3;
    volt_loader *l = NULL;
    CHECK_OK(volt_loader_create(&lc, ds, &l));
    float wa[5], wc[5];
    lin ma = { 0 }, mb = { 0 }, mc = { 0 };
    volt_trainer *ta = make_trainer(name, root);
    CHECK_OK(volt_trainer_fit(ta, &lin_ops, &ma, l, NULL, NULL));
    weights(&ma, wa);
    volt_trainer *tb = make_trainer(name, root);
    CHECK_OK(volt_trainer_add_callback(tb, &term_ops, calloc(1, 1)));
    CHECK_OK(volt_add_on_exception_checkpoint(tb, dir, NULL));
    /* an async ModelCheckpoint saving every step: the save in flight at the interruption is
     * finished and (sharded) committed, not discarded: last is the interrupted step's */
    char lastdir[600], last[700];
    snprintf(lastdir, sizeof lastdir, "%s/every_step", root);
    snprintf(last, sizeof last, "%s/last.safetensors", lastdir);
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = lastdir;
    cc.monitor = NULL;
    cc.save_top_k = 0;
    cc.save_last = true;
    cc.every_n_train_steps = 1;
    cc.async_save = true;
    CHECK_OK(volt_add_model_checkpoint(tb, &cc));
    char errpath[700], err[4096] = "";
    snprintf(errpath, sizeof errpath, "%s/rank0_stderr.txt", root);
    int saved = g_rank == 0 ? vtest_stderr_to(errpath) : -1;
    volt_status st = volt_trainer_fit(tb, &lin_ops, &mb, l, NULL, NULL);
    if (g_rank == 0) vtest_stderr_back(saved, errpath, err, sizeof err);
    const char *msg = volt_trainer_errmsg(tb);
    CHECK(st == VOLT_ERR_INTERRUPTED && volt_trainer_interrupted(tb) == SIGTERM, "rank %d: fit returned %s (%d): %s", g_rank,
          volt_status_str(st), volt_trainer_interrupted(tb), msg);
    /* rank 0, whose stderr users watch, did not get the signal and says so all the same */
    CHECK(g_rank != 0 || strstr(err, "volt: interrupted: SIGTERM on another rank: fit stopped after the optimizer step"),
          "rank 0's stderr lacks the note: [%s]", err);
    CHECK(strstr(msg, g_rank == 1 ? "SIGTERM (received)" : "SIGTERM (on another rank)"), "rank %d: %s", g_rank, msg);
    char where[64];
    snprintf(where, sizeof where, "%lld/%lld", (long long)volt_trainer_global_step(tb), (long long)volt_trainer_batch_in_epoch(tb));
    CHECK(volt_trainer_global_step(tb) == NB + 2 && same_everywhere(where), "rank %d stopped at step/batch %s", g_rank, where);
    CHECK(access(path, F_OK) == 0, "rank %d: no %s", g_rank, path);
    volt_trainer_destroy(tb);
    tb = NULL;
    if (g_rank == 0) {
        volt_st_file *f = NULL;
        char err[256] = "";
        st = volt_st_open_some(last, want_none, NULL, &f, err, sizeof err);
        const char *gs = st >= 0 ? volt_st_meta(f, "volt.global_step") : NULL;
        CHECK(gs && !strcmp(gs, "6"), "last.safetensors holds step %s (%s)", gs ? gs : "?", err);
        volt_st_close(f);
    }
    volt_trainer *tc = make_trainer(name, root);
    st = volt_trainer_fit(tc, &lin_ops, &mc, l, NULL, path);
    CHECK(st == VOLT_OK, "rank %d: resume: %s", g_rank, volt_trainer_errmsg(tc));
    weights(&mc, wc);
    CHECK(memcmp(wa, wc, sizeof wa) == 0, "rank %d: resumed weights differ from the uninterrupted run", g_rank);
    if (g_rank == 0) printf("%s np%d: stopped at step/batch %s on every rank; resumed to the same weights\n", name, g_world, where);
    volt_trainer_destroy(ta);
    volt_trainer_destroy(tb);
    volt_trainer_destroy(tc);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}
/* ---- SIGTERM on one rank during an evaluation loop --------------------------------------------------- */
enum { NV = 100 /* validation / test / predict batches per rank */ };
/* lin with the evaluation steps; each counts its calls, and rank 1 raises SIGTERM inside the
 * step of batch raise_at once more than skip calls have run (skip: the sanity check's) */
/* struct vlin: above test_collective */
static void vl_count(vlin *v, int64_t i) {
    v->calls++;
    if (g_rank == 1 && !v->raised && i == v->raise_at && v->calls > v->skip) {
        v->raised = true;
        raise(SIGTERM);
    }
}
static volt_status vl_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    vlin *v = self;
    vl_count(v, i);
    return volt_log(s, "val_loss", volt_mse(s, volt_linear(s, volt_batch_x(b), v->m.w, v->m.b), volt_batch_y(b)),
                    VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}
static volt_status vl_test(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    vlin *v = self;
    vl_count(v, i);
    return volt_log(s, "test_loss", volt_mse(s, volt_linear(s, volt_batch_x(b), v->m.w, v->m.b), volt_batch_y(b)),
                    VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}
static volt_status vl_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    vlin *v = self;
    vl_count(v, i);
    *out = volt_linear(s, volt_batch_x(b), v->m.w, v->m.b);
    return VOLT_OK;
}
static volt_status vl_out(void *ctx, const volt_batch *b, const volt_tensor *pred) { (void)ctx; (void)b; (void)pred; return VOLT_OK; }
static const volt_module_ops vlin_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "vlin", .setup = lin_setup,
                                          .configure_optimizers = lin_opt, .training_step = lin_train,
                                          .validation_step = vl_val, .test_step = vl_test, .predict_step = vl_predict };

/* An interrupted call: VOLT_ERR_INTERRUPTED with SIGTERM on every rank, the message naming where
 * (rank 1 received it, the others heard of it), every rank's step count alike, no wait for
 * the comm's timeout (20 s here). */
static void check_stop(const char *label, volt_trainer *t, volt_status st, double el, const char *where, int64_t calls,
                       int64_t want_calls) {
    const char *msg = volt_trainer_errmsg(t);
    char want[160], n[32];
    snprintf(want, sizeof want, "SIGTERM (%s): %s", g_rank == 1 ? "received" : "on another rank", where);
    CHECK(st == VOLT_ERR_INTERRUPTED && volt_trainer_interrupted(t) == SIGTERM && strstr(msg, want), "%s: rank %d: %s (%d): %s "
          "(want '%s')", label, g_rank, volt_status_str(st), volt_trainer_interrupted(t), msg, want);
    snprintf(n, sizeof n, "%lld", (long long)calls);
    CHECK(calls == want_calls && same_everywhere(n), "%s: rank %d ran %lld steps, want %lld on every rank", label, g_rank,
          (long long)calls, (long long)want_calls);
    CHECK(el < 10, "%s: rank %d took %.1f s (a rank waited for the comm's timeout?)", label, g_rank, el);
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static volt_trainer *eval_trainer_seed(const char *name, const char *root, uint64_t seed) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = EPOCHS;
    c.strategy = name;
    c.seed = seed;
    c.num_sanity_val_steps = 2;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer_create(%s): %s", name, t ? volt_trainer_errmsg(t) : volt_status_str(st));
    if (st < 0) { volt_trainer_destroy(t); return NULL; }
    return t;
}
static volt_trainer *eval_trainer(const char *name, const char *root) { return eval_trainer_seed(name, root, 7); }

/* fit: SIGTERM on rank 1 inside validation_step, batch 2 of the first validation (NV batches),
 * or of the sanity check (sanity): every rank stops after that batch, OnExceptionCheckpoint
 * saves, ModelCheckpoint(val_loss) ranks nothing, the file resumes to the uninterrupted run. */
static void eval_fit(const char *name, const char *root, volt_loader *tl, volt_loader *vl, const float wa[5], bool sanity) {
    char dir[600], path[700], mcdir[600];
    snprintf(dir, sizeof dir, "%s/%s", root, sanity ? "exc_sanity" : "exc");
    snprintf(path, sizeof path, "%s/on_exception.safetensors", dir);
    snprintf(mcdir, sizeof mcdir, "%s/%s", root, sanity ? "ranked_sanity" : "ranked");
    volt_trainer *tb = eval_trainer(name, root);
    if (!tb) return;
    CHECK_OK(volt_add_on_exception_checkpoint(tb, dir, NULL));
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = mcdir;
    cc.monitor = "val_loss";
    cc.save_top_k = 1;
    CHECK_OK(volt_add_model_checkpoint(tb, &cc));
    vlin mb = { .raise_at = sanity ? 1 : 2, .skip = sanity ? 0 : 2 };
    double t0 = vtest_now();
    volt_status st = volt_trainer_fit(tb, &vlin_ops, &mb, tl, vl, NULL);
    const double el = vtest_now() - t0;
    char where[96];
    snprintf(where, sizeof where, "%s after batch %d at epoch 0, step %d", sanity ? "the sanity check stopped" : "validation stopped",
             sanity ? 1 : 2, sanity ? 0 : NB);
    check_stop(sanity ? "fit, sanity check" : "fit, validation", tb, st, el, where, mb.calls, sanity ? 2 : 2 + 3);
    CHECK(access(path, F_OK) == 0, "rank %d: no %s", g_rank, path);
    const char *best = volt_trainer_best_model_path(tb);
    CHECK((!best || !best[0]) && count_files(mcdir) == 0, "rank %d: a partial validation ranked a checkpoint: best '%s', %d files in %s",
          g_rank, best ? best : "", count_files(mcdir), mcdir);
    volt_trainer_destroy(tb);
    if (sanity) {   /* the same stop in a fit from other weights: no step made, the file there is kept (every rank agrees) */
        size_t n0 = 0, n1 = 0;
        unsigned char *before = vtest_slurp(path, &n0);
        volt_trainer *t2 = eval_trainer_seed(name, root, 8);
        vlin m2 = { .raise_at = 1 };
        if (t2) CHECK_OK(volt_add_on_exception_checkpoint(t2, dir, NULL));
        st = t2 ? volt_trainer_fit(t2, &vlin_ops, &m2, tl, vl, NULL) : VOLT_ERR_STATE;
        unsigned char *after = vtest_slurp(path, &n1);
        CHECK(st == VOLT_ERR_INTERRUPTED && before && after && n0 == n1 && !memcmp(before, after, n0),
              "rank %d: a second sanity-check stop: %s; the file there %s", g_rank, volt_status_str(st),
              after && n0 == n1 && !memcmp(before, after, n0) ? "kept" : "replaced");
        free(before);
        free(after);
        volt_trainer_destroy(t2);
    }
    /* the file resumes before that validation, which runs again: the uninterrupted weights */
    volt_trainer *tc = eval_trainer(name, root);
    vlin mc = { .raise_at = -1 };
    st = tc ? volt_trainer_fit(tc, &vlin_ops, &mc, tl, vl, path) : VOLT_ERR_STATE;
    CHECK(st == VOLT_OK, "rank %d: resume: %s", g_rank, tc ? volt_trainer_errmsg(tc) : "");
    float wc[5];
    weights(&mc.m, wc);
    CHECK(memcmp(wa, wc, sizeof wc) == 0, "rank %d: resumed weights differ from the uninterrupted run", g_rank);
    volt_trainer_destroy(tc);
    if (g_rank == 0) printf("%s np%d: fit: %s on every rank in %.2f s; resumed to the same weights\n", name, g_world, where, el);
}

static void test_interrupt_eval(const char *name) {
    char root[512];
    snprintf(root, sizeof root, "%s/interrupt_eval_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *ds = make_data(), *vds = vtest_rows4(g_world * BS * NV);
    volt_loader *tl = vtest_loader(ds, BS, true), *vl = vtest_loader(vds, BS, false);
    /* the uninterrupted fit the resumed ones must end at */
    float wa[5];
    volt_trainer *ta = eval_trainer(name, root);
    vlin ma = { .raise_at = -1 };
    CHECK_OK(volt_trainer_fit(ta, &vlin_ops, &ma, tl, vl, NULL));
    weights(&ma.m, wa);
    CHECK(ma.calls == 2 + EPOCHS * NV, "rank %d: uninterrupted fit ran %lld validation steps", g_rank, (long long)ma.calls);
    volt_trainer_destroy(ta);
    eval_fit(name, root, tl, vl, wa, false);
    eval_fit(name, root, tl, vl, wa, true);

    /* standalone validate / test / predict, each signalled on rank 1 at batch 2 */
    volt_trainer *t = eval_trainer(name, root);
    vlin m = { .raise_at = -1 };   /* one module for the calls (the trainer keeps its weights) */
    if (t) {
        static const char *const what[3] = { "validation", "test", "predict" };
        for (int k = 0; k < 3; k++) {
            m.calls = 0;
            m.raised = false;
            m.raise_at = 2;
            const double t0 = vtest_now();
            volt_status st = k == 0 ? volt_trainer_validate(t, &vlin_ops, &m, vl, NULL)
                           : k == 1 ? volt_trainer_test(t, &vlin_ops, &m, vl, NULL)
                                    : volt_trainer_predict(t, &vlin_ops, &m, vl, NULL, vl_out, NULL);
            const double el = vtest_now() - t0;
            char where[64], label[32];
            snprintf(where, sizeof where, "%s stopped after batch 2 at epoch 0, step 0", what[k]);
            snprintf(label, sizeof label, "standalone %s", what[k]);
            check_stop(label, t, st, el, where, m.calls, 3);
            if (g_rank == 0) printf("%s np%d: %s: %s on every rank in %.2f s\n", name, g_world, label, where, el);
        }
        /* the record was consumed on every rank: the next call runs whole */
        m.calls = 0;
        m.raise_at = -1;
        CHECK(volt_trainer_validate(t, &vlin_ops, &m, vl, NULL) == VOLT_OK && m.calls == NV && volt_trainer_interrupted(t) == 0,
              "rank %d: a clean validate after the interruptions: %lld steps: %s", g_rank, (long long)m.calls, volt_trainer_errmsg(t));
    }
    volt_trainer_destroy(t);

    /* each rank its own dataset, rank r with 5 + 2r batches: the ranks vote after the batches
     * all of them run (5), and a signal past those is acted on when the call ends */
    const int nb = 5 + 2 * g_rank;
    volt_dataset *own = vtest_rows4(g_world * BS * nb);
    volt_loader *ol = vtest_loader(own, BS, false);
    t = eval_trainer(name, root);
    for (int k = 0; t && k < 3; k++) {
        m.calls = 0;
        m.raised = false;
        m.raise_at = k == 0 ? -1 : k == 1 ? 2 : 6;
        const double t0 = vtest_now();
        volt_status st = volt_trainer_validate(t, &vlin_ops, &m, ol, NULL);
        const double el = vtest_now() - t0;
        if (k == 0) {
            CHECK(st == VOLT_OK && m.calls == nb && el < 10, "rank %d: %d batches of its own: %s after %lld steps, %.1f s: %s", g_rank,
                  nb, volt_status_str(st), (long long)m.calls, el, volt_trainer_errmsg(t));
        } else if (k == 1) {
            check_stop("own datasets, batch 2", t, st, el, "validation stopped after batch 2 at epoch 0, step 0", m.calls, 3);
        } else {   /* batch 6: rank 1 alone runs it; every rank ran its whole loop */
            const char *msg = volt_trainer_errmsg(t);
            CHECK(st == VOLT_ERR_INTERRUPTED && strstr(msg, "validate had finished") && m.calls == nb && el < 10,
                  "rank %d: signal past the common batches: %s after %lld of %d steps, %.1f s: %s", g_rank, volt_status_str(st),
                  (long long)m.calls, nb, el, msg);
        }
    }
    if (g_rank == 0) printf("%s np%d: datasets of 5, 7, ... batches: clean, stopped after batch 2, and after the call\n", name, g_world);
    volt_trainer_destroy(t);
    volt_loader_destroy(ol);
    volt_dataset_destroy(own);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
    volt_dataset_destroy(ds);
    volt_dataset_destroy(vds);
}
static double metric_of(const volt_trainer *t, const char *name) {
    double v;
    return volt_trainer_metric(t, name, &v) ? v : NAN;
}

/* ---- evaluation datasets of unequal lengths, one rank's empty --------------------------------------- */
/* Rank r's evaluation batches: with `zero`, 0 / 2 / 5 by r % 3 (rank 0 has none); else 2 + 3r. */
static int64_t ucount(int r, bool zero) {
    static const int64_t z[3] = { 0, 2, 5 };
    return zero ? z[r % 3] : 2 + 3 * (int64_t)r;
}
/* Rank r's rows, all alike: x one-hot at r % 3 (the step's logits over 4 classes), label r % 2,
 * so its rows are hits when r % 3 == r % 2. BS * n of them per rank after the sampler's split. */
static volt_dataset *ucls_rows(int64_t nb) {
    const int64_t n = g_world * BS * nb;
    float *x = calloc((size_t)(4 * n + 1), sizeof *x);
    int64_t *y = calloc((size_t)n + 1, sizeof *y);
    volt_dataset *ds = NULL;
    if (x && y) {
        for (int64_t i = 0; i < n; i++) {
            x[i * 4 + g_rank % 3] = 1.0f;
            y[i] = g_rank % 2;
        }
        volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(4) }, { "y", VOLT_I64, VOLT_SCALAR } };
        const void *d[2] = { x, y };
        CHECK_OK(volt_dataset_from_arrays(2, f, d, n, &ds));
    }
    free(x);
    free(y);
    return ds;
}

/* Two units, so that fsdp gives the first back when a forward moves on to the second and the
 * next forward gathers it again (a collective in each evaluation step). The evaluation steps run
 * that forward, log <stage>_v = 10 rank + i (an epoch mean), <stage>_s the same as a step value
 * with VOLT_LOG_SYNC, and the classification metrics of the rows (accuracy, confusion matrix);
 * rank 1 raises SIGTERM in its batch raise_at. */
typedef struct ulin { vtest_mlp2 net; int64_t calls, raise_at; bool raised; } ulin;   /* net first: vtest_mlp2_setup */
static volt_tensor *ul_forward(ulin *u, volt_step *s, const volt_batch *b) { return vtest_mlp2_forward(&u->net, s, b); }
static volt_status ul_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_step_set_loss(s, volt_mse(s, ul_forward(self, s, b), volt_batch_y(b)));
}
static volt_status ul_step(ulin *u, volt_step *s, const volt_batch *b, int64_t i, const char *stage) {
    u->calls++;
    if (!ul_forward(u, s, b)) return volt_step_status(s);
    if (g_rank == 1 && !u->raised && i == u->raise_at) {
        u->raised = true;
        raise(SIGTERM);
    }
    char nm[32];
    const double v = 10.0 * g_rank + (double)i;
    snprintf(nm, sizeof nm, "%s_v", stage);
    VOLT_TRY(volt_log_value(s, nm, v, VOLT_LOG_EPOCH));
    snprintf(nm, sizeof nm, "%s_s", stage);
    VOLT_TRY(volt_log_value(s, nm, v, VOLT_LOG_STEP | VOLT_LOG_SYNC));
    return volt_classification_step(s, volt_batch_x(b), volt_batch_y(b), stage);
}
static volt_status ul_val(void *self, volt_step *s, const volt_batch *b, int64_t i) { return ul_step(self, s, b, i, "val"); }
static volt_status ul_test(void *self, volt_step *s, const volt_batch *b, int64_t i) { return ul_step(self, s, b, i, "test"); }
static volt_status ul_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    ulin *u = self;
    VOLT_TRY(ul_step(u, s, b, i, "predict"));
    *out = volt_batch_x(b);
    return VOLT_OK;
}
static const volt_module_ops ulin_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "ulin", .setup = vtest_mlp2_setup,
                                          .configure_optimizers = lin_opt, .training_step = ul_train,
                                          .validation_step = ul_val, .test_step = ul_test, .predict_step = ul_predict };

/* The stage's metrics on this rank against the hand count over every rank's batches. */
static void check_uneven_metrics(const char *label, const volt_trainer *t, const char *stage, bool zero) {
    double vsum = 0, rows = 0, hits = 0;
    int64_t want[16] = { 0 }, fewest = INT64_MAX;
    for (int r = 0; r < g_world; r++) {
        const int64_t n = ucount(r, zero);
        for (int64_t i = 0; i < n; i++) vsum += 10.0 * r + (double)i;
        rows += (double)(BS * n);
        hits += r % 3 == r % 2 ? (double)(BS * n) : 0;
        want[(r % 2) * 4 + r % 3] += BS * n;
        if (n < fewest) fewest = n;
    }
    char nm[32];
    snprintf(nm, sizeof nm, "%s_v", stage);
    const double v = metric_of(t, nm), want_v = vsum / (rows / BS);
    CHECK(fabs(v - want_v) < 1e-9, "%s: rank %d: %s = %.17g, want %.17g (the mean over every rank's batches)", label, g_rank, nm,
          v, want_v);
    snprintf(nm, sizeof nm, "%s_acc", stage);
    const double acc = metric_of(t, nm);
    CHECK(acc == hits / rows, "%s: rank %d: %s = %.17g, want %g/%g", label, g_rank, nm, acc, hits, rows);
    int C = 0;
    const int64_t *cm = NULL;
    const bool have = volt_trainer_confusion_matrix(t, stage, &C, &cm);
    CHECK(have && C == 4 && !memcmp(cm, want, sizeof want), "%s: rank %d: confusion matrix '%s': %s, %d classes", label, g_rank,
          stage, have ? "differs" : "none", C);
    /* the step value synced for the batches every rank runs, this rank's own past them */
    const int64_t n = ucount(g_rank, zero);
    snprintf(nm, sizeof nm, "%s_s", stage);
    const double st = metric_of(t, nm), last = (double)(n - 1);
    const double want_s = n - 1 < fewest ? 10.0 * (g_world - 1) / 2 + last : 10.0 * g_rank + last;
    CHECK(n == 0 || fabs(st - want_s) < 1e-9, "%s: rank %d: %s = %g after batch %lld, want %g", label, g_rank, nm, st,
          (long long)(n - 1), want_s);
}

static void test_uneven(const char *name) {
    char root[512], errpath[600];
    snprintf(root, sizeof root, "%s/uneven_%s_np%d", vtest_tmpdir(), name, g_world);
    snprintf(errpath, sizeof errpath, "%s/rank0_stderr.txt", root);
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *ds = make_data();
    volt_loader *tl = vtest_loader(ds, BS, true);
    for (int z = 1; z >= 0; z--) {
        const bool zero = z == 1;
        const int64_t n = ucount(g_rank, zero);
        int64_t fewest = INT64_MAX;
        for (int r = 0; r < g_world; r++) fewest = ucount(r, zero) < fewest ? ucount(r, zero) : fewest;
        volt_dataset *vds = ucls_rows(n);
        volt_loader *vl = vds ? vtest_loader(vds, BS, false) : NULL;
        CHECK(vl && volt_loader_num_batches(vl) == g_world * n, "rank %d: %lld own batches", g_rank, (long long)n);   /* before the split */
        const char *cfg = zero ? "batches 0/2/5" : "batches 2 + 3 rank";
        /* fit with the sanity check (2 batches) and a validation per epoch */
        volt_trainer *t = eval_trainer(name, root);
        ulin u = { .raise_at = -1 };
        double t0 = vtest_now();
        volt_status st = t ? volt_trainer_fit(t, &ulin_ops, &u, tl, vl, NULL) : VOLT_ERR_STATE;
        double el = vtest_now() - t0;
        const int64_t want_calls = (n < 2 ? n : 2) + EPOCHS * n;
        CHECK(st == VOLT_OK && u.calls == want_calls && el < 10, "%s: fit: rank %d: %s after %lld validation steps (want %lld), "
              "%.1f s: %s", cfg, g_rank, volt_status_str(st), (long long)u.calls, (long long)want_calls, el, t ? volt_trainer_errmsg(t) : "");
        if (t) check_uneven_metrics("fit", t, "val", zero);
        if (g_rank == 0) printf("%s np%d, %s: fit with the sanity check in %.2f s\n", name, g_world, cfg, el);
        /* validate, test, predict */
        for (int k = 0; t && k < 3; k++) {
            static const char *const what[3] = { "validate", "test", "predict" };
            u.calls = 0;
            t0 = vtest_now();
            st = k == 0 ? volt_trainer_validate(t, &ulin_ops, &u, vl, NULL)
               : k == 1 ? volt_trainer_test(t, &ulin_ops, &u, vl, NULL)
                        : volt_trainer_predict(t, &ulin_ops, &u, vl, NULL, vl_out, NULL);
            el = vtest_now() - t0;
            CHECK(st == VOLT_OK && u.calls == n && el < 10, "%s: %s: rank %d: %s after %lld of %lld steps, %.1f s: %s", cfg, what[k],
                  g_rank, volt_status_str(st), (long long)u.calls, (long long)n, el, volt_trainer_errmsg(t));
            if (k < 2) check_uneven_metrics(what[k], t, k == 0 ? "val" : "test", zero);
            if (g_rank == 0) printf("%s np%d, %s: %s in %.2f s\n", name, g_world, cfg, what[k], el);
        }
        volt_trainer_destroy(t);
        /* SIGTERM on rank 1 in its batch 1: after it every rank stops when all of them run
         * batch 1, else (a rank has fewer) every rank ends its loop and the call says so */
        t = eval_trainer(name, root);
        u = (ulin){ .raise_at = 1 };
        int saved = g_rank == 0 ? vtest_stderr_to(errpath) : -1;
        t0 = vtest_now();
        st = t ? volt_trainer_validate(t, &ulin_ops, &u, vl, NULL) : VOLT_ERR_STATE;
        el = vtest_now() - t0;
        char err[4096] = "";
        if (g_rank == 0) vtest_stderr_back(saved, errpath, err, sizeof err);
        const bool voted = fewest > 1;
        const char *where = voted ? "validation stopped after batch 1" : "validate had finished";
        if (voted) {
            char full[96];
            snprintf(full, sizeof full, "%s at epoch 0, step 0", where);
            check_stop(cfg, t, st, el, full, u.calls, 2);
        } else {
            const char *msg = t ? volt_trainer_errmsg(t) : "";
            CHECK(st == VOLT_ERR_INTERRUPTED && strstr(msg, where) && u.calls == n && el < 10, "%s: rank %d: signal: %s after %lld of "
                  "%lld steps, %.1f s: %s", cfg, g_rank, volt_status_str(st), (long long)u.calls, (long long)n, el, msg);
        }
        if (g_rank == 0) {   /* rank 0 did not get the signal: it says so all the same */
            char note[160];
            snprintf(note, sizeof note, "volt: interrupted: SIGTERM on another rank: %s", where);
            CHECK(strstr(err, note), "%s: rank 0's stderr lacks '%s': [%s]", cfg, note, err);
            printf("%s np%d, %s: SIGTERM on rank 1: %s, every rank, in %.2f s\n", name, g_world, cfg, where, el);
        }
        volt_trainer_destroy(t);
        if (!zero) {   /* a fraction that leaves rank 0's 2 batches none (int(0.3 x 2)): every rank fails with its words */
            volt_trainer_config c;
            vtest_quiet_config(&c, root);
            c.strategy = name;
            c.limit_val_fraction = 0.3;
            t = NULL;
            CHECK_OK(volt_trainer_create(&c, &t));
            u = (ulin){ .raise_at = -1 };
            t0 = vtest_now();
            st = t ? volt_trainer_validate(t, &ulin_ops, &u, vl, NULL) : VOLT_ERR_STATE;
            el = vtest_now() - t0;
            const char *msg = t ? volt_trainer_errmsg(t) : "";
            char want[64];
            snprintf(want, sizeof want, "(rank 0 of %d; every rank stops)", g_world);
            CHECK(st == VOLT_ERR_INVALID_ARG && strstr(msg, "limit_val_batches=0.3 of the loader's 2 batches") && strstr(msg, want) &&
                  u.calls == 0 && el < 10, "rank %d: a fraction too small for rank 0: %s after %lld steps, %.1f s: %s", g_rank,
                  volt_status_str(st), (long long)u.calls, el, msg);
            if (g_rank == 0) printf("%s np%d, %s: limit_val_fraction 0.3: every rank: %s\n", name, g_world, cfg, msg);
            volt_trainer_destroy(t);
        }
        volt_loader_destroy(vl);
        volt_dataset_destroy(vds);
    }
    volt_loader_destroy(tl);
    volt_dataset_destroy(ds);
}
/* ---- ThroughputMonitor ---------------------------------------------------------------------------- */
static void test_throughput(const char *name) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tput_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *ds = make_data();
    volt_loader *l = vtest_loader(ds, BS, false);
    volt_trainer_config c;
    vtest_quiet_config(&c, dir);
    c.max_epochs = EPOCHS;
    c.strategy = name;
    c.log_every_n_steps = 2;   /* 12 steps: logs after 2, 4, ..., 12 */
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    probe p = { .now = 100, .adv = 0.5 * (g_rank + 1) };
    volt_throughput_config tc;
    volt_throughput_config_init(&tc);
    tc.window_size = 3;
    volt_status st = t ? volt_trainer_add_callback(t, &probe_ops, &p) : VOLT_ERR_STATE;
    if (st >= 0) st = volt__add_throughput_monitor_clock(t, &tc, probe_now, &p);
    lin m = { 0 };
    if (st >= 0) st = volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_OK, "%s: rank %d: fit: %s", name, g_rank, t ? volt_trainer_errmsg(t) : "");
    if (st == VOLT_OK) {
        const double dev_sps = metric_of(t, "train/device/samples_per_sec"), dev_bps = metric_of(t, "train/device/batches_per_sec");
        CHECK(dev_sps == BS / p.adv && dev_bps == 1 / p.adv, "%s: rank %d: device %g samples/s, %g batches/s (its clock: %g, %g)",
              name, g_rank, dev_sps, dev_bps, BS / p.adv, 1 / p.adv);
        CHECK(metric_of(t, "train/samples_per_sec") == g_world * dev_sps && metric_of(t, "train/batches_per_sec") == g_world * dev_bps,
              "%s: rank %d: global = device x %d: %g samples/s", name, g_rank, g_world, metric_of(t, "train/samples_per_sec"));
        const double samples = metric_of(t, "train/samples");
        double sum = 0;
        MPI_Allreduce(&samples, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        CHECK(samples == BS * NB * EPOCHS && sum == g_world * samples, "%s: rank %d: %g samples here, %g on all ranks", name,
              g_rank, samples, sum);
        if (g_rank == 0) printf("%s np%d: rank 0: %g samples/s on the device, %g global; %g samples over the ranks\n", name, g_world,
                                dev_sps, metric_of(t, "train/samples_per_sec"), sum);
    }
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}
/* ---- SpikeDetection across ranks --------------------------------------------------------------------
 * Rank 1's loss at its fourth batch (epoch 0, batch 3) is 1e6x: rank 1 sees the spike, every rank
 * fails with the same words at that batch end (no rank left waiting: well within the comm's
 * timeout), rank 0 writes [2, 3] to the skip file, and only the rank that saw it prints its loss. */
static int g_spike_calls;
static volt_status spiky_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    lin *m = self;
    volt_tensor *loss = volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b));
    if (g_rank == 1 && ++g_spike_calls == 4) loss = volt_scale(s, loss, 1e6f);
    return volt_step_set_loss(s, loss);
}
static void test_spike(const char *name) {
    char dir[1024], file[1200], err[4096] = "";
    snprintf(dir, sizeof dir, "%s/spike_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *ds = make_data();
    volt_loader *l = vtest_loader(ds, BS, false);
    volt_trainer *t = make_trainer(name, dir);
    volt_module_ops ops = lin_ops;
    ops.training_step = spiky_train;
    lin m = { 0 };
    char errpath[1200];
    snprintf(errpath, sizeof errpath, "%s/stderr_%d.txt", dir, g_rank);
    volt_spike_detection_config sc;
    volt_spike_detection_config_init(&sc);
    sc.rtol = 1000;   /* the data's own ups and downs (up to 20x at these few rows) are no spike; 1e6x is */
    volt_status st = t ? volt_add_spike_detection(t, &sc) : VOLT_ERR_STATE;
    if (st >= 0) st = volt_add_on_exception_checkpoint(t, dir, NULL);   /* the ranks agree on a spike: it saves */
    const double t0 = MPI_Wtime();
    const int saved = vtest_stderr_to(errpath);
    if (st >= 0) st = volt_trainer_fit(t, &ops, &m, l, NULL, NULL);
    vtest_stderr_back(saved, errpath, err, sizeof err);
    const double el = MPI_Wtime() - t0;
    const char *msg = t ? volt_trainer_errmsg(t) : "";
    CHECK(st == VOLT_ERR_NUMERIC && strstr(msg, "Training spike detected in batch 3 of epoch 0 (step 4)") && el < 15,
          "%s: rank %d: %s (%s) after %.1f s", name, g_rank, volt_status_str(st), msg, el);
    /* every rank decided alike on the all-reduced loss: an agreed error, which one rank says */
    CHECK(t && volt_trainer_error_agreed(t), "%s: rank %d: the spike's error is not marked agreed", name, g_rank);
    CHECK((strstr(err, "SpikeDetection: rank 1: batch 3: loss") != NULL) == (g_rank == 1), "%s: rank %d printed: %s", name,
          g_rank, err);
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(file, sizeof file, "%s/skip_batches.json", dir);
    size_t n;
    unsigned char *js = vtest_slurp(file, &n);
    CHECK(js && !strcmp((const char *)js, "[\n    2,\n    3\n]"), "%s: rank %d: skip_batches.json: %s", name, g_rank,
          js ? (const char *)js : "(none)");
    free(js);
    snprintf(file, sizeof file, "%s/on_exception.safetensors", dir);
    CHECK(access(file, R_OK) == 0 && (g_rank != 0 || strstr(err, "OnExceptionCheckpoint: saved")),
          "%s: rank %d: no on-exception checkpoint after the agreed spike (%s): %s", name, g_rank, file, err);
    if (g_rank == 0) printf("spike %s np%d: every rank stopped at batch 3 (%.2f s)\n", name, g_world, el);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

/* ---- folders checked at fit start ------------------------------------------------------------------
 * A checkpoint or log folder the writing rank cannot write fails every rank before the first batch,
 * with the same message, well within the comm's timeout (20 s here); the folder is unwritable for
 * root too (its parent is a regular file). */
static volt_status count_epoch(void *self, volt_trainer *t) {
    (void)t;
    ++*(int *)self;
    return VOLT_OK;
}
static const volt_callback_ops count_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "EpochCounter",
                                             .on_train_epoch_start = count_epoch };

/* One fit: a ModelCheckpoint at dirpath (NULL: none), the logger when `logger`; *epochs counts the
 * train epochs begun, *el the seconds fit took. */
static volt_status wd_fit(const char *name, const char *root, const char *dirpath, bool logger, int *epochs, double *el,
                          char *msg, size_t cap) {
    volt_dataset *ds = make_data();
    volt_loader *l = vtest_loader(ds, BS, false);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 1;
    c.strategy = name;
    c.enable_logger = logger;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    if (st >= 0) st = volt_trainer_add_callback(t, &count_ops, epochs);
    if (st >= 0 && dirpath) {
        volt_checkpoint_config cc;
        volt_checkpoint_config_init(&cc);
        cc.dirpath = dirpath;
        cc.save_last = true;
        st = volt_add_model_checkpoint(t, &cc);
    }
    lin m = { 0 };
    double t0 = vtest_now();
    if (st >= 0) st = volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL);
    *el = vtest_now() - t0;
    snprintf(msg, cap, "%s", t ? volt_trainer_errmsg(t) : volt_status_str(st));
    if (st < 0) printf("rank %d: fit after %.2f s: %s: %s\n", g_rank, *el, volt_status_str(st), msg);
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
    return st;
}

/* Every rank failed alike, fast, before any epoch: the message starts with `head` and names the
 * rank that found it. */
static void wd_expect_refused(const char *label, volt_status st, double el, int epochs, const char *msg, const char *head,
                              int found) {
    char tail[96];
    snprintf(tail, sizeof tail, "(rank %d of %d found it; no rank trained)", found, g_world);
    CHECK(st == VOLT_ERR_IO && strstr(msg, head) == msg && strstr(msg, tail),
          "%s, rank %d: %s: '%s', want VOLT_ERR_IO '%s...%s'", label, g_rank, volt_status_str(st), msg, head, tail);
    CHECK(epochs == 0, "%s, rank %d: %d epochs began, want none", label, g_rank, epochs);
    CHECK(el < 5, "%s, rank %d: failed after %.2f s (the comm's timeout is 20 s): a rank waited", label, g_rank, el);
    CHECK(same_everywhere(msg), "%s: the ranks' messages differ (rank %d: '%s')", label, g_rank, msg);
}

/* Rank 1 moves the folder away before its probe (as if it saw another file system). */
typedef struct wd_away { const char *dir, *away; bool taken; } wd_away;
static void wd_take_away(const char *dir, int rank, void *ctx) {
    wd_away *a = ctx;
    if (rank != 1 || strcmp(dir, a->dir) != 0) return;
    a->taken = rename(a->dir, a->away) == 0;
}

static void test_unwritable(const char *name) {
    char root[600], file[700], bad[800], badroot[800], head[1200], msg[1024], mine[800], shared[800];
    snprintf(root, sizeof root, "%s/unwritable_%s_np%d", vtest_tmpdir(), name, g_world);
    snprintf(file, sizeof file, "%s/file", root);
    snprintf(bad, sizeof bad, "%s/ckpts", file);
    snprintf(badroot, sizeof badroot, "%s/root", file);
    if (g_rank == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        CHECK(system(cmd) == 0 && mkdir(root, 0755) == 0, "making %s", root);
        FILE *f = fopen(file, "w");
        if (f) { fputs("a file where a folder is expected", f); fclose(f); }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const bool sharded = strcmp(name, "ddp") != 0;
    int epochs = 0;
    double el = 0;

    /* the checkpoint folder: rank 0 (which creates it) finds it; every rank stops with its words */
    volt_status st = wd_fit(name, root, bad, false, &epochs, &el, msg, sizeof msg);
    snprintf(head, sizeof head, "ModelCheckpoint: cannot write to dirpath '%s': Not a directory (checked at fit start)", bad);
    wd_expect_refused("dirpath under a file", st, el, epochs, msg, head, 0);

    /* the logger's folder (rank 0 writes the logs): its on_fit_start failed on rank 0 alone; the
     * other ranks no longer go on to wait in their first collective */
    epochs = 0;
    st = wd_fit(name, badroot, NULL, true, &epochs, &el, msg, sizeof msg);
    wd_expect_refused("log folder under a file", st, el, epochs, msg, "CSVLogger.on_fit_start: CSVLogger: cannot create directory", 0);

    /* a folder rank 1 does not see (ranks that do not share the file system): rank 1 takes it
     * away just before its probe. Sharded checkpoints: every rank writes its shard there, so rank 1
     * probes it and every rank stops with rank 1's words; ddp: rank 0 writes every checkpoint,
     * rank 1 probes nothing and the fit trains. */
    snprintf(shared, sizeof shared, "%s/ckpt", root);
    snprintf(mine, sizeof mine, "%s/ckpt_rank1_away", root);
    wd_away a = { .dir = shared, .away = mine };
    volt__write_check_set_hook(wd_take_away, &a);
    epochs = 0;
    st = wd_fit(name, root, shared, false, &epochs, &el, msg, sizeof msg);
    volt__write_check_set_hook(NULL, NULL);
    if (g_rank == 1 && a.taken) CHECK(rename(mine, shared) == 0, "putting %s back", shared);
    if (sharded) {
        snprintf(head, sizeof head, "ModelCheckpoint: cannot write to dirpath '%s': No such file or directory (checked at fit "
                 "start: rank 1 writes its shard files there; do the ranks share this file system?)", shared);
        wd_expect_refused("a folder rank 1 does not see", st, el, epochs, msg, head, 1);
        CHECK(g_rank != 1 || a.taken, "sharded, rank 1 never probed the checkpoint folder");
    } else {
        CHECK(st == VOLT_OK && epochs == 1 && !a.taken, "ddp, rank %d: rank 1 does not write checkpoints, yet fit: %s (%d epochs, "
              "rank 1 probed: %d)", g_rank, msg, epochs, a.taken);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* then every rank fits together with a fine folder: none was left in a collective, and no
     * test file is left behind */
    epochs = 0;
    st = wd_fit(name, root, shared, false, &epochs, &el, msg, sizeof msg);
    CHECK(st == VOLT_OK && epochs == 1, "rank %d: fit into a fine folder after the failures: %s", g_rank, msg);
    MPI_Barrier(MPI_COMM_WORLD);
    DIR *d = opendir(shared);
    int hidden = 0, last = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        hidden += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        last += !strcmp(e->d_name, "last.safetensors");
    }
    if (d) closedir(d);
    CHECK(d && hidden == 0 && last == 1, "rank %d: %s holds %d hidden files and %d last.safetensors, want 0 and 1", g_rank, shared,
          hidden, last);
}
/* ---- a save that fails mid-fit, on rank 0 alone ---------------------------------------------------- */
/* Rank 0 replaces the checkpoint folder by a regular file after step 3: its next write fails (a
 * full disk would do the same). Unsharded (ddp), rank 0 alone writes: every rank must still stop
 * at that save point, at once, not wait in its next collective until the comm's timeout (20 s). */
typedef struct sf_ctx { const char *dir; int64_t at; bool done; } sf_ctx;
static volt_status sf_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    sf_ctx *c = self;
    if (g_rank != 0 || c->done || volt_trainer_global_step(t) != c->at) return VOLT_OK;
    c->done = true;
    /* moved aside first (atomic): a background save may still be writing into it, and an rm -rf
     * racing that writer can find the folder not empty; the writer's files land in the moved one */
    char gone[900], cmd[1000];
    snprintf(gone, sizeof gone, "%s.gone", c->dir);
    CHECK(rename(c->dir, gone) == 0, "moving %s aside: %s", c->dir, strerror(errno));
    FILE *f = fopen(c->dir, "w");
    CHECK(f != NULL, "a file at %s", c->dir);
    if (f) fclose(f);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' 2>/dev/null", gone);   /* best effort: the root is emptied on the next run */
    const int rc = system(cmd);
    (void)rc;
    return VOLT_OK;
}
static const volt_callback_ops sf_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Saboteur",
                                          .on_train_batch_end = sf_batch_end };

/* A fresh root (rank 0 empties it) and a trainer saving every 2 steps, all top-k (and last), into
 * <root>/ckpt (dir), sync or in the background: the set-up of save_fails, discard and agreements. */
static volt_trainer *ckpt_every2_trainer(const char *name, const char *root, const char *dir, bool async, bool save_last) {
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = EPOCHS;
    c.strategy = name;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_checkpoint_config cc;
    volt_checkpoint_config_init(&cc);
    cc.dirpath = dir;
    cc.save_top_k = -1;
    cc.every_n_train_steps = 2;
    cc.async_save = async;
    cc.save_last = save_last;
    CHECK_OK(volt_add_model_checkpoint(t, &cc));
    return t;
}

static void test_save_fails(const char *name) {
    for (int async = 0; async < 2; async++) {
        char root[700], dir[800];
        snprintf(root, sizeof root, "%s/save_fails_%s_np%d_%d", vtest_tmpdir(), name, g_world, async);
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        volt_trainer *t = ckpt_every2_trainer(name, root, dir, async, false);
        volt_dataset *ds = make_data();
        volt_loader *l = vtest_loader(ds, BS, false);
        sf_ctx sc = { .dir = dir, .at = 3 };
        CHECK_OK(volt_trainer_add_callback(t, &sf_ops, &sc));
        lin m = { 0 };
        double t0 = vtest_now();
        volt_status st = volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL);
        double el = vtest_now() - t0;
        const char *e = volt_trainer_errmsg(t);
        printf("rank %d (%s): fit after %.2f s at step %lld: %s: %s\n", g_rank, async ? "async" : "sync", el,
               (long long)volt_trainer_global_step(t), volt_status_str(st), e);
        /* sync: the save at step 4 fails; async: step 2's background write if it was still going at
         * step 3 (found at step 4's save point), else step 4's (found at step 6's) */
        const int64_t gs = volt_trainer_global_step(t);
        CHECK(st < 0 && (gs == 4 || (async && gs == 6)), "%s rank %d: %s at step %lld, want a failure at step 4%s",
              async ? "async" : "sync", g_rank, volt_status_str(st), (long long)gs, async ? " or 6" : "");
        int64_t lo = gs, hi = gs;
        MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
        CHECK(lo == hi, "the ranks stopped at steps %lld to %lld", (long long)lo, (long long)hi);
        /* sharded, every rank writes its shard into the folder: rank 1 may find it gone itself,
         * when it opens its file (a file stands where the folder was) or, the folder moved aside
         * after its open, when it renames the file into place */
        const bool own = strcmp(name, "ddp") != 0 && (strstr(e, "Not a directory") || strstr(e, "No such file or directory"));
        if (g_rank > 0)
            CHECK(st == VOLT_ERR_IO && (strstr(e, "failed on another rank (its log has the reason)") ||
                                        strstr(e, "another rank could not") || strstr(e, "rank 0 could not") || own),
                  "%s rank %d names the other rank's failure: %s", async ? "async" : "sync", g_rank, e);
        CHECK(el < 5, "%s rank %d: failed after %.2f s (the comm's timeout is 20 s): a rank waited", async ? "async" : "sync",
              g_rank, el);
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
        volt_dataset_destroy(ds);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}
/* ---- a sharded background save never committed ------------------------------------------------------ */
/* The fit fails (a batch hook, on every rank) while step 2's background save is written and not
 * yet committed (the commit is at the next save point): destroying the trainer discards every
 * rank's shard file and the shard folder, and no index appears: nothing half-made is left. */
typedef struct dc_ctx { int64_t at; } dc_ctx;
static volt_status dc_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    dc_ctx *c = self;
    if (volt_trainer_global_step(t) == c->at) return volt_trainer_fail(t, VOLT_ERR_NUMERIC, "a loss went NaN (on purpose)");
    return VOLT_OK;
}
static const volt_callback_ops dc_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Failer",
                                          .on_train_batch_start = dc_batch_start };

static void test_discard(const char *name) {
    char root[700], dir[800];
    snprintf(root, sizeof root, "%s/discard_%s_np%d", vtest_tmpdir(), name, g_world);
    snprintf(dir, sizeof dir, "%s/ckpt", root);
    volt_trainer *t = ckpt_every2_trainer(name, root, dir, true, false);
    volt_dataset *ds = make_data();
    volt_loader *l = vtest_loader(ds, BS, false);
    dc_ctx dcx = { .at = 3 };
    CHECK_OK(volt_trainer_add_callback(t, &dc_ops, &dcx));
    lin m = { 0 };
    volt_status st = volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL);
    CHECK(st == VOLT_ERR_NUMERIC && volt_trainer_global_step(t) == 3, "rank %d: the fit fails at step 3: %s at %lld (%s)",
          g_rank, volt_status_str(st), (long long)volt_trainer_global_step(t), volt_trainer_errmsg(t));
    volt_trainer_destroy(t);   /* the uncommitted save is discarded here */
    MPI_Barrier(MPI_COMM_WORLD);
    int entries = 0;
    char seen[1024] = "";
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        entries++;
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s ", e->d_name);
    }
    if (d) closedir(d);
    CHECK(entries == 0, "rank %d: the uncommitted save left [%s] in %s", g_rank, seen, dir);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}
/* ---- what a save point costs in agreements ------------------------------------------------------- */
/* ModelCheckpoint's all-reduces (volt_trainer_reduce_boolean_decision, counted in trainer/
 * collective.c) while training: every 2 steps, top-k and last, 3 epochs of 4 steps: 6 save points
 * (the epoch ends fall on saved steps), two agreements each (before the writes: the join, the
 * bookkeeping and both folders; after them: the save), sync and async alike. Before: four (the
 * join, the top-k folder, last's folder, the save). */
typedef struct ag_ctx { int64_t at_start, at_end; } ag_ctx;
static volt_status ag_train_start(void *self, volt_trainer *t) { ((ag_ctx *)self)->at_start = t->decisions; return VOLT_OK; }
static volt_status ag_train_end(void *self, volt_trainer *t) { ((ag_ctx *)self)->at_end = t->decisions; return VOLT_OK; }
static const volt_callback_ops ag_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "AgreementCounter",
                                          .on_train_start = ag_train_start, .on_train_end = ag_train_end };

static void test_agreements(const char *name) {
    for (int async = 0; async < 2; async++) {
        char root[700], dir[800];
        snprintf(root, sizeof root, "%s/agreements_%s_np%d_%d", vtest_tmpdir(), name, g_world, async);
        snprintf(dir, sizeof dir, "%s/ckpt", root);
        volt_trainer *t = ckpt_every2_trainer(name, root, dir, async, true);
        volt_dataset *ds = make_data();
        volt_loader *l = vtest_loader(ds, BS, false);
        ag_ctx ac = { -1, -1 };
        CHECK_OK(volt_trainer_add_callback(t, &ag_ops, &ac));
        lin m = { 0 };
        CHECK_OK(volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL));
        CHECK(volt_trainer_global_step(t) == EPOCHS * NB, "%lld steps", (long long)volt_trainer_global_step(t));
        const int64_t n = ac.at_end - ac.at_start, saves = EPOCHS * NB / 2;
        CHECK(n == 2 * saves, "%s rank %d: %lld agreements over %lld save points, want 2 each", async ? "async" : "sync", g_rank,
              (long long)n, (long long)saves);
        char last[900];
        snprintf(last, sizeof last, "%s/last.safetensors", dir);
        CHECK(g_rank != 0 || access(last, F_OK) == 0, "%s: no %s", async ? "async" : "sync", last);
        volt_trainer_destroy(t);
        volt_loader_destroy(l);
        volt_dataset_destroy(ds);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}
#endif /* VOLT_HAVE_MPI */

/* ---- one rank alone fails: every rank stops at once, in the same words ------------------------------ */
/* (a) a callback fails its on_fit_start on rank 0 alone, before a Timer with a limit: the Timer
 * makes no collective there, so the ranks meet in the fit-start agreement; (c) a datamodule whose
 * load_state_dict rejects its state on rank 1 alone: agreed. Each ends every rank with the agreed
 * error well inside the comm's timeout (20 s here). (A finder's header read on a resume is agreed
 * too, but the ranks resolve one path, rank 0's: no rank here can fail to see it alone.) */
static volt_status r0_fail_fit_start(void *self, volt_trainer *t) {
    (void)self;
    return volt_trainer_rank(t) == 0 ? volt_trainer_fail(t, VOLT_ERR_IO, "R0Fail: rank 0 cannot open its file") : VOLT_OK;
}
typedef struct rdm { volt_loader *l; } rdm;
static volt_loader *rdm_train(void *self) { return ((rdm *)self)->l; }
static char *rdm_state(void *self) { (void)self; return strdup("{\"k\":1}"); }
static volt_status rdm_load(void *self, const char *json) {
    (void)self; (void)json;
    return g_rank == 1 ? VOLT_ERR_CORRUPT : VOLT_OK;
}
static char g_rdm_ck[1200];
static volt_status rdm_save(void *self, volt_trainer *t) { (void)self; return volt_trainer_save_checkpoint(t, g_rdm_ck); }

static volt_status slow_rank0(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self; (void)t; (void)b; (void)i;
    if (g_rank == 0) usleep(20000);
    return VOLT_OK;
}

static void expect_agreed(volt_trainer *t, volt_status st, double el, const char *words, const char *what) {
    const char *msg = t ? volt_trainer_errmsg(t) : "";
    CHECK(st < 0 && strstr(msg, words) && volt_trainer_error_agreed(t) && el < 10 && same_everywhere(msg),
          "%s: rank %d: %s after %.2f s: %s (agreed %d)", what, g_rank, volt_status_str(st), el, msg,
          t ? (int)volt_trainer_error_agreed(t) : -1);
}

static int rl_calls;
static volt_loader *rl_train(void *self) {   /* the last rank has none at the first reload */
    return rl_calls++ > 0 && g_rank == g_world - 1 ? NULL : ((rdm *)self)->l;
}

/* rank 1 skips the rest of epoch 0 from its batch 1 */
static volt_status skip_rank1(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)self;
    (void)b;
    return g_rank == 1 && volt_trainer_current_epoch(t) == 0 && i >= 1 ? VOLT_SKIP_EPOCH : VOLT_OK;
}

static int g_cfgcb_fit_starts;
static bool g_cfgcb_ok;
static volt_status cfgcb_fit_start(void *self, volt_trainer *t) { (void)self; (void)t; g_cfgcb_fit_starts++; return VOLT_OK; }
static volt_status cfgcb_last_fails(void *self, volt_trainer *t) {
    (void)self;
    static const volt_callback_ops ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "ModuleCb", .on_fit_start = cfgcb_fit_start };
    VOLT_TRY(volt_trainer_add_callback(t, &ops, NULL));
    return g_rank == g_world - 1 && !g_cfgcb_ok ? volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "the last rank has no callbacks") : VOLT_OK;
}

static void test_one_rank(const char *name) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/one_rank_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *ds = make_data();
    volt_loader *l = vtest_loader(ds, BS, false);
    /* (a) */
    volt_trainer *t = make_trainer(name, dir);
    const volt_callback_ops r0 = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "R0Fail", .on_fit_start = r0_fail_fit_start };
    volt_timer_config tc;
    volt_timer_config_init(&tc);
    tc.duration = "00:01:00:00";
    CHECK_OK(volt_trainer_add_callback(t, &r0, NULL));
    CHECK_OK(volt_add_timer(t, &tc, NULL));
    lin m = { 0 };
    double t0 = MPI_Wtime();
    volt_status st = volt_trainer_fit(t, &lin_ops, &m, l, NULL, NULL);
    expect_agreed(t, st, MPI_Wtime() - t0, "R0Fail: rank 0 cannot open its file", "a Timer after a failing on_fit_start");
    volt_trainer_destroy(t);
    /* (c) */
    lin m2 = { 0 };
    snprintf(g_rdm_ck, sizeof g_rdm_ck, "%s/dm.safetensors", dir);
    const volt_datamodule_ops dops = { .version = VOLT_DATAMODULE_OPS_VERSION, .name = "rdm", .train_loader = rdm_train,
                                       .state_dict = rdm_state, .load_state_dict = rdm_load };
    const volt_callback_ops saver = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Saver", .on_fit_end = rdm_save };
    rdm d = { l };
    t = make_trainer(name, dir);
    CHECK_OK(volt_trainer_add_callback(t, &saver, NULL));
    CHECK_OK(volt_trainer_fit_dm(t, &lin_ops, &m2, &dops, &d, NULL));
    volt_trainer_destroy(t);
    MPI_Barrier(MPI_COMM_WORLD);
    t = make_trainer(name, dir);
    lin m3 = { 0 };
    t0 = MPI_Wtime();
    st = volt_trainer_fit_dm(t, &lin_ops, &m3, &dops, &d, g_rdm_ck);
    expect_agreed(t, st, MPI_Wtime() - t0, "datamodule 'rdm' rejected its state", "a datamodule that rejects on rank 1");
    volt_trainer_destroy(t);
    /* (d) a Timer's limit over ranks (its broadcast at every batch end): rank 0 sleeps 20 ms a
     * batch, so rank 0's clock, which decides, passes 0.05 s by its third batch: every rank stops
     * at the same step in 1..3, the fit succeeds, no collective is left unmatched */
    t = make_trainer(name, dir);
    const volt_callback_ops slow0 = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Slow0", .on_train_batch_start = slow_rank0 };
    CHECK_OK(volt_trainer_add_callback(t, &slow0, NULL));
    tc.duration = "00:00:00:0.05";
    tc.verbose = false;
    CHECK_OK(volt_add_timer(t, &tc, NULL));
    lin m4 = { 0 };
    st = volt_trainer_fit(t, &lin_ops, &m4, l, NULL, NULL);
    const int64_t gs = volt_trainer_global_step(t);
    int64_t lo = gs, hi = gs;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    CHECK(st == VOLT_OK && lo == hi && gs >= 1 && gs <= 3, "a Timer with the clocks apart: rank %d: %s, step %lld (ranks %lld..%lld; "
          "want one step in 1..3)", g_rank, volt_status_str(st), (long long)gs, (long long)lo, (long long)hi);
    volt_trainer_destroy(t);
    /* (e) a module whose configure_callbacks fails on the last rank alone: every rank fails the
     * fit in its words, before any hook ran, and the callbacks it added are gone */
    t = make_trainer(name, dir);
    volt_module_ops cops = lin_ops;
    cops.configure_callbacks = cfgcb_last_fails;
    lin m5 = { 0 };
    g_cfgcb_fit_starts = 0;
    const int n_before = volt_trainer_num_callbacks(t);
    t0 = MPI_Wtime();
    st = volt_trainer_fit(t, &cops, &m5, l, NULL, NULL);
    expect_agreed(t, st, MPI_Wtime() - t0, "lin.configure_callbacks: the last rank has no callbacks",
                  "configure_callbacks failing on the last rank");
    CHECK(g_cfgcb_fit_starts == 0 && volt_trainer_num_callbacks(t) == n_before, "rank %d: the module's callback ran %d times, "
          "%d callbacks (%d before)", g_rank, g_cfgcb_fit_starts, volt_trainer_num_callbacks(t), n_before);
    /* and when every rank adds it, each runs its own */
    g_cfgcb_ok = true;
    CHECK_OK(volt_trainer_fit(t, &cops, &m5, l, NULL, NULL));
    CHECK(g_cfgcb_fit_starts == 1, "rank %d: the module's callback ran %d times", g_rank, g_cfgcb_fit_starts);
    g_cfgcb_ok = false;
    volt_trainer_destroy(t);
    /* (f) reload_dataloaders_every_n_epochs with a datamodule that has no loader on the last rank at
     * the reload: every rank fails the fit at that epoch, agreed */
    {
        volt_trainer_config c;
        vtest_quiet_config(&c, dir);
        c.max_epochs = 3;
        c.strategy = name;
        c.reload_dataloaders_every_n_epochs = 1;
        t = NULL;
        CHECK_OK(volt_trainer_create(&c, &t));
        const volt_datamodule_ops rops = { .version = VOLT_DATAMODULE_OPS_VERSION, .name = "rl", .train_loader = rl_train };
        rl_calls = 0;
        rdm r = { l };
        lin m6 = { 0 };
        t0 = MPI_Wtime();
        st = volt_trainer_fit_dm(t, &lin_ops, &m6, &rops, &r, NULL);
        expect_agreed(t, st, MPI_Wtime() - t0, "train_loader returned no loader when fit reloaded it at epoch 1",
                      "a reload without a loader on the last rank");
        CHECK(volt_trainer_current_epoch(t) == 1, "rank %d: failed at epoch %lld", g_rank, (long long)volt_trainer_current_epoch(t));
        volt_trainer_destroy(t);
    }
    /* (g) the module's on_train_batch_start skips the rest of epoch 0 on rank 1 alone, inside an
     * accumulation window (batch 1 of 4, accumulate 2: batch 0's grads are dropped): every rank
     * skips there, so every rank ends at the same step with the same weights, no collective left
     * unmatched; the skip trained nothing of epoch 0 (EPOCHS - 1 epochs of NB / 2 steps) */
    {
        volt_trainer_config c;
        vtest_quiet_config(&c, dir);
        c.max_epochs = EPOCHS;
        c.strategy = name;
        c.accumulate_grad_batches = 2;
        t = NULL;
        CHECK_OK(volt_trainer_create(&c, &t));
        volt_module_ops sops = lin_ops;
        sops.on_train_batch_start = skip_rank1;
        lin m7 = { 0 };
        t0 = MPI_Wtime();
        st = volt_trainer_fit(t, &sops, &m7, l, NULL, NULL);
        const double el = MPI_Wtime() - t0;
        const int64_t gs7 = volt_trainer_global_step(t);
        float w[5], wlo[5], whi[5];
        CHECK_OK(volt_tensor_to_host(m7.w, w));
        CHECK_OK(volt_tensor_to_host(m7.b, w + 4));
        MPI_Allreduce(w, wlo, 5, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(w, whi, 5, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
        CHECK(st == VOLT_OK && el < 10 && gs7 == (EPOCHS - 1) * NB / 2 && !memcmp(wlo, whi, sizeof w),
              "rank %d: a skip on rank 1 alone: %s (%s) in %.1f s, step %lld (want %d), weights %s across ranks", g_rank,
              volt_status_str(st), volt_trainer_errmsg(t), el, (long long)gs7, (EPOCHS - 1) * NB / 2,
              memcmp(wlo, whi, sizeof w) ? "differ" : "agree");
        volt_trainer_destroy(t);
    }
    if (g_rank == 0) printf("one_rank %s np%d: each failure on one rank ended every rank at once, agreed\n", name, g_world);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifndef VOLT_HAVE_MPI
    (void)argc;
    (void)argv;
    VTEST_SKIP("built without MPI (apt-get install libopenmpi-dev openmpi-bin)");
#else
    if (argc < 3) {
        fprintf(stderr, "usage: mpirun -np N test_mpi_callbacks collective|time_interval|interrupt|interrupt_eval|throughput|uneven|unwritable|save_fails|discard|agreements STRATEGY\n");
        return 2;
    }
    const int skip = vtest_mpi_start(&argc, &argv, &g_rank, &g_world);
    if (skip) return skip;
    if (!strcmp(argv[1], "collective")) test_collective(argv[2]);
    else if (!strcmp(argv[1], "time_interval")) test_time_interval(argv[2]);
    else if (!strcmp(argv[1], "interrupt")) test_interrupt(argv[2]);
    else if (!strcmp(argv[1], "interrupt_eval")) test_interrupt_eval(argv[2]);
    else if (!strcmp(argv[1], "throughput")) test_throughput(argv[2]);
    else if (!strcmp(argv[1], "uneven")) test_uneven(argv[2]);
    else if (!strcmp(argv[1], "unwritable")) test_unwritable(argv[2]);
    else if (!strcmp(argv[1], "save_fails")) test_save_fails(argv[2]);
    else if (!strcmp(argv[1], "agreements")) test_agreements(argv[2]);
    else if (!strcmp(argv[1], "discard")) test_discard(argv[2]);
    else if (!strcmp(argv[1], "spike")) test_spike(argv[2]);
    else if (!strcmp(argv[1], "one_rank")) test_one_rank(argv[2]);
    else {
        fprintf(stderr, "unknown mode '%s'\n", argv[1]);
        MPI_Finalize();
        return 2;
    }
    return vtest_mpi_finish();
#endif
}
