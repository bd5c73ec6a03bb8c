/* Front-ends of the basic ops: shape/dtype checks and tape recording. The math is in the
 * backend kernels (core/cpu/basic.c). */
#include <string.h>
#include "core/internal.h"
#include "volt/ops.h"

static bool is_index(const volt_tensor *t) { return t->dtype == VOLT_I32 || t->dtype == VOLT_I64; }

/* Float inputs may be 16-bit (volt/ops.h, volt_step_set_compute_dtype): GEMMs take them, other ops get f32 copies. */
#define CHECK_FLOAT(s, op, t) do { if (!volt__is_float(t)) return volt__dtype_err(s, op, t, "a float dtype"); } while (0)
#define CHECK_F32(s, op, t) do { if ((t)->dtype != VOLT_F32) return volt__dtype_err(s, op, t, "f32"); } while (0)

/* The product of all dims but the last (the rows of x (..., C)): from the dims, not
 * numel / C, which says nothing when C is 0. Bounded: a tensor's numel fits int64 and
 * a 0 dim makes the product 0 (volt__tensor_hdr refuses the rest). */
static int64_t lead_rows(volt_shape sh) {
    int64_t r = 1;
    for (int i = 0; i + 1 < sh.ndim; i++)
        if (__builtin_mul_overflow(r, sh.d[i], &r)) return -1;
    return r;
}

/* GEMM nodes carry the step's compute dtype (VOLT_F32 = none): the kernel reads its float
 * operands rounded to it, as if cast to 16 bits, without a cast node or a 16-bit copy in
 * the arena (core/cpu/basic.c); gradients reach the operands' f32 grads as through a cast.
 * 16-bit inputs (parameters stored in 16 bits) are read as they are. */

volt_tensor *volt_matmul(volt_step *s, volt_tensor *a, volt_tensor *b) {
    volt_tensor *in[2] = { a, b };
    if (volt__any_null(s, "matmul", 2, in)) return NULL;
    CHECK_FLOAT(s, "matmul", a);
    CHECK_FLOAT(s, "matmul", b);
    volt_attr at = { .matmul = { .compute = s->compute_dtype } };
    if (a->shape.ndim < 1 || b->shape.ndim < 2) return volt__shape_err(s, "matmul", "need a (..., M, K) and b (K, N)", a, b);
    int64_t K = a->shape.d[a->shape.ndim - 1];
    volt_shape os = a->shape;
    if (b->shape.ndim == 2) {
        if (b->shape.d[0] != K) return volt__shape_err(s, "matmul", "inner dims differ", a, b);
        int64_t N = b->shape.d[1];
        at.matmul.batched = false;
        at.matmul.batch = 1;
        at.matmul.M = lead_rows(a->shape);   /* K == 0: the kernel writes zeros (torch) */
        at.matmul.K = K;
        at.matmul.N = N;
        os.d[os.ndim - 1] = N;
    } else if (b->shape.ndim == 3 && a->shape.ndim == 3) {
        if (a->shape.d[0] != b->shape.d[0] || b->shape.d[1] != K)
            return volt__shape_err(s, "matmul", "batched: need (B, M, K) x (B, K, N)", a, b);
        at.matmul.batched = true;
        at.matmul.batch = a->shape.d[0];
        at.matmul.M = a->shape.d[1];
        at.matmul.K = K;
        at.matmul.N = b->shape.d[2];
        os.d[2] = b->shape.d[2];
    } else {
        return volt__shape_err(s, "matmul", "need b 2-d, or both 3-d (batched)", a, b);
    }
    return volt__op(s, VOLT_OP_MATMUL, 2, in, VOLT_F32, os, &at);
}

volt_tensor *volt_linear(volt_step *s, volt_tensor *x, volt_tensor *w, volt_tensor *b) {
    volt_tensor *in[3] = { x, w, b };
    int n_in = b ? 3 : 2;
    if (volt__any_null(s, "linear", n_in, in)) return NULL;
    CHECK_FLOAT(s, "linear", x);
    CHECK_FLOAT(s, "linear", w);
    if (w->shape.ndim != 2 || x->shape.ndim < 1 || x->shape.d[x->shape.ndim - 1] != w->shape.d[1])
        return volt__shape_err(s, "linear", "x (..., in) needs weight (out, in)", x, w);
    if (b && (b->shape.ndim != 1 || b->shape.d[0] != w->shape.d[0]))
        return volt__shape_err(s, "linear", "bias must be (out) for weight", b, w);
    if (b) CHECK_FLOAT(s, "linear", b);
    /* in == 0: the GEMM writes the bias broadcast, or zeros (torch) */
    volt_attr at = { .linear = { .rows = lead_rows(x->shape), .in = w->shape.d[1],
                                 .out = w->shape.d[0], .compute = s->compute_dtype } };
    volt_shape os = x->shape;
    os.d[os.ndim - 1] = w->shape.d[0];
    if (b && !(in[2] = volt_cast(s, b, VOLT_F32))) return NULL;   /* the bias is added in f32 */
    return volt__op(s, VOLT_OP_LINEAR, n_in, in, VOLT_F32, os, &at);
}

