/* tests/cudasim/runtime_vmm.cc — the CUDA driver's virtual memory management (VMM) on the CPU,
 * reached as volt's "cuda" backend reaches it: through the runtime's
 * cudaGetDriverEntryPointByVersion (libvolt_cudasim.so exports no cu* symbol; a process never
 * links libcuda). README.md, "Virtual memory management", says what is modelled and what not.
 *
 * - A reservation (cuMemAddressReserve) is host address space mapped PROT_NONE with
 *   MAP_NORESERVE, aligned to the 2 MiB granularity: nothing is committed, nothing counted.
 * - A physical handle (cuMemCreate) is a memfd of its size, filled with 0xff bytes once (the
 *   driver leaves new memory undefined), counted against CUDASIM_MEM_MB like cudaMalloc.
 * - cuMemMap maps the memfd MAP_SHARED|MAP_FIXED over the reservation, still PROT_NONE;
 *   cuMemSetAccess mprotects it readable (and writable). So a kernel that touches an unmapped
 *   or not yet accessible granule dies with SIGSEGV at the access, and two mappings of one
 *   handle alias. cuMemUnmap puts a fresh PROT_NONE reservation mapping back.
 * - A copy or memset whose device range reaches an unmapped or inaccessible byte of a
 *   reservation fails at the call with cudaErrorIllegalAddress, sticky, the address named.
 * - cuMemUnmap while a stream still has queued work naming the range (a copy or memset into
 *   it; a kernel given a pointer into it) is what a GPU leaves undefined: refused with a
 *   diagnostic and a sticky cudaErrorIllegalAddress (the mapping stays).
 * All state is under g_mu (runtime.cc). */
#include "runtime_internal.h"
#include <cuda.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <type_traits>

