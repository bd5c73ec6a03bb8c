/* A step that fails on one rank inside an evaluation loop stops every rank after that batch with
 * that rank's error (eval_loop.c, after_step), instead of leaving the others in the next
 * collective until the comm's timeout.
 *
 *   mpirun -np N test_mpi_eval_fail step_fails S   S a strategy whose evaluation step makes no
 *       collective (ddp, deepspeed_stage_2). Rank 1 alone fails its step (volt_step_fail, "row 5:
 *       token id 99 out of range", before its forward) at batch 2 of: the validation inside fit
 *       (after the sanity check; and at its batch 0, right after an optimizer step), a standalone
 *       validate, test and predict; with handle_signals on and off. Every rank returns
 *       VOLT_ERR_INVALID_ARG with rank 1's message and "(rank 1 of N; every rank stops)", each
 *       rank ran the steps up to that batch of that loop, within 5 s (the comm's timeout is 20 s
 *       here); the steps log a value with VOLT_LOG_STEP | VOLT_LOG_SYNC, which the other ranks
 *       all-reduce after their step (the failing rank logs nothing). Then a clean validate on
 *       the same trainer gives every rank the same val_loss (the ranks' collectives still match),
 *       and the job ends with status 0 (no MPI abort).
 *   mpirun -np N test_mpi_eval_fail cost S   not a test: the time of a validate batch with
 *       handle_signals off (the per-batch exchange it now makes) and of one all-reduce of 3
 *       doubles over the strategy alone; prints one line.
 *
 * A test_mpi_ program: registered only with its launches (tests/mpi_eval_fail.cmake). */
#include <stdlib.h>
#include <string.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#ifdef VOLT_HAVE_MPI
#include "vtest_mpi.h"
#include "trainer/trainer_internal.h"   /* t->strategy (cost) */

enum { BS = 2 /* per rank */, NB = 4 /* train batches per rank */, NV = 6 /* evaluation batches per rank */, FAIL_AT = 2 };

static int g_rank, g_world;

typedef struct lin {
    volt_tensor *w, *b;
    int64_t calls;   /* evaluation steps run */
    int fail;        /* 0: none; 1: rank 1 fails at batch fail_at outside the sanity check */
    int64_t fail_at;
    volt_trainer *t;
} lin;
static volt_status lin_setup(void *self, volt_params *ps) {
    lin *m = self;
    VOLT_TRY(volt_param_new(ps, "w", VOLT_SHAPE(1, 4), VOLT_INIT_TORCH_LINEAR, &m->w));
    return volt_param_new(ps, "b", VOLT_SHAPE(1), VOLT_INIT_ZEROS, &m->b);
}
static volt_tensor *lin_loss(lin *m, volt_step *s, const volt_batch *b) {
    return volt_mse(s, volt_linear(s, volt_batch_x(b), m->w, m->b), volt_batch_y(b));
}
static volt_status lin_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_step_set_loss(s, lin_loss(self, s, b));
}
/* Rank 1's step fails at fail_at (not in the sanity check), before its forward reads a parameter
 * (under deepspeed the gathers the last optimizer step started are still in flight there); the
 * others log a synced step value. */
static volt_status eval_step(lin *m, volt_step *s, const volt_batch *b, int64_t i, const char *key) {
    m->calls++;
    if (m->fail && g_rank == 1 && i == m->fail_at && !volt_trainer_sanity_checking(m->t))
        return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "row 5: token id 99 out of range");
    volt_tensor *loss = lin_loss(m, s, b);
    if (!loss) return volt_step_status(s);
    char nm[32];
    snprintf(nm, sizeof nm, "%s_step", key);
    VOLT_TRY(volt_log(s, nm, loss, VOLT_LOG_STEP | VOLT_LOG_SYNC));
    return volt_log(s, key, loss, VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}
