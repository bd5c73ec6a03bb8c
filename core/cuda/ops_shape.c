/* Layout ops on the "cuda" backend: permute (a 4-D gather), slice and concat (strided 2-D
 * copies forward, strided adds backward). Forward copies elements of any dtype by size;
 * backward adds f32 grads back to where they came from (core/cpu/shape.c). */
#include "core/cuda/cuda.h"

#define STREAM volt__cuda_stream(s)
#define CHECK(rc, what) volt__cuda_check(s, (rc), (what))


static volt_status permute_fwd(volt_step *s, volt_node *n) {
    int64_t D[4], S[4];
    volt__permute_gather_fwd(n, D, S);
    return CHECK(volt_cu_gather4(STREAM, n->in[0]->data, n->out->data, (int)volt_dtype_size(n->in[0]->dtype), D, S),
                 "permute");
}
static volt_status permute_bwd(volt_step *s, volt_node *n) {
    if (!n->grad_mode[0]) return VOLT_OK;
    int64_t D[4], S[4];
    volt__permute_gather_bwd(n, D, S);
    int rc = volt__cuda_acc(n, 0) ? volt_cu_gather4_add_f32(STREAM, n->out->grad, n->in[0]->grad, D, S)
                                  : volt_cu_gather4(STREAM, n->out->grad, n->in[0]->grad, 4, D, S);
    return CHECK(rc, "permute backward");
}

/* ---- slice: x (outer, size, inner) -> y (outer, len, inner) from start ------------------- */
static volt_status slice_fwd(volt_step *s, volt_node *n) {
    const volt_attr_slice *a = &n->attr.slice;
    const size_t esz = volt_dtype_size(n->in[0]->dtype), row = (size_t)(a->len * a->inner) * esz;
    if (!row || a->outer <= 0) return VOLT_OK;
    const char *x = (const char *)n->in[0]->data + (size_t)(a->start * a->inner) * esz;
    return CHECK((int)cudaMemcpy2DAsync(n->out->data, row, x, (size_t)(a->size * a->inner) * esz, row, (size_t)a->outer,
                                        cudaMemcpyDeviceToDevice, (cudaStream_t)STREAM), "slice");
}
static volt_status slice_bwd(volt_step *s, volt_node *n) {
    const volt_attr_slice *a = &n->attr.slice;
    volt__cuda_zero_stores(s, n);   /* outside the slice: zeros */
    if (!n->grad_mode[0]) return VOLT_OK;
    return CHECK(volt_cu_add2d(STREAM, n->out->grad, a->len * a->inner, (float *)n->in[0]->grad + a->start * a->inner,
                               a->size * a->inner, a->outer, a->len * a->inner), "slice backward");
}

/* ---- concat: x_k (outer, d_k, inner) -> y (outer, total, inner), inputs in order ---------- */
static volt_status concat_fwd(volt_step *s, volt_node *n) {
    const int64_t outer = n->attr.concat.outer, inner = n->attr.concat.inner, total = n->attr.concat.total;
    const int dim = n->attr.concat.dim;
    const size_t esz = volt_dtype_size(n->out->dtype);
    int64_t at = 0;
    for (int k = 0; k < n->n_in; k++) {
        const int64_t dk = n->in[k]->shape.d[dim];
        const size_t row = (size_t)(dk * inner) * esz;
        if (row && outer > 0) {
            volt_status st = CHECK((int)cudaMemcpy2DAsync((char *)n->out->data + (size_t)(at * inner) * esz,
                                                          (size_t)(total * inner) * esz, n->in[k]->data, row, row,
                                                          (size_t)outer, cudaMemcpyDeviceToDevice, (cudaStream_t)STREAM),
                                   "concat");
            if (st < 0) return st;
        }
        at += dk;
    }
    return VOLT_OK;
}
static volt_status concat_bwd(volt_step *s, volt_node *n) {
    const int64_t outer = n->attr.concat.outer, inner = n->attr.concat.inner, total = n->attr.concat.total;
    const int dim = n->attr.concat.dim;
    volt__cuda_zero_stores(s, n);
    int64_t at = 0;
    for (int k = 0; k < n->n_in; k++) {
        const int64_t dk = n->in[k]->shape.d[dim];
        if (n->grad_mode[k]) {   /* the same tensor may appear twice: += keeps both */
            volt_status st = CHECK(volt_cu_add2d(STREAM, n->out->grad + at * inner, total * inner, n->in[k]->grad,
                                                 dk * inner, outer, dk * inner), "concat backward");
            if (st < 0) return st;
        }
        at += dk;
    }
    return VOLT_OK;
}

void volt__cuda_kernels_shape(volt_kernel *t) {
    t[VOLT_OP_PERMUTE].forward = permute_fwd; t[VOLT_OP_PERMUTE].backward = permute_bwd;
    t[VOLT_OP_SLICE].forward = slice_fwd; t[VOLT_OP_SLICE].backward = slice_bwd;
    t[VOLT_OP_CONCAT].forward = concat_fwd; t[VOLT_OP_CONCAT].backward = concat_bwd;
}