/* b equals a's shape or a's trailing dims: inner = numel(b), outer = numel(a) / inner. */
static volt_tensor *broadcast_op(volt_step *s, volt_op_id op, const char *name, volt_tensor *a, volt_tensor *b) {
    volt_tensor *in[2] = { a, b };
    if (volt__any_null(s, name, 2, in)) return NULL;
    CHECK_FLOAT(s, name, a);
    CHECK_FLOAT(s, name, b);
    int off = a->shape.ndim - b->shape.ndim;
    bool ok = off >= 0;
    for (int i = 0; ok && i < b->shape.ndim; i++) ok = a->shape.d[off + i] == b->shape.d[i];
    if (!ok) return volt__shape_err(s, name, "b must equal a's shape or its trailing dims", a, b);
    int64_t inner = volt_tensor_numel(b);
    volt_attr at = { .broadcast = { .inner = inner, .outer = inner ? volt_tensor_numel(a) / inner : 0 } };
    return volt__op(s, op, 2, in, VOLT_F32, a->shape, &at);
}

volt_tensor *volt_add(volt_step *s, volt_tensor *a, volt_tensor *b) { return broadcast_op(s, VOLT_OP_ADD, "add", a, b); }
volt_tensor *volt_mul(volt_step *s, volt_tensor *a, volt_tensor *b) { return broadcast_op(s, VOLT_OP_MUL, "mul", a, b); }
volt_tensor *volt_bias(volt_step *s, volt_tensor *x, volt_tensor *b) {
    if (b && b->shape.ndim != 1) return volt__shape_err(s, "bias", "bias must be 1-d", b, NULL);
    return broadcast_op(s, VOLT_OP_ADD, "bias", x, b);
}

static volt_tensor *unary(volt_step *s, volt_op_id op, const char *name, volt_tensor *x, float f0) {
    if (volt__any_null(s, name, 1, &x)) return NULL;
    CHECK_FLOAT(s, name, x);
    volt_attr at = { .scale = { .alpha = f0 } };   /* read by scale only */
    return volt__op(s, op, 1, &x, VOLT_F32, x->shape, &at);
}

volt_tensor *volt_scale(volt_step *s, volt_tensor *a, float alpha) { return unary(s, VOLT_OP_SCALE, "scale", a, alpha); }
volt_tensor *volt_relu(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_RELU, "relu", x, 0); }
volt_tensor *volt_gelu(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_GELU, "gelu", x, 0); }
volt_tensor *volt_gelu_tanh(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_GELU_TANH, "gelu_tanh", x, 0); }
volt_tensor *volt_tanh(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_TANH, "tanh", x, 0); }
volt_tensor *volt_sigmoid(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_SIGMOID, "sigmoid", x, 0); }

volt_tensor *volt_sum(volt_step *s, volt_tensor *x) {
    if (volt__any_null(s, "sum", 1, &x)) return NULL;
    CHECK_FLOAT(s, "sum", x);
    return volt__op(s, VOLT_OP_SUM, 1, &x, VOLT_F32, VOLT_SCALAR, NULL);
}

volt_tensor *volt_mean(volt_step *s, volt_tensor *x) {
    if (volt__any_null(s, "mean", 1, &x)) return NULL;
    CHECK_FLOAT(s, "mean", x);
    if (volt_tensor_numel(x) == 0) return volt__shape_err(s, "mean", "mean of an empty tensor", x, NULL);
    return volt__op(s, VOLT_OP_MEAN, 1, &x, VOLT_F32, VOLT_SCALAR, NULL);
}

volt_tensor *volt_mse(volt_step *s, volt_tensor *a, volt_tensor *b) {
    volt_tensor *in[2] = { a, b };
    if (volt__any_null(s, "mse", 2, in)) return NULL;
    CHECK_FLOAT(s, "mse", a);
    CHECK_FLOAT(s, "mse", b);
    if (!volt_shape_eq(a->shape, b->shape)) return volt__shape_err(s, "mse", "shapes differ", a, b);
    if (volt_tensor_numel(a) == 0) return volt__shape_err(s, "mse", "empty input", a, b);
    return volt__op(s, VOLT_OP_MSE, 2, in, VOLT_F32, VOLT_SCALAR, NULL);
}