#pragma GCC visibility push(hidden)
namespace cudasim {
namespace rt {
namespace {

/* H100/H200: 2 MiB for CU_MEM_ALLOCATION_TYPE_PINNED on a device. CUDASIM_VMM_GRANULE_KB (a
 * power of two, 4 KiB .. 2 MiB) makes it smaller, so a test can cut small buffers into many
 * granules without the simulator's per-thread cost of 2 MiB units (test_memory_held_*). */
size_t granule() {
    static const size_t g = [] {
        const char *e = getenv("CUDASIM_VMM_GRANULE_KB");
        const unsigned long long kb = e && *e ? strtoull(e, nullptr, 10) : 0;
        if (kb >= 4 && kb <= 2048 && !(kb & (kb - 1))) return (size_t)kb << 10;
        return (size_t)2 << 20;
    }();
    return g;
}
#define GRAN (granule())
const int DRIVER_VERSION = CUDART_VERSION;
const int VMM_SINCE = 10020;           /* the VMM API came with CUDA 10.2 */

struct handle_rec {
    int fd;
    size_t size;
    unsigned maps;   /* live cuMemMap mappings of it */
    bool released;
};
struct map_rec {
    size_t size;
    unsigned long long handle;
    std::map<int, unsigned long long> access;   /* device ordinal -> CU_MEM_ACCESS_FLAGS_PROT_* */
};
struct res_rec {
    size_t size;
    std::map<uintptr_t, map_rec> maps;   /* by address */
};
std::map<uintptr_t, res_rec> &reservations() {
    static std::map<uintptr_t, res_rec> *m = new std::map<uintptr_t, res_rec>;
    return *m;
}
std::map<unsigned long long, handle_rec> &handles() {
    static std::map<unsigned long long, handle_rec> *m = new std::map<unsigned long long, handle_rec>;
    return *m;
}
unsigned long long g_next_handle = 0xc0da000000000001ull;   /* opaque, never 0 */

/* the reservation holding p (g_mu held), or null */
res_rec *res_of(uintptr_t p, uintptr_t *base) {
    auto &r = reservations();
    auto it = r.upper_bound(p);
    if (it == r.begin()) return nullptr;
    --it;
    if (p >= it->first + it->second.size) return nullptr;
    if (base) *base = it->first;
    return &it->second;
}
/* the mapping holding p in r, or null */
std::pair<const uintptr_t, map_rec> *map_of(res_rec *r, uintptr_t p) {
    auto it = r->maps.upper_bound(p);
    if (it == r->maps.begin()) return nullptr;
    --it;
    return p < it->first + it->second.size ? &*it : nullptr;
}
int host_prot(const map_rec &m) {
    unsigned long long f = 0;
    for (auto &a : m.access) f |= a.second;
    return (f & 2) ? PROT_READ | PROT_WRITE : (f & 1) ? PROT_READ : PROT_NONE;   /* READWRITE 3, READ 1 */
}
void handle_free(unsigned long long h) {
    auto it = handles().find(h);
    close(it->second.fd);
    g_used -= it->second.size;
    handles().erase(it);
}

CUresult bad(CUresult r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
CUresult bad(CUresult r, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag("%s", msg);
    return r;
}

CUresult check_device(const CUmemLocation &loc, const char *what) {
    if (loc.type == CU_MEM_LOCATION_TYPE_HOST || loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
        loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
        return bad(CUDA_ERROR_NOT_SUPPORTED, "%s: host locations are not modelled by the simulator", what);
    if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: location type %d is not a device", what, (int)loc.type);
    if (loc.id < 0 || loc.id >= g_devices)
        return bad(CUDA_ERROR_INVALID_DEVICE, "%s: device %d of %d", what, loc.id, g_devices);
    return CUDA_SUCCESS;
}
CUresult check_prop(const CUmemAllocationProp *prop, const char *what) {
    if (!prop) return bad(CUDA_ERROR_INVALID_VALUE, "%s: prop is NULL", what);
    if (prop->type == CU_MEM_ALLOCATION_TYPE_MANAGED)
        return bad(CUDA_ERROR_NOT_SUPPORTED, "%s: CU_MEM_ALLOCATION_TYPE_MANAGED is not modelled", what);
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: allocation type %d (want CU_MEM_ALLOCATION_TYPE_PINNED)", what,
                   (int)prop->type);
    if (CUresult r = check_device(prop->location, what)) return r;
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return bad(CUDA_ERROR_NOT_SUPPORTED, "%s: requestedHandleTypes %#x: shareable handles are not modelled", what,
                   (unsigned)prop->requestedHandleTypes);
    if (prop->win32HandleMetaData)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: win32HandleMetaData must be NULL here", what);
    if (prop->allocFlags.compressionType || prop->allocFlags.gpuDirectRDMACapable || prop->allocFlags.usage)
        return bad(CUDA_ERROR_NOT_SUPPORTED, "%s: allocFlags (compression %u, RDMA %u, usage %#x) are not modelled",
                   what, prop->allocFlags.compressionType, prop->allocFlags.gpuDirectRDMACapable,
                   prop->allocFlags.usage);
    for (unsigned char b : prop->allocFlags.reserved)
        if (b) return bad(CUDA_ERROR_INVALID_VALUE, "%s: allocFlags.reserved must be zero", what);
    return CUDA_SUCCESS;
}

/* [ptr, ptr + size) granule-aligned, in one reservation, and exactly a run of whole adjacent
 * mappings: their addresses in *out */
CUresult whole_mappings(uintptr_t ptr, size_t size, const char *what, res_rec **pr, std::vector<uintptr_t> *out) {
    if (!size || ptr % GRAN || size % GRAN)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#lx, %zu): address and size must be non-zero multiples of the "
                   "granularity (%zu)", what, (unsigned long)ptr, size, GRAN);
    uintptr_t base = 0;
    res_rec *r = res_of(ptr, &base);
    if (!r || ptr + size > base + r->size)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#lx, %zu): not inside one reservation", what, (unsigned long)ptr,
                   size);
    for (uintptr_t a = ptr; a < ptr + size;) {
        auto it = r->maps.find(a);
        if (it == r->maps.end()) {
            auto *m = map_of(r, a);
            if (m)
                return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#lx, %zu): cuts the mapping at %#lx (%zu bytes): a range "
                           "must cover whole mappings", what, (unsigned long)ptr, size, (unsigned long)m->first,
                           m->second.size);
            return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#lx, %zu): %#lx is not mapped", what, (unsigned long)ptr, size,
                       (unsigned long)a);
        }
        if (a + it->second.size > ptr + size)
            return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#lx, %zu): cuts the mapping at %#lx (%zu bytes): a range must "
                       "cover whole mappings", what, (unsigned long)ptr, size, (unsigned long)a, it->second.size);
        out->push_back(a);
        a += it->second.size;
    }
    *pr = r;
    return CUDA_SUCCESS;
}

