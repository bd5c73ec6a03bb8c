/* The NCCL comm backend (strategies/comm/nccl/, docs/NCCL.md).
 *
 *   test_nccl           on a cuda device (label gpu; exit 77 without one): NCCL at world size 1
 *                       (or under mpirun -n 1) — every collective in f32/bf16/f16 on device
 *                       buffers and host buffers, ordering after the compute stream, a forced
 *                       hang that must end in VOLT_ERR_TIMEOUT within the deadline, ddp /
 *                       zero2 / fsdp on cuda equal to single on cuda (and staged mpi forced by
 *                       strategy_comm); prints one line per section
 *   test_nccl nogpu     what runs without a GPU (CI): the registry row, the errors for a
 *                       device NCCL cannot serve, bad settings
 *   test_nccl missing   with VOLT_NCCL pointing at no file: the error names the library
 *   test_nccl harness   (mpirun -n 1) the collective and strategy sections against the mpi comm
 *                       on the cpu device, so their expected values and messages run in CI
 *   test_nccl split     (mpirun -n 4, one GPU per rank; the simulator in CI) comms built on the
 *                       groups of an MPI_Comm_split (volt_comm_config.mpi_comm): each group's
 *                       NCCL comm gets its own unique id over its own communicator
 *
 * Each section prints "nccl: <section>: ok (...)" or FAIL lines naming what differed. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "strategies/comm/comm.h"
#include "strategies/strategy.h"
#include "core/device.h"
#if defined(VOLT_HAVE_MPI) || defined(VOLT_HAVE_NCCL)
#define HAVE_PAR 1
#include "trainer/trainer_internal.h"
#include "strategies/parallel/parallel.h"
#endif
#ifdef VOLT_HAVE_NCCL
#include <cuda_runtime_api.h>
#include "core/cuda/cuda.h"
#endif
#if defined(VOLT_HAVE_NCCL) && defined(VOLT_HAVE_MPI)
#include "vtest_mpi.h"
#endif

static volt_status strategy_err(const char *name, const char *acc, const char *reduce, const char *comm, char *err, size_t n) {
    volt_strategy_config sc = { .name = name, .timeout_s = 5, .devices = 1, .num_nodes = 1, .accelerator = acc,
                                .reduce_dtype = reduce, .comm = comm };
    volt_strategy *st = NULL;
    err[0] = 0;
    volt_status s = volt__strategy_create(&sc, &st, err, n);
    volt__strategy_destroy(st);
    return s;
}

/* ---- without a GPU ---------------------------------------------------------------------------------- */
static void test_nogpu(void) {
    const volt_comm_row *r = volt__comm_backend_find("nccl");
    CHECK(r && !r->host_buffers && r->serves, "the nccl row (device buffers, serves a device kind)");
#ifdef VOLT_HAVE_NCCL
    CHECK(r && r->create, "nccl built in");
#else
    CHECK(r && !r->create && r->missing, "nccl not built in and says why");
#endif
    char err[768];
    /* single refuses settings that would do nothing */
    volt_status s = strategy_err("single", "cpu", "bf16", NULL, err, sizeof err);
    CHECK(s == VOLT_ERR_INVALID_ARG && strstr(err, "strategy_reduce_dtype=\"bf16\"") && strstr(err, "ddp"), "single + bf16: %s", err);
    s = strategy_err("single", "cpu", NULL, "nccl", err, sizeof err);
    CHECK(s == VOLT_ERR_INVALID_ARG && strstr(err, "strategy_comm=\"nccl\""), "single + nccl: %s", err);
    CHECK_OK(strategy_err("single", "cpu", "fp32", "auto", err, sizeof err));   /* the defaults spelled out */
#ifdef VOLT_HAVE_MPI
    /* errors found before any communication starts (no MPI job needed) */
    s = strategy_err("ddp", "cpu", "fp16", NULL, err, sizeof err);
    CHECK(s == VOLT_ERR_INVALID_ARG && strstr(err, "strategy_reduce_dtype must be \"fp32\" or \"bf16\", got \"fp16\""), "%s", err);
    s = strategy_err("ddp", "cpu", NULL, "gloo", err, sizeof err);
    CHECK(s == VOLT_ERR_INVALID_ARG && strstr(err, "unknown comm backend 'gloo'"), "%s", err);
    s = strategy_err("fsdp", "cpu", NULL, "nccl", err, sizeof err);
    CHECK(s == VOLT_ERR_UNSUPPORTED && strstr(err, "'nccl' cannot serve device 'cpu'"), "nccl forced on cpu: %s", err);
#endif
    {   /* one config check for every comm create (volt__comm_config_check): field and value named */
        volt_comm_config bad;
        volt__comm_config_init(&bad);
        bad.timeout_s = -2;
        volt_comm *bc = NULL;
        err[0] = 0;
        s = volt__comm_create_for(volt__device_cpu(), &bad, &bc, err, sizeof err);
        CHECK(s == VOLT_ERR_INVALID_ARG && !bc && strstr(err, "comm timeout must be > 0 s, got -2"), "%s", err);
#ifdef VOLT_HAVE_MPI
        err[0] = 0;
        s = volt__comm_mpi_create(&bad, &bc, err, sizeof err);
        CHECK(s == VOLT_ERR_INVALID_ARG && !bc && strstr(err, "comm timeout must be > 0 s, got -2"), "mpi: %s", err);
#endif
        bad.timeout_s = 1;
        bad.version = 99;
        err[0] = 0;
        s = volt__comm_create_for(volt__device_cpu(), &bad, &bc, err, sizeof err);
        CHECK(s == VOLT_ERR_VERSION && strstr(err, "volt_comm_config: version 99"), "%s", err);
#ifdef VOLT_HAVE_MPI
        err[0] = 0;
        s = volt__comm_mpi_create(&bad, &bc, err, sizeof err);
        CHECK(s == VOLT_ERR_VERSION && strstr(err, "volt_comm_config: version 99"), "mpi: %s", err);
#endif
    }
#ifdef VOLT_HAVE_NCCL
    /* the backend itself, given a device it cannot serve (or no device) */
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    cc.dev = volt__device_cpu();
    volt_comm *c = (volt_comm *)&c;
    err[0] = 0;
    s = volt__comm_nccl_create(&cc, &c, err, sizeof err);
    CHECK(s == VOLT_ERR_UNSUPPORTED && !c, "nccl on cpu refused");
    CHECK(strstr(err, "nccl: needs a cuda device (got cpu)") || strstr(err, "libnccl.so.2"), "%s", err);
    cc.timeout_s = 0;
    s = volt__comm_nccl_create(&cc, &c, err, sizeof err);
    CHECK(s == VOLT_ERR_INVALID_ARG && strstr(err, "timeout must be > 0"), "%s", err);
#endif
    printf("nccl: nogpu: ok (row %s)\n", r && r->create ? "built in" : r && r->missing ? r->missing : "?");
}

