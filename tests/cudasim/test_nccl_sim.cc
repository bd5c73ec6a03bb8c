/* Unit test of the cudasim NCCL (tests/cudasim/nccl.cc), through the NCCL API only.
 *
 * The CUDA runtime calls nccl.cc makes are stood in for here: cudaLaunchHostFunc QUEUES the host
 * function on its stream and nothing runs until the test calls sync(stream) (or a thread does),
 * so stream order, "nothing happens at call time" and abort-before-run are really observed;
 * cudaPointerGetAttributes knows the "device" buffers this test allocates with dev_alloc;
 * cudaStreamIsCapturing says what the test sets. Build (one program, the stand-ins here):
 *
 *   g++ -std=c++17 -I/usr/local/cuda/include tests/cudasim/test_nccl_sim*.cc tests/cudasim/nccl*.cc -lpthread
 *
 * The several-rank cases (forked processes) are in test_nccl_sim_ranks.cc; main calls them last.
 *
 * Exit 0 when every check passed, 1 with a "FAIL <case>: ..." line per failed check. */
#include <nccl.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

/* ---- the runtime stand-in ------------------------------------------------------------------ */
namespace {
struct Item { cudaHostFn_t fn; void *user; void (*release)(void *); };
std::mutex g_q_mu;
std::map<cudaStream_t, std::deque<Item>> g_queues;
std::vector<Item> g_graph;              /* work issued on g_capturing: the "graph" */
std::map<const char *, size_t> g_dev;   /* "device" allocations: base -> bytes */
cudaStream_t g_capturing = nullptr;     /* this stream reports cudaStreamCaptureStatusActive */
cudaStream_t const BAD_STREAM = reinterpret_cast<cudaStream_t>(0xbad);

cudaStream_t stream(int i) { return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x100 + i)); }

size_t queued(cudaStream_t s) {
    std::lock_guard<std::mutex> lk(g_q_mu);
    return g_queues[s].size();
}

/* Runs s's queue in order until it is empty (what the stream's worker does). */
void sync(cudaStream_t s) {
    for (;;) {
        Item it;
        {
            std::lock_guard<std::mutex> lk(g_q_mu);
            auto &q = g_queues[s];
            if (q.empty()) return;
            it = q.front();
            q.pop_front();
        }
        it.fn(it.user);
        if (it.release) it.release(it.user);
    }
}

/* The captured work queued on s once more, as a launch of the graph does (released at destroy). */
void graph_launch(cudaStream_t s) {
    std::lock_guard<std::mutex> lk(g_q_mu);
    for (const Item &it : g_graph) g_queues[s].push_back({it.fn, it.user, nullptr});
}
void graph_destroy() {
    std::vector<Item> g;
    {
        std::lock_guard<std::mutex> lk(g_q_mu);
        g.swap(g_graph);
    }
    for (const Item &it : g) if (it.release) it.release(it.user);
}

void *dev_alloc(size_t n) {
    char *p = static_cast<char *>(malloc(n));
    g_dev[p] = n;
    return p;
}
void dev_free(void *p) {
    g_dev.erase(static_cast<char *>(p));
    free(p);
}
}  // namespace

/* For the multi-process cases (test_nccl_sim_ranks.cc). */
void tns_sync(cudaStream_t s) { sync(s); }
void *tns_dev_alloc(size_t n) { return dev_alloc(n); }
void tns_dev_free(void *p) { dev_free(p); }
void tns_begin_case(const char *name);
int tns_ranks_tests(int *pass);

extern "C" {
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *user) {
    if (s == BAD_STREAM) return cudaErrorInvalidResourceHandle;
    std::lock_guard<std::mutex> lk(g_q_mu);
    g_queues[s].push_back({fn, user, nullptr});
    return cudaSuccess;
}
cudaError_t cudasim_launch_host_func_owned(cudaStream_t s, cudaHostFn_t fn, void *user, void (*release)(void *)) {
    if (s == BAD_STREAM) {
        if (release) release(user);
        return cudaErrorInvalidResourceHandle;
    }
    std::lock_guard<std::mutex> lk(g_q_mu);
    if (s == g_capturing) g_graph.push_back({fn, user, release});
    else g_queues[s].push_back({fn, user, release});
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p) {
    memset(a, 0, sizeof *a);
    const char *c = static_cast<const char *>(p);
    for (auto &kv : g_dev)
        if (c >= kv.first && c < kv.first + kv.second) {
            a->type = cudaMemoryTypeDevice;
            a->devicePointer = const_cast<char *>(c);
            return cudaSuccess;
        }
    a->type = cudaMemoryTypeUnregistered;   /* plain host memory: no device pointer */
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st) {
    *st = s && s == g_capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaErrorInvalidResourceHandle ? "invalid resource handle" : "stand-in: other error";
}
}

