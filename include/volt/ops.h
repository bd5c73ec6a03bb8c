/* volt/ops.h — differentiable ops. Every op runs inside a step (volt/core.h), allocates
 * its output from the step arena and, in a training step, records a tape node so that
 * volt_step_backward computes gradients. Float tensors are f32 unless a precision plugin
 * says otherwise; index tensors (ids, targets) are i32 or i64.
 *
 * Errors: an op given a NULL input, or failing a shape/dtype check, returns NULL and keeps
 * the first error in the step (volt_step_errmsg: the op name and both shapes), so calls
 * chain: volt_relu(s, volt_linear(s, x, w, b)). */
#ifndef VOLT_OPS_H
#define VOLT_OPS_H

#include "volt/export.h"

#include "volt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- linear algebra ------------------------------------------------------------- */
/* a (..., M, K) x b (K, N) -> (..., M, N); or batched a (B, M, K) x b (B, K, N). K == 0 gives
 * zeros (as torch). */
VOLT_API volt_tensor *volt_matmul(volt_step *s, volt_tensor *a, volt_tensor *b);
/* x (..., in) · w(out, in)^T + b(out) -> (..., out); b may be NULL. PyTorch layout. in == 0
 * gives b broadcast over the rows, or zeros (as torch). */
VOLT_API volt_tensor *volt_linear(volt_step *s, volt_tensor *x, volt_tensor *w, volt_tensor *b);

/* ---- elementwise ------------------------------------------------------------------ */
/* b has a's shape or a's trailing dims (broadcast over the leading ones: a bias). */
VOLT_API volt_tensor *volt_add(volt_step *s, volt_tensor *a, volt_tensor *b);
VOLT_API volt_tensor *volt_mul(volt_step *s, volt_tensor *a, volt_tensor *b);
VOLT_API volt_tensor *volt_scale(volt_step *s, volt_tensor *a, float alpha);
/* x (..., C) + b (C): volt_add with a bias. */
VOLT_API volt_tensor *volt_bias(volt_step *s, volt_tensor *x, volt_tensor *b);
VOLT_API volt_tensor *volt_relu(volt_step *s, volt_tensor *x);
VOLT_API volt_tensor *volt_gelu(volt_step *s, volt_tensor *x);        /* exact, erf form */
VOLT_API volt_tensor *volt_gelu_tanh(volt_step *s, volt_tensor *x);   /* tanh approximation */
VOLT_API volt_tensor *volt_tanh(volt_step *s, volt_tensor *x);
VOLT_API volt_tensor *volt_sigmoid(volt_step *s, volt_tensor *x);

/* ---- normalisation, probabilities, losses ---------------------------------------- */
VOLT_API volt_tensor *volt_softmax(volt_step *s, volt_tensor *x);      /* over the last dim */
VOLT_API volt_tensor *volt_log_softmax(volt_step *s, volt_tensor *x);  /* over the last dim */
/* x (..., C) normalised over C; w, b (C) may be NULL (no affine). */
VOLT_API volt_tensor *volt_layernorm(volt_step *s, volt_tensor *x, volt_tensor *w, volt_tensor *b, float eps);

typedef struct volt_ce_opts {
    int64_t ignore_index;      /* targets equal to this contribute nothing; default -100 */
    float label_smoothing;     /* in [0, 1); default 0 */
} volt_ce_opts;
#define VOLT_CE_DEFAULTS ((volt_ce_opts){ .ignore_index = -100, .label_smoothing = 0.f })
/* logits (N, C), target (N) i32/i64 -> scalar mean over non-ignored targets. */
VOLT_API volt_tensor *volt_cross_entropy(volt_step *s, volt_tensor *logits, volt_tensor *target);
VOLT_API volt_tensor *volt_cross_entropy_ex(volt_step *s, volt_tensor *logits, volt_tensor *target,
                                   const volt_ce_opts *opts);
/* mean((a - b)^2) -> scalar; both float, same shape. */
VOLT_API volt_tensor *volt_mse(volt_step *s, volt_tensor *a, volt_tensor *b);

/* ---- lookup, regularisation -------------------------------------------------------- */
/* ids (...) i32/i64, table (V, D) -> (..., D). Out-of-range ids are an error. */
VOLT_API volt_tensor *volt_embedding(volt_step *s, volt_tensor *ids, volt_tensor *table);
/* The same with nn.Embedding's padding_idx: positions whose id is padding_idx send no
 * gradient to the table (its row padding_idx); values are looked up as usual. -1 = none;
 * else 0 <= padding_idx < V. */
VOLT_API volt_tensor *volt_embedding_padded(volt_step *s, volt_tensor *ids, volt_tensor *table, int64_t padding_idx);
/* (n) tensor 0, 1, ..., n-1 of dtype i32 or i64, written on the step's device (position
 * ids without a host write into device memory). n >= 0. */
VOLT_API volt_tensor *volt_arange(volt_step *s, volt_dtype dt, int64_t n);
/* Inverted dropout with probability p in a training step, identity otherwise. The mask is
 * a pure function of (seed, step offset, call index in the step, element index). */
VOLT_API volt_tensor *volt_dropout(volt_step *s, volt_tensor *x, float p);

/* ---- attention -------------------------------------------------------------------- */
/* Scaled dot-product attention. q (B, H, Tq, D), k and v (B, H, Tk, D) -> (B, H, Tq, D).
 * key_mask (B, Tk) u8/i32/i64, nonzero = attend (padding mask), may be NULL; causal masks
 * keys after the query position. Scale 1/sqrt(D). Fused: no (Tq, Tk) matrix is kept for
 * backward (it is recomputed per (b, h) block). */