static void test_missing(void) {
    const char *lib = getenv("VOLT_NCCL");
    if (!lib || !*lib || access(lib, F_OK) == 0) {
        fprintf(stderr, "test_nccl missing: set VOLT_NCCL to a path that does not exist\n");
        vtest_fail_++;
        return;
    }
#ifdef VOLT_HAVE_NCCL
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    cc.dev = volt__device_cpu();   /* the library is looked for first, whatever the device */
    volt_comm *c = NULL;
    char err[768] = "";
    volt_status s = volt__comm_nccl_create(&cc, &c, err, sizeof err);
    CHECK(s == VOLT_ERR_UNSUPPORTED && !c && strstr(err, lib) && strstr(err, "VOLT_NCCL") && strstr(err, "strategy_comm=mpi"),
          "missing library: %s %s", volt_status_str(s), err);
    printf("nccl: missing library: ok (%s)\n", err);
#else
    printf("nccl: missing library: not built in, nothing to load\n");
    vtest_pass_++;
#endif
}

#ifdef HAVE_PAR
/* ---- on a GPU (and, for collectives and strategies, the harness on cpu) -------------------------------- */
typedef struct { volt_comm_dtype dt; volt_dtype vdt; const char *name; } kindt;
static const kindt KINDS[3] = { { VOLT_COMM_F32, VOLT_F32, "f32" }, { VOLT_COMM_BF16, VOLT_BF16, "bf16" },
                                { VOLT_COMM_F16, VOLT_F16, "f16" } };

static volt_device *g_dev;
/* what the sections expect: on a GPU accelerator cuda, comm nccl (forced mpi: staged); in the
 * harness cpu and mpi */
static const char *g_acc = "cuda", *g_auto_comm = "comm nccl", *g_forced_comm = "comm mpi (staged)";

static void h2d(void *d, const void *h, size_t n) { volt__dev_h2d(g_dev, d, h, n); }
static void d2h(void *h, const void *d, size_t n) { volt__dev_d2h(g_dev, h, d, n); }

