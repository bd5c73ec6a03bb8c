/* CPU kernels of the layout ops: permute, slice (and select), concat. Forward copies
 * elements of any dtype by size; backward adds f32 grads back to where they came from.
 * Every output element has exactly one source, so the loops parallelise without races. */
#include <string.h>
#include "core/cpu/kernels.h"

#define PAR_MIN 32768   /* below this many elements a loop runs on one thread */

/* ---- permute: y (D0, D1, D2, D3) contiguous, y[i0,i1,i2,i3] = x[sum_k ik * S[k]] ------
 * Shapes are padded to 4 dims with leading 1s (stride 0). Backward is the same gather
 * with the inverse permutation, from dy into dx. */
#define VOLT_DEF_GATHER4_(name, T, OP) \
static void name(const T *src, T *dst, const int64_t D[4], const int64_t S[4]) { \
    int64_t outer = D[0] * D[1], inner = D[2] * D[3]; \
    _Pragma("omp parallel for schedule(static) if (outer * inner > PAR_MIN)") \
    for (int64_t a = 0; a < outer; a++) { \
        const T *s01 = src + (a / D[1]) * S[0] + (a % D[1]) * S[1]; \
        T *d01 = dst + a * inner; \
        for (int64_t i2 = 0; i2 < D[2]; i2++) \
            for (int64_t i3 = 0; i3 < D[3]; i3++) d01[i2 * D[3] + i3] OP s01[i2 * S[2] + i3 * S[3]]; \
    } \
}
VOLT_DEF_GATHER4_(gather4_u8, uint8_t, =)
VOLT_DEF_GATHER4_(gather4_u16, uint16_t, =)
VOLT_DEF_GATHER4_(gather4_u32, uint32_t, =)
VOLT_DEF_GATHER4_(gather4_u64, uint64_t, =)
VOLT_DEF_GATHER4_(gather4_add_f32, float, +=)
#undef VOLT_DEF_GATHER4_

static void gather4(const void *src, void *dst, size_t esz, const int64_t D[4], const int64_t S[4]) {
    switch (esz) {
    case 1: gather4_u8(src, dst, D, S); break;
    case 2: gather4_u16(src, dst, D, S); break;
    case 4: gather4_u32(src, dst, D, S); break;
    default: gather4_u64(src, dst, D, S); break;
    }
}


volt_status volt__cpu_PERMUTE_fwd(volt_step *s, volt_node *n) {
    int64_t D[4], S[4];
    volt__permute_gather_fwd(n, D, S);
    gather4(n->in[0]->data, n->out->data, volt_dtype_size(n->in[0]->dtype), D, S);
    return VOLT_OK;
}

volt_status volt__cpu_PERMUTE_bwd(volt_step *s, volt_node *n) {
    int64_t D[4], S[4];
    volt__permute_gather_bwd(n, D, S);
    /* first write (core/internal.h): a fresh dx is a plain copy */
    float *dx = n->in[0]->grad;
    if (volt__cpu_acc(n, 0)) gather4_add_f32(n->out->grad, dx, D, S);
    else gather4(n->out->grad, dx, sizeof(float), D, S);
    return VOLT_OK;
}

/* ---- slice: x (outer, size, inner) -> y (outer, len, inner) from `start` ------------- */
volt_status volt__cpu_SLICE_fwd(volt_step *s, volt_node *n) {
    const volt_attr_slice *at = &n->attr.slice;
    int64_t outer = at->outer, size = at->size, inner = at->inner, start = at->start, len = at->len;
    size_t esz = volt_dtype_size(n->in[0]->dtype), row = (size_t)(len * inner) * esz;
    const char *x = n->in[0]->data;
    char *y = n->out->data;
    #pragma omp parallel for schedule(static) if (outer * len * inner > PAR_MIN)
    for (int64_t o = 0; o < outer; o++)
        memcpy(y + (size_t)o * row, x + (size_t)((o * size + start) * inner) * esz, row);
    return VOLT_OK;
}

volt_status volt__cpu_SLICE_bwd(volt_step *s, volt_node *n) {
    const volt_attr_slice *at = &n->attr.slice;
    int64_t outer = at->outer, size = at->size, inner = at->inner, start = at->start, len = at->len, row = len * inner;
    const float *dy = n->out->grad;
    float *dx = n->in[0]->grad;
    volt__cpu_zero_stores(n);   /* outside the slice: zeros */
    #pragma omp parallel for schedule(static) if (outer * row > PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        float *d = dx + (o * size + start) * inner;
        const float *g = dy + o * row;
        for (int64_t j = 0; j < row; j++) d[j] += g[j];
    }
    return VOLT_OK;
}

/* ---- concat: x_k (outer, d_k, inner) -> y (outer, total, inner), inputs in order ------ */
volt_status volt__cpu_CONCAT_fwd(volt_step *s, volt_node *n) {
    int64_t outer = n->attr.concat.outer, inner = n->attr.concat.inner, total = n->attr.concat.total;
    int dim = n->attr.concat.dim;
    size_t esz = volt_dtype_size(n->out->dtype);
    char *y = n->out->data;
    int64_t at = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t dk = n->in[k]->shape.d[dim];
        size_t row = (size_t)(dk * inner) * esz;
        const char *x = n->in[k]->data;
        #pragma omp parallel for schedule(static) if (outer * dk * inner > PAR_MIN)
        for (int64_t o = 0; o < outer; o++)
            memcpy(y + (size_t)((o * total + at) * inner) * esz, x + (size_t)o * row, row);
        at += dk;
    }
    return VOLT_OK;
}

volt_status volt__cpu_CONCAT_bwd(volt_step *s, volt_node *n) {
    int64_t outer = n->attr.concat.outer, inner = n->attr.concat.inner, total = n->attr.concat.total;
    int dim = n->attr.concat.dim;
    const float *dy = n->out->grad;
    volt__cpu_zero_stores(n);
    int64_t at = 0;
    for (int k = 0; k < n->n_in; k++) {
        volt_tensor *x = n->in[k];
        int64_t dk = x->shape.d[dim], row = dk * inner;
        if (volt__needs_grad(x)) {   /* the same tensor may appear twice: += keeps both */
            float *dx = x->grad;
            #pragma omp parallel for schedule(static) if (outer * row > PAR_MIN)
            for (int64_t o = 0; o < outer; o++) {
                const float *g = dy + (o * total + at) * inner;
                for (int64_t j = 0; j < row; j++) dx[o * row + j] += g[j];
            }
        }
        at += dk;
    }
    return VOLT_OK;
}