/* ---- checks ---------------------------------------------------------------------------------- */
static int g_fail, g_pass;
static const char *g_case = "?";
#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (cond) g_pass++;                                                           \
        else {                                                                        \
            g_fail++;                                                                 \
            fprintf(stderr, "FAIL %s (line %d): ", g_case, __LINE__);                 \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "  [%s]\n", #cond);                                       \
        }                                                                             \
    } while (0)
#define CHECK_RC(call, want)                                                                          \
    do {                                                                                              \
        const ncclResult_t rc_ = (call);                                                              \
        CHECK(rc_ == (want), "%s returned %d (%s), want %d; last error: %s", #call, (int)rc_,         \
              ncclGetErrorString(rc_), (int)(want), ncclGetLastError(nullptr));                       \
    } while (0)
/* A hang (an abort or finalize waiting for work nothing will run) is a failure, not a stuck
 * test: each case has 20 s; past that the watchdog names the case and ends the process. */
static std::atomic<long> g_case_start_ms{0};
static std::atomic<const char *> g_case_running{"?"};
static long now_ms() {
    return (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static void begin_case(const char *name) {
    g_case = name;
    g_case_running = name;
    g_case_start_ms = now_ms();
}
void tns_begin_case(const char *name) { begin_case(name); }
static void watchdog() {
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (now_ms() - g_case_start_ms.load() > 20000) {
            fprintf(stderr, "FAIL %s: no progress for 20 s (a call waited for work nothing runs: a hang)\n", g_case_running.load());
            fflush(stderr);
            _exit(1);
        }
    }
}

static bool last_has(const char *s) { return strstr(ncclGetLastError(nullptr), s) != nullptr; }
#define CHECK_MSG(s) CHECK(last_has(s), "last error \"%s\" lacks \"%s\"", ncclGetLastError(nullptr), (s))

static ncclUniqueId new_id() {
    ncclUniqueId id;
    CHECK_RC(ncclGetUniqueId(&id), ncclSuccess);
    return id;
}

/* A communicator, polled to ncclSuccess when non-blocking. */
static ncclComm_t make(bool blocking) {
    ncclConfig_t cf = NCCL_CONFIG_INITIALIZER;
    cf.blocking = blocking ? 1 : 0;
    ncclComm_t c = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&c, 1, new_id(), 0, &cf);
    CHECK(c && rc == (blocking ? ncclSuccess : ncclInProgress), "init: rc %d", (int)rc);
    ncclResult_t a = ncclInProgress;
    for (int i = 0; i < 10 && a == ncclInProgress; i++) CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    CHECK(a == ncclSuccess, "init polled: async %d", (int)a);
    return c;
}
/* Non-blocking comms answer their first collective with ncclInProgress: do one and poll it. */
static void warm(ncclComm_t c, cudaStream_t s) {
    void *b = dev_alloc(4);
    const ncclResult_t rc = ncclAllReduce(b, b, 1, ncclFloat32, ncclSum, c, s);
    CHECK(rc == ncclSuccess || rc == ncclInProgress, "warm-up collective: %d", (int)rc);
    ncclResult_t a = ncclInProgress;
    for (int i = 0; i < 10 && a == ncclInProgress; i++) CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    sync(s);
    dev_free(b);
}
static void destroy(ncclComm_t c) {
    ncclResult_t a = ncclInProgress;
    const ncclResult_t rc = ncclCommFinalize(c);
    CHECK(rc == ncclSuccess || rc == ncclInProgress, "finalize: %d", (int)rc);
    for (int i = 0; i < 10 && a == ncclInProgress; i++) CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    CHECK(a == ncclSuccess, "finalize polled: %d", (int)a);
    CHECK_RC(ncclCommDestroy(c), ncclSuccess);
}

