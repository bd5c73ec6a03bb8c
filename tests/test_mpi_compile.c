/* compile = true over several processes (ddp, deepspeed_stage_1 on the nccl comm): the
 * collectives of a step are captured into its CUDA graph with the rest of the step (docs/NCCL.md,
 * "compile over several processes"). Run on the simulated GPUs and NCCL (tests/gpu_sim_nccl.cmake)
 * or on real GPUs, one per rank:
 *
 *   mpirun -np N test_mpi_compile parity S PREC  S in ddp, zero1; PREC 32-true, 16-mixed:
 *       the same run eagerly and compiled, bit for bit (every step's loss on every rank, the final
 *       parameters), the compiled run having replayed; params the same on every rank. 16-mixed:
 *       one sample carries an inf that reaches only fc2.bias's gradient, on the rank whose shard
 *       holds it: under deepspeed_stage_1 that bias is rank 1's slice, so rank 0 sees finite grads
 *       and skips only through the vote (the inf flag summed over ranks on the device). Every rank
 *       must skip the same steps (one per epoch), as the eager run does.
 *   mpirun -np N test_mpi_compile parity S PREC K  the same with accumulate_grad_batches K over 3
 *       epochs (K 4: windows [0 1 2 3] [4 5], the last shorter, its last batch another shape): a
 *       graph per kind of micro-step; inside a window (begin_backward(false): ddp's no_sync) no
 *       grad reduction or gather is started — on the host, so in no captured graph either —,
 *       checked on the strategy's trace, and the backward of every eager or captured micro-step
 *       syncs exactly when it ends a window.
 *   mpirun -np N test_mpi_compile refuse          zero2, fsdp, fsdp_shard_grad_op (they map and
 *       unmap device memory inside a step) and ddp over the mpi comm (collectives from the host):
 *       refused when the trainer is created, with the reason.
 *   mpirun -np N test_mpi_compile fault           rank 1 leaves after the capture, between the
 *       ranks' agreement to replay and the launch: rank 0's launch waits for it inside the graph;
 *       the launch's bounded wait (drain) ends it with VOLT_ERR_TIMEOUT within the comm's deadline
 *       (VOLT_COMM_TIMEOUT), the communicator aborted.
 *
 * A test_mpi_ program: registered only with its launches (tests/CMakeLists.txt). Without mpirun
 * it says so and exits 77. */
#include <math.h>
#include <time.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "compile_mlp.h"
#include "trainer/trainer_internal.h"
#include "strategies/parallel/parallel.h"
#ifdef VOLT_HAVE_MPI
#include "vtest_mpi.h"
#endif

enum { BS = 4 /* per rank */, NB = 5 /* full batches per rank and epoch */, EPOCHS = 2, MAX_EPOCHS = 3 };
enum { MAXW = 4, NSMAX = MAXW * (BS * NB + 2), MAXSTEPS = MAX_EPOCHS * (NB + 1) };
static int g_epochs = EPOCHS;
static int64_t g_accum = 1;   /* accumulate_grad_batches */

static int g_rank, g_world;

/* ---- the model (tests/compile_mlp.h); the batch's "p" field adds p * sum(fc2.bias) to the loss -- */
static volt_status mlp_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    mlp *m = self;
    (void)i;
    volt_tensor *loss = volt_cross_entropy(s, mlp_logits(m, s, b, 0.1f), volt_batch_y(b));
    /* d/d(fc2.bias) of the extra term is sum(p) per element: inf only where a poisoned row is */
    loss = volt_add(s, loss, volt_mul(s, volt_sum(s, m->b2), volt_sum(s, volt_batch_field(b, "p"))));
    VOLT_TRY(volt_log(s, "train_loss", loss, VOLT_LOG_STEP | VOLT_LOG_SYNC));   /* mean over ranks */
    return volt_step_set_loss(s, loss);
}
static volt_status mlp_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    (void)i;
    return volt_log(s, "val_loss", volt_cross_entropy(s, mlp_logits(self, s, b, 0.f), volt_batch_y(b)),
                    VOLT_LOG_EPOCH | VOLT_LOG_SYNC);
}
static const volt_module_ops mlp_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "mlp", .setup = mlp_setup,
                                         .configure_optimizers = mlp_opt, .training_step = mlp_train,
                                         .validation_step = mlp_val };

