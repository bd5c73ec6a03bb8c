/* tests/cudasim/runtime_api.cc — the CUDA runtime API of libvolt_cudasim.so (runtime.cc's
 * header comment says what it models), on the state and streams of runtime.cc. */
#include <memory>
#include "runtime_internal.h"
#include "cudasim_ext.h"

using namespace cudasim::rt;

/* ---- the runtime API ------------------------------------------------------------------------- */
extern "C" {

#define CUDASIM_ERRORS(X) X(cudaSuccess, "no error") X(cudaErrorInvalidValue, "invalid argument") \
    X(cudaErrorMemoryAllocation, "out of memory") X(cudaErrorInitializationError, "initialization error") \
    X(cudaErrorInvalidConfiguration, "invalid configuration argument") X(cudaErrorInvalidDevice, "invalid device ordinal") \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected") X(cudaErrorInvalidResourceHandle, "invalid resource handle") \
    X(cudaErrorNotReady, "device not ready") X(cudaErrorLaunchFailure, "unspecified launch failure") \
    X(cudaErrorMisalignedAddress, "misaligned address") X(cudaErrorIllegalAddress, "an illegal memory access was encountered") \
    X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing") \
    X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture") \
    X(cudaErrorStreamCaptureUnjoined, "capture was not joined") X(cudaErrorStreamCaptureWrongThread, "wrong thread") \
    X(cudaErrorIllegalState, "the operation is not permitted in the current state") \
    X(cudaErrorSymbolNotFound, "named symbol not found") X(cudaErrorNotSupported, "operation not supported")

const char *cudaGetErrorName(cudaError_t e) {
#define CUDASIM_NAME_(c, s) if (e == c) return #c;
    CUDASIM_ERRORS(CUDASIM_NAME_)
#undef CUDASIM_NAME_
    return "cudaErrorUnknown";
}
const char *cudaGetErrorString(cudaError_t e) {
#define CUDASIM_STR_(c, s) if (e == c) return s;
    CUDASIM_ERRORS(CUDASIM_STR_)
#undef CUDASIM_STR_
    return "unknown error";
}
cudaError_t cudaGetLastError(void) {
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    if (e == cudaSuccess) e = sticky();
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return t_last != cudaSuccess ? t_last : sticky(); }

cudaError_t cudaGetDeviceCount(int *n) {
    init();
    if (!n) return fail(cudaErrorInvalidValue);
    *n = g_devices;
    return g_devices ? cudaSuccess : fail(cudaErrorNoDevice);
}
/* What the backend reads: the name (CUDASIM_NAME, default "cudasim": in no peak-FLOP/s table),
 * an H100/H200's compute capability and SM count, the simulated capacity. */
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d) {
    init();
    if (!prop) return fail(cudaErrorInvalidValue);
    if (d < 0 || d >= g_devices) return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    const char *nm = getenv("CUDASIM_NAME");
    snprintf(prop->name, sizeof prop->name, "%s", nm && *nm ? nm : "cudasim");
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 132;
    prop->totalGlobalMem = g_capacity;
    prop->sharedMemPerBlockOptin = (size_t)g_max_dyn_smem;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
    init();
    if (d < 0 || d >= g_devices) return fail(cudaErrorInvalidDevice);
    t_device = d;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
    if (!d) return fail(cudaErrorInvalidValue);
    *d = t_device;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    init();
    if (unsafe_during_capture("cudaDeviceSynchronize")) return fail(cudaErrorStreamCaptureUnsupported);
    std::vector<CUstream_st *> all;
    {
        std::lock_guard<std::mutex> l(g_mu);
        all = *g_streams;
    }
    for (CUstream_st *s : all) wait_idle(s);
    return fail(sticky());
}
cudaError_t cudaMemGetInfo(size_t *fr, size_t *total) {
    init();
    std::lock_guard<std::mutex> l(g_mu);
    if (fr) *fr = g_capacity - g_used;
    if (total) *total = g_capacity;
    return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    init();
    if (!func) return fail(cudaErrorInvalidValue);   /* cudaErrorInvalidDeviceFunction on a GPU */
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || value > 227 * 1024) return fail(cudaErrorInvalidValue);
        std::lock_guard<std::mutex> l(g_mu);
        if (value > g_max_dyn_smem) g_max_dyn_smem = value;
    }
    return cudaSuccess;
}

