/* ref_mlp.h — an independent reference for tests/test_strategies.c's MLP: the whole run,
 * trained in double from first principles, sharing no code with the library (no kernels,
 * no optimizer, no clipping, no scheduler of volt's).
 *
 * Model: x (IN) -> relu(W1 x + b1) (H1) -> relu(W2 h + b2) (H2) -> W3 h + b3 (NC), mean
 * cross-entropy over the micro-batch. Parameters flat in declaration order (w1, b1, w2, b2,
 * w3, b3), as the test's copy_params lays them out. One optimizer step = ACC micro-steps,
 * gradients of loss/ACC summed; clipped by the global L2 norm like
 * torch.nn.utils.clip_grad_norm_ (coef = max/(norm + 1e-6) when below 1); the HF linear
 * schedule with warmup (lr factor s/warmup, then (total - s)/(total - warmup) at step s,
 * counted from 0); torch.optim.AdamW (p *= 1 - lr*wd; m, v; bias corrections). */
#ifndef REF_MLP_H
#define REF_MLP_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct ref_mlp_cfg {
    int in, h1, h2, nc;                  /* layer sizes */
    int rows, acc, steps;                /* rows per micro-batch, micro-steps per step, steps */
    double lr, wd, beta1, beta2, eps;    /* AdamW */
    double clip;                         /* max global norm; 0 = none */
    int warmup, total;                   /* HF linear schedule */
} ref_mlp_cfg;

static int64_t ref_mlp_numel(const ref_mlp_cfg *c) {
    return (int64_t)c->h1 * c->in + c->h1 + (int64_t)c->h2 * c->h1 + c->h2 + (int64_t)c->nc * c->h2 + c->nc;
}

/* g += scale * d(mean CE over the rows)/d(theta); returns the mean loss */
static double ref_mlp_grad(const ref_mlp_cfg *c, const double *th, const float *x, const int64_t *y, double scale,
                           double *g) {
    const int IN_ = c->in, A = c->h1, B = c->h2, C = c->nc;
    const double *w1 = th, *b1 = w1 + A * IN_, *w2 = b1 + A, *b2 = w2 + B * A, *w3 = b2 + B, *b3 = w3 + C * B;
    double *gw1 = g, *gb1 = gw1 + A * IN_, *gw2 = gb1 + A, *gb2 = gw2 + B * A, *gw3 = gb2 + B, *gb3 = gw3 + C * B;
    double a1[256], h1[256], a2[256], h2[256], z[64], dz[64], dh2[256], dh1[256];
    double loss = 0;
    for (int r = 0; r < c->rows; r++) {
        const float *xr = x + (int64_t)r * IN_;
        for (int i = 0; i < A; i++) {
            double s = b1[i];
            for (int k = 0; k < IN_; k++) s += w1[i * IN_ + k] * xr[k];
            a1[i] = s;
            h1[i] = s > 0 ? s : 0;
        }
        for (int i = 0; i < B; i++) {
            double s = b2[i];
            for (int k = 0; k < A; k++) s += w2[i * A + k] * h1[k];
            a2[i] = s;
            h2[i] = s > 0 ? s : 0;
        }
        double mx = -INFINITY, se = 0;
        for (int i = 0; i < C; i++) {
            double s = b3[i];
            for (int k = 0; k < B; k++) s += w3[i * B + k] * h2[k];
            z[i] = s;
            mx = fmax(mx, s);
        }
        for (int i = 0; i < C; i++) se += exp(z[i] - mx);
        const double lse = mx + log(se);
        loss += (lse - z[y[r]]) / c->rows;
        /* backward: dz = (softmax - onehot) / rows * scale */
        for (int i = 0; i < C; i++) dz[i] = (exp(z[i] - lse) - (i == y[r])) / c->rows * scale;
        for (int k = 0; k < B; k++) dh2[k] = 0;
        for (int i = 0; i < C; i++) {
            gb3[i] += dz[i];
            for (int k = 0; k < B; k++) { gw3[i * B + k] += dz[i] * h2[k]; dh2[k] += w3[i * B + k] * dz[i]; }
        }
        for (int k = 0; k < A; k++) dh1[k] = 0;
        for (int i = 0; i < B; i++) {
            const double d = a2[i] > 0 ? dh2[i] : 0;
            gb2[i] += d;
            for (int k = 0; k < A; k++) { gw2[i * A + k] += d * h1[k]; dh1[k] += w2[i * A + k] * d; }
        }
        for (int i = 0; i < A; i++) {
            const double d = a1[i] > 0 ? dh1[i] : 0;
            gb1[i] += d;
            for (int k = 0; k < IN_; k++) gw1[i * IN_ + k] += d * xr[k];
        }
    }
    return loss;
}

/* Train from th (n values, updated in place) on micro-batch j = x[j] (rows x in), y[j];
 * losses[j] = micro-step j's mean loss. */
static void ref_mlp_train(const ref_mlp_cfg *c, double *th, const float *const *x, const int64_t *const *y,
                          double *losses) {
    const int64_t n = ref_mlp_numel(c);
    double *g = calloc((size_t)n, sizeof *g), *m = calloc((size_t)n, sizeof *m), *v = calloc((size_t)n, sizeof *v);
    for (int s = 0; s < c->steps; s++) {
        memset(g, 0, sizeof *g * (size_t)n);
        for (int j = 0; j < c->acc; j++) {
            const int mi = s * c->acc + j;
            losses[mi] = ref_mlp_grad(c, th, x[mi], y[mi], 1.0 / c->acc, g);
        }
        if (c->clip > 0) {
            double ss = 0;
            for (int64_t k = 0; k < n; k++) ss += g[k] * g[k];
            const double coef = c->clip / (sqrt(ss) + 1e-6);
            if (coef < 1)
                for (int64_t k = 0; k < n; k++) g[k] *= coef;
        }
        const double f = s < c->warmup ? (double)s / c->warmup
                                       : fmax(0.0, (double)(c->total - s) / (double)(c->total - c->warmup));
        const double lr = c->lr * f, t = s + 1;
        const double bc1 = 1 - pow(c->beta1, t), bc2 = 1 - pow(c->beta2, t);
        for (int64_t k = 0; k < n; k++) {
            th[k] *= 1 - lr * c->wd;
            m[k] = c->beta1 * m[k] + (1 - c->beta1) * g[k];
            v[k] = c->beta2 * v[k] + (1 - c->beta2) * g[k] * g[k];
            th[k] -= lr * (m[k] / bc1) / (sqrt(v[k] / bc2) + c->eps);
        }
    }
    free(g);
    free(m);
    free(v);
}
#endif
