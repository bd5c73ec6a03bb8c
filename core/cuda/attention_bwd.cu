/* core/cuda/attention_bwd.cu — the attention backward's entry point, delta = rowsum(dO * o),
 * and the SIMT f32 backward kernels (attn_bwd_dq, attn_bwd_dkv); a 16-bit compute node's dq,
 * dk, dv run on tensor cores (attention_bwd_tc.cu). The design: attention_fwd.cu's top. */
#include "core/cuda/attention_tile.cuh"

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
__global__ void __launch_bounds__(NT) attn_bwd_dq(attn_p a, const void *__restrict__ q, const void *__restrict__ k,
                                                   const void *__restrict__ v, const float *__restrict__ dout,
                                                   const float *__restrict__ lse, const float *__restrict__ delta,
                                                   float *dq, int mode) {
    constexpr int LD = C::LD, BK = C::BK, PLD = C::PLD, KPT = C::KPT, DPT = C::DPT;
    extern __shared__ float sm[];
    float *Qs = sm, *dOs = Qs + BQ * LD, *dSs = dOs + BQ * LD, *Ks = dSs + BQ * PLD, *Vs = Ks + BK * LD;
    const int64_t bh = blockIdx.y, b = bh / a.H, i0 = (int64_t)blockIdx.x * BQ, D = hdim<C>(a);
    const int tid = threadIdx.x, r = tid >> 2, sub = tid & 3;
    const int64_t i = i0 + r;
    const void *qb = qkv_blk(a, q, blk_off(a, bh, a.Tq, D)), *kb = qkv_blk(a, k, blk_off(a, bh, a.Tk, D)),
               *vb = qkv_blk(a, v, blk_off(a, bh, a.Tk, D));
    const float *db = dout + blk_off(a, bh, a.Tq, D);
    const float inv_keep = 1.f / (1.f - a.p);
    load_pair<C>(a, qb, db, false, i0, a.Tq, BQ, Qs, dOs);
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
        load_pair<C>(a, kb, vb, true, j0, a.Tk, BK, Ks, Vs);
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
__global__ void __launch_bounds__(NT) attn_bwd_dkv(attn_p a, const void *__restrict__ q, const void *__restrict__ k,
                                                    const void *__restrict__ v, const float *__restrict__ dout,
                                                    const float *__restrict__ lse, const float *__restrict__ delta,
                                                    float *dk, int kmode, float *dv, int vmode) {
    constexpr int LD = C::LD, BK = C::BK, PLD = C::PLD, KPT = C::KPT, TPK = C::TPK, DPK = C::DPK;
    extern __shared__ float sm[];
    float *Ks = sm, *Vs = Ks + BK * LD, *Qs = Vs + BK * LD, *dOs = Qs + BQ * LD, *Zs = dOs + BQ * LD,
          *dSs = Zs + BQ * PLD, *ls = dSs + BQ * PLD, *dl = ls + BQ;
    const int64_t bh = blockIdx.y, b = bh / a.H, j0 = (int64_t)blockIdx.x * BK, D = hdim<C>(a);
    const int tid = threadIdx.x, r = tid >> 2, sub = tid & 3, kj = tid / TPK, h = tid % TPK;
    const void *qb = qkv_blk(a, q, blk_off(a, bh, a.Tq, D)), *kb = qkv_blk(a, k, blk_off(a, bh, a.Tk, D)),
               *vb = qkv_blk(a, v, blk_off(a, bh, a.Tk, D));
    const float *db = dout + blk_off(a, bh, a.Tq, D);
    const float inv_keep = 1.f / (1.f - a.p);
    load_pair<C>(a, kb, vb, true, j0, a.Tk, BK, Ks, Vs);
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
        load_pair<C>(a, qb, db, false, i0, a.Tq, BQ, Qs, dOs);
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

/* ---- launcher ---- */
extern "C" int volt__cuda_attention_bwd(void *stream, const volt_cuda_attn *a, const void *q, const void *k,
                                        const void *v, const float *o, const float *dout, const float *lse,
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
        if (a->compute == VOLT_CU_ATTN_BF16 || a->compute == VOLT_CU_ATTN_F16)   /* tensor cores */
            return volt__cuda_attn_bwd_tc(st, *a, q, k, v, dout, lse, delta, dq, dq_mode, dk, dk_mode, dv, dv_mode);
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
