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
