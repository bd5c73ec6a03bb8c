/* The "cuda" backend's conv2d and max_pool2d: direct kernels (the Fashion-MNIST CNN is
 * small; no cuDNN dependency). One thread per output element; the weight and bias grads
 * sum over the batch in a fixed order in one thread each (deterministic). Semantics of
 * core/cpu/conv.c: x (N, C, H, W), w (O, C, KH, KW), b (O) -> y (N, O, OH, OW). */
#include <math.h>
#include "core/cuda/common.cuh"
#include "core/kernel_math.h"

__global__ void k_conv(volt_cu_conv g, const float *x, const float *w, const float *b, float *y) {
    VOLT_CU_FOR(i, g.N * g.O * g.OH * g.OW) {
        int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, o = (i / (g.OW * g.OH)) % g.O, n = i / (g.OW * g.OH * g.O);
        float acc = 0.f;
        for (int64_t c = 0; c < g.C; c++)
            for (int64_t kh = 0; kh < g.KH; kh++) {
                int64_t ih = oh * g.S - g.P + kh;
                if (ih < 0 || ih >= g.H) continue;
                for (int64_t kw = 0; kw < g.KW; kw++) {
                    int64_t iw = ow * g.S - g.P + kw;
                    if (iw < 0 || iw >= g.W) continue;
                    acc += w[((o * g.C + c) * g.KH + kh) * g.KW + kw] * x[((n * g.C + c) * g.H + ih) * g.W + iw];
                }
            }
        y[i] = b ? b[o] + acc : acc;
    }
}
extern "C" int volt_cu_conv2d(void *s, const volt_cu_conv *g, const float *x, const float *w, const float *b, float *y) {
    int64_t n = g->N * g->O * g->OH * g->OW;
    if (n <= 0) return 0;
    k_conv<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(*g, x, w, b, y);
    VOLT_CU_DONE();
}

/* dx[n, c, ih, iw] += sum over o, kh, kw with oh = (ih + P - kh) / S exact */
__global__ void k_conv_gx(volt_cu_conv g, const float *dy, const float *w, float *dx) {
    VOLT_CU_FOR(i, g.N * g.C * g.H * g.W) {
        int64_t iw = i % g.W, ih = (i / g.W) % g.H, c = (i / (g.W * g.H)) % g.C, n = i / (g.W * g.H * g.C);
        float acc = 0.f;
        for (int64_t o = 0; o < g.O; o++)
            for (int64_t kh = 0; kh < g.KH; kh++) {
                int64_t th = ih + g.P - kh;
                if (th < 0 || th % g.S) continue;
                int64_t oh = th / g.S;
                if (oh >= g.OH) continue;
                for (int64_t kw = 0; kw < g.KW; kw++) {
                    int64_t tw = iw + g.P - kw;
                    if (tw < 0 || tw % g.S) continue;
                    int64_t ow = tw / g.S;
                    if (ow >= g.OW) continue;
                    acc += w[((o * g.C + c) * g.KH + kh) * g.KW + kw] * dy[((n * g.O + o) * g.OH + oh) * g.OW + ow];
                }
            }
        dx[i] += acc;
    }
}
extern "C" int volt_cu_conv2d_grad_x(void *s, const volt_cu_conv *g, const float *dy, const float *w, float *dx) {
    int64_t n = g->N * g->C * g->H * g->W;
    if (n <= 0) return 0;
    k_conv_gx<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(*g, dy, w, dx);
    VOLT_CU_DONE();
}

