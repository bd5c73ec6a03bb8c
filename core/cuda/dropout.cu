/* Dropout on the GPU: one thread per Philox block (four consecutive elements), the mask
 * regenerated from the counters in backward, never stored. The element -> (block, lane)
 * numbering and the u32 -> float conversion are core/cuda/philox.cuh's, so the mask is the
 * CPU backend's bit for bit. */
#include <cuda_runtime.h>
#include "core/cuda/philox.cuh"
#include "core/cuda/dropout.h"

/* elements [4 b, 4 b + 4) of n for b = block index; grid-stride over blocks. The step's RNG
 * offset c0 is read here, so a replayed graph uses each step's. */
__global__ void dropout_kernel(const float *__restrict__ x, float *y, int64_t n, float p, float scale, uint64_t c1,
                               int acc, uint64_t seed, const uint64_t *c0_dev, bool vec) {
    const uint64_t c0 = *c0_dev, key = volt_philox_key(seed, c0, c1);
    int64_t nblk = (n + 3) / 4;
    for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < nblk; b += (int64_t)gridDim.x * blockDim.x) {
        float u[4];
        volt_philox_uniform4(key, c0, c1, (uint64_t)b, u);
        int64_t e0 = 4 * b;
        int m = n - e0 < 4 ? (int)(n - e0) : 4;
        if (vec && m == 4) {   /* 16-byte loads and stores, the same expressions */
            const float4 xv = reinterpret_cast<const float4 *>(x)[b];
            const float xs[4] = {xv.x, xv.y, xv.z, xv.w};
            float ys[4];
            float4 yv = acc ? reinterpret_cast<const float4 *>(y)[b] : make_float4(0.f, 0.f, 0.f, 0.f);
            const float yo[4] = {yv.x, yv.y, yv.z, yv.w};
            for (int l = 0; l < 4; l++) {
                float v = u[l] >= p ? __fmul_rn(xs[l], scale) : 0.f;
                ys[l] = acc ? __fadd_rn(yo[l], v) : v;
            }
            reinterpret_cast<float4 *>(y)[b] = make_float4(ys[0], ys[1], ys[2], ys[3]);
            continue;
        }
        for (int l = 0; l < m; l++) {
            /* _rn: no FMA contraction, so ADD rounds as the CPU's y += x * scale */
            float v = u[l] >= p ? __fmul_rn(x[e0 + l], scale) : 0.f;
            y[e0 + l] = acc ? __fadd_rn(y[e0 + l], v) : v;
        }
    }
}

extern "C" int volt__cuda_dropout_dev(void *stream, const float *x, float *y, int64_t n, float p, uint64_t seed,
                                      const uint64_t *c0_dev, uint64_t c1, int acc) {
    if (n <= 0) return 0;
    int64_t nblk = (n + 3) / 4;
    int threads = 256;
    int64_t grid = (nblk + threads - 1) / threads;
    if (grid > 4096) grid = 4096;   /* grid-stride beyond (common.cuh's VOLT_CU_MAX_BLOCKS) */
    const bool vec = ((uintptr_t)x & 15) == 0 && ((uintptr_t)y & 15) == 0;
    float scale = 1.f / (1.f - p);
    dropout_kernel<<<(unsigned)grid, threads, 0, (cudaStream_t)stream>>>(x, y, n, p, scale, c1, acc, seed, c0_dev, vec);
    return (int)cudaGetLastError();
}
