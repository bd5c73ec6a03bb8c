/* tests/cudasim/runtime.cc — the CUDA runtime API on the CPU, for volt's tests
 * (tests/cudasim/README.md). libvolt_cudasim.so takes the place of cudart in the simulator
 * build (-DVOLT_CUDA_SIM=ON): the "cuda" backend, its kernels (compiled as C++ with
 * cudasim_device.h) and the gpu tests run here, under ASan, with no GPU.
 *
 * What is modelled, because volt's code depends on it:
 * - Device memory is host memory (256-byte aligned), counted against a capacity
 *   (CUDASIM_MEM_MB, default 16384: an allocation past it fails as cudaErrorMemoryAllocation),
 *   filled with 0xff bytes when allocated (a float read before it is written is NaN).
 *   Copies and memsets check that their device range lies inside one allocation.
 * - Streams are asynchronous: each has a worker thread running its work in order. Events
 *   mark positions in a stream; cudaStreamWaitEvent makes a stream wait for one. A copy from
 *   pageable host memory reads the host bytes at the call (as cudart stages them); a copy to
 *   pageable host memory returns when it is done; pinned memory (cudaMallocHost) is read and
 *   written when the stream gets there. The legacy default stream is one more stream (volt
 *   makes only non-blocking streams; cudaMemcpy and cudaMemset return when done).
 * - Kernels run block by block on the stream's worker, each thread a fiber
 *   (cudasim_device.h); barriers and warp shuffles are real barriers. A deadlock (some
 *   threads at a barrier the others never reach) fails the launch with
 *   cudaErrorLaunchFailure, sticky as on a GPU, and is reported on stderr with the kernel's
 *   name. Launch configurations are checked as sm_90 checks them (threads per block, grid
 *   size, dynamic shared memory beyond 48 KiB only after cudaFuncSetAttribute, at most
 *   227 KiB).
 * - Graph capture records what is issued on a capturing stream (and on streams that join it
 *   through an event) and cudaGraphLaunch replays it; in the capture modes global and
 *   thread-local, the calls CUDA refuses during capture (cudaMalloc, cudaMemcpy, cudaMemset,
 *   synchronizing, cudaEventQuery / cudaEventSynchronize of any event) fail with cudaErrorStreamCaptureUnsupported and invalidate the capture,
 *   as do copies to or from pageable host memory and stream-ordered allocation (which CUDA
 *   would capture as memory nodes: not modelled).
 * - The driver's virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, ...),
 *   through cudaGetDriverEntryPointByVersion: runtime_vmm.cc. A mapped, accessible range is
 *   device memory for the checks here; queued operations record the device ranges they name
 *   (CUstream_st::pend) so cuMemUnmap can refuse to pull memory from under them.
 * CUDASIM_DELAY_US=N starts every stream operation N microseconds late: the host runs far
 * ahead of the device, so a read without the synchronization it needs, or a stream that does
 * not wait for another's event, shows up as wrong data instead of passing by luck.
 * Devices: none unless the environment asks (CUDASIM=1: one; CUDASIM_DEVICES=N: N), so a
 * simulator build runs as a CPU build except in the processes that want the simulated GPU.
 * Not modelled: timing, memory consistency between concurrent streams beyond the order
 * above, per-device memory, the limits of any one GPU other than those named. */
#include "runtime_internal.h"

