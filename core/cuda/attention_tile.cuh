/* core/cuda/attention_tile.cuh — what the attention kernels share (the design: attention_fwd.cu's
 * top comment): the head-dim tiers and their tiles, the loaders, visibility, Philox dropout, the
 * tier dispatch, and the launchers one translation unit gives another. Included by
 * attention_fwd.cu, attention_bwd.cu and attention_bwd_tc.cu after <mma.h> where they use it
 * (the simulator rewrites <mma.h> in a .cu file only). Helpers are static or inline: each .cu
 * file is its own translation unit (compiled in parallel). */
#ifndef VOLT_CUDA_ATTENTION_TILE_CUH
#define VOLT_CUDA_ATTENTION_TILE_CUH
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include "core/cuda/philox.cuh"
#include "core/cuda/attention.h"

#define BQ 32    /* query rows per block (SIMT kernels) */
#define NT 128   /* threads: 4 per query row (BK/4 keys or HD/4 dims each), or NT/BK per key */
#define TQ 64    /* query rows per block (tensor-core forward: 4 warps of 16) */

typedef volt_cuda_attn attn_p;

/* The tiling of a head-dim tier (see the top). HD = 64 is the layout the kernels were first
 * written for (BK = 64, row strides 65 floats; tensor cores: 72 16-bit elements, 68 floats).
 * Shared memory per block (f32 forward static, the rest dynamic with the attribute set),
 * in KiB at HD 32 / 64 / 128 / 256: forward 25 / 41 / 36 / 34, tensor-core forward 50 / 70 /
 * 110 / 145, dq 33 / 57 / 69 / 99, dk dv 41 / 65 / 73 / 101, tensor-core dq 72 / 96 / 144 /
 * 187, tensor-core dk dv 61 / 89 / 145 / 145: under sm_90's 227 KiB (HD 64: two blocks of
 * each tensor-core backward kernel per SM). */
template <int HD_, bool PAD_> struct tier {
    static constexpr int HD = HD_;
    static constexpr bool PAD = PAD_;
    static constexpr int LD = HD + 1;                             /* f32 row stride: rows start in different banks */
    static constexpr int BK = HD <= 64 ? 64 : HD <= 128 ? 32 : 16; /* keys per tile, SIMT kernels */
    static constexpr int PLD = BK + 1;                            /* row stride of (BQ, BK) tiles: P, Z, dS */
    static constexpr int KPT = BK / 4, DPT = HD / 4;              /* per thread of a query row: keys, dims */
    static constexpr int TPK = NT / BK, DPK = HD / TPK;           /* dk dv: threads per key, dims each */
    static constexpr int BKT = HD <= 128 ? 64 : 32;               /* keys per tile, tensor cores */
    static constexpr int TLD = HD + 8, OLD = HD + 4;              /* Q K V (16-bit), O (f32) row strides */
    static constexpr int SLD = BKT + 4, PTLD = BKT + 8;           /* S (f32), P (16-bit) row strides */
    static constexpr int TC_SMEM = (TQ + 2 * BKT) * TLD * 2 + TQ * (SLD + OLD) * 4 + TQ * PTLD * 2;
    /* tensor-core backward (attention_bwd_tc.cu): dq kernel TQ rows x BKT keys per tile; dk dv
     * kernel BKT keys (BKT / 16 warps) x QR query rows per tile; QLD, QTLD the f32 and 16-bit
     * row strides of its transposed (key, row) tiles */
    static constexpr int QR = 32, QLD = QR + 4, QTLD = QR + 8, NTK = BKT * 2;
    static constexpr int DQTC_SMEM = (2 * TQ + 2 * BKT) * TLD * 2 + 2 * TQ * SLD * 4 + TQ * PTLD * 2 + TQ * OLD * 4;
    static constexpr int DKVTC_SMEM = (2 * BKT + 2 * QR) * TLD * 2 + 2 * BKT * QLD * 4 + 2 * BKT * QTLD * 2 +
                                      2 * BKT * OLD * 4;
    static constexpr int DQ_SMEM = 4 * (2 * BQ * LD + BQ * PLD + 2 * BK * LD);
    static constexpr int DKV_SMEM = 4 * (2 * BK * LD + 2 * BQ * LD + 2 * BQ * PLD + 2 * BQ);
    static_assert(HD % 16 == 0 && BK % 4 == 0 && NT % BK == 0 && HD % TPK == 0, "tier tiling");
    static_assert(TC_SMEM <= 227 * 1024 && DQ_SMEM <= 227 * 1024 && DKV_SMEM <= 227 * 1024, "sm_90 shared memory");
    static_assert(DQTC_SMEM <= 227 * 1024 && DKVTC_SMEM <= 227 * 1024, "sm_90 shared memory (tensor-core backward)");
};
/* The tensor-core forward's template argument: a tier and the 16-bit type (one parameter,
 * so a launch names one template argument). */
