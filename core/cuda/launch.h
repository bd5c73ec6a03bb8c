/* core/cuda/launch.h — the extern "C" launchers of the "cuda" backend's kernels (.cu files).
 *
 * Plain arguments only (device pointers, sizes, flags; the stream as void *), so both the
 * C glue (the .c files of core/cuda, which read volt_node) and nvcc's C++ see the same declarations.
 * Every launcher enqueues its kernels on `stream` and returns the cudaError_t of the
 * launch (0 = cudaSuccess); none synchronizes. Float dtypes are volt_dtype's codes:
 * 0 = f32, 1 = bf16, 2 = f16 (VOLT_CU_*). `acc`: add to the output (the tape's ADD mode)
 * instead of storing it (STORE). Zero-size calls launch nothing and return 0. */
#ifndef VOLT_CUDA_LAUNCH_H
#define VOLT_CUDA_LAUNCH_H
#include <stdbool.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum { VOLT_CU_F32 = 0, VOLT_CU_BF16 = 1, VOLT_CU_F16 = 2 };

/* ---- elementwise (core/cuda/elementwise.cu) ---------------------------------------------- */
enum { VOLT_CU_RELU = 0, VOLT_CU_GELU, VOLT_CU_GELU_TANH, VOLT_CU_TANH, VOLT_CU_SIGMOID };
/* y = a (outer, inner) op b (inner) broadcast over rows; op 0 = add, 1 = mul */
int volt_cu_binary(void *stream, int op, const float *a, const float *b, float *y, int64_t outer, int64_t inner);
/* y = alpha x (n) */
int volt_cu_scale(void *stream, const float *x, float *y, int64_t n, float alpha);
/* dx (+)= alpha dy over n (a store writes 0.f + alpha dy, as the CPU's first writes) */
int volt_cu_axpy_grad(void *stream, float *dx, const float *dy, int64_t n, float alpha, bool acc);
/* da (outer, inner) (+)= dy * b (inner broadcast) */
int volt_cu_mul_grad_a(void *stream, float *da, const float *dy, const float *b, int64_t outer, int64_t inner, bool acc);
/* out[c] (+)= sum over r of dy[r, c] * (a ? a[r, c] : 1): rows split into chunks (a function
 * of R and C only: about VOLT_CU_COLSUM_BLOCKS blocks of 32 columns, chunks of at least
 * VOLT_CU_COLSUM_MIN_ROWS rows), each chunk's rows summed in 8 lanes in row order and a
 * fixed tree, the chunks' partial rows summed the same way (deterministic: a function of
 * R and C, the same bits eager or replayed, on any GPU). part: VOLT_CU_COLSUM_PARTIALS floats of device scratch
 * (the chunks' partial rows; unused with one chunk). R == 1: an elementwise map. */
#define VOLT_CU_COLSUM_BLOCKS 1024
#define VOLT_CU_COLSUM_MIN_ROWS 64
#define VOLT_CU_COLSUM_PARTIALS 65536   /* >= chunks x C for every R, C (elementwise.cu) */
int volt_cu_colsum(void *stream, const float *dy, const float *a, int64_t R, int64_t C, float *out, bool acc,
                   float *part);
/* The same for a (NULL) with dy's copy in dtype hb_dt (16-bit) written to hb (R x C) in the
 * same pass: a linear's bias grad and its backward GEMM operand from one read of dy */
int volt_cu_colsum_convert(void *stream, const float *dy, int64_t R, int64_t C, float *out, bool acc, float *part,
                           void *hb, int hb_dt);
/* The chunk count of a column sum over (R, C) (R > 0) and, in *rows, the rows per chunk */
int64_t volt_cu_colsum_chunks(int64_t R, int64_t C, int64_t *rows);
/* y = f(x); backward dx (+)= dy * f'(x) from x (relu, gelu, gelu_tanh) or y (tanh, sigmoid).
 * With x16 (forward), x's 16-bit rounding (dtype x16_dt) is written in the same pass; with
 * x16 (backward), f'(x) is taken at that rounding instead of x (x may then be NULL). */
int volt_cu_unary(void *stream, int op, const float *x, float *y, int64_t n, void *x16, int x16_dt);
int volt_cu_unary_grad(void *stream, int op, const float *x, const float *y, const float *dy, float *dx, int64_t n,
                       bool acc, const void *x16, int x16_dt);
