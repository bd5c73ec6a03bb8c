/* tests/cudasim/include/cudasim_device.h — what a .cu file of core/cuda needs to compile as
 * host C++ under the CUDA simulator (tests/cudasim/README.md). Force-included (-include)
 * before the file, whose launches `k<<<g, b, smem, stream>>>(args)` and dynamic shared
 * memory `extern __shared__ T name[];` tests/cudasim/transform.cmake has rewritten into
 * CUDASIM_LAUNCH and CUDASIM_DYN_SMEM.
 *
 * Execution model (runtime.cc): a launch is queued on its stream; the stream's worker runs
 * the grid one block at a time, every thread of a block a fiber on that worker. A fiber
 * runs until it finishes or reaches a barrier (__syncthreads, a warp shuffle, __syncwarp,
 * a wmma *_sync call), so barriers are real: a thread never sees another's writes early
 * unless the code has a race a GPU could also show. __shared__ variables are function
 * statics (blocks run one at a time, under one global lock); dynamic shared memory is a
 * per-launch buffer filled with 0xff bytes (NaN) before every block. */
#ifndef CUDASIM_DEVICE_H
#define CUDASIM_DEVICE_H
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __constant__ static
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>
#undef __launch_bounds__
#define __launch_bounds__(...)

namespace cudasim {

/* The running fiber's coordinates (runtime.cc sets it before switching to a fiber). */
struct thread_state {
    uint3 tid, bid;
    dim3 bdim, gdim;
    unsigned lane, warp;
};
extern __attribute__((tls_model("initial-exec"))) thread_local thread_state *g_cur;
void sync_block();                           /* __syncthreads */
int sync_block_or(int pred);                 /* __syncthreads_or */
void sync_warp();                            /* __syncwarp, and the entry and exit of wmma calls */
uint64_t warp_exchange(uint64_t v, unsigned src_lane);   /* lane's value out, src_lane's back */
void *dyn_smem();                            /* this launch's dynamic shared memory */

/* A launch: the kernel called through a generic lambda (so a template kernel is deduced
 * from its arguments as nvcc would), its arguments copied now, queued on the stream. */
typedef void (*invoke_fn)(void *job);
typedef void (*destroy_fn)(void *job);
/* ptrs: the launch's pointer arguments (cuMemUnmap refuses to unmap under a pending kernel
 * that was passed a pointer into the range: runtime_vmm.cc) */
cudaError_t enqueue_launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void *job,
                           invoke_fn invoke, destroy_fn destroy, const uintptr_t *ptrs, size_t nptrs,
                           const char *args);
/* CUDASIM_TRACE=path: every launch appends a line to path (runtime_kernels.cc); the launch's
 * scalar arguments are formatted for it only then. */
bool trace_enabled();
void trace_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* one line, when tracing */
/* T's name as the compiler spells it (GCC / Clang's __PRETTY_FUNCTION__: "... [with T = name]") */
template <class T>
inline void type_name(char *out, size_t cap) {
    const char *f = __PRETTY_FUNCTION__, *b = strstr(f, "T = ");
    size_t n = 0;
    if (b)
        for (b += 4; b[n] && b[n] != ';' && b[n] != ']' && n + 1 < cap; n++) out[n] = b[n];
    out[n] = 0;
}
template <class T, class = void>
struct has_bytes_per_item : std::false_type {};
template <class T>
struct has_bytes_per_item<T, std::void_t<decltype(std::declval<const T &>().bytes_per_item())>> : std::true_type {};
/* a pointer as "p" (0 when NULL), a number as itself, a struct as {} or, when it says its
 * memory traffic (an elementwise op of core/cuda/common.cuh's k_map), as {bpi=N} */
template <class T>
inline void note_scalar(char *buf, size_t cap, size_t &n, const T &v) {
    if (n >= cap) return;
    int w;
    if constexpr (std::is_pointer<T>::value) w = snprintf(buf + n, cap - n, v ? " p" : " 0");
    else if constexpr (has_bytes_per_item<T>::value) {
        char tn[64];
        type_name<T>(tn, sizeof tn);
        w = snprintf(buf + n, cap - n, " {%s bpi=%d}", tn, (int)v.bytes_per_item());
    }
    else if constexpr (std::is_same<T, bool>::value) w = snprintf(buf + n, cap - n, " %d", v ? 1 : 0);
    else if constexpr (std::is_integral<T>::value || std::is_enum<T>::value)
        w = snprintf(buf + n, cap - n, " %lld", (long long)v);
    else if constexpr (std::is_floating_point<T>::value) w = snprintf(buf + n, cap - n, " %g", (double)v);
    else w = snprintf(buf + n, cap - n, " {}");
    n = w < 0 ? cap : n + (size_t)w;
}
template <class T>
inline void note_pointer(uintptr_t *ptrs, size_t &n, const T &v) {
    if constexpr (std::is_pointer<T>::value) ptrs[n++] = reinterpret_cast<uintptr_t>(v);
    (void)ptrs, (void)n, (void)v;
}