/* n values of kind k from f32 (exact in 16 bits: small multiples of 1/8) */
static void fill(const kindt *k, void *h, int n, int seed) {
    float *f = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) f[i] = (float)((i * 7 + seed * 13) % 41 - 20) * 0.125f;
    volt_convert(h, k->vdt, f, VOLT_F32, n);
    free(f);
}

static bool same(const void *a, const void *b, size_t n, const char *what, const kindt *k) {
    if (!memcmp(a, b, n)) return true;
    fprintf(stderr, "nccl: %s (%s): result differs from the expected bytes\n", what, k->name);
    return false;
}

static void test_collectives(volt_comm *c) {
    enum { N = 1000 };
    const int W = c->world;
    void *a = volt__dev_alloc(g_dev, 4 * N * (size_t)W), *b = volt__dev_alloc(g_dev, 4 * N * (size_t)W);
    char *h = malloc(4 * N * (size_t)W), *want = malloc(4 * N * (size_t)W), *got = malloc(4 * N * (size_t)W);
    int bad = 0;
    for (int ki = 0; ki < 3; ki++) {
        const kindt *k = &KINDS[ki];
        const size_t es = volt__comm_dtype_size(k->dt), bytes = es * N;
        /* at world size 1 every reduction is the identity, every gather a copy */
        fill(k, want, N, ki);
        h2d(a, want, bytes);
        CHECK_OK(volt__comm_all_reduce(c, a, a, N, k->dt, VOLT_COMM_SUM, "ar in place"));
        d2h(got, a, bytes);
        bad += !same(got, want, bytes, "all_reduce sum in place", k);
        CHECK_OK(volt__comm_all_reduce(c, a, b, N, k->dt, VOLT_COMM_AVG, "ar avg"));
        d2h(got, b, bytes);
        bad += !same(got, want, bytes, "all_reduce avg", k);
        CHECK_OK(volt__comm_reduce_scatter(c, a, b, N / W, k->dt, VOLT_COMM_SUM, "rs"));
        d2h(got, b, bytes / (size_t)W);
        bad += !same(got, want + (size_t)c->rank * bytes / (size_t)W, bytes / (size_t)W, "reduce_scatter", k);
        CHECK_OK(volt__comm_reduce_scatter(c, a, (char *)a + (size_t)c->rank * bytes / (size_t)W, N / W, k->dt, VOLT_COMM_AVG, "rs in place"));
        CHECK_OK(volt__comm_all_gather(c, a, b, N, k->dt, "ag"));
        d2h(got, b, bytes);
        bad += !same(got, want, bytes, "all_gather", k);
        CHECK_OK(volt__comm_broadcast(c, b, N, k->dt, 0, "bcast"));
        d2h(got, b, bytes);
        bad += !same(got, want, bytes, "broadcast", k);
        /* host buffers (the strategies' metric sync, grad norm, gather_unit's host dst) */
        memcpy(h, want, bytes);
        CHECK_OK(volt__comm_all_reduce(c, h, h, N, k->dt, VOLT_COMM_AVG, "host ar"));
        bad += !same(h, want, bytes, "all_reduce on a host buffer", k);
        memset(got, 0, bytes);
        CHECK_OK(volt__comm_all_gather(c, a, got, N, k->dt, "ag to host"));
        bad += !same(got, want, bytes, "all_gather device -> host", k);
        CHECK_OK(volt__comm_broadcast(c, h, N, k->dt, 0, "host bcast"));
        bad += !same(h, want, bytes, "broadcast of a host buffer", k);
    }
    double dv[3] = { 1.5, -2.25, 1e300 };
    CHECK_OK(volt__comm_all_reduce(c, dv, dv, 3, VOLT_COMM_F64, VOLT_COMM_AVG, "metric sync"));
    CHECK(dv[0] == 1.5 && dv[1] == -2.25 && dv[2] == 1e300, "f64 host all_reduce at world 1");
    CHECK_OK(volt__comm_barrier(c, "barrier"));
    /* non-blocking: several in flight, test() then wait() */
    volt_comm_req *q[3] = { 0 };
    CHECK_OK(c->ops->all_reduce(c, a, a, N, VOLT_COMM_F32, VOLT_COMM_SUM, "q0", &q[0]));
    CHECK_OK(c->ops->all_gather(c, a, b, N, VOLT_COMM_F32, "q1", &q[1]));
    CHECK_OK(c->ops->barrier(c, "q2", &q[2]));
    bool done = false;
    for (double t0 = vtest_now(); !done && vtest_now() - t0 < 5;) CHECK_OK(c->ops->test(c, q[2], &done));
    CHECK(done, "test() sees a barrier complete");
    for (int i = 0; i < 3; i++) CHECK_OK(c->ops->wait(c, q[i]));
    CHECK(!bad, "%d collective results wrong", bad);
    printf("nccl: collectives: %s (world %d; f32, bf16, f16; device and host buffers; non-blocking)\n", bad ? "FAIL" : "ok", W);
    volt__dev_free(g_dev, a);
    volt__dev_free(g_dev, b);
    free(h);
    free(want);
    free(got);
}