/* ---- cases ----------------------------------------------------------------------------------- */
static void test_basics() {
    begin_case("basics");
    int v = 0;
    CHECK_RC(ncclGetVersion(&v), ncclSuccess);
    CHECK(v == NCCL_VERSION_CODE, "version %d, header %d", v, NCCL_VERSION_CODE);
    CHECK_RC(ncclGetVersion(nullptr), ncclInvalidArgument);
    static const char *const want[] = { "no error", "unhandled cuda error", "unhandled system error", "internal error",
                                        "invalid argument", "invalid usage", "remote process exited", "in progress" };
    for (int r = 0; r < (int)ncclNumResults; r++)
        CHECK(strstr(ncclGetErrorString((ncclResult_t)r), want[r]), "error string %d: %s", r, ncclGetErrorString((ncclResult_t)r));
    CHECK(!strcmp(ncclGetErrorString(ncclNumResults), "unknown result code"), "error string past the enum");
    ncclUniqueId a = new_id(), b = new_id(), z;
    memset(&z, 0, sizeof z);
    CHECK(memcmp(&a, &b, sizeof a) && memcmp(&a, &z, sizeof a), "two unique ids differ and are not zero");
    CHECK_RC(ncclGetUniqueId(nullptr), ncclInvalidArgument);
}

static void test_init_errors() {
    begin_case("init errors");
    ncclConfig_t cf = NCCL_CONFIG_INITIALIZER;
    ncclComm_t c = reinterpret_cast<ncclComm_t>(&cf);   /* must come back NULL */
    CHECK_RC(ncclCommInitRankConfig(&c, 65, new_id(), 0, &cf), ncclInvalidUsage);
    CHECK_MSG("cudasim NCCL: at most 64 ranks (nranks 65)");
    CHECK(!c, "comm left non-NULL after a failed init");
    ncclUniqueId foreign;
    memset(&foreign, 0x5a, sizeof foreign);
    CHECK_RC(ncclCommInitRankConfig(&c, 2, foreign, 1, &cf), ncclInvalidArgument);   /* several ranks: the id names the segment */
    CHECK_MSG("not made by ncclGetUniqueId");
    CHECK_RC(ncclCommInitRankConfig(&c, 4, new_id(), 4, &cf), ncclInvalidArgument);
    CHECK_MSG("Invalid rank requested : 4/4");
    CHECK_RC(ncclCommInitRankConfig(&c, 1, new_id(), 1, &cf), ncclInvalidArgument);
    CHECK_MSG("Invalid rank requested : 1/1");
    CHECK_RC(ncclCommInitRankConfig(&c, 0, new_id(), 0, &cf), ncclInvalidArgument);
    CHECK_RC(ncclCommInitRankConfig(nullptr, 1, new_id(), 0, &cf), ncclInvalidArgument);
    ncclConfig_t raw;
    memset(&raw, 0, sizeof raw);
    CHECK_RC(ncclCommInitRankConfig(&c, 1, new_id(), 0, &raw), ncclInvalidArgument);
    CHECK_MSG("NCCL_CONFIG_INITIALIZER");
    cf.blocking = 5;
    CHECK_RC(ncclCommInitRankConfig(&c, 1, new_id(), 0, &cf), ncclInvalidArgument);
    CHECK_MSG("blocking attribute value 5");
    cf.blocking = 0;
    ncclUniqueId made;
    memset(&made, 0x5a, sizeof made);
    CHECK_RC(ncclCommInitRankConfig(&c, 1, made, 0, &cf), ncclInvalidArgument);
    CHECK_MSG("not made by ncclGetUniqueId");
    CHECK(!c, "comm left non-NULL after a failed init");
    setenv("VOLT_CUDASIM_NCCL_FAIL_AT", "x", 1);
    CHECK_RC(ncclCommInitRankConfig(&c, 1, new_id(), 0, &cf), ncclInvalidArgument);
    CHECK_MSG("VOLT_CUDASIM_NCCL_FAIL_AT='x'");
    unsetenv("VOLT_CUDASIM_NCCL_FAIL_AT");
    CHECK_RC(ncclCommAbort(nullptr), ncclSuccess);
    CHECK_RC(ncclCommDestroy(nullptr), ncclSuccess);
    CHECK_RC(ncclCommFinalize(nullptr), ncclSuccess);
    ncclResult_t a;
    CHECK_RC(ncclCommGetAsyncError(nullptr, &a), ncclInvalidArgument);
    CHECK_RC(ncclCommGetAsyncError(reinterpret_cast<ncclComm_t>(&cf), &a), ncclInvalidArgument);
    CHECK_MSG("corrupted comm object");
}

