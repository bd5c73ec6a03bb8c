/* core/cuda/attention_bwd_tc.cu — the attention backward of a 16-bit compute node (bf16, f16)
 * on tensor cores: wmma 16x16x16, 16-bit operands, f32 accumulation (the design and the
 * semantics: attention_fwd.cu's top comment). FlashAttention-2's backward structure, in two
 * kernels so that every grad element is summed by one warp in a fixed order (no atomics:
 * eager and graph replay give the same bits):
 *
 * attn_bwd_dq_tc: grid (query tiles of TQ = 64 rows, B H), 4 warps, warp w owns rows w*16 ..
 *   +16. Per key tile of BKT keys: S_w = Q_w K^T and dP_w = dO_w V^T (16, BKT) by wmma into
 *   shared f32; lane (row lane/2, keys (lane%2)*BKT/2 .. +BKT/2): P = exp(scale S - lse),
 *   W the dropout factor, dS = P (dP W - delta) rounded to 16 bits; dQ_w (16, HD) += dS_w K
 *   by wmma on an f32 accumulator in shared memory. dq = scale dQ.
 * attn_bwd_dkv_tc: grid (key tiles of BKT keys, B H), BKT / 16 warps, warp w owns keys w*16 ..
 *   +16. Per query tile of QR = 32 rows: S^T_w = K_w Q^T and dP^T_w = V_w dO^T (16, QR)
 *   transposed, so that the warp's products below read them as row-major A operands; lane =
 *   query row (its 16 keys are consecutive: one Philox block serves four); Z^T = P W and dS^T
 *   rounded to 16 bits; dV_w (16, HD) += Z^T_w dO and dK_w += dS^T_w Q by wmma on f32
 *   accumulators in shared memory. dk = scale dK; dv stored after dk per element (k and v
 *   one tensor: dv adds to what dk stored).
 *
 * Operands are the 16-bit roundings of q, k, v, dO (as the forward reads them), P, Z and dS
 * are rounded to 16 bits before the products that use them (as FlashAttention-2 does);
 * delta = rowsum(dO o) comes from attn_delta (attention_bwd.cu). Rows that see no key
 * (lse = -inf) give P = 0: no grad. Tiles (struct tier, attention_tile.cuh): at HD = 64 the
 * dq kernel holds Q, dO (64 rows), K, V (64 keys) in 16 bits, S and dP in f32, dS in 16 bits
 * and the dQ accumulator in f32: 96 KiB; the dk dv kernel K, V (64 keys), Q, dO (32 rows),
 * S^T, dP^T f32, Z^T, dS^T 16-bit and two f32 accumulators: 89 KiB; both fit two blocks per
 * SM (sm_90: 227 KiB). QR = 32 rows (not 64) keeps the dk dv kernel there and gives each
 * lane one row. Accumulators live in shared memory, not registers, so one code path serves
 * HD 32..256 without spilling (HD 256: 16 fragments per accumulator). nvcc -Xptxas -v
 * (sm_90, CUDA 13.0) at HD 64: dq 69 / 72 registers (bf16 / f16), dk dv 72 / 71, no spills,
 * no stack: shared memory, not registers, sets the two blocks per SM. Estimated at 1.3-2.3 ms
 * per DistilBERT step (B 12, T 512, 12 heads, 6 layers) against ~8 ms for the SIMT backward
 * (docs/CUDA.md); never run on a GPU, only on the simulator (tests/cudasim). */
#include <mma.h>
#include "core/cuda/attention_tile.cuh"

/* P W and P (dP W - delta) of row i, key j (S and dP as the products gave them): 0 for a key
 * the row does not see or a row that sees none (lse = -inf). */
