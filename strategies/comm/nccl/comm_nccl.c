/* NCCL comm backend (docs/NCCL.md): collectives over GPU buffers of the cuda device the comm
 * is made for, one GPU per rank.
 *
 * Streams: every collective runs on the comm's own stream (cudaStreamNonBlocking). A start
 * records an event on the device's compute stream and makes the comm stream wait on it, so
 * the collective sees everything issued before it (backward's grads, a memset); it then
 * records `done` on the comm stream. wait polls `done` (cudaEventQuery) and the comm's
 * asynchronous error (ncclCommGetAsyncError) until the comm's deadline, and on success makes
 * the compute stream wait on `done`, so the work issued after wait reads the result (the
 * host knows it is complete too). At the deadline the communicator is aborted
 * (ncclCommAbort: the kernels still queued exit instead of waiting for peers) and wait
 * returns VOLT_ERR_TIMEOUT with the MPI backend's message ("rank 1: all_reduce #12 (unit
 * 'fc1') timed out after 3 s ..."); the comm is broken from then on (every later call fails
 * at once repeating the cause).
 *
 * Captured (compile, docs/NCCL.md "compile"): a collective started while the compute stream
 * is being captured into a CUDA graph becomes part of the graph; its wait only makes the
 * compute stream wait on `done` (no host poll can see a graph's work before it is launched)
 * and host buffers are refused. The trainer bounds each launch of such a graph with drain:
 * an event on the compute stream polled, with the async error, until the deadline.
 *
 * Host buffers: the strategies also pass small host buffers (metric sync, the grad norm, stop
 * flags, gather_unit's host destination). A buffer that is not device memory
 * (cudaPointerGetAttributes) goes through a pinned + device scratch pair kept by the comm
 * (grown, never shrunk: no allocation in steady state); one such collective may be in flight
 * at a time. The control collectives among them (f64 all-reduces and byte broadcasts from and
 * to host memory, up to VOLT__ENV_MAX bytes) carry comm.h's envelope in the scratch, as the
 * mpi backend's do, so ranks in different calls get an error saying so instead of each
 * other's bytes (the communicator is then aborted). Device buffers (gradients, parameters)
 * travel bare.
 *
 * Start-up: rank/world from the MPI communicator the comm is built on (volt_comm_config.
 * mpi_comm, else MPI_COMM_WORLD; no MPI call at all outside an MPI job when none is given, or
 * in a build without MPI: a world of 1), rank 0 of it makes the unique id and broadcasts it
 * over that same communicator with the deadline, then a non-blocking ncclCommInitRankConfig
 * (blocking = 0) is polled with the same deadline.
 *
 * NCCL itself is loaded at the first create (nccl_lib.c: dlopen, like cuBLASLt); a binary runs
 * without NCCL and fails with an error naming the library only when a comm is asked for. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "strategies/comm/comm.h"
#include "strategies/comm/nccl/nccl_lib.h"
#include "core/cuda/cuda.h"
#include "core/err.h"
#include "core/clock.h"

/* ---- state ------------------------------------------------------------------------------------ */
typedef struct nccl_req {
    cudaEvent_t done;            /* recorded on the comm stream after the collective (and its staging copy) */
    const char *op;
    uint64_t seq;
    char what[96];
    void *host_out;              /* host destination: copied from the pinned scratch on completion */
    const void *pinned_out;
    size_t out_bytes;
    volt__comm_env env;          /* a control collective's envelope, in front of its data in the scratch */
    bool avg;                    /* enveloped AVG: run as a sum (the envelope's), divided on completion */
    bool uses_scratch, completed;
    bool captured;               /* part of a graph being captured: waited for on the device only */
    struct nccl_req *next, *all_next;
} nccl_req;

typedef struct nccl_impl {
    ncclComm_t comm;             /* NULL once aborted / destroyed */
    volt_device *dev;
    volt_cuda_ctx *cx;           /* the device's context: its compute stream */
    cudaStream_t stream;         /* the comm stream */
    cudaEvent_t ready;           /* recorded on the compute stream at each start */
    void *dscratch, *pscratch;   /* device / pinned host scratch for host buffers, scratch_bytes each */
    size_t scratch_bytes;
    bool scratch_busy;
    float *dbar;                 /* device float: the barrier's all-reduce */
    bool broken;
    volt_status broken_status;
    char broken_msg[384];
    uint64_t seq;
    nccl_req *free_list, *all;
    int in_flight;
    bool captured_any;           /* a collective went into a CUDA graph: an abort releases the graphs first */
    const volt_comm *self;       /* the comm this is the impl of: its graph owners (comm.h) */
    char errmsg[768];
    int *world_of;               /* member i's rank in MPI_COMM_WORLD (leave notices); NULL: the world */
} nccl_impl;

