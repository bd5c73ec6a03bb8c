/* 16-bit collectives (VOLT_COMM_BF16 / VOLT_COMM_F16) of the MPI comm backend, and the comm
 * registry's rows (nccl, mpi) and override.
 *
 *   test_comm16                  local: registry rows, the nccl row's errors on a CPU device
 *   mpirun -np N test_comm16 mpi every collective in bf16 and f16 on N ranks
 *   mpirun -np N test_comm16 bench [M]  all_reduce (avg) of M elements (default 4M): f32 vs bf16
 *                                       wall and process CPU time per call (not a test)
 *
 * The reduction rule (comm.h): each pair of elements is added in f32 and rounded once to the
 * element type (nearest even). So with values whose sums are exact in 16 bits every rank
 * gets the exact sum; with values that are not, two ranks give RNE(a + b) exactly, and three
 * ranks give one of the pairwise orders RNE(RNE(a + b) + c), ... — the same bits on every
 * rank. AVG divides the 16-bit sum in f32 and rounds once. */
#include "vtest.h"
#include "volt/volt.h"
#include "strategies/comm/comm.h"
#include "core/device.h"
#ifdef VOLT_HAVE_MPI
#include "vtest_mpi.h"
#endif

typedef struct {
    volt_comm_dtype dt;
    const char *name;
    uint16_t (*to16)(float);
    float (*to32)(uint16_t);
} kind16;
static const kind16 K16[2] = {
    { VOLT_COMM_BF16, "bf16", volt_f32_to_bf16, volt_bf16_to_f32 },
    { VOLT_COMM_F16, "f16", volt_f32_to_f16, volt_f16_to_f32 },
};

/* ---- local: the registry ------------------------------------------------------------------------ */
static void test_registry(void) {
    CHECK(volt__comm_dtype_size(VOLT_COMM_BF16) == 2 && volt__comm_dtype_size(VOLT_COMM_F16) == 2, "16-bit sizes");
    const volt_comm_row *n = volt__comm_backend_find("nccl"), *m = volt__comm_backend_find("mpi");
    CHECK(n && m, "rows nccl and mpi");
    if (!n || !m) return;
    CHECK(volt__comm_backend_at(0) == n, "nccl comes first (it wins on cuda devices)");
    CHECK(!n->host_buffers && m->host_buffers, "nccl takes device buffers, mpi host buffers");
    volt_device *cpu = volt__device_cpu();
    CHECK(n->serves && !n->serves(cpu), "nccl does not serve the cpu device");
    CHECK(!m->serves || m->serves(cpu), "mpi serves the cpu device");
#ifdef VOLT_HAVE_NCCL
    CHECK(n->create != NULL, "nccl built in with CUDA and MPI");
#else
    CHECK(n->create == NULL && n->missing && *n->missing, "nccl not built in, says why: %s", n->missing ? n->missing : "-");
#endif
    /* forcing a backend: unknown name, nccl on a cpu device — clear errors, nothing created */
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    CHECK(cc.version == VOLT_COMM_CONFIG_VERSION && cc.version >= 2 && !cc.backend && !cc.dev, "config v2 defaults");
    char err[512] = "";
    volt_comm *c = (volt_comm *)&c;
    cc.backend = "gloo";
    volt_status st = volt__comm_create_for(cpu, &cc, &c, err, sizeof err);
    CHECK(st == VOLT_ERR_INVALID_ARG && !c && strstr(err, "unknown comm backend 'gloo'") && strstr(err, "nccl") && strstr(err, "mpi"),
          "unknown backend: %s %s", volt_status_str(st), err);
    cc.backend = "nccl";
    err[0] = 0;
    st = volt__comm_create_for(cpu, &cc, &c, err, sizeof err);
    CHECK(st == VOLT_ERR_UNSUPPORTED && !c && strstr(err, "'nccl' cannot serve device 'cpu'"), "nccl on cpu: %s %s",
          volt_status_str(st), err);
    printf("registry: nccl first (%s), mpi (%s); forcing nccl on cpu: %s\n", n->create ? "built in" : n->missing,
           m->create ? "built in" : m->missing, err);
}

