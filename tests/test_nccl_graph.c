/* NCCL collectives inside a captured CUDA graph, and the comm's bounded wait for a launch
 * (strategies/comm/nccl/comm_nccl.c; docs/NCCL.md, "compile over several processes"). On a cuda
 * device at world size 1 (label gpu; exit 77 without one; the simulator in CI), the part of
 * compile over several processes one GPU can check:
 *
 *   - captured: scale a by 2, all-reduce a -> b, scale b by 3, captured on the compute stream;
 *     nothing runs at capture; each launch (then drain) runs all three again (the values grow:
 *     a launch that skipped the collective, or ran it at capture only, shows);
 *   - the bound: the compute stream held by a host function, a graph launched behind it, drain
 *     with a 2 s deadline returns VOLT_ERR_TIMEOUT after about 2 s naming the step, the
 *     communicator aborted (a 25 s watchdog ends the test if it hangs);
 *   - refused: a collective on host memory while capturing (its result would be read on the
 *     host), with the reason; the capture then fails and the device stays usable.
 * One line per section: "nccl graph: <section>: ok (...)". */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include "vtest.h"
#include "volt/volt.h"
#include "strategies/comm/comm.h"
#include "core/device.h"
#ifdef VOLT_HAVE_NCCL
#include <cuda_runtime_api.h>
#include "core/cuda/cuda.h"

static volt_device *g_dev;

static volt_comm *make_comm(double timeout_s) {
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    cc.timeout_s = timeout_s;
    volt_comm *c = NULL;
    char err[768] = "";
    volt_status s = volt__comm_create_for(g_dev, &cc, &c, err, sizeof err);
    CHECK(s == VOLT_OK && c && !strcmp(c->ops->name, "nccl") && c->ops->drain, "nccl comm with drain: %s", err);
    if (s < 0) return NULL;
    /* the first collective connects (non-blocking init): never the captured one */
    float *w = volt__dev_alloc(g_dev, 4);
    volt__dev_memset(g_dev, w, 0, 4);
    CHECK_OK(volt__comm_all_reduce(c, w, w, 1, VOLT_COMM_F32, VOLT_COMM_SUM, "warm-up"));
    volt__dev_free(g_dev, w);
    return c;
}

static void test_captured(void) {
    enum { N = 1000 };
    volt_comm *c = make_comm(30);
    if (!c) return;
    const volt_param_math *pm = g_dev->be->pm;
    float *a = volt__dev_alloc(g_dev, 4 * N), *b = volt__dev_alloc(g_dev, 4 * N);
    static float h[N], got[N];
    for (int i = 0; i < N; i++) h[i] = (float)(i % 17) - 8.f;
    volt__dev_h2d(g_dev, a, h, sizeof h);
    volt__dev_memset(g_dev, b, 0, 4 * N);
    g_dev->be->synchronize(g_dev);
    char err[512] = "";
    CHECK_OK(volt__dev_graph_begin(g_dev, err, sizeof err));
    pm->scale(g_dev, a, N, 2.f);
    volt_comm_req *q = NULL;
    volt_status s = c->ops->all_reduce(c, a, b, N, VOLT_COMM_F32, VOLT_COMM_SUM, "captured", &q);
    CHECK(s == VOLT_OK, "all_reduce while capturing: %s", volt__comm_errmsg(c));
    bool done = true;
    if (q) CHECK(c->ops->test(c, q, &done) == VOLT_OK && !done, "a captured collective reads as done before any launch");
    if (q) CHECK_OK(c->ops->wait(c, q));   /* orders the compute stream after it; waits for nothing */
    pm->scale(g_dev, b, N, 3.f);
    volt_device_graph *g = NULL;
    s = volt__dev_graph_end(g_dev, &g, err, sizeof err);
    CHECK(s == VOLT_OK && g, "graph end: %s", err);
    if (s < 0) goto out;
    volt__dev_d2h(g_dev, got, b, sizeof got);
    CHECK(got[3] == 0.f, "the captured work ran at capture: b[3] = %g", got[3]);
    int bad = 0;
    for (int launch = 1; launch <= 3; launch++) {
        CHECK_OK(g_dev->be->graph_launch(g_dev, g, err, sizeof err));
        CHECK_OK(c->ops->drain(c, "captured test graph"));
        volt__dev_d2h(g_dev, got, b, sizeof got);
        const float k = (float)(1 << launch) * 3.f;   /* a doubled `launch` times, then b = a * 3 (world 1) */
        for (int i = 0; i < N; i++) bad += got[i] != h[i] * k;
    }
    CHECK(!bad, "%d values wrong over 3 launches", bad);
    printf("nccl graph: captured: %s (all_reduce between two kernels, 3 launches, each drained)\n", bad ? "FAIL" : "ok");
    g_dev->be->graph_destroy(g_dev, g);
out:
    volt__dev_free(g_dev, a);
    volt__dev_free(g_dev, b);
    volt__comm_destroy(c);
}

/* A host function on the compute stream that spins until released (or 60 s). */
static atomic_int g_release, g_over;
static void CUDART_CB hold_stream(void *arg) {
    (void)arg;
    const double t0 = vtest_now();
    while (!atomic_load(&g_release) && vtest_now() - t0 < 60) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}