#define cerr(c, st, ...) VOLT__OBJ_ERRF((nccl_impl *)(c)->impl, st, __VA_ARGS__)

static const volt_nccl_lib *g_nc;   /* the loaded library (nccl_lib.c), set by the first create */

static void mark_broken(nccl_impl *im, volt_status st) {
    if (im->broken) return;
    im->broken = true;
    im->broken_status = st;
    snprintf(im->broken_msg, sizeof im->broken_msg, "%.*s", (int)sizeof im->broken_msg - 1, im->errmsg);
}

/* The communicator can no longer be trusted: abort it (pending kernels exit). NCCL >= 2.26
 * aborts only once the graphs that captured its collectives are destroyed, so their owners
 * destroy them first (comm.h, volt__comm_release_graphs): kept, the abort waited forever.
 * While the compute stream is being captured, the open capture holds such references too and
 * only its caller can end it: the comm stays broken (every later call fails at once) and is
 * aborted at destroy (n_destroy), after the capture was dropped. */
static void abort_comm(nccl_impl *im) {
    if (!im->comm) return;
    if (im->captured_any) {
        enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        volt__cuda_use(im->cx);
        if (cudaStreamIsCapturing(im->cx->stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) return;
        volt__comm_release_graphs(im->self);
    }
    g_nc->ncclCommAbort(im->comm);
    im->comm = NULL;
}

static volt_status nccl_fail(volt_comm *c, ncclResult_t rc, const char *file, int line, const char *call, const char *what) {
    nccl_impl *im = c->impl;
    const char *last = im->comm ? g_nc->ncclGetLastError(im->comm) : NULL;
    return cerr(c, VOLT_ERR_COMM, "rank %d: %s:%d: %s%s%s%s failed: %s%s%s", c->rank, file, line, call,
                what && *what ? " (" : "", what && *what ? what : "", what && *what ? ")" : "", g_nc->ncclGetErrorString(rc),
                last && *last ? ": " : "", last && *last ? last : "");
}
static volt_status cuda_fail(volt_comm *c, cudaError_t e, const char *file, int line, const char *call, const char *what) {
    cudaGetLastError();
    return cerr(c, VOLT_ERR_COMM, "rank %d: %s:%d: %s%s%s%s failed: CUDA error %s: %s", c->rank, file, line, call,
                what && *what ? " (" : "", what && *what ? what : "", what && *what ? ")" : "", cudaGetErrorName(e),
                cudaGetErrorString(e));
}
#define CU_FAIL(c, e, call, what) cuda_fail((c), (e), __FILE__, __LINE__, (call), (what))

static ncclDataType_t nccl_type(volt_comm_dtype dt) {
    switch (dt) {
    case VOLT_COMM_F32: return ncclFloat32;
    case VOLT_COMM_F64: return ncclFloat64;
    case VOLT_COMM_BYTE: return ncclUint8;
    case VOLT_COMM_BF16: return ncclBfloat16;
    case VOLT_COMM_F16: return ncclFloat16;
    }
    return ncclNumTypes;
}

/* Device memory NCCL can take (device or managed); anything else is staged. */
static bool is_device_ptr(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) { cudaGetLastError(); return false; }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* ---- requests ------------------------------------------------------------------------------------ */
static void req_release(volt_comm *c, nccl_req *q);

static volt_status req_start(volt_comm *c, const char *op, const char *what, volt_comm_dtype dt, nccl_req **out) {
    nccl_impl *im = c->impl;
    *out = NULL;
    if (im->broken)
        return cerr(c, im->broken_status, "rank %d: %s (%s): not started, the communicator is unusable after: %s",
                    c->rank, op, what ? what : "-", im->broken_msg);
    if (nccl_type(dt) == ncclNumTypes) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: %s: bad dtype %d", c->rank, op, (int)dt);
    nccl_req *q = im->free_list;
    if (q) im->free_list = q->next;
    else {
        if (!(q = calloc(1, sizeof *q))) return VOLT_ERR_NOMEM;
        volt__cuda_use(im->cx);
        cudaError_t e = cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming);
        if (e != cudaSuccess) { free(q); return CU_FAIL(c, e, "cudaEventCreateWithFlags", what); }
        q->all_next = im->all;
        im->all = q;
    }
    q->op = op;
    q->seq = ++im->seq;
    q->host_out = NULL;
    q->pinned_out = NULL;
    q->out_bytes = 0;
    q->env.kind = VOLT__ENV_NONE;
    q->avg = false;
    q->uses_scratch = q->completed = false;
    q->next = NULL;
    volt__cuda_use(im->cx);
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t ce = cudaStreamIsCapturing(im->cx->stream, &cs);
    if (ce != cudaSuccess) {
        req_release(c, q);
        return CU_FAIL(c, ce, "cudaStreamIsCapturing", what);
    }
    q->captured = cs != cudaStreamCaptureStatusNone;
    if (q->captured) im->captured_any = true;
    snprintf(q->what, sizeof q->what, "%s", what && *what ? what : "-");
    *out = q;
    return VOLT_OK;
}

