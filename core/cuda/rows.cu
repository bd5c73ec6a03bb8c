/* The "cuda" backend's row kernels and reductions: softmax / log_softmax, layernorm forward
 * and backward, the fused softmax + cross-entropy with its valid count, sum / mean / mse and
 * the squared norm (double sums over a fixed grid), embedding gather and scatter-add,
 * argmax and accuracy. Semantics of core/cpu/act.c and basic.c. One block per row; block
 * sums use a fixed tree, so results are the same run to run (the embedding's scatter-add
 * too: no float atomics, rows added in position order). */
#include <math.h>
#include "core/cuda/common.cuh"

#define ROW_THREADS 256

static inline unsigned row_blocks(int64_t R) { return (unsigned)(R < 1 ? 1 : (R > 2147483647 ? 2147483647 : R)); }

/* ---- softmax / log_softmax --------------------------------------------------------------- */
__global__ void k_softmax(const float *x, float *y, int64_t C, bool log) {
    __shared__ float sh[33];
    const float *xr = x + blockIdx.x * C;
    float *yr = y + blockIdx.x * C;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = vcu_block_reduce<float, vcu_warp_max>(m, sh, -INFINITY);
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += expf(xr[c] - m);
    sum = vcu_block_reduce<float, vcu_warp_sum>(sum, sh, 0.f);
    if (log) {
        float ls = logf(sum);
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = (xr[c] - m) - ls;
    } else {
        float inv = 1.f / sum;
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
    }
}
extern "C" int volt_cu_softmax(void *s, const float *x, float *y, int64_t R, int64_t C, bool log) {
    if (R <= 0 || C <= 0) return 0;
    k_softmax<<<row_blocks(R), ROW_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, y, C, log);
    VOLT_CU_DONE();
}

__global__ void k_softmax_grad(const float *y, const float *dy, float *dx, int64_t C, bool log, bool acc) {
    __shared__ float sh[33];
    const int64_t o = (int64_t)blockIdx.x * C;
    float d = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) d += log ? dy[o + c] : dy[o + c] * y[o + c];
    d = vcu_block_reduce<float, vcu_warp_sum>(d, sh, 0.f);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float v = log ? dy[o + c] - expf(y[o + c]) * d : y[o + c] * (dy[o + c] - d);
        dx[o + c] = acc ? dx[o + c] + v : v;
    }
}
extern "C" int volt_cu_softmax_grad(void *s, const float *y, const float *dy, float *dx, int64_t R, int64_t C, bool log,
                                    bool acc) {
    if (R <= 0 || C <= 0) return 0;
    k_softmax_grad<<<row_blocks(R), ROW_THREADS, 0, VOLT_CU_STREAM(s)>>>(y, dy, dx, C, log, acc);
    VOLT_CU_DONE();
}

/* ---- layernorm: two passes in float (mean, squared deviations), biased variance --------
 * Rows of up to LN_CACHE x 256 columns (DistilBERT's 768: 3 per thread) are read from memory
 * once and kept in registers (CACHED); longer rows re-read. Thread t handles columns t,
 * t + 256, ... in that order on both paths, so the sums and results are the same bits. */
#define LN_CACHE 4
#define LN_FOR(k, c)                                                                  \
    _Pragma("unroll") for (int k = 0; CACHED ? k < LN_CACHE : true; k++)              \
        if (const int64_t c = threadIdx.x + (int64_t)k * blockDim.x; c >= C) break;   \
        else
template <bool CACHED>
__global__ void k_layernorm(const float *x, const float *w, const float *b, float *y, float *stats, int64_t R,
                            int64_t C, float eps) {
    __shared__ float sh[33];
    const int64_t r = blockIdx.x;
    const float *xr = x + r * C;
    float *yr = y + r * C;
    float v[CACHED ? LN_CACHE : 1];
    float s = 0.f;
    LN_FOR(k, c) {
        const float xv = xr[c];
        if (CACHED) v[k] = xv;
        s += xv;
    }
    float mean = vcu_block_reduce<float, vcu_warp_sum>(s, sh, 0.f) / (float)C;
    float q = 0.f;
    LN_FOR(k, c) { float d = (CACHED ? v[k] : xr[c]) - mean; q += d * d; }
    float rstd = 1.f / sqrtf(vcu_block_reduce<float, vcu_warp_sum>(q, sh, 0.f) / (float)C + eps);
    if (stats && threadIdx.x == 0) { stats[r] = mean; stats[R + r] = rstd; }
    LN_FOR(k, c) {
        float o = ((CACHED ? v[k] : xr[c]) - mean) * rstd;
        if (w) o = o * w[c];
        if (b) o = o + b[c];
        yr[c] = o;
    }
}
extern "C" int volt_cu_layernorm(void *s, const float *x, const float *w, const float *b, float *y, float *stats,
                                 int64_t R, int64_t C, float eps) {
    if (R <= 0 || C <= 0) return 0;
    if (C <= (int64_t)ROW_THREADS * LN_CACHE)
        k_layernorm<true><<<row_blocks(R), ROW_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, w, b, y, stats, R, C, eps);
    else
        k_layernorm<false><<<row_blocks(R), ROW_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, w, b, y, stats, R, C, eps);
    VOLT_CU_DONE();
}

