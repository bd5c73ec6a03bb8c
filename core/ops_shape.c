/* Front-ends of the layout ops: permute/transpose, slice/select, concat. They check
 * arguments and record nodes; the copies are in the backend kernels (core/cpu/shape.c).
 * Unlike reshape these copy: tensors are always contiguous (DESIGN §3). Any dtype goes
 * forward (ids can be sliced); gradients flow to float inputs. */
#include <stdio.h>
#include <string.h>
#include "core/internal.h"
#include "volt/ops.h"

/* A PyTorch-style dim (negative counts from the end) as 0..ndim-1, or -1 if out of range. */
static int norm_dim(int d, int ndim) {
    if (d < 0) d += ndim;
    return d >= 0 && d < ndim ? d : -1;
}

static volt_tensor *dim_err(volt_step *s, const char *op, int dim, const volt_tensor *x) {
    char b[64];
    volt_step_fail(s, VOLT_ERR_INVALID_ARG, "%s: dim %d is out of range for x %s (%d dims)", op, dim,
                   volt_shape_str(x->shape, b, sizeof b), x->shape.ndim);
    return NULL;
}

/* outer = product of dims before `dim`, inner = product of dims after it. */
static void split_at(volt_shape sh, int dim, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < dim; i++) *outer *= sh.d[i];
    for (int i = dim + 1; i < sh.ndim; i++) *inner *= sh.d[i];
}

/* ---- permute: out dim i is x dim perm[i] ------------------------------------------------ */
volt_tensor *volt_permute(volt_step *s, volt_tensor *x, const int *perm) {
    if (volt__any_null(s, "permute", 1, &x)) return NULL;
    int nd = x->shape.ndim;
    if (nd > 0 && !perm) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "permute: perm is NULL");
        return NULL;
    }
    volt_attr at = { .permute = { .ndim = nd } };
    volt_shape os = { nd, { 0 } };
    bool seen[VOLT_MAX_DIMS] = { false }, ok = true;
    for (int i = 0; i < nd; i++) {
        int d = norm_dim(perm[i], nd);
        if (d < 0 || seen[d]) { ok = false; break; }
        seen[d] = true;
        at.permute.perm[i] = d;
        os.d[i] = x->shape.d[d];
    }
    if (!ok) {
        char b[64], p[64];
        int len = snprintf(p, sizeof p, "[");
        for (int i = 0; i < nd; i++) len += snprintf(p + len, sizeof p - (size_t)len, "%s%d", i ? ", " : "", perm[i]);
        snprintf(p + len, sizeof p - (size_t)len, "]");
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "permute: perm %s is not a permutation of the %d dims of x %s",
                       p, nd, volt_shape_str(x->shape, b, sizeof b));
        return NULL;
    }
    return volt__op(s, VOLT_OP_PERMUTE, 1, &x, x->dtype, os, &at);
}

volt_tensor *volt_transpose(volt_step *s, volt_tensor *x, int d0, int d1) {
    if (volt__any_null(s, "transpose", 1, &x)) return NULL;
    int nd = x->shape.ndim, a = norm_dim(d0, nd), b = norm_dim(d1, nd);
    if (a < 0) return dim_err(s, "transpose", d0, x);
    if (b < 0) return dim_err(s, "transpose", d1, x);
    int perm[VOLT_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return volt_permute(s, x, perm);
}

/* ---- slice / select: x viewed as (outer, size, inner); node i[] = outer, size, inner,
 * start, len. select records a SLICE of length 1 whose output shape drops the dim. ----- */
static volt_tensor *slice_op(volt_step *s, const char *op, volt_tensor *x, int dim, int64_t start,
                             int64_t len, bool drop) {
    if (volt__any_null(s, op, 1, &x)) return NULL;
    int d = norm_dim(dim, x->shape.ndim);
    if (d < 0) return dim_err(s, op, dim, x);
    int64_t size = x->shape.d[d], given = start;
    if (start < 0) start += size;          /* like torch.narrow / x[:, -1] */
    if (start < 0 || start > size || len < 0 || len > size - start) {   /* start + len may overflow */
        char b[64];
        volt_shape_str(x->shape, b, sizeof b);
        int64_t end;
        if (drop)
            volt_step_fail(s, VOLT_ERR_INVALID_ARG, "%s: index %lld is outside dim %d (size %lld) of x %s", op,
                           (long long)given, dim, (long long)size, b);
        else if (__builtin_add_overflow(given, len, &end))   /* no end to print */
            volt_step_fail(s, VOLT_ERR_INVALID_ARG, "%s: range start %lld length %lld is outside dim %d (size %lld) of x %s",
                           op, (long long)given, (long long)len, dim, (long long)size, b);
        else
            volt_step_fail(s, VOLT_ERR_INVALID_ARG, "%s: range [%lld, %lld) is outside dim %d (size %lld) of x %s", op,
                           (long long)given, (long long)end, dim, (long long)size, b);
        return NULL;
    }
    volt_attr at = { 0 };
    split_at(x->shape, d, &at.slice.outer, &at.slice.inner);
    at.slice.size = size;
    at.slice.start = start;
    at.slice.len = len;
    volt_shape os = x->shape;
    if (drop) {
        for (int i = d; i + 1 < os.ndim; i++) os.d[i] = os.d[i + 1];
        os.d[--os.ndim] = 0;
    } else {
        os.d[d] = len;
    }
    return volt__op(s, VOLT_OP_SLICE, 1, &x, x->dtype, os, &at);
}

volt_tensor *volt_slice(volt_step *s, volt_tensor *x, int dim, int64_t start, int64_t len) {
    return slice_op(s, "slice", x, dim, start, len, false);
}

volt_tensor *volt_select(volt_step *s, volt_tensor *x, int dim, int64_t index) {
    return slice_op(s, "select", x, dim, index, 1, true);
}

/* ---- concat: each input viewed as (outer, d_k, inner), out (outer, sum d_k, inner);
 * node i[] = outer, inner, total, dim; the node has n inputs. ------------------------- */
volt_tensor *volt_concat(volt_step *s, volt_tensor *const *xs, int n, int dim) {
    if (n < 1 || !xs) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "concat: need at least one tensor, got %d", xs ? n : 0);
        return NULL;
    }
    if (volt__any_null(s, "concat", n, xs)) return NULL;
    const volt_tensor *x0 = xs[0];
    int d = norm_dim(dim, x0->shape.ndim);
    if (d < 0) return dim_err(s, "concat", dim, x0);
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        const volt_tensor *xk = xs[k];
        char what[96];
        if (xk->dtype != x0->dtype) {
            volt_step_fail(s, VOLT_ERR_DTYPE, "concat: tensor %d is %s but tensor 0 is %s", k,
                           volt_dtype_name(xk->dtype), volt_dtype_name(x0->dtype));
            return NULL;
        }
        bool ok = xk->shape.ndim == x0->shape.ndim;
        for (int i = 0; ok && i < x0->shape.ndim; i++) ok = i == d || xk->shape.d[i] == x0->shape.d[i];
        if (!ok) {
            snprintf(what, sizeof what, "tensor %d must match tensor 0 in every dim but %d", k, d);
            return volt__shape_err(s, "concat", what, x0, xk);
        }
        total += xk->shape.d[d];
    }
    volt_attr at = { 0 };
    split_at(x0->shape, d, &at.concat.outer, &at.concat.inner);
    at.concat.total = total;
    at.concat.dim = d;
    volt_shape os = x0->shape;
    os.d[d] = total;
    return volt__op(s, VOLT_OP_CONCAT, n, xs, x0->dtype, os, &at);
}
