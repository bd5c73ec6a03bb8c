/* Front-ends of softmax, log_softmax, layernorm, embedding and dropout: checks and tape
 * recording; the math is in the backend kernels (core/cpu/act.c). gelu, gelu_tanh, tanh
 * and sigmoid share the unary front-end in core/ops_basic.c. */
#include <math.h>
#include <stdio.h>
#include "core/internal.h"
#include "volt/ops.h"
#include "volt/dtype.h"

/* float inputs may be 16-bit: volt__op computes on an f32 copy (core/ops_cast.c) */
#define CHECK_F32(s, op, t) do { if (!volt__is_float(t)) return volt__dtype_err(s, op, t, "a float dtype"); } while (0)

volt_kept16 *volt__gelu_keep(volt_step *s, volt_node *n) {
    if ((n->op != VOLT_OP_GELU && n->op != VOLT_OP_GELU_TANH) || s->compute_dtype != VOLT_BF16 ||
        !volt__needs_grad(n->out) || n->in[0]->dtype != VOLT_F32)
        return NULL;
    const int64_t N = volt_tensor_numel(n->in[0]);
    volt_kept16 *k = volt__step_host_alloc(s, sizeof *k);
    void *x = k ? volt_step_alloc(s, sizeof(uint16_t) * (size_t)(N > 0 ? N : 1)) : NULL;
    if (!x) return NULL;
    *k = (volt_kept16){ .x = x, .dt = VOLT_BF16 };
    n->saved = k;
    n->bwd_reads &= ~1u;
    return k;
}

const volt_kept16 *volt__gelu_kept(const volt_node *n) {
    return n->op == VOLT_OP_GELU || n->op == VOLT_OP_GELU_TANH ? n->saved : NULL;
}

/* x (..., C) viewed as (rows, C) */
static volt_tensor *rowwise(volt_step *s, volt_op_id op, const char *name, volt_tensor *x) {
    if (volt__any_null(s, name, 1, &x)) return NULL;
    CHECK_F32(s, name, x);
    if (x->shape.ndim < 1) return volt__shape_err(s, name, "need at least 1 dim (the last is reduced)", x, NULL);
    int64_t C = x->shape.d[x->shape.ndim - 1];
    volt_attr at = { .rows = { .rows = C ? volt_tensor_numel(x) / C : 0, .cols = C } };
    return volt__op(s, op, 1, &x, VOLT_F32, x->shape, &at);
}

volt_tensor *volt_softmax(volt_step *s, volt_tensor *x) { return rowwise(s, VOLT_OP_SOFTMAX, "softmax", x); }
volt_tensor *volt_log_softmax(volt_step *s, volt_tensor *x) { return rowwise(s, VOLT_OP_LOG_SOFTMAX, "log_softmax", x); }

/* in = { x, w?, b? } (volt_attr_layernorm says where w and b sit) */
volt_tensor *volt_layernorm(volt_step *s, volt_tensor *x, volt_tensor *w, volt_tensor *b, float eps) {
    if (volt__any_null(s, "layernorm", 1, &x)) return NULL;
    CHECK_F32(s, "layernorm", x);
    if (x->shape.ndim < 1) return volt__shape_err(s, "layernorm", "need x (..., C)", x, NULL);
    int64_t C = x->shape.d[x->shape.ndim - 1];
    volt_tensor *in[3] = { x, NULL, NULL };
    int n_in = 1;
    volt_attr at = { .layernorm = { .w_index = -1, .b_index = -1 } };
    volt_tensor *wb[2] = { w, b };
    for (int k = 0; k < 2; k++) {
        volt_tensor *t = wb[k];
        if (!t) continue;
        CHECK_F32(s, "layernorm", t);
        if (t->shape.ndim != 1 || t->shape.d[0] != C)
            return volt__shape_err(s, "layernorm", k ? "bias must be (C) for x (..., C)" : "weight must be (C) for x (..., C)", t, x);
        if (k) at.layernorm.b_index = n_in;
        else at.layernorm.w_index = n_in;
        in[n_in++] = t;
    }
    if (!(eps >= 0) || isinf(eps)) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "layernorm: eps must be finite and >= 0, got %g", eps);
        return NULL;
    }
    at.layernorm.rows = C ? volt_tensor_numel(x) / C : 0;
    at.layernorm.cols = C;
    at.layernorm.eps = eps;
    return volt__op(s, VOLT_OP_LAYERNORM, n_in, in, VOLT_F32, x->shape, &at);
}