#ifdef VOLT_HAVE_NCCL
/* A host function on the compute stream: sleeps (ordering) or spins until released (hang). */
static atomic_int g_release;
static void CUDART_CB hold_stream(void *arg) {
    const double t0 = vtest_now();
    while (!atomic_load(&g_release) && vtest_now() - t0 < (arg ? 0.3 : 60)) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

static void test_ordering(volt_comm *c) {
    enum { N = 1 << 20 };
    volt_cuda_ctx *cx = volt__cuda_ctx(g_dev);
    float *a = volt__dev_alloc(g_dev, 4 * N), *b = volt__dev_alloc(g_dev, 4 * N);
    volt__dev_memset(g_dev, a, 0, 4 * N);
    volt__dev_memset(g_dev, b, 0, 4 * N);
    g_dev->be->synchronize(g_dev);
    /* compute: [sleep 0.3 s] [a := 0x3f3f3f3f]; the collective a -> b must see the memset */
    atomic_store(&g_release, 0);
    CHECK(cudaLaunchHostFunc(cx->stream, hold_stream, (void *)1) == cudaSuccess, "cudaLaunchHostFunc");
    volt__dev_memset(g_dev, a, 0x3f, 4 * N);
    CHECK_OK(volt__comm_all_reduce(c, a, b, N, VOLT_COMM_F32, VOLT_COMM_SUM, "ordered"));
    float *h = malloc(4 * N);
    d2h(h, b, 4 * N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += memcmp(&h[i], "\x3f\x3f\x3f\x3f", 4) != 0;
    CHECK(!bad, "the collective ran before the compute stream's memset: %d of %d elements old", bad, N);
    printf("nccl: ordering after the compute stream: %s\n", bad ? "FAIL" : "ok");
    free(h);
    volt__dev_free(g_dev, a);
    volt__dev_free(g_dev, b);
}

/* The forced hang's guard: at `soft` seconds it lets the compute stream go (so a wait that
 * only returns once the queued work can run shows up as a late return, with its time); at
 * `hard` seconds it ends the process (a real hang). */
static atomic_int g_hang_over, g_soft_fired;
static void *watchdog(void *arg) {
    const double *lim = arg, t0 = vtest_now();
    while (!atomic_load(&g_hang_over)) {
        const double el = vtest_now() - t0;
        if (el > lim[0] && !atomic_load(&g_soft_fired)) {
            atomic_store(&g_soft_fired, 1);
            atomic_store(&g_release, 1);
            fprintf(stderr, "nccl: forced hang: no return after %.0f s: the watchdog released the compute stream\n", lim[0]);
        }
        if (el > lim[1]) {
            fprintf(stderr, "FAIL nccl: forced hang: wait did not return within %.0f s, even with the compute stream released "
                    "(a hang: the timeout/abort path is broken)\n", lim[1]);
            _exit(1);
        }
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_hang(void) {
    const double T = 2;
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    cc.timeout_s = T;
    volt_comm *c = NULL;
    char err[768] = "";
    volt_status s = volt__comm_create_for(g_dev, &cc, &c, err, sizeof err);
    CHECK(s == VOLT_OK, "second nccl comm: %s", err);
    if (s < 0) return;
    volt_cuda_ctx *cx = volt__cuda_ctx(g_dev);
    float *a = volt__dev_alloc(g_dev, 4096);
    volt__dev_memset(g_dev, a, 0, 4096);
    atomic_store(&g_release, 0);
    static double limits[2] = { 8, 25 };
    pthread_t th;
    pthread_create(&th, NULL, watchdog, limits);
    /* the compute stream is held: the collective (ordered after it) cannot run */
    CHECK(cudaLaunchHostFunc(cx->stream, hold_stream, NULL) == cudaSuccess, "cudaLaunchHostFunc");
    const double t0 = vtest_now();
    s = volt__comm_all_reduce(c, a, a, 1024, VOLT_COMM_F32, VOLT_COMM_SUM, "forced hang");
    const double el = vtest_now() - t0;
    const volt_status hs = s;
    CHECK(s == VOLT_ERR_TIMEOUT, "forced hang: got %s, want VOLT_ERR_TIMEOUT", volt_status_str(s));
    CHECK(el >= T * 0.95 && el <= T + 3 && !atomic_load(&g_soft_fired), "forced hang: ended after %.2f s, deadline %.0f s%s", el, T,
          atomic_load(&g_soft_fired) ? " (only after the watchdog released the compute stream: ncclCommAbort or the poll waited "
                                       "for the queued work)" : "");
    char m[512];   /* a copy: the message is the comm's, and the comm is destroyed below */
    snprintf(m, sizeof m, "%s", volt__comm_errmsg(c));
    CHECK(strstr(m, "rank 0: all_reduce #1 (forced hang) timed out after 2 s") && strstr(m, "aborted"), "message: %s", m);
    s = volt__comm_barrier(c, "after");
    CHECK(s == VOLT_ERR_TIMEOUT && strstr(volt__comm_errmsg(c), "unusable after: rank 0: all_reduce #1"), "broken comm: %s",
          volt__comm_errmsg(c));
    atomic_store(&g_release, 1);   /* let the compute stream go */
    atomic_store(&g_hang_over, 1);
    pthread_join(th, NULL);
    CHECK(cudaStreamSynchronize(cx->stream) == cudaSuccess, "the compute stream recovers after the abort");
    volt__comm_destroy(c);
    volt__dev_free(g_dev, a);
    const bool ok = hs == VOLT_ERR_TIMEOUT && el <= T + 3 && el >= T * 0.95 && !atomic_load(&g_soft_fired);
    printf("nccl: forced hang: %s (returned after %.2f s, deadline %.0f s: %s)\n", ok ? "ok" : "FAIL", el, T, m);
}

#endif

/* ---- ddp / zero2 / fsdp at world size 1 on cuda vs single on cuda ---------------------------------- */
enum { IN = 13, HID = 24, NC = 3, BS = 8, NS = BS * 2 * 5 };
typedef struct { volt_tensor *w1, *b1, *w2, *b2; } tiny;
static float X[NS * IN];
static int64_t Y[NS];

static volt_status tiny_setup(void *self, volt_params *ps) {
    tiny *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(HID, IN), VOLT_INIT_TORCH_LINEAR, &m->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(HID), VOLT_INIT_UNIFORM(-0.1f, 0.1f), &m->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(NC, HID), VOLT_INIT_TORCH_LINEAR, &m->w2));
    return volt_param_new(ps, "fc2.bias", VOLT_SHAPE(NC), VOLT_INIT_ZEROS, &m->b2);
}
static volt_status tiny_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    tiny *m = self;
    (void)i;
    volt_tensor *h = volt_relu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1));
    volt_tensor *loss = volt_cross_entropy(s, volt_linear(s, h, m->w2, m->b2), volt_batch_y(b));
    VOLT_TRY(volt_log(s, "train_loss", loss, VOLT_LOG_STEP | VOLT_LOG_SYNC));
    return volt_step_set_loss(s, loss);
}
static volt_status tiny_opt(void *self, volt_optim_setup *o) {
    (void)self;
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = 1e-2f;
    o->optimizer.weight_decay = 0.01f;
    return VOLT_OK;
}
static const volt_module_ops tiny_ops = { .version = VOLT_MODULE_OPS_VERSION, .name = "tiny", .setup = tiny_setup,
                                          .training_step = tiny_train, .configure_optimizers = tiny_opt };