struct pz { float z, ds; };
__device__ __forceinline__ pz tc_grad(const attn_p &a, drop_cache &dc, int64_t bh, int64_t b, int64_t i, int64_t j,
                                      int64_t kend, float s, float dp, float lse_i, float delta_i, float inv_keep) {
    pz e = { 0.f, 0.f };
    if (lse_i == -INFINITY || !visible(a, b, i, j, kend)) return e;
    float P = expf(s * a.scale - lse_i), W = 1.f;
    if (a.p > 0.f) W = drop_factor(a, dc, (uint64_t)((bh * a.Tq + i) * a.Tk + j), inv_keep);
    e.z = P * W;
    e.ds = P * (dp * W - delta_i);
    return e;
}

/* Two products of one warp over nb column blocks of 16: o1 (16, 16 nb) = a1 b1^T and
 * o2 = a2 b2^T, a1, a2 row-major (16, HD) at lda, b1, b2 row-major (16 nb, HD) at ldb (so
 * b^T is their column-major view), o1, o2 f32 row-major at ldo. The recomputed scores and
 * the dO V^T products of both backward kernels (S, dP in dq; S^T, dP^T in dk dv). */
template <int HD, typename T>
__device__ __forceinline__ void tc_two_products(const T *a1, const T *b1, const T *a2, const T *b2, int lda, int ldb,
                                                int nb, float *o1, float *o2, int ldo) {
    using namespace nvcuda;
    for (int nt = 0; nt < nb; nt++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> s, dp;
        wmma::fill_fragment(s, 0.f);
        wmma::fill_fragment(dp, 0.f);
        for (int kk = 0; kk < HD / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
            wmma::load_matrix_sync(fa, a1 + kk * 16, lda);
            wmma::load_matrix_sync(fb, b1 + (nt * 16) * ldb + kk * 16, ldb);
            wmma::mma_sync(s, fa, fb, s);
            wmma::load_matrix_sync(fa, a2 + kk * 16, lda);
            wmma::load_matrix_sync(fb, b2 + (nt * 16) * ldb + kk * 16, ldb);
            wmma::mma_sync(dp, fa, fb, dp);
        }
        wmma::store_matrix_sync(o1 + nt * 16, s, ldo, wmma::mem_row_major);
        wmma::store_matrix_sync(o2 + nt * 16, dp, ldo, wmma::mem_row_major);
    }
}

/* Rows [r0, r0 + n) of x and y (`rows` rows, a.ld apart: k and v, or q and dO — y_qkv says
 * which) into 16-bit tiles of C::TLD per row, rounded; rows past `rows` and padding columns
 * 0. Block-wide over nth threads. */
template <class C, int nth>
__device__ __forceinline__ void load16(const attn_p &a, const void *x, const void *y, bool y_qkv, int64_t r0,
                                       int64_t rows, int n, typename C::T *xs, typename C::T *ys) {
    typedef typename C::T T;
    for (int t = threadIdx.x; t < n * C::HD; t += nth) {
        int rr = t / C::HD, d = t % C::HD;
        int64_t i = r0 + rr;
        bool in = i < rows && col_ok<C>(a, d);
        xs[rr * C::TLD + d] = to16<T>(in ? ldx(a, x, i * a.ld + d) : 0.f);
        ys[rr * C::TLD + d] = to16<T>(in ? ldy(a, y, y_qkv, i * a.ld + d) : 0.f);
    }
}