/* ids (...) up to 3 dims, table (V, D) -> (..., D). Ids are range-checked by the kernel (they live on the
 * step's device). */
volt_tensor *volt_embedding(volt_step *s, volt_tensor *ids, volt_tensor *table) {
    return volt_embedding_padded(s, ids, table, -1);
}

volt_tensor *volt_embedding_padded(volt_step *s, volt_tensor *ids, volt_tensor *table, int64_t padding_idx) {
    volt_tensor *in[2] = { ids, table };
    if (volt__any_null(s, "embedding", 2, in)) return NULL;
    if (ids->dtype != VOLT_I32 && ids->dtype != VOLT_I64) return volt__dtype_err(s, "embedding", ids, "i32 or i64 ids");
    CHECK_F32(s, "embedding", table);
    if (table->shape.ndim != 2) return volt__shape_err(s, "embedding", "table must be (V, D)", table, NULL);
    if (ids->shape.ndim > VOLT_MAX_DIMS - 1)
        return volt__shape_err(s, "embedding", "ids may have at most 3 dims", ids, table);
    volt_attr at = { .embedding = { .n = volt_tensor_numel(ids), .num = table->shape.d[0], .dim = table->shape.d[1],
                                    .padding_idx = padding_idx } };
    if (padding_idx < -1 || padding_idx >= at.embedding.num) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "embedding: padding_idx %lld is outside -1..%lld",
                       (long long)padding_idx, (long long)at.embedding.num - 1);
        return NULL;
    }
    volt_shape os = ids->shape;
    os.d[os.ndim++] = table->shape.d[1];
    return volt__op(s, VOLT_OP_EMBEDDING, 2, in, VOLT_F32, os, &at);
}

/* n values 0..n-1 (i32 or i64); no inputs, so never on the tape. */
volt_tensor *volt_arange(volt_step *s, volt_dtype dt, int64_t n) {
    if (dt != VOLT_I32 && dt != VOLT_I64) {
        volt_step_fail(s, VOLT_ERR_DTYPE, "arange: dtype must be i32 or i64, got %s",
                       (unsigned)dt < VOLT_DTYPE_COUNT ? volt_dtype_name(dt) : "?");
        return NULL;
    }
    if (n < 0 || (dt == VOLT_I32 && n > INT32_MAX)) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "arange: length %lld is outside 0..%s", (long long)n,
                       dt == VOLT_I32 ? "INT32_MAX" : "INT64_MAX");
        return NULL;
    }
    return volt__op(s, VOLT_OP_ARANGE, 0, NULL, dt, VOLT_SHAPE(n), NULL);
}

/* Every dropout call in a training step takes the next call index (even with p == 0, so
 * a layer's mask does not depend on another layer's p). */
volt_tensor *volt_dropout(volt_step *s, volt_tensor *x, float p) {
    if (volt__any_null(s, "dropout", 1, &x)) return NULL;
    CHECK_F32(s, "dropout", x);
    if (!(p >= 0.f && p < 1.f)) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "dropout: p must be in [0, 1), got %g", p);
        return NULL;
    }
    if (!s->training) return x;
    volt_attr at = { .dropout = { .call = s->rng_calls++ } };
    if (p == 0.f) return x;
    at.dropout.p = p;
    return volt__op(s, VOLT_OP_DROPOUT, 1, &x, VOLT_F32, x->shape, &at);
}

volt_status volt__embedding_id_err(volt_step *s, const volt_tensor *ids, int64_t pos, int64_t id, int64_t num) {
    return volt__embedding_id_err_in(s, "embedding", "", ids, pos, id, num);
}

volt_status volt__embedding_id_err_in(volt_step *s, const char *op, const char *why, const volt_tensor *ids, int64_t pos,
                                      int64_t id, int64_t num) {
    char at[96];
    int len = 0;
    int64_t rem = pos, idx[VOLT_MAX_DIMS] = { 0 };
    for (int d = ids->shape.ndim - 1; d >= 0; d--) {
        idx[d] = ids->shape.d[d] ? rem % ids->shape.d[d] : 0;
        rem = ids->shape.d[d] ? rem / ids->shape.d[d] : 0;
    }
    at[0] = 0;
    for (int d = 0; d < ids->shape.ndim; d++)
        len += snprintf(at + len, sizeof at - (size_t)len, "%s%lld", d ? ", " : "", (long long)idx[d]);
    return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "%s: ids[%s] = %lld is outside [0, %lld)%s", op, at,
                          (long long)id, (long long)num, why);
}