/* dw[o, c, kh, kw] += sum over n, oh, ow of dy * x: one thread per weight, samples in order */
__global__ void k_conv_gw(volt_cu_conv g, const float *dy, const float *x, float *dw) {
    VOLT_CU_FOR(i, g.O * g.C * g.KH * g.KW) {
        int64_t kw = i % g.KW, kh = (i / g.KW) % g.KH, c = (i / (g.KW * g.KH)) % g.C, o = i / (g.KW * g.KH * g.C);
        float acc = 0.f;
        for (int64_t n = 0; n < g.N; n++)
            for (int64_t oh = 0; oh < g.OH; oh++) {
                int64_t ih = oh * g.S - g.P + kh;
                if (ih < 0 || ih >= g.H) continue;
                for (int64_t ow = 0; ow < g.OW; ow++) {
                    int64_t iw = ow * g.S - g.P + kw;
                    if (iw < 0 || iw >= g.W) continue;
                    acc += dy[((n * g.O + o) * g.OH + oh) * g.OW + ow] * x[((n * g.C + c) * g.H + ih) * g.W + iw];
                }
            }
        dw[i] += acc;
    }
}
extern "C" int volt_cu_conv2d_grad_w(void *s, const volt_cu_conv *g, const float *dy, const float *x, float *dw) {
    int64_t n = g->O * g->C * g->KH * g->KW;
    if (n <= 0) return 0;
    k_conv_gw<<<volt_cu_blocks(n), 64, 0, VOLT_CU_STREAM(s)>>>(*g, dy, x, dw);
    VOLT_CU_DONE();
}

/* db[o] += sum over n, p of dy (double, as the CPU) */
__global__ void k_conv_gb(volt_cu_conv g, const float *dy, float *db) {
    __shared__ double shd[33];
    const int64_t o = blockIdx.x, ohw = g.OH * g.OW;
    double acc = 0;
    for (int64_t q = threadIdx.x; q < g.N * ohw; q += blockDim.x) acc += dy[((q / ohw) * g.O + o) * ohw + q % ohw];
    acc = vcu_block_reduce<double, vcu_warp_sum_d>(acc, shd, 0.0);
    if (threadIdx.x == 0) db[o] += (float)acc;
}
extern "C" int volt_cu_conv2d_grad_b(void *s, const volt_cu_conv *g, const float *dy, float *db) {
    if (g->O <= 0) return 0;
    k_conv_gb<<<(unsigned)g->O, 256, 0, VOLT_CU_STREAM(s)>>>(*g, dy, db);
    VOLT_CU_DONE();
}

/* max_pool2d: first maximum on ties, NaN wins (PyTorch) */
__global__ void k_pool(const float *x, float *y, int32_t *arg, int64_t planes, int64_t H, int64_t W, int64_t OH,
                       int64_t OW, int64_t k, int64_t S) {
    VOLT_CU_FOR(q, planes * OH * OW) {
        int64_t ow = q % OW, oh = (q / OW) % OH, pl = q / (OW * OH);
        float m;
        int64_t best = volt__pool_window(x + pl * H * W, W, oh, ow, k, S, &m);
        y[q] = m;
        if (arg) arg[q] = (int32_t)best;
    }
}
extern "C" int volt_cu_max_pool2d(void *s, const float *x, float *y, int32_t *arg, int64_t planes, int64_t H, int64_t W,
                                  int64_t OH, int64_t OW, int64_t k, int64_t S) {
    int64_t n = planes * OH * OW;
    if (n <= 0) return 0;
    k_pool<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, y, arg, planes, H, W, OH, OW, k, S);
    VOLT_CU_DONE();
}
/* one thread per plane, outputs in order: overlapping windows add in a fixed order */
__global__ void k_pool_grad(const float *dy, const int32_t *arg, float *dx, int64_t planes, int64_t HW, int64_t OHW) {
    VOLT_CU_FOR(pl, planes)
        for (int64_t q = pl * OHW; q < (pl + 1) * OHW; q++) dx[pl * HW + arg[q]] += dy[q];
}
extern "C" int volt_cu_max_pool2d_grad(void *s, const float *dy, const int32_t *arg, float *dx, int64_t planes, int64_t HW,
                                       int64_t OHW) {
    if (planes <= 0) return 0;
    k_pool_grad<<<volt_cu_blocks(planes), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(dy, arg, dx, planes, HW, OHW);
    VOLT_CU_DONE();
}
