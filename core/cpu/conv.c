/* CPU kernels of conv2d (im2col + GEMM) and max_pool2d.
 *
 * conv2d: x (N, C, H, W), w (O, C, KH, KW), b (O) -> y (N, O, OH, OW). Per sample,
 * col (C*KH*KW, OH*OW) = im2col(x_n) and y_n (O, OH*OW) = w (O, CKK) col + b. The col
 * buffers are step scratch; backward recomputes them rather than keeping them alive.
 *
 * Determinism: the batch is split across threads only where each sample writes its own
 * target (y_n, dx_n); dw and db sum over the batch sequentially in sample order. A
 * parallel batch loop runs single-threaded GEMMs (OpenBLAS-OpenMP sees the region);
 * a sequential one lets the GEMM use the threads. */
#include <math.h>
#include <string.h>
#include <omp.h>
#include "core/cpu/kernels.h"
#include "core/kernel_math.h"

#define PAR_MIN 32768   /* below this many elements a loop runs on one thread */

typedef struct conv_geom { int64_t N, C, H, W, O, KH, KW, OH, OW, S, P, CKK, OHW; } conv_geom;

static conv_geom conv_geometry(const volt_node *n) {
    const volt_shape *x = &n->in[0]->shape, *w = &n->in[1]->shape, *y = &n->out->shape;
    conv_geom g = { .N = x->d[0], .C = x->d[1], .H = x->d[2], .W = x->d[3], .O = w->d[0], .KH = w->d[2],
                    .KW = w->d[3], .OH = y->d[2], .OW = y->d[3], .S = n->attr.conv2d.stride, .P = n->attr.conv2d.padding };
    g.CKK = g.C * g.KH * g.KW;
    g.OHW = g.OH * g.OW;
    return g;
}

/* A 1x1, stride-1, unpadded conv is a plain GEMM on x_n: no col buffer. */
static bool conv_pointwise(const conv_geom *g) { return g->KH == 1 && g->KW == 1 && g->S == 1 && g->P == 0; }

/* Threads for a batch-parallel loop: all of them when the batch can feed them, else 1
 * (then the GEMMs inside are threaded instead). */
static int batch_threads(int64_t N) {
    int t = omp_in_parallel() ? 1 : omp_get_max_threads();
    return t > 1 && N >= t ? t : 1;
}

/* col (CKK, OHW) from one sample x (C, H, W); rows are (c, kh, kw), zeros in the padding.
 * `par`: split channels across threads (false inside a batch-parallel loop). */
static void im2col(const conv_geom *g, const float *x, float *col, bool par) {
    #pragma omp parallel for schedule(static) if (par && g->CKK * g->OHW > PAR_MIN)
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t kh = 0; kh < g->KH; kh++)
            for (int64_t kw = 0; kw < g->KW; kw++) {
                float *row = col + ((c * g->KH + kh) * g->KW + kw) * g->OHW;
                for (int64_t oh = 0; oh < g->OH; oh++) {
                    float *r = row + oh * g->OW;
                    int64_t ih = oh * g->S - g->P + kh;
                    if (ih < 0 || ih >= g->H) {
                        memset(r, 0, sizeof(float) * (size_t)g->OW);
                        continue;
                    }
                    const float *xr = x + (c * g->H + ih) * g->W;
                    for (int64_t ow = 0; ow < g->OW; ow++) {
                        int64_t iw = ow * g->S - g->P + kw;
                        r[ow] = iw >= 0 && iw < g->W ? xr[iw] : 0.f;
                    }
                }
            }
}

/* dx (C, H, W) += col2im(dcol (CKK, OHW)). Channels are disjoint targets, so splitting
 * them across threads keeps each element's sum order fixed. */