template <class C, typename T_> struct tc_tier : C { typedef T_ T; };

/* The head dim: the tier's width, or the node's when padded. */
template <class C> __device__ __forceinline__ int64_t hdim(const attn_p &a) { return C::PAD ? a.D : C::HD; }
/* Column d is one of the tensor's (not padding). */
template <class C> __device__ __forceinline__ bool col_ok(const attn_p &a, int d) { return !C::PAD || d < a.D; }

__device__ __forceinline__ float rnd(float x, int cd) {
    if (cd == 1) return __bfloat162float(__float2bfloat16_rn(x));
    if (cd == 2) return __half2float(__float2half_rn(x));
    return x;
}

/* Element offset of row 0 of block bh (= b H + h) in q, k, v, o or a grad with T rows per
 * head of D columns: (B, H, T, D), or packed (B, T, H*D) with rows a.ld apart
 * (volt_attention_heads). */
__device__ __forceinline__ int64_t blk_off(const attn_p &a, int64_t bh, int64_t T, int64_t D) {
    return a.packed ? (bh / a.H) * T * a.ld + (bh % a.H) * D : bh * T * D;
}

__device__ __forceinline__ bool key_ok(const attn_p &a, int64_t b, int64_t j) {
    int64_t t = b * a.Tk + j;
    switch (a.mask_dtype) {
    case 1: return ((const uint8_t *)a.mask)[t] != 0;
    case 2: return ((const int32_t *)a.mask)[t] != 0;
    case 3: return ((const int64_t *)a.mask)[t] != 0;
    default: return true;
    }
}

/* q, k, v: f32, rounded to the compute dtype on load, or (a.qkv16) the forward's 16-bit
 * copies of them, whose stored bits are that rounding. qkv_blk: a block's base (element
 * offset off); ldx: element idx from it as the rounding, in f32. */
__device__ __forceinline__ const void *qkv_blk(const attn_p &a, const void *p, int64_t off) {
    return (const char *)p + off * (a.qkv16 ? 2 : 4);
}
__device__ __forceinline__ float ldx(const attn_p &a, const void *p, int64_t idx) {
    if (!a.qkv16) return rnd(((const float *)p)[idx], a.compute);
    const uint16_t h = ((const uint16_t *)p)[idx];
    return a.compute == 1 ? __uint_as_float((uint32_t)h << 16) : __half2float(__ushort_as_half(h));
}
/* y of a pair: v (a q/k/v operand) or dO (f32, rounded) */
__device__ __forceinline__ float ldy(const attn_p &a, const void *p, bool qkv, int64_t idx) {
    return qkv ? ldx(a, p, idx) : rnd(((const float *)p)[idx], a.compute);
}

/* Rows [r0, r0 + n) of two tensors with T rows (a.ld apart: k and v, or q and dO — y_qkv
 * says which) into shared tiles of C::LD floats per row, read as the compute dtype's
 * roundings; rows past T and padding columns are 0. Block-wide: every thread of the block
 * takes part. */
template <class C>
__device__ __forceinline__ void load_pair(const attn_p &a, const void *x, const void *y, bool y_qkv, int64_t r0,
                                          int64_t T, int n, float *xs, float *ys) {
    for (int t = threadIdx.x; t < n * C::HD; t += NT) {
        int rr = t / C::HD, d = t % C::HD;
        int64_t i = r0 + rr;
        xs[rr * C::LD + d] = i < T && col_ok<C>(a, d) ? ldx(a, x, i * a.ld + d) : 0.f;
        ys[rr * C::LD + d] = i < T && col_ok<C>(a, d) ? ldy(a, y, y_qkv, i * a.ld + d) : 0.f;
    }
}