/* Non-blocking init and first collective: ncclInProgress, polled; work queued only once polled. */
static void test_nonblocking() {
    begin_case("non-blocking");
    ncclConfig_t cf = NCCL_CONFIG_INITIALIZER;
    cf.blocking = 0;
    ncclComm_t c = nullptr;
    CHECK_RC(ncclCommInitRankConfig(&c, 1, new_id(), 0, &cf), ncclInProgress);
    if (!c) return;
    ncclResult_t a = ncclSuccess;
    CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    CHECK(a == ncclInProgress, "first poll after init: %d, want ncclInProgress", (int)a);
    const cudaStream_t s = stream(1);
    float *x = static_cast<float *>(dev_alloc(16)), *y = static_cast<float *>(dev_alloc(16));
    for (int i = 0; i < 4; i++) x[i] = (float)i + 0.5f, y[i] = -1;
    CHECK_RC(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, c, s), ncclInvalidArgument);   /* still initialising */
    CHECK_MSG("Attempt to use communicator before the previous operation returned ncclSuccess");
    CHECK(queued(s) == 0, "a refused collective queued work");
    CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    CHECK(a == ncclSuccess, "third poll after init: %d, want ncclSuccess", (int)a);
    /* the first collective: ncclInProgress, and on the stream only once polled to success */
    CHECK_RC(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, c, s), ncclInProgress);
    CHECK(queued(s) == 0, "the first collective was on the stream before its enqueue completed");
    CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    CHECK(a == ncclInProgress && queued(s) == 0, "first poll of the first collective: %d, %zu queued", (int)a, queued(s));
    CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    CHECK(a == ncclSuccess && queued(s) == 1, "second poll of the first collective: %d, %zu queued", (int)a, queued(s));
    CHECK(y[0] == -1, "the collective ran before its stream did");
    sync(s);
    CHECK(!memcmp(x, y, 16), "first collective's result");
    /* later collectives: ncclSuccess at once */
    CHECK_RC(ncclAllGather(x, y, 4, ncclFloat32, c, s), ncclSuccess);
    CHECK(queued(s) == 1, "second collective not queued at once");
    sync(s);
    destroy(c);
    dev_free(x);
    dev_free(y);
}

/* Every collective on every type: the one-rank result, in place and out, nothing written
 * outside recvbuff's count elements, nothing before the stream runs. */
