/* Front-ends of conv2d and max_pool2d: shape checks and tape recording. The kernels are
 * in core/cpu/conv.c. Geometry comes from the tensors' shapes; the node keeps only
 * volt_attr_conv2d (stride, padding) and volt_attr_max_pool2d (kernel, stride). */
#include <stdio.h>
#include "core/internal.h"
#include "volt/ops.h"

/* float inputs may be 16-bit: volt__op computes on an f32 copy (core/ops_cast.c) */
#define CHECK_F32(s, op, t) do { if (!volt__is_float(t)) return volt__dtype_err(s, op, t, "a float dtype"); } while (0)

volt_tensor *volt_conv2d(volt_step *s, volt_tensor *x, volt_tensor *w, volt_tensor *b, int stride, int padding) {
    volt_tensor *in[3] = { x, w, b };
    int n_in = b ? 3 : 2;
    if (volt__any_null(s, "conv2d", n_in, in)) return NULL;
    CHECK_F32(s, "conv2d", x);
    CHECK_F32(s, "conv2d", w);
    if (b) CHECK_F32(s, "conv2d", b);
    if (x->shape.ndim != 4 || w->shape.ndim != 4)
        return volt__shape_err(s, "conv2d", "need x (N, C, H, W) and weight (O, C, KH, KW)", x, w);
    if (x->shape.d[1] != w->shape.d[1])
        return volt__shape_err(s, "conv2d", "x channels (dim 1) must equal the weight's input channels (dim 1)", x, w);
    if (b && (b->shape.ndim != 1 || b->shape.d[0] != w->shape.d[0]))
        return volt__shape_err(s, "conv2d", "bias must be (O) for weight (O, C, KH, KW)", b, w);
    if (stride < 1 || padding < 0) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "conv2d: need stride >= 1 and padding >= 0, got stride %d padding %d",
                       stride, padding);
        return NULL;
    }
    int64_t H = x->shape.d[2], W = x->shape.d[3], KH = w->shape.d[2], KW = w->shape.d[3], P2 = 2 * (int64_t)padding;
    if (KH < 1 || KW < 1 || H + P2 < KH || W + P2 < KW) {
        char what[96];
        snprintf(what, sizeof what, "kernel larger than the padded input (padding %d)", padding);
        return volt__shape_err(s, "conv2d", what, x, w);
    }
    volt_attr at = { .conv2d = { .stride = stride, .padding = padding } };
    volt_shape os = VOLT_SHAPE(x->shape.d[0], w->shape.d[0], (H + P2 - KH) / stride + 1, (W + P2 - KW) / stride + 1);
    return volt__op(s, VOLT_OP_CONV2D, n_in, in, VOLT_F32, os, &at);
}

volt_tensor *volt_max_pool2d(volt_step *s, volt_tensor *x, int k, int stride) {
    if (volt__any_null(s, "max_pool2d", 1, &x)) return NULL;
    CHECK_F32(s, "max_pool2d", x);
    if (x->shape.ndim != 4) return volt__shape_err(s, "max_pool2d", "need x (N, C, H, W)", x, NULL);
    if (stride == 0) stride = k;
    if (k < 1 || stride < 1) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "max_pool2d: need k >= 1 and stride >= 0, got k %d stride %d", k, stride);
        return NULL;
    }
    int64_t H = x->shape.d[2], W = x->shape.d[3];
    if (H < k || W < k) {
        char what[64];
        snprintf(what, sizeof what, "window %d larger than the input", k);
        return volt__shape_err(s, "max_pool2d", what, x, NULL);
    }
    if (H * W > INT32_MAX) return volt__shape_err(s, "max_pool2d", "plane too large for i32 indices", x, NULL);
    volt_attr at = { .max_pool2d = { .kernel = k, .stride = stride } };
    volt_shape os = VOLT_SHAPE(x->shape.d[0], x->shape.d[1], (H - k) / stride + 1, (W - k) / stride + 1);
    return volt__op(s, VOLT_OP_MAX_POOL2D, 1, &x, VOLT_F32, os, &at);
}