/* 1 + index of batch row b's last visible key (0 if none): key tiles past it are skipped.
 * Block-wide; every thread gets the value. */
static __device__ int64_t kv_len(const attn_p &a, int64_t b) {
    if (!a.mask) return a.Tk;
    __shared__ int L;
    if (threadIdx.x == 0) L = 0;
    __syncthreads();
    int mine = 0;
    for (int64_t j = threadIdx.x; j < a.Tk; j += blockDim.x)
        if (key_ok(a, b, j)) mine = (int)j + 1;
    atomicMax(&L, mine);
    __syncthreads();
    int r = L;
    __syncthreads();
    return r;
}

__device__ __forceinline__ bool visible(const attn_p &a, int64_t b, int64_t i, int64_t j, int64_t kend) {
    return i < a.Tq && j < kend && (!a.causal || j <= i) && key_ok(a, b, j);
}

/* The dropout factor of stream element e: (u >= p) / (1 - p). The last Philox block drawn is
 * kept: a thread walks consecutive keys, so one block serves four of them. */
struct drop_cache { uint64_t blk; float u[4]; };
__device__ __forceinline__ float drop_factor(const attn_p &a, drop_cache &c, uint64_t e, float inv_keep) {
    uint64_t blk = e >> 2;
    if (blk != c.blk) {
        c.blk = blk;
        const uint64_t c0 = a.c0_dev ? *a.c0_dev : a.c0;
        volt_philox_uniform4(a.c0_dev ? volt_philox_key(a.seed, c0, a.c1) : a.key, c0, a.c1, blk, c.u);
    }
    const unsigned m = (unsigned)(e & 3);   /* selects, not c.u[m]: keeps the cache in registers */
    const float u = m == 0 ? c.u[0] : m == 1 ? c.u[1] : m == 2 ? c.u[2] : c.u[3];
    return u >= a.p ? inv_keep : 0.f;
}

/* Keys a block of query rows [i0, i0 + BQ) can see at most. */
__device__ __forceinline__ int64_t key_end(const attn_p &a, int64_t L, int64_t i0) {
    int64_t i1 = i0 + BQ < a.Tq ? i0 + BQ : a.Tq;
    return a.causal && i1 < L ? i1 : L;
}

/* A grad element as its mode says: 1 store, 2 add. */
__device__ __forceinline__ void put(float *dst, float x, int mode) {
    if (mode == 2) *dst += x;
    else *dst = x;
}

/* The 16-bit type of a compute code's roundings (tensor cores). */
template <typename T> __device__ __forceinline__ T to16(float x);
template <> __device__ __forceinline__ __nv_bfloat16 to16<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half to16<__half>(float x) { return __float2half_rn(x); }


/* f(tier) for head dim D: the exact tiers first (64, the flagship, before all), then the
 * smallest padded tier that holds D. The caller (attention_op.c) refused D outside
 * 1..VOLT_CUDA_ATTN_MAX_D. */
template <class F> static inline int by_tier(int64_t D, F f) {
    if (D == 64) return f(tier<64, false>());
    if (D == 32) return f(tier<32, false>());
    if (D == 128) return f(tier<128, false>());
    if (D < 1 || D > VOLT_CUDA_ATTN_MAX_D) return (int)cudaErrorInvalidValue;
    if (D < 32) return f(tier<32, true>());
    if (D < 64) return f(tier<64, true>());
    if (D < 128) return f(tier<128, true>());
    return f(tier<256, true>());
}


/* The tensor-core backward (attention_bwd_tc.cu) for a 16-bit compute node, after delta is
 * computed: dq, then dk and dv, as volt__cuda_attention_bwd's modes say. */
int volt__cuda_attn_bwd_tc(cudaStream_t st, const attn_p &a, const void *q, const void *k, const void *v,
                           const float *dout, const float *lse, const float *delta, float *dq, int dq_mode, float *dk,
                           int dk_mode, float *dv, int dv_mode);
#endif
