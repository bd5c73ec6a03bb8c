/* core/cuda/common.cuh — device helpers shared by the backend's .cu files: launch geometry,
 * typed loads and stores through core/convert.h's bit conversions (the CPU's own
 * functions, compiled for the device: a value rounds to the same bits on both backends). */
#ifndef VOLT_CUDA_COMMON_CUH
#define VOLT_CUDA_COMMON_CUH
#include <cuda_runtime.h>
#include <stdint.h>
#include "core/cuda/launch.h"
#include "core/convert.h"   /* the bit conversions, compiled for the device too */

#define VOLT_CU_THREADS 256
/* Blocks for a grid-stride loop over n work items, capped at 4096 (a million threads: about
 * four waves of an H200's 132 SMs x 2048 resident threads; beyond that a thread takes
 * several items, which costs nothing in a memory-bound loop and saves block launches). A
 * fixed number, not the device's: no result may depend on the GPU it runs on. */
#define VOLT_CU_MAX_BLOCKS 4096
static inline unsigned volt_cu_blocks(int64_t n) {
    int64_t b = (n + VOLT_CU_THREADS - 1) / VOLT_CU_THREADS;
    if (b < 1) b = 1;
    return (unsigned)(b > VOLT_CU_MAX_BLOCKS ? VOLT_CU_MAX_BLOCKS : b);
}
/* p aligned to `bytes` (16 for float4 / uint4, 8 for four 16-bit values): the vector paths */
static inline bool volt_cu_aligned(const void *p, unsigned bytes) { return ((uintptr_t)p & (bytes - 1)) == 0; }
#define VOLT_CU_FOR(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                               i += (int64_t)gridDim.x * blockDim.x)
#define VOLT_CU_STREAM(s) ((cudaStream_t)(s))
#define VOLT_CU_DONE() return (int)cudaGetLastError()

/* Elementwise maps over n items: op.one(i) does item i, op.four(q) items 4q .. 4q + 3 with
 * 16-byte loads and stores (vec: the launcher checked every pointer's alignment). The tail
 * (n % 4 items) runs one by one in the grid's first threads. Each item is computed by the
 * same expression on both paths, so vec changes no bit of a result. */
template <class Op>
__global__ void k_map(Op op, int64_t n, bool vec) {
    if (!vec) {
        VOLT_CU_FOR(i, n) op.one(i);
        return;
    }
    const int64_t n4 = n >> 2;
    VOLT_CU_FOR(q, n4) op.four(q);
    const int64_t t = (n4 << 2) + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) op.one(t);
}
/* Each .cu file that maps launches it itself (the simulator's build rewrites launches in .cu
 * files only): k_map<Op><<<volt_cu_blocks(vec ? n / 4 : n), VOLT_CU_THREADS, 0, stream>>>. */
#define VCU_F4(p, q) (reinterpret_cast<float4 *>(p)[q])
#define VCU_CF4(p, q) (reinterpret_cast<const float4 *>(p)[q])

__device__ __forceinline__ float vcu_load(const void *p, int dt, int64_t i) {
    if (dt == VOLT_CU_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return __uint_as_float(dt == VOLT_CU_BF16 ? (uint32_t)h << 16 : volt__h2f(h));
}
__device__ __forceinline__ void vcu_store(void *p, int dt, int64_t i, float v) {
    if (dt == VOLT_CU_F32) { ((float *)p)[i] = v; return; }
    uint32_t u = __float_as_uint(v);
    ((uint16_t *)p)[i] = dt == VOLT_CU_BF16 ? volt__f2bf(u) : volt__f2h(u);
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