/* ---- data: each rank's shard is NB batches of BS and a last batch of 2 (its own shape) ----------- */
static float X[NSMAX * IN], P[NSMAX];
static int64_t Y[NSMAX];
static volt_dataset *make_data(bool poison) {
    const int ns = g_world * (BS * NB + 2);
    for (int i = 0; i < ns; i++) {
        Y[i] = (i * 7 + i / 5) % NC;
        P[i] = 0.f;
        for (int k = 0; k < IN; k++) X[i * IN + k] = sinf(0.37f * (float)(i * IN + k)) + (k % NC == Y[i] ? 0.8f : 0.f);
    }
    /* one row, rank 0's (the loader gives rank r positions r, r + world, ...), in its batch 3 (a
     * replay), every epoch; under deepspeed_stage_1 fc2.bias is in rank 1's slice */
    if (poison) P[g_world * (3 * BS + 1)] = INFINITY;
    volt_field f[3] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR }, { "p", VOLT_F32, VOLT_SCALAR } };
    const void *d[3] = { X, Y, P };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(3, f, d, ns, &ds));
    return ds;
}

/* ---- one run ---------------------------------------------------------------------------------- */
typedef struct { double loss[MAXSTEPS]; int n; } losses;
static volt_status rec_loss(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b; (void)i;
    losses *l = self;
    double v = NAN;
    volt_trainer_metric(t, "train_loss", &v);
    if (l->n < MAXSTEPS) l->loss[l->n++] = v;
    return VOLT_OK;
}
static const volt_callback_ops rec_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "LossRecorder",
                                           .on_train_batch_end = rec_loss };

/* accumulation: what the strategy did in each micro-step that ran on the host (eager or captured;
 * a replay adds nothing to the trace): its backward syncs iff the step ends a window, and inside
 * a window nothing is reduced or gathered */
typedef struct { int pos; int64_t inside, inside_launches, wrong_sync; } sync_watch;
static volt_status watch_sync(void *self, volt_trainer *t, const volt_batch *b, int64_t idx) {
    (void)b;
    sync_watch *w = self;
    const volt_dist_event *ev = NULL;
    const int n = volt__dist_trace(t->strategy, &ev);
    const bool boundary = volt__loop_ends_window(t, idx, t->num_train_batches);
    for (int i = w->pos; i < n; i++) {
        if (ev[i].kind == VOLT_EV_BACKWARD_BEGIN) {
            w->wrong_sync += ev[i].unit != (boundary ? 1 : 0);
            w->inside += !boundary;
        }
        if (!boundary && (ev[i].kind == VOLT_EV_GRAD_LAUNCH || ev[i].kind == VOLT_EV_GATHER_LAUNCH)) w->inside_launches++;
    }
    w->pos = n > 0 ? n : 0;
    return VOLT_OK;
}
static const volt_callback_ops sync_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "SyncWatch",
                                            .on_train_batch_end = watch_sync };

/* fault: rank 1 leaves in on_before_optimizer_step of this global step: on a replay that hook
 * runs on the host after the ranks agreed to replay and before the launch, so the other ranks'
 * graphs wait inside their collectives for it */
static int g_leave_at = -1;
static volt_status leave_before_step(void *self, volt_trainer *t) {
    (void)self;
    if (volt_trainer_rank(t) == 1 && volt_trainer_global_step(t) == g_leave_at) {
        printf("rank 1: leaving the run before optimizer step %d\n", g_leave_at);
        return volt_trainer_fail(t, VOLT_ERR_STATE, "rank 1 leaves");
    }
    return VOLT_OK;
}
static const volt_callback_ops leave_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Leave",
                                             .on_before_optimizer_step = leave_before_step };

