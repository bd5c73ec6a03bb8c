/* Fused scaled dot-product attention on the GPU, FlashAttention-2 style, any head dim 1..256.
 *
 * Forward: a block owns BQ query rows of one (b, h) and walks key tiles of BK keys, keeping
 * the running row max m, row sum l and the output accumulator (online softmax); no (Tq, Tk)
 * matrix is ever stored. It writes o = acc / l and lse = m + log l (per row, for backward).
 * Backward: delta = rowsum(dO * o) first; then P = exp(scale q k^T - lse) is recomputed per
 * tile, twice: by a kernel over query tiles that accumulates dq, and by one over key tiles
 * that accumulates dk and dv. Every grad element is summed by one thread in a fixed order
 * (no atomics), so results are deterministic: eager and graph replay give the same bits.
 *
 * Head dims: every kernel is a template on a tier (HD, PAD): HD = 32, 64, 128 or 256 is the
 * width the tiling is built for, and a head dim D is run on the smallest tier with HD >= D.
 * D = 32, 64, 128 are exact (PAD false: the code of a fixed-width kernel, nothing checked per
 * column). Any other D is padded with zero columns (PAD true): loads read column d < D and
 * give 0 past it, stores write d < D only. Zero columns add exactly 0 to q k^T (and to
 * rowsum(dO o)); their o, dq, dk, dv columns are 0 and never written; so a padded D computes
 * what an exact kernel for D would, at the cost of the tier's width (D = 8 does the work of
 * 32, D = 80 of 128). Chosen over a D-generic kernel: one code path per kernel to keep
 * correct, tensor cores for every D (wmma needs multiples of 16), and the unpadded tiers
 * unchanged. Tiles shrink as HD grows to keep shared memory in bounds (struct tier).
 *
 * Semantics are core/cpu/attention.c's: key j is visible to row i iff the key mask allows
 * it (and j <= i when causal); a row that sees no key gets o = 0, lse = -inf and no grad.
 * Attention dropout: element ((b H + h) Tq + i) Tk + j of the call's Philox stream (the
 * numbering of volt_dropout on the (B, H, Tq, Tk) probabilities) gives u; the probability is
 * kept, times 1/(1-p), iff u >= p. The row sum l is taken before dropping (softmax, then
 * dropout). Backward: dv = Z^T dO, dS = P * (dP * W - delta), Z = P * W.
 * 16-bit compute (bf16/f16): q, k, v and dO are read as their round-to-nearest-even
 * roundings, the arithmetic is f32 (as the CPU backend does). The forward of a 16-bit
 * compute node runs on tensor cores (attn_fwd_tc: wmma 16x16x16 in bf16 or f16, f32
 * accumulation; P is rounded to 16 bits for P v); the f32 forward and the backward are SIMT
 * kernels (docs/CUDA.md). */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <mma.h>
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
 * 110 / 145, dq 33 / 57 / 69 / 99, dk dv 41 / 65 / 73 / 101: under sm_90's 227 KiB. */
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
    static constexpr int DQ_SMEM = 4 * (2 * BQ * LD + BQ * PLD + 2 * BK * LD);
    static constexpr int DKV_SMEM = 4 * (2 * BK * LD + 2 * BQ * LD + 2 * BQ * PLD + 2 * BQ);
    static_assert(HD % 16 == 0 && BK % 4 == 0 && NT % BK == 0 && HD % TPK == 0, "tier tiling");
    static_assert(TC_SMEM <= 227 * 1024 && DQ_SMEM <= 227 * 1024 && DKV_SMEM <= 227 * 1024, "sm_90 shared memory");
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

/* Rows [r0, r0 + n) of two tensors with T rows (a.ld apart: k and v, or q and dO) into shared
 * tiles of C::LD floats per row, read as the compute dtype's roundings; rows past T and
 * padding columns are 0. Block-wide: every thread of the block takes part. */
template <class C>
__device__ __forceinline__ void load_pair(const attn_p &a, const float *x, const float *y, int64_t r0, int64_t T, int n,
                                          float *xs, float *ys) {
    for (int t = threadIdx.x; t < n * C::HD; t += NT) {
        int rr = t / C::HD, d = t % C::HD;
        int64_t i = r0 + rr;
        xs[rr * C::LD + d] = i < T && col_ok<C>(a, d) ? rnd(x[i * a.ld + d], a.compute) : 0.f;
        ys[rr * C::LD + d] = i < T && col_ok<C>(a, d) ? rnd(y[i * a.ld + d], a.compute) : 0.f;
    }
}