static int fit_tiny(const char *strategy, const char *comm, float *out, int cap, char *why, size_t whylen) {
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(IN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { X, Y };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, d, NS, &ds));
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.accelerator = g_acc;
    c.strategy = strategy;
    c.strategy_comm = comm;
    c.max_epochs = 1;
    c.max_steps = 5;
    c.accumulate_grad_batches = 2;
    c.gradient_clip_val = 0.1f;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = c.enable_model_summary = false;
    c.num_sanity_val_steps = 0;
    c.default_root_dir = vtest_tmpdir();
    c.seed = 3;
    volt_trainer *t = NULL;
    tiny m = { 0 };
    volt_loader *l = vtest_loader(ds, BS, true);
    int n = -1;
    volt_status s = volt_trainer_create(&c, &t);
    if (s == VOLT_OK) s = volt_trainer_fit(t, &tiny_ops, &m, l, NULL, NULL);
    if (s < 0) snprintf(why, whylen, "%s", t ? volt_trainer_errmsg(t) : volt_status_str(s));
    else {
        volt_params *ps = volt_trainer_params(t);
        n = 0;
        for (int i = 0; i < volt_params_count(ps); i++) {
            volt_tensor *p = volt_params_at(ps, i);
            if (n + volt_tensor_numel(p) > cap) { n = -1; break; }
            vtest_f32(p, out + n);
            n += (int)volt_tensor_numel(p);
        }
        volt_comm *cm = volt__dist_comm(t->strategy);
        if (cm) snprintf(why, whylen, "comm %s%s", cm->ops->name, cm->staged ? " (staged)" : "");
    }
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
    return n;
}