static void test_collectives(bool blocking) {
    begin_case(blocking ? "collectives (blocking comm)" : "collectives (non-blocking comm)");
    ncclComm_t c = make(blocking);
    const cudaStream_t s = stream(2);
    warm(c, s);
    enum { N = 37, G = 16 };   /* elements; guard bytes on each side of recv */
    static const size_t es[ncclNumTypes] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
    for (int t = 0; t < (int)ncclNumTypes; t++) {
        const size_t bytes = N * es[t];
        unsigned char *send = static_cast<unsigned char *>(dev_alloc(bytes));
        unsigned char *rbuf = static_cast<unsigned char *>(dev_alloc(bytes + 2 * G)), *recv = rbuf + G;
        std::vector<unsigned char> want(bytes), before(bytes + 2 * G);
        for (size_t i = 0; i < bytes; i++) want[i] = (unsigned char)(i * 29 + t * 7 + 1);
        for (int k = 0; k < 4 + 3 + 2; k++) {   /* 5 allreduce ops, 2 reducescatter, allgather, broadcast */
            const char *what;
            memcpy(send, want.data(), bytes);
            memset(rbuf, 0xee, bytes + 2 * G);
            memcpy(before.data(), rbuf, bytes + 2 * G);
            ncclResult_t rc;
            const ncclRedOp_t op = (ncclRedOp_t)(k % 5);
            if (k < 5) { what = "AllReduce"; rc = ncclAllReduce(send, recv, N, (ncclDataType_t)t, op, c, s); }
            else if (k < 7) { what = "ReduceScatter"; rc = ncclReduceScatter(send, recv, N, (ncclDataType_t)t, k == 5 ? ncclSum : ncclAvg, c, s); }
            else if (k == 7) { what = "AllGather"; rc = ncclAllGather(send, recv, N, (ncclDataType_t)t, c, s); }
            else { what = "Broadcast"; rc = ncclBroadcast(send, recv, N, (ncclDataType_t)t, 0, c, s); }
            CHECK(rc == ncclSuccess, "%s type %d op %d: %d (%s)", what, t, (int)op, (int)rc, ncclGetLastError(nullptr));
            CHECK(!memcmp(rbuf, before.data(), bytes + 2 * G), "%s type %d wrote at call time", what, t);
            sync(s);
            CHECK(!memcmp(recv, want.data(), bytes), "%s type %d op %d: result differs", what, t, (int)op);
            CHECK(!memcmp(rbuf, before.data(), G) && !memcmp(recv + bytes, before.data() + G + bytes, G),
                  "%s type %d: wrote outside recvbuff", what, t);
            CHECK(!memcmp(send, want.data(), bytes), "%s type %d: sendbuff changed", what, t);
        }
        /* in place: the buffer keeps its values */
        memcpy(recv, want.data(), bytes);
        CHECK_RC(ncclAllReduce(recv, recv, N, (ncclDataType_t)t, ncclAvg, c, s), ncclSuccess);
        CHECK_RC(ncclReduceScatter(recv, recv, N, (ncclDataType_t)t, ncclSum, c, s), ncclSuccess);
        CHECK_RC(ncclAllGather(recv, recv, N, (ncclDataType_t)t, c, s), ncclSuccess);
        CHECK_RC(ncclBroadcast(recv, recv, N, (ncclDataType_t)t, 0, c, s), ncclSuccess);
        sync(s);
        CHECK(!memcmp(recv, want.data(), bytes), "in place, type %d: values changed", t);
        dev_free(send);
        dev_free(rbuf);
    }
    destroy(c);
}

/* Stream order: [fill send with B] [collective] [fill send with C] gives B. */
struct Fill { void *p; int v; size_t n; };
static void CUDART_CB fill_fn(void *u) {
    Fill *f = static_cast<Fill *>(u);
    memset(f->p, f->v, f->n);
}
static void test_ordering() {
    begin_case("stream order");
    ncclComm_t c = make(false);
    const cudaStream_t s = stream(3), other = stream(4);
    warm(c, s);
    enum { B = 64 };
    void *x = dev_alloc(B), *y = dev_alloc(B), *z = dev_alloc(B);
    memset(x, 1, B);
    memset(y, 0, B);
    memset(z, 0, B);
    Fill f1 = { x, 0x3f, B }, f2 = { x, 0x44, B };
    cudaLaunchHostFunc(s, fill_fn, &f1);
    CHECK_RC(ncclAllReduce(x, y, B / 4, ncclFloat32, ncclSum, c, s), ncclSuccess);
    cudaLaunchHostFunc(s, fill_fn, &f2);
    CHECK_RC(ncclBroadcast(x, z, B, ncclUint8, 0, c, other), ncclSuccess);   /* another stream: runs when it does */
    sync(s);
    unsigned char want[B];
    memset(want, 0x3f, B);
    CHECK(!memcmp(y, want, B), "the collective did not read what the stream wrote before it (and only that)");
    sync(other);
    memset(want, 0x44, B);
    CHECK(!memcmp(z, want, B), "a collective on another stream runs when that stream runs");
    destroy(c);
    dev_free(x);
    dev_free(y);
    dev_free(z);
}

