/* cudasim NCCL: a CPU simulation of the NCCL 2.28 API that volt's NCCL comm backend loads
 * (strategies/comm/nccl/nccl_lib.h: VOLT_NCCL_FUNCS), built as libvolt_cudasim_nccl.so and picked
 * up through VOLT_NCCL, so tests/test_nccl.c runs on a machine without a GPU, under ASan, against
 * the cudasim runtime (tests/cudasim/runtime.cc: device memory is host memory, every stream a
 * worker thread). docs/NCCL.md, "NCCL simulator".
 *
 * What it simulates (1 to 64 ranks; several ranks are processes on one machine, nccl_shm.cc):
 *  - ncclGetVersion (the header's NCCL_VERSION_CODE), ncclGetUniqueId (random bytes, a magic and
 *    the name of a POSIX shared-memory segment "/volt-cudasim-nccl-<32 hex>"; at world size 1
 *    the id is also remembered so that init can tell it from a made-up one), ncclGetErrorString
 *    (NCCL's strings), ncclGetLastError (the last message, process-wide and never cleared, as in NCCL).
 *  - ncclCommInitRankConfig: a bad rank is ncclInvalidArgument ("Invalid rank requested"), more
 *    than 64 ranks ncclInvalidUsage; a config not made by NCCL_CONFIG_INITIALIZER or a blocking
 *    value other than 0/1 is ncclInvalidArgument. Non-blocking (config.blocking = 0): init returns
 *    ncclInProgress and ncclCommGetAsyncError says ncclInProgress on its first two calls, then
 *    ncclSuccess, at several ranks only once every rank has attached to the segment (nccl_shm.cc:
 *    the rendezvous, its errors); blocking init returns when every rank has attached.
 *  - AllReduce / ReduceScatter / AllGather / Broadcast, every ncclDataType_t and built-in
 *    ncclRedOp_t: at world size 1 the one-rank result, which is a copy of count elements from
 *    sendbuff to recvbuff (nothing to do in place); at several ranks the data moves through the
 *    segment, with the ranks' collectives compared first and a dead or aborted peer reported
 *    (nccl_shm.cc's header says how); an error there is the comm's asynchronous error (its
 *    cause repeated by later calls). All done on `stream` by a host function queued with
 *    cudaLaunchHostFunc (cudasim_launch_host_func_owned), so it runs in stream order, after the
 *    work queued before it and before the work queued after it; its arguments are copied at
 *    call time. A collective issued while `stream` is being captured into a CUDA graph is
 *    recorded as the graph's host node and runs at every launch of the graph, with the same
 *    buffers and sequence number (so every rank must launch the same graphs in the same
 *    order, as with NCCL); its copy of the arguments lives until the graph is destroyed.
 *    Checked as NCCL checks them, in NCCL's order: the comm (NULL; aborted or destroyed, which
 *    NCCL sees as "corrupted comm object"), the comm ready (a call while an earlier one is
 *    still ncclInProgress: ncclInvalidArgument; a sticky async error: that error), root, type,
 *    op, and the buffers as NCCL_CHECK_POINTERS=1 does (cudaPointerGetAttributes: memory a
 *    kernel cannot address, e.g. plain malloc'd host memory, is ncclInvalidArgument). count 0
 *    does nothing, as in NCCL.
 *    On a non-blocking comm the FIRST collective returns ncclInProgress (real NCCL connects
 *    peers lazily at the first collective and reports that in the background): its work is
 *    put on the stream only when ncclCommGetAsyncError turns ncclSuccess (its first poll
 *    says ncclInProgress, the second ncclSuccess), as the real background enqueue is complete
 *    only then. Later ones return
 *    ncclSuccess. A blocking comm never returns ncclInProgress. (Real NCCL at one rank has
 *    no peer to connect and may well answer ncclSuccess at once: the simulated first
 *    ncclInProgress is there so that the caller's handling of it runs.)
 *  - At several ranks, ncclCommFinalize, ncclCommDestroy and ncclCommAbort need every CUDA graph
 *    that captured one of the comm's collectives destroyed (launches of it completed) within 3 s
 *    of the call, else the process prints why and aborts: NCCL >= 2.26 waits for those graphs
 *    in these calls, a hang when the caller destroys its graphs only afterwards.
 *  - ncclCommAbort never waits: it marks the comm aborted (in the segment too, so peers waiting
 *    for this rank fail, and a collective of this comm waiting in a barrier returns) and frees
 *    the handle; each queued
 *    host function of that comm that runs afterwards sees the mark and returns without
 *    touching memory (what a real kernel does when it finds the abort flag set; the queued
 *    ones are not removed from their streams). Any call with the handle afterwards is
 *    ncclInvalidArgument "Error: corrupted comm object detected", as in NCCL, where abort
 *    frees (and poisons) the communicator.
 *  - ncclCommFinalize: blocking, waits until the comm's queued work has run; non-blocking,
 *    returns ncclInProgress, and ncclCommGetAsyncError says ncclInProgress until that work has
 *    run (and at least once). A second finalize is ncclInvalidArgument.
 *    ncclCommDestroy: frees the comm, first waiting (as NCCL does) for its queued work when it
 *    was not finalized. Destroy or abort of NULL is ncclSuccess; of a dead handle,
 *    ncclInvalidArgument.
 *  - Fault injection for the comm backend's asynchronous-error path: with VOLT_CUDASIM_NCCL_FAIL_AT=N
 *    (N >= 1, read at init) the Nth collective of each communicator does not complete: its host
 *    function sets the comm's asynchronous error to ncclRemoteError ("cudasim NCCL: injected
 *    remote error ...", ncclGetLastError) and then holds its stream, as a real kernel whose
 *    peer is gone does, until the comm is aborted; recvbuff is left untouched. Any other value
 *    of the variable is refused at init (ncclInvalidArgument, naming it).
 *
 * What it does not: ranks on different machines (the segment is local); the other entry points
 * of nccl.h (groups, send/recv, Reduce, split, registration, user reduction ops: an op >=
 * ncclNumOps is "unknown to this communicator"); capturing the first collective of a
 * non-blocking communicator (ncclInvalidUsage saying so: it is the one that connects in the
 * background here); NCCL's environment variables and debug output.
 *
 * Where it deliberately differs from NCCL:
 *  - it checks more, and says so as an error: a NULL buffer with count > 0 and a non-device
 *    pointer are refused always (NCCL checks pointers only under NCCL_CHECK_POINTERS=1 and
 *    otherwise faults on the device later); send and recv ranges that overlap without being
 *    NCCL's in-place layout are refused (NCCL gives undefined results); an init from a unique
 *    id this process did not make is refused (NCCL would fail or hang in its bootstrap);
 *  - asynchronous states last a fixed number of polls instead of a time, so a caller that
 *    does not poll to ncclSuccess before its next call fails every time here, not only when
 *    the real background thread is slow;
 *  - several ranks: reductions are done in rank order 0..n-1 with each step rounded to the type
 *    (16-bit and 8-bit floats computed in float; fp8 e4m3 saturates at 448, e5m2 overflows to
 *    inf), where NCCL's order depends on its algorithm (ring, tree) and its device arithmetic;
 *    a peer that died or aborted is reported (ncclRemoteError) as soon as a rank waits for it,
 *    where NCCL on one node usually hangs until the caller's timeout aborts;
 *  - ncclAvg at one rank is a byte copy (NCCL multiplies by 1/nranks = 1 on the device, which
 *    can change the bits of a NaN);
 *  - ncclCommAbort returns at once even with work queued behind a held stream (the real one
 *    synchronises NCCL's internal streams while it tears down, which may depend on the
 *    device making progress).
 *
 * The CUDA runtime calls made: cudasim_launch_host_func_owned, cudaPointerGetAttributes,
 * cudaStreamIsCapturing, cudaGetErrorString. Tests: tests/cudasim/test_nccl_sim.cc (one rank)
 * and test_nccl_sim_ranks.cc (2 and 3 forked ranks), one program. */