/* 1 + index of batch row b's last visible key (0 if none): key tiles past it are skipped.
 * Block-wide; every thread gets the value. */
__device__ int64_t kv_len(const attn_p &a, int64_t b) {
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
    return c.u[e & 3] >= a.p ? inv_keep : 0.f;
}

/* Keys a block of query rows [i0, i0 + BQ) can see at most. */
__device__ __forceinline__ int64_t key_end(const attn_p &a, int64_t L, int64_t i0) {
    int64_t i1 = i0 + BQ < a.Tq ? i0 + BQ : a.Tq;
    return a.causal && i1 < L ? i1 : L;
}

/* ---- forward: grid (query tiles, B H), NT threads; thread (r = tid / 4, sub = tid % 4)
 * owns keys sub*KPT .. +KPT of each tile and dims sub*DPT .. +DPT of row r's output ------ */
template <class C>
__global__ void __launch_bounds__(NT) attn_fwd(attn_p a, const float *__restrict__ q, const float *__restrict__ k,
                                                const float *__restrict__ v, float *__restrict__ o,
                                                float *__restrict__ lse) {
    constexpr int HD = C::HD, LD = C::LD, BK = C::BK, PLD = C::PLD, KPT = C::KPT, DPT = C::DPT;
    __shared__ float Ks[BK * LD], Vs[BK * LD], Ps[BQ * PLD];
    const int64_t bh = blockIdx.y, b = bh / a.H, i0 = (int64_t)blockIdx.x * BQ, D = hdim<C>(a);
    const int tid = threadIdx.x, r = tid >> 2, sub = tid & 3;
    const int64_t i = i0 + r;
    const float *qb = q + blk_off(a, bh, a.Tq, D), *kb = k + blk_off(a, bh, a.Tk, D), *vb = v + blk_off(a, bh, a.Tk, D);
    const float inv_keep = 1.f / (1.f - a.p);
    float qr[HD];
#pragma unroll
    for (int d = 0; d < HD; d++) qr[d] = i < a.Tq && col_ok<C>(a, d) ? rnd(qb[i * a.ld + d], a.compute) : 0.f;
    const int64_t kend = key_end(a, kv_len(a, b), i0);
    float m = -INFINITY, l = 0.f, acc[DPT];
#pragma unroll
    for (int dd = 0; dd < DPT; dd++) acc[dd] = 0.f;
    drop_cache dc;
    dc.blk = ~0ull;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        __syncthreads();   /* the previous tile's Ks, Vs, Ps are consumed */
        load_pair<C>(a, kb, vb, j0, a.Tk, BK, Ks, Vs);
        __syncthreads();
        float s[KPT], tmax = -INFINITY;
#pragma unroll
        for (int c = 0; c < KPT; c++) {
            int jj = sub * KPT + c;
            float dot = 0.f;
#pragma unroll
            for (int d = 0; d < HD; d++) dot += qr[d] * Ks[jj * LD + d];
            s[c] = visible(a, b, i, j0 + jj, kend) ? dot * a.scale : -INFINITY;
            tmax = fmaxf(tmax, s[c]);
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
        const float mnew = fmaxf(m, tmax);
        float psum = 0.f;
#pragma unroll
        for (int c = 0; c < KPT; c++) {
            int jj = sub * KPT + c;
            float pv = s[c] == -INFINITY ? 0.f : expf(s[c] - mnew);
            psum += pv;
            if (a.p > 0.f && pv != 0.f)
                pv *= drop_factor(a, dc, (uint64_t)((bh * a.Tq + i) * a.Tk + j0 + jj), inv_keep);
            Ps[r * PLD + jj] = pv;
        }
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);
        psum += __shfl_xor_sync(0xffffffffu, psum, 2);
        const float alpha = mnew == -INFINITY ? 1.f : expf(m - mnew);
        l = l * alpha + psum;
        m = mnew;
        __syncthreads();
#pragma unroll
        for (int dd = 0; dd < DPT; dd++) acc[dd] *= alpha;
        for (int jj = 0; jj < BK; jj++) {
            float pj = Ps[r * PLD + jj];
#pragma unroll
            for (int dd = 0; dd < DPT; dd++) acc[dd] += pj * Vs[jj * LD + sub * DPT + dd];
        }
    }
    if (i < a.Tq) {
        float inv = l > 0.f ? 1.f / l : 0.f;
        float *orow = o + blk_off(a, bh, a.Tq, D) + i * a.ld + sub * DPT;
#pragma unroll
        for (int dd = 0; dd < DPT; dd++)
            if (col_ok<C>(a, sub * DPT + dd)) orow[dd] = acc[dd] * inv;
        if (lse && sub == 0) lse[bh * a.Tq + i] = l > 0.f ? m + logf(l) : -INFINITY;
    }
}