/* n elements of src (src_dt) into dst (dst_dt): rounding to nearest even as core/convert.h */
int volt_cu_convert(void *stream, void *dst, int dst_dt, const void *src, int src_dt, int64_t n);
/* y = 0..n-1 as i64 (is64) or i32 */
int volt_cu_arange(void *stream, void *y, int64_t n, bool is64);
/* dst (contiguous D0 x D1 x D2 x D3) = src[i0 S0 + i1 S1 + i2 S2 + i3 S3], elements of esz
 * bytes (1, 2, 4, 8); _add_f32: dst += that (f32) */
int volt_cu_gather4(void *stream, const void *src, void *dst, int esz, const int64_t D[4], const int64_t S[4]);
int volt_cu_gather4_add_f32(void *stream, const float *src, float *dst, const int64_t D[4], const int64_t S[4]);
/* dst[r * dld + j] += src[r * sld + j] for r < rows, j < cols (slice / concat backward) */
int volt_cu_add2d(void *stream, const float *src, int64_t sld, float *dst, int64_t dld, int64_t rows, int64_t cols);
/* GEMM with K = 0: C_z (M, N) = beta C_z + bias (bias may be NULL) */
int volt_cu_fill_bias(void *stream, float *C, int64_t ldc, int64_t sc, int64_t batch, int64_t M, int64_t N,
                      const float *bias, float beta);

/* ---- rows and reductions (core/cuda/rows.cu) ------------------------------------------- */
/* softmax (log = false) or log_softmax over the last dim of x (R, C) */
int volt_cu_softmax(void *stream, const float *x, float *y, int64_t R, int64_t C, bool log);
/* softmax: dx (+)= y (dy - sum(dy y)); log_softmax: dx (+)= dy - exp(y) sum(dy) */
int volt_cu_softmax_grad(void *stream, const float *y, const float *dy, float *dx, int64_t R, int64_t C, bool log,
                         bool acc);
/* layernorm rows: stats (2R: mean then rstd) written when not NULL; w, b may be NULL */
int volt_cu_layernorm(void *stream, const float *x, const float *w, const float *b, float *y, float *stats,
                      int64_t R, int64_t C, float eps);
int volt_cu_layernorm_grad_x(void *stream, const float *x, const float *dy, const float *w, const float *stats,
                             float *dx, int64_t R, int64_t C, bool acc);
/* gw (+)= sum_r dy xh, gb (+)= sum_r dy (either may be NULL): the row chunks and order of
 * volt_cu_colsum; part: 2 x VOLT_CU_COLSUM_PARTIALS floats of device scratch */
int volt_cu_layernorm_grad_wb(void *stream, const float *x, const float *dy, const float *stats, int64_t R,
                              int64_t C, float *gw, bool acc_w, float *gb, bool acc_b, float *part);
/* Fused softmax + cross-entropy. Targets i32 or i64 (tgt64). lse (N floats) and rowloss
 * (N doubles, scratch) are written; info[0] = the count of targets not ignored, info[1] =
 * the first row whose target is outside [0, C) and not ignore (INT64_MAX when none); *out =
 * the mean loss over counted rows (NaN when none). */
int volt_cu_xent(void *stream, const float *x, const void *tgt, bool tgt64, int64_t N, int64_t C, int64_t ignore,
                 float eps, float *lse, double *rowloss, int64_t *info, float *out);
/* dx (+)= dy[0] / info[0] * (softmax - smoothed one-hot); ignored rows: 0 (store) or untouched */
int volt_cu_xent_grad(void *stream, const float *x, const void *tgt, bool tgt64, int64_t N, int64_t C, int64_t ignore,
                      float eps, const float *lse, const int64_t *info, const float *dy, float *dx, bool acc);
/* Sums in double over a fixed grid (the same bits run to run): mode 0 = sum a, 1 = sum a^2,
 * 2 = sum (a - b)^2. partials: VOLT_CU_REDUCE_PARTIALS doubles of scratch. Then
 * out (may be NULL) = (float)(total / div) and *acc (may be NULL) += total. */
#define VOLT_CU_REDUCE_PARTIALS 512
int volt_cu_reduce(void *stream, int mode, const float *a, const float *b, int64_t n, double *partials, float *out,
                   double div, double *acc);
/* dx (+)= dy[0] / div over n (sum, mean backward) */
int volt_cu_fill_grad(void *stream, float *dx, int64_t n, const float *dy, float div, bool acc);
/* mse backward: g = 2 dy[0] / n; da += g (a - b), db -= g (a - b) (NULL = not wanted) */
int volt_cu_mse_grad(void *stream, const float *a, const float *b, const float *dy, float *da, float *db, int64_t n);
/* embedding: bad[0] = the first position whose id is outside [0, V) (INT64_MAX when none;
 * bad holds 2 int64, the launcher initialises them); y (N, D) = tab[ids] (0 for an id out
 * of range); backward tab_grad[id] += dy[p] (float atomics) except padding_idx */