typedef struct {
    losses l;
    float params[HID * IN + HID + NC * HID + NC];
    int64_t eager, captured, replayed, global_step, skipped;
    sync_watch sync;
    volt_status st;
    char msg[1024];
    double seconds;
} run_out;

static volt_trainer *make_trainer(const char *strategy, const char *comm, const char *precision, bool compile,
                                  volt_status *st, char *msg, size_t n) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.max_epochs = g_epochs;
    c.accumulate_grad_batches = g_accum;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = c.enable_model_summary = false;
    c.default_root_dir = vtest_tmpdir();
    c.precision = precision;
    c.compile = compile;
    c.strategy = strategy;
    if (comm) c.strategy_comm = comm;
    c.num_sanity_val_steps = 0;
    c.seed = 11;
    c.gradient_clip_val = 0.05f;   /* by norm: it clips; sharded, the norm is summed over ranks */
    volt_trainer *t = NULL;
    *st = volt_trainer_create(&c, &t);
    snprintf(msg, n, "%s", t ? volt_trainer_errmsg(t) : volt_status_str(*st));
    if (*st < 0) { volt_trainer_destroy(t); return NULL; }
    return t;
}

static void run(const char *strategy, const char *precision, bool compile, volt_dataset *ds, run_out *r) {
    memset(r, 0, sizeof *r);
    volt_trainer *t = make_trainer(strategy, NULL, precision, compile, &r->st, r->msg, sizeof r->msg);
    CHECK(t, "create (%s, %s, compile %d): %s", strategy, precision, compile, r->msg);
    if (!t) return;
    CHECK_OK(volt_trainer_add_callback(t, &rec_ops, &r->l));
    if (g_leave_at >= 0) CHECK_OK(volt_trainer_add_callback(t, &leave_ops, NULL));
    CHECK_OK(volt_trainer_add_callback(t, &sync_ops, &r->sync));
    /* rank 1 validates in larger batches than the others: its step memory (the arena) grows at
     * the first validation and its graphs go stale; the others' do not. The ranks must then
     * agree to start again from an eager step (compile.c, agree), not mix a replay on one rank
     * with an eager step on another */
    volt_loader *l = vtest_loader(ds, BS, false), *vl = vtest_loader(ds, g_rank == 1 ? 3 * BS : BS, false);
    mlp m = { 0 };
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    r->st = volt_trainer_fit(t, &mlp_ops, &m, l, vl, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    r->seconds = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    snprintf(r->msg, sizeof r->msg, "%s", volt_trainer_errmsg(t));
    if (r->st == VOLT_OK) {
        volt_params *ps = volt_trainer_params(t);
        float *d = r->params;
        for (int i = 0; i < volt_params_count(ps); i++) {
            volt_tensor *p = volt_params_at(ps, i);
            volt_tensor_to_host(p, d);
            d += volt_tensor_numel(p);
        }
        volt_trainer_compile_stats(t, &r->eager, &r->captured, &r->replayed);
        r->global_step = volt_trainer_global_step(t);
        r->skipped = volt_trainer_skipped_steps(t);
    }
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_loader_destroy(vl);
}

static bool same_bits(const double *a, const double *b, int n) {
    for (int i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], sizeof a[i])) return false;
    return true;
}

