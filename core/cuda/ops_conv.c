/* conv2d and max_pool2d on the "cuda" backend (direct kernels, core/cuda/conv.cu; semantics
 * of core/cpu/conv.c). Their backward kernels add, so STORE grads are zeroed first. */
#include "core/cuda/cuda.h"

#define STREAM volt__cuda_stream(s)
#define CHECK(rc, what) volt__cuda_check(s, (rc), (what))

static volt_cu_conv geometry(const volt_node *n) {
    const volt_shape *x = &n->in[0]->shape, *w = &n->in[1]->shape, *y = &n->out->shape;
    return (volt_cu_conv){.N = x->d[0], .C = x->d[1], .H = x->d[2], .W = x->d[3], .O = w->d[0], .KH = w->d[2],
                          .KW = w->d[3], .OH = y->d[2], .OW = y->d[3], .S = n->attr.conv2d.stride,
                          .P = n->attr.conv2d.padding};
}

static volt_status conv_fwd(volt_step *s, volt_node *n) {
    volt_cu_conv g = geometry(n);
    return CHECK(volt_cu_conv2d(STREAM, &g, n->in[0]->data, n->in[1]->data, n->n_in == 3 ? n->in[2]->data : NULL,
                                n->out->data), "conv2d");
}
static volt_status conv_bwd(volt_step *s, volt_node *n) {
    volt__cuda_zero_stores(s, n);
    volt_cu_conv g = geometry(n);
    const float *dy = n->out->grad;
    volt_status st = VOLT_OK;
    if (n->grad_mode[0]) st = CHECK(volt_cu_conv2d_grad_x(STREAM, &g, dy, n->in[1]->data, n->in[0]->grad), "conv2d backward");
    if (st == VOLT_OK && n->grad_mode[1])
        st = CHECK(volt_cu_conv2d_grad_w(STREAM, &g, dy, n->in[0]->data, n->in[1]->grad), "conv2d backward");
    if (st == VOLT_OK && n->n_in == 3 && n->grad_mode[2])
        st = CHECK(volt_cu_conv2d_grad_b(STREAM, &g, dy, n->in[2]->grad), "conv2d backward");
    return st;
}

/* saved: i32 (N, C, OH, OW) index of each window's max in its plane, when on the tape */
static volt_status pool_fwd(volt_step *s, volt_node *n) {
    const volt_shape *xs = &n->in[0]->shape, *ys = &n->out->shape;
    const int64_t planes = xs->d[0] * xs->d[1];
    int32_t *arg = NULL;
    if (volt__needs_grad(n->out) &&
        !(arg = volt_step_alloc(s, sizeof(int32_t) * (size_t)(planes * ys->d[2] * ys->d[3] + 1))))
        return VOLT_ERR_NOMEM;
    n->saved = arg;
    return CHECK(volt_cu_max_pool2d(STREAM, n->in[0]->data, n->out->data, arg, planes, xs->d[2], xs->d[3], ys->d[2],
                                    ys->d[3], n->attr.max_pool2d.kernel, n->attr.max_pool2d.stride), "max_pool2d");
}
static volt_status pool_bwd(volt_step *s, volt_node *n) {
    volt__cuda_zero_stores(s, n);
    if (!n->saved) return VOLT_ERR_STATE;
    if (!n->grad_mode[0]) return VOLT_OK;
    const volt_shape *xs = &n->in[0]->shape, *ys = &n->out->shape;
    return CHECK(volt_cu_max_pool2d_grad(STREAM, n->out->grad, n->saved, n->in[0]->grad, xs->d[0] * xs->d[1],
                                         xs->d[2] * xs->d[3], ys->d[2] * ys->d[3]), "max_pool2d backward");
}

void volt__cuda_kernels_conv(volt_kernel *t) {
    t[VOLT_OP_CONV2D].forward = conv_fwd; t[VOLT_OP_CONV2D].backward = conv_bwd;
    t[VOLT_OP_MAX_POOL2D].forward = pool_fwd; t[VOLT_OP_MAX_POOL2D].backward = pool_bwd;
}