static void test_strategies(void) {
    for (int i = 0; i < NS; i++) {
        Y[i] = (i * 5 + i / 3) % NC;
        for (int k = 0; k < IN; k++) X[i * IN + k] = cosf(0.23f * (float)(i * IN + k)) + (k % NC == Y[i] ? 0.6f : 0.f);
    }
    enum { CAP = 1024 };
    static float ref[CAP], got[CAP];
    char why[768] = "";
    const int n = fit_tiny("single", NULL, ref, CAP, why, sizeof why);
    CHECK(n > 0, "single on cuda: %s", why);
    if (n <= 0) return;
    static const struct { const char *s, *comm; } runs[] = { { "ddp", NULL }, { "zero2", NULL }, { "fsdp", NULL },
                                                            { "ddp", "mpi" } };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
#ifndef VOLT_HAVE_MPI
        if (runs[r].comm) {
            printf("nccl: %s [forced mpi]: not run (built without MPI)\n", runs[r].s);
            continue;
        }
#endif
        why[0] = 0;
        const int m = fit_tiny(runs[r].s, runs[r].comm, got, CAP, why, sizeof why);
        CHECK(m == n, "%s%s%s on cuda: %s", runs[r].s, runs[r].comm ? " comm=" : "", runs[r].comm ? runs[r].comm : "", why);
        if (m != n) {
            printf("nccl: %s vs single: FAIL (%s)\n", runs[r].s, why);
            continue;
        }
        double worst = 0;
        for (int i = 0; i < n; i++) {
            const double e = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + 1e-3);
            if (e > worst) worst = e;
        }
        const char *want = runs[r].comm ? g_forced_comm : g_auto_comm;
        CHECK(!strcmp(why, want), "%s: %s, want %s", runs[r].s, why, want);
        CHECK(worst <= 1e-6, "%s on %s, world 1: params differ from single by %.3g (relative)", runs[r].s, g_acc, worst);
        printf("nccl: %s%s vs single on %s: %s (max rel diff %.3g; %s)\n", runs[r].s, runs[r].comm ? " [forced mpi]" : "",
               g_acc, worst <= 1e-6 && !strcmp(why, want) ? "ok" : "FAIL", worst, why);
    }
}

#ifdef VOLT_HAVE_NCCL
static void test_gpu(void) {
    char err[768] = "";
    const int ngpu = volt__backend_find("cuda")->device_count();
    volt_status s = volt__device_get("cuda", volt__comm_local_rank() % ngpu, &g_dev, err, sizeof err);
    CHECK(s == VOLT_OK, "cuda device: %s", err);
    if (s < 0) return;
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    cc.timeout_s = 30;
    volt_comm *c = NULL;
    const double t0 = vtest_now();
    s = volt__comm_create_for(g_dev, &cc, &c, err, sizeof err);
    CHECK(s == VOLT_OK, "nccl comm on cuda:%d: %s", g_dev->ordinal, err);
    if (s < 0) return;
    CHECK(!strcmp(c->ops->name, "nccl") && !c->staged && (c->ops->flags & VOLT_COMM_STREAM_ORDERED), "auto on cuda is nccl, not staged");
    printf("nccl: init: ok (rank %d of %d on cuda:%d, %.2f s)\n", c->rank, c->world, g_dev->ordinal, vtest_now() - t0);
    test_collectives(c);
    test_ordering(c);
    volt__comm_destroy(c);
    /* devices larger than the GPUs visible: a clear error, before any communication */
    char e2[768];
    volt_strategy_config sc = { .name = "ddp", .timeout_s = 5, .devices = g_dev->be->device_count() + 1, .num_nodes = 1,
                                .accelerator = "cuda" };
    volt_strategy *st = NULL;
    s = volt__strategy_create(&sc, &st, e2, sizeof e2);
    CHECK(s == VOLT_ERR_INVALID_ARG && strstr(e2, "visible device"), "devices > GPUs: %s", e2);
    volt__strategy_destroy(st);
    test_hang();
    test_strategies();
}
#endif