static void req_release(volt_comm *c, nccl_req *q) {
    nccl_impl *im = c->impl;
    if (q->uses_scratch) im->scratch_busy = false;
    q->next = im->free_list;
    im->free_list = q;
}

static volt_status start_failed(volt_comm *c, nccl_req *q, volt_status st) {
    req_release(c, q);
    return st;
}

/* Room for in + out bytes of host data in the scratch pair (grown, never per call in steady state). */
static volt_status scratch_reserve(volt_comm *c, size_t bytes, const char *what) {
    nccl_impl *im = c->impl;
    if (im->scratch_busy)
        return cerr(c, VOLT_ERR_STATE, "rank %d: %s: a collective on host buffers is already in flight (one at a time)",
                    c->rank, what);
    if (bytes <= im->scratch_bytes) return VOLT_OK;
    size_t n = im->scratch_bytes ? im->scratch_bytes : 4096;
    while (n < bytes) n *= 2;
    volt__cuda_use(im->cx);
    cudaError_t e = cudaStreamSynchronize(im->stream);   /* the old scratch may still be read */
    if (e == cudaSuccess && im->dscratch) e = cudaFree(im->dscratch);
    if (e == cudaSuccess && im->pscratch) e = cudaFreeHost(im->pscratch);
    im->dscratch = im->pscratch = NULL;
    im->scratch_bytes = 0;
    if (e == cudaSuccess) e = cudaMalloc(&im->dscratch, n);
    if (e == cudaSuccess) e = cudaMallocHost(&im->pscratch, n);
    if (e != cudaSuccess) return CU_FAIL(c, e, "scratch for host buffers", what);
    im->scratch_bytes = n;
    return VOLT_OK;
}

/* The buffers the collective really uses: device pointers as they are; host ones through
 * the scratch (send copied in on the comm stream, recv copied out at completion). env: the
 * envelope's kind for this collective (comm.h); it is carried when send and recv are both host
 * memory (q->env.kind then set: the collective runs over VOLT__ENV_BYTES more in front of
 * b->send and b->recv). */
typedef struct { const void *send; void *recv; } bufs;
static volt_status prepare(volt_comm *c, nccl_req *q, const void *send, size_t send_bytes, void *recv, size_t recv_bytes,
                           int env, int root, bufs *b) {
    nccl_impl *im = c->impl;
    b->send = send;
    b->recv = recv;
    const bool hs = send_bytes && !is_device_ptr(send), hr = recv_bytes && !is_device_ptr(recv);
    if (!hs && !hr) return VOLT_OK;
    if (q->captured)
        return cerr(c, VOLT_ERR_UNSUPPORTED, "rank %d: %s (%s): a collective on host memory cannot be part of a captured "
                    "step (its result is read on the host)", c->rank, q->op, q->what);
    const size_t h = env && hs && hr ? VOLT__ENV_BYTES : 0;
    volt_status rs = scratch_reserve(c, send_bytes + recv_bytes + 2 * h, q->what);
    if (rs < 0) {
        if (h) mark_broken(im, rs);   /* this rank counted a collective the others run: out of step from here on */
        return rs;
    }
    im->scratch_busy = q->uses_scratch = true;
    /* scratch: [envelope | send | envelope | recv]; out of place on the device whatever the
     * host aliasing (the send bytes are copied in first) */
    char *d = im->dscratch, *p = im->pscratch;
    if (h) volt__comm_env_set(&q->env, env, c, q->seq, q->what, root, send_bytes, p);
    const size_t off = hs ? h + send_bytes : 0;
    if (hs) {
        memcpy(p + h, send, send_bytes);
        cudaError_t e = cudaMemcpyAsync(d, p, h + send_bytes, cudaMemcpyHostToDevice, im->stream);
        if (e != cudaSuccess) return CU_FAIL(c, e, "cudaMemcpyAsync", q->what);
        b->send = d;
    }
    if (hr) {
        b->recv = d + off;
        q->host_out = recv;
        q->out_bytes = recv_bytes;
        q->pinned_out = p + off + h;
    }
    return VOLT_OK;
}