template <class C>
__global__ void __launch_bounds__(NT) attn_bwd_dq_tc(attn_p a, const void *__restrict__ q,
                                                      const void *__restrict__ k, const void *__restrict__ v,
                                                      const float *__restrict__ dout, const float *__restrict__ lse,
                                                      const float *__restrict__ delta, float *dq, int mode) {
    using namespace nvcuda;
    typedef typename C::T T;
    constexpr int HD = C::HD, BK = C::BKT, TLD = C::TLD, OLD = C::OLD, SLD = C::SLD, PTLD = C::PTLD;
    constexpr int KH = BK / 2, DH = HD / 2;
    extern __shared__ __align__(128) unsigned char smem[];
    T *Qs = (T *)smem, *dOs = Qs + TQ * TLD, *Ks = dOs + TQ * TLD, *Vs = Ks + BK * TLD;
    float *Sf = (float *)(Vs + BK * TLD), *dPf = Sf + TQ * SLD, *dQf = dPf + TQ * SLD;
    T *dSb = (T *)(dQf + TQ * OLD);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, r = lane >> 1, half = lane & 1;
    const int64_t bh = blockIdx.y, b = bh / a.H, i0 = (int64_t)blockIdx.x * TQ, i = i0 + w * 16 + r, D = hdim<C>(a);
    const void *qb = qkv_blk(a, q, blk_off(a, bh, a.Tq, D)), *kb = qkv_blk(a, k, blk_off(a, bh, a.Tk, D)),
               *vb = qkv_blk(a, v, blk_off(a, bh, a.Tk, D));
    const float *db = dout + blk_off(a, bh, a.Tq, D);
    float *Sw = Sf + w * 16 * SLD, *dPw = dPf + w * 16 * SLD, *dQw = dQf + w * 16 * OLD;
    T *dSw = dSb + w * 16 * PTLD;
    const T *Qw = Qs + w * 16 * TLD, *dOw = dOs + w * 16 * TLD;
    const float inv_keep = 1.f / (1.f - a.p);
    load16<C, NT>(a, qb, db, false, i0, a.Tq, TQ, Qs, dOs);
    for (int c = 0; c < DH; c++) dQw[r * OLD + half * DH + c] = 0.f;
    const float lse_i = i < a.Tq ? lse[bh * a.Tq + i] : -INFINITY;
    const float delta_i = i < a.Tq ? delta[bh * a.Tq + i] : 0.f;
    const int64_t L = kv_len(a, b);
    const int64_t i1 = i0 + TQ < a.Tq ? i0 + TQ : a.Tq, kend = a.causal && i1 < L ? i1 : L;
    drop_cache dc;
    dc.blk = ~0ull;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        __syncthreads();   /* Qs, dOs, dQ zeros stored (first tile); the previous Ks, Vs consumed */
        load16<C, NT>(a, kb, vb, true, j0, a.Tk, BK, Ks, Vs);
        __syncthreads();
        /* S_w = Q_w K^T, dP_w = dO_w V^T (16, BK): K, V row-major are K^T, V^T column-major */
        tc_two_products<HD, T>(Qw, Ks, dOw, Vs, TLD, TLD, BK / 16, Sw, dPw, SLD);
        __syncwarp();
        for (int c = 0; c < KH; c++) {
            const int jj = half * KH + c;
            pz e = tc_grad(a, dc, bh, b, i, j0 + jj, kend, Sw[r * SLD + jj], dPw[r * SLD + jj], lse_i, delta_i,
                           inv_keep);
            dSw[r * PTLD + jj] = to16<T>(e.ds);
        }
        __syncwarp();
        /* dQ_w (16, HD) += dS_w (16, BK keys) K (BK keys, HD) */
        for (int dt = 0; dt < HD / 16; dt++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, dQw + dt * 16, OLD, wmma::mem_row_major);
            for (int kk = 0; kk < BK / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, dSw + kk * 16, PTLD);
                wmma::load_matrix_sync(fb, Ks + (kk * 16) * TLD + dt * 16, TLD);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(dQw + dt * 16, acc, OLD, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (i < a.Tq) {   /* the lane's half of its row, from its own warp's accumulator */
        float *row = dq + blk_off(a, bh, a.Tq, D) + i * a.ld + half * DH;
        for (int c = 0; c < DH; c++)
            if (col_ok<C>(a, half * DH + c)) put(row + c, a.scale * dQw[r * OLD + half * DH + c], mode);
    }
}

template <class C>
__global__ void __launch_bounds__(C::NTK) attn_bwd_dkv_tc(attn_p a, const void *__restrict__ q,
                                                           const void *__restrict__ k, const void *__restrict__ v,
                                                           const float *__restrict__ dout,
                                                           const float *__restrict__ lse,
                                                           const float *__restrict__ delta, float *dk, int kmode,
                                                           float *dv, int vmode) {
    using namespace nvcuda;
    typedef typename C::T T;
    constexpr int HD = C::HD, BK = C::BKT, QR = C::QR, NTK = C::NTK, TLD = C::TLD, OLD = C::OLD, QLD = C::QLD,
                  QTLD = C::QTLD;
    extern __shared__ __align__(128) unsigned char smem[];
    T *Ks = (T *)smem, *Vs = Ks + BK * TLD, *Qs = Vs + BK * TLD, *dOs = Qs + QR * TLD;
    float *St = (float *)(dOs + QR * TLD), *dPt = St + BK * QLD, *dKf = dPt + BK * QLD, *dVf = dKf + BK * OLD;
    T *Zt = (T *)(dVf + BK * OLD), *dSt = Zt + BK * QTLD;
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int64_t bh = blockIdx.y, b = bh / a.H, j0 = (int64_t)blockIdx.x * BK, D = hdim<C>(a);
    const void *qb = qkv_blk(a, q, blk_off(a, bh, a.Tq, D)), *kb = qkv_blk(a, k, blk_off(a, bh, a.Tk, D)),
               *vb = qkv_blk(a, v, blk_off(a, bh, a.Tk, D));
    const float *db = dout + blk_off(a, bh, a.Tq, D);
    float *Sw = St + w * 16 * QLD, *dPw = dPt + w * 16 * QLD, *dKw = dKf + w * 16 * OLD, *dVw = dVf + w * 16 * OLD;
    T *Zw = Zt + w * 16 * QTLD, *dSw = dSt + w * 16 * QTLD;
    const T *Kw = Ks + w * 16 * TLD, *Vw = Vs + w * 16 * TLD;
    const float inv_keep = 1.f / (1.f - a.p);
    load16<C, NTK>(a, kb, vb, true, j0, a.Tk, BK, Ks, Vs);
    for (int t = tid; t < BK * HD; t += NTK) dKf[(t / HD) * OLD + t % HD] = dVf[(t / HD) * OLD + t % HD] = 0.f;
    const int64_t L = kv_len(a, b);   /* syncs: Ks, Vs, the zeros stored */
    drop_cache dc;
    dc.blk = ~0ull;
    /* query rows that can see a key of this tile: all, or from j0 on when causal (j0 is a
     * multiple of BK, so of QR); none when the tile is past the last visible key */
    int64_t first = a.causal ? j0 : 0;
    if (j0 >= L) first = a.Tq;
    for (int64_t i0 = first; i0 < a.Tq; i0 += QR) {
        __syncthreads();   /* the previous Qs, dOs consumed */
        load16<C, NTK>(a, qb, db, false, i0, a.Tq, QR, Qs, dOs);
        __syncthreads();
        /* S^T_w = K_w Q^T, dP^T_w = V_w dO^T (16 keys, QR rows): Q, dO row-major are Q^T, dO^T
         * column-major */
        tc_two_products<HD, T>(Kw, Qs, Vw, dOs, TLD, TLD, QR / 16, Sw, dPw, QLD);
        __syncwarp();
        {   /* lane = query row i0 + lane, the warp's 16 keys in order */
            const int64_t i = i0 + lane;
            const float lse_i = i < a.Tq ? lse[bh * a.Tq + i] : -INFINITY;
            const float delta_i = i < a.Tq ? delta[bh * a.Tq + i] : 0.f;
            for (int c = 0; c < 16; c++) {
                pz e = tc_grad(a, dc, bh, b, i, j0 + w * 16 + c, L, Sw[c * QLD + lane], dPw[c * QLD + lane], lse_i,
                               delta_i, inv_keep);
                Zw[c * QTLD + lane] = to16<T>(e.z);
                dSw[c * QTLD + lane] = to16<T>(e.ds);
            }
        }
        __syncwarp();
        /* dV_w (16, HD) += Z^T_w (16, QR rows) dO (QR rows, HD); dK_w += dS^T_w Q */
        for (int dt = 0; dt < HD / 16; dt++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> gv, gk;
            wmma::load_matrix_sync(gv, dVw + dt * 16, OLD, wmma::mem_row_major);
            wmma::load_matrix_sync(gk, dKw + dt * 16, OLD, wmma::mem_row_major);
            for (int kk = 0; kk < QR / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, Zw + kk * 16, QTLD);
                wmma::load_matrix_sync(fb, dOs + (kk * 16) * TLD + dt * 16, TLD);
                wmma::mma_sync(gv, fa, fb, gv);
                wmma::load_matrix_sync(fa, dSw + kk * 16, QTLD);
                wmma::load_matrix_sync(fb, Qs + (kk * 16) * TLD + dt * 16, TLD);
                wmma::mma_sync(gk, fa, fb, gk);
            }
            wmma::store_matrix_sync(dVw + dt * 16, gv, OLD, wmma::mem_row_major);
            wmma::store_matrix_sync(dKw + dt * 16, gk, OLD, wmma::mem_row_major);
        }
        __syncwarp();
    }
    __syncthreads();   /* every warp's accumulators stored */
    for (int t = tid; t < BK * HD; t += NTK) {
        const int jj = t / HD, d = t % HD;
        const int64_t j = j0 + jj;
        if (j >= a.Tk || !col_ok<C>(a, d)) continue;
        const int64_t at = blk_off(a, bh, a.Tk, D) + j * a.ld + d;
        if (kmode) put(dk + at, a.scale * dKf[jj * OLD + d], kmode);
        if (vmode) put(dv + at, dVf[jj * OLD + d], vmode);   /* after dk: k and v may be one tensor */
    }
}

