/* Front-end of scaled dot-product attention, with or without dropout on the attention
 * probabilities: shape/dtype checks and tape recording. The math (fused forward,
 * recomputing backward, the dropout mask drawn and redrawn from the counter-based RNG) is
 * in core/cpu/attention.c. */
#include <math.h>
#include "core/internal.h"
#include "volt/ops.h"

static bool is_mask_dtype(const volt_tensor *t) {
    return t->dtype == VOLT_U8 || t->dtype == VOLT_I32 || t->dtype == VOLT_I64;
}

/* q (B, H, Tq, D), k and v (B, H, Tk, D), key_mask (B, Tk) or NULL -> (B, H, Tq, D); with
 * heads > 0 (packed) q (B, Tq, heads*D), k and v (B, Tk, heads*D) -> (B, Tq, heads*D).
 * Node attributes: volt_attr_attention (B, H, Tq, Tk, D, causal, packed, compute dtype, scale;
 * with dropout > 0 the RNG call index). */
static volt_tensor *attention_op(volt_step *s, volt_tensor *q, volt_tensor *k, volt_tensor *v,
                                 volt_tensor *key_mask, bool causal, float drop_p, int64_t call, int64_t heads) {
    volt_tensor *in[4] = { q, k, v, key_mask };
    int n_in = key_mask ? 4 : 3;
    if (volt__any_null(s, "attention", n_in, in)) return NULL;
    if (q->dtype != VOLT_F32) return volt__dtype_err(s, "attention (q)", q, "f32");
    if (k->dtype != VOLT_F32) return volt__dtype_err(s, "attention (k)", k, "f32");
    if (v->dtype != VOLT_F32) return volt__dtype_err(s, "attention (v)", v, "f32");
    int64_t B, H, Tq, Tk, D;
    if (heads > 0) {
        if (q->shape.ndim != 3 || k->shape.ndim != 3)
            return volt__shape_err(s, "attention_heads", "need q (B, Tq, H*D) and k (B, Tk, H*D)", q, k);
        if (q->shape.d[2] % heads != 0)
            return volt__shape_err(s, "attention_heads", "n_heads must divide the last dim", q, k);
        B = q->shape.d[0], H = heads, Tq = q->shape.d[1], D = q->shape.d[2] / heads, Tk = k->shape.d[1];
        if (k->shape.d[0] != B || k->shape.d[2] != H * D)
            return volt__shape_err(s, "attention_heads", "q and k differ in B or H*D", q, k);
    } else {
        if (q->shape.ndim != 4 || k->shape.ndim != 4)
            return volt__shape_err(s, "attention", "need q (B, H, Tq, D) and k (B, H, Tk, D)", q, k);
        B = q->shape.d[0], H = q->shape.d[1], Tq = q->shape.d[2], D = q->shape.d[3], Tk = k->shape.d[2];
        if (k->shape.d[0] != B || k->shape.d[1] != H || k->shape.d[3] != D)
            return volt__shape_err(s, "attention", "q and k differ in B, H or D", q, k);
    }
    if (!volt_shape_eq(v->shape, k->shape))
        return volt__shape_err(s, "attention", "v must have k's shape", v, k);
    if (D == 0) return volt__shape_err(s, "attention", "head dim D must be > 0", q, k);
    if (causal && Tq != Tk) return volt__shape_err(s, "attention", "causal needs Tq == Tk", q, k);
    if (Tq > INT32_MAX || Tk > INT32_MAX || D > INT32_MAX || Tq * Tk > INT32_MAX)
        return volt__shape_err(s, "attention", "sequence too long for 32-bit BLAS", q, k);
    if (key_mask) {
        if (!is_mask_dtype(key_mask)) return volt__dtype_err(s, "attention (key_mask)", key_mask, "u8, i32 or i64");
        if (key_mask->shape.ndim != 2 || key_mask->shape.d[0] != B || key_mask->shape.d[1] != Tk)
            return volt__shape_err(s, "attention", "key_mask must be (B, Tk)", key_mask, k);
    }
    volt_attr at = { .attention = {
        .B = B, .H = H, .Tq = Tq, .Tk = Tk, .D = D, .causal = causal, .packed = heads > 0,
        .scale = (float)(1.0 / sqrt((double)D)),
        .dropout = drop_p,
        .compute = s->compute_dtype,   /* 16-bit compute: q, k, v (and dO) read rounded (volt/ops.h) */
        .call = call } };
    return volt__op(s, VOLT_OP_ATTENTION, n_in, in, VOLT_F32, q->shape, &at);
}

volt_tensor *volt_attention(volt_step *s, volt_tensor *q, volt_tensor *k, volt_tensor *v,
                            volt_tensor *key_mask, bool causal) {
    return attention_op(s, q, k, v, key_mask, causal, 0.f, 0, 0);
}

/* volt_dropout(volt_softmax(scores), p) fused: the call takes the step's next RNG call
 * index exactly where that volt_dropout would (training only, even with p == 0), and the
 * mask is drawn over the (B, H, Tq, Tk) probabilities in row-major order, so both paths
 * keep the same elements and every later dropout of the step its mask. */
volt_tensor *volt_attention_dropout(volt_step *s, volt_tensor *q, volt_tensor *k, volt_tensor *v,
                                    volt_tensor *key_mask, bool causal, float p) {
    if (!(p >= 0.f && p < 1.f)) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "attention_dropout: p must be in [0, 1), got %g", p);
        return NULL;
    }
    if (!s) return NULL;
    if (!s->training) return attention_op(s, q, k, v, key_mask, causal, 0.f, 0, 0);
    int64_t call = s->rng_calls++;
    return attention_op(s, q, k, v, key_mask, causal, p, call, 0);
}

volt_tensor *volt_attention_heads(volt_step *s, volt_tensor *q, volt_tensor *k, volt_tensor *v, int64_t n_heads,
                                  volt_tensor *key_mask, bool causal, float p) {
    if (n_heads <= 0) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "attention_heads: n_heads must be > 0, got %lld", (long long)n_heads);
        return NULL;
    }
    if (!(p >= 0.f && p < 1.f)) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "attention_heads: p must be in [0, 1), got %g", p);
        return NULL;
    }
    if (!s) return NULL;
    if (!s->training) return attention_op(s, q, k, v, key_mask, causal, 0.f, 0, n_heads);
    int64_t call = s->rng_calls++;
    return attention_op(s, q, k, v, key_mask, causal, p, call, n_heads);
}
