/* core/cuda/common.cuh — device helpers shared by the backend's .cu files: launch geometry,
 * the f32 <-> bf16/f16 bit conversions (the formulas of core/cpu/convert.h, so a value
 * rounds to the same bits on both backends), typed loads and stores. */
#ifndef VOLT_CUDA_COMMON_CUH
#define VOLT_CUDA_COMMON_CUH
#include <cuda_runtime.h>
#include <stdint.h>
#include "core/cuda/launch.h"

#define VOLT_CU_THREADS 256
/* Blocks for a grid-stride loop over n elements (capped: the loops stride). */
static inline unsigned volt_cu_blocks(int64_t n) {
    int64_t b = (n + VOLT_CU_THREADS - 1) / VOLT_CU_THREADS;
    if (b < 1) b = 1;
    return (unsigned)(b > 65535 * 4 ? 65535 * 4 : b);
}
#define VOLT_CU_FOR(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                               i += (int64_t)gridDim.x * blockDim.x)
#define VOLT_CU_STREAM(s) ((cudaStream_t)(s))
#define VOLT_CU_DONE() return (int)cudaGetLastError()

__device__ __forceinline__ uint32_t vcu_sel(uint32_t mask, uint32_t a, uint32_t b) { return (mask & a) | (~mask & b); }
__device__ __forceinline__ uint32_t vcu_mask(bool c) { return 0u - (uint32_t)c; }
__device__ __forceinline__ uint16_t vcu_f2bf(uint32_t u) {
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t q = (u >> 16) | 0x40u;
    return (uint16_t)vcu_sel(0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u), q, r);
}
__device__ __forceinline__ uint16_t vcu_f2h(uint32_t x) {
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    uint32_t sub = __float_as_uint(__fadd_rn(__uint_as_float(a), 0.5f)) - 0x3f000000u;
    uint32_t big = vcu_sel(vcu_mask(a > 0x7f800000u), 0x7e00u | ((a >> 13) & 0x3ffu), 0x7c00u);
    uint32_t r = vcu_sel(vcu_mask(a >= 0x47800000u), big, vcu_sel(vcu_mask(a < 0x38800000u), sub, norm));
    return (uint16_t)(r | sign);
}
__device__ __forceinline__ uint32_t vcu_h2f(uint16_t h) {
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    uint32_t e = o & 0x0f800000u;
    uint32_t normal = o + 0x38000000u;
    uint32_t special = (o + 0x70000000u) | (vcu_mask((o & 0x007fe000u) != 0) & 0x00400000u);
    uint32_t sub = __float_as_uint(__fsub_rn(__uint_as_float(o + 0x38800000u), __uint_as_float(0x38800000u)));
    uint32_t r = vcu_sel(vcu_mask(e == 0x0f800000u), special, vcu_sel(vcu_mask(e == 0), sub, normal));
    return r | (((uint32_t)h & 0x8000u) << 16);
}
/* element i of a float buffer of dtype dt (VOLT_CU_*) as f32, and the store back */
__device__ __forceinline__ float vcu_load(const void *p, int dt, int64_t i) {
    if (dt == VOLT_CU_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return __uint_as_float(dt == VOLT_CU_BF16 ? (uint32_t)h << 16 : vcu_h2f(h));
}
__device__ __forceinline__ void vcu_store(void *p, int dt, int64_t i, float v) {
    if (dt == VOLT_CU_F32) { ((float *)p)[i] = v; return; }
    uint32_t u = __float_as_uint(v);
    ((uint16_t *)p)[i] = dt == VOLT_CU_BF16 ? vcu_f2bf(u) : vcu_f2h(u);
}
__device__ __forceinline__ int64_t vcu_index(const void *t, bool is64, int64_t i) {
    return is64 ? ((const int64_t *)t)[i] : (int64_t)((const int32_t *)t)[i];
}

/* Block-wide sums (blockDim.x a multiple of 32, at most 1024): every thread gets the total.
 * Fixed tree: the same bits for the same inputs and block size. */
__device__ __forceinline__ float vcu_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double vcu_warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float vcu_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
template <typename T, T (*WARP)(T)>
__device__ __forceinline__ T vcu_block_reduce(T v, T *sh /* 33 entries */, T ident) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = WARP(v);
    __syncthreads();   /* sh may still be read by a previous reduction */
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : ident;
    if (warp == 0) v = WARP(v);
    if (threadIdx.x == 0) sh[32] = v;
    __syncthreads();
    return sh[32];
}
#endif
