/* tests/cudasim/runtime_internal.h — what the runtime's files share (runtime.cc: state,
 * streams, memory; runtime_kernels.cc: fibers and launches; runtime_api.cc: the CUDA runtime
 * API). Private to libvolt_cudasim.so (hidden). */
#ifndef CUDASIM_RUNTIME_INTERNAL_H
#define CUDASIM_RUNTIME_INTERNAL_H
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
/* A device range a queued operation touches (copies, memsets; a kernel's pointer arguments as
 * one byte each): cuMemUnmap refuses a range that pending work names (runtime_vmm.cc). */
struct cudasim_span { uintptr_t p; size_t n; };
typedef std::vector<cudasim_span> span_list;

struct capture;
struct CUstream_st {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<op_fn> q;
    uint64_t enq = 0, done = 0;
    bool dying = false;
    capture *cap = nullptr;     /* capturing (origin or joined) */
    bool cap_pending = false;   /* joined, with captured work the origin has not waited for */
    std::deque<std::pair<uint64_t, span_list>> pend;   /* (op's enq number, its ranges) until done */
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
    span_list spans;            /* the captured ops' ranges */
};
struct CUgraph_st { std::vector<op_fn> ops; span_list spans; };
struct CUgraphExec_st { std::vector<op_fn> ops; span_list spans; };
struct CUmemPoolHandle_st { int dummy; };


#pragma GCC visibility push(hidden)
namespace cudasim {
namespace rt {
struct alloc_rec { size_t size; bool device; bool pool = false; };   /* pool: cudaMallocAsync's */
extern std::mutex g_mu;   /* allocations, streams, captures, the sticky error */
extern std::map<uintptr_t, alloc_rec> *g_allocs;
extern size_t g_used, g_capacity;
extern size_t g_pool_used, g_pool_high;   /* the default pool's bytes in use (cudaMemPoolAttrUsedMem*) */
extern std::vector<CUstream_st *> *g_streams;
extern CUstream_st *g_null;
extern std::vector<capture *> *g_captures;
extern cudaError_t g_sticky;
extern unsigned g_delay_us;
extern int g_max_dyn_smem;
extern int g_devices;
extern CUmemPoolHandle_st g_pool;
extern thread_local cudaError_t t_last;
extern thread_local int t_device;

void init();
cudaError_t fail(cudaError_t e);
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
cudaError_t sticky();
void set_sticky(cudaError_t e);
CUstream_st *resolve(cudaStream_t s);
bool unsafe_during_capture(const char *what);
void worker(CUstream_st *s);
cudaError_t issue(CUstream_st *s, op_fn f, span_list spans = span_list());
bool capturing(CUstream_st *s);
void wait_seq(CUstream_st *s, uint64_t seq);
void wait_idle(CUstream_st *s);
bool is_device(const void *p);
bool is_pinned(const void *p);
const alloc_rec *find_alloc(const void *p, uintptr_t *base);
bool device_range(const void *p, size_t n, const char *what);
cudaError_t range_error();   /* why this thread's last device_range said no */
cudaError_t do_alloc(void **p, size_t n, bool device);
cudaError_t do_free(void *p, bool device);
cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind &kind, const char *what);
void exec_free();   /* a worker's kernel state (runtime_kernels.cc) */
/* Virtual memory management (runtime_vmm.cc), all with g_mu held: */
bool vmm_reserved(const void *p);     /* p lies in a cuMemAddressReserve range */
bool vmm_accessible(const void *p);   /* ... mapped, with access granted */
/* [p, p + n) inside one reservation, every byte mapped and accessible: cudaSuccess; past the
 * reservation's end: cudaErrorInvalidValue; a byte unmapped or not accessible:
 * cudaErrorIllegalAddress, made sticky. Each failure named on stderr. */
cudaError_t vmm_range(const void *p, size_t n, const char *what);
} /* namespace rt */
} /* namespace cudasim */
#pragma GCC visibility pop
#endif
