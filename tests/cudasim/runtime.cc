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
 *   synchronizing) fail with cudaErrorStreamCaptureUnsupported and invalidate the capture,
 *   as do copies to or from pageable host memory and stream-ordered allocation (which CUDA
 *   would capture as memory nodes: not modelled).
 * CUDASIM_DELAY_US=N starts every stream operation N microseconds late: the host runs far
 * ahead of the device, so a read without the synchronization it needs, or a stream that does
 * not wait for another's event, shows up as wrong data instead of passing by luck.
 * Devices: none unless the environment asks (CUDASIM=1: one; CUDASIM_DEVICES=N: N), so a
 * simulator build runs as a CPU build except in the processes that want the simulated GPU.
 * Not modelled: timing, memory consistency between concurrent streams beyond the order
 * above, per-device memory, the limits of any one GPU other than those named. */
#include "cudasim_device.h"   /* first: it defines what cuda_runtime.h would */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CUDASIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDASIM_ASAN 1
#endif
#endif
#ifdef CUDASIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

typedef std::function<void()> op_fn;

struct capture;
struct CUstream_st {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<op_fn> q;
    uint64_t enq = 0, done = 0;
    bool dying = false;
    capture *cap = nullptr;     /* capturing (origin or joined) */
    bool cap_pending = false;   /* joined, with captured work the origin has not waited for */
};
struct CUevent_st {
    CUstream_st *s = nullptr;
    uint64_t seq = 0;
    capture *cap = nullptr;     /* recorded during a capture: names that capture */
    CUstream_st *cap_stream = nullptr;
};
struct capture {
    CUstream_st *origin;
    cudaStreamCaptureMode mode;
    pthread_t thread;
    std::vector<op_fn> ops;
    std::set<CUstream_st *> joined;
    bool invalid = false;
};
struct CUgraph_st { std::vector<op_fn> ops; };
struct CUgraphExec_st { std::vector<op_fn> ops; };
struct CUmemPoolHandle_st { int dummy; };

namespace {

std::mutex g_mu;   /* allocations, streams, captures, the sticky error */
struct alloc_rec { size_t size; bool device; };
std::map<uintptr_t, alloc_rec> *g_allocs;
size_t g_used, g_capacity;
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

void worker(CUstream_st *s);

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
void exec_free();   /* this worker's kernel state (below) */

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
        }
        s->cv.notify_all();
    }
}

/* Issues f on s: captured when s is capturing, else queued. */
cudaError_t issue(CUstream_st *s, op_fn f) {
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (s->cap) {
            if (s->cap->invalid) return cudaErrorStreamCaptureInvalidated;
            s->cap->ops.push_back(std::move(f));
            if (s != s->cap->origin) s->cap_pending = true;
            return cudaSuccess;
        }
    }
    {
        std::lock_guard<std::mutex> l(s->mu);
        if (s->dying) return cudaErrorInvalidResourceHandle;
        s->q.push_back(std::move(f));
        s->enq++;
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
    return a && a->device;
}
bool is_pinned(const void *p) {
    std::lock_guard<std::mutex> l(g_mu);
    const alloc_rec *a = find_alloc(p, nullptr);
    return a && !a->device;
}
/* [p, p + n) inside one device allocation */
bool device_range(const void *p, size_t n, const char *what) {
    std::lock_guard<std::mutex> l(g_mu);
    uintptr_t base = 0;
    const alloc_rec *a = find_alloc(p, &base);
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
    if (want_dd && !device_range(dst, n, what)) return cudaErrorInvalidValue;
    if (want_sd && !device_range(src, n, what)) return cudaErrorInvalidValue;
    if (!want_dd && dd) { diag("%s: destination %p is device memory, kind says host", what, dst); return cudaErrorInvalidValue; }
    if (!want_sd && sd) { diag("%s: source %p is device memory, kind says host", what, src); return cudaErrorInvalidValue; }
    return cudaSuccess;
}

/* ---- kernels: fibers ------------------------------------------------------------------------ */
/* A context switch: the callee-saved registers and the SSE / x87 control words pushed on the
 * old stack, its stack pointer saved, the new one loaded and popped. (glibc's swapcontext
 * also switches the signal mask: a system call per switch, most of a launch's cost.) */
#if !defined(__x86_64__)
#error "tests/cudasim: the fiber switch is written for x86-64"
#endif
extern "C" void cudasim_switch(void **save_sp, void *new_sp);
__asm__(".text\n"
        ".globl cudasim_switch\n"
        ".hidden cudasim_switch\n"
        ".type cudasim_switch,@function\n"
        "cudasim_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size cudasim_switch,.-cudasim_switch\n");

