/* Fused scaled dot-product attention on the GPU, FlashAttention-2 style, any head dim 1..256.
 * The files: attention_tile.cuh (tiers, loaders, visibility, dropout, tier dispatch),
 * attention_fwd.cu (this: the design, the forward kernels and volt__cuda_attention_fwd),
 * attention_bwd.cu (delta, the SIMT f32 backward, volt__cuda_attention_bwd), attention_bwd_tc.cu
 * (the tensor-core backward of a 16-bit compute node). Separate translation units so a
 * parallel build compiles them side by side.
 *
 * Forward: a block owns BQ query rows of one (b, h) and walks key tiles of BK keys, keeping
 * the running row max m, row sum l and the output accumulator (online softmax); no (Tq, Tk)
 * matrix is ever stored. It writes o = acc / l and lse = m + log l (per row, for backward).
 * Backward: delta = rowsum(dO * o) first; then P = exp(scale q k^T - lse) is recomputed per
 * tile, twice: by a kernel over query tiles that accumulates dq, and by one over key tiles
 * that accumulates dk and dv. Every grad element is summed by one thread (SIMT) or one warp
 * (tensor cores) in a fixed order (no atomics), so results are deterministic: eager and
 * graph replay give the same bits.
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
 * roundings. A 16-bit compute node runs on tensor cores (wmma 16x16x16 in bf16 or f16, f32
 * accumulation): the forward here (attn_fwd_tc; P rounded to 16 bits for P v) and the
 * backward in attention_bwd_tc.cu (P W and dS rounded to 16 bits for their products, as
 * FlashAttention-2 and the CPU backend's native bf16 tiles do). The f32 forward and backward
 * are SIMT kernels, exact f32 (docs/CUDA.md). */
#include <mma.h>
#include "core/cuda/attention_tile.cuh"

/* ---- forward: grid (query tiles, B H), NT threads; thread (r = tid / 4, sub = tid % 4)
 * owns keys sub*KPT .. +KPT of each tile and dims sub*DPT .. +DPT of row r's output ------ */
template <class C>
__global__ void __launch_bounds__(NT) attn_fwd(attn_p a, const void *__restrict__ q, const void *__restrict__ k,
                                                const void *__restrict__ v, float *__restrict__ o,
                                                float *__restrict__ lse) {
    constexpr int HD = C::HD, LD = C::LD, BK = C::BK, PLD = C::PLD, KPT = C::KPT, DPT = C::DPT;
    __shared__ float Ks[BK * LD], Vs[BK * LD], Ps[BQ * PLD];
    const int64_t bh = blockIdx.y, b = bh / a.H, i0 = (int64_t)blockIdx.x * BQ, D = hdim<C>(a);
    const int tid = threadIdx.x, r = tid >> 2, sub = tid & 3;
    const int64_t i = i0 + r;
    const void *qb = qkv_blk(a, q, blk_off(a, bh, a.Tq, D)), *kb = qkv_blk(a, k, blk_off(a, bh, a.Tk, D)),
               *vb = qkv_blk(a, v, blk_off(a, bh, a.Tk, D));
    const float inv_keep = 1.f / (1.f - a.p);
    float qr[HD];
#pragma unroll
    for (int d = 0; d < HD; d++) qr[d] = i < a.Tq && col_ok<C>(a, d) ? ldx(a, qb, i * a.ld + d) : 0.f;
    const int64_t kend = key_end(a, kv_len(a, b), i0);
    float m = -INFINITY, l = 0.f, acc[DPT];
#pragma unroll
    for (int dd = 0; dd < DPT; dd++) acc[dd] = 0.f;
    drop_cache dc;
    dc.blk = ~0ull;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        __syncthreads();   /* the previous tile's Ks, Vs, Ps are consumed */
        load_pair<C>(a, kb, vb, true, j0, a.Tk, BK, Ks, Vs);
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
template <class C>
__global__ void __launch_bounds__(NT) attn_fwd_tc(attn_p a, const void *__restrict__ q, const void *__restrict__ k,
                                                   const void *__restrict__ v, float *__restrict__ o,
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
    const void *qb = qkv_blk(a, q, blk_off(a, bh, a.Tq, D)), *kb = qkv_blk(a, k, blk_off(a, bh, a.Tk, D)),
               *vb = qkv_blk(a, v, blk_off(a, bh, a.Tk, D));
    float *Sw = Sf + w * 16 * SLD, *Ow = Of + w * 16 * OLD;
    T *Pw = Pb + w * 16 * PTLD;
    const float inv_keep = 1.f / (1.f - a.p);
    for (int t = tid; t < TQ * HD; t += NT) {
        int rr = t / HD, d = t % HD;
        int64_t ii = i0 + rr;
        Qs[rr * TLD + d] = to16<T>(ii < a.Tq && col_ok<C>(a, d) ? ldx(a, qb, ii * a.ld + d) : 0.f);
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
            Ks[jj * TLD + d] = to16<T>(in ? ldx(a, kb, j * a.ld + d) : 0.f);
            Vs[jj * TLD + d] = to16<T>(in ? ldx(a, vb, j * a.ld + d) : 0.f);
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

/* ---- launcher ---- */
template <class C>
static int fwd_tc(cudaStream_t st, dim3 grid, const attn_p &a, const void *q, const void *k, const void *v, float *o,
                  float *lse) {
    cudaError_t e = cudaFuncSetAttribute(attn_fwd_tc<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::TC_SMEM);
    if (e != cudaSuccess) return (int)e;
    attn_fwd_tc<C><<<grid, NT, C::TC_SMEM, st>>>(a, q, k, v, o, lse);
    return (int)cudaGetLastError();
}

extern "C" int volt__cuda_attention_fwd(void *stream, const volt_cuda_attn *a, const void *q, const void *k,
                                        const void *v, float *o, float *lse) {
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