static void *watchdog(void *arg) {
    (void)arg;
    const double t0 = vtest_now();
    while (!atomic_load(&g_over)) {
        if (vtest_now() - t0 > 25) {
            fprintf(stderr, "FAIL nccl graph: bound: drain did not return within 25 s (a hang)\n");
            _exit(1);
        }
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_bound(void) {
    const double T = 2;
    volt_comm *c = make_comm(T);
    if (!c) return;
    float *a = volt__dev_alloc(g_dev, 4096);
    volt__dev_memset(g_dev, a, 0, 4096);
    char err[512] = "";
    CHECK_OK(volt__dev_graph_begin(g_dev, err, sizeof err));
    CHECK_OK(volt__comm_all_reduce(c, a, a, 1024, VOLT_COMM_F32, VOLT_COMM_SUM, "in the graph"));
    volt_device_graph *g = NULL;
    CHECK_OK(volt__dev_graph_end(g_dev, &g, err, sizeof err));
    if (!g) { volt__comm_destroy(c); volt__dev_free(g_dev, a); return; }
    volt_cuda_ctx *cx = volt__cuda_ctx(g_dev);
    atomic_store(&g_release, 0);
    pthread_t th;
    pthread_create(&th, NULL, watchdog, NULL);
    CHECK(cudaLaunchHostFunc(cx->stream, hold_stream, NULL) == cudaSuccess, "cudaLaunchHostFunc");
    CHECK_OK(g_dev->be->graph_launch(g_dev, g, err, sizeof err));
    const double t0 = vtest_now();
    volt_status s = c->ops->drain(c, "the held graph");
    const double el = vtest_now() - t0;
    char m[768];
    snprintf(m, sizeof m, "%s", volt__comm_errmsg(c));
    CHECK(s == VOLT_ERR_TIMEOUT && el >= T * 0.95 && el <= T + 3, "drain: %s after %.2f s (deadline %.0f s): %s",
          volt_status_str(s), el, T, m);
    CHECK(strstr(m, "rank 0: device work #") && strstr(m, "(the held graph) timed out after 2 s") && strstr(m, "aborted"),
          "message: %s", m);
    CHECK(volt__comm_barrier(c, "after") < 0, "the comm still works after the abort");
    atomic_store(&g_release, 1);
    atomic_store(&g_over, 1);
    pthread_join(th, NULL);
    CHECK(cudaStreamSynchronize(cx->stream) == cudaSuccess, "the compute stream recovers after the abort");
    cudaGetLastError();
    g_dev->be->graph_destroy(g_dev, g);
    volt__comm_destroy(c);
    volt__dev_free(g_dev, a);
    printf("nccl graph: bound: %s (drain returned after %.2f s, deadline %.0f s: %s)\n",
           s == VOLT_ERR_TIMEOUT && el <= T + 3 ? "ok" : "FAIL", el, T, m);
}

static void test_refused(void) {
    volt_comm *c = make_comm(30);
    if (!c) return;
    double v = 1;
    char err[512] = "";
    CHECK_OK(volt__dev_graph_begin(g_dev, err, sizeof err));
    volt_comm_req *q = NULL;
    volt_status s = c->ops->all_reduce(c, &v, &v, 1, VOLT_COMM_F64, VOLT_COMM_SUM, "metric", &q);
    char m[768];
    snprintf(m, sizeof m, "%s", volt__comm_errmsg(c));
    volt_device_graph *g = NULL;
    volt_status ge = volt__dev_graph_end(g_dev, &g, err, sizeof err);   /* may fail: the comm stream joined for nothing */
    if (g) g_dev->be->graph_destroy(g_dev, g);
    cudaGetLastError();
    CHECK(s == VOLT_ERR_UNSUPPORTED && !q && strstr(m, "host memory cannot be part of a captured step"), "host buffer in a capture: "
          "%s: %s", volt_status_str(s), m);
    /* the device and a new comm work afterwards */
    volt__comm_destroy(c);
    c = make_comm(30);
    if (c) CHECK_OK(volt__comm_all_reduce(c, &v, &v, 1, VOLT_COMM_F64, VOLT_COMM_SUM, "after"));
    CHECK(v == 1, "host all_reduce after the refused capture: %g", v);
    volt__comm_destroy(c);
    printf("nccl graph: refused: %s (%s; the capture then %s)\n", s == VOLT_ERR_UNSUPPORTED ? "ok" : "FAIL", m,
           ge < 0 ? "failed" : "ended");
}
#endif

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef VOLT_HAVE_NCCL
    const volt_backend *be = volt__backend_find("cuda");
    if (!be || be->device_count() < 1) {
        printf("SKIP: no cuda device: NCCL inside CUDA graphs not checked\n");
        return 77;
    }
    char err[768] = "";
    volt_status s = volt__device_get("cuda", volt__comm_local_rank() % be->device_count(), &g_dev, err, sizeof err);
    CHECK(s == VOLT_OK, "cuda device: %s", err);
    if (s < 0) return vtest_finish();
    if (!volt__dev_has_graphs(g_dev)) VTEST_SKIP("the cuda backend has no graph capture");
    test_captured();
    test_bound();
    test_refused();
    return vtest_finish();
#else
    printf("SKIP: built without NCCL (needs CUDA, MPI and nccl.h)\n");
    return 77;
#endif
}