struct fiber {
    void *sp = nullptr;
    void *stack = nullptr;
    cudasim::thread_state st;
    bool done = false;
    const unsigned *wait_gen = nullptr;   /* waiting until *wait_gen != wait_val */
    unsigned wait_val = 0;
#ifdef CUDASIM_ASAN
    void *fake = nullptr;
#endif
};
/* slot[gen & 1]: a shuffle's values; two buffers, so one barrier per shuffle suffices (a lane
 * can write the next shuffle's value only after every lane reached the next barrier, by
 * which time all have read this one's) */
struct warp_bar { unsigned arrived = 0, gen = 0, alive = 0; uint64_t slot[2][32]; };
struct exec_state {
    void *main_sp = nullptr;
    std::vector<fiber> f;
    std::vector<warp_bar> warps;
    unsigned arrived = 0, gen = 0, alive = 0;
    int or_acc = 0, or_res = 0;
    fiber *cur = nullptr;
    cudasim::invoke_fn invoke = nullptr;
    void *job = nullptr;
    unsigned char *dyn = nullptr;
    size_t dyn_size = 0, dyn_cap = 0;
    bool fault = false;
    char fault_msg[256];
#ifdef CUDASIM_ASAN
    const void *main_bottom = nullptr;
    size_t main_size = 0;
    void *main_fake = nullptr;
#endif
};
#ifdef CUDASIM_ASAN
const size_t STACK = 1u << 19;
#else
const size_t STACK = 1u << 17;
#endif
__attribute__((tls_model("initial-exec"))) thread_local exec_state *t_exec;
std::mutex g_kernel_mu;   /* one block runs at a time in the process: __shared__ are statics */

void exec_free() {
    exec_state *e = t_exec;
    if (!e) return;
    for (fiber &f : e->f)
        if (f.stack) munmap(f.stack, STACK);
    free(e->dyn);
    delete e;
    t_exec = nullptr;
}

void to_main(exec_state *e, fiber *f, bool finished) {
#ifdef CUDASIM_ASAN
    __sanitizer_start_switch_fiber(finished ? nullptr : &f->fake, e->main_bottom, e->main_size);
#else
    (void)finished;
#endif
    cudasim_switch(&f->sp, e->main_sp);
#ifdef CUDASIM_ASAN
    __sanitizer_finish_switch_fiber(f->fake, nullptr, nullptr);
#endif
}

/* A fiber's first frame (entered by cudasim_switch's ret, aligned as after a call); it never
 * returns: the last switch back to the scheduler leaves it, and the stack is reset for the
 * next block. */
[[noreturn]] void fiber_entry() {
    exec_state *e = t_exec;
    fiber *f = e->cur;
#ifdef CUDASIM_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &e->main_bottom, &e->main_size);
#endif
    e->invoke(e->job);
    f->done = true;
    to_main(e, f, true);
    __builtin_unreachable();
}

/* The initial stack of a fiber: control words, six registers, then fiber_entry as the
 * return address at a 16-byte boundary. */
void *fiber_stack_init(void *stack, size_t size) {
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    uint64_t *p = (uint64_t *)(top - 16);
    p[0] = (uint64_t)(uintptr_t)&fiber_entry;
    p[1] = 0;
    for (int r = 1; r <= 6; r++) p[-r] = 0;   /* rbp rbx r12 r13 r14 r15 */
    uint32_t *cw = (uint32_t *)(p - 7);
    cw[0] = 0x1f80;   /* MXCSR: all exceptions masked, round to nearest */
    cw[1] = 0x037f;   /* x87 control word: the same */
    return (void *)(p - 7);
}

void release_check(exec_state *e, unsigned w) {
    if (e->alive && e->arrived == e->alive) {
        e->arrived = 0;
        e->gen++;
        e->or_res = e->or_acc;
        e->or_acc = 0;
    }
    warp_bar &b = e->warps[w];
    if (b.alive && b.arrived == b.alive) {
        b.arrived = 0;
        b.gen++;
    }
}

void wait_on(exec_state *e, const unsigned *gen, unsigned val) {
    fiber *f = e->cur;
    f->wait_gen = gen;
    f->wait_val = val;
    while (*gen == val) to_main(e, f, false);
    f->wait_gen = nullptr;
}

