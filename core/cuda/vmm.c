/* Device memory that really shrinks (issue 12): the param store's unit buffers (the
 * backend's alloc_givable) are a reserved virtual range mapped granule by granule with the
 * CUDA virtual memory management API, so give_back unmaps the whole granules of a range
 * (fsdp's non-owned values after use, zero2's non-owned grads after the reduce-scatter) and
 * recommit maps fresh ones at the same addresses (the tape's saved tensors keep pointing
 * there). Other allocations stay in the stream-ordered pool (backend.c).
 *
 * The driver API is reached through the runtime (cudaGetDriverEntryPointByVersion), so the
 * library still links only the static cudart. No entry point, no granularity, or a trial
 * cuMemCreate of one granule at init that fails: VMM is off for the device (no
 * VOLT_DEV_GIVE_BACK), and alloc_givable is the pool's alloc (give_back then zeroes).
 *
 * Ordering. Unmapping is not stream-ordered, so give_back zeroes the partial granules on
 * the stream, marks the whole ones pending and records an event; a pending granule is
 * unmapped once its event has completed (polled at the next give_back, recommit, alloc,
 * synchronize or report; never waited for in the hot path). Each pending mark carries the
 * sequence number of its give_back, so a granule recommitted and given back again is
 * unmapped only after its newest event. recommit cancels a pending granule (it is still
 * mapped: zeroed on the stream) or maps a fresh one and zeroes it on the stream.
 *
 * Graphs. A captured step replays without the host, so while a capture is running or any
 * captured graph exists, give_back only zeroes (on the stream: captured) and never unmaps;
 * recommit may still map (host side, before the graph is instantiated).
 *
 * Physical granules are kept for reuse in a small cache (at most the largest buffer's
 * granule count: about one unit, the "+ U" of fsdp's formula), so an fsdp step re-maps
 * without creating; the rest goes back to the driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include "core/cuda/cuda.h"

typedef CUresult (*pfn_gran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*pfn_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*pfn_addr_free)(CUdeviceptr, size_t);
typedef CUresult (*pfn_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*pfn_release)(CUmemGenericAllocationHandle);
typedef CUresult (*pfn_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*pfn_unmap)(CUdeviceptr, size_t);
typedef CUresult (*pfn_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);

typedef struct vmm_block {
    uintptr_t base;
    size_t span;                          /* reserved: n granules */
    int n;
    CUmemGenericAllocationHandle *h;      /* per granule; 0 = not mapped */
    uint32_t *pending;                    /* per granule: seq of the give_back waiting to unmap it; 0 = none */
    struct vmm_block *next;
} vmm_block;

typedef struct vmm_pend { vmm_block *b; int first, count; uint32_t seq; cudaEvent_t ev; } vmm_pend;

struct volt_cuda_vmm {
    pfn_gran gran_fn;
    pfn_reserve reserve;
    pfn_addr_free addr_free;
    pfn_create create;
    pfn_release release;
    pfn_map map;
    pfn_unmap unmap;
    pfn_access access;
    size_t gran;
    CUmemAllocationProp prop;
    CUmemAccessDesc acc;
    vmm_block *blocks;
    vmm_pend *pend;                       /* give_backs whose event has not completed */
    int n_pend, cap_pend;
    cudaEvent_t *events;                  /* free events for pend */
    int n_events, cap_events;
    CUmemGenericAllocationHandle *cache;  /* unmapped physical granules kept for reuse */
    int n_cache, cap_cache;
    uint32_t seq;
    size_t phys, phys_high;               /* physical bytes created and not released (cache included), its high-water */
    size_t mapped_high;                   /* the most bytes mapped into unit buffers at once (phys less the cache) */
};