/* dx = rstd * (g - mean(g) - xh * mean(g * xh)), g = dy * w; g and x - mean kept in
 * registers for rows of up to LN_CACHE x 256 (as k_layernorm) */
template <bool CACHED>
__global__ void k_layernorm_grad_x(const float *x, const float *dy, const float *w, const float *stats, float *dx,
                                   int64_t R, int64_t C, bool acc) {
    __shared__ float sh[33];
    const int64_t r = blockIdx.x, o = r * C;
    const float mu = stats[r], rs = stats[R + r];
    float gv[CACHED ? LN_CACHE : 1], xv[CACHED ? LN_CACHE : 1];
    float ag = 0.f, agx = 0.f;
    LN_FOR(k, c) {
        const float g = w ? dy[o + c] * w[c] : dy[o + c], xm = x[o + c] - mu;
        if (CACHED) { gv[k] = g; xv[k] = xm; }
        ag += g;
        agx += g * (xm * rs);
    }
    float mg = vcu_block_reduce<float, vcu_warp_sum>(ag, sh, 0.f) / (float)C;
    float mgx = vcu_block_reduce<float, vcu_warp_sum>(agx, sh, 0.f) / (float)C;
    LN_FOR(k, c) {
        const float g = CACHED ? gv[k] : (w ? dy[o + c] * w[c] : dy[o + c]);
        const float xm = CACHED ? xv[k] : x[o + c] - mu;
        float v = rs * (g - mg - xm * rs * mgx);
        dx[o + c] = acc ? dx[o + c] + v : v;
    }
}
extern "C" int volt_cu_layernorm_grad_x(void *s, const float *x, const float *dy, const float *w, const float *stats,
                                        float *dx, int64_t R, int64_t C, bool acc) {
    if (R <= 0 || C <= 0) return 0;
    if (C <= (int64_t)ROW_THREADS * LN_CACHE)
        k_layernorm_grad_x<true><<<row_blocks(R), ROW_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, dy, w, stats, dx, R, C, acc);
    else
        k_layernorm_grad_x<false><<<row_blocks(R), ROW_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, dy, w, stats, dx, R, C, acc);
    VOLT_CU_DONE();
}

/* columns: the row chunks of volt_cu_colsum (elementwise.cu): a block of 32 x 8 threads owns
 * 32 columns of one chunk, its 8 row lanes sum in row order, then a fixed tree; with several
 * chunks the partials (gw's in part[0 ..), gb's in part[VOLT_CU_COLSUM_PARTIALS ..)) are added
 * by k_layernorm_grad_wb_final in the same fixed order. */
__device__ __forceinline__ float ln_tree8(const float (*p)[33], int t) {
    return ((p[0][t] + p[1][t]) + (p[2][t] + p[3][t])) + ((p[4][t] + p[5][t]) + (p[6][t] + p[7][t]));
}
__global__ void k_layernorm_grad_wb(const float *x, const float *dy, const float *stats, int64_t R, int64_t C,
                                    int64_t rows, float *gw, bool acc_w, float *gb, bool acc_b, float *part) {
    __shared__ float pw[8][33], pb[8][33];
    const int64_t c = (int64_t)blockIdx.x * 32 + threadIdx.x, r0 = (int64_t)blockIdx.y * rows;
    const int64_t r1 = r0 + rows < R ? r0 + rows : R;
    float aw = 0.f, ab = 0.f;
    if (c < C)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
            float g = dy[r * C + c];
            aw += g * (x[r * C + c] - stats[r]) * stats[R + r];
            ab += g;
        }
    pw[threadIdx.y][threadIdx.x] = aw;
    pb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    const float sw = ln_tree8(pw, threadIdx.x), sb = ln_tree8(pb, threadIdx.x);
    if (gridDim.y > 1) {
        part[blockIdx.y * C + c] = sw;
        part[VOLT_CU_COLSUM_PARTIALS + blockIdx.y * C + c] = sb;
        return;
    }
    if (gw) gw[c] = acc_w ? gw[c] + sw : sw;
    if (gb) gb[c] = acc_b ? gb[c] + sb : sb;
}
/* the partial rows (chunks x C, twice) summed as k_layernorm_grad_wb sums rows: 8 row lanes
 * over the chunks in order, then the tree */