#ifdef VOLT_HAVE_MPI
/* The sections that need no GPU, against the mpi comm on the cpu device (world 1). */
static void test_harness(void) {
    g_acc = "cpu";
    g_auto_comm = "comm mpi";
    g_forced_comm = "comm mpi";
    g_dev = volt__device_cpu();
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    cc.timeout_s = 30;
    volt_comm *c = NULL;
    char err[768] = "";
    volt_status s = volt__comm_create_for(g_dev, &cc, &c, err, sizeof err);
    CHECK(s == VOLT_OK && !strcmp(c->ops->name, "mpi") && !c->staged, "mpi comm on cpu: %s", err);
    if (s < 0) return;
    test_collectives(c);
    volt__comm_destroy(c);
    test_strategies();
}
#endif
#endif

#if defined(VOLT_HAVE_NCCL) && defined(VOLT_HAVE_MPI)
/* ---- comms on sub-communicators (volt_comm_config.mpi_comm) ---------------------------------------
 * One round: MPI_Comm_split(MPI_COMM_WORLD, color, key); the ranks whose group `makes` it build a
 * comm on their group (the nccl backend on their GPU, then the mpi backend on the cpu) and check
 * that it is that group: its rank and size, an all-reduce summing exactly the group's values,
 * an all-gather in the group's rank order. Before the fix the NCCL unique id went over
 * MPI_COMM_WORLD: groups shared world rank 0's id (one NCCL comm of every rank, or a rank
 * refused), and a group without world rank 0 waited for a broadcast no one sent until the
 * deadline. */
static void split_round(volt_device *dev, const char *what, int color, int key, bool makes) {
    int wrank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &sub);
    int srank = -1, ssize = 0;
    MPI_Comm_rank(sub, &srank);
    MPI_Comm_size(sub, &ssize);
    enum { MAXW = 64 };
    int members[MAXW];
    if (ssize <= MAXW) MPI_Allgather(&wrank, 1, MPI_INT, members, 1, MPI_INT, sub);
    float sum = 0;
    for (int r = 0; r < ssize && r < MAXW; r++) sum += (float)(members[r] + 1);
    int ok = 1;
    for (int pass = 0; makes && ssize <= MAXW && pass < 2; pass++) {
        volt_device *d = pass == 0 ? dev : volt__device_cpu();
        volt_comm_config cc;
        volt__comm_config_init(&cc);
        cc.timeout_s = 10;
        cc.backend = pass == 0 ? "nccl" : "mpi";
        cc.mpi_comm = &sub;
        volt_comm *c = NULL;
        char err[768] = "";
        volt_status s = volt__comm_create_for(d, &cc, &c, err, sizeof err);
        CHECK(s == VOLT_OK, "%s: %s comm on world rank %d's group (color %d): %s", what, cc.backend, wrank, color, err);
        if (s < 0) { ok = 0; continue; }
        CHECK(c->rank == srank && c->world == ssize, "%s: %s comm is rank %d of %d, its group says %d of %d", what,
              cc.backend, c->rank, c->world, srank, ssize);
        float h[MAXW + 1], got[MAXW];
        h[0] = (float)(wrank + 1);
        void *a = volt__dev_alloc(d, sizeof(float) * (MAXW + 1));
        volt__dev_h2d(d, a, h, sizeof(float));
        CHECK_OK(volt__comm_all_reduce(c, a, a, 1, VOLT_COMM_F32, VOLT_COMM_SUM, "group sum"));
        volt__dev_d2h(d, got, a, sizeof(float));
        CHECK(got[0] == sum, "%s: %s all_reduce on world rank %d gave %g, its group's sum is %g", what, cc.backend, wrank,
              (double)got[0], (double)sum);
        ok &= got[0] == sum;
        h[0] = (float)wrank;
        volt__dev_h2d(d, (float *)a + 1 + srank, h, sizeof(float));
        CHECK_OK(volt__comm_all_gather(c, (float *)a + 1 + srank, (float *)a + 1, 1, VOLT_COMM_F32, "group ranks"));
        volt__dev_d2h(d, got, (float *)a + 1, sizeof(float) * (size_t)ssize);
        for (int r = 0; r < ssize; r++) {
            CHECK(got[r] == (float)members[r], "%s: %s all_gather slot %d on world rank %d: %g, want world rank %d", what,
                  cc.backend, r, wrank, (double)got[r], members[r]);
            ok &= got[r] == (float)members[r];
        }
        volt__dev_free(d, a);
        volt__comm_destroy(c);
    }
    MPI_Comm_free(&sub);
    MPI_Barrier(MPI_COMM_WORLD);
    int all = ok;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (wrank == 0) printf("nccl: split: %s: %s\n", what, all ? "ok" : "FAIL");
}