/* ---- the driver functions (cuda.h's signatures) ------------------------------------------ */
CUresult sim_cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                           CUmemAllocationGranularity_flags option) {
    const char *what = "cuMemGetAllocationGranularity";
    if (!granularity) return bad(CUDA_ERROR_INVALID_VALUE, "%s: granularity is NULL", what);
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: option %d", what, (int)option);
    std::lock_guard<std::mutex> l(g_mu);
    if (CUresult r = check_prop(prop, what)) return r;
    *granularity = GRAN;
    return CUDA_SUCCESS;
}

CUresult sim_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                 unsigned long long flags) {
    const char *what = "cuMemAddressReserve";
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    (void)addr;   /* a hint */
    if (!ptr) return bad(CUDA_ERROR_INVALID_VALUE, "%s: ptr is NULL", what);
    if (flags) return bad(CUDA_ERROR_INVALID_VALUE, "%s: flags %#llx (must be 0)", what, flags);
    if (!size || size % page)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: size %zu is not a non-zero multiple of the page size", what, size);
    if (alignment & (alignment - 1))
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: alignment %zu is not a power of two", what, alignment);
    const size_t align = alignment > GRAN ? alignment : GRAN;
    if (size > SIZE_MAX - align) return bad(CUDA_ERROR_OUT_OF_MEMORY, "%s: %zu bytes", what, size);
    void *m = mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return bad(CUDA_ERROR_OUT_OF_MEMORY, "%s: no %zu bytes of address space (%s)", what, size, strerror(errno));
    const uintptr_t lo = (uintptr_t)m, base = (lo + align - 1) & ~(uintptr_t)(align - 1);
    if (base > lo) munmap(m, base - lo);
    if (lo + size + align > base + size) munmap((void *)(base + size), lo + size + align - base - size);
    std::lock_guard<std::mutex> l(g_mu);
    reservations()[base] = res_rec{size, {}};
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

CUresult sim_cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    const char *what = "cuMemAddressFree";
    std::lock_guard<std::mutex> l(g_mu);
    auto it = reservations().find((uintptr_t)ptr);
    if (it == reservations().end())
        return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#llx): not an address cuMemAddressReserve returned", what, ptr);
    if (it->second.size != size)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#llx, %zu): the reservation is %zu bytes", what, ptr, size,
                   it->second.size);
    if (!it->second.maps.empty())
        return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#llx): %zu mappings are live in it (cuMemUnmap them first)", what,
                   ptr, it->second.maps.size());
    munmap((void *)(uintptr_t)ptr, size);
    reservations().erase(it);
    return CUDA_SUCCESS;
}

CUresult sim_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                         unsigned long long flags) {
    const char *what = "cuMemCreate";
    static const bool unsupported = getenv("CUDASIM_VMM_UNSUPPORTED") && strcmp(getenv("CUDASIM_VMM_UNSUPPORTED"), "0");
    if (unsupported)   /* a device or driver without virtual memory management (some vGPU / MIG set-ups) */
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!handle) return bad(CUDA_ERROR_INVALID_VALUE, "%s: handle is NULL", what);
    if (flags) return bad(CUDA_ERROR_INVALID_VALUE, "%s: flags %#llx (must be 0)", what, flags);
    std::unique_lock<std::mutex> l(g_mu);
    if (CUresult r = check_prop(prop, what)) return r;
    if (!size || size % GRAN)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: size %zu is not a non-zero multiple of the granularity (%zu)", what,
                   size, GRAN);
    if (g_used + size > g_capacity)
        return bad(CUDA_ERROR_OUT_OF_MEMORY, "%s: %zu bytes, %zu of %zu in use (CUDASIM_MEM_MB)", what, size, g_used,
                   g_capacity);
    g_used += size;   /* claimed now, so two threads cannot both pass the check */
    l.unlock();
    const int fd = memfd_create("cudasim-vmm", MFD_CLOEXEC);
    void *m = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)size) == 0)
        m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        const int err = errno;
        if (fd >= 0) close(fd);
        l.lock();
        g_used -= size;
        return bad(CUDA_ERROR_OUT_OF_MEMORY, "%s: no host memory for %zu bytes (%s)", what, size, strerror(err));
    }
    memset(m, 0xff, size);   /* the driver's new memory is undefined: poison, as cudaMalloc's */
    munmap(m, size);
    l.lock();
    const unsigned long long h = g_next_handle++;
    handles()[h] = handle_rec{fd, size, 0, false};
    *handle = h;
    return CUDA_SUCCESS;
}

