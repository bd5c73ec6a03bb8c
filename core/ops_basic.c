/* Front-ends of the basic ops: shape/dtype checks and tape recording. The math is in the
 * backend kernels (core/cpu/basic.c). */
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
#include "volt/ops.h"

static bool is_index(const volt_tensor *t) { return t->dtype == VOLT_I32 || t->dtype == VOLT_I64; }

/* Float inputs may be 16-bit (volt/ops.h, volt_step_set_compute_dtype): GEMMs take them, other ops get f32 copies. */
#define CHECK_FLOAT(s, op, t) do { if (!volt__is_float(t)) return volt__dtype_err(s, op, t, "a float dtype"); } while (0)
#define CHECK_F32(s, op, t) do { if ((t)->dtype != VOLT_F32) return volt__dtype_err(s, op, t, "f32"); } while (0)

/* GEMM nodes carry the step's compute dtype (VOLT_F32 = none): the kernel reads its float
 * operands rounded to it, as if cast to 16 bits, without a cast node or a 16-bit copy in
 * the arena (core/cpu/basic.c); gradients reach the operands' f32 grads as through a cast.
 * 16-bit inputs (parameters stored in 16 bits) are read as they are. */

volt_tensor *volt_matmul(volt_step *s, volt_tensor *a, volt_tensor *b) {
    volt_tensor *in[2] = { a, b };
    if (volt__any_null(s, 2, in)) return NULL;
    CHECK_FLOAT(s, "matmul", a);
    CHECK_FLOAT(s, "matmul", b);
    volt_node at = { 0 };
    if (a->shape.ndim < 1 || b->shape.ndim < 2) return volt__shape_err(s, "matmul", "need a (..., M, K) and b (K, N)", a, b);
    int64_t K = a->shape.d[a->shape.ndim - 1];
    volt_shape os = a->shape;
    if (b->shape.ndim == 2) {
        if (b->shape.d[0] != K) return volt__shape_err(s, "matmul", "inner dims differ", a, b);
        int64_t N = b->shape.d[1];
        at.i[0] = 0;
        at.i[1] = 1;
        at.i[2] = volt_tensor_numel(a) / (K ? K : 1);
        at.i[3] = K;
        at.i[4] = N;
        os.d[os.ndim - 1] = N;
    } else if (b->shape.ndim == 3 && a->shape.ndim == 3) {
        if (a->shape.d[0] != b->shape.d[0] || b->shape.d[1] != K)
            return volt__shape_err(s, "matmul", "batched: need (B, M, K) x (B, K, N)", a, b);
        at.i[0] = 1;
        at.i[1] = a->shape.d[0];
        at.i[2] = a->shape.d[1];
        at.i[3] = K;
        at.i[4] = b->shape.d[2];
        os.d[2] = b->shape.d[2];
    } else {
        return volt__shape_err(s, "matmul", "need b 2-d, or both 3-d (batched)", a, b);
    }
    at.i[VOLT_GEMM_COMPUTE_ATTR] = s->compute_dtype;
    return volt__op(s, VOLT_OP_MATMUL, 2, in, VOLT_F32, os, &at);
}

volt_tensor *volt_linear(volt_step *s, volt_tensor *x, volt_tensor *w, volt_tensor *b) {
    volt_tensor *in[3] = { x, w, b };
    int n_in = b ? 3 : 2;
    if (volt__any_null(s, n_in, in)) return NULL;
    CHECK_FLOAT(s, "linear", x);
    CHECK_FLOAT(s, "linear", w);
    if (w->shape.ndim != 2 || x->shape.ndim < 1 || x->shape.d[x->shape.ndim - 1] != w->shape.d[1])
        return volt__shape_err(s, "linear", "x (..., in) needs weight (out, in)", x, w);
    if (b && (b->shape.ndim != 1 || b->shape.d[0] != w->shape.d[0]))
        return volt__shape_err(s, "linear", "bias must be (out) for weight", b, w);
    if (b) CHECK_FLOAT(s, "linear", b);
    volt_node at = { 0 };
    at.i[0] = volt_tensor_numel(x) / w->shape.d[1];   /* rows */
    at.i[1] = w->shape.d[1];                          /* in */
    at.i[2] = w->shape.d[0];                          /* out */
    volt_shape os = x->shape;
    os.d[os.ndim - 1] = w->shape.d[0];
    at.i[VOLT_GEMM_COMPUTE_ATTR] = s->compute_dtype;
    if (b && !(in[2] = volt_cast(s, b, VOLT_F32))) return NULL;   /* the bias is added in f32 */
    return volt__op(s, VOLT_OP_LINEAR, n_in, in, VOLT_F32, os, &at);
}