__global__ void k_layernorm_grad_wb_final(const float *part, int64_t chunks, int64_t C, float *gw, bool acc_w, float *gb,
                                          bool acc_b) {
    __shared__ float pw[8][33], pb[8][33];
    const int64_t c = (int64_t)blockIdx.x * 32 + threadIdx.x;
    float aw = 0.f, ab = 0.f;
    if (c < C)
        for (int64_t k = threadIdx.y; k < chunks; k += 8) {
            aw += part[k * C + c];
            ab += part[VOLT_CU_COLSUM_PARTIALS + k * C + c];
        }
    pw[threadIdx.y][threadIdx.x] = aw;
    pb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    const float sw = ln_tree8(pw, threadIdx.x), sb = ln_tree8(pb, threadIdx.x);
    if (gw) gw[c] = acc_w ? gw[c] + sw : sw;
    if (gb) gb[c] = acc_b ? gb[c] + sb : sb;
}
extern "C" int volt_cu_layernorm_grad_wb(void *s, const float *x, const float *dy, const float *stats, int64_t R,
                                         int64_t C, float *gw, bool acc_w, float *gb, bool acc_b, float *part) {
    if (C <= 0 || (!gw && !gb)) return 0;
    int64_t rows = 8;
    const int64_t ch = R > 0 ? volt_cu_colsum_chunks(R, C, &rows) : 1;
    cudaStream_t st = VOLT_CU_STREAM(s);
    k_layernorm_grad_wb<<<dim3((unsigned)((C + 31) / 32), (unsigned)ch), dim3(32, 8), 0, st>>>(x, dy, stats, R, C, rows, gw,
                                                                                              acc_w, gb, acc_b, part);
    if (ch > 1)
        k_layernorm_grad_wb_final<<<(unsigned)((C + 31) / 32), dim3(32, 8), 0, st>>>(part, ch, C, gw, acc_w, gb, acc_b);
    VOLT_CU_DONE();
}

/* ---- cross-entropy (fused softmax): per row in double, like the CPU ---------------------- */
__global__ void k_xent_rows(const float *x, const void *tgt, bool tgt64, int64_t N, int64_t C, int64_t ignore, float eps,
                            float *lse, double *rowloss, int64_t *info) {
    __shared__ float sh[33];
    __shared__ double shd[33];
    const int64_t r = blockIdx.x;
    const float *row = x + r * C;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, row[c]);
    m = vcu_block_reduce<float, vcu_warp_max>(m, sh, -INFINITY);
    double se = 0, sl = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) { se += exp((double)row[c] - m); sl += row[c]; }
    se = vcu_block_reduce<double, vcu_warp_sum_d>(se, shd, 0.0);
    sl = vcu_block_reduce<double, vcu_warp_sum_d>(sl, shd, 0.0);
    if (threadIdx.x != 0) return;
    double l = m + log(se);
    lse[r] = (float)l;
    int64_t t = vcu_index(tgt, tgt64, r);
    if (t == ignore) { rowloss[r] = NAN; return; }   /* NaN marks "not counted" */
    if (t < 0 || t >= C) {
        atomicMin((unsigned long long *)&info[1], (unsigned long long)r);
        rowloss[r] = NAN;
        return;
    }
    rowloss[r] = (1.0 - eps) * (l - row[t]) + (double)eps * (l - sl / (double)C);
}
/* one block: rows in a fixed order (thread i sums rows i, i + blockDim, ...), then the tree */
__global__ void k_xent_total(const double *rowloss, const void *tgt, bool tgt64, int64_t N, int64_t ignore, int64_t C,
                             int64_t *info, float *out) {
    __shared__ double shd[33];
    double tot = 0, cnt = 0;
    for (int64_t r = threadIdx.x; r < N; r += blockDim.x) {
        int64_t t = vcu_index(tgt, tgt64, r);
        if (t == ignore || t < 0 || t >= C) continue;
        tot += rowloss[r];
        cnt += 1;
    }
    tot = vcu_block_reduce<double, vcu_warp_sum_d>(tot, shd, 0.0);
    cnt = vcu_block_reduce<double, vcu_warp_sum_d>(cnt, shd, 0.0);
    if (threadIdx.x == 0) {
        info[0] = (int64_t)cnt;
        out[0] = cnt > 0 ? (float)(tot / cnt) : NAN;
    }
}
/* device-side initialisation (no host copy: stays capturable in a CUDA graph) */
__global__ void k_set2(int64_t *p, int64_t a, int64_t b) { p[0] = a; p[1] = b; }