CUresult sim_cuMemRelease(CUmemGenericAllocationHandle handle) {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = handles().find(handle);
    if (it == handles().end() || it->second.released)   /* undefined in the driver; refused here */
        return bad(CUDA_ERROR_INVALID_VALUE, "cuMemRelease(%#llx): not a live handle of cuMemCreate%s", handle,
                   it != handles().end() ? " (released already)" : "");
    it->second.released = true;
    if (!it->second.maps) handle_free(handle);   /* else when its last mapping goes */
    return CUDA_SUCCESS;
}

CUresult sim_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                      unsigned long long flags) {
    const char *what = "cuMemMap";
    if (flags) return bad(CUDA_ERROR_INVALID_VALUE, "%s: flags %#llx (must be 0)", what, flags);
    std::lock_guard<std::mutex> l(g_mu);
    auto h = handles().find(handle);
    if (h == handles().end() || h->second.released)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: %#llx is not a live handle of cuMemCreate", what, handle);
    const uintptr_t p = (uintptr_t)ptr;
    if (!size || p % GRAN || size % GRAN || offset % GRAN)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#lx, %zu, offset %zu): address, size and offset must be multiples "
                   "of the granularity (%zu), size non-zero", what, (unsigned long)p, size, offset, GRAN);
    if (offset)   /* cuda.h: "offset ... currently must be zero" */
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: offset %zu: the driver documents it as currently zero", what, offset);
    if (size > h->second.size)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s: %zu bytes of a %zu-byte handle", what, size, h->second.size);
    uintptr_t base = 0;
    res_rec *r = res_of(p, &base);
    if (!r || p + size > base + r->size)
        return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#lx, %zu): not inside one reservation of cuMemAddressReserve", what,
                   (unsigned long)p, size);
    for (uintptr_t a = p; a < p + size; a += GRAN)
        if (auto *m = map_of(r, a))
            return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#lx, %zu): %#lx is mapped already (the mapping at %#lx)", what,
                       (unsigned long)p, size, (unsigned long)a, (unsigned long)m->first);
    if (mmap((void *)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->second.fd, 0) == MAP_FAILED)
        return bad(CUDA_ERROR_OUT_OF_MEMORY, "%s: mmap: %s", what, strerror(errno));
    r->maps[p] = map_rec{size, handle, {}};
    h->second.maps++;
    return CUDA_SUCCESS;
}

CUresult sim_cuMemUnmap(CUdeviceptr ptr, size_t size) {
    const char *what = "cuMemUnmap";
    std::lock_guard<std::mutex> l(g_mu);
    res_rec *r = nullptr;
    std::vector<uintptr_t> ms;
    if (CUresult e = whole_mappings((uintptr_t)ptr, size, what, &r, &ms)) return e;
    /* not stream-ordered on a GPU: work still queued on the range is undefined behaviour */
    const uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    for (CUstream_st *s : *g_streams) {
        std::lock_guard<std::mutex> sl(s->mu);
        for (auto &op : s->pend) {
            if (op.first <= s->done) continue;
            for (const cudasim_span &sp : op.second)
                if (sp.p < hi && sp.p + (sp.n ? sp.n : 1) > lo) {
                    char at[96];
                    if (sp.n) snprintf(at, sizeof at, "a copy or memset of %zu bytes at %#lx", sp.n, (unsigned long)sp.p);
                    else snprintf(at, sizeof at, "a kernel given the pointer %#lx", (unsigned long)sp.p);
                    diag("cuMemUnmap(%#lx, %zu): stream %p still has queued work on the range (operation %llu, %llu "
                         "done: %s); cuMemUnmap is not stream-ordered (synchronize first). Refused, the range stays "
                         "mapped; error made sticky", (unsigned long)lo, size, (void *)s, (unsigned long long)op.first,
                         (unsigned long long)s->done, at);
                    if (g_sticky == cudaSuccess) g_sticky = cudaErrorIllegalAddress;
                    return CUDA_ERROR_ILLEGAL_ADDRESS;
                }
        }
    }
    for (uintptr_t a : ms) {
        map_rec &m = r->maps[a];
        if (mmap((void *)a, m.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
            MAP_FAILED)
            return bad(CUDA_ERROR_OUT_OF_MEMORY, "%s: mmap: %s", what, strerror(errno));
        handle_rec &h = handles()[m.handle];
        const unsigned long long hid = m.handle;
        r->maps.erase(a);
        if (!--h.maps && h.released) handle_free(hid);
    }
    return CUDA_SUCCESS;
}

CUresult sim_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    const char *what = "cuMemSetAccess";
    if (!desc || !count) return bad(CUDA_ERROR_INVALID_VALUE, "%s: no access descriptors", what);
    std::lock_guard<std::mutex> l(g_mu);
    for (size_t i = 0; i < count; i++) {
        if (CUresult e = check_device(desc[i].location, what)) return e;
        const unsigned f = (unsigned)desc[i].flags;
        if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return bad(CUDA_ERROR_INVALID_VALUE, "%s: access flags %#x", what, f);
    }
    res_rec *r = nullptr;
    std::vector<uintptr_t> ms;
    if (CUresult e = whole_mappings((uintptr_t)ptr, size, what, &r, &ms)) return e;
    for (uintptr_t a : ms) {
        map_rec &m = r->maps[a];
        for (size_t i = 0; i < count; i++) m.access[desc[i].location.id] = desc[i].flags;
        if (mprotect((void *)a, m.size, host_prot(m)) != 0)
            return bad(CUDA_ERROR_OUT_OF_MEMORY, "%s: mprotect: %s", what, strerror(errno));
    }
    return CUDA_SUCCESS;
}