/* ---- forward on tensor cores (16-bit compute): grid (query tiles of TQ rows, B H), 4 warps;
 * warp w owns rows w*16 .. +16. Per key tile of BKT keys: S_w (16, BKT) = Q_w K^T by wmma
 * into shared f32, the warp's online softmax on it (lane: row lane/2, keys (lane%2)*BKT/2
 * .. +BKT/2, the same visibility, dropout numbering and row sums as attn_fwd), P_w rounded
 * to T, and O_w (16, HD) += P_w V by wmma on an f32 accumulator kept in shared memory
 * (dims (lane%2)*HD/2 .. +HD/2 rescaled by the lane that owns the row). Row strides (struct
 * tier) are multiples of 8 16-bit elements and 4 floats as wmma wants; every fragment
 * pointer is 32-byte aligned. ------------------------------------------------------- */
template <typename T> __device__ __forceinline__ T to16(float x);
template <> __device__ __forceinline__ __nv_bfloat16 to16<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half to16<__half>(float x) { return __float2half_rn(x); }

template <class C>
__global__ void __launch_bounds__(NT) attn_fwd_tc(attn_p a, const float *__restrict__ q, const float *__restrict__ k,
                                                   const float *__restrict__ v, float *__restrict__ o,
                                                   float *__restrict__ lse) {
    using namespace nvcuda;
    typedef typename C::T T;
    constexpr int HD = C::HD, BK = C::BKT, TLD = C::TLD, OLD = C::OLD, SLD = C::SLD, PTLD = C::PTLD;
    constexpr int KH = BK / 2, DH = HD / 2;   /* a lane's keys and output dims */
    extern __shared__ __align__(128) unsigned char smem[];
    T *Qs = (T *)smem, *Ks = Qs + TQ * TLD, *Vs = Ks + BK * TLD;
    float *Sf = (float *)(Vs + BK * TLD), *Of = Sf + TQ * SLD;
    T *Pb = (T *)(Of + TQ * OLD);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, r = lane >> 1, half = lane & 1;
    const int64_t bh = blockIdx.y, b = bh / a.H, i0 = (int64_t)blockIdx.x * TQ, i = i0 + w * 16 + r, D = hdim<C>(a);
    const float *qb = q + blk_off(a, bh, a.Tq, D), *kb = k + blk_off(a, bh, a.Tk, D), *vb = v + blk_off(a, bh, a.Tk, D);
    float *Sw = Sf + w * 16 * SLD, *Ow = Of + w * 16 * OLD;
    T *Pw = Pb + w * 16 * PTLD;
    const float inv_keep = 1.f / (1.f - a.p);
    for (int t = tid; t < TQ * HD; t += NT) {
        int rr = t / HD, d = t % HD;
        int64_t ii = i0 + rr;
        Qs[rr * TLD + d] = to16<T>(ii < a.Tq && col_ok<C>(a, d) ? qb[ii * a.ld + d] : 0.f);
    }
    for (int c = 0; c < DH; c++) Ow[r * OLD + half * DH + c] = 0.f;
    const int64_t L = kv_len(a, b);
    const int64_t i1 = i0 + TQ < a.Tq ? i0 + TQ : a.Tq, kend = a.causal && i1 < L ? i1 : L;
    float m = -INFINITY, l = 0.f;
    drop_cache dc;
    dc.blk = ~0ull;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        __syncthreads();   /* Qs stored (first tile); the previous tile's Ks, Vs consumed */
        for (int t = tid; t < BK * HD; t += NT) {
            int jj = t / HD, d = t % HD;
            int64_t j = j0 + jj;
            bool in = j < a.Tk && col_ok<C>(a, d);
            Ks[jj * TLD + d] = to16<T>(in ? kb[j * a.ld + d] : 0.f);
            Vs[jj * TLD + d] = to16<T>(in ? vb[j * a.ld + d] : 0.f);
        }
        __syncthreads();
        /* S_w (16, BK) = Q_w (16, HD) K^T (HD, BK): K row-major is K^T column-major */
        for (int nt = 0; nt < BK / 16; nt++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.f);
            for (int kk = 0; kk < HD / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
                wmma::load_matrix_sync(fa, Qs + (w * 16) * TLD + kk * 16, TLD);
                wmma::load_matrix_sync(fb, Ks + (nt * 16) * TLD + kk * 16, TLD);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(Sw + nt * 16, acc, SLD, wmma::mem_row_major);
        }
        __syncwarp();
        float *srow = Sw + r * SLD + half * KH, tmax = -INFINITY;
        for (int c = 0; c < KH; c++) {
            int64_t j = j0 + half * KH + c;
            float x = visible(a, b, i, j, kend) ? srow[c] * a.scale : -INFINITY;
            srow[c] = x;
            tmax = fmaxf(tmax, x);
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        const float mnew = fmaxf(m, tmax), alpha = mnew == -INFINITY ? 1.f : expf(m - mnew);
        float psum = 0.f;
        for (int c = 0; c < KH; c++) {
            int64_t j = j0 + half * KH + c;
            float x = srow[c], pv = x == -INFINITY ? 0.f : expf(x - mnew);
            psum += pv;
            if (a.p > 0.f && pv != 0.f) pv *= drop_factor(a, dc, (uint64_t)((bh * a.Tq + i) * a.Tk + j), inv_keep);
            Pw[r * PTLD + half * KH + c] = to16<T>(pv);
        }
        for (int c = 0; c < DH; c++) Ow[r * OLD + half * DH + c] *= alpha;
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);
        l = l * alpha + psum;
        m = mnew;
        __syncwarp();
        /* O_w (16, HD) += P_w (16, BK keys) V (BK keys, HD) */
        for (int dt = 0; dt < HD / 16; dt++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, Ow + dt * 16, OLD, wmma::mem_row_major);
            for (int kk = 0; kk < BK / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, Pw + kk * 16, PTLD);
                wmma::load_matrix_sync(fb, Vs + (kk * 16) * TLD + dt * 16, TLD);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(Ow + dt * 16, acc, OLD, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (i < a.Tq) {
        float inv = l > 0.f ? 1.f / l : 0.f;
        float *orow = o + blk_off(a, bh, a.Tq, D) + i * a.ld + half * DH;
        for (int c = 0; c < DH; c++)
            if (col_ok<C>(a, half * DH + c)) orow[c] = Ow[r * OLD + half * DH + c] * inv;
        if (lse && half == 0) lse[bh * a.Tq + i] = l > 0.f ? m + logf(l) : -INFINITY;
    }
}

/* ---- backward ------------------------------------------------------------------------- */
/* delta (rows) = rowsum(dO * o): one warp per row; padding columns are not read */
template <class C>
__global__ void attn_delta(attn_p a, int64_t rows, int cd, const float *__restrict__ o,
                           const float *__restrict__ dout, float *__restrict__ delta) {
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows) return;   /* whole warps */
    int64_t at = blk_off(a, row / a.Tq, a.Tq, hdim<C>(a)) + (row % a.Tq) * a.ld;
    const float *orow = o + at, *drow = dout + at;
    float x = 0.f;
#pragma unroll
    for (int d = lane; d < C::HD; d += 32)
        if (col_ok<C>(a, d)) x += orow[d] * rnd(drow[d], cd);
    for (int w = 16; w > 0; w >>= 1) x += __shfl_xor_sync(0xffffffffu, x, w);
    if (lane == 0) delta[row] = x;
}