int volt_cu_embedding_check(void *stream, const void *ids, bool ids64, int64_t N, int64_t V, int64_t *bad);
/* Deferred error (core/deferred.c): when *pos != INT64_MAX, *word = min(*word, key_base | *pos)
 * (an atomic min on the backend's error word; one thread, no host read). */
int volt_cu_err_fold(void *stream, const int64_t *pos, uint64_t key_base, uint64_t *word);
int volt_cu_embedding(void *stream, const void *ids, bool ids64, const float *tab, float *y, int64_t N, int64_t D,
                      int64_t V);
int volt_cu_embedding_grad(void *stream, const void *ids, bool ids64, const float *dy, float *g, int64_t N, int64_t D,
                           int64_t V, int64_t pad);
/* argmax over rows of x (N, C) -> i64 (first maximum); accuracy of argmax vs target (-100 left out) */
int volt_cu_argmax(void *stream, const float *x, int64_t *y, int64_t N, int64_t C);
int volt_cu_accuracy(void *stream, const int64_t *am, const void *tgt, bool tgt64, int64_t n, float *out);

/* ---- conv2d, max_pool2d (core/cuda/conv.cu): direct kernels --------------------------- */
typedef struct volt_cu_conv {
    int64_t N, C, H, W, O, KH, KW, OH, OW, S, P;
} volt_cu_conv;
int volt_cu_conv2d(void *stream, const volt_cu_conv *g, const float *x, const float *w, const float *b, float *y);
/* the three grads are added to (the glue zeroes STORE grads first) */
int volt_cu_conv2d_grad_x(void *stream, const volt_cu_conv *g, const float *dy, const float *w, float *dx);
int volt_cu_conv2d_grad_w(void *stream, const volt_cu_conv *g, const float *dy, const float *x, float *dw);
int volt_cu_conv2d_grad_b(void *stream, const volt_cu_conv *g, const float *dy, float *db);
/* arg (may be NULL): the window max's index within its (H, W) plane, i32 */
int volt_cu_max_pool2d(void *stream, const float *x, float *y, int32_t *arg, int64_t planes, int64_t H, int64_t W,
                       int64_t OH, int64_t OW, int64_t k, int64_t S);
int volt_cu_max_pool2d_grad(void *stream, const float *dy, const int32_t *arg, float *dx, int64_t planes, int64_t HW,
                            int64_t OHW);

/* ---- parameter math (core/cuda/param_math.cu) ------------------------------------------ */
/* Layouts identical to core/device.h's volt_scaler_state and volt_opt_coef (checked by
 * static asserts in core/cuda/param_math.c). */
typedef struct volt_cu_scaler { float scale, found_inf; int64_t growth_tracker; } volt_cu_scaler;
typedef struct volt_cu_coef {
    float wd, momentum, one_minus_damp, neg_lr;
    int32_t nesterov, first;
    float decay, w1, one_minus_w1, beta2, w2, bc2_sqrt, eps, neg_step_size;
    int32_t avg_op;   /* volt_avg_op: 0 none, 1 copy, 2 EMA, 3 lerp */
    float avg_a, avg_b;
} volt_cu_coef;
int volt_cu_pm_scale(void *stream, float *x, int64_t n, float coef);
int volt_cu_pm_clip_by_norm(void *stream, float *x, int64_t n, const double *sqnorm, float max_norm);
int volt_cu_pm_clip_value(void *stream, float *x, int64_t n, float v);
int volt_cu_pm_unscale(void *stream, float *x, int64_t n, volt_cu_scaler *st);
int volt_cu_pm_scaler_update(void *stream, volt_cu_scaler *st, float growth, float backoff, int64_t interval);
/* kind: 0 SGD, 1 Adam, 2 AdamW (volt_update_kind); p in p_dt, states in s_dt (s0/s1 may be NULL);
 * skip: NULL or a device flag, nonzero = the update changes nothing (volt_update_args.skip) */
int volt_cu_pm_update(void *stream, int kind, void *p, int p_dt, const float *g, void *s0, void *s1, int s_dt,
                      int64_t n, const volt_cu_coef *coef, const float *skip);
/* Weight averaging (volt_param_math.average): avg (a_dt) from p (p_dt) as coef->avg_op says. */
int volt_cu_pm_average(void *stream, void *avg, int a_dt, const void *p, int p_dt, int64_t n, const volt_cu_coef *coef,
                       const float *skip);

#ifdef __cplusplus
}
#endif
#endif