/* Runs one block; false on a fault or deadlock (e->fault_msg says which). */
bool run_block(exec_state *e, dim3 bid, dim3 grid, dim3 block) {
    const unsigned nt = block.x * block.y * block.z, nw = (nt + 31) / 32;
    e->arrived = e->gen = 0;
    e->alive = nt;
    e->or_acc = e->or_res = 0;
    e->warps.assign(nw, warp_bar());
    for (unsigned w = 0; w < nw; w++) e->warps[w].alive = w + 1 < nw || nt % 32 == 0 ? 32 : nt % 32;
    if (e->dyn_size) memset(e->dyn, 0xff, e->dyn_size);
    for (unsigned t = 0; t < nt; t++) {
        fiber &f = e->f[t];
        if (!f.stack) {
            f.stack = mmap(nullptr, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (f.stack == MAP_FAILED) {
                f.stack = nullptr;
                snprintf(e->fault_msg, sizeof e->fault_msg, "no memory for fiber stacks");
                return false;
            }
        }
#ifdef CUDASIM_ASAN   /* the frame an earlier fiber's fiber_entry left (it never returns; deeper
                          frames did return, and unpoisoned themselves) */
        __asan_unpoison_memory_region((char *)f.stack + STACK - 16384, 16384);
#endif
        f.sp = fiber_stack_init(f.stack, STACK);
        f.done = false;
        f.wait_gen = nullptr;
        f.st.tid = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
        f.st.bid = uint3{bid.x, bid.y, bid.z};
        f.st.bdim = block;
        f.st.gdim = grid;
        f.st.lane = t % 32;
        f.st.warp = t / 32;
    }
    unsigned left = nt;
    while (left) {
        bool ran = false;
        for (unsigned t = 0; t < nt && !e->fault; t++) {
            fiber &f = e->f[t];
            if (f.done || (f.wait_gen && *f.wait_gen == f.wait_val)) continue;
            ran = true;
            e->cur = &f;
            cudasim::g_cur = &f.st;
#ifdef CUDASIM_ASAN
            __sanitizer_start_switch_fiber(&e->main_fake, f.stack, STACK);
#endif
            cudasim_switch(&e->main_sp, f.sp);
#ifdef CUDASIM_ASAN
            __sanitizer_finish_switch_fiber(e->main_fake, nullptr, nullptr);
#endif
            if (f.done) {
                left--;
                e->alive--;
                e->warps[f.st.warp].alive--;
                release_check(e, f.st.warp);
            }
        }
        if (e->fault) return false;
        if (!ran && left) {
            unsigned at_block = 0, at_warp = 0;
            for (unsigned t = 0; t < nt; t++)
                if (!e->f[t].done) (e->f[t].wait_gen == &e->gen ? at_block : at_warp)++;
            snprintf(e->fault_msg, sizeof e->fault_msg,
                     "deadlock in block (%u, %u, %u): %u threads wait at __syncthreads, %u at a warp barrier "
                     "(shuffle, __syncwarp, wmma), %u have returned",
                     bid.x, bid.y, bid.z, at_block, at_warp, nt - left);
            return false;
        }
    }
    return true;
}

void run_grid(const std::string &name, dim3 grid, dim3 block, size_t smem, void *job, cudasim::invoke_fn invoke) {
    if (sticky() != cudaSuccess) return;
    std::lock_guard<std::mutex> kl(g_kernel_mu);
    if (!t_exec) t_exec = new exec_state;
    exec_state *e = t_exec;
    const unsigned nt = block.x * block.y * block.z;
    if (e->f.size() < nt) e->f.resize(nt);
    if (e->dyn_cap < smem) {
        free(e->dyn);
        e->dyn = (unsigned char *)aligned_alloc(128, (smem + 127) & ~(size_t)127);
        e->dyn_cap = smem;
    }
    e->dyn_size = smem;
    e->invoke = invoke;
    e->job = job;
    e->fault = false;
    e->fault_msg[0] = 0;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++)
                if (!run_block(e, dim3(x, y, z), grid, block)) {
                    diag("kernel %s<<<(%u, %u, %u), (%u, %u, %u), %zu>>> failed: %s", name.c_str(), grid.x, grid.y,
                         grid.z, block.x, block.y, block.z, smem, e->fault_msg);
                    set_sticky(strstr(e->fault_msg, "misaligned") ? cudaErrorMisalignedAddress : cudaErrorLaunchFailure);
                    cudasim::g_cur = nullptr;
                    return;
                }
    cudasim::g_cur = nullptr;
}

} /* namespace */