__device__ __forceinline__ void put(float *dst, float x, int mode) {
    if (mode == 2) *dst += x;
    else *dst = x;
}

/* P, W and dS of element (row i, key j0 + jj) of a tile; q row from registers or shared. */
struct elem { float z, ds; };
template <class C>
__device__ __forceinline__ elem grad_elem(const attn_p &a, drop_cache &dc, int64_t bh, int64_t b, int64_t i,
                                          int64_t j, int64_t kend, float lse_i, float delta_i, const float *qrow,
                                          const float *dorow, const float *krow, const float *vrow,
                                          float inv_keep) {
    elem e = { 0.f, 0.f };
    if (lse_i == -INFINITY || !visible(a, b, i, j, kend)) return e;
    float s = 0.f, dp = 0.f;
#pragma unroll
    for (int d = 0; d < C::HD; d++) {
        s += qrow[d] * krow[d];
        dp += dorow[d] * vrow[d];
    }
    float P = expf(s * a.scale - lse_i), W = 1.f;
    if (a.p > 0.f) W = drop_factor(a, dc, (uint64_t)((bh * a.Tq + i) * a.Tk + j), inv_keep);
    e.z = P * W;
    e.ds = P * (dp * W - delta_i);
    return e;
}

/* dq: grid (query tiles, B H); thread (r, sub) as in forward, dims sub*DPT .. +DPT of dq.
 * Shared: Qs, dOs (BQ x LD), dSs (BQ x PLD), Ks, Vs (BK x LD). */