static void test_arg_errors() {
    begin_case("argument errors");
    ncclComm_t c = make(false);
    const cudaStream_t s = stream(5);
    warm(c, s);
    void *d = dev_alloc(64);
    char host[64];
    CHECK_RC(ncclAllReduce(nullptr, d, 4, ncclFloat32, ncclSum, c, s), ncclInvalidArgument);
    CHECK_MSG("sendbuff argument is NULL");
    CHECK_RC(ncclAllGather(d, nullptr, 4, ncclFloat32, c, s), ncclInvalidArgument);
    CHECK_MSG("recvbuff argument is NULL");
    CHECK_RC(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, c, s), ncclSuccess);   /* count 0: nothing */
    CHECK_RC(ncclAllReduce(host, d, 4, ncclFloat32, ncclSum, c, s), ncclInvalidArgument);
    CHECK_MSG("sendbuff");
    CHECK_MSG("is not a valid pointer");
    CHECK_RC(ncclReduceScatter(d, host, 4, ncclFloat32, ncclSum, c, s), ncclInvalidArgument);
    CHECK_MSG("recvbuff");
    CHECK_RC(ncclAllReduce(d, d, 4, ncclNumTypes, ncclSum, c, s), ncclInvalidArgument);
    CHECK_MSG("invalid type 12");
    CHECK_RC(ncclAllGather(d, d, 4, (ncclDataType_t)-1, c, s), ncclInvalidArgument);
    CHECK_MSG("invalid type -1");
    CHECK_RC(ncclAllReduce(d, d, 0, ncclNumTypes, ncclSum, c, s), ncclInvalidArgument);   /* checked before count 0 */
    CHECK_RC(ncclAllReduce(d, d, 4, ncclFloat32, ncclNumOps, c, s), ncclInvalidArgument);
    CHECK_MSG("reduction operation 5 unknown to this communicator");
    CHECK_RC(ncclReduceScatter(d, d, 4, ncclFloat32, (ncclRedOp_t)-3, c, s), ncclInvalidArgument);
    CHECK_MSG("invalid reduction operation -3");
    CHECK_RC(ncclBroadcast(d, d, 4, ncclFloat32, 1, c, s), ncclInvalidArgument);
    CHECK_MSG("invalid root 1");
    CHECK_RC(ncclBroadcast(d, d, 4, ncclFloat32, -1, c, s), ncclInvalidArgument);
    CHECK_RC(ncclAllReduce(d, static_cast<char *>(d) + 4, 4, ncclFloat32, ncclSum, c, s), ncclInvalidArgument);
    CHECK_MSG("overlap");
    CHECK_RC(ncclAllReduce(d, static_cast<char *>(d) + 16, 4, ncclFloat32, ncclSum, c, s), ncclSuccess);   /* adjacent */
    CHECK_RC(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, nullptr, s), ncclInvalidArgument);
    CHECK_MSG("comm argument is NULL");
    CHECK_RC(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, c, BAD_STREAM), ncclUnhandledCudaError);
    CHECK_MSG("invalid resource handle");
    CHECK(queued(s) == 1, "refused collectives queued work: %zu queued, want 1", queued(s));
    sync(s);
    destroy(c);
    dev_free(d);
}

