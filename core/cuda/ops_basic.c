/* Elementwise, reduction and small ops on the "cuda" backend: add, mul, scale, the
 * activations, sum, mean, mse, reshape, cast, arange, argmax, accuracy. The glue of
 * core/cuda/elementwise.cu and rows.cu; semantics and grad modes of core/cpu/basic.c,
 * act.c and cast.c. */
#include "core/cuda/cuda.h"
#include "volt/dtype.h"

#define STREAM volt__cuda_stream(s)
#define CHECK(rc, what) volt__cuda_check(s, (rc), (what))

/* ---- add / mul: a (outer, inner), b (inner) -------------------------------------------- */
static volt_status add_fwd(volt_step *s, volt_node *n) {
    const volt_attr_broadcast *a = &n->attr.broadcast;
    return CHECK(volt_cu_binary(STREAM, 0, n->in[0]->data, n->in[1]->data, n->out->data, a->outer, a->inner), "add");
}
static volt_status add_bwd(volt_step *s, volt_node *n) {
    const volt_attr_broadcast *a = &n->attr.broadcast;
    volt_status st = VOLT_OK;
    if (n->grad_mode[0])
        st = CHECK(volt_cu_axpy_grad(STREAM, n->in[0]->grad, n->out->grad, a->outer * a->inner, 1.f, volt__cuda_acc(n, 0)),
                   "add backward");
    if (st == VOLT_OK && n->grad_mode[1])   /* after a: when b is a, this adds dy to it again */
        st = CHECK(volt_cu_colsum(STREAM, n->out->grad, NULL, a->outer, a->inner, n->in[1]->grad, volt__cuda_acc(n, 1),
                                  volt__cuda_colpart(s)), "add backward");
    return st;
}
static volt_status mul_fwd(volt_step *s, volt_node *n) {
    const volt_attr_broadcast *a = &n->attr.broadcast;
    return CHECK(volt_cu_binary(STREAM, 1, n->in[0]->data, n->in[1]->data, n->out->data, a->outer, a->inner), "mul");
}
static volt_status mul_bwd(volt_step *s, volt_node *n) {
    const volt_attr_broadcast *a = &n->attr.broadcast;
    volt_status st = VOLT_OK;
    if (n->grad_mode[0])
        st = CHECK(volt_cu_mul_grad_a(STREAM, n->in[0]->grad, n->out->grad, n->in[1]->data, a->outer, a->inner,
                                      volt__cuda_acc(n, 0)), "mul backward");
    if (st == VOLT_OK && n->grad_mode[1])
        st = CHECK(volt_cu_colsum(STREAM, n->out->grad, n->in[0]->data, a->outer, a->inner, n->in[1]->grad,
                                  volt__cuda_acc(n, 1), volt__cuda_colpart(s)), "mul backward");
    return st;
}

/* ---- scale and the activations ---------------------------------------------------------- */
static volt_status scale_fwd(volt_step *s, volt_node *n) {
    return CHECK(volt_cu_scale(STREAM, n->in[0]->data, n->out->data, volt_tensor_numel(n->out), n->attr.scale.alpha), "scale");
}
static volt_status scale_bwd(volt_step *s, volt_node *n) {
    if (!n->grad_mode[0]) return VOLT_OK;
    return CHECK(volt_cu_axpy_grad(STREAM, n->in[0]->grad, n->out->grad, volt_tensor_numel(n->out), n->attr.scale.alpha,
                                   volt__cuda_acc(n, 0)), "scale backward");
}

static int unary_of(volt_op_id op) {
    switch (op) {
    case VOLT_OP_RELU: return VOLT_CU_RELU;
    case VOLT_OP_GELU: return VOLT_CU_GELU;
    case VOLT_OP_GELU_TANH: return VOLT_CU_GELU_TANH;
    case VOLT_OP_TANH: return VOLT_CU_TANH;
    default: return VOLT_CU_SIGMOID;
    }
}
/* GELU under 16-bit compute keeps x's 16-bit rounding for backward (volt__gelu_keep, written
 * by the forward kernel in the same pass): its f32 input is not read again */
static volt_status unary_fwd(volt_step *s, volt_node *n) {
    const int64_t N = volt_tensor_numel(n->out);
    volt_kept16 *k = volt__gelu_keep(s, n);
    if (!k && s->status < 0) return s->status;
    return CHECK(volt_cu_unary(STREAM, unary_of(n->op), n->in[0]->data, n->out->data, N, k ? k->x : NULL,
                               k ? (int)k->dt : 0), s->be->kernels[n->op].name);
}
static volt_status unary_bwd(volt_step *s, volt_node *n) {
    if (!n->grad_mode[0]) return VOLT_OK;
    const volt_kept16 *k = volt__gelu_kept(n);
    return CHECK(volt_cu_unary_grad(STREAM, unary_of(n->op), k ? NULL : n->in[0]->data, n->out->data, n->out->grad,
                                    n->in[0]->grad, volt_tensor_numel(n->out), volt__cuda_acc(n, 0), k ? k->x : NULL,
                                    k ? (int)k->dt : 0), s->be->kernels[n->op].name);
}