template <class C>
static int bwd_tc(cudaStream_t st, const attn_p &a, const void *q, const void *k, const void *v, const float *dout,
                  const float *lse, const float *delta, float *dq, int dq_mode, float *dk, int dk_mode, float *dv,
                  int dv_mode) {
    const unsigned BH = (unsigned)(a.B * a.H);
    if (dq_mode) {
        cudaError_t e = cudaFuncSetAttribute(attn_bwd_dq_tc<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             C::DQTC_SMEM);
        if (e != cudaSuccess) return (int)e;
        dim3 grid((unsigned)((a.Tq + TQ - 1) / TQ), BH);
        attn_bwd_dq_tc<C><<<grid, NT, C::DQTC_SMEM, st>>>(a, q, k, v, dout, lse, delta, dq, dq_mode);
        int err = (int)cudaGetLastError();
        if (err) return err;
    }
    if (dk_mode || dv_mode) {
        cudaError_t e = cudaFuncSetAttribute(attn_bwd_dkv_tc<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             C::DKVTC_SMEM);
        if (e != cudaSuccess) return (int)e;
        dim3 grid((unsigned)((a.Tk + C::BKT - 1) / C::BKT), BH);
        attn_bwd_dkv_tc<C><<<grid, C::NTK, C::DKVTC_SMEM, st>>>(a, q, k, v, dout, lse, delta, dk, dk_mode, dv,
                                                                 dv_mode);
        return (int)cudaGetLastError();
    }
    return 0;
}

int volt__cuda_attn_bwd_tc(cudaStream_t st, const attn_p &a, const void *q, const void *k, const void *v,
                           const float *dout, const float *lse, const float *delta, float *dq, int dq_mode, float *dk,
                           int dk_mode, float *dv, int dv_mode) {
    return by_tier(a.D, [&](auto c) -> int {
        typedef decltype(c) C;
        if (a.compute == VOLT_CU_ATTN_BF16)
            return bwd_tc<tc_tier<C, __nv_bfloat16>>(st, a, q, k, v, dout, lse, delta, dq, dq_mode, dk, dk_mode, dv,
                                                     dv_mode);
        return bwd_tc<tc_tier<C, __half>>(st, a, q, k, v, dout, lse, delta, dq, dq_mode, dk, dk_mode, dv, dv_mode);
    });
}