volt_tensor *volt_cross_entropy_ex(volt_step *s, volt_tensor *logits, volt_tensor *target, const volt_ce_opts *o) {
    volt_tensor *in[2] = { logits, target };
    if (volt__any_null(s, "cross_entropy", 2, in)) return NULL;
    volt_ce_opts opts = o ? *o : VOLT_CE_DEFAULTS;
    CHECK_FLOAT(s, "cross_entropy", logits);
    if (!is_index(target)) return volt__dtype_err(s, "cross_entropy", target, "i32 or i64 targets");
    if (logits->shape.ndim != 2 || target->shape.ndim != 1 || target->shape.d[0] != logits->shape.d[0])
        return volt__shape_err(s, "cross_entropy", "need logits (N, C) and target (N)", logits, target);
    if (!(opts.label_smoothing >= 0 && opts.label_smoothing < 1)) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "cross_entropy: label_smoothing must be in [0, 1), got %g", opts.label_smoothing);
        return NULL;
    }
    volt_attr at = { .cross_entropy = { .n = logits->shape.d[0], .classes = logits->shape.d[1],
                                        .ignore_index = opts.ignore_index, .label_smoothing = opts.label_smoothing } };
    return volt__op(s, VOLT_OP_CROSS_ENTROPY, 2, in, VOLT_F32, VOLT_SCALAR, &at);
}

volt_tensor *volt_cross_entropy(volt_step *s, volt_tensor *logits, volt_tensor *target) {
    return volt_cross_entropy_ex(s, logits, target, NULL);
}

volt_tensor *volt_reshape(volt_step *s, volt_tensor *x, volt_shape shape) {
    if (volt__any_null(s, "reshape", 1, &x)) return NULL;
    int infer = -1;
    int64_t known = 1;
    if (shape.ndim < 0 || shape.ndim > VOLT_MAX_DIMS) return volt__shape_err(s, "reshape", "bad target rank", x, NULL);
    for (int i = 0; i < shape.ndim; i++) {
        if (shape.d[i] == -1 && infer < 0) infer = i;
        else if (shape.d[i] < 0) return volt__shape_err(s, "reshape", "negative target dim", x, NULL);
        else if (__builtin_mul_overflow(known, shape.d[i], &known)) {
            char b[128];
            volt_step_fail(s, VOLT_ERR_SHAPE, "reshape: target shape %s has too many elements",
                           volt_shape_str(shape, b, sizeof b));
            return NULL;
        }
    }
    if (infer >= 0) {
        if (known == 0 || volt_tensor_numel(x) % known) return volt__shape_err(s, "reshape", "cannot infer -1", x, NULL);
        shape.d[infer] = volt_tensor_numel(x) / known;
    }
    if (volt_shape_numel(shape) != volt_tensor_numel(x)) {
        char b[64];
        volt_step_fail(s, VOLT_ERR_SHAPE, "reshape: %lld elements cannot become %s",
                       (long long)volt_tensor_numel(x), volt_shape_str(shape, b, sizeof b));
        return NULL;
    }
    return volt__op_view(s, VOLT_OP_RESHAPE, x, shape);
}

/* ---- no-grad helpers: ops without a backward (volt__op_differentiable) ------------- */
volt_tensor *volt_argmax(volt_step *s, volt_tensor *logits) {
    if (volt__any_null(s, "argmax", 1, &logits)) return NULL;
    CHECK_F32(s, "argmax", logits);
    if (logits->shape.ndim != 2) return volt__shape_err(s, "argmax", "need (N, C)", logits, NULL);
    if (logits->shape.d[1] == 0) return volt__shape_err(s, "argmax", "need C >= 1 classes in (N, C)", logits, NULL);
    return volt__op(s, VOLT_OP_ARGMAX, 1, &logits, VOLT_I64, VOLT_SHAPE(logits->shape.d[0]), NULL);
}

/* Targets equal to -100 (cross-entropy's ignore_index) are left out; 0 when all are. */
volt_tensor *volt_accuracy(volt_step *s, volt_tensor *logits, volt_tensor *target) {
    volt_tensor *in[2] = { logits, target };
    if (volt__any_null(s, "accuracy", 2, in)) return NULL;
    if (!is_index(target)) return volt__dtype_err(s, "accuracy", target, "i32 or i64 targets");
    if (target->shape.ndim != 1 || logits->shape.ndim != 2 || target->shape.d[0] != logits->shape.d[0])
        return volt__shape_err(s, "accuracy", "need logits (N, C) and target (N)", logits, target);
    if (logits->shape.d[1] == 0) return volt__shape_err(s, "accuracy", "need C >= 1 classes in logits (N, C)", logits, target);
    in[0] = volt_argmax(s, logits);
    if (!in[0]) return NULL;
    return volt__op(s, VOLT_OP_ACCURACY, 2, in, VOLT_F32, VOLT_SCALAR, NULL);
}