/* ---- sum, mean, mse: double sums over a fixed grid ----------------------------------------- */
static volt_status sum_fwd(volt_step *s, volt_node *n) {
    double *part = (double *)volt__scratch(s, 0, 2 * VOLT_CU_REDUCE_PARTIALS);
    if (!part) return s->status;
    const int64_t N = volt_tensor_numel(n->in[0]);
    const double div = n->op == VOLT_OP_MEAN ? (double)N : 1.0;
    return CHECK(volt_cu_reduce(STREAM, 0, n->in[0]->data, NULL, N, part, n->out->data, div, NULL), "sum");
}
static volt_status sum_bwd(volt_step *s, volt_node *n) {
    if (!n->grad_mode[0]) return VOLT_OK;
    const int64_t N = volt_tensor_numel(n->in[0]);
    const float div = n->op == VOLT_OP_MEAN ? (float)N : 1.f;
    return CHECK(volt_cu_fill_grad(STREAM, n->in[0]->grad, N, n->out->grad, div, volt__cuda_acc(n, 0)), "sum backward");
}
static volt_status mse_fwd(volt_step *s, volt_node *n) {
    double *part = (double *)volt__scratch(s, 0, 2 * VOLT_CU_REDUCE_PARTIALS);
    if (!part) return s->status;
    const int64_t N = volt_tensor_numel(n->in[0]);
    return CHECK(volt_cu_reduce(STREAM, 2, n->in[0]->data, n->in[1]->data, N, part, n->out->data, (double)N, NULL), "mse");
}
static volt_status mse_bwd(volt_step *s, volt_node *n) {
    volt__cuda_zero_stores(s, n);
    float *da = n->grad_mode[0] ? n->in[0]->grad : NULL, *db = n->grad_mode[1] ? n->in[1]->grad : NULL;
    return CHECK(volt_cu_mse_grad(STREAM, n->in[0]->data, n->in[1]->data, n->out->grad, da, db, volt_tensor_numel(n->in[0])),
                 "mse backward");
}

/* ---- reshape (a view), cast, arange --------------------------------------------------------- */
static volt_status reshape_fwd(volt_step *s, volt_node *n) { (void)s; (void)n; return VOLT_OK; }
static volt_status pass_bwd(volt_step *s, volt_node *n) {   /* reshape, cast: dx (+)= dy */
    if (!n->grad_mode[0]) return VOLT_OK;
    return CHECK(volt_cu_axpy_grad(STREAM, n->in[0]->grad, n->out->grad, volt_tensor_numel(n->out), 1.f,
                                   volt__cuda_acc(n, 0)), "backward");
}
static volt_status cast_fwd(volt_step *s, volt_node *n) {
    volt_dtype dd = n->out->dtype, sd = n->in[0]->dtype;
    if (!volt_dtype_is_float(dd) || !volt_dtype_is_float(sd)) return VOLT_ERR_DTYPE;
    const int64_t N = volt_tensor_numel(n->out);
    if (dd == sd) {
        volt__dev_d2d(s->dev, n->out->data, n->in[0]->data, (size_t)N * volt_dtype_size(dd));
        return CHECK(0, "cast");
    }
    return CHECK(volt_cu_convert(STREAM, n->out->data, (int)dd, n->in[0]->data, (int)sd, N), "cast");
}
static volt_status arange_fwd(volt_step *s, volt_node *n) {
    return CHECK(volt_cu_arange(STREAM, n->out->data, volt_tensor_numel(n->out), n->out->dtype == VOLT_I64), "arange");
}
static volt_status no_bwd(volt_step *s, volt_node *n) { (void)s; (void)n; return VOLT_OK; }

/* ---- argmax: x (N, C) -> i64; accuracy: argmax (N) vs target (N), -100 left out ------------- */
static volt_status argmax_fwd(volt_step *s, volt_node *n) {
    return CHECK(volt_cu_argmax(STREAM, n->in[0]->data, n->out->data, n->in[0]->shape.d[0], n->in[0]->shape.d[1]),
                 "argmax");
}
static volt_status accuracy_fwd(volt_step *s, volt_node *n) {
    return CHECK(volt_cu_accuracy(STREAM, n->in[0]->data, n->in[1]->data, n->in[1]->dtype == VOLT_I64,
                                  n->in[1]->shape.d[0], n->out->data), "accuracy");
}

void volt__cuda_kernels_basic(volt_kernel *t) {
    t[VOLT_OP_ADD].forward = add_fwd; t[VOLT_OP_ADD].backward = add_bwd;
    t[VOLT_OP_MUL].forward = mul_fwd; t[VOLT_OP_MUL].backward = mul_bwd;
    t[VOLT_OP_SCALE].forward = scale_fwd; t[VOLT_OP_SCALE].backward = scale_bwd;
    const volt_op_id un[] = {VOLT_OP_RELU, VOLT_OP_GELU, VOLT_OP_GELU_TANH, VOLT_OP_TANH, VOLT_OP_SIGMOID};
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) { t[un[i]].forward = unary_fwd; t[un[i]].backward = unary_bwd; }
    t[VOLT_OP_SUM].forward = sum_fwd; t[VOLT_OP_SUM].backward = sum_bwd;
    t[VOLT_OP_MEAN].forward = sum_fwd; t[VOLT_OP_MEAN].backward = sum_bwd;
    t[VOLT_OP_MSE].forward = mse_fwd; t[VOLT_OP_MSE].backward = mse_bwd;
    t[VOLT_OP_RESHAPE].forward = reshape_fwd; t[VOLT_OP_RESHAPE].backward = pass_bwd;
    t[VOLT_OP_CAST].forward = cast_fwd; t[VOLT_OP_CAST].backward = pass_bwd;
    t[VOLT_OP_ARANGE].forward = arange_fwd; t[VOLT_OP_ARANGE].backward = no_bwd;
    t[VOLT_OP_ARGMAX].forward = argmax_fwd; t[VOLT_OP_ARGMAX].backward = no_bwd;
    t[VOLT_OP_ACCURACY].forward = accuracy_fwd; t[VOLT_OP_ACCURACY].backward = no_bwd;
}