CUresult sim_cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr) {
    const char *what = "cuMemGetAccess";
    if (!flags || !location) return bad(CUDA_ERROR_INVALID_VALUE, "%s: NULL argument", what);
    std::lock_guard<std::mutex> l(g_mu);
    if (CUresult e = check_device(*location, what)) return e;
    res_rec *r = res_of((uintptr_t)ptr, nullptr);
    auto *m = r ? map_of(r, (uintptr_t)ptr) : nullptr;
    if (!m) return bad(CUDA_ERROR_INVALID_VALUE, "%s(%#llx): not mapped", what, ptr);
    auto it = m->second.access.find(location->id);
    *flags = it == m->second.access.end() ? 0 : it->second;
    return CUDA_SUCCESS;
}

#define CUDASIM_CU_ERRORS(X) X(CUDA_SUCCESS, "no error") X(CUDA_ERROR_INVALID_VALUE, "invalid argument") \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory") X(CUDA_ERROR_NOT_INITIALIZED, "initialization error") \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down") X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected") \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context") \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle") X(CUDA_ERROR_NOT_FOUND, "named symbol not found") \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered") \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted") X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

CUresult sim_cuGetErrorString(CUresult error, const char **pStr) {
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
#define CUDASIM_CU_STR_(c, s) if (error == c) { *pStr = s; return CUDA_SUCCESS; }
    CUDASIM_CU_ERRORS(CUDASIM_CU_STR_)
#undef CUDASIM_CU_STR_
    *pStr = nullptr;   /* cuda.h: an unrecognized error: NULL and CUDA_ERROR_INVALID_VALUE */
    return CUDA_ERROR_INVALID_VALUE;
}
CUresult sim_cuGetErrorName(CUresult error, const char **pStr) {
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
#define CUDASIM_CU_NAME_(c, s) if (error == c) { *pStr = #c; return CUDA_SUCCESS; }
    CUDASIM_CU_ERRORS(CUDASIM_CU_NAME_)
#undef CUDASIM_CU_NAME_
    *pStr = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
}

/* the signatures are cuda.h's, checked */
#define CUDASIM_SAME_(f) static_assert(std::is_same<decltype(&sim_##f), decltype(&::f)>::value, #f);
CUDASIM_SAME_(cuMemGetAllocationGranularity) CUDASIM_SAME_(cuMemAddressReserve) CUDASIM_SAME_(cuMemAddressFree)
CUDASIM_SAME_(cuMemCreate) CUDASIM_SAME_(cuMemRelease) CUDASIM_SAME_(cuMemMap) CUDASIM_SAME_(cuMemUnmap)
CUDASIM_SAME_(cuMemSetAccess) CUDASIM_SAME_(cuMemGetAccess) CUDASIM_SAME_(cuGetErrorString)
CUDASIM_SAME_(cuGetErrorName)
#undef CUDASIM_SAME_