extern "C" int volt_cu_xent(void *s, const float *x, const void *tgt, bool tgt64, int64_t N, int64_t C, int64_t ignore,
                            float eps, float *lse, double *rowloss, int64_t *info, float *out) {
    cudaStream_t st = VOLT_CU_STREAM(s);
    k_set2<<<1, 1, 0, st>>>(info, 0, INT64_MAX);
    if (N > 0 && C > 0) k_xent_rows<<<row_blocks(N), ROW_THREADS, 0, st>>>(x, tgt, tgt64, N, C, ignore, eps, lse, rowloss, info);
    k_xent_total<<<1, 1024, 0, st>>>(rowloss, tgt, tgt64, N, ignore, C, info, out);
    VOLT_CU_DONE();
}

__global__ void k_xent_grad(const float *x, const void *tgt, bool tgt64, int64_t N, int64_t C, int64_t ignore, float eps,
                            const float *lse, const int64_t *info, const float *dy, float *dx, bool acc) {
    const int64_t count = info[0];
    const float g = count > 0 ? dy[0] / (float)count : 0.f;
    VOLT_CU_FOR(i, N * C) {
        int64_t r = i / C, c = i % C, t = vcu_index(tgt, tgt64, r);
        if (t == ignore || count == 0) {
            if (!acc) dx[i] = 0.f;
            continue;
        }
        float p = expf(x[i] - lse[r]);
        float tg = (c == t ? 1.f - eps : 0.f) + eps / (float)C;
        float v = g * (p - tg);
        dx[i] = acc ? dx[i] + v : 0.f + v;
    }
}
extern "C" int volt_cu_xent_grad(void *s, const float *x, const void *tgt, bool tgt64, int64_t N, int64_t C,
                                 int64_t ignore, float eps, const float *lse, const int64_t *info, const float *dy,
                                 float *dx, bool acc) {
    if (N * C <= 0) return 0;
    k_xent_grad<<<volt_cu_blocks(N * C), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, tgt, tgt64, N, C, ignore, eps, lse,
                                                                                  info, dy, dx, acc);
    VOLT_CU_DONE();
}

/* ---- reductions in double over a fixed grid ------------------------------------------------- */
#define RED_BLOCKS VOLT_CU_REDUCE_PARTIALS
__global__ void k_reduce_part(int mode, const float *a, const float *b, int64_t n, double *part) {
    __shared__ double shd[33];
    double v = 0;
    VOLT_CU_FOR(i, n) {
        double x = a[i];
        if (mode == 2) x -= b[i];
        v += mode == 0 ? x : x * x;
    }
    v = vcu_block_reduce<double, vcu_warp_sum_d>(v, shd, 0.0);
    if (threadIdx.x == 0) part[blockIdx.x] = v;
}
__global__ void k_reduce_final(const double *part, int nparts, float *out, double div, double *acc) {
    __shared__ double shd[33];
    double v = (int)threadIdx.x < nparts ? part[threadIdx.x] : 0.0;
    v = vcu_block_reduce<double, vcu_warp_sum_d>(v, shd, 0.0);
    if (threadIdx.x == 0) {
        if (out) out[0] = (float)(v / div);
        if (acc) acc[0] += v;
    }
}
extern "C" int volt_cu_reduce(void *s, int mode, const float *a, const float *b, int64_t n, double *partials, float *out,
                              double div, double *acc) {
    cudaStream_t st = VOLT_CU_STREAM(s);
    int64_t nb = (n + VOLT_CU_THREADS - 1) / VOLT_CU_THREADS;
    int parts = (int)(nb < 1 ? 1 : nb > RED_BLOCKS ? RED_BLOCKS : nb);
    k_reduce_part<<<parts, VOLT_CU_THREADS, 0, st>>>(mode, a, b, n, partials);
    k_reduce_final<<<1, RED_BLOCKS, 0, st>>>(partials, parts, out, div, acc);
    VOLT_CU_DONE();
}