/* ---- device side (cudasim_device.h, mma.h) ------------------------------------------------ */
namespace cudasim {
__attribute__((tls_model("initial-exec"))) thread_local thread_state *g_cur;

void sync_block() {
    exec_state *e = t_exec;
    const unsigned g = e->gen;
    e->arrived++;
    release_check(e, e->cur->st.warp);
    wait_on(e, &e->gen, g);
}
int sync_block_or(int pred) {
    exec_state *e = t_exec;
    const unsigned g = e->gen;
    e->or_acc |= pred != 0;
    e->arrived++;
    release_check(e, e->cur->st.warp);
    wait_on(e, &e->gen, g);
    return e->or_res;
}
void sync_warp() {
    exec_state *e = t_exec;
    warp_bar &b = e->warps[e->cur->st.warp];
    const unsigned g = b.gen;
    b.arrived++;
    release_check(e, e->cur->st.warp);
    wait_on(e, &b.gen, g);
}
uint64_t warp_exchange(uint64_t v, unsigned src) {
    exec_state *e = t_exec;
    const unsigned w = e->cur->st.warp;
    const unsigned buf = e->warps[w].gen & 1;
    e->warps[w].slot[buf][e->cur->st.lane] = v;
    sync_warp();
    return e->warps[w].slot[buf][src & 31];
}
void *dyn_smem() { return t_exec->dyn; }
void wmma_fault(const char *what, const void *p, unsigned ldm) {
    exec_state *e = t_exec;
    if (!e->fault)
        snprintf(e->fault_msg, sizeof e->fault_msg,
                 "wmma::%s misaligned: pointer %p (needs 32-byte alignment), ldm %u (needs 16 bytes' multiple)", what, p,
                 ldm);
    e->fault = true;
    for (;;) to_main(e, e->cur, false);   /* never resumed: the launch ends */
}

cudaError_t enqueue_launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void *job,
                           invoke_fn invoke, destroy_fn destroy) {
    init();
    std::shared_ptr<void> hold(job, destroy);
    if (cudaError_t st = sticky()) return fail(st);
    const unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !nt || nt > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
        grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u) {
        diag("kernel %s: invalid launch configuration <<<(%u, %u, %u), (%u, %u, %u)>>>", name, grid.x, grid.y, grid.z,
             block.x, block.y, block.z);
        return fail(cudaErrorInvalidConfiguration);
    }
    int maxdyn;
    {
        std::lock_guard<std::mutex> l(g_mu);
        maxdyn = g_max_dyn_smem;
    }
    if (smem > (size_t)maxdyn) {
        diag("kernel %s: %zu bytes of dynamic shared memory, over the %d allowed (more than 48 KiB needs "
             "cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize))", name, smem, maxdyn);
        return fail(cudaErrorInvalidValue);
    }
    std::string nm(name);
    cudaError_t e = issue(resolve(stream), [nm, grid, block, smem, hold, invoke] {
        run_grid(nm, grid, block, smem, hold.get(), invoke);
    });
    return fail(e);
}
} /* namespace cudasim */

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
    X(cudaErrorIllegalState, "the operation is not permitted in the current state")

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
    return do_alloc(p, n, true);
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
    (void)attr;
    return pool == &g_pool && value ? cudaSuccess : fail(cudaErrorInvalidValue);
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
    init();
    if (!a) return fail(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    std::lock_guard<std::mutex> l(g_mu);
    const alloc_rec *r = find_alloc(p, nullptr);
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
    if (src_pageable) {   /* staged: the host bytes are read now */
        std::shared_ptr<unsigned char> stage((unsigned char *)malloc(n), free);
        if (!stage) return fail(cudaErrorMemoryAllocation);
        memcpy(stage.get(), src, n);
        e = issue(st, [dst, stage, n] { memcpy(dst, stage.get(), n); });
    } else {
        e = issue(st, [dst, src, n] { memmove(dst, src, n); });
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
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess && (k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice) &&
        !device_range(src, sspan, "cudaMemcpy2DAsync"))
        e = cudaErrorInvalidValue;
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
    }));
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
    if (unsafe_during_capture("cudaMemset")) return fail(cudaErrorStreamCaptureUnsupported);
    if (n && !device_range(p, n, "cudaMemset")) return fail(cudaErrorInvalidValue);
    CUstream_st *st = resolve(nullptr);
    cudaError_t e = issue(st, [p, v, n] { memset(p, v, n); });
    if (e == cudaSuccess) wait_idle(st);
    return fail(e != cudaSuccess ? e : sticky());
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    if (cudaError_t e = sticky()) return fail(e);
    if (n && !device_range(p, n, "cudaMemsetAsync")) return fail(cudaErrorInvalidValue);
    return fail(issue(resolve(s), [p, v, n] { memset(p, v, n); }));
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
    if (!e->s) return cudaSuccess;
    std::lock_guard<std::mutex> l(e->s->mu);
    return e->s->done >= e->seq ? cudaSuccess : cudaErrorNotReady;   /* not an error: not recorded as last */
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
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
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t s) {
    if (!ge) return fail(cudaErrorInvalidValue);
    if (cudaError_t e = sticky()) return fail(e);
    std::shared_ptr<std::vector<op_fn>> ops = std::make_shared<std::vector<op_fn>>(ge->ops);
    return fail(issue(resolve(s), [ops] {
        for (auto &f : *ops) f();
    }));
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