static void test_split(void) {
    int wrank = 0, wsize = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const volt_backend *be = volt__backend_find("cuda");
    const int ngpu = be ? be->device_count() : 0;
    if (wsize < 4 || ngpu < 1) {
        char why[128];
        snprintf(why, sizeof why, "split needs 4 ranks and a GPU (have %d ranks, %d GPUs)", wsize, ngpu);
        vtest_missing(why);
        return;
    }
    volt_device *dev = NULL;
    char err[768] = "";
    CHECK_OK(volt__device_get("cuda", volt__comm_local_rank() % ngpu, &dev, err, sizeof err));
    if (!dev) return;
    /* a rank an MPI_Comm_split left out (MPI_COMM_NULL): a clear error from either backend */
    for (int pass = 0; pass < 2; pass++) {
        MPI_Comm nul = MPI_COMM_NULL;
        volt_comm_config cc;
        volt__comm_config_init(&cc);
        cc.backend = pass == 0 ? "nccl" : "mpi";
        cc.mpi_comm = &nul;
        volt_comm *c = NULL;
        err[0] = 0;
        volt_status s = volt__comm_create_for(pass == 0 ? dev : volt__device_cpu(), &cc, &c, err, sizeof err);
        CHECK(s == VOLT_ERR_INVALID_ARG && !c && strstr(err, "MPI_COMM_NULL"), "%s on MPI_COMM_NULL: %s (%s)", cc.backend,
              volt_status_str(s), err);
        volt__comm_destroy(c);
    }
    /* two groups at once, neither in world rank order (key -rank: group rank 0 is the highest) */
    split_round(dev, "two groups of even and odd ranks, reversed", wrank % 2, -wrank, true);
    /* only the group without world rank 0 makes a comm: must not wait for world rank 0 */
    split_round(dev, "one group (world ranks 2, 3) alone", wrank / 2, wrank, wrank >= 2);
    /* every rank its own world of one */
    split_round(dev, "world-size-1 comms", wrank, 0, true);
    int bad = vtest_fail_, any = bad;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (wrank == 0 && !any) printf("nccl: split: ok (%d ranks; nccl and mpi comms on sub-communicators)\n", wsize);
}
#endif

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "gpu";
    if (!strcmp(mode, "nogpu")) {
        test_nogpu();
        return vtest_finish();
    }
    if (!strcmp(mode, "missing")) {
        test_missing();
        return vtest_finish();
    }
    if (!strcmp(mode, "harness")) {
#ifdef VOLT_HAVE_MPI
        test_harness();
        return vtest_finish();
#else
        VTEST_SKIP("built without MPI");
#endif
    }
    if (!strcmp(mode, "split")) {
#if defined(VOLT_HAVE_NCCL) && defined(VOLT_HAVE_MPI)
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        test_split();
        return vtest_mpi_finish();
#else
        VTEST_SKIP("built without NCCL or MPI");
#endif
    }
    if (strcmp(mode, "gpu")) {
        fprintf(stderr, "usage: test_nccl [gpu | nogpu | missing | harness | split]\n");
        return 2;
    }
#ifdef VOLT_HAVE_NCCL
    const volt_backend *be = volt__backend_find("cuda");
    if (!be || be->device_count() < 1) {
        printf("SKIP: no cuda device: the NCCL checks did not run (test_nccl_nogpu ran the rest)\n");
        return 77;
    }
    test_gpu();
    return vtest_finish();
#else
    printf("SKIP: built without NCCL (needs CUDA, MPI and nccl.h)\n");
    return 77;
#endif
}
