/* The "cpu" backend (core/device.h): device memory is host memory (page-aligned whole
 * pages for large buffers, so give_back can madvise them away), copies are memcpy, the
 * stream is the calling thread, and the kernels and parameter math are core/cpu/'s. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "core/cpu/kernels.h"
#include "core/hostmem.h"

static const volt_kernel cpu_kernels[VOLT_OP_COUNT] = {
#define VOLT_CPU_ENTRY_(id, nm) [VOLT_OP_##id] = { nm, volt__cpu_##id##_fwd, volt__cpu_##id##_bwd },
    VOLT_OPS(VOLT_CPU_ENTRY_)
#undef VOLT_CPU_ENTRY_
};

const volt_kernel *volt__cpu_kernels(void) { return cpu_kernels; }

size_t volt__cpu_page_size(void) {
    static size_t ps;
    if (!ps) {
        long v = sysconf(_SC_PAGESIZE);
        ps = v > 0 ? (size_t)v : 4096;
    }
    return ps;
}

/* ---- memory ------------------------------------------------------------------------------- */
void *volt__cpu_alloc(volt_device *d, size_t bytes) {
    (void)d;
    const size_t pg = volt__cpu_page_size();
    if (!bytes) bytes = 1;
    if (bytes >= VOLT_HUGE_PAGE) return volt__huge_alloc(bytes);   /* first-touch faults: core/hostmem.h */
    if (bytes >= pg) return aligned_alloc(pg, (bytes + pg - 1) / pg * pg);
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}
void volt__cpu_free(volt_device *d, void *p) { (void)d; free(p); }
void volt__cpu_memset(volt_device *d, void *p, int v, size_t n) { (void)d; memset(p, v, n); }
void volt__cpu_copy(volt_device *d, void *dst, const void *src, size_t n, volt_copy_kind k) {
    (void)d; (void)k;
    if (dst != src) memmove(dst, src, n);
}
void volt__cpu_give_back(volt_device *d, void *p, size_t bytes) {
    (void)d;
    const size_t pg = volt__cpu_page_size();
    uintptr_t a = (uintptr_t)p, b = a + bytes;
    uintptr_t pa = (a + pg - 1) / pg * pg, pb = b / pg * pg;
    if (pa >= pb) { memset(p, 0, bytes); return; }
    memset((void *)a, 0, pa - a);
    memset((void *)pb, 0, b - pb);
    if (madvise((void *)pa, pb - pa, MADV_DONTNEED) != 0) memset((void *)pa, 0, pb - pa);
}
volt_status volt__cpu_recommit(volt_device *d, void *p, size_t bytes) { (void)d; (void)p; (void)bytes; return VOLT_OK; }
int64_t volt__cpu_resident_bytes(volt_device *d, const void *p, size_t bytes) {
    (void)d;
    const size_t pg = volt__cpu_page_size();
    uintptr_t a = (uintptr_t)p / pg * pg, b = ((uintptr_t)p + bytes + pg - 1) / pg * pg;
    const size_t n = (b - a) / pg;
    unsigned char vec[256];
    int64_t pages = 0;
    for (size_t i = 0; i < n; i += sizeof vec) {
        size_t m = n - i < sizeof vec ? n - i : sizeof vec;
        if (mincore((void *)(a + i * pg), m * pg, vec) != 0) return (int64_t)bytes;   /* unknown: all */
        for (size_t k = 0; k < m; k++) pages += vec[k] & 1;
    }
    int64_t r = pages * (int64_t)pg;
    return r > (int64_t)bytes ? (int64_t)bytes : r;
}

/* ---- stream: the calling thread; events order nothing ------------------------------------ */
static void cpu_sync(volt_device *d) { (void)d; }
static volt_device_event *cpu_event_create(volt_device *d) { (void)d; static char e; return (volt_device_event *)&e; }
static void cpu_event_noop(volt_device *d, volt_device_event *e) { (void)d; (void)e; }

static int cpu_count(void) { return 1; }
unsigned volt__cpu_caps(volt_device *d) {
    (void)d;
    return VOLT_DEV_HOST_ADDRESSABLE | VOLT_DEV_GIVE_BACK | (volt__cpu_bf16_native() ? VOLT_DEV_BF16_NATIVE : 0u);
}

static const volt_backend cpu_backend = {
    .version = VOLT_BACKEND_VERSION, .name = "cpu",
    .description = "this machine's CPU cores (oneDNN/OpenBLAS GEMMs, OpenMP loops)",
    .device_count = cpu_count, .caps = volt__cpu_caps,
    .alloc = volt__cpu_alloc, .free = volt__cpu_free, .memset = volt__cpu_memset, .copy = volt__cpu_copy,
    .give_back = volt__cpu_give_back, .recommit = volt__cpu_recommit, .resident_bytes = volt__cpu_resident_bytes,
    .synchronize = cpu_sync, .event_create = cpu_event_create, .event_record = cpu_event_noop,
    .event_wait = cpu_event_noop, .event_destroy = cpu_event_noop,
    .kernels = cpu_kernels, .pm = &volt__cpu_param_math,
};

const volt_backend *volt__backend_cpu(void) { return &cpu_backend; }