struct entry { const char *name; void *fn; int since; };
const entry ENTRIES[] = {
    {"cuMemGetAllocationGranularity", (void *)&sim_cuMemGetAllocationGranularity, VMM_SINCE},
    {"cuMemAddressReserve", (void *)&sim_cuMemAddressReserve, VMM_SINCE},
    {"cuMemAddressFree", (void *)&sim_cuMemAddressFree, VMM_SINCE},
    {"cuMemCreate", (void *)&sim_cuMemCreate, VMM_SINCE},
    {"cuMemRelease", (void *)&sim_cuMemRelease, VMM_SINCE},
    {"cuMemMap", (void *)&sim_cuMemMap, VMM_SINCE},
    {"cuMemUnmap", (void *)&sim_cuMemUnmap, VMM_SINCE},
    {"cuMemSetAccess", (void *)&sim_cuMemSetAccess, VMM_SINCE},
    {"cuMemGetAccess", (void *)&sim_cuMemGetAccess, VMM_SINCE},
    {"cuGetErrorString", (void *)&sim_cuGetErrorString, 6000},
    {"cuGetErrorName", (void *)&sim_cuGetErrorName, 6000},
};

} /* namespace */

/* ---- the runtime's view (runtime_internal.h), g_mu held ---------------------------------- */
bool vmm_reserved(const void *p) { return res_of((uintptr_t)p, nullptr) != nullptr; }
bool vmm_accessible(const void *p) {
    res_rec *r = res_of((uintptr_t)p, nullptr);
    auto *m = r ? map_of(r, (uintptr_t)p) : nullptr;
    return m && host_prot(m->second) != PROT_NONE;
}
cudaError_t vmm_range(const void *p, size_t n, const char *what) {
    uintptr_t base = 0;
    res_rec *r = res_of((uintptr_t)p, &base);
    const uintptr_t lo = (uintptr_t)p, hi = lo + (n ? n : 1);
    if (!r) {
        diag("%s: %p is not device memory", what, p);
        return cudaErrorInvalidValue;
    }
    if (hi > base + r->size) {
        diag("%s: %zu bytes at %p run %zu bytes past the end of their reservation (%zu bytes at %#lx)", what, n, p,
             (size_t)(hi - base - r->size), r->size, (unsigned long)base);
        return cudaErrorInvalidValue;
    }
    for (uintptr_t a = lo; a < hi;) {
        auto *m = map_of(r, a);
        const char *why = !m ? "is not mapped (no cuMemMap)" : host_prot(m->second) == PROT_NONE
                                   ? "is mapped but not accessible (no cuMemSetAccess)" : nullptr;
        if (why) {
            diag("%s: %zu bytes at %p: %#lx %s in the reservation at %#lx (%zu bytes): an illegal address (sticky)",
                 what, n, p, (unsigned long)a, why, (unsigned long)base, r->size);
            if (g_sticky == cudaSuccess) g_sticky = cudaErrorIllegalAddress;
            return cudaErrorIllegalAddress;
        }
        a = m->first + m->second.size;
    }
    return cudaSuccess;
}

} /* namespace rt */
} /* namespace cudasim */
#pragma GCC visibility pop

using namespace cudasim::rt;

extern "C" {
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags, enum cudaDriverEntryPointQueryResult *status) {
    init();
    if (!symbol || !funcPtr) return fail(cudaErrorInvalidValue);
    *funcPtr = nullptr;
    if (flags & ~(unsigned long long)(cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream))
        return fail(cudaErrorInvalidValue);
    if ((int)cudaVersion > DRIVER_VERSION) return fail(cudaErrorInvalidValue);   /* newer than the "driver" */
    if (!g_devices) return fail(cudaErrorNoDevice);
    for (const entry &e : ENTRIES)
        if (!strcmp(e.name, symbol)) {
            if ((int)cudaVersion < e.since) {
                if (status) *status = cudaDriverEntryPointVersionNotSufficent;
                return fail(cudaErrorSymbolNotFound);
            }
            *funcPtr = e.fn;
            if (status) *status = cudaDriverEntryPointSuccess;
            return cudaSuccess;
        }
    /* cuda_runtime_api.h documents cudaSuccess with a NULL pointer; the 12.x/13.x runtimes return
     * cudaErrorSymbolNotFound. Either way the pointer is NULL and the status says so. */
    if (status) *status = cudaDriverEntryPointSymbolNotFound;
    return fail(cudaErrorSymbolNotFound);
}
cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status) {
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, DRIVER_VERSION, flags, status);
}
} /* extern "C" */