/* The NCCL API is what this library exports, whatever -fvisibility it is built with. */
#pragma GCC visibility push(default)
#include <nccl.h>
#include <cuda_runtime_api.h>
#pragma GCC visibility pop
#include "cudasim_ext.h"
#include "nccl_sim.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

/* ---- the last error (ncclGetLastError): process-wide, as NCCL's ncclLastError ---------------- */
std::mutex g_err_mu;
char g_last_err[1024];

__attribute__((format(printf, 2, 3))) ncclResult_t fail(ncclResult_t rc, const char *fmt, ...) {
    std::lock_guard<std::mutex> lk(g_err_mu);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_err, sizeof g_last_err, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- state shared by a communicator and the work it has queued ---------------------------- */
struct State {
    std::mutex mu;
    std::condition_variable cv;
    int refs = 1;                  /* the handle + one per queued host function */
    int outstanding = 0;           /* host functions queued and not yet run */
    int in_graphs = 0;             /* captured collectives whose graph (or a launch of it) still lives */
    std::atomic<bool> aborted{false};
    std::atomic<int> async_err{ncclSuccess};   /* set by a host function (fault injection, a peer's failure) */
    char async_msg[800] = "";      /* what set async_err (written before it is published) */
    bool multi = false;            /* nranks > 1: the collectives go through link (nccl_shm.cc) */
    std::mutex run_mu;             /* one collective of the comm at a time (work on two streams) */
    ncclsim::Link link;            /* unmapped when the last reference goes (a host function may be in a barrier) */
};

void state_release(State *s) {
    bool last;
    {
        std::lock_guard<std::mutex> lk(s->mu);
        last = --s->refs == 0;
    }
    if (!last) return;
    if (s->multi) ncclsim::link_close(&s->link);
    delete s;
}

/* One collective, as copied at call time: a host function's argument. */
struct Op {
    State *st;
    const void *send;
    void *recv;
    size_t bytes;
    bool inject;                   /* the injected fault: hold the stream until abort */
    const char *name;
    unsigned long long seq;
    ncclsim::Desc desc;            /* nranks > 1: what every rank must have issued as #seq */
    size_t es;
    bool captured;                 /* recorded into a CUDA graph: runs at every launch, not counted as queued */
};

enum Pending { PEND_NONE, PEND_INIT, PEND_COLL, PEND_FINALIZE };

}  // namespace