template <class C>
__global__ void __launch_bounds__(NT) attn_bwd_dq(attn_p a, const float *__restrict__ q, const float *__restrict__ k,
                                                   const float *__restrict__ v, const float *__restrict__ dout,
                                                   const float *__restrict__ lse, const float *__restrict__ delta,
                                                   float *dq, int mode) {
    constexpr int LD = C::LD, BK = C::BK, PLD = C::PLD, KPT = C::KPT, DPT = C::DPT;
    extern __shared__ float sm[];
    float *Qs = sm, *dOs = Qs + BQ * LD, *dSs = dOs + BQ * LD, *Ks = dSs + BQ * PLD, *Vs = Ks + BK * LD;
    const int64_t bh = blockIdx.y, b = bh / a.H, i0 = (int64_t)blockIdx.x * BQ, D = hdim<C>(a);
    const int tid = threadIdx.x, r = tid >> 2, sub = tid & 3;
    const int64_t i = i0 + r;
    const float *qb = q + blk_off(a, bh, a.Tq, D), *kb = k + blk_off(a, bh, a.Tk, D), *vb = v + blk_off(a, bh, a.Tk, D);
    const float *db = dout + blk_off(a, bh, a.Tq, D);
    const float inv_keep = 1.f / (1.f - a.p);
    load_pair<C>(a, qb, db, i0, a.Tq, BQ, Qs, dOs);
    const float lse_i = i < a.Tq ? lse[bh * a.Tq + i] : -INFINITY;
    const float delta_i = i < a.Tq ? delta[bh * a.Tq + i] : 0.f;
    const int64_t kend = key_end(a, kv_len(a, b), i0);
    float acc[DPT];
#pragma unroll
    for (int dd = 0; dd < DPT; dd++) acc[dd] = 0.f;
    drop_cache dc;
    dc.blk = ~0ull;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        __syncthreads();
        load_pair<C>(a, kb, vb, j0, a.Tk, BK, Ks, Vs);
        __syncthreads();
        for (int c = 0; c < KPT; c++) {
            int jj = sub * KPT + c;
            elem e = grad_elem<C>(a, dc, bh, b, i, j0 + jj, kend, lse_i, delta_i, Qs + r * LD, dOs + r * LD,
                                  Ks + jj * LD, Vs + jj * LD, inv_keep);
            dSs[r * PLD + jj] = e.ds;
        }
        __syncthreads();
        for (int jj = 0; jj < BK; jj++) {
            float ds = dSs[r * PLD + jj];
#pragma unroll
            for (int dd = 0; dd < DPT; dd++) acc[dd] += ds * Ks[jj * LD + sub * DPT + dd];
        }
    }
    if (i < a.Tq) {
        float *row = dq + blk_off(a, bh, a.Tq, D) + i * a.ld + sub * DPT;
#pragma unroll
        for (int dd = 0; dd < DPT; dd++)
            if (col_ok<C>(a, sub * DPT + dd)) put(row + dd, a.scale * acc[dd], mode);
    }
}

/* dk, dv: grid (key tiles, B H). Phase 1, thread (r, sub): Z and dS of row r, keys
 * sub*KPT .. +KPT; phase 2, thread (kj = tid / TPK, h = tid % TPK): dims h*DPK .. +DPK of
 * key kj's dk and dv. Shared: Ks, Vs (BK x LD), Qs, dOs (BQ x LD), Zs, dSs (BQ x PLD), lse
 * and delta (BQ). */