static bool load(const char *sym, void **fn) {
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    *fn = NULL;
    if (cudaGetDriverEntryPointByVersion(sym, fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !*fn) {
        cudaGetLastError();
        *fn = NULL;
        return false;
    }
    return true;
}

void volt__cuda_vmm_init(volt_cuda_ctx *c) {
    const char *env = getenv("VOLT_CUDA_VMM");
    if (env && !strcmp(env, "0")) return;
    volt_cuda_vmm *v = calloc(1, sizeof *v);
    if (!v) return;
    bool ok = load("cuMemGetAllocationGranularity", (void **)&v->gran_fn) && load("cuMemAddressReserve", (void **)&v->reserve) &&
              load("cuMemAddressFree", (void **)&v->addr_free) && load("cuMemCreate", (void **)&v->create) &&
              load("cuMemRelease", (void **)&v->release) && load("cuMemMap", (void **)&v->map) &&
              load("cuMemUnmap", (void **)&v->unmap) && load("cuMemSetAccess", (void **)&v->access);
    v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    v->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    v->prop.location.id = c->ordinal;
    v->acc.location = v->prop.location;
    v->acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (ok) ok = v->gran_fn(&v->gran, &v->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && v->gran > 0;
    if (ok) {   /* one granule made and released: a device or driver without VMM says so here, not at a unit's first
                 * map (where alloc_givable would fall back to the pool while GIVE_BACK is advertised) */
        CUmemGenericAllocationHandle h = 0;
        ok = v->create(&h, v->gran, &v->prop, 0) == CUDA_SUCCESS;
        if (ok) v->release(h);
    }
    if (!ok) { free(v); return; }
    c->vmm = v;
}

static void put_event(volt_cuda_vmm *v, cudaEvent_t e) {
    if (v->n_events == v->cap_events) {
        int cap = v->cap_events ? 2 * v->cap_events : 16;
        cudaEvent_t *t = realloc(v->events, sizeof *t * (size_t)cap);
        if (!t) { cudaEventDestroy(e); return; }
        v->events = t;
        v->cap_events = cap;
    }
    v->events[v->n_events++] = e;
}

/* One granule's physical memory: from the cache, else a new one. */
static void note_mapped(volt_cuda_vmm *v) {
    const size_t m = v->phys - (size_t)v->n_cache * v->gran;
    if (m > v->mapped_high) v->mapped_high = m;
}
static CUresult get_phys(volt_cuda_vmm *v, CUmemGenericAllocationHandle *h) {
    if (v->n_cache) { *h = v->cache[--v->n_cache]; note_mapped(v); return CUDA_SUCCESS; }
    const CUresult r = v->create(h, v->gran, &v->prop, 0);
    if (r == CUDA_SUCCESS && (v->phys += v->gran) > v->phys_high) v->phys_high = v->phys;
    if (r == CUDA_SUCCESS) note_mapped(v);
    return r;
}
/* Keep it for reuse while the cache has room, else back to the driver. */
static void put_phys(volt_cuda_vmm *v, CUmemGenericAllocationHandle h) {
    if (v->n_cache < v->cap_cache) v->cache[v->n_cache++] = h;
    else { v->release(h); v->phys -= v->gran; }
}

static void unmap_granule(volt_cuda_ctx *c, vmm_block *b, int i) {
    volt_cuda_vmm *v = c->vmm;
    if (!b->h[i]) return;
    CUresult r = v->unmap((CUdeviceptr)(b->base + (size_t)i * v->gran), v->gran);
    if (r != CUDA_SUCCESS) { if (!c->error) c->error = (int)cudaErrorUnknown; return; }
    put_phys(v, b->h[i]);
    b->h[i] = 0;
    b->pending[i] = 0;
}

static CUresult map_granule(volt_cuda_ctx *c, vmm_block *b, int i) {
    volt_cuda_vmm *v = c->vmm;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = get_phys(v, &h);
    if (r != CUDA_SUCCESS) return r;
    const CUdeviceptr at = (CUdeviceptr)(b->base + (size_t)i * v->gran);
    if ((r = v->map(at, v->gran, 0, h, 0)) != CUDA_SUCCESS) { put_phys(v, h); return r; }
    if ((r = v->access(at, v->gran, &v->acc, 1)) != CUDA_SUCCESS) { v->unmap(at, v->gran); put_phys(v, h); return r; }
    b->h[i] = h;
    return CUDA_SUCCESS;
}

/* Unmap the granules whose give_back has completed on the stream; wait = block for them.
 * Nothing while the stream is captured: cudaEventQuery / cudaEventSynchronize are "unsafe"
 * calls in a thread-local capture (cuda_runtime_api.h): they would invalidate it and leave the
 * device failed. The give_backs stay pending until a poll after the capture. */
static void poll(volt_cuda_ctx *c, bool wait) {
    if (c->cap) return;
    volt_cuda_vmm *v = c->vmm;
    int keep = 0;
    for (int k = 0; k < v->n_pend; k++) {
        vmm_pend *p = &v->pend[k];
        cudaError_t e = wait ? cudaEventSynchronize(p->ev) : cudaEventQuery(p->ev);
        if (e == cudaErrorNotReady) { v->pend[keep++] = *p; continue; }
        if (e != cudaSuccess) {
            cudaGetLastError();
            if (!c->error) c->error = (int)e;
            v->pend[keep++] = *p;   /* the device failed: keep the memory mapped */
            continue;
        }
        for (int i = p->first; i < p->first + p->count; i++)
            if (p->b->pending[i] == p->seq) unmap_granule(c, p->b, i);
        put_event(v, p->ev);
    }
    v->n_pend = keep;
}

static vmm_block *find(volt_cuda_vmm *v, const void *p) {
    const uintptr_t a = (uintptr_t)p;
    for (vmm_block *b = v->blocks; b; b = b->next)
        if (a >= b->base && a < b->base + b->span) return b;
    return NULL;
}

void *volt__cuda_vmm_alloc(volt_cuda_ctx *c, size_t bytes) {
    volt_cuda_vmm *v = c->vmm;
    if (!v || bytes < v->gran) return NULL;   /* the pool's */
    if (v->n_pend) poll(c, false);
    const int n = (int)((bytes + v->gran - 1) / v->gran);
    vmm_block *b = calloc(1, sizeof *b);
    if (b) {
        b->h = calloc((size_t)n, sizeof *b->h);
        b->pending = calloc((size_t)n, sizeof *b->pending);
    }
    if (n > v->cap_cache) {   /* the cache holds up to one buffer's granules */
        CUmemGenericAllocationHandle *t = realloc(v->cache, sizeof *t * (size_t)n);
        if (t) { v->cache = t; v->cap_cache = n; }
    }
    CUdeviceptr base = 0;
    if (!b || !b->h || !b->pending || v->reserve(&base, (size_t)n * v->gran, v->gran, 0, 0) != CUDA_SUCCESS) {
        if (b) { free(b->h); free(b->pending); free(b); }
        return NULL;
    }
    b->base = (uintptr_t)base;
    b->span = (size_t)n * v->gran;
    b->n = n;
    for (int i = 0; i < n; i++)
        if (map_granule(c, b, i) != CUDA_SUCCESS) {
            for (int j = 0; j < i; j++) unmap_granule(c, b, j);
            v->addr_free(base, b->span);
            free(b->h); free(b->pending); free(b);
            return NULL;
        }
    b->next = v->blocks;
    v->blocks = b;
    return (void *)b->base;
}

bool volt__cuda_vmm_free(volt_cuda_ctx *c, void *p) {
    volt_cuda_vmm *v = c->vmm;
    vmm_block *b = v ? find(v, p) : NULL;
    if (!b) return false;
    cudaStreamSynchronize(c->stream);   /* unmapping is not stream-ordered (frees of unit buffers are rare) */
    cudaGetLastError();
    poll(c, false);
    int keep = 0;
    for (int k = 0; k < v->n_pend; k++) {   /* what still waits for this block: already synchronized */
        if (v->pend[k].b != b) v->pend[keep++] = v->pend[k];
        else put_event(v, v->pend[k].ev);
    }
    v->n_pend = keep;
    for (int i = 0; i < b->n; i++) unmap_granule(c, b, i);
    v->addr_free((CUdeviceptr)b->base, b->span);
    for (vmm_block **pp = &v->blocks; *pp; pp = &(*pp)->next)
        if (*pp == b) { *pp = b->next; break; }
    free(b->h); free(b->pending); free(b);
    return true;
}

/* [lo, hi) granule indices wholly inside [p, p+bytes). */
static void inner(const volt_cuda_vmm *v, const vmm_block *b, const void *p, size_t bytes, int *lo, int *hi) {
    const uintptr_t a = (uintptr_t)p - b->base, e = a + bytes;
    *lo = (int)((a + v->gran - 1) / v->gran);
    *hi = (int)(e / v->gran);
    if (*hi > b->n) *hi = b->n;
    if (*hi < *lo) *hi = *lo;
}

bool volt__cuda_vmm_give_back(volt_cuda_ctx *c, void *p, size_t bytes) {
    volt_cuda_vmm *v = c->vmm;
    vmm_block *b = v ? find(v, p) : NULL;
    if (!b) return false;
    int lo, hi;
    inner(v, b, p, bytes, &lo, &hi);
    const uintptr_t a = (uintptr_t)p, ga = b->base + (size_t)lo * v->gran, gb = b->base + (size_t)hi * v->gran;
    if (lo == hi || c->cap || c->n_graphs > 0) {   /* nothing whole, or a graph may replay over it: zeros only */
        if (cudaMemsetAsync(p, 0, bytes, c->stream) != cudaSuccess && !c->error) c->error = (int)cudaGetLastError();
        return true;
    }
    if (ga > a && cudaMemsetAsync(p, 0, ga - a, c->stream) != cudaSuccess && !c->error) c->error = (int)cudaGetLastError();
    if (a + bytes > gb && cudaMemsetAsync((void *)gb, 0, a + bytes - gb, c->stream) != cudaSuccess && !c->error)
        c->error = (int)cudaGetLastError();
    if (v->n_pend) poll(c, false);
    cudaEvent_t ev = NULL;
    if (v->n_events) ev = v->events[--v->n_events];
    else if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) ev = NULL;
    if (v->n_pend == v->cap_pend) {
        int cap = v->cap_pend ? 2 * v->cap_pend : 16;
        vmm_pend *t = realloc(v->pend, sizeof *t * (size_t)cap);
        if (t) { v->pend = t; v->cap_pend = cap; }
    }
    if (!ev || v->n_pend == v->cap_pend || cudaEventRecord(ev, c->stream) != cudaSuccess) {   /* cannot wait: zeros only */
        cudaGetLastError();
        if (ev) put_event(v, ev);
        if (cudaMemsetAsync((void *)ga, 0, gb - ga, c->stream) != cudaSuccess && !c->error) c->error = (int)cudaGetLastError();
        return true;
    }
    if (++v->seq == 0) v->seq = 1;
    for (int i = lo; i < hi; i++)
        if (b->h[i]) b->pending[i] = v->seq;
    v->pend[v->n_pend++] = (vmm_pend){ b, lo, hi - lo, v->seq, ev };
    return true;
}

int volt__cuda_vmm_recommit(volt_cuda_ctx *c, void *p, size_t bytes) {
    volt_cuda_vmm *v = c->vmm;
    vmm_block *b = v ? find(v, p) : NULL;
    if (!b) return 0;
    if (v->n_pend) poll(c, false);
    const uintptr_t a = (uintptr_t)p - b->base;
    const int lo = (int)(a / v->gran);
    int hi = (int)((a + bytes + v->gran - 1) / v->gran);
    if (hi > b->n) hi = b->n;
    for (int i = lo; i < hi; i++) {
        void *at = (void *)(b->base + (size_t)i * v->gran);
        if (b->h[i] && !b->pending[i]) continue;   /* never given back */
        if (b->h[i]) b->pending[i] = 0;            /* still mapped: cancel the unmap */
        else {
            CUresult r = map_granule(c, b, i);
            if (r == CUDA_ERROR_OUT_OF_MEMORY && v->n_pend) {   /* memory waiting to be unmapped: wait for it */
                poll(c, true);
                r = map_granule(c, b, i);
            }
            if (r != CUDA_SUCCESS) return r == CUDA_ERROR_OUT_OF_MEMORY ? (int)cudaErrorMemoryAllocation : (int)cudaErrorUnknown;
        }
        if (cudaMemsetAsync(at, 0, v->gran, c->stream) != cudaSuccess) return (int)cudaGetLastError();
    }
    return 0;
}

int64_t volt__cuda_vmm_resident(volt_cuda_ctx *c, const void *p, size_t bytes) {
    volt_cuda_vmm *v = c->vmm;
    vmm_block *b = v ? find(v, p) : NULL;
    if (!b) return -1;
    if (v->n_pend) poll(c, true);   /* a report: let queued give_backs finish (not while capturing) */
    const uintptr_t a = (uintptr_t)p - b->base, e = a + bytes;
    int64_t n = 0;
    for (int i = (int)(a / v->gran); i < b->n && (uintptr_t)i * v->gran < e; i++) {
        if (!b->h[i] || b->pending[i]) continue;
        const uintptr_t ga = (uintptr_t)i * v->gran, gb = ga + v->gran;
        n += (int64_t)((gb < e ? gb : e) - (ga > a ? ga : a));
    }
    return n;
}

void volt__cuda_vmm_sync(volt_cuda_ctx *c) {
    if (c->vmm && c->vmm->n_pend) poll(c, false);
}

size_t volt__cuda_vmm_granule(const volt_cuda_ctx *c) { return c->vmm ? c->vmm->gran : 0; }

size_t volt__cuda_vmm_phys_high(volt_cuda_ctx *c, bool reset) {
    if (!c->vmm) return 0;
    const size_t h = c->vmm->phys_high;
    if (reset) c->vmm->phys_high = c->vmm->phys;
    return h;
}

void volt__cuda_vmm_phys(const volt_cuda_ctx *c, size_t *phys, size_t *phys_high, size_t *mapped, size_t *mapped_high) {
    const volt_cuda_vmm *v = c->vmm;
    *phys = v ? v->phys : 0;
    *phys_high = v ? v->phys_high : 0;
    *mapped = v ? v->phys - (size_t)v->n_cache * v->gran : 0;
    *mapped_high = v ? v->mapped_high : 0;
}

void volt__cuda_vmm_release(volt_cuda_ctx *c) {
    volt_cuda_vmm *v = c->vmm;
    if (!v) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    while (v->blocks) volt__cuda_vmm_free(c, (void *)v->blocks->base);
    for (int k = 0; k < v->n_pend; k++) cudaEventDestroy(v->pend[k].ev);
    for (int k = 0; k < v->n_events; k++) cudaEventDestroy(v->events[k]);
    for (int k = 0; k < v->n_cache; k++) v->release(v->cache[k]);
    free(v->pend); free(v->events); free(v->cache);
    free(v);
    c->vmm = NULL;
}