template <class F, class... A>
struct job {
    F f;
    std::tuple<A...> args;
    static void invoke(void *p) {
        job *j = static_cast<job *>(p);
        std::apply([j](auto &...a) { j->f(a...); }, j->args);
    }
    static void destroy(void *p) { delete static_cast<job *>(p); }
};

template <class F>
struct launcher {
    const char *name;
    F f;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    template <class... A>
    void operator()(A &&...a) const {
        uintptr_t ptrs[sizeof...(A) + 1];
        size_t np = 0;
        (note_pointer(ptrs, np, static_cast<const std::decay_t<A> &>(a)), ...);
        char args[512];
        size_t na = 0;
        args[0] = 0;
        if (trace_enabled()) (note_scalar(args, sizeof args, na, static_cast<const std::decay_t<A> &>(a)), ...);
        auto *j = new job<F, std::decay_t<A>...>{f, std::tuple<std::decay_t<A>...>(std::forward<A>(a)...)};
        enqueue_launch(name, grid, block, smem, stream, j, job<F, std::decay_t<A>...>::invoke,
                       job<F, std::decay_t<A>...>::destroy, ptrs, np, na ? args : nullptr);
    }
};
template <class F>
launcher<F> make_launcher(const char *name, F f, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0) {
    return launcher<F>{name, f, grid, block, smem, stream};
}

} /* namespace cudasim */

/* cuda_runtime.h's C++ overload, which it declares for nvcc only */
template <class T>
static inline cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value) {
    return ::cudaFuncSetAttribute((const void *)entry, attr, value);
}

#define CUDASIM_LAUNCH(k, ...) \
    ::cudasim::make_launcher(#k, [](auto &...a_) { k(a_...); }, __VA_ARGS__)
#define CUDASIM_DYN_SMEM(T, name) T *name = (T *)::cudasim::dyn_smem()

#define threadIdx (::cudasim::g_cur->tid)
#define blockIdx (::cudasim::g_cur->bid)
#define blockDim (::cudasim::g_cur->bdim)
#define gridDim (::cudasim::g_cur->gdim)
#define warpSize 32

static inline void __syncthreads() { ::cudasim::sync_block(); }
static inline int __syncthreads_or(int p) { return ::cudasim::sync_block_or(p); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)mask; ::cudasim::sync_warp(); }
/* A shuffle: this lane's value out, src's back (through the warp's exchange slots) */
template <class T>
static inline T cudasim_shfl(T v, unsigned src) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    bits = ::cudasim::warp_exchange(bits, src);
    T r;
    memcpy(&r, &bits, sizeof r);
    return r;
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    (void)mask;
    const unsigned lane = ::cudasim::g_cur->lane;
    unsigned src = lane ^ (unsigned)lane_mask;
    if ((src & ~(unsigned)(width - 1)) != (lane & ~(unsigned)(width - 1))) src = lane;
    return cudasim_shfl(v, src);
}
template <class T>
static inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
    (void)mask;
    const unsigned lane = ::cudasim::g_cur->lane;
    return cudasim_shfl(v, (lane & ~(unsigned)(width - 1)) + ((unsigned)src_lane & (unsigned)(width - 1)));
}

/* Bit casts and exactly rounded arithmetic (never contracted into an FMA). */
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __fmul_rn(float a, float b) { float r = a * b; __asm__ volatile("" : "+x"(r)); return r; }
static inline float __fadd_rn(float a, float b) { float r = a + b; __asm__ volatile("" : "+x"(r)); return r; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
static inline float rsqrtf(float x) { return 1.f / sqrtf(x); }

/* Atomics: blocks run one at a time and fibers switch only at barriers, so a plain
 * read-modify-write is atomic here. They return the old value, as CUDA's do. */
static inline float atomicAdd(float *p, float v) { float o = *p; *p = o + v; return o; }
static inline double atomicAdd(double *p, double v) { double o = *p; *p = o + v; return o; }
static inline int atomicAdd(int *p, int v) { int o = *p; *p = o + v; return o; }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    unsigned long long o = *p; *p = o + v; return o;
}
static inline int atomicMax(int *p, int v) { int o = *p; if (v > o) *p = v; return o; }
static inline int atomicMin(int *p, int v) { int o = *p; if (v < o) *p = v; return o; }
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v) {
    unsigned long long o = *p; if (v < o) *p = v; return o;
}
static inline unsigned long long atomicMax(unsigned long long *p, unsigned long long v) {
    unsigned long long o = *p; if (v > o) *p = v; return o;
}
static inline int atomicCAS(int *p, int cmp, int v) { int o = *p; if (o == cmp) *p = v; return o; }
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp, unsigned long long v) {
    unsigned long long o = *p; if (o == cmp) *p = v; return o;
}
#endif