template <class C>
__global__ void __launch_bounds__(NT) attn_bwd_dkv(attn_p a, const float *__restrict__ q, const float *__restrict__ k,
                                                    const float *__restrict__ v, const float *__restrict__ dout,
                                                    const float *__restrict__ lse, const float *__restrict__ delta,
                                                    float *dk, int kmode, float *dv, int vmode) {
    constexpr int LD = C::LD, BK = C::BK, PLD = C::PLD, KPT = C::KPT, TPK = C::TPK, DPK = C::DPK;
    extern __shared__ float sm[];
    float *Ks = sm, *Vs = Ks + BK * LD, *Qs = Vs + BK * LD, *dOs = Qs + BQ * LD, *Zs = dOs + BQ * LD,
          *dSs = Zs + BQ * PLD, *ls = dSs + BQ * PLD, *dl = ls + BQ;
    const int64_t bh = blockIdx.y, b = bh / a.H, j0 = (int64_t)blockIdx.x * BK, D = hdim<C>(a);
    const int tid = threadIdx.x, r = tid >> 2, sub = tid & 3, kj = tid / TPK, h = tid % TPK;
    const float *qb = q + blk_off(a, bh, a.Tq, D), *kb = k + blk_off(a, bh, a.Tk, D), *vb = v + blk_off(a, bh, a.Tk, D);
    const float *db = dout + blk_off(a, bh, a.Tq, D);
    const float inv_keep = 1.f / (1.f - a.p);
    load_pair<C>(a, kb, vb, j0, a.Tk, BK, Ks, Vs);
    const int64_t L = kv_len(a, b);   /* syncs: Ks, Vs are loaded */
    float gk[DPK], gv[DPK];
#pragma unroll
    for (int dd = 0; dd < DPK; dd++) gk[dd] = gv[dd] = 0.f;
    drop_cache dc;
    dc.blk = ~0ull;
    /* rows that can see a key of this tile: all, or from j0 on when causal */
    int64_t first = a.causal ? (j0 / BQ) * BQ : 0;
    if (j0 >= L) first = a.Tq;   /* the tile holds no visible key */
    for (int64_t i0 = first; i0 < a.Tq; i0 += BQ) {
        __syncthreads();
        load_pair<C>(a, qb, db, i0, a.Tq, BQ, Qs, dOs);
        if (tid < BQ) {
            int64_t ii = i0 + tid;
            ls[tid] = ii < a.Tq ? lse[bh * a.Tq + ii] : -INFINITY;
            dl[tid] = ii < a.Tq ? delta[bh * a.Tq + ii] : 0.f;
        }
        __syncthreads();
        const int64_t kend = key_end(a, L, i0), i = i0 + r;
        for (int c = 0; c < KPT; c++) {
            int jj = sub * KPT + c;
            elem e = grad_elem<C>(a, dc, bh, b, i, j0 + jj, kend, ls[r], dl[r], Qs + r * LD, dOs + r * LD,
                                  Ks + jj * LD, Vs + jj * LD, inv_keep);
            Zs[r * PLD + jj] = e.z;
            dSs[r * PLD + jj] = e.ds;
        }
        __syncthreads();
        for (int rr = 0; rr < BQ; rr++) {
            float z = Zs[rr * PLD + kj], ds = dSs[rr * PLD + kj];
            const float *dor = dOs + rr * LD + h * DPK, *qr = Qs + rr * LD + h * DPK;
#pragma unroll
            for (int dd = 0; dd < DPK; dd++) {
                gv[dd] += z * dor[dd];
                gk[dd] += ds * qr[dd];
            }
        }
    }
    const int64_t j = j0 + kj;
    if (j < a.Tk) {
        float *krow = dk ? dk + blk_off(a, bh, a.Tk, D) + j * a.ld + h * DPK : NULL;
        float *vrow = dv ? dv + blk_off(a, bh, a.Tk, D) + j * a.ld + h * DPK : NULL;
        if (kmode)
            for (int dd = 0; dd < DPK; dd++)
                if (col_ok<C>(a, h * DPK + dd)) put(krow + dd, a.scale * gk[dd], kmode);
        if (vmode)   /* after dk: when k and v are one tensor, dv adds to what dk stored */
            for (int dd = 0; dd < DPK; dd++)
                if (col_ok<C>(a, h * DPK + dd)) put(vrow + dd, gv[dd], vmode);
    }
}