static void col2im_acc(const conv_geom *g, const float *dcol, float *dx, bool par) {
    #pragma omp parallel for schedule(static) if (par && g->CKK * g->OHW > PAR_MIN)
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t kh = 0; kh < g->KH; kh++)
            for (int64_t kw = 0; kw < g->KW; kw++) {
                const float *row = dcol + ((c * g->KH + kh) * g->KW + kw) * g->OHW;
                for (int64_t oh = 0; oh < g->OH; oh++) {
                    int64_t ih = oh * g->S - g->P + kh;
                    if (ih < 0 || ih >= g->H) continue;
                    const float *r = row + oh * g->OW;
                    float *xr = dx + (c * g->H + ih) * g->W;
                    for (int64_t ow = 0; ow < g->OW; ow++) {
                        int64_t iw = ow * g->S - g->P + kw;
                        if (iw >= 0 && iw < g->W) xr[iw] += r[ow];
                    }
                }
            }
}

volt_status volt__cpu_CONV2D_fwd(volt_step *s, volt_node *n) {
    conv_geom g = conv_geometry(n);
    const float *x = n->in[0]->data, *w = n->in[1]->data;
    const float *b = n->n_in == 3 ? n->in[2]->data : NULL;
    float *y = n->out->data;
    bool direct = conv_pointwise(&g);
    int T = batch_threads(g.N);
    float *cols = NULL;
    if (!direct && !(cols = volt_step_alloc(s, sizeof(float) * (size_t)(T * g.CKK * g.OHW)))) return VOLT_ERR_NOMEM;
    int64_t xsz = g.C * g.H * g.W, ysz = g.O * g.OHW;
    #pragma omp parallel for schedule(static) num_threads(T) if (T > 1)
    for (int64_t i = 0; i < g.N; i++) {
        const float *col = x + i * xsz;
        if (!direct) {
            float *buf = cols + (int64_t)omp_get_thread_num() * g.CKK * g.OHW;
            im2col(&g, x + i * xsz, buf, T == 1);
            col = buf;
        }
        float *yi = y + i * ysz;
        if (b)   /* y_n starts as the broadcast bias; the GEMM adds into it */
            for (int64_t o = 0; o < g.O; o++)
                for (int64_t p = 0; p < g.OHW; p++) yi[o * g.OHW + p] = b[o];
        volt__cpu_gemm('N', 'N', g.O, g.OHW, g.CKK, 1.f, w, g.CKK, col, g.OHW, b ? 1.f : 0.f, yi, g.OHW);
    }
    return VOLT_OK;
}