__global__ void k_fill_grad(float *dx, int64_t n, const float *dy, float div, bool acc) {
    const float g = div == 1.f ? dy[0] : dy[0] / div;
    VOLT_CU_FOR(i, n) dx[i] = acc ? dx[i] + g : 0.f + g;
}
extern "C" int volt_cu_fill_grad(void *s, float *dx, int64_t n, const float *dy, float div, bool acc) {
    if (n <= 0) return 0;
    k_fill_grad<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(dx, n, dy, div, acc);
    VOLT_CU_DONE();
}

__global__ void k_mse_grad(const float *a, const float *b, const float *dy, float *da, float *db, int64_t n) {
    const float g = 2.f * dy[0] / (float)n;
    VOLT_CU_FOR(i, n) {
        float d = a[i] - b[i];
        if (da) da[i] += g * d;
        if (db) db[i] += -g * d;
    }
}
extern "C" int volt_cu_mse_grad(void *s, const float *a, const float *b, const float *dy, float *da, float *db, int64_t n) {
    if (n <= 0) return 0;
    k_mse_grad<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(a, b, dy, da, db, n);
    VOLT_CU_DONE();
}

/* ---- embedding ------------------------------------------------------------------------------- */
__global__ void k_emb_check(const void *ids, bool ids64, int64_t N, int64_t V, int64_t *bad) {
    VOLT_CU_FOR(p, N) {
        int64_t id = vcu_index(ids, ids64, p);
        if (id < 0 || id >= V) atomicMin((unsigned long long *)bad, (unsigned long long)p);
    }
}
extern "C" int volt_cu_embedding_check(void *s, const void *ids, bool ids64, int64_t N, int64_t V, int64_t *bad) {
    cudaStream_t st = VOLT_CU_STREAM(s);
    k_set2<<<1, 1, 0, st>>>(bad, INT64_MAX, 0);   /* bad[1] is scratch */
    if (N <= 0) VOLT_CU_DONE();
    k_emb_check<<<volt_cu_blocks(N), VOLT_CU_THREADS, 0, st>>>(ids, ids64, N, V, bad);
    VOLT_CU_DONE();
}
__global__ void k_err_fold(const int64_t *pos, uint64_t key_base, unsigned long long *word) {
    const int64_t p = *pos;
    if (p != INT64_MAX) atomicMin(word, (unsigned long long)(key_base | (uint64_t)p));
}
extern "C" int volt_cu_err_fold(void *s, const int64_t *pos, uint64_t key_base, uint64_t *word) {
    k_err_fold<<<1, 1, 0, VOLT_CU_STREAM(s)>>>(pos, key_base, (unsigned long long *)word);
    VOLT_CU_DONE();
}
__global__ void k_emb(const void *ids, bool ids64, const float *tab, float *y, int64_t N, int64_t D, int64_t V) {
    VOLT_CU_FOR(i, N * D) {
        int64_t id = vcu_index(ids, ids64, i / D);
        y[i] = id >= 0 && id < V ? tab[id * D + i % D] : 0.f;   /* out of range: reported by the check */
    }
}
extern "C" int volt_cu_embedding(void *s, const void *ids, bool ids64, const float *tab, float *y, int64_t N, int64_t D,
                                 int64_t V) {
    if (N * D <= 0) return 0;
    k_emb<<<volt_cu_blocks(N * D), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(ids, ids64, tab, y, N, D, V);
    VOLT_CU_DONE();
}
/* Embedding backward without float atomics, so its bits do not depend on scheduling (eager and
 * graph replay agree, runs repeat) and are the CPU backend's: position i owns vocabulary row
 * id[i] when no earlier position has that id, and its block adds the dy rows of every position
 * with that id into g[id] in ascending position order, element by element: g += dy[p0],
 * += dy[p1], ... as core/cpu/act.c's loop does. Per position: the ids before it are scanned
 * EMB_T at a time until an earlier one matches (then another block owns the row); an owner
 * scans the ids from i on, EMB_T at a time, collects the matching positions of a chunk in order
 * (thread 0, only for chunks with a match) and adds their rows, threads over the D columns.
 * Cost: at most N^2 / EMB_T chunk tests over all blocks (for the seed step's 6,144 positions,
 * 147 K coalesced 1 KB reads of ids, from L2) besides dy read once and g's rows written once.
 * The block's control flow is uniform: every branch depends on i, the block's barriers'
 * results or shared values. */