/* The comm stream waits for the compute stream's work so far. */
static volt_status order_after_compute(volt_comm *c, const char *what) {
    nccl_impl *im = c->impl;
    volt__cuda_use(im->cx);
    cudaError_t e = cudaEventRecord(im->ready, im->cx->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(im->stream, im->ready, 0);
    return e == cudaSuccess ? VOLT_OK : CU_FAIL(c, e, "ordering after the compute stream", what);
}

/* After the NCCL call: copy a staged result out to pinned memory, record done. ncclInProgress
 * from an enqueue on a non-blocking comm means "queued in the background": accepted (wait
 * polls the async error). */
static volt_status launched(volt_comm *c, nccl_req *q, ncclResult_t rc, const char *call, volt_comm_req **req) {
    nccl_impl *im = c->impl;
    if (rc != ncclSuccess && rc != ncclInProgress) {
        volt_status st = nccl_fail(c, rc, __FILE__, __LINE__, call, q->what);
        mark_broken(im, st);
        return start_failed(c, q, st);
    }
    if (rc == ncclInProgress) {   /* still being enqueued: done may be recorded only behind it */
        const double t0 = volt__now();
        ncclResult_t ae = ncclInProgress;
        while (g_nc->ncclCommGetAsyncError(im->comm, &ae) == ncclSuccess && ae == ncclInProgress && volt__now() - t0 <= c->timeout_s) {
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
        }
        if (ae != ncclSuccess) {
            volt_status st = ae == ncclInProgress
                ? cerr(c, VOLT_ERR_TIMEOUT, "rank %d: %s #%llu (%s): enqueue timed out after %g s; NCCL communicator aborted",
                       c->rank, q->op, (unsigned long long)q->seq, q->what, c->timeout_s)
                : nccl_fail(c, ae, __FILE__, __LINE__, call, q->what);
            mark_broken(im, st);
            abort_comm(im);
            return start_failed(c, q, st);
        }
    }
    cudaError_t e = cudaSuccess;
    if (q->host_out) {   /* an envelope comes back with the data */
        const size_t h = q->env.kind ? VOLT__ENV_BYTES : 0;
        char *pin = (char *)q->pinned_out - h;
        e = cudaMemcpyAsync(pin, (char *)im->dscratch + (pin - (char *)im->pscratch), q->out_bytes + h, cudaMemcpyDeviceToHost,
                            im->stream);
    }
    if (e == cudaSuccess) e = cudaEventRecord(q->done, im->stream);
    if (e != cudaSuccess) {
        volt_status st = CU_FAIL(c, e, "cudaEventRecord", q->what);
        mark_broken(im, st);
        return start_failed(c, q, st);
    }
    im->in_flight++;
    *req = (volt_comm_req *)q;
    return VOLT_OK;
}

#define START(c, dt, op, what, q) \
    nccl_req *q = NULL; \
    VOLT_TRY(req_start((c), (op), (what), (dt), &q)); \
    { volt_status s_ = order_after_compute((c), q->what); if (s_ < 0) return start_failed((c), q, s_); }

/* ---- collectives ---------------------------------------------------------------------------------- */
static volt_status n_all_reduce(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                volt_comm_op op, const char *what, volt_comm_req **req) {
    *req = NULL;
    if (dt == VOLT_COMM_BYTE) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: all_reduce: byte buffers cannot be reduced", c->rank);
    START(c, dt, "all_reduce", what, q);
    nccl_impl *im = c->impl;
    const size_t es = volt__comm_dtype_size(dt), bytes = count * es;
    bufs b;
    volt_status st = prepare(c, q, send, bytes, recv, bytes, volt__comm_env_kind(false, dt, count), 0, &b);
    if (st < 0) return start_failed(c, q, st);
    q->avg = q->env.kind && op == VOLT_COMM_AVG;   /* the envelope's hashes are summed */
    ncclResult_t rc = g_nc->ncclAllReduce(b.send, b.recv, count + (q->env.kind ? VOLT__ENV_BYTES / es : 0), nccl_type(dt),
                                         op == VOLT_COMM_AVG && !q->avg ? ncclAvg : ncclSum, im->comm, im->stream);
    return launched(c, q, rc, "ncclAllReduce", req);
}

static volt_status n_reduce_scatter(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                    volt_comm_op op, const char *what, volt_comm_req **req) {
    *req = NULL;
    if (dt == VOLT_COMM_BYTE) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: reduce_scatter: byte buffers cannot be reduced", c->rank);
    START(c, dt, "reduce_scatter", what, q);
    nccl_impl *im = c->impl;
    const size_t es = volt__comm_dtype_size(dt);
    bufs b;
    volt_status st = prepare(c, q, send, count * es * (size_t)c->world, recv, count * es, VOLT__ENV_NONE, 0, &b);
    if (st < 0) return start_failed(c, q, st);
    ncclResult_t rc = g_nc->ncclReduceScatter(b.send, b.recv, count, nccl_type(dt), op == VOLT_COMM_AVG ? ncclAvg : ncclSum,
                                             im->comm, im->stream);
    return launched(c, q, rc, "ncclReduceScatter", req);
}

static volt_status n_all_gather(volt_comm *c, const void *send, void *recv, size_t count, volt_comm_dtype dt,
                                const char *what, volt_comm_req **req) {
    *req = NULL;
    START(c, dt, "all_gather", what, q);
    nccl_impl *im = c->impl;
    const size_t es = volt__comm_dtype_size(dt);
    bufs b;
    volt_status st = prepare(c, q, send, count * es, recv, count * es * (size_t)c->world, VOLT__ENV_NONE, 0, &b);
    if (st < 0) return start_failed(c, q, st);
    ncclResult_t rc = g_nc->ncclAllGather(b.send, b.recv, count, nccl_type(dt), im->comm, im->stream);
    return launched(c, q, rc, "ncclAllGather", req);
}

static volt_status n_broadcast(volt_comm *c, void *buf, size_t count, volt_comm_dtype dt, int root, const char *what,
                               volt_comm_req **req) {
    *req = NULL;
    if (root < 0 || root >= c->world) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: broadcast: root %d not in [0, %d)", c->rank, root, c->world);
    START(c, dt, "broadcast", what, q);
    nccl_impl *im = c->impl;
    const size_t es = volt__comm_dtype_size(dt), bytes = count * es;
    bufs b;   /* a host buffer comes back into itself */
    volt_status st = prepare(c, q, buf, bytes, buf, bytes, volt__comm_env_kind(true, dt, count), root, &b);
    if (st < 0) return start_failed(c, q, st);
    ncclResult_t rc = g_nc->ncclBroadcast(b.send, b.recv, count + (q->env.kind ? VOLT__ENV_BYTES / es : 0), nccl_type(dt), root,
                                         im->comm, im->stream);
    return launched(c, q, rc, "ncclBroadcast", req);
}

static volt_status n_barrier(volt_comm *c, const char *what, volt_comm_req **req) {
    *req = NULL;
    START(c, VOLT_COMM_F32, "barrier", what, q);
    nccl_impl *im = c->impl;
    ncclResult_t rc = g_nc->ncclAllReduce(im->dbar, im->dbar, 1, ncclFloat32, ncclSum, im->comm, im->stream);
    return launched(c, q, rc, "ncclAllReduce", req);
}

/* ---- completion ------------------------------------------------------------------------------------ */
/* One look: *done when the event has fired; an error of the event or of the comm => failure. */
static volt_status poll_once(volt_comm *c, nccl_req *q, bool *done) {
    nccl_impl *im = c->impl;
    *done = q->completed;
    if (q->completed || q->captured) return VOLT_OK;   /* a graph's: nothing to see before its launch */
    volt__cuda_use(im->cx);
    cudaError_t e = cudaEventQuery(q->done);
    if (e == cudaSuccess) { q->completed = *done = true; return VOLT_OK; }
    if (e != cudaErrorNotReady) return CU_FAIL(c, e, q->op, q->what);
    ncclResult_t ae = ncclSuccess;
    ncclResult_t rc = g_nc->ncclCommGetAsyncError(im->comm, &ae);
    if (rc != ncclSuccess) return nccl_fail(c, rc, __FILE__, __LINE__, "ncclCommGetAsyncError", q->what);
    if (ae != ncclSuccess && ae != ncclInProgress) return nccl_fail(c, ae, __FILE__, __LINE__, q->op, q->what);
    return VOLT_OK;
}

static volt_status n_test(volt_comm *c, volt_comm_req *req, bool *done) {
    nccl_req *q = (nccl_req *)req;
    *done = false;
    if (!q) return VOLT_ERR_INVALID_ARG;
    nccl_impl *im = c->impl;
    if (im->broken) return im->broken_status;
    volt_status st = poll_once(c, q, done);
    if (st < 0) { mark_broken(im, st); abort_comm(im); }
    return st;
}

static volt_status n_wait(volt_comm *c, volt_comm_req *req) {
    nccl_impl *im = c->impl;
    nccl_req *q = (nccl_req *)req;
    if (!q) return cerr(c, VOLT_ERR_INVALID_ARG, "rank %d: wait on a NULL request", c->rank);
    im->in_flight--;
    if (im->broken && !q->completed) {
        req_release(c, q);
        return cerr(c, im->broken_status, "rank %d: %s #%llu (%s): abandoned, the communicator is unusable after: %s",
                    c->rank, q->op, (unsigned long long)q->seq, q->what, im->broken_msg);
    }
    const double t0 = volt__now();
    long spins = 0, sleep_ns = 1000, polls = 0;
    double left_at = -1;   /* when a member was first seen gone (its leave notice, comm.h) */
    while (!q->captured) {   /* a captured collective has nothing to poll: the launch is drained */
        bool done = false;
        volt_status st = poll_once(c, q, &done);
        if (st < 0) {
            mark_broken(im, st);
            abort_comm(im);
            req_release(c, q);
            return st;
        }
        if (done) break;
#ifdef VOLT_HAVE_MPI
        char words[VOLT__LEAVE_MSG];
        int who;
        if (c->world > 1 && (polls++ & 63) == 0 &&   /* a member left the job (its leave notice, comm.h) */
            (who = volt__comm_left_expired(c, im->world_of, &left_at, words, sizeof words)) >= 0) {
            cerr(c, VOLT_ERR_COMM, "rank %d: %s #%llu (%s): rank %d left the job%s%s%s, and this collective cannot "
                 "complete; NCCL communicator aborted", c->rank, q->op, (unsigned long long)q->seq, q->what, who,
                 words[0] ? " after an error (" : "", words, words[0] ? ")" : "");
            mark_broken(im, VOLT_ERR_COMM);
            abort_comm(im);
            q->uses_scratch = false;   /* as after a timeout: a queued copy may still write it */
            req_release(c, q);
            return VOLT_ERR_COMM;
        }
#else
        (void)polls;
        (void)left_at;
#endif
        if (volt__now() - t0 > c->timeout_s) {
            cerr(c, VOLT_ERR_TIMEOUT, "rank %d: %s #%llu (%s) timed out after %g s (a rank died, hangs, or issued "
                 "its collectives in another order; VOLT_COMM_TIMEOUT sets the limit); NCCL communicator aborted",
                 c->rank, q->op, (unsigned long long)q->seq, q->what, c->timeout_s);
            mark_broken(im, VOLT_ERR_TIMEOUT);
            abort_comm(im);
            /* the scratch may still be written by a queued copy: leave it marked busy for good */
            q->uses_scratch = false;
            req_release(c, q);
            return VOLT_ERR_TIMEOUT;
        }
        if (++spins > 256) {
            struct timespec ts = { 0, sleep_ns };
            nanosleep(&ts, NULL);
            if (sleep_ns < 200000) sleep_ns *= 2;
        }
    }
    volt__cuda_use(im->cx);
    cudaError_t e = cudaStreamWaitEvent(im->cx->stream, q->done, 0);   /* later compute reads the result */
    char msg[512];
    if (q->env.kind && volt__comm_env_check(&q->env, c, (const char *)q->pinned_out - VOLT__ENV_BYTES, q->op, q->seq, q->what,
                                            q->out_bytes, msg, sizeof msg) < 0) {
        cerr(c, VOLT_ERR_COMM, "%s; NCCL communicator aborted", msg);   /* out of step: no later collective may match either */
        mark_broken(im, VOLT_ERR_COMM);
        abort_comm(im);
        req_release(c, q);
        return VOLT_ERR_COMM;
    }
    if (q->host_out) memcpy(q->host_out, q->pinned_out, q->out_bytes);
    if (q->avg)
        for (size_t i = 0; i < q->out_bytes / sizeof(double); i++) ((double *)q->host_out)[i] /= (double)c->world;
    req_release(c, q);
    if (e != cudaSuccess) return CU_FAIL(c, e, "cudaStreamWaitEvent", NULL);
    return VOLT_OK;
}

/* The compute stream's work so far, awaited like a collective: `done` recorded on the compute
 * stream, then wait's deadline, async-error polls and abort. */
static volt_status n_drain(volt_comm *c, const char *what) {
    nccl_impl *im = c->impl;
    nccl_req *q = NULL;
    VOLT_TRY(req_start(c, "device work", what, VOLT_COMM_F32, &q));
    im->seq--;   /* local: no collective number (an envelope compares them across ranks) */
    if (q->captured) {
        req_release(c, q);
        return cerr(c, VOLT_ERR_STATE, "rank %d: drain (%s) while the compute stream is being captured", c->rank, q->what);
    }
    cudaError_t e = cudaEventRecord(q->done, im->cx->stream);
    if (e != cudaSuccess) {
        req_release(c, q);
        return CU_FAIL(c, e, "cudaEventRecord", what);
    }
    im->in_flight++;
    return n_wait(c, (volt_comm_req *)q);
}

static const char *n_errmsg(const volt_comm *c) { return ((const nccl_impl *)c->impl)->errmsg; }

static void n_destroy(volt_comm *c) {
    nccl_impl *im = c->impl;
    if (im->comm && !im->broken && !im->in_flight) {
        /* finalize (non-blocking: polled, bounded by the timeout), then destroy */
        ncclResult_t rc = g_nc->ncclCommFinalize(im->comm), ae = rc;
        const double t0 = volt__now();
        while (rc == ncclSuccess || rc == ncclInProgress) {
            if (g_nc->ncclCommGetAsyncError(im->comm, &ae) != ncclSuccess || ae != ncclInProgress) break;
            if (volt__now() - t0 > c->timeout_s) { ae = ncclInProgress; break; }
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
        if (ae == ncclSuccess) g_nc->ncclCommDestroy(im->comm);
        else g_nc->ncclCommAbort(im->comm);
        im->comm = NULL;
    } else abort_comm(im);
    volt__cuda_use(im->cx);
    if (!im->broken && im->stream) cudaStreamSynchronize(im->stream);
    for (nccl_req *q = im->all, *n; q; q = n) {
        n = q->all_next;
        if (q->done) cudaEventDestroy(q->done);
        free(q);
    }
    if (!im->broken) {   /* after a timeout a queued copy may still target the scratch: left to the process */
        if (im->dscratch) cudaFree(im->dscratch);
        if (im->pscratch) cudaFreeHost(im->pscratch);
        if (im->dbar) cudaFree(im->dbar);
        if (im->stream) cudaStreamDestroy(im->stream);
    }
    if (im->ready) cudaEventDestroy(im->ready);
    cudaGetLastError();
    free(im->world_of);
    free(im);
    free(c);
}

static const volt_comm_ops nccl_ops = {
    .version = VOLT_COMM_OPS_VERSION, .name = "nccl",
    .all_reduce = n_all_reduce, .reduce_scatter = n_reduce_scatter, .all_gather = n_all_gather,
    .broadcast = n_broadcast, .barrier = n_barrier, .wait = n_wait, .test = n_test,
    .errmsg = n_errmsg, .destroy = n_destroy, .flags = VOLT_COMM_STREAM_ORDERED, .drain = n_drain,
};

/* ---- creation -------------------------------------------------------------------------------------- */
bool volt__comm_nccl_serves(const volt_device *dev) { return dev && !strcmp(dev->be->name, "cuda"); }

static bool in_mpi_job(void) {
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", NULL };
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return true;
    }
    return false;
}

volt_status volt__comm_nccl_create(const volt_comm_config *cfg, volt_comm **out, char *err, size_t errlen) {
    *out = NULL;
    VOLT_TRY(volt__comm_config_check(cfg, err, errlen));
    if (!(g_nc = volt__nccl_lib(err, errlen))) return VOLT_ERR_UNSUPPORTED;   /* first: a missing library is the error */
    volt_device *dev = cfg->version >= 2 ? cfg->dev : NULL;
    if (!volt__comm_nccl_serves(dev)) {
        snprintf(err, errlen, "nccl: needs a cuda device (got %s)", dev ? dev->be->name : "none");
        return VOLT_ERR_UNSUPPORTED;
    }
    int rank = 0, world = 1;
    /* the communicator this comm spans: its ranks, its broadcast of the unique id */
    const void *mcomm = cfg->version >= 3 ? cfg->mpi_comm : NULL;
#ifdef VOLT_HAVE_MPI
    if (mcomm || in_mpi_job()) VOLT_TRY(volt__comm_mpi_world(mcomm, &rank, &world, err, errlen));
#else
    if (mcomm) {
        snprintf(err, errlen, "nccl: an MPI communicator was given (volt_comm_config.mpi_comm), but volt was built without MPI");
        return VOLT_ERR_UNSUPPORTED;
    }
    if (in_mpi_job()) {
        snprintf(err, errlen, "nccl: launched as one of several ranks, but volt was built without MPI, which shares "
                 "NCCL's unique id between them (rebuild with libopenmpi-dev); one process is a world of one");
        return VOLT_ERR_UNSUPPORTED;
    }
#endif
    const int count = dev->be->device_count(), local = volt__comm_local_rank(), per_node = volt__comm_local_size();
    if (per_node > count) {
        snprintf(err, errlen, "nccl: rank %d: %d ranks on this node but %d visible GPU%s (one GPU per rank; "
                 "CUDA_VISIBLE_DEVICES?)", rank, per_node, count, count == 1 ? "" : "s");
        return VOLT_ERR_INVALID_ARG;
    }
    if (count > 0 && dev->ordinal != local % count) {
        snprintf(err, errlen, "nccl: rank %d (local rank %d) was given cuda device %d, expected %d (local rank %% %d GPUs)",
                 rank, local, dev->ordinal, local % count, count);
        return VOLT_ERR_INVALID_ARG;
    }
    volt_comm *c = calloc(1, sizeof *c);
    nccl_impl *im = calloc(1, sizeof *im);
    if (!c || !im) { free(c); free(im); return VOLT_ERR_NOMEM; }
    c->ops = &nccl_ops;
    c->impl = im;
    c->timeout_s = cfg->timeout_s;
    c->rank = rank;
    c->world = world;
    im->dev = dev;
    im->self = c;
    im->cx = volt__cuda_ctx(dev);
    volt__cuda_use(im->cx);
    volt_status st = VOLT_OK;
    cudaError_t e = cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&im->ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMalloc((void **)&im->dbar, sizeof(float));
    if (e == cudaSuccess) e = cudaMemsetAsync(im->dbar, 0, sizeof(float), im->stream);   /* the barrier's stream */
    if (e != cudaSuccess) st = CU_FAIL(c, e, "comm stream / event / barrier buffer", NULL);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (st == VOLT_OK && rank == 0) {
        ncclResult_t rc = g_nc->ncclGetUniqueId(&id);
        if (rc != ncclSuccess) st = nccl_fail(c, rc, __FILE__, __LINE__, "ncclGetUniqueId", NULL);
    }
#ifdef VOLT_HAVE_MPI
    if (world > 1) {   /* every rank takes part, even after a local failure (no rank waits for ever) */
        int ok = st == VOLT_OK;
        char berr[512] = "";
        volt_status bs = volt__comm_mpi_bootstrap_bcast(mcomm, &id, sizeof id, c->timeout_s, berr, sizeof berr);
        if (bs < 0 && ok) st = cerr(c, bs, "%s", berr);
    }
#endif
#ifdef VOLT_HAVE_MPI
    if (st == VOLT_OK && world > 1 && volt__comm_mpi_members(mcomm, world, &im->world_of) < 0)
        st = cerr(c, VOLT_ERR_COMM, "rank %d: the comm's members in MPI_COMM_WORLD (MPI_Group_translate_ranks) failed", rank);
#endif
    if (st == VOLT_OK) {
        ncclConfig_t conf = NCCL_CONFIG_INITIALIZER;
        conf.blocking = 0;
        conf.commName = "volt";
        ncclResult_t rc = g_nc->ncclCommInitRankConfig(&im->comm, world, id, rank, &conf);
        if (rc != ncclSuccess && rc != ncclInProgress) st = nccl_fail(c, rc, __FILE__, __LINE__, "ncclCommInitRankConfig", NULL);
        const double t0 = volt__now();
        ncclResult_t ae = ncclInProgress;
        while (st == VOLT_OK && im->comm) {
            rc = g_nc->ncclCommGetAsyncError(im->comm, &ae);
            if (rc != ncclSuccess) { st = nccl_fail(c, rc, __FILE__, __LINE__, "ncclCommGetAsyncError", "init"); break; }
            if (ae == ncclSuccess) break;
            if (ae != ncclInProgress) { st = nccl_fail(c, ae, __FILE__, __LINE__, "ncclCommInitRankConfig", NULL); break; }
            if (volt__now() - t0 > c->timeout_s) {
                st = cerr(c, VOLT_ERR_TIMEOUT, "rank %d: comm_init #0 (NCCL, %d ranks) timed out after %g s (a rank died, "
                          "hangs, or never created its comm; VOLT_COMM_TIMEOUT sets the limit); NCCL communicator aborted",
                          rank, world, c->timeout_s);
                break;
            }
            struct timespec ts = { 0, 200000 };
            nanosleep(&ts, NULL);
        }
    }
    if (st < 0) {
        snprintf(err, errlen, "%s", im->errmsg);
        abort_comm(im);   /* a half-made communicator is aborted; the rest is freed */
        n_destroy(c);
        return st;
    }
    *out = c;
    return VOLT_OK;
}