/* b equals a's shape or a's trailing dims: inner = numel(b), outer = numel(a) / inner. */
static volt_tensor *broadcast_op(volt_step *s, volt_op_id op, const char *name, volt_tensor *a, volt_tensor *b) {
    volt_tensor *in[2] = { a, b };
    if (volt__any_null(s, 2, in)) return NULL;
    CHECK_FLOAT(s, name, a);
    CHECK_FLOAT(s, name, b);
    int off = a->shape.ndim - b->shape.ndim;
    bool ok = off >= 0;
    for (int i = 0; ok && i < b->shape.ndim; i++) ok = a->shape.d[off + i] == b->shape.d[i];
    if (!ok) return volt__shape_err(s, name, "b must equal a's shape or its trailing dims", a, b);
    volt_node at = { 0 };
    at.i[0] = volt_tensor_numel(b);
    at.i[1] = at.i[0] ? volt_tensor_numel(a) / at.i[0] : 0;
    return volt__op(s, op, 2, in, VOLT_F32, a->shape, &at);
}

volt_tensor *volt_add(volt_step *s, volt_tensor *a, volt_tensor *b) { return broadcast_op(s, VOLT_OP_ADD, "add", a, b); }
volt_tensor *volt_mul(volt_step *s, volt_tensor *a, volt_tensor *b) { return broadcast_op(s, VOLT_OP_MUL, "mul", a, b); }
volt_tensor *volt_bias(volt_step *s, volt_tensor *x, volt_tensor *b) {
    if (b && b->shape.ndim != 1) return volt__shape_err(s, "bias", "bias must be 1-d", b, NULL);
    return broadcast_op(s, VOLT_OP_ADD, "bias", x, b);
}

static volt_tensor *unary(volt_step *s, volt_op_id op, const char *name, volt_tensor *x, float f0) {
    if (volt__any_null(s, 1, &x)) return NULL;
    CHECK_FLOAT(s, name, x);
    volt_node at = { 0 };
    at.f[0] = f0;
    return volt__op(s, op, 1, &x, VOLT_F32, x->shape, &at);
}

volt_tensor *volt_scale(volt_step *s, volt_tensor *a, float alpha) { return unary(s, VOLT_OP_SCALE, "scale", a, alpha); }
volt_tensor *volt_relu(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_RELU, "relu", x, 0); }
volt_tensor *volt_gelu(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_GELU, "gelu", x, 0); }
volt_tensor *volt_gelu_tanh(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_GELU_TANH, "gelu_tanh", x, 0); }
volt_tensor *volt_tanh(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_TANH, "tanh", x, 0); }
volt_tensor *volt_sigmoid(volt_step *s, volt_tensor *x) { return unary(s, VOLT_OP_SIGMOID, "sigmoid", x, 0); }

volt_tensor *volt_sum(volt_step *s, volt_tensor *x) {
    if (volt__any_null(s, 1, &x)) return NULL;
    CHECK_FLOAT(s, "sum", x);
    return volt__op(s, VOLT_OP_SUM, 1, &x, VOLT_F32, VOLT_SCALAR, NULL);
}

volt_tensor *volt_mean(volt_step *s, volt_tensor *x) {
    if (volt__any_null(s, 1, &x)) return NULL;
    CHECK_FLOAT(s, "mean", x);
    if (volt_tensor_numel(x) == 0) return volt__shape_err(s, "mean", "mean of an empty tensor", x, NULL);
    return volt__op(s, VOLT_OP_MEAN, 1, &x, VOLT_F32, VOLT_SCALAR, NULL);
}

volt_tensor *volt_mse(volt_step *s, volt_tensor *a, volt_tensor *b) {
    volt_tensor *in[2] = { a, b };
    if (volt__any_null(s, 2, in)) return NULL;
    CHECK_FLOAT(s, "mse", a);
    CHECK_FLOAT(s, "mse", b);
    if (!volt_shape_eq(a->shape, b->shape)) return volt__shape_err(s, "mse", "shapes differ", a, b);
    if (volt_tensor_numel(a) == 0) return volt__shape_err(s, "mse", "empty input", a, b);
    return volt__op(s, VOLT_OP_MSE, 2, in, VOLT_F32, VOLT_SCALAR, NULL);
}

volt_tensor *volt_cross_entropy_ex(volt_step *s, volt_tensor *logits, volt_tensor *target, const volt_ce_opts *o) {
    volt_tensor *in[2] = { logits, target };
    if (volt__any_null(s, 2, in)) return NULL;
    volt_ce_opts opts = o ? *o : VOLT_CE_DEFAULTS;
    CHECK_FLOAT(s, "cross_entropy", logits);
    if (!is_index(target)) return volt__dtype_err(s, "cross_entropy", target, "i32 or i64 targets");
    if (logits->shape.ndim != 2 || target->shape.ndim != 1 || target->shape.d[0] != logits->shape.d[0])
        return volt__shape_err(s, "cross_entropy", "need logits (N, C) and target (N)", logits, target);
    if (!(opts.label_smoothing >= 0 && opts.label_smoothing < 1)) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "cross_entropy: label_smoothing must be in [0, 1), got %g", opts.label_smoothing);
        return NULL;
    }
    volt_node at = { 0 };
    at.i[0] = logits->shape.d[0];
    at.i[1] = logits->shape.d[1];
    at.i[2] = opts.ignore_index;
    at.f[0] = opts.label_smoothing;
    return volt__op(s, VOLT_OP_CROSS_ENTROPY, 2, in, VOLT_F32, VOLT_SCALAR, &at);
}