#ifdef VOLT_HAVE_MPI
static void test_parity(const char *strategy, const char *precision) {
    const bool mixed = !strcmp(precision, "16-mixed");
    volt_dataset *ds = make_data(mixed);
    static run_out e, c;
    run(strategy, precision, false, ds, &e);
    run(strategy, precision, true, ds, &c);
    CHECK(e.st == VOLT_OK && c.st == VOLT_OK, "%s %s: eager %s (%s), compiled %s (%s)", strategy, precision,
          volt_status_str(e.st), e.msg, volt_status_str(c.st), c.msg);
    if (e.st != VOLT_OK || c.st != VOLT_OK) { volt_dataset_destroy(ds); return; }
    CHECK(c.captured >= 1 && c.replayed >= NB - 2, "%s %s: compiled run: %lld eager, %lld captured, %lld replayed",
          strategy, precision, (long long)c.eager, (long long)c.captured, (long long)c.replayed);
    CHECK(e.l.n == c.l.n && e.l.n == g_epochs * (NB + 1), "%s %s: %d / %d losses", strategy, precision, e.l.n, c.l.n);
    if (g_accum > 1) {   /* micro-steps inside a window ran (eagerly and captured) with no collective */
        CHECK(c.captured >= 3, "%s %s accumulate %lld: %lld graphs (want one per kind of micro-step: >= 3)", strategy,
              precision, (long long)g_accum, (long long)c.captured);
        for (int k = 0; k < 2; k++) {
            const run_out *r = k ? &c : &e;
            CHECK(r->sync.inside > 0 && r->sync.inside_launches == 0 && r->sync.wrong_sync == 0, "%s %s accumulate %lld, %s: "
                  "%lld backwards inside a window, %lld collectives started in them, %lld backwards with the wrong sync",
                  strategy, precision, (long long)g_accum, k ? "compiled" : "eager", (long long)r->sync.inside,
                  (long long)r->sync.inside_launches, (long long)r->sync.wrong_sync);
        }
    }
    CHECK(same_bits(e.l.loss, c.l.loss, e.l.n), "%s %s: a step's loss differs between eager and compiled", strategy, precision);
    CHECK(!memcmp(e.params, c.params, sizeof e.params), "%s %s: final parameters differ between eager and compiled",
          strategy, precision);
    CHECK(e.global_step == c.global_step && e.skipped == c.skipped, "%s %s: global_step %lld / %lld, skipped %lld / %lld",
          strategy, precision, (long long)e.global_step, (long long)c.global_step, (long long)e.skipped, (long long)c.skipped);
    /* every rank: the same parameters, the same skipped steps (16-mixed: the poisoned row's, once per epoch) */
    static float r0[sizeof c.params / sizeof(float)];
    memcpy(r0, c.params, sizeof r0);
    MPI_Bcast(r0, (int)(sizeof r0 / sizeof(float)), MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(!memcmp(r0, c.params, sizeof r0), "%s %s: parameters differ between ranks", strategy, precision);
    long long sk = (long long)c.skipped, lo = 0, hi = 0;
    MPI_Allreduce(&sk, &lo, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&sk, &hi, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi && hi == (mixed ? g_epochs : 0), "%s %s: skipped steps %lld..%lld over the ranks, want %d on each",
          strategy, precision, lo, hi, mixed ? g_epochs : 0);
    if (g_rank == 0)
        printf("compile %-18s %-8s N=%d accumulate %lld: eager == compiled, bit for bit (%d losses, %zu parameters; %lld "
               "captured, %lld replayed, %lld skipped on every rank)\n", strategy, precision, g_world, (long long)g_accum,
               c.l.n, sizeof c.params / sizeof(float), (long long)c.captured, (long long)c.replayed, hi);
    volt_dataset_destroy(ds);
}

static void test_refuse(void) {
    static const struct { const char *strategy, *comm, *want; } cases[] = {
        { "deepspeed_stage_2", NULL, "gives device memory back" },
        { "fsdp", NULL, "sharded parameters" },
        { "fsdp_shard_grad_op", NULL, "gives device memory back" },
        { "ddp", "mpi", "from the host" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        volt_status st;
        char msg[1024];
        volt_trainer *t = make_trainer(cases[i].strategy, cases[i].comm, "32-true", true, &st, msg, sizeof msg);
        CHECK(!t && st == VOLT_ERR_UNSUPPORTED && strstr(msg, "compile") && strstr(msg, cases[i].want),
              "%s over %s with compile: %s: %s", cases[i].strategy, cases[i].comm ? cases[i].comm : "nccl",
              volt_status_str(st), msg);
        volt_trainer_destroy(t);
        if (g_rank == 0) printf("refused %-18s over %s: %s\n", cases[i].strategy, cases[i].comm ? cases[i].comm : "nccl", msg);
    }
}

static void test_fault(void) {
    const char *to = getenv("VOLT_COMM_TIMEOUT");
    const double timeout = to ? atof(to) : 300;
    CHECK(timeout > 0 && timeout <= 10, "run with a short VOLT_COMM_TIMEOUT (got %s)", to ? to : "unset");
    volt_dataset *ds = make_data(false);
    g_leave_at = 3;   /* step 0 eager, 1 captured, 2 replayed: 3 would be a replay */
    static run_out r;
    run("ddp", "32-true", true, ds, &r);
    if (g_rank == 1) {
        CHECK(r.st == VOLT_ERR_STATE, "rank 1 left: %s", volt_status_str(r.st));
    } else {
        CHECK(r.st == VOLT_ERR_TIMEOUT, "rank %d: fit returned %s: %s", g_rank, volt_status_str(r.st), r.msg);
        char want[64];
        snprintf(want, sizeof want, "rank %d: ", g_rank);
        CHECK(strstr(r.msg, want) && strstr(r.msg, "timed out after") && strstr(r.msg, "the captured training step") &&
              strstr(r.msg, "NCCL communicator aborted"), "message names rank, the captured step and the abort: %s", r.msg);
        CHECK(r.seconds >= timeout * 0.9 && r.seconds < 2 * timeout + 30, "rank %d: failed after %.2f s (timeout %g s)",
              g_rank, r.seconds, timeout);
        printf("rank %d: %s after %.2f s: %s\n", g_rank, volt_status_str(r.st), r.seconds, r.msg);
    }
    /* rank 1's process stays until the others timed out: one that ended would send its leave
     * notice, and they would fail 2 s after it instead (tests/fault_stepfail.sh tests that) */
    MPI_Barrier(MPI_COMM_WORLD);
    volt_dataset_destroy(ds);
}
#endif

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
#ifndef VOLT_HAVE_MPI
    (void)mode;
    VTEST_SKIP("built without MPI");
#else
    if (!getenv("OMPI_COMM_WORLD_SIZE") || !*mode)
        VTEST_SKIP("run under mpirun with a mode, one GPU per rank (tests/gpu_sim_nccl.cmake runs it on the simulator)");
    const bool fault = !strcmp(mode, "fault");
    if (!fault) {   /* the fault mode leaves MPI to the library (its MPI_Finalize at exit) */
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    } else {
        g_rank = atoi(getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "0");
        g_world = atoi(getenv("OMPI_COMM_WORLD_SIZE"));
    }
    if (g_world < 2 || g_world > MAXW) VTEST_SKIP("needs 2 to 4 ranks");
    if (!strcmp(mode, "parity") && argc > 4) {
        g_accum = atoi(argv[4]);
        if (g_accum < 2 || g_accum > NB + 1) { fprintf(stderr, "parity: accumulate_grad_batches 2..%d, got '%s'\n", NB + 1, argv[4]); return 2; }
        g_epochs = MAX_EPOCHS;
        test_parity(argv[2], argv[3]);
    } else if (!strcmp(mode, "parity") && argc > 3) test_parity(argv[2], argv[3]);
    else if (!strcmp(mode, "refuse")) test_refuse();
    else if (fault) test_fault();
    else {
        fprintf(stderr, "usage: mpirun -np N test_mpi_compile [parity S PREC [K] | refuse | fault]\n");
        return 2;
    }
    if (!fault) return vtest_mpi_finish();
    return vtest_finish();
#endif
}