/* Abort with work queued: returns at once; the work, run later, touches nothing; the handle is dead. */
static void test_abort() {
    begin_case("abort");
    ncclComm_t c = make(false);
    const cudaStream_t s = stream(6);
    warm(c, s);
    enum { B = 256 };
    unsigned char *x = static_cast<unsigned char *>(dev_alloc(B)), *y = static_cast<unsigned char *>(dev_alloc(B));
    memset(x, 7, B);
    memset(y, 9, B);
    CHECK_RC(ncclAllReduce(x, y, B / 4, ncclFloat32, ncclSum, c, s), ncclSuccess);
    CHECK_RC(ncclAllGather(x, y, B, ncclUint8, c, s), ncclSuccess);
    CHECK_RC(ncclReduceScatter(x, y, B / 2, ncclBfloat16, ncclAvg, c, s), ncclSuccess);
    CHECK_RC(ncclBroadcast(x, y, B / 8, ncclFloat64, 0, c, s), ncclSuccess);
    CHECK(queued(s) == 4, "%zu queued, want 4", queued(s));
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_RC(ncclCommAbort(c), ncclSuccess);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500), "abort waited");
    sync(s);
    unsigned char nine[B];
    memset(nine, 9, B);
    CHECK(!memcmp(y, nine, B), "work queued before the abort wrote recvbuff when it ran");
    ncclResult_t a = ncclSuccess;
    CHECK_RC(ncclCommGetAsyncError(c, &a), ncclInvalidArgument);
    CHECK_MSG("corrupted comm object detected");
    CHECK_MSG("aborted");
    CHECK_RC(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, c, s), ncclInvalidArgument);
    CHECK_RC(ncclCommFinalize(c), ncclInvalidArgument);
    CHECK_RC(ncclCommDestroy(c), ncclInvalidArgument);
    CHECK_RC(ncclCommAbort(c), ncclInvalidArgument);
    CHECK(queued(s) == 0, "calls on an aborted comm queued work");
    /* abort while the first collective's enqueue is still in progress: it never reaches the stream */
    ncclConfig_t cf = NCCL_CONFIG_INITIALIZER;
    cf.blocking = 0;
    CHECK_RC(ncclCommInitRankConfig(&c, 1, new_id(), 0, &cf), ncclInProgress);
    for (int i = 0; i < 3; i++) CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    CHECK_RC(ncclAllReduce(x, y, B / 4, ncclFloat32, ncclSum, c, s), ncclInProgress);
    CHECK_RC(ncclCommAbort(c), ncclSuccess);
    CHECK(queued(s) == 0, "an aborted enqueue reached the stream");
    CHECK(!memcmp(y, nine, B), "an aborted enqueue wrote recvbuff");
    dev_free(x);
    dev_free(y);
}

/* Finalize waits for the comm's queued work: non-blocking by polls, blocking by waiting. */
static void test_finalize() {
    begin_case("finalize");
    ncclComm_t c = make(false);
    const cudaStream_t s = stream(7);
    warm(c, s);
    float *x = static_cast<float *>(dev_alloc(64)), *y = static_cast<float *>(dev_alloc(64));
    memset(x, 0x11, 64);
    CHECK_RC(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, c, s), ncclSuccess);
    CHECK_RC(ncclCommFinalize(c), ncclInProgress);
    ncclResult_t a = ncclSuccess;
    for (int i = 0; i < 5; i++) {
        CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
        CHECK(a == ncclInProgress, "finalize done with work still queued (poll %d: %d)", i, (int)a);
    }
    CHECK_RC(ncclCommDestroy(c), ncclInvalidArgument);   /* finalize still in progress */
    CHECK_MSG("Attempt to use communicator");
    sync(s);
    CHECK(!memcmp(x, y, 64), "result");
    CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    CHECK(a == ncclSuccess, "finalize not done once the work ran: %d", (int)a);
    CHECK_RC(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, c, s), ncclInvalidUsage);
    CHECK_MSG("finalized");
    CHECK_RC(ncclCommFinalize(c), ncclInvalidArgument);
    CHECK_RC(ncclCommDestroy(c), ncclSuccess);
    CHECK_RC(ncclCommDestroy(c), ncclInvalidArgument);
    CHECK_MSG("destroyed");

    /* blocking: finalize (and destroy without finalize) return only after the work ran */
    for (int fin = 0; fin < 2; fin++) {
        c = make(true);
        CHECK_RC(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, c, s), ncclSuccess);
        std::atomic<bool> ran{false};
        std::thread worker([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            ran = true;
            sync(s);
        });
        CHECK_RC(fin ? ncclCommFinalize(c) : ncclCommDestroy(c), ncclSuccess);
        CHECK(ran.load() && queued(s) == 0, "blocking %s returned before the queued work ran", fin ? "finalize" : "destroy");
        worker.join();
        if (fin) CHECK_RC(ncclCommDestroy(c), ncclSuccess);
    }
    dev_free(x);
    dev_free(y);
}