static volt_status lin_val(void *self, volt_step *s, const volt_batch *b, int64_t i) { return eval_step(self, s, b, i, "val_loss"); }
static volt_status lin_test(void *self, volt_step *s, const volt_batch *b, int64_t i) { return eval_step(self, s, b, i, "test_loss"); }
static volt_status lin_predict(void *self, volt_step *s, const volt_batch *b, int64_t i, volt_tensor **out) {
    lin *m = self;
    m->calls++;
    if (m->fail && g_rank == 1 && i == m->fail_at) return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "row 5: token id 99 out of range");
    *out = volt_linear(s, volt_batch_x(b), m->w, m->b);
    return VOLT_OK;
}
static volt_status lin_out(void *ctx, const volt_batch *b, const volt_tensor *pred) { (void)ctx; (void)b; (void)pred; return VOLT_OK; }
static volt_status lin_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.05f;
    return VOLT_OK;
}
static const volt_module_ops lin_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = lin_setup,
                                         .configure_optimizers = lin_opt, .training_step = lin_train,
                                         .validation_step = lin_val, .test_step = lin_test, .predict_step = lin_predict };


static volt_trainer *make_trainer(const char *strategy, const char *root, bool handle_signals) {
    volt_trainer_config c;
    vtest_quiet_config(&c, root);
    c.max_epochs = 2;
    c.strategy = strategy;
    c.seed = 7;
    c.num_sanity_val_steps = 2;
    c.handle_signals = handle_signals;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer_create(%s): %s", strategy, t ? volt_trainer_errmsg(t) : volt_status_str(st));
    if (st < 0) { volt_trainer_destroy(t); return NULL; }
    return t;
}

/* Every rank: rank 1's error, the loop's steps up to the failing one run, in under 5 s. */
static void check_failed(const char *label, volt_trainer *t, volt_status st, double el, const char *step, int64_t calls,
                         int64_t fail_at) {
    const char *msg = volt_trainer_errmsg(t);
    char want[160], tail[64];
    snprintf(want, sizeof want, "%s: row 5: token id 99 out of range", step);
    snprintf(tail, sizeof tail, "(rank 1 of %d; every rank stops)", g_world);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(msg, want) && strstr(msg, tail), "%s: rank %d: %s: %s (want '%s' ... '%s')", label,
          g_rank, volt_status_str(st), msg, want, tail);
    CHECK(calls == fail_at + 1, "%s: rank %d ran %lld steps of the loop, want %lld", label, g_rank, (long long)calls,
          (long long)fail_at + 1);
    CHECK(el < 5, "%s: rank %d took %.1f s (a rank waited for the comm's timeout?)", label, g_rank, el);
}

