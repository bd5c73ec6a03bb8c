/* The cudasim NCCL at several ranks: one forked process per rank, each with its own copy of
 * the runtime stand-in of test_nccl_sim.cc (one program with it; main there calls
 * tns_ranks_tests). Each child inits its rank from the parent's unique id, runs its part and
 * exits 0 when every one of its checks passed (failures on stderr, "rank R"); the parent
 * waits (30 s at most, then kills) and checks what the children left in a shared page, and
 * that no /dev/shm entry is left behind.
 *
 * Cases: every collective x type x op at N = 2 (non-blocking comms) and N = 3 (blocking), in
 * chunks (VOLT_CUDASIM_NCCL_SLOT_BYTES=64), reduce-scatter and all-gather at their rank
 * offsets, in place and out, a non-zero broadcast root, the same bits on every rank; an order
 * mismatch seen by every rank; a rank that exits while the others wait in a collective; an
 * abort releasing a collective stuck in a barrier (and the peer told); a duplicate rank and a
 * different nranks refused at init. */
#include <nccl.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

void tns_sync(cudaStream_t s);
void *tns_dev_alloc(size_t n);
void tns_dev_free(void *p);
void tns_begin_case(const char *name);

namespace {
int g_fail, g_pass, g_rank = -1;
const char *g_case = "?";
#define RCHECK(cond, ...)                                                                  \
    do {                                                                                   \
        if (cond) g_pass++;                                                                \
        else {                                                                             \
            g_fail++;                                                                      \
            fprintf(stderr, "FAIL ranks: %s, rank %d (line %d): ", g_case, g_rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "  [%s]\n", #cond);                                            \
        }                                                                                  \
    } while (0)
#define RCHECK_RC(call, want)                                                                      \
    do {                                                                                           \
        const ncclResult_t rc_ = (call);                                                           \
        RCHECK(rc_ == (want), "%s returned %d (%s), want %d; last error: %s", #call, (int)rc_,     \
               ncclGetErrorString(rc_), (int)(want), ncclGetLastError(nullptr));                   \
    } while (0)

const cudaStream_t S = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x200));
long now_ms() {
    return (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string shm_path(const ncclUniqueId &id) { return std::string("/dev/shm") + (id.internal + 8); }

/* Polls until not ncclInProgress or `ms` passed; the last state. */
ncclResult_t poll(ncclComm_t c, long ms) {
    ncclResult_t a = ncclInProgress;
    const long t0 = now_ms();
    while (now_ms() - t0 < ms) {
        if (ncclCommGetAsyncError(c, &a) != ncclSuccess) return ncclInternalError;
        if (a != ncclInProgress) return a;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return a;
}

ncclComm_t init(const ncclUniqueId &id, int n, int r, bool blocking) {
    ncclConfig_t cf = NCCL_CONFIG_INITIALIZER;
    cf.blocking = blocking ? 1 : 0;
    ncclComm_t c = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&c, n, id, r, &cf);
    RCHECK(c && rc == (blocking ? ncclSuccess : ncclInProgress), "init: %d (%s)", (int)rc, ncclGetLastError(nullptr));
    if (!c) return nullptr;
    const ncclResult_t a = poll(c, 10000);
    RCHECK(a == ncclSuccess, "init polled: %d (%s)", (int)a, ncclGetLastError(nullptr));
    RCHECK(access(shm_path(id).c_str(), F_OK) != 0, "%s still exists once every rank attached", shm_path(id).c_str());
    return c;
}

/* A collective's return on a comm that may be non-blocking: ncclInProgress is polled. */
void issued(ncclComm_t c, ncclResult_t rc, const char *what) {
    if (rc == ncclInProgress) rc = poll(c, 10000);
    RCHECK(rc == ncclSuccess, "%s: %d (%s)", what, (int)rc, ncclGetLastError(nullptr));
}

void finish(ncclComm_t c) {
    ncclResult_t rc = ncclCommFinalize(c);
    if (rc == ncclInProgress) rc = poll(c, 10000);
    RCHECK(rc == ncclSuccess, "finalize: %d", (int)rc);
    RCHECK_RC(ncclCommDestroy(c), ncclSuccess);
}

/* ---- element encodings of small integers, and decoding (the test's own, not the library's) -- */
const size_t kEs[ncclNumTypes] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
struct Fmt { int e, m; };   /* exponent and mantissa bits of the small float types */
Fmt fmt(int t) {
    switch (t) {
    case ncclFloat16: return { 5, 10 };
    case ncclBfloat16: return { 8, 7 };
    case ncclFloat8e4m3: return { 4, 3 };
    case ncclFloat8e5m2: return { 5, 2 };
    default: return { 0, 0 };
    }
}
void put(unsigned char *p, int t, int v) {   /* v: a small positive integer, exact in every type */
    switch (t) {
    case ncclInt8: case ncclUint8: { const uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case ncclInt32: case ncclUint32: { const int32_t x = v; memcpy(p, &x, 4); break; }
    case ncclInt64: case ncclUint64: { const int64_t x = v; memcpy(p, &x, 8); break; }
    case ncclFloat32: { const float x = (float)v; memcpy(p, &x, 4); break; }
    case ncclFloat64: { const double x = v; memcpy(p, &x, 8); break; }
    default: {
        const Fmt f = fmt(t);
        int e = 0;
        while ((2 << e) <= v) e++;
        const uint32_t mant = (uint32_t)(((double)v / (1 << e) - 1.0) * (1 << f.m));
        const uint32_t bits = ((uint32_t)(e + (1 << (f.e - 1)) - 1) << f.m) | mant;
        memcpy(p, &bits, kEs[t]);   /* little-endian: the low bytes */
    }
    }
}
double get(const unsigned char *p, int t) {
    switch (t) {
    case ncclInt8: return (int8_t)p[0];
    case ncclUint8: return p[0];
    case ncclInt32: { int32_t x; memcpy(&x, p, 4); return x; }
    case ncclUint32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case ncclInt64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclUint64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclFloat32: { float x; memcpy(&x, p, 4); return x; }
    case ncclFloat64: { double x; memcpy(&x, p, 8); return x; }
    default: {
        const Fmt f = fmt(t);
        uint32_t bits = 0;
        memcpy(&bits, p, kEs[t]);
        const int ex = (int)((bits >> f.m) & ((1u << f.e) - 1)), bias = (1 << (f.e - 1)) - 1;
        const double mant = (double)(bits & ((1u << f.m) - 1)) / (1 << f.m);
        const double v = ex ? std::ldexp(1.0 + mant, ex - bias) : std::ldexp(mant, 1 - bias);
        return (bits >> (f.e + f.m)) & 1 ? -v : v;
    }
    }
}
bool is_float(int t) { return t >= ncclFloat16; }
int val(int r, size_t i) { return 1 + (int)((i >> r) & 1); }   /* rank r's element i: 1 or 2, a mix that depends on i */
unsigned char pat(int r, size_t b, int t) { return (unsigned char)(r * 53 + b * 7 + t * 11 + 1); }

/* Rank r's expected reduction of element i over n ranks. */
double want_red(int op, int t, int n, size_t i) {
    double s = 0, p = 1, mx = -1e9, mn = 1e9;
    for (int j = 0; j < n; j++) {
        const int v = val(j, i);
        s += v;
        p *= v;
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
    }
    switch (op) {
    case ncclSum: return s;
    case ncclProd: return p;
    case ncclMax: return mx;
    case ncclMin: return mn;
    default: return is_float(t) ? s / n : (double)((long)s / n);
    }
}
double tol(int op, int t) {
    if (op != ncclAvg || !is_float(t)) return 0;
    if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) return 0.2;
    if (t == ncclFloat16 || t == ncclBfloat16) return 0.02;
    return 1e-6;
}

/* ---- the processes --------------------------------------------------------------------------- */
struct Shared { unsigned char bits[3][4096]; int flag[8]; };

template <class F, class P> void run_ranks(const char *name, int n, const F &fn, const P &post) {
    g_case = name;
    tns_begin_case(name);
    ncclUniqueId id;
    RCHECK_RC(ncclGetUniqueId(&id), ncclSuccess);
    Shared *sh = static_cast<Shared *>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    memset(sh, 0, sizeof *sh);
    fflush(nullptr);
    std::vector<pid_t> kids(n);
    for (int r = 0; r < n; r++) {
        kids[r] = fork();
        if (kids[r] == 0) {
            alarm(30);
            g_rank = r;
            g_fail = g_pass = 0;
            fn(r, n, id, sh);
            fflush(nullptr);
            _exit(g_fail ? 1 : 0);
        }
    }
    const long t0 = now_ms();
    int left = n;
    std::vector<int> st(n, -1);
    while (left && now_ms() - t0 < 30000) {
        for (int r = 0; r < n; r++) {
            int ws;
            if (st[r] == -1 && waitpid(kids[r], &ws, WNOHANG) == kids[r]) {
                st[r] = ws;
                left--;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (int r = 0; r < n; r++) {
        if (st[r] == -1) {
            kill(kids[r], SIGKILL);
            waitpid(kids[r], &st[r], 0);
            RCHECK(false, "rank %d did not end within 30 s (a hang)", r);
            continue;
        }
        RCHECK(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d: %s %d", r, WIFEXITED(st[r]) ? "exit" : "signal",
               WIFEXITED(st[r]) ? WEXITSTATUS(st[r]) : WTERMSIG(st[r]));
    }
    RCHECK(access(shm_path(id).c_str(), F_OK) != 0, "%s left behind", shm_path(id).c_str());
    post(sh, n);
    munmap(sh, sizeof *sh);
}

/* Every collective, type and op; rank offsets; in place; chunked. */
void child_collectives(int r, int n, const ncclUniqueId &id, Shared *sh, bool blocking) {
    ncclComm_t c = init(id, n, r, blocking);
    if (!c) return;
    enum { N = 37, G = 16 };
    size_t rec = 0;   /* where this type's AllReduce avg bits go in sh->bits[r] */
    for (int t = 0; t < (int)ncclNumTypes; t++) {
        const size_t es = kEs[t], blk = N * es, all = (size_t)n * blk;
        unsigned char *send = static_cast<unsigned char *>(tns_dev_alloc(all));
        unsigned char *rbuf = static_cast<unsigned char *>(tns_dev_alloc(all + 2 * G)), *recv = rbuf + G;
        const ncclDataType_t ty = (ncclDataType_t)t;
        auto guards = [&](const char *what) {
            bool ok = true;
            for (size_t b = 0; b < G; b++) ok = ok && rbuf[b] == 0xee && recv[all + b] == 0xee;
            RCHECK(ok, "%s type %d: wrote outside recvbuff", what, t);
        };
        auto expect = [&](const char *what, int op, const unsigned char *got, size_t first) {
            int bad = 0;
            size_t wi = 0;
            for (size_t i = 0; i < N; i++) {
                const double w = want_red(op, t, n, first + i), g = get(got + i * es, t);
                if (!(std::fabs(g - w) <= tol(op, t) * w)) { if (!bad++) wi = i; }
            }
            RCHECK(!bad, "%s type %d op %d: %d of %d wrong (element %zu: %g, want %g)", what, t, op, bad, (int)N, wi,
                   get(got + wi * es, t), want_red(op, t, n, first + wi));
        };
        for (int op = 0; op < (int)ncclNumOps; op++) {
            for (size_t i = 0; i < N; i++) put(send + i * es, t, val(r, i));
            memset(rbuf, 0xee, all + 2 * G);
            issued(c, ncclAllReduce(send, recv, N, ty, (ncclRedOp_t)op, c, S), "AllReduce");
            tns_sync(S);
            expect("AllReduce", op, recv, 0);
            guards("AllReduce");
            if (op == ncclAvg && rec + blk <= sizeof sh->bits[0]) { memcpy(sh->bits[r] + rec, recv, blk); rec += blk; }
            /* ReduceScatter: rank r gets block r of the reduction */
            for (size_t i = 0; i < (size_t)n * N; i++) put(send + i * es, t, val(r, i));
            memset(rbuf, 0xee, all + 2 * G);
            issued(c, ncclReduceScatter(send, recv, N, ty, (ncclRedOp_t)op, c, S), "ReduceScatter");
            tns_sync(S);
            expect("ReduceScatter", op, recv, (size_t)r * N);
            bool rest = true;
            for (size_t b = blk; b < all; b++) rest = rest && recv[b] == 0xee;
            RCHECK(rest, "ReduceScatter type %d: wrote past recvcount", t);
        }
        /* in place: ReduceScatter into sendbuff + rank * recvcount, AllReduce into sendbuff */
        for (size_t i = 0; i < (size_t)n * N; i++) put(send + i * es, t, val(r, i));
        issued(c, ncclReduceScatter(send, send + r * blk, N, ty, ncclSum, c, S), "ReduceScatter in place");
        tns_sync(S);
        expect("ReduceScatter in place", ncclSum, send + r * blk, (size_t)r * N);
        for (size_t i = 0; i < N; i++) put(send + i * es, t, val(r, i));
        issued(c, ncclAllReduce(send, send, N, ty, ncclMax, c, S), "AllReduce in place");
        tns_sync(S);
        expect("AllReduce in place", ncclMax, send, 0);
        /* AllGather: block j of recv is rank j's sendbuff */
        for (size_t b = 0; b < blk; b++) send[b] = pat(r, b, t);
        memset(rbuf, 0xee, all + 2 * G);
        issued(c, ncclAllGather(send, recv, N, ty, c, S), "AllGather");
        tns_sync(S);
        int bad = 0;
        for (int j = 0; j < n; j++)
            for (size_t b = 0; b < blk; b++) bad += recv[j * blk + b] != pat(j, b, t);
        RCHECK(!bad, "AllGather type %d: %d bytes wrong", t, bad);
        guards("AllGather");
        /* in place: sendbuff = recvbuff + rank * sendcount */
        memset(recv, 0xee, all);
        for (size_t b = 0; b < blk; b++) recv[r * blk + b] = pat(r, b, t);
        issued(c, ncclAllGather(recv + r * blk, recv, N, ty, c, S), "AllGather in place");
        tns_sync(S);
        bad = 0;
        for (int j = 0; j < n; j++)
            for (size_t b = 0; b < blk; b++) bad += recv[j * blk + b] != pat(j, b, t);
        RCHECK(!bad, "AllGather in place type %d: %d bytes wrong", t, bad);
        /* Broadcast from the last rank, out of place and in place */
        const int root = n - 1;
        for (size_t b = 0; b < blk; b++) send[b] = pat(r, b, t);
        memset(rbuf, 0xee, all + 2 * G);
        issued(c, ncclBroadcast(send, recv, N, ty, root, c, S), "Broadcast");
        issued(c, ncclBroadcast(send, send, N, ty, root, c, S), "Broadcast in place");
        tns_sync(S);
        bad = 0;
        for (size_t b = 0; b < blk; b++) bad += (recv[b] != pat(root, b, t)) + (send[b] != pat(root, b, t));
        RCHECK(!bad, "Broadcast type %d: %d bytes wrong", t, bad);
        RCHECK(recv[blk] == 0xee, "Broadcast type %d: wrote past count", t);
        tns_dev_free(send);
        tns_dev_free(rbuf);
    }
    RCHECK_RC(ncclBroadcast(sh, sh, 1, ncclInt8, n, c, S), ncclInvalidArgument);   /* root n: out of range */
    finish(c);
}

void same_bits(Shared *sh, int n) {
    bool same = true;
    for (int r = 1; r < n; r++) same = same && !memcmp(sh->bits[0], sh->bits[r], sizeof sh->bits[0]);
    RCHECK(same, "the ranks' AllReduce(avg) results differ in their bits");
}
void nothing(Shared *, int) {}

/* Rank 2 issues AllGather then AllReduce, the others AllReduce then AllGather: every rank
 * reports the mismatch, and no recvbuff is written. */
void child_mismatch(int r, int n, const ncclUniqueId &id, Shared *) {
    ncclComm_t c = init(id, n, r, true);
    if (!c) return;
    float *x = static_cast<float *>(tns_dev_alloc(64)), *y = static_cast<float *>(tns_dev_alloc(64 * 3));
    memset(x, 0, 64);
    memset(y, 0xee, 64 * 3);
    if (r == 2) {
        RCHECK_RC(ncclAllGather(x, y, 16, ncclFloat32, c, S), ncclSuccess);
        RCHECK_RC(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, c, S), ncclSuccess);
    } else {
        RCHECK_RC(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, c, S), ncclSuccess);
        RCHECK_RC(ncclAllGather(x, y, 16, ncclFloat32, c, S), ncclSuccess);
    }
    tns_sync(S);
    ncclResult_t a = ncclSuccess;
    RCHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
    RCHECK(a == ncclInvalidUsage, "async error %d, want ncclInvalidUsage", (int)a);
    RCHECK(strstr(ncclGetLastError(nullptr), "differs between ranks"), "last error: %s", ncclGetLastError(nullptr));
    bool untouched = true;
    for (int b = 0; b < 64 * 3; b++) untouched = untouched && reinterpret_cast<unsigned char *>(y)[b] == 0xee;
    RCHECK(untouched, "a mismatched collective wrote recvbuff");
    RCHECK_RC(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, c, S), ncclInvalidUsage);   /* sticky */
    RCHECK(strstr(ncclGetLastError(nullptr), "asynchronous error") && strstr(ncclGetLastError(nullptr), "differs between ranks"),
           "a later call's error does not repeat the cause: %s", ncclGetLastError(nullptr));
    RCHECK_RC(ncclCommAbort(c), ncclSuccess);
    tns_dev_free(x);
    tns_dev_free(y);
}

/* Rank 2 exits after init; the others, in a collective, see ncclRemoteError naming it. */
void child_dead(int r, int n, const ncclUniqueId &id, Shared *sh) {
    if (r == 2) sh->flag[0] = (int)getpid();
    ncclComm_t c = init(id, n, r, false);
    if (!c) return;
    if (r == 2) _exit(0);
    float *x = static_cast<float *>(tns_dev_alloc(4096)), *y = static_cast<float *>(tns_dev_alloc(4096));
    memset(x, 0, 4096);
    issued(c, ncclAllReduce(x, y, 1024, ncclFloat32, ncclSum, c, S), "AllReduce");
    std::atomic<bool> done{false};
    std::thread w([&] { tns_sync(S); done = true; });
    const long t0 = now_ms();
    ncclResult_t a = ncclSuccess;
    while (a == ncclSuccess && now_ms() - t0 < 10000) {
        RCHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    RCHECK(a == ncclRemoteError, "async error %d, want ncclRemoteError", (int)a);
    RCHECK(now_ms() - t0 < 5000, "the peer's exit took %ld ms to be seen", now_ms() - t0);
    char want[64];
    snprintf(want, sizeof want, "rank 2 (pid %d) exited", sh->flag[0]);
    RCHECK(strstr(ncclGetLastError(nullptr), want), "last error \"%s\" lacks \"%s\"", ncclGetLastError(nullptr), want);
    RCHECK_RC(ncclCommAbort(c), ncclSuccess);
    w.join();
    RCHECK(done.load(), "stream not released");
    tns_dev_free(x);
    tns_dev_free(y);
}

/* Rank 0's collective waits for rank 1 (which comes late): ncclCommAbort from another thread
 * releases it; rank 1's collective then fails naming rank 0. */
void child_abort(int r, int n, const ncclUniqueId &id, Shared *) {
    ncclComm_t c = init(id, n, r, true);
    if (!c) return;
    float *x = static_cast<float *>(tns_dev_alloc(256)), *y = static_cast<float *>(tns_dev_alloc(256));
    memset(x, 0, 256);
    memset(y, 0xee, 256);
    if (r == 0) {
        RCHECK_RC(ncclAllReduce(x, y, 64, ncclFloat32, ncclSum, c, S), ncclSuccess);
        std::atomic<bool> done{false};
        std::thread w([&] { tns_sync(S); done = true; });
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        RCHECK(!done.load(), "the collective finished without its peer");
        RCHECK_RC(ncclCommAbort(c), ncclSuccess);
        for (int i = 0; i < 2000 && !done.load(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        RCHECK(done.load(), "ncclCommAbort did not release the collective waiting in a barrier");
        w.join();
    } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        RCHECK_RC(ncclAllReduce(x, y, 64, ncclFloat32, ncclSum, c, S), ncclSuccess);
        tns_sync(S);
        ncclResult_t a = ncclSuccess;
        RCHECK_RC(ncclCommGetAsyncError(c, &a), ncclSuccess);
        RCHECK(a == ncclRemoteError, "async error %d, want ncclRemoteError", (int)a);
        RCHECK(strstr(ncclGetLastError(nullptr), "rank 0 (pid"), "last error: %s", ncclGetLastError(nullptr));
        RCHECK(strstr(ncclGetLastError(nullptr), "aborted its communicator"), "last error: %s", ncclGetLastError(nullptr));
        RCHECK_RC(ncclCommAbort(c), ncclSuccess);
    }
    tns_dev_free(x);
    tns_dev_free(y);
}

/* Two processes with the same rank, or a different nranks: the second to attach is refused;
 * the other never completes its rendezvous and aborts (nothing is left in /dev/shm). */
void child_bad_init(int r, int, const ncclUniqueId &id, Shared *sh, bool dup) {
    ncclConfig_t cf = NCCL_CONFIG_INITIALIZER;
    cf.blocking = 0;
    ncclComm_t c = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&c, dup ? 2 : 2 + r, id, dup ? 0 : r, &cf);
    RCHECK(rc == ncclInProgress && c, "init: %d", (int)rc);
    if (!c) return;
    const ncclResult_t a = poll(c, 1500);
    sh->flag[r] = (int)a;
    if (a == ncclInvalidUsage) {
        const char *want = dup ? "rank 0 of 2 is already attached" : "differs from the";
        RCHECK(strstr(ncclGetLastError(nullptr), want), "last error \"%s\" lacks \"%s\"", ncclGetLastError(nullptr), want);
    }
    RCHECK_RC(ncclCommAbort(c), ncclSuccess);
}
void one_refused(Shared *sh, int) {
    RCHECK((sh->flag[0] == ncclInvalidUsage) + (sh->flag[1] == ncclInvalidUsage) == 1 &&
           (sh->flag[0] == ncclInProgress) + (sh->flag[1] == ncclInProgress) == 1,
           "init states %d and %d: want one ncclInvalidUsage and one still ncclInProgress", sh->flag[0], sh->flag[1]);
}
}  // namespace

int tns_ranks_tests(int *pass) {
    setenv("VOLT_CUDASIM_NCCL_SLOT_BYTES", "64", 1);   /* every collective in several chunks */
    run_ranks("collectives, 2 ranks (non-blocking)", 2,
              [](int r, int n, const ncclUniqueId &id, Shared *sh) { child_collectives(r, n, id, sh, false); }, same_bits);
    run_ranks("collectives, 3 ranks (blocking)", 3,
              [](int r, int n, const ncclUniqueId &id, Shared *sh) { child_collectives(r, n, id, sh, true); }, same_bits);
    unsetenv("VOLT_CUDASIM_NCCL_SLOT_BYTES");
    run_ranks("order mismatch", 3, child_mismatch, nothing);
    run_ranks("a rank exits", 3, child_dead, nothing);
    run_ranks("abort releases a barrier", 2, child_abort, nothing);
    run_ranks("duplicate rank", 2,
              [](int r, int n, const ncclUniqueId &id, Shared *sh) { child_bad_init(r, n, id, sh, true); }, one_refused);
    run_ranks("different nranks", 2,
              [](int r, int n, const ncclUniqueId &id, Shared *sh) { child_bad_init(r, n, id, sh, false); }, one_refused);
    *pass = g_pass;
    return g_fail;
}