#pragma GCC visibility push(hidden)
namespace cudasim {
namespace rt {

std::mutex g_mu;
std::map<uintptr_t, alloc_rec> *g_allocs;
size_t g_used, g_capacity;
size_t g_pool_used, g_pool_high;
std::vector<CUstream_st *> *g_streams;
CUstream_st *g_null;
std::vector<capture *> *g_captures;
cudaError_t g_sticky = cudaSuccess;
unsigned g_delay_us;   /* CUDASIM_DELAY_US: each stream op starts this late (the host runs ahead) */
int g_max_dyn_smem = 48 * 1024;
int g_devices = 0;
CUmemPoolHandle_st g_pool;
thread_local cudaError_t t_last = cudaSuccess;
thread_local int t_device = 0;
std::once_flag g_once;

void init_once() {
    g_allocs = new std::map<uintptr_t, alloc_rec>;
    g_streams = new std::vector<CUstream_st *>;
    g_captures = new std::vector<capture *>;
    const char *mb = getenv("CUDASIM_MEM_MB");
    g_capacity = (size_t)(mb && atol(mb) > 0 ? atol(mb) : 16384) << 20;
    /* No device unless asked: a simulator build is a CPU build ("auto" picks the CPU) except
     * for the processes that set CUDASIM=1 (the gpu tests: tests/gpu_sim.cmake) */
    const char *dl = getenv("CUDASIM_DELAY_US");
    g_delay_us = dl && atoi(dl) > 0 ? (unsigned)atoi(dl) : 0;
    const char *nd = getenv("CUDASIM_DEVICES"), *on = getenv("CUDASIM");
    g_devices = nd ? (atoi(nd) < 0 ? 0 : atoi(nd)) : on && *on && strcmp(on, "0") ? 1 : 0;
    g_null = new CUstream_st;
    g_streams->push_back(g_null);
    std::thread(worker, g_null).detach();
}
void init() { std::call_once(g_once, init_once); }

cudaError_t fail(cudaError_t e) {
    if (e != cudaSuccess) t_last = e;
    return e;
}
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void diag(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cudasim: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
cudaError_t sticky() {
    std::lock_guard<std::mutex> l(g_mu);
    return g_sticky;
}
void set_sticky(cudaError_t e) {
    std::lock_guard<std::mutex> l(g_mu);
    if (g_sticky == cudaSuccess) g_sticky = e;
}

CUstream_st *resolve(cudaStream_t s) {
    init();
    if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return g_null;
    return s;
}

/* The capture this thread would break by an unsafe call (global: any capture; thread-local:
 * one this thread began). Marks it invalid. */
bool unsafe_during_capture(const char *what) {
    init();
    std::lock_guard<std::mutex> l(g_mu);
    for (capture *c : *g_captures) {
        if (c->mode == cudaStreamCaptureModeRelaxed) continue;
        if (c->mode == cudaStreamCaptureModeThreadLocal && !pthread_equal(c->thread, pthread_self())) continue;
        c->invalid = true;
        diag("%s during stream capture: not permitted (the capture is invalidated)", what);
        return true;
    }
    return false;
}

/* ---- streams ---------------------------------------------------------------------------- */
void worker(CUstream_st *s) {
    for (;;) {
        op_fn f;
        {
            std::unique_lock<std::mutex> l(s->mu);
            s->cv.wait(l, [s] { return !s->q.empty() || s->dying; });
            if (s->q.empty()) {   /* dying and drained (the object stays: events may name it) */
                exec_free();
                return;
            }
            f = std::move(s->q.front());
            s->q.pop_front();
        }
        if (g_delay_us) usleep(g_delay_us);
        f();
        {
            std::lock_guard<std::mutex> l(s->mu);
            s->done++;
            while (!s->pend.empty() && s->pend.front().first <= s->done) s->pend.pop_front();
        }
        s->cv.notify_all();
    }
}

/* Issues f on s: captured when s is capturing, else queued. */
cudaError_t issue(CUstream_st *s, op_fn f, span_list spans) {
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (s->cap) {
            if (s->cap->invalid) return cudaErrorStreamCaptureInvalidated;
            s->cap->ops.push_back(std::move(f));
            s->cap->spans.insert(s->cap->spans.end(), spans.begin(), spans.end());
            if (s != s->cap->origin) s->cap_pending = true;
            return cudaSuccess;
        }
    }
    {
        std::lock_guard<std::mutex> l(s->mu);
        if (s->dying) return cudaErrorInvalidResourceHandle;
        s->q.push_back(std::move(f));
        s->enq++;
        if (!spans.empty()) s->pend.emplace_back(s->enq, std::move(spans));
    }
    s->cv.notify_all();
    return cudaSuccess;
}
bool capturing(CUstream_st *s) {
    std::lock_guard<std::mutex> l(g_mu);
    return s->cap != nullptr;
}
void wait_seq(CUstream_st *s, uint64_t seq) {
    std::unique_lock<std::mutex> l(s->mu);
    s->cv.wait(l, [s, seq] { return s->done >= seq; });
}
void wait_idle(CUstream_st *s) {
    uint64_t seq;
    {
        std::lock_guard<std::mutex> l(s->mu);
        seq = s->enq;
    }
    wait_seq(s, seq);
}

/* ---- memory --------------------------------------------------------------------------------- */
const alloc_rec *find_alloc(const void *p, uintptr_t *base) {
    if (!g_allocs || g_allocs->empty()) return nullptr;
    auto it = g_allocs->upper_bound((uintptr_t)p);
    if (it == g_allocs->begin()) return nullptr;
    --it;
    if ((uintptr_t)p >= it->first + (it->second.size ? it->second.size : 1)) return nullptr;
    if (base) *base = it->first;
    return &it->second;
}
bool is_device(const void *p) {
    std::lock_guard<std::mutex> l(g_mu);
    const alloc_rec *a = find_alloc(p, nullptr);
    return a ? a->device : vmm_reserved(p);
}
bool is_pinned(const void *p) {
    std::lock_guard<std::mutex> l(g_mu);
    const alloc_rec *a = find_alloc(p, nullptr);
    return a && !a->device;
}
static thread_local cudaError_t t_range_err = cudaErrorInvalidValue;
cudaError_t range_error() { return t_range_err; }
/* [p, p + n) inside one device allocation, or mapped and accessible in one reservation */
bool device_range(const void *p, size_t n, const char *what) {
    std::lock_guard<std::mutex> l(g_mu);
    t_range_err = cudaErrorInvalidValue;
    uintptr_t base = 0;
    const alloc_rec *a = find_alloc(p, &base);
    if (!a && vmm_reserved(p)) {
        t_range_err = vmm_range(p, n, what);
        return t_range_err == cudaSuccess;
    }
    if (!a || !a->device) {
        diag("%s: %p is not device memory", what, p);
        return false;
    }
    if ((uintptr_t)p + n > base + a->size) {
        diag("%s: %zu bytes at %p run %zu bytes past the end of their allocation (%zu bytes at %#lx)", what, n, p,
             (size_t)((uintptr_t)p + n - base - a->size), a->size, (unsigned long)base);
        return false;
    }
    return true;
}
cudaError_t do_alloc(void **p, size_t n, bool device) {
    init();
    if (!p) return fail(cudaErrorInvalidValue);
    size_t sz = (n + 255) & ~(size_t)255;
    if (!sz) sz = 256;
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (device && g_used + sz > g_capacity) { *p = nullptr; return fail(cudaErrorMemoryAllocation); }
    }
    void *m = aligned_alloc(256, sz);
    if (!m) { *p = nullptr; return fail(cudaErrorMemoryAllocation); }
    memset(m, 0xff, sz);
    std::lock_guard<std::mutex> l(g_mu);
    (*g_allocs)[(uintptr_t)m] = alloc_rec{n, device};
    if (device) g_used += sz;
    *p = m;
    return cudaSuccess;
}
cudaError_t do_free(void *p, bool device) {
    init();
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_allocs->find((uintptr_t)p);
    if (it == g_allocs->end() || it->second.device != device) {
        diag("%s(%p): not an allocation of that kind", device ? "cudaFree" : "cudaFreeHost", p);
        return fail(cudaErrorInvalidValue);
    }
    if (device) {
        const size_t sz = (it->second.size + 255) & ~(size_t)255;
        g_used -= sz ? sz : 256;
        if (it->second.pool) g_pool_used -= sz ? sz : 256;
    }
    g_allocs->erase(it);
    free(p);
    return cudaSuccess;
}

/* A copy's kind checked against where the pointers are; device ranges checked. */
cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind &kind, const char *what) {
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return cudaErrorInvalidValue;
    const bool dd = is_device(dst), sd = is_device(src);
    if (kind == cudaMemcpyDefault)
        kind = dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                  : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    const bool want_dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool want_sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (want_dd && !device_range(dst, n, what)) return range_error();
    if (want_sd && !device_range(src, n, what)) return range_error();
    if (!want_dd && dd) { diag("%s: destination %p is device memory, kind says host", what, dst); return cudaErrorInvalidValue; }
    if (!want_sd && sd) { diag("%s: source %p is device memory, kind says host", what, src); return cudaErrorInvalidValue; }
    return cudaSuccess;
}

} /* namespace rt */
} /* namespace cudasim */
#pragma GCC visibility pop