volt_tensor *volt_cross_entropy(volt_step *s, volt_tensor *logits, volt_tensor *target) {
    return volt_cross_entropy_ex(s, logits, target, NULL);
}

volt_tensor *volt_reshape(volt_step *s, volt_tensor *x, volt_shape shape) {
    if (volt__any_null(s, 1, &x)) return NULL;
    int infer = -1;
    int64_t known = 1;
    if (shape.ndim < 0 || shape.ndim > VOLT_MAX_DIMS) return volt__shape_err(s, "reshape", "bad target rank", x, NULL);
    for (int i = 0; i < shape.ndim; i++) {
        if (shape.d[i] == -1 && infer < 0) infer = i;
        else if (shape.d[i] < 0) return volt__shape_err(s, "reshape", "negative target dim", x, NULL);
        else known *= shape.d[i];
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

/* ---- no-grad helpers --------------------------------------------------------------- */
/* argmax and accuracy have no kernel yet: they run on the host and read their inputs through
 * one explicit device->host copy each (none on a host-addressable device such as cpu) into
 * per-thread buffers grown once; results go back with one host->device copy. */
static _Thread_local struct { void *p; size_t cap; } g_host[3];
static void *host_buf(int slot, size_t n) {
    if (n > g_host[slot].cap) {
        void *p = realloc(g_host[slot].p, n);
        if (!p) return NULL;
        g_host[slot].p = p;
        g_host[slot].cap = n;
    }
    return g_host[slot].p;
}
static bool on_host(volt_step *s, const volt_tensor *t) {
    return volt__dev_host_addressable(t->device ? t->device : s->dev);
}
static const void *host_view(volt_step *s, const volt_tensor *t, int slot) {
    if (on_host(s, t)) return t->data;
    void *p = host_buf(slot, volt_tensor_bytes(t));
    if (p) volt_tensor_to_host(t, p);
    return p;
}

static int64_t index_at(volt_dtype dt, const void *p, int64_t i) {
    return dt == VOLT_I64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

volt_tensor *volt_argmax(volt_step *s, volt_tensor *logits) {
    if (volt__any_null(s, 1, &logits)) return NULL;
    CHECK_F32(s, "argmax", logits);
    if (logits->shape.ndim != 2) return volt__shape_err(s, "argmax", "need (N, C)", logits, NULL);
    int64_t N = logits->shape.d[0], C = logits->shape.d[1];
    volt_tensor *out = volt_tensor_new(s, VOLT_I64, VOLT_SHAPE(N));
    if (!out) return NULL;
    bool direct = on_host(s, out);
    const float *x = host_view(s, logits, 0);
    int64_t *o = direct ? out->data : host_buf(1, (size_t)N * sizeof(int64_t));
    if (!x || !o) { volt_step_fail(s, VOLT_ERR_NOMEM, "argmax: host buffer"); return NULL; }
    for (int64_t r = 0; r < N; r++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (x[r * C + c] > x[r * C + best]) best = c;
        o[r] = best;
    }
    if (!direct) volt_tensor_copy_from_host(out, o);
    return out;
}

volt_tensor *volt_accuracy(volt_step *s, volt_tensor *logits, volt_tensor *target) {
    volt_tensor *in[2] = { logits, target };
    if (volt__any_null(s, 2, in)) return NULL;
    if (!is_index(target)) return volt__dtype_err(s, "accuracy", target, "i32 or i64 targets");
    if (target->shape.ndim != 1 || logits->shape.ndim != 2 || target->shape.d[0] != logits->shape.d[0])
        return volt__shape_err(s, "accuracy", "need logits (N, C) and target (N)", logits, target);
    volt_tensor *am = volt_argmax(s, logits);
    volt_tensor *out = volt_tensor_new(s, VOLT_F32, VOLT_SCALAR);
    if (!am || !out) return NULL;
    const int64_t *p = host_view(s, am, 1);
    const void *y = host_view(s, target, 2);
    if (!p || !y) { volt_step_fail(s, VOLT_ERR_NOMEM, "accuracy: host buffer"); return NULL; }
    int64_t hit = 0, n = 0;
    for (int64_t r = 0; r < target->shape.d[0]; r++) {
        int64_t t = index_at(target->dtype, y, r);
        if (t == -100) continue;
        n++;
        hit += p[r] == t;
    }
    float acc = n ? (float)((double)hit / (double)n) : 0.f;
    volt_tensor_copy_from_host(out, &acc);
    return out;
}