/* memory */
cudaError_t cudaMalloc(void **p, size_t n) {
    if (unsafe_during_capture("cudaMalloc")) return fail(cudaErrorStreamCaptureUnsupported);
    if (cudaError_t st = sticky()) return fail(st);
    return do_alloc(p, n, true);
}
cudaError_t cudaFree(void *p) {
    if (unsafe_during_capture("cudaFree")) return fail(cudaErrorStreamCaptureUnsupported);
    if (p) cudaDeviceSynchronize();   /* cudaFree synchronizes */
    return do_free(p, true);
}
cudaError_t cudaMallocHost(void **p, size_t n) { return do_alloc(p, n, false); }
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags) {
    (void)flags;
    return do_alloc(p, n, false);
}
cudaError_t cudaFreeHost(void *p) { return do_free(p, false); }
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
    CUstream_st *st = resolve(s);
    if (capturing(st)) {
        diag("cudaMallocAsync during capture: graph memory nodes are not modelled by the simulator");
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    if (cudaError_t e = sticky()) return fail(e);
    const cudaError_t e = do_alloc(p, n, true);
    if (e == cudaSuccess) {   /* the default pool's accounting, in 256-byte units as do_alloc's */
        std::lock_guard<std::mutex> l(g_mu);
        (*g_allocs)[(uintptr_t)*p].pool = true;
        const size_t sz = (n + 255) & ~(size_t)255;
        if ((g_pool_used += sz ? sz : 256) > g_pool_high) g_pool_high = g_pool_used;
    }
    return e;
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    CUstream_st *st = resolve(s);
    if (!p) return cudaSuccess;
    if (capturing(st)) {
        diag("cudaFreeAsync during capture: graph memory nodes are not modelled by the simulator");
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    {
        std::lock_guard<std::mutex> l(g_mu);
        auto it = g_allocs->find((uintptr_t)p);
        if (it == g_allocs->end() || !it->second.device) {
            diag("cudaFreeAsync(%p): not a device allocation", p);
            return fail(cudaErrorInvalidValue);
        }
    }
    return fail(issue(st, [p] { do_free(p, true); }));
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int d) {
    init();
    if (!pool || d < 0 || d >= g_devices) return fail(cudaErrorInvalidValue);
    *pool = &g_pool;
    return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value) {
    if (pool != &g_pool || !value) return fail(cudaErrorInvalidValue);
    if (attr == cudaMemPoolAttrUsedMemHigh || attr == cudaMemPoolAttrReservedMemHigh) {
        if (*(uint64_t *)value != 0) {   /* the runtime takes only 0: "reset to the current use" */
            diag("cudaMemPoolSetAttribute: a high-water attribute can only be reset to 0");
            return fail(cudaErrorInvalidValue);
        }
        std::lock_guard<std::mutex> l(g_mu);
        g_pool_high = g_pool_used;
    }
    return cudaSuccess;
}
/* Used bytes (current and high-water); the simulated pool keeps nothing, so reserved = used. */
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value) {
    if (pool != &g_pool || !value) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> l(g_mu);
    switch (attr) {
    case cudaMemPoolAttrUsedMemCurrent: case cudaMemPoolAttrReservedMemCurrent: *(uint64_t *)value = g_pool_used; break;
    case cudaMemPoolAttrUsedMemHigh: case cudaMemPoolAttrReservedMemHigh: *(uint64_t *)value = g_pool_high; break;
    default:
        diag("cudaMemPoolGetAttribute: attribute %d is not modelled by the simulator", (int)attr);
        return fail(cudaErrorNotSupported);
    }
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
    init();
    if (!a) return fail(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    std::lock_guard<std::mutex> l(g_mu);
    const alloc_rec *r = find_alloc(p, nullptr);
    if (!r && vmm_accessible(p)) {   /* a mapped range of a reservation (runtime_vmm.cc) */
        a->type = cudaMemoryTypeDevice;
        a->device = 0;
        a->devicePointer = (void *)p;
        return cudaSuccess;
    }
    a->type = !r ? cudaMemoryTypeUnregistered : r->device ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    a->device = r ? 0 : -2;
    a->devicePointer = r ? (void *)p : nullptr;
    a->hostPointer = r && !r->device ? (void *)p : nullptr;
    return cudaSuccess;
}

static cudaError_t memcpy_on(CUstream_st *st, void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                             bool host_sync, const char *what) {
    if (cudaError_t e = sticky()) return fail(e);
    cudaError_t e = check_copy(dst, src, n, kind, what);
    if (e != cudaSuccess) return fail(e);
    if (!n) return cudaSuccess;
    const bool cap = capturing(st);
    const bool src_pageable = kind == cudaMemcpyHostToDevice && !is_pinned(src);
    const bool dst_pageable = kind == cudaMemcpyDeviceToHost && !is_pinned(dst);
    if (cap && (src_pageable || dst_pageable || kind == cudaMemcpyHostToHost)) {
        diag("%s: a copy %s pageable host memory during capture", what, src_pageable ? "from" : "to");
        std::lock_guard<std::mutex> l(g_mu);
        st->cap->invalid = true;
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    span_list spans;
    if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) spans.push_back({(uintptr_t)dst, n});
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) spans.push_back({(uintptr_t)src, n});
    if (src_pageable) {   /* staged: the host bytes are read now */
        std::shared_ptr<unsigned char> stage((unsigned char *)malloc(n), free);
        if (!stage) return fail(cudaErrorMemoryAllocation);
        memcpy(stage.get(), src, n);
        e = issue(st, [dst, stage, n] { memcpy(dst, stage.get(), n); }, std::move(spans));
    } else {
        e = issue(st, [dst, src, n] { memmove(dst, src, n); }, std::move(spans));
    }
    if (e != cudaSuccess) return fail(e);
    if ((dst_pageable || host_sync) && !cap) wait_idle(st);
    return fail(sticky());
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
    if (unsafe_during_capture("cudaMemcpy")) return fail(cudaErrorStreamCaptureUnsupported);
    return memcpy_on(resolve(nullptr), dst, src, n, kind, true, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    cudasim::trace_line("copy cudaMemcpyAsync 0,0,0 0,0,0 0 %zu %d", n, (int)kind);
    return memcpy_on(resolve(s), dst, src, n, kind, false, "cudaMemcpyAsync");
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t s) {
    if (height == 0 || width == 0) return cudaSuccess;
    if (width > dpitch || width > spitch) return fail(cudaErrorInvalidValue);
    CUstream_st *st = resolve(s);
    const size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
    cudaMemcpyKind k = kind;
    cudaError_t e = check_copy(dst, src, dspan < sspan ? dspan : sspan, k, "cudaMemcpy2DAsync");
    if (e == cudaSuccess && (k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice) &&
        !device_range(dst, dspan, "cudaMemcpy2DAsync"))
        e = range_error();
    if (e == cudaSuccess && (k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice) &&
        !device_range(src, sspan, "cudaMemcpy2DAsync"))
        e = range_error();
    if (e != cudaSuccess) return fail(e);
    if (k != cudaMemcpyDeviceToDevice) {   /* the host side pageable or not: row by row through memcpy_on */
        for (size_t r = 0; r < height; r++)
            if ((e = memcpy_on(st, (char *)dst + r * dpitch, (const char *)src + r * spitch, width, k, false,
                               "cudaMemcpy2DAsync")) != cudaSuccess)
                return e;
        return cudaSuccess;
    }
    return fail(issue(st, [=] {
        for (size_t r = 0; r < height; r++) memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    }, span_list{{(uintptr_t)dst, dspan}, {(uintptr_t)src, sspan}}));
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
    if (unsafe_during_capture("cudaMemset")) return fail(cudaErrorStreamCaptureUnsupported);
    if (n && !device_range(p, n, "cudaMemset")) return fail(range_error());
    CUstream_st *st = resolve(nullptr);
    cudaError_t e = issue(st, [p, v, n] { memset(p, v, n); }, span_list{{(uintptr_t)p, n}});
    if (e == cudaSuccess) wait_idle(st);
    return fail(e != cudaSuccess ? e : sticky());
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    if (cudaError_t e = sticky()) return fail(e);
    cudasim::trace_line("memset cudaMemsetAsync 0,0,0 0,0,0 0 %zu %d", n, v);
    if (n && !device_range(p, n, "cudaMemsetAsync")) return fail(range_error());
    return fail(issue(resolve(s), [p, v, n] { memset(p, v, n); }, span_list{{(uintptr_t)p, n}}));
}

/* streams and events */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *ps, unsigned flags) {
    init();
    (void)flags;
    if (!ps) return fail(cudaErrorInvalidValue);
    CUstream_st *s = new CUstream_st;
    {
        std::lock_guard<std::mutex> l(g_mu);
        g_streams->push_back(s);
    }
    std::thread(worker, s).detach();
    *ps = s;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *ps) { return cudaStreamCreateWithFlags(ps, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    CUstream_st *st = resolve(s);
    if (st == g_null) return fail(cudaErrorInvalidResourceHandle);
    if (capturing(st)) return fail(cudaErrorStreamCaptureUnsupported);
    {
        std::lock_guard<std::mutex> l(st->mu);
        st->dying = true;   /* its queued work still runs (as CUDA's destroy returns at once) */
    }
    st->cv.notify_all();
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    CUstream_st *st = resolve(s);
    if (capturing(st)) {
        std::lock_guard<std::mutex> l(g_mu);
        st->cap->invalid = true;
        diag("cudaStreamSynchronize on a capturing stream");
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    if (unsafe_during_capture("cudaStreamSynchronize")) return fail(cudaErrorStreamCaptureUnsupported);
    wait_idle(st);
    return fail(sticky());
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *user) {
    if (!fn) return fail(cudaErrorInvalidValue);
    if (cudaError_t e = sticky()) return fail(e);
    return fail(issue(resolve(s), [fn, user] { fn(user); }));
}
/* The simulator's own (include/cudasim_ext.h): cudaLaunchHostFunc whose `user` is handed to
 * release once the last copy of the work is gone: after it ran, or, when the stream was being
 * captured, when the graph and every executable instantiated from it are destroyed (a graph
 * replays the function with the same `user` at each launch). Also when the call fails. */
cudaError_t cudasim_launch_host_func_owned(cudaStream_t s, cudaHostFn_t fn, void *user, void (*release)(void *)) {
    std::shared_ptr<void> owned(user, [release](void *u) { if (release) release(u); });
    if (!fn) return fail(cudaErrorInvalidValue);
    if (cudaError_t e = sticky()) return fail(e);
    return fail(issue(resolve(s), [fn, owned] { fn(owned.get()); }));
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *pe, unsigned flags) {
    (void)flags;
    init();
    if (!pe) return fail(cudaErrorInvalidValue);
    *pe = new CUevent_st;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *pe) { return cudaEventCreateWithFlags(pe, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    CUstream_st *st = resolve(s);
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (st->cap) {   /* a node of the capture; waiting on it joins the capture */
            e->cap = st->cap;
            e->cap_stream = st;
            return cudaSuccess;
        }
    }
    std::lock_guard<std::mutex> l(st->mu);
    e->cap = nullptr;
    e->s = st;
    e->seq = st->enq;
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (e->cap) return fail(cudaErrorStreamCaptureUnsupported);
    /* any event: a "potentially unsafe" call in a global or thread-local capture (PyTorch's
     * caching allocator skips its event queries while a capture is under way for this) */
    if (unsafe_during_capture("cudaEventQuery")) return fail(cudaErrorStreamCaptureUnsupported);
    if (!e->s) return cudaSuccess;
    std::lock_guard<std::mutex> l(e->s->mu);
    return e->s->done >= e->seq ? cudaSuccess : cudaErrorNotReady;   /* not an error: not recorded as last */
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (unsafe_during_capture("cudaEventSynchronize")) return fail(cudaErrorStreamCaptureUnsupported);
    if (e->s) wait_seq(e->s, e->seq);
    return fail(sticky());
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)flags;
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    CUstream_st *st = resolve(s);
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (e->cap) {
            if (st->cap && st->cap != e->cap) return fail(cudaErrorStreamCaptureUnsupported);   /* two captures */
            if (!st->cap) {   /* st joins the capture */
                st->cap = e->cap;
                e->cap->joined.insert(st);
            } else if (e->cap_stream && e->cap_stream != st) {
                e->cap_stream->cap_pending = false;   /* the joined stream's work is waited for: rejoined */
            }
            return cudaSuccess;
        }
        if (st->cap) return cudaSuccess;   /* an event from before the capture: already ordered */
    }
    CUstream_st *src = e->s;
    const uint64_t seq = e->seq;
    if (!src || src == st) return cudaSuccess;
    return fail(issue(st, [src, seq] { wait_seq(src, seq); }));
}