/* ---- launchers ------------------------------------------------------------------------ */
/* f(tier) for head dim D: the exact tiers first (64, the flagship, before all), then the
 * smallest padded tier that holds D. The caller (attention_op.c) refused D outside
 * 1..VOLT_CUDA_ATTN_MAX_D. */
template <class F> static int by_tier(int64_t D, F f) {
    if (D == 64) return f(tier<64, false>());
    if (D == 32) return f(tier<32, false>());
    if (D == 128) return f(tier<128, false>());
    if (D < 1 || D > VOLT_CUDA_ATTN_MAX_D) return (int)cudaErrorInvalidValue;
    if (D < 32) return f(tier<32, true>());
    if (D < 64) return f(tier<64, true>());
    if (D < 128) return f(tier<128, true>());
    return f(tier<256, true>());
}

template <class C>
static int fwd_tc(cudaStream_t st, dim3 grid, const attn_p &a, const float *q, const float *k, const float *v, float *o,
                  float *lse) {
    cudaError_t e = cudaFuncSetAttribute(attn_fwd_tc<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::TC_SMEM);
    if (e != cudaSuccess) return (int)e;
    attn_fwd_tc<C><<<grid, NT, C::TC_SMEM, st>>>(a, q, k, v, o, lse);
    return (int)cudaGetLastError();
}

extern "C" int volt__cuda_attention_fwd(void *stream, const volt_cuda_attn *a, const float *q, const float *k,
                                        const float *v, float *o, float *lse) {
    int64_t BH = a->B * a->H;
    if (BH == 0 || a->Tq == 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    return by_tier(a->D, [&](auto c) -> int {
        typedef decltype(c) C;
        if (a->compute == VOLT_CU_ATTN_BF16 || a->compute == VOLT_CU_ATTN_F16) {   /* tensor cores */
            dim3 grid((unsigned)((a->Tq + TQ - 1) / TQ), (unsigned)BH);
            if (a->compute == VOLT_CU_ATTN_BF16) return fwd_tc<tc_tier<C, __nv_bfloat16>>(st, grid, *a, q, k, v, o, lse);
            return fwd_tc<tc_tier<C, __half>>(st, grid, *a, q, k, v, o, lse);
        }
        dim3 grid((unsigned)((a->Tq + BQ - 1) / BQ), (unsigned)BH);
        attn_fwd<C><<<grid, NT, 0, st>>>(*a, q, k, v, o, lse);
        return (int)cudaGetLastError();
    });
}

extern "C" int volt__cuda_attention_bwd(void *stream, const volt_cuda_attn *a, const float *q, const float *k,
                                        const float *v, const float *o, const float *dout, const float *lse,
                                        float *delta, float *dq, int dq_mode, float *dk, int dk_mode, float *dv,
                                        int dv_mode) {
    int64_t BH = a->B * a->H, rows = BH * a->Tq;
    if (BH == 0 || a->Tq == 0 || a->Tk == 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    return by_tier(a->D, [&](auto c) -> int {
        typedef decltype(c) C;
        int err;
        attn_delta<C><<<(unsigned)((rows + 7) / 8), 256, 0, st>>>(*a, rows, a->compute, o, dout, delta);
        if ((err = (int)cudaGetLastError())) return err;
        if (dq_mode) {
            cudaError_t e = cudaFuncSetAttribute(attn_bwd_dq<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::DQ_SMEM);
            if (e != cudaSuccess) return (int)e;
            dim3 grid((unsigned)((a->Tq + BQ - 1) / BQ), (unsigned)BH);
            attn_bwd_dq<C><<<grid, NT, C::DQ_SMEM, st>>>(*a, q, k, v, dout, lse, delta, dq, dq_mode);
            if ((err = (int)cudaGetLastError())) return err;
        }
        if (dk_mode || dv_mode) {
            cudaError_t e =
                cudaFuncSetAttribute(attn_bwd_dkv<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::DKV_SMEM);
            if (e != cudaSuccess) return (int)e;
            dim3 grid((unsigned)((a->Tk + C::BK - 1) / C::BK), (unsigned)BH);
            attn_bwd_dkv<C><<<grid, NT, C::DKV_SMEM, st>>>(*a, q, k, v, dout, lse, delta, dk, dk_mode, dv, dv_mode);
            return (int)cudaGetLastError();
        }
        return 0;
    });
}