static void test_step_fails(const char *name) {
    char root[512];
    snprintf(root, sizeof root, "%s/step_fails_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *tds = vtest_rows4(g_world * BS * NB), *vds = vtest_rows4(g_world * BS * NV);
    volt_loader *tl = vtest_loader(tds, BS, true), *vl = vtest_loader(vds, BS, false);
    for (int h = 1; h >= 0; h--) {
        const bool handle = h;
        char label[96];
        /* fit: batch 0 (right after the epoch's last optimizer step) and FAIL_AT of the
         * validation of epoch 0 (the sanity check ran batches 0 and 1) */
        volt_trainer *t = NULL;
        lin m = { 0 };
        volt_status st;
        double t0;
        for (int at = 0; at <= FAIL_AT; at += FAIL_AT) {
            volt_trainer_destroy(t);
            t = make_trainer(name, root, handle);
            if (!t) break;
            m = (lin){ .fail = 1, .fail_at = at, .t = t };
            t0 = vtest_now();
            st = volt_trainer_fit(t, &lin_ops, &m, tl, vl, NULL);
            snprintf(label, sizeof label, "fit, batch %d (handle_signals %s)", at, handle ? "on" : "off");
            check_failed(label, t, st, vtest_now() - t0, "validation_step", m.calls - 2, at);
            if (g_rank == 0 && handle) printf("%s np%d: fit, batch %d: %s\n", name, g_world, at, volt_trainer_errmsg(t));
        }
        if (!t) continue;
        /* standalone validate, test, predict on the same trainer */
        static const char *const what[3] = { "validate", "test", "predict" };
        static const char *const step[3] = { "validation_step", "test_step", "predict_step" };
        for (int k = 0; k < 3; k++) {
            m.calls = 0;
            t0 = vtest_now();
            st = k == 0 ? volt_trainer_validate(t, &lin_ops, &m, vl, NULL)
               : k == 1 ? volt_trainer_test(t, &lin_ops, &m, vl, NULL)
                        : volt_trainer_predict(t, &lin_ops, &m, vl, NULL, lin_out, NULL);
            snprintf(label, sizeof label, "%s (handle_signals %s)", what[k], handle ? "on" : "off");
            check_failed(label, t, st, vtest_now() - t0, step[k], m.calls, FAIL_AT);
        }
        /* the ranks' collectives still match: a clean validate, the same mean everywhere */
        m.fail = 0;
        m.calls = 0;
        st = volt_trainer_validate(t, &lin_ops, &m, vl, NULL);
        double v = -1, lo = 0, hi = 0;
        CHECK(st == VOLT_OK && m.calls == NV && volt_trainer_metric(t, "val_loss", &v), "rank %d: the clean validate after the "
              "failures: %s, %lld steps: %s", g_rank, volt_status_str(st), (long long)m.calls, volt_trainer_errmsg(t));
        MPI_Allreduce(&v, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&v, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        CHECK(lo == hi, "rank %d: val_loss after the failures differs across ranks: %.9g .. %.9g", g_rank, lo, hi);
        if (g_rank == 0)
            printf("%s np%d, handle_signals %s: fit, validate, test, predict: every rank stopped with rank 1's error\n", name,
                   g_world, handle ? "on" : "off");
        volt_trainer_destroy(t);
    }
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
    volt_dataset_destroy(tds);
    volt_dataset_destroy(vds);
}

/* The per-batch exchange's cost: a validate batch of this small model with handle_signals off,
 * against one all-reduce of 3 doubles over the same strategy. */
static void cost(const char *name) {
    enum { N = 2000 };
    char root[512];
    snprintf(root, sizeof root, "%s/cost_%s_np%d", vtest_tmpdir(), name, g_world);
    if (g_rank == 0) vtest_fresh_dir(root);
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset *vds = vtest_rows4(g_world * BS * N);
    volt_loader *vl = vtest_loader(vds, BS, false);
    volt_trainer *t = make_trainer(name, root, false);
    lin m = { .t = t };
    CHECK_OK(volt_trainer_validate(t, &lin_ops, &m, vl, NULL));   /* warm up */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = vtest_now();
    CHECK_OK(volt_trainer_validate(t, &lin_ops, &m, vl, NULL));
    const double per_batch = (vtest_now() - t0) / N;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = vtest_now();
    for (int i = 0; i < N; i++) {
        double v[3] = { 0, 0, 0 };
        CHECK_OK(volt__strategy_all_reduce_mean(t->strategy, v, 3, "timed exchange"));
    }
    const double per_exchange = (vtest_now() - t0) / N;
    if (g_rank == 0)
        printf("%s np%d: validate %.1f us per batch (handle_signals off, exchange included); all-reduce of 3 doubles %.1f us\n",
               name, g_world, per_batch * 1e6, per_exchange * 1e6);
    volt_trainer_destroy(t);
    volt_loader_destroy(vl);
    volt_dataset_destroy(vds);
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
        fprintf(stderr, "usage: mpirun -np N test_mpi_eval_fail step_fails|cost STRATEGY\n");
        return 2;
    }
    const int skip = vtest_mpi_start(&argc, &argv, &g_rank, &g_world);
    if (skip) return skip;
    if (!strcmp(argv[1], "step_fails")) test_step_fails(argv[2]);
    else if (!strcmp(argv[1], "cost")) cost(argv[2]);
    else {
        fprintf(stderr, "unknown mode '%s'\n", argv[1]);
        MPI_Finalize();
        return 2;
    }
    return vtest_mpi_finish();
#endif
}