VOLT_API volt_tensor *volt_attention(volt_step *s, volt_tensor *q, volt_tensor *k, volt_tensor *v,
                            volt_tensor *key_mask, bool causal);
/* volt_attention with inverted dropout p on the attention probabilities (HF's attention
 * dropout), fused: the mask is drawn inside the kernel from the counter-based RNG and
 * redrawn in backward, never stored. In a training step the call takes the next dropout
 * call index, as volt_dropout does (even with p == 0), and keeps exactly the elements that
 * volt_dropout(volt_softmax(scale q k^T + mask), p) would keep on the (B, H, Tq, Tk)
 * probabilities: both forms give the same result and leave the step's later masks alone.
 * Identity dropout when p == 0 or not training. p must be in [0, 1). */
VOLT_API volt_tensor *volt_attention_dropout(volt_step *s, volt_tensor *q, volt_tensor *k, volt_tensor *v,
                                    volt_tensor *key_mask, bool causal, float p);
/* volt_attention_dropout on the layout a linear projection writes: q (B, Tq, H*D), k and v
 * (B, Tk, H*D), head h in columns [h D, (h+1) D) of every row -> (B, Tq, H*D), laid out the
 * same way. The same numbers as reshaping to (B, T, H, D), permuting to (B, H, T, D),
 * volt_attention_dropout, and permuting/reshaping back — bit for bit, dropout mask included
 * (it is drawn on the (B, H, Tq, Tk) probabilities either way) — without the four copies
 * (eight with backward) those permutes make. n_heads must divide the last dim. */
VOLT_API volt_tensor *volt_attention_heads(volt_step *s, volt_tensor *q, volt_tensor *k, volt_tensor *v,
                                  int64_t n_heads, volt_tensor *key_mask, bool causal, float p);

/* ---- shape ------------------------------------------------------------------------- */
/* Same data, new shape (numel must match); one dim may be -1. Free: no copy. */
VOLT_API volt_tensor *volt_reshape(volt_step *s, volt_tensor *x, volt_shape shape);
/* perm[i] = which input dim becomes output dim i. */
VOLT_API volt_tensor *volt_permute(volt_step *s, volt_tensor *x, const int *perm);
VOLT_API volt_tensor *volt_transpose(volt_step *s, volt_tensor *x, int d0, int d1);
/* x[..., start:start+len, ...] along dim (start < 0 counts from the end); INVALID_ARG unless
 * 0 <= start and 0 <= len <= size - start. */
VOLT_API volt_tensor *volt_slice(volt_step *s, volt_tensor *x, int dim, int64_t start, int64_t len);
/* x[..., index, ...] along dim; the dim is removed (e.g. the CLS token: dim 1, index 0). */
VOLT_API volt_tensor *volt_select(volt_step *s, volt_tensor *x, int dim, int64_t index);
/* Concatenate n tensors along dim; other dims must match. */
VOLT_API volt_tensor *volt_concat(volt_step *s, volt_tensor *const *xs, int n, int dim);

/* ---- reductions ---------------------------------------------------------------------- */
VOLT_API volt_tensor *volt_sum(volt_step *s, volt_tensor *x);    /* all elements -> scalar */
VOLT_API volt_tensor *volt_mean(volt_step *s, volt_tensor *x);   /* all elements -> scalar */

/* ---- convolution ------------------------------------------------------------------- */
/* x (N, C, H, W), w (O, C, KH, KW), b (O) or NULL -> (N, O, OH, OW). */
VOLT_API volt_tensor *volt_conv2d(volt_step *s, volt_tensor *x, volt_tensor *w, volt_tensor *b,
                         int stride, int padding);
/* x (N, C, H, W) -> (N, C, OH, OW), window k, stride (0 = k), no padding. */
VOLT_API volt_tensor *volt_max_pool2d(volt_step *s, volt_tensor *x, int k, int stride);

/* ---- no-grad helpers ----------------------------------------------------------------- */
/* logits (N, C) -> i64 (N) index of the max (first on ties). C == 0: VOLT_ERR_SHAPE. */
VOLT_API volt_tensor *volt_argmax(volt_step *s, volt_tensor *logits);
/* Fraction of rows whose argmax equals target (i32/i64, targets == ignore -100 skipped):
 * an f32 scalar with no grad. C == 0: VOLT_ERR_SHAPE. */
VOLT_API volt_tensor *volt_accuracy(volt_step *s, volt_tensor *logits, volt_tensor *target);

/* ---- the cast op ------------------------------------------------------------------ */
/* x (float dtype) as dtype dt (f32, bf16 or f16), same shape. Returns x itself when it
 * already has dt. Differentiable: the f32 gradient of the result is added to x's f32
 * gradient unchanged (gradients are f32 for every dtype). */
VOLT_API volt_tensor *volt_cast(volt_step *s, volt_tensor *x, volt_dtype dt);

/* ---- the step's compute dtype ------------------------------------------------------- */
/* The dtype of the GEMM operands of volt_linear and volt_matmul: f32 (default) or bf16/f16
 * = "16-bit compute": both operands (and, in backward, the upstream gradient) are read as
 * their 16-bit roundings, products accumulate in f32, outputs and grads are f32 (the GEMM
 * node records the dtype; no cast node or 16-bit copy is stored). The trainer sets it from
 * the precision plugin; it stays until changed. Any op also accepts 16-bit inputs (a
 * parameter stored in 16 bits, a cast result): GEMMs and layout ops read them directly,
 * other ops compute on an exact f32 copy made by a recorded cast node. */
VOLT_API volt_status volt_step_set_compute_dtype(volt_step *s, volt_dtype dt);
VOLT_API volt_dtype volt_step_compute_dtype(const volt_step *s);

#ifdef __cplusplus
}
#endif
#endif