volt_status volt__cpu_CONV2D_bwd(volt_step *s, volt_node *n) {
    volt__cpu_zero_stores(n);   /* these kernels accumulate into their grads */
    conv_geom g = conv_geometry(n);
    volt_tensor *x = n->in[0], *w = n->in[1], *b = n->n_in == 3 ? n->in[2] : NULL;
    const float *dy = n->out->grad;
    bool direct = conv_pointwise(&g);
    int64_t xsz = g.C * g.H * g.W, ysz = g.O * g.OHW, csz = g.CKK * g.OHW;
    bool need_x = volt__needs_grad(x), need_w = volt__needs_grad(w);
    int T = need_x ? batch_threads(g.N) : 1;
    float *cols = NULL;
    if (!direct && (need_x || need_w) && !(cols = volt_step_alloc(s, sizeof(float) * (size_t)(T * csz))))
        return VOLT_ERR_NOMEM;

    if (need_x) {   /* per sample: dcol (CKK, OHW) = w^T (CKK, O) dy_n (O, OHW); dx_n += col2im(dcol) */
        const float *wd = w->data;
        float *dx = x->grad;
        #pragma omp parallel for schedule(static) num_threads(T) if (T > 1)
        for (int64_t i = 0; i < g.N; i++) {
            if (direct) {
                volt__cpu_gemm('T', 'N', g.CKK, g.OHW, g.O, 1.f, wd, g.CKK, dy + i * ysz, g.OHW, 1.f, dx + i * xsz, g.OHW);
                continue;
            }
            float *dcol = cols + (int64_t)omp_get_thread_num() * csz;
            volt__cpu_gemm('T', 'N', g.CKK, g.OHW, g.O, 1.f, wd, g.CKK, dy + i * ysz, g.OHW, 0.f, dcol, g.OHW);
            col2im_acc(&g, dcol, dx + i * xsz, T == 1);
        }
    }
    if (need_w) {   /* dw (O, CKK) += dy_n (O, OHW) col_n^T (OHW, CKK), samples in order */
        const float *xd = x->data;
        for (int64_t i = 0; i < g.N; i++) {
            const float *col = xd + i * xsz;
            if (!direct) {
                im2col(&g, xd + i * xsz, cols, true);
                col = cols;
            }
            volt__cpu_gemm('N', 'T', g.O, g.CKK, g.OHW, 1.f, dy + i * ysz, g.OHW, col, g.OHW, 1.f, w->grad, g.CKK);
        }
    }
    if (b && volt__needs_grad(b)) {   /* db (O) += sum over n, p of dy (N, O, OHW); one channel per thread */
        float *db = b->grad;
        #pragma omp parallel for schedule(static) if (g.N * ysz > PAR_MIN)
        for (int64_t o = 0; o < g.O; o++) {
            double acc = 0;
            for (int64_t i = 0; i < g.N; i++) {
                const float *r = dy + i * ysz + o * g.OHW;
                for (int64_t p = 0; p < g.OHW; p++) acc += r[p];
            }
            db[o] += (float)acc;
        }
    }
    return VOLT_OK;
}

/* ---- max_pool2d: x (N, C, H, W) -> y (N, C, OH, OW), window k, stride S, no padding.
 * saved: i32 (N, C, OH, OW) index of each window's max within its (H, W) plane (first on
 * ties; NaN wins, as in PyTorch). Kept only when the node needs backward. --------------- */
volt_status volt__cpu_MAX_POOL2D_fwd(volt_step *s, volt_node *n) {
    const volt_shape *xs = &n->in[0]->shape, *ys = &n->out->shape;
    int64_t planes = xs->d[0] * xs->d[1], H = xs->d[2], W = xs->d[3], OH = ys->d[2], OW = ys->d[3];
    int64_t k = n->attr.max_pool2d.kernel, S = n->attr.max_pool2d.stride;
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    int32_t *arg = NULL;
    if (volt__needs_grad(n->out)) {
        if (!(arg = volt_step_alloc(s, sizeof(int32_t) * (size_t)(planes * OH * OW)))) return VOLT_ERR_NOMEM;
    }
    n->saved = arg;
    #pragma omp parallel for schedule(static) if (planes * OH * OW * k * k > PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * H * W;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                float m;
                int64_t best = volt__pool_window(xp, W, oh, ow, k, S, &m);
                int64_t q = (pl * OH + oh) * OW + ow;
                y[q] = m;
                if (arg) arg[q] = (int32_t)best;
            }
    }
    return VOLT_OK;
}

volt_status volt__cpu_MAX_POOL2D_bwd(volt_step *s, volt_node *n) {
    volt__cpu_zero_stores(n);   /* these kernels accumulate into their grads */
    const volt_shape *xs = &n->in[0]->shape, *ys = &n->out->shape;
    int64_t planes = xs->d[0] * xs->d[1], HW = xs->d[2] * xs->d[3], OHW = ys->d[2] * ys->d[3];
    const int32_t *arg = n->saved;
    const float *dy = n->out->grad;
    float *dx = n->in[0]->grad;
    if (!arg) return VOLT_ERR_STATE;
    /* overlapping windows (S < k) hit the same dx element: one plane per thread, in order */
    #pragma omp parallel for schedule(static) if (planes * OHW > PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t q = pl * OHW; q < (pl + 1) * OHW; q++) dx[pl * HW + arg[q]] += dy[q];
    return VOLT_OK;
}