/* graphs */
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    CUstream_st *st = resolve(s);
    if (st == g_null) return fail(cudaErrorStreamCaptureUnsupported);
    std::lock_guard<std::mutex> l(g_mu);
    if (st->cap) return fail(cudaErrorIllegalState);
    capture *c = new capture;
    c->origin = st;
    c->mode = mode;
    c->thread = pthread_self();
    st->cap = c;
    g_captures->push_back(c);
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *ps) {
    CUstream_st *st = resolve(s);
    if (!ps) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> l(g_mu);
    *ps = !st->cap ? cudaStreamCaptureStatusNone
                   : st->cap->invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *pg) {
    CUstream_st *st = resolve(s);
    if (!pg) return fail(cudaErrorInvalidValue);
    *pg = nullptr;
    std::lock_guard<std::mutex> l(g_mu);
    capture *c = st->cap;
    if (!c) return fail(cudaErrorIllegalState);
    if (c->origin != st) return fail(cudaErrorStreamCaptureUnmatched);
    if (c->mode == cudaStreamCaptureModeThreadLocal && !pthread_equal(c->thread, pthread_self()))
        return fail(cudaErrorStreamCaptureWrongThread);
    bool unjoined = false;
    for (CUstream_st *j : c->joined) {
        unjoined |= j->cap_pending;
        j->cap = nullptr;
        j->cap_pending = false;
    }
    st->cap = nullptr;
    for (size_t i = 0; i < g_captures->size(); i++)
        if ((*g_captures)[i] == c) { g_captures->erase(g_captures->begin() + (long)i); break; }
    const bool invalid = c->invalid;
    if (!invalid && !unjoined) {
        *pg = new CUgraph_st;
        (*pg)->ops = std::move(c->ops);
        (*pg)->spans = std::move(c->spans);
    }
    delete c;
    if (unjoined) return fail(cudaErrorStreamCaptureUnjoined);
    return invalid ? fail(cudaErrorStreamCaptureInvalidated) : cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pe, cudaGraph_t g, unsigned long long flags) {
    (void)flags;
    if (!pe || !g) return fail(cudaErrorInvalidValue);
    *pe = new CUgraphExec_st;
    (*pe)->ops = g->ops;
    (*pe)->spans = g->spans;
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t s) {
    if (!ge) return fail(cudaErrorInvalidValue);
    if (cudaError_t e = sticky()) return fail(e);
    std::shared_ptr<std::vector<op_fn>> ops = std::make_shared<std::vector<op_fn>>(ge->ops);
    return fail(issue(resolve(s), [ops] {
        for (auto &f : *ops) f();
    }, ge->spans));
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t g) {
    delete g;
    return cudaSuccess;
}

} /* extern "C" */