struct ncclComm {
    State *st;
    bool blocking;
    bool finalized;
    ncclResult_t async;            /* ncclInProgress while an operation is pending, else sticky */
    Pending pending;
    int polls_left;                /* polls that still report ncclInProgress (at least) */
    Op *pending_op;                /* the first collective's work, queued when its enqueue "completes" */
    cudaStream_t pending_stream;
    unsigned long long ncoll;      /* collectives accepted */
    long fail_at;                  /* VOLT_CUDASIM_NCCL_FAIL_AT, 0 = none */
    int nranks, rank;
    char name[64];
};

namespace {

/* ---- live handles: anything else is a dead (aborted / destroyed) or foreign pointer ------- */
std::mutex g_reg_mu;
std::unordered_set<ncclComm *> g_live;
std::unordered_map<ncclComm *, const char *> g_dead;   /* why it died */
std::vector<ncclUniqueId> g_ids;                        /* made by ncclGetUniqueId */

ncclResult_t comm_check(ncclComm *c, const char *opname) {
    if (!c) return fail(ncclInvalidArgument, "%s : comm argument is NULL", opname);
    std::lock_guard<std::mutex> lk(g_reg_mu);
    if (g_live.count(c)) return ncclSuccess;
    auto it = g_dead.find(c);
    if (it != g_dead.end())
        return fail(ncclInvalidArgument, "%s : Error: corrupted comm object detected (cudasim NCCL: comm %p was %s; "
                    "using it is a use after free in NCCL)", opname, (void *)c, it->second);
    return fail(ncclInvalidArgument, "%s : Error: corrupted comm object detected (cudasim NCCL: %p is not a "
                "communicator made by ncclCommInitRankConfig)", opname, (void *)c);
}

void comm_kill(ncclComm *c, const char *why) {
    std::lock_guard<std::mutex> lk(g_reg_mu);
    g_live.erase(c);
    g_dead[c] = why;
}

/* The host function of one collective (runs on the stream's worker). */
void CUDART_CB run_op(void *arg) {
    Op *op = static_cast<Op *>(arg);
    State *s = op->st;
    if (op->inject && !s->aborted.load(std::memory_order_acquire)) {
        fail(ncclRemoteError, "cudasim NCCL: injected remote error at %s #%llu (VOLT_CUDASIM_NCCL_FAIL_AT): the "
             "collective waits for a peer that is gone, until ncclCommAbort", op->name, op->seq);
        s->async_err.store(ncclRemoteError, std::memory_order_release);
        while (!s->aborted.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else if (s->multi) {
        /* after an error (a peer gone, a mismatch) the comm's queued work does nothing */
        if (!s->aborted.load(std::memory_order_acquire) && s->async_err.load(std::memory_order_acquire) == ncclSuccess) {
            char msg[768];
            std::lock_guard<std::mutex> lk(s->run_mu);
            const ncclResult_t rc = ncclsim::link_run(&s->link, op->desc, op->send, op->recv, op->es, s->aborted, msg, sizeof msg);
            if (rc != ncclSuccess && !s->aborted.load(std::memory_order_acquire)) {
                fail(rc, "%s #%llu: %s", op->name, op->seq, msg);
                snprintf(s->async_msg, sizeof s->async_msg, "%s #%llu: %s", op->name, op->seq, msg);
                int none = ncclSuccess;
                s->async_err.compare_exchange_strong(none, rc, std::memory_order_acq_rel);
            }
        }
    } else if (!s->aborted.load(std::memory_order_acquire) && op->send != op->recv && op->bytes) {
        memcpy(op->recv, op->send, op->bytes);
    }
    if (op->captured) return;   /* a graph's: it runs again at the next launch */
    {
        std::lock_guard<std::mutex> lk(s->mu);
        s->outstanding--;
    }
    s->cv.notify_all();
}

/* The runtime is done with op: it ran (queued), or its graph was destroyed (captured). */
void op_release(void *arg) {
    Op *op = static_cast<Op *>(arg);
    State *s = op->st;
    if (op->captured) {
        {
            std::lock_guard<std::mutex> lk(s->mu);
            s->in_graphs--;
        }
        s->cv.notify_all();
    }
    delete op;
    state_release(s);
}

/* Puts op's host function on the stream (or into the graph being captured from it: then op
 * lives as long as the graph, cudasim_ext.h); on failure op is freed. */
ncclResult_t enqueue(ncclComm *c, Op *op, cudaStream_t stream) {
    State *s = c->st;
    const bool counted = !op->captured;
    {
        std::lock_guard<std::mutex> lk(s->mu);
        s->refs++;   /* op's; op_release drops it */
        if (counted) s->outstanding++;
        else s->in_graphs++;
    }
    const char *name = op->name;
    cudaError_t e = cudasim_launch_host_func_owned(stream, run_op, op, op_release);
    if (e == cudaSuccess) return ncclSuccess;
    if (counted) {   /* op_release has run: op is gone and its reference dropped */
        {
            std::lock_guard<std::mutex> lk(s->mu);
            s->outstanding--;
        }
        s->cv.notify_all();
    }
    return fail(ncclUnhandledCudaError, "%s : Cuda failure '%s' (cudaLaunchHostFunc on stream %p)", name,
                cudaGetErrorString(e), (void *)stream);
}

/* The comm's state as ncclCommGetAsyncError reports it; one call is one poll. */
ncclResult_t poll_async(ncclComm *c) {
    const int inj = c->st->async_err.load(std::memory_order_acquire);
    if (inj != ncclSuccess && c->async == ncclSuccess) c->async = (ncclResult_t)inj;
    if (c->async != ncclInProgress) return c->async;
    if (c->polls_left > 0) {
        c->polls_left--;
        return ncclInProgress;
    }
    switch (c->pending) {
    case PEND_INIT:
        if (c->st->multi) {   /* the rendezvous of every rank in the segment */
            char msg[768];
            const ncclResult_t rc = ncclsim::link_step(&c->st->link, msg, sizeof msg);
            if (rc == ncclInProgress) return ncclInProgress;
            if (rc != ncclSuccess) {
                c->pending = PEND_NONE;
                return c->async = fail(rc, "ncclCommInitRankConfig : %s", msg);
            }
        }
        break;
    case PEND_FINALIZE: {
        std::lock_guard<std::mutex> lk(c->st->mu);
        if (c->st->outstanding > 0) return ncclInProgress;
        break;
    }
    case PEND_COLL: {
        Op *op = c->pending_op;
        c->pending_op = nullptr;
        if (enqueue(c, op, c->pending_stream) != ncclSuccess) {
            c->pending = PEND_NONE;
            return c->async = ncclUnhandledCudaError;
        }
        break;
    }
    default: break;
    }
    c->pending = PEND_NONE;
    return c->async = ncclSuccess;
}

/* ncclCommEnsureReady: a new call while the last one is in progress, or after an async error. */
ncclResult_t ensure_ready(ncclComm *c, const char *opname) {
    if (c->blocking) {
        const int inj = c->st->async_err.load(std::memory_order_acquire);
        if (inj != ncclSuccess && c->async == ncclSuccess) c->async = (ncclResult_t)inj;
        if (c->async != ncclSuccess)
            return fail(c->async, "%s : the communicator has an asynchronous error (%s%s%s); abort it", opname,
                        ncclGetErrorString(c->async), inj != ncclSuccess && c->st->async_msg[0] ? ": " : "",
                        inj != ncclSuccess ? c->st->async_msg : "");
        return ncclSuccess;
    }
    const ncclResult_t a = poll_async(c);
    if (a == ncclInProgress)
        return fail(ncclInvalidArgument, "%s : Attempt to use communicator before the previous operation returned "
                    "ncclSuccess (cudasim NCCL: poll ncclCommGetAsyncError until it is not ncclInProgress)", opname);
    if (a != ncclSuccess) {
        const bool from_op = c->st->async_err.load(std::memory_order_acquire) != ncclSuccess && c->st->async_msg[0];
        return fail(a, "%s : the communicator has an asynchronous error (%s%s%s); abort it", opname, ncclGetErrorString(a),
                    from_op ? ": " : "", from_op ? c->st->async_msg : "");
    }
    return ncclSuccess;
}

void wait_idle(State *s) {
    std::unique_lock<std::mutex> lk(s->mu);
    s->cv.wait(lk, [s] { return s->outstanding == 0; });
}

/* NCCL >= 2.26 finalizes, destroys and aborts a communicator of several ranks only once every
 * CUDA graph that captured one of its collectives is destroyed (and its launches completed);
 * at one rank a collective is a plain copy, no graph keeps it. A caller that destroys its graphs
 * after the call waits forever on a GPU: here it is a loud failure after a few seconds. */
void graphs_gone(State *s, const char *call) {
    if (!s->multi) return;
    std::unique_lock<std::mutex> lk(s->mu);
    if (s->cv.wait_for(lk, std::chrono::seconds(3), [s] { return s->in_graphs == 0; })) return;
    fprintf(stderr, "cudasim NCCL: %s with %d collective(s) of this communicator still captured in CUDA graphs that "
            "are not destroyed: NCCL >= 2.26 waits in %s until every such graph is destroyed, so a caller that "
            "destroys its graphs after this call hangs on a GPU; destroy the graphs first\n", call, s->in_graphs, call);
    fflush(stderr);
    std::abort();
}

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

/* Memory a kernel can address (NCCL_CHECK_POINTERS's test: a device pointer exists). */
ncclResult_t ptr_check(const void *p, const char *opname, const char *which) {
    if (!p) return fail(ncclInvalidArgument, "%s : %s argument is NULL", opname, which);
    cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess || !a.devicePointer)
        return fail(ncclInvalidArgument, "%s : %s %p is not a valid pointer (cudasim NCCL: not device, managed or "
                    "pinned memory%s%s)", opname, which, p, e != cudaSuccess ? ": " : "",
                    e != cudaSuccess ? cudaGetErrorString(e) : "");
    return ncclSuccess;
}

enum Coll { C_ALLREDUCE, C_REDUCESCATTER, C_ALLGATHER, C_BROADCAST };

/* ncclEnqueueCheck + the one-rank launch: every collective at world size 1 moves `count`
 * elements from send to recv; in place is send == recv (rank 0's slice is the whole buffer). */
ncclResult_t collective(Coll kind, const char *opname, const void *send, void *recv, size_t count,
                        ncclDataType_t type, int op, int root, ncclComm *c, cudaStream_t stream) {
    ncclResult_t rc = comm_check(c, opname);
    if (rc != ncclSuccess) return rc;
    if (c->finalized) return fail(ncclInvalidUsage, "%s : the communicator was finalized (cudasim NCCL)", opname);
    if ((rc = ensure_ready(c, opname)) != ncclSuccess) return rc;
    if (root < 0 || root >= c->nranks)
        return fail(ncclInvalidArgument, "%s : invalid root %d (root should be in the 0..%d range)", opname, root, c->nranks);
    const size_t es = type_size(type);
    if (!es || (int)type < 0 || (int)type >= ncclNumTypes) return fail(ncclInvalidArgument, "%s : invalid type %d", opname, (int)type);
    if (kind == C_ALLREDUCE || kind == C_REDUCESCATTER) {
        if (op < 0 || op > (int)ncclMaxRedOp) return fail(ncclInvalidArgument, "%s : invalid reduction operation %d", opname, op);
        if (op >= (int)ncclNumOps)
            return fail(ncclInvalidArgument, "%s : reduction operation %d unknown to this communicator", opname, op);
    }
    if (count == 0) return ncclSuccess;   /* NCCL: empty collectives are discarded */
    if (count > SIZE_MAX / es) return fail(ncclInvalidArgument, "%s : count %zu of %zu-byte elements overflows", opname, count, es);
    if ((rc = ptr_check(send, opname, "sendbuff")) != ncclSuccess) return rc;
    if ((rc = ptr_check(recv, opname, "recvbuff")) != ncclSuccess) return rc;
    const size_t bytes = count * es, n = (size_t)c->nranks;
    if (count > SIZE_MAX / es / n) return fail(ncclInvalidArgument, "%s : count %zu of %zu-byte elements on %zu ranks overflows", opname, count, es, n);
    /* NCCL's in-place layouts: ReduceScatter recvbuff = sendbuff + rank * recvcount, AllGather
     * sendbuff = recvbuff + rank * sendcount, the others sendbuff = recvbuff */
    const size_t sbytes = kind == C_REDUCESCATTER ? n * bytes : bytes, rbytes = kind == C_ALLGATHER ? n * bytes : bytes;
    const uintptr_t s0 = (uintptr_t)send, r0 = (uintptr_t)recv, off = (size_t)c->rank * bytes;
    const bool in_place = kind == C_REDUCESCATTER ? r0 == s0 + off : kind == C_ALLGATHER ? s0 == r0 + off : s0 == r0;
    if (!in_place && s0 < r0 + rbytes && r0 < s0 + sbytes)
        return fail(ncclInvalidArgument, "%s : sendbuff %p (%zu bytes) and recvbuff %p (%zu bytes) overlap without being in "
                    "place (cudasim NCCL: undefined results in NCCL)", opname, send, sbytes, (void *)recv, rbytes);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const cudaError_t ce = cudaStreamIsCapturing(stream, &cs);
    if (ce != cudaSuccess) return fail(ncclUnhandledCudaError, "%s : Cuda failure '%s' (cudaStreamIsCapturing)", opname, cudaGetErrorString(ce));
    const bool captured = cs != cudaStreamCaptureStatusNone;
    if (captured && cs != cudaStreamCaptureStatusActive)
        return fail(ncclInvalidUsage, "%s : the stream's CUDA graph capture was invalidated", opname);
    if (captured && !c->blocking && c->ncoll == 0)
        return fail(ncclInvalidUsage, "%s : cudasim NCCL: the first collective of a non-blocking communicator connects "
                    "in the background and cannot be captured; run one collective before capturing", opname);
    Op *o = new Op{c->st, send, recv, bytes, false, opname, ++c->ncoll, {}, es, captured};
    o->desc.seq = o->seq;
    o->desc.count = count;
    o->desc.kind = (int32_t)kind;
    o->desc.type = (int32_t)type;
    o->desc.op = kind == C_ALLREDUCE || kind == C_REDUCESCATTER ? op : -1;
    o->desc.root = kind == C_BROADCAST ? root : -1;
    o->inject = c->fail_at > 0 && (long long)o->seq == c->fail_at;
    if (!c->blocking && c->ncoll == 1) {   /* the first collective connects, in the background */
        c->pending = PEND_COLL;
        c->pending_op = o;
        c->pending_stream = stream;
        c->polls_left = 1;
        c->async = ncclInProgress;
        return ncclInProgress;
    }
    return enqueue(c, o, stream);
}

void free_comm(ncclComm *c, const char *why) {
    comm_kill(c, why);
    delete c->pending_op;
    State *s = c->st;
    delete c;
    state_release(s);
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
    if (!version) return fail(ncclInvalidArgument, "ncclGetVersion : version argument is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
    if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId : uniqueId argument is NULL");
    static std::mutex mu;
    static std::mt19937_64 rng(std::random_device{}());
    std::lock_guard<std::mutex> lk(mu);
    for (size_t i = 0; i < sizeof uniqueId->internal; i += 8) {
        const uint64_t r = rng();
        memcpy(uniqueId->internal + i, &r, 8);
    }
    ncclsim::id_stamp(uniqueId);   /* the name of the segment the ranks of nranks > 1 meet in */
    std::lock_guard<std::mutex> rl(g_reg_mu);
    g_ids.push_back(*uniqueId);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config) {
    static const char op[] = "ncclCommInitRankConfig";
    if (!comm) return fail(ncclInvalidArgument, "%s : newcomm argument is NULL", op);
    *comm = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "%s : Invalid rank requested : %d/%d", op, rank, nranks);
    if (nranks > 64) return fail(ncclInvalidUsage, "cudasim NCCL: at most 64 ranks (nranks %d)", nranks);
    ncclConfig_t def = NCCL_CONFIG_INITIALIZER;
    const ncclConfig_t *cf = config ? config : &def;
    if (cf->magic != 0xcafebeef || cf->size < offsetof(ncclConfig_t, cgaClusterSize))
        return fail(ncclInvalidArgument, "%s : ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER", op);
    const int blocking = cf->blocking == NCCL_CONFIG_UNDEF_INT ? 1 : cf->blocking;
    if (blocking != 0 && blocking != 1)
        return fail(ncclInvalidArgument, "%s : Invalid config blocking attribute value %d", op, cf->blocking);
    long fail_at = 0;
    if (const char *fa = getenv("VOLT_CUDASIM_NCCL_FAIL_AT")) {
        char *end = nullptr;
        fail_at = strtol(fa, &end, 10);
        if (!*fa || *end || fail_at < 1)
            return fail(ncclInvalidArgument, "cudasim NCCL: VOLT_CUDASIM_NCCL_FAIL_AT='%s' is not a collective number >= 1", fa);
    }
    char seg[64] = "";
    if (nranks > 1 && !ncclsim::id_name(commId, seg, sizeof seg))
        return fail(ncclInvalidArgument, "%s : cudasim NCCL: the unique id was not made by ncclGetUniqueId (NCCL could "
                    "not bootstrap from it)", op);
    if (nranks == 1) {
        std::lock_guard<std::mutex> lk(g_reg_mu);
        bool known = false;
        for (const ncclUniqueId &id : g_ids) known = known || !memcmp(&id, &commId, sizeof id);
        if (!known)
            return fail(ncclInvalidArgument, "%s : cudasim NCCL: the unique id was not made by ncclGetUniqueId in this "
                        "process (NCCL could not bootstrap from it)", op);
    }
    ncclComm *c = new ncclComm();
    c->st = new State();
    c->blocking = blocking == 1;
    c->fail_at = fail_at;
    c->nranks = nranks;
    c->rank = rank;
    if (nranks > 1) {
        c->st->multi = true;
        ncclsim::Link &l = c->st->link;
        snprintf(l.name, sizeof l.name, "%s", seg);
        l.rank = rank;
        l.nranks = nranks;
        if (blocking == 1) {   /* NCCL's blocking init waits for every rank (a dead peer fails it) */
            char msg[768];
            ncclResult_t rc;
            while ((rc = ncclsim::link_step(&l, msg, sizeof msg)) == ncclInProgress)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            if (rc != ncclSuccess) {
                fail(rc, "%s : %s", op, msg);
                state_release(c->st);
                delete c;
                return rc;
            }
        }
    }
    snprintf(c->name, sizeof c->name, "%s", cf->size > offsetof(ncclConfig_t, commName) && cf->commName ? cf->commName : "");
    c->pending = PEND_NONE;
    c->async = ncclSuccess;
    if (!c->blocking) {
        c->pending = PEND_INIT;
        c->polls_left = 2;
        c->async = ncclInProgress;
    }
    {
        std::lock_guard<std::mutex> lk(g_reg_mu);
        g_live.insert(c);
        g_dead.erase(c);
    }
    *comm = c;
    return c->blocking ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
    ncclResult_t rc = comm_check(comm, "ncclGetAsyncError");
    if (rc != ncclSuccess) return rc;
    if (!asyncError) return fail(ncclInvalidArgument, "ncclGetAsyncError : asyncError argument is NULL");
    *asyncError = poll_async(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    ncclResult_t rc = comm_check(comm, "ncclCommFinalize");
    if (rc != ncclSuccess) return rc;
    if ((rc = ensure_ready(comm, "ncclCommFinalize")) != ncclSuccess) return rc;
    if (comm->finalized) return fail(ncclInvalidArgument, "ncclCommFinalize : the communicator was already finalized");
    graphs_gone(comm->st, "ncclCommFinalize");
    comm->finalized = true;
    if (comm->blocking) {
        wait_idle(comm->st);
        return ncclSuccess;
    }
    comm->pending = PEND_FINALIZE;
    comm->polls_left = 1;
    comm->async = ncclInProgress;
    return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    ncclResult_t rc = comm_check(comm, "ncclCommDestroy");
    if (rc != ncclSuccess) return rc;
    if (!comm->blocking && poll_async(comm) == ncclInProgress)
        return fail(ncclInvalidArgument, "ncclCommDestroy : Attempt to use communicator before the previous operation "
                    "returned ncclSuccess (cudasim NCCL: poll ncclCommGetAsyncError until it is not ncclInProgress)");
    graphs_gone(comm->st, "ncclCommDestroy");
    wait_idle(comm->st);   /* NCCL synchronises the comm's work before it frees (commDestroySync) */
    free_comm(comm, "destroyed by ncclCommDestroy");
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    ncclResult_t rc = comm_check(comm, "ncclCommAbort");
    if (rc != ncclSuccess) return rc;
    comm->st->aborted.store(true, std::memory_order_release);   /* queued host functions become no-ops */
    if (comm->st->multi) ncclsim::link_abort(&comm->st->link);  /* peers waiting for this rank fail; no name left */
    graphs_gone(comm->st, "ncclCommAbort");   /* after the mark: a held launch returns and completes */
    free_comm(comm, "aborted by ncclCommAbort");
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t code) {
    switch (code) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm;   /* unused, as in NCCL */
    return g_last_err;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    return collective(C_ALLREDUCE, "AllReduce", sendbuff, recvbuff, count, datatype, (int)op, 0, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return collective(C_REDUCESCATTER, "ReduceScatter", sendbuff, recvbuff, recvcount, datatype, (int)op, 0, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    return collective(C_ALLGATHER, "AllGather", sendbuff, recvbuff, sendcount, datatype, 0, 0, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    return collective(C_BROADCAST, "Broadcast", sendbuff, recvbuff, count, datatype, 0, root, comm, stream);
}

}  // extern "C"