#ifdef VOLT_HAVE_MPI
#include <time.h>
static int g_rank, g_world;

static bool same_everywhere(const void *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

enum { K = 40 };   /* elements per rank chunk */

/* rank r's exact value at i: small multiples of 1/4, whose sums over <= 4 ranks are exact in
 * bf16 and f16 */
static float exact_v(int r, int i) { return (float)((i * 5 + r * 3) % 23 - 11) * 0.25f; }
/* rank r's inexact value at i: 16-bit values of different magnitudes, so sums lose bits */
static float inexact_v(const kind16 *k, int r, int i) {
    const float v = (1.0f + (float)((i * 7 + r * 13) % 127) / 128.0f) * ldexpf(1.0f, (r * 5 + i) % 9 - 4);
    return k->to32(k->to16(i % 2 ? -v : v));
}
static uint16_t rsum(const kind16 *k, uint16_t a, uint16_t b) { return k->to16(k->to32(a) + k->to32(b)); }

/* What a reduction over the ranks may give at i (1 or 3 candidates, W <= 3). */
static int candidates(const kind16 *k, float (*val)(const kind16 *, int, int), int i, uint16_t out[3]) {
    uint16_t v[3];
    for (int r = 0; r < g_world && r < 3; r++) v[r] = k->to16(val(k, r, i));
    if (g_world == 1) { out[0] = v[0]; return 1; }
    if (g_world == 2) { out[0] = rsum(k, v[0], v[1]); return 1; }
    out[0] = rsum(k, rsum(k, v[0], v[1]), v[2]);
    out[1] = rsum(k, rsum(k, v[0], v[2]), v[1]);
    out[2] = rsum(k, rsum(k, v[1], v[2]), v[0]);
    return 3;
}

static bool is_one_of(uint16_t x, const uint16_t *c, int n) {
    for (int j = 0; j < n; j++)
        if (x == c[j]) return true;
    return false;
}

static void test_kind(volt_comm *c, const kind16 *k) {
    const int W = g_world, R = g_rank, N = K * W;
    uint16_t *buf = malloc(2 * (size_t)N), *out = malloc(2 * (size_t)N), *chunk = malloc(2 * K);
    const volt_comm_dtype dt = k->dt;
    int bad = 0;
    /* all_reduce SUM, exact values, in place */
    for (int i = 0; i < N; i++) buf[i] = k->to16(exact_v(R, i));
    CHECK_OK(volt__comm_all_reduce(c, buf, buf, (size_t)N, dt, VOLT_COMM_SUM, "exact sum"));
    for (int i = 0; i < N; i++) {
        float want = 0;
        for (int r = 0; r < W; r++) want += exact_v(r, i);
        if (k->to32(buf[i]) != want && bad++ < 3) fprintf(stderr, "%s exact sum [%d] = %g, want %g\n", k->name, i, k->to32(buf[i]), want);
    }
    CHECK(!bad, "%s: all_reduce SUM of exact values: %d wrong", k->name, bad);
    /* AVG, exact values, out of place: RNE(sum / W) */
    for (int i = 0; i < N; i++) buf[i] = k->to16(exact_v(R, i));
    CHECK_OK(volt__comm_all_reduce(c, buf, out, (size_t)N, dt, VOLT_COMM_AVG, "exact avg"));
    bad = 0;
    for (int i = 0; i < N; i++) {
        float s = 0;
        for (int r = 0; r < W; r++) s += exact_v(r, i);
        if (out[i] != k->to16(s / (float)W) && bad++ < 3)
            fprintf(stderr, "%s exact avg [%d] = %g, want %g\n", k->name, i, k->to32(out[i]), k->to32(k->to16(s / (float)W)));
        if (buf[i] != k->to16(exact_v(R, i))) bad++;   /* send untouched */
    }
    CHECK(!bad, "%s: all_reduce AVG: %d wrong", k->name, bad);
    /* SUM, inexact values: pairwise f32 adds, one rounding each */
    for (int i = 0; i < N; i++) buf[i] = k->to16(inexact_v(k, R, i));
    CHECK_OK(volt__comm_all_reduce(c, buf, buf, (size_t)N, dt, VOLT_COMM_SUM, "inexact sum"));
    bad = 0;
    int rounded = 0;
    for (int i = 0; i < N; i++) {
        uint16_t cand[3];
        const int nc = candidates(k, inexact_v, i, cand);
        float exact = 0;
        for (int r = 0; r < W; r++) exact += inexact_v(k, r, i);   /* exact in f32 here */
        if (k->to32(buf[i]) != exact) rounded++;
        if (!is_one_of(buf[i], cand, nc) && bad++ < 3)
            fprintf(stderr, "%s inexact sum [%d] = %a, want %a (of %d candidates)\n", k->name, i, k->to32(buf[i]), k->to32(cand[0]), nc);
    }
    CHECK(!bad, "%s: all_reduce SUM of inexact values: %d not a pairwise-rounded sum", k->name, bad);
    CHECK(W == 1 || rounded > N / 4, "%s: the inexact values did round (%d of %d)", k->name, rounded, N);
    CHECK(same_everywhere(buf, 2 * (size_t)N), "%s: inexact sums differ between ranks", k->name);
    /* reduce_scatter, in place (recv = send + rank * K) and out of place, SUM and AVG */
    for (int i = 0; i < N; i++) buf[i] = k->to16(exact_v(R, i));
    CHECK_OK(volt__comm_reduce_scatter(c, buf, buf + R * K, K, dt, VOLT_COMM_SUM, "rs in place"));
    for (int i = 0; i < N; i++) out[i] = k->to16(exact_v(R, i));
    CHECK_OK(volt__comm_reduce_scatter(c, out, chunk, K, dt, VOLT_COMM_AVG, "rs avg"));
    bad = 0;
    for (int j = 0; j < K; j++) {
        const int i = R * K + j;
        float s = 0;
        for (int r = 0; r < W; r++) s += exact_v(r, i);
        if (k->to32(buf[i]) != s) bad++;
        if (chunk[j] != k->to16(s / (float)W)) bad++;
    }
    CHECK(!bad, "%s: reduce_scatter: %d wrong", k->name, bad);
    for (int i = 0; i < N; i++) buf[i] = k->to16(inexact_v(k, R, i));
    CHECK_OK(volt__comm_reduce_scatter(c, buf, chunk, K, dt, VOLT_COMM_SUM, "rs inexact"));
    bad = 0;
    for (int j = 0; j < K; j++) {
        uint16_t cand[3];
        const int nc = candidates(k, inexact_v, R * K + j, cand);
        if (!is_one_of(chunk[j], cand, nc)) bad++;
    }
    CHECK(!bad, "%s: reduce_scatter of inexact values: %d not a pairwise-rounded sum", k->name, bad);
    /* all_gather, in place and out of place: bits moved, not changed */
    for (int j = 0; j < K; j++) buf[R * K + j] = k->to16(inexact_v(k, R, j));
    CHECK_OK(volt__comm_all_gather(c, buf + R * K, buf, K, dt, "ag in place"));
    for (int j = 0; j < K; j++) chunk[j] = k->to16(inexact_v(k, R, j));
    CHECK_OK(volt__comm_all_gather(c, chunk, out, K, dt, "ag"));
    bad = 0;
    for (int r = 0; r < W; r++)
        for (int j = 0; j < K; j++)
            if (buf[r * K + j] != k->to16(inexact_v(k, r, j)) || out[r * K + j] != buf[r * K + j]) bad++;
    CHECK(!bad, "%s: all_gather: %d wrong", k->name, bad);
    /* broadcast from the last rank */
    for (int j = 0; j < K; j++) chunk[j] = k->to16(inexact_v(k, R, j));
    CHECK_OK(volt__comm_broadcast(c, chunk, K, dt, W - 1, "bcast"));
    bad = 0;
    for (int j = 0; j < K; j++) bad += chunk[j] != k->to16(inexact_v(k, W - 1, j));
    CHECK(!bad, "%s: broadcast: %d wrong", k->name, bad);
    if (R == 0) printf("%s on %d ranks: every collective; inexact sums rounded in %d of %d elements, pairwise RNE\n", k->name, W,
                       rounded, N);
    free(buf);
    free(out);
    free(chunk);
}

static void test_mpi(void) {
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    volt_comm *c = NULL;
    char err[512] = "";
    volt_status st = volt__comm_mpi_create(&cc, &c, err, sizeof err);
    CHECK(st == VOLT_OK, "mpi comm: %s", err);
    if (st < 0) return;
    CHECK(c->world == g_world && c->rank == g_rank && c->ops->version >= 2 && c->ops->flags == 0, "mpi comm v2, host-ordered");
    for (int j = 0; j < 2; j++) test_kind(c, &K16[j]);
    /* a 16-bit byte-free check: reductions of the 16-bit types are allowed, bytes are not */
    uint16_t one = 0;
    volt_comm_req *q = (volt_comm_req *)&q;
    st = c->ops->all_reduce(c, &one, &one, 1, VOLT_COMM_BYTE, VOLT_COMM_SUM, "bytes", &q);
    CHECK(st == VOLT_ERR_INVALID_ARG && !q, "byte reduction refused");
    volt__comm_destroy(c);
}
#endif

#ifdef VOLT_HAVE_MPI
static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Not a test: what bf16 buys over MPI on this machine (half the bytes, a user-op reduction). */
static void bench(long m) {
    volt_comm_config cc;
    volt__comm_config_init(&cc);
    volt_comm *c = NULL;
    char err[512] = "";
    if (volt__comm_mpi_create(&cc, &c, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); vtest_fail_++; return; }
    float *f = malloc(sizeof(float) * (size_t)m);
    uint16_t *h = malloc(2 * (size_t)m);
    for (long i = 0; i < m; i++) f[i] = (float)(i % 1000) * 1e-3f;
    volt_f32_to_bf16_array(f, h, m);
    enum { IT = 20 };
    for (int k = 0; k < 2; k++) {
        const volt_comm_dtype dt = k ? VOLT_COMM_BF16 : VOLT_COMM_F32;
        void *buf = k ? (void *)h : (void *)f;
        volt__comm_all_reduce(c, buf, buf, (size_t)m, dt, VOLT_COMM_AVG, "warm");
        MPI_Barrier(MPI_COMM_WORLD);
        const double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int it = 0; it < IT; it++) CHECK_OK(volt__comm_all_reduce(c, buf, buf, (size_t)m, dt, VOLT_COMM_AVG, "bench"));
        double t[2] = { (clock_s(CLOCK_MONOTONIC) - w0) / IT, (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / IT };
        MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (g_rank == 0)
            printf("bench all_reduce avg %-4s N=%d, %ld elements (%.1f MB): wall %.2f ms, process CPU %.2f ms per call (max over ranks)\n",
                   k ? "bf16" : "f32", g_world, m, (double)m * (k ? 2 : 4) / 1e6, 1e3 * t[0], 1e3 * t[1]);
    }
    free(f);
    free(h);
    volt__comm_destroy(c);
}
#endif

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "local";
    if (!strcmp(mode, "local")) {
        test_registry();
        return vtest_finish();
    }
#ifndef VOLT_HAVE_MPI
    VTEST_SKIP("built without MPI (apt-get install libopenmpi-dev openmpi-bin)");
#else
    if (strcmp(mode, "mpi") && strcmp(mode, "bench")) {
        fprintf(stderr, "usage: test_comm16 [local | mpi | bench [M]]\n");
        return 2;
    }
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    if (!strcmp(mode, "bench")) {
        bench(argc > 2 ? atol(argv[2]) : 4L << 20);
        int rc = vtest_finish();
        MPI_Finalize();
        return rc;
    }
    if (g_world > 3) {
        if (g_rank == 0) fprintf(stderr, "test_comm16: the expected values cover 1..3 ranks\n");
        MPI_Finalize();
        return 2;
    }
    test_mpi();
    return vtest_mpi_finish();
#endif
}