/* VOLT_CUDASIM_NCCL_FAIL_AT: the Nth collective sets ncclRemoteError and holds its stream until abort. */
static void test_fault() {
    begin_case("injected fault");
    setenv("VOLT_CUDASIM_NCCL_FAIL_AT", "2", 1);
    ncclComm_t c = make(true);
    unsetenv("VOLT_CUDASIM_NCCL_FAIL_AT");
    const cudaStream_t s = stream(8);
    float *x = static_cast<float *>(dev_alloc(64)), *y = static_cast<float *>(dev_alloc(64));
    memset(x, 0x22, 64);
    memset(y, 0, 64);
    CHECK_RC(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, c, s), ncclSuccess);
    sync(s);
    CHECK(!memcmp(x, y, 64), "collective #1 (before the fault)");
    memset(y, 0, 64);
    CHECK_RC(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, c, s), ncclSuccess);
    std::atomic<bool> done{false};
    std::thread worker([&] { sync(s); done = true; });
    ncclResult_t a = ncclSuccess;
    for (int i = 0; i < 2000 && a == ncclSuccess; i++) {
        CHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
        if (a == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(a == ncclRemoteError, "async error %d, want ncclRemoteError", (int)a);
    CHECK_MSG("injected remote error at AllReduce #2");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(!done.load(), "the failed collective did not hold its stream");
    CHECK_RC(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, c, s), ncclRemoteError);   /* sticky */
    unsigned char zero[64] = { 0 };
    CHECK(!memcmp(y, zero, 64), "the failed collective wrote recvbuff");
    CHECK_RC(ncclCommAbort(c), ncclSuccess);
    for (int i = 0; i < 2000 && !done.load(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(done.load(), "the stream was not released by the abort");
    worker.join();
    dev_free(x);
    dev_free(y);
}

/* Collectives issued while the stream is captured: recorded, not queued; every launch of the
 * "graph" runs them again on the same buffers; the recorded copy of the arguments lives until
 * the graph is destroyed (here after the communicator, whose state it keeps: ASan's leak check
 * and use-after-free detection see the rest). */
static void test_capture() {
    begin_case("capture");
    ncclComm_t c = make(true);
    const cudaStream_t s = stream(6);
    float *x = static_cast<float *>(dev_alloc(16)), *y = static_cast<float *>(dev_alloc(16));
    for (int i = 0; i < 4; i++) { x[i] = (float)(i + 1); y[i] = -1.f; }
    g_capturing = s;
    CHECK_RC(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, c, s), ncclSuccess);
    g_capturing = nullptr;
    CHECK(queued(s) == 0 && g_graph.size() == 1, "captured: %zu queued, %zu in the graph", queued(s), g_graph.size());
    CHECK(y[0] == -1.f, "a captured collective ran at capture");
    graph_launch(s);
    sync(s);
    CHECK(y[0] == 1.f && y[3] == 4.f, "first launch: %g %g", y[0], y[3]);
    for (int i = 0; i < 4; i++) x[i] = (float)(10 + i);
    graph_launch(s);
    sync(s);
    CHECK(y[0] == 10.f && y[3] == 13.f, "second launch reads the buffers again: %g %g", y[0], y[3]);
    /* finalize does not wait for a graph's work (nothing of it is queued) */
    CHECK_RC(ncclCommFinalize(c), ncclSuccess);
    CHECK_RC(ncclCommDestroy(c), ncclSuccess);
    graph_destroy();   /* the last reference to the state: the graph's */
    /* a non-blocking comm's first collective connects in the background: not capturable here */
    ncclComm_t n = make(false);
    g_capturing = s;
    CHECK_RC(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, n, s), ncclInvalidUsage);
    CHECK_MSG("cannot be captured");
    g_capturing = nullptr;
    CHECK(g_graph.empty() && queued(s) == 0, "the refused collective was recorded");
    destroy(n);
    dev_free(x);
    dev_free(y);
}

int main() {
    g_case_start_ms = now_ms();
    std::thread(watchdog).detach();
    test_basics();
    test_init_errors();
    test_nonblocking();
    test_collectives(true);
    test_collectives(false);
    test_ordering();
    test_arg_errors();
    test_abort();
    test_finalize();
    test_fault();
    test_capture();
    int rpass = 0;
    g_fail += tns_ranks_tests(&rpass);   /* nranks 2 and 3: one process per rank */
    g_pass += rpass;
    if (g_fail) {
        fprintf(stderr, "test_nccl_sim: %d of %d checks FAILED\n", g_fail, g_fail + g_pass);
        return 1;
    }
    printf("test_nccl_sim: ok (%d checks)\n", g_pass);
    return 0;
}