#define EMB_T 256
__global__ void __launch_bounds__(EMB_T) k_emb_grad(const void *ids, bool ids64, const float *dy, float *g,
                                                    int64_t N, int64_t D, int64_t V, int64_t pad) {
    __shared__ unsigned char hit[EMB_T];
    __shared__ int64_t list[EMB_T];
    __shared__ int n_list;
    const int t = (int)threadIdx.x;
    for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
        const int64_t id = vcu_index(ids, ids64, i);
        if (id == pad || id < 0 || id >= V) continue;   /* bad ids: the forward's check reports them */
        int earlier = 0;
        for (int64_t b = 0; b < i && !earlier; b += EMB_T)
            earlier = __syncthreads_or(b + t < i && vcu_index(ids, ids64, b + t) == id);
        if (earlier) continue;
        float *gr = g + id * D;
        for (int64_t b = i; b < N; b += EMB_T) {
            const bool m = b + t < N && vcu_index(ids, ids64, b + t) == id;
            hit[t] = m;
            if (!__syncthreads_or(m)) continue;   /* (the barrier also publishes hit[]) */
            if (t == 0) {                         /* the matches of this chunk, in position order */
                int n = 0;
                for (int k = 0; k < EMB_T; k++)
                    if (hit[k]) list[n++] = b + k;
                n_list = n;
            }
            __syncthreads();
            const int n = n_list;
            for (int64_t c = t; c < D; c += EMB_T) {
                float acc = gr[c];
                for (int k = 0; k < n; k++) acc += dy[list[k] * D + c];
                gr[c] = acc;
            }
            __syncthreads();   /* hit, list and n_list are rewritten by the next chunk */
        }
    }
}
extern "C" int volt_cu_embedding_grad(void *s, const void *ids, bool ids64, const float *dy, float *g, int64_t N,
                                      int64_t D, int64_t V, int64_t pad) {
    if (N * D <= 0) return 0;
    const unsigned grid = (unsigned)(N < 8192 ? N : 8192);   /* blocks stride over the positions */
    k_emb_grad<<<grid, EMB_T, 0, VOLT_CU_STREAM(s)>>>(ids, ids64, dy, g, N, D, V, pad);
    VOLT_CU_DONE();
}

/* ---- argmax, accuracy ------------------------------------------------------------------------ */
__global__ void k_argmax(const float *x, int64_t *y, int64_t N, int64_t C) {
    VOLT_CU_FOR(r, N) {
        const float *row = x + r * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (row[c] > row[best]) best = c;
        y[r] = best;
    }
}
extern "C" int volt_cu_argmax(void *s, const float *x, int64_t *y, int64_t N, int64_t C) {
    if (N <= 0) return 0;
    k_argmax<<<volt_cu_blocks(N), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, y, N, C);
    VOLT_CU_DONE();
}
__global__ void k_accuracy(const int64_t *am, const void *tgt, bool tgt64, int64_t n, float *out) {
    __shared__ double shd[33];
    double hit = 0, cnt = 0;
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
        int64_t t = vcu_index(tgt, tgt64, r);
        if (t == -100) continue;
        cnt += 1;
        hit += am[r] == t;
    }
    hit = vcu_block_reduce<double, vcu_warp_sum_d>(hit, shd, 0.0);
    cnt = vcu_block_reduce<double, vcu_warp_sum_d>(cnt, shd, 0.0);
    if (threadIdx.x == 0) out[0] = cnt > 0 ? (float)(hit / cnt) : 0.f;
}
extern "C" int volt_cu_accuracy(void *s, const int64_t *am, const void *tgt, bool tgt64, int64_t n, float *out) {
    k_accuracy<<<1, 256, 0, VOLT_CU_STREAM(s)>>>(am, tgt, tgt64, n, out);
    VOLT_CU_DONE();
}
