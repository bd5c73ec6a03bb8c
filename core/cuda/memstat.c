/* Device memory high-water of the "cuda" backend, for benches and reports: what
 * torch.cuda.max_memory_allocated is to PyTorch's caching allocator. The sum of
 *   - the stream-ordered pool's used-bytes high-water (cudaMemPoolAttrUsedMemHigh: every
 *     cudaMallocAsync of backend.c: the step arena, the grad pool, optimizer states, small
 *     buffers; freed bytes the pool keeps for reuse are not counted, as torch's reserved
 *     bytes are not),
 *   - the most physical memory the VMM unit buffers held at once (vmm.c; mapped or cached
 *     granules),
 *   - the fixed allocations of the context (the cuBLASLt workspace; the scratch of a few
 *     bytes is left out).
 * The two high-waters are taken apart, so the sum can exceed the true joint peak (never
 * fall short of it). The CUDA context and the module images are not counted (torch does
 * not count them either). */
#include <stdio.h>
#include <string.h>
#include "core/cuda/cuda.h"
#include "core/cuda/memstat.h"

volt_status volt__cuda_mem_peak(volt_device *d, uint64_t *bytes, bool reset) {
    *bytes = 0;
    if (!d || !d->be || strcmp(d->be->name, "cuda")) return VOLT_ERR_INVALID_ARG;
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    cudaMemPool_t pool;
    uint64_t used = 0;
    if (cudaDeviceGetDefaultMemPool(&pool, c->ordinal) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used) != cudaSuccess) {
        cudaGetLastError();   /* not sticky: the caller says the figure is missing */
        return VOLT_ERR_BACKEND;
    }
    if (reset) {
        uint64_t zero = 0;   /* the only value the attribute takes: high-water = current */
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero);
    }
    *bytes = (uint64_t)used + volt__cuda_vmm_phys_high(c, reset) + c->workspace_bytes;
    return VOLT_OK;
}

volt_status volt__cuda_memory_stats(volt_device *d, volt_device_memory *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    cudaMemPool_t pool;
    uint64_t used = 0, used_high = 0, res = 0, res_high = 0;
    size_t fr = 0, total = 0;
    cudaError_t e = cudaDeviceGetDefaultMemPool(&pool, c->ordinal);
    if (e == cudaSuccess) e = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
    if (e == cudaSuccess) e = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_high);
    if (e == cudaSuccess) e = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &res);
    if (e == cudaSuccess) e = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &res_high);
    if (e == cudaSuccess) e = cudaMemGetInfo(&fr, &total);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* not sticky: the caller reports the figures missing */
        snprintf(err, errlen, "cuda device %d: memory figures unavailable (%s)", c->ordinal, cudaGetErrorString(e));
        return VOLT_ERR_BACKEND;
    }
    size_t phys = 0, phys_high = 0, mapped = 0, mapped_high = 0;   /* VMM: the cache is reserved, not allocated */
    volt__cuda_vmm_phys(c, &phys, &phys_high, &mapped, &mapped_high);
    const uint64_t ws = c->workspace_bytes;
    out->allocated_bytes = (int64_t)(used + mapped + ws);
    out->allocated_peak_bytes = (int64_t)(used_high + mapped_high + ws);
    out->reserved_bytes = (int64_t)((res > used ? res : used) + phys + ws);
    out->reserved_peak_bytes = (int64_t)((res_high > used_high ? res_high : used_high) + phys_high + ws);
    out->free_bytes = (int64_t)fr;
    out->total_bytes = (int64_t)total;
    return VOLT_OK;
}
