/* Layout ops: permute/transpose, slice/select, concat. Finite-difference gradients (odd
 * sizes), forward values against index loops written here, non-float forward, and
 * errors that name the op and the shapes. */
#include "gradcheck.h"

typedef struct perm_ctx { int perm[4]; } perm_ctx;
typedef struct slice_ctx { int dim; int64_t start, len; } slice_ctx;
typedef struct cat_ctx { int dim; } cat_ctx;

static volt_tensor *f_permute(volt_step *s, volt_tensor **in, void *c) { return volt_permute(s, in[0], ((perm_ctx *)c)->perm); }
static volt_tensor *f_transpose_last(volt_step *s, volt_tensor **in, void *c) { return volt_transpose(s, in[0], -1, -2); }
static volt_tensor *f_transpose_02(volt_step *s, volt_tensor **in, void *c) { return volt_transpose(s, in[0], 0, 2); }
static volt_tensor *f_slice(volt_step *s, volt_tensor **in, void *c) {
    slice_ctx *k = c;
    return volt_slice(s, in[0], k->dim, k->start, k->len);
}
static volt_tensor *f_select(volt_step *s, volt_tensor **in, void *c) {
    slice_ctx *k = c;
    return volt_select(s, in[0], k->dim, k->start);
}
static volt_tensor *f_concat3(volt_step *s, volt_tensor **in, void *c) {
    return volt_concat(s, (volt_tensor *[]){ in[0], in[1], in[2] }, 3, ((cat_ctx *)c)->dim);
}
/* x appears twice: its grad must accumulate both halves */
static volt_tensor *f_concat_repeat(volt_step *s, volt_tensor **in, void *c) {
    return volt_concat(s, (volt_tensor *[]){ in[0], in[1], in[0] }, 3, 1);
}
static volt_tensor *f_concat1(volt_step *s, volt_tensor **in, void *c) { return volt_concat(s, in, 1, 0); }
/* a non-linear chain through two layout ops: transpose(x) * slice(y) */
static volt_tensor *f_chain(volt_step *s, volt_tensor **in, void *c) {
    volt_tensor *t = volt_transpose(s, in[0], 0, 1);                  /* (3, 5) -> (5, 3) */
    return volt_mul(s, t, volt_mul(s, t, volt_slice(s, in[1], 0, 2, 5)));  /* y (9, 3) rows 2..6 */
}


/* f_chain's double-precision reference: t = x^T (5, 3), out = t * t * y[2:7] */
static void r_chain(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t i = 0; i < 5; i++)
        for (int64_t j = 0; j < 3; j++) {
            double t = x[0][j * 5 + i];
            y[i * 3 + j] = t * t * x[1][(2 + i) * 3 + j];
        }
}

/* Permute, transpose, slice, select and concat only copy: their f32 forward is exact, so
 * gradcheck runs them without a reference (ref NULL: differences of the f32 forward summed
 * in double, divided by the step taken, are exact for a linear op). */
static void grads(void) {
    perm_ctx p1 = { { 0, 2, 1, 3 } }, p2 = { { 3, 1, 0, 2 } }, p3 = { { 2, 0, 1 } }, p4 = { { -1, 0 } };
    gradcheck("permute (2,3,5,7) {0,2,1,3}", f_permute, NULL, &p1, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 5, 7)) });
    gradcheck("permute (2,3,5,7) {3,1,0,2}", f_permute, NULL, &p2, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 5, 7)) });
    gradcheck("permute (3,5,7) {2,0,1}", f_permute, NULL, &p3, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 5, 7)) });
    gradcheck("permute (5,7) {-1,0}", f_permute, NULL, &p4, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(5, 7)) });
    gradcheck("transpose(-1,-2) (3,5,7)", f_transpose_last, NULL, NULL, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 5, 7)) });
    gradcheck("transpose(0,2) (2,3,5,7)", f_transpose_02, NULL, NULL, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 5, 7)) });

    slice_ctx sm = { 1, 2, 3 }, sneg = { -1, 1, 3 }, sfirst = { 0, 0, 2 };
    gradcheck("slice (3,7,5) dim 1 [2,5)", f_slice, NULL, &sm, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 7, 5)) });
    gradcheck("slice (3,7,5) dim -1 [1,4)", f_slice, NULL, &sneg, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 7, 5)) });
    gradcheck("slice (3,7,5) dim 0 [0,2)", f_slice, NULL, &sfirst, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 7, 5)) });
    slice_ctx cls = { 1, 0, 1 }, last = { -1, -1, 1 }, mid = { 2, 3, 1 };
    gradcheck("select (4,9,6) dim 1 index 0 (CLS)", f_select, NULL, &cls, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(4, 9, 6)) });
    gradcheck("select (4,9,6) dim -1 index -1", f_select, NULL, &last, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(4, 9, 6)) });
    gradcheck("select (2,3,5,7) dim 2 index 3", f_select, NULL, &mid, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 5, 7)) });

    cat_ctx c0 = { 0 }, c1 = { 1 }, cneg = { -1 };
    gradcheck("concat dim 0", f_concat3, NULL, &c0, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 5, 3)), GC_F32(VOLT_SHAPE(3, 5, 3)), GC_F32(VOLT_SHAPE(1, 5, 3)) });
    gradcheck("concat dim 1", f_concat3, NULL, &c1, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 1, 3)), GC_F32(VOLT_SHAPE(2, 5, 3)), GC_F32(VOLT_SHAPE(2, 4, 3)) });
    gradcheck("concat dim -1", f_concat3, NULL, &cneg, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(3, 2)), GC_F32(VOLT_SHAPE(3, 7)), GC_F32(VOLT_SHAPE(3, 1)) });
    gradcheck("concat dim 1, one input constant", f_concat3, NULL, &c1, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 1, 3)), GC_F32_CONST(VOLT_SHAPE(2, 5, 3)), GC_F32(VOLT_SHAPE(2, 4, 3)) });
    gradcheck("concat repeated input", f_concat_repeat, NULL, NULL, 2,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 5)), GC_F32(VOLT_SHAPE(2, 4, 5)) });
    gradcheck("concat n=1", f_concat1, NULL, NULL, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 5)) });
    gradcheck("transpose+slice chain", f_chain, r_chain, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 5)), GC_F32(VOLT_SHAPE(9, 3)) });
}

static volt_step *mkstep(void) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 16;
    volt_step *s = NULL;
    volt_step_create(&cfg, &s);
    return s;
}

static float *iota(int64_t n) {
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (float)i * 0.5f - 3.f;
    return v;
}

static void check_permute(volt_step *s, const float *x, volt_shape xs, const int *perm) {
    volt_tensor *y = volt_permute(s, volt_tensor_wrap(s, VOLT_F32, xs, (void *)x), perm);
    if (!y) { CHECK(0, "permute failed: %s", volt_step_errmsg(s)); return; }
    int64_t d[4] = { 1, 1, 1, 1 };
    for (int i = 0; i < xs.ndim; i++) d[i] = xs.d[i];
    CHECK(y->shape.ndim == xs.ndim, "permute rank");
    for (int i = 0; i < xs.ndim; i++) CHECK(y->shape.d[i] == xs.d[perm[i]], "permute dim %d", i);
    int bad = 0;
    for (int64_t a = 0; a < d[0]; a++) for (int64_t b = 0; b < d[1]; b++)
        for (int64_t c = 0; c < d[2]; c++) for (int64_t e = 0; e < d[3]; e++) {
            int64_t ix[4] = { a, b, c, e }, yo = 0;
            for (int i = 0; i < xs.ndim; i++) yo = yo * y->shape.d[i] + ix[perm[i]];
            float want = x[((a * d[1] + b) * d[2] + c) * d[3] + e];
            bad += ((float *)y->data)[yo] != want;
        }
    CHECK(bad == 0, "permute values: %d wrong", bad);
}

static void values(void) {
    volt_step *s = mkstep();
    volt_step_begin(s, false, 0);
    float *x = iota(2 * 3 * 5 * 7);
    check_permute(s, x, VOLT_SHAPE(2, 3, 5, 7), (int[]){ 0, 2, 1, 3 });
    check_permute(s, x, VOLT_SHAPE(2, 3, 5, 7), (int[]){ 3, 1, 0, 2 });
    check_permute(s, x, VOLT_SHAPE(2, 3, 5, 7), (int[]){ 0, 1, 2, 3 });
    check_permute(s, x, VOLT_SHAPE(6, 5, 7), (int[]){ 2, 0, 1 });
    check_permute(s, x, VOLT_SHAPE(30, 7), (int[]){ 1, 0 });

    /* transpose(-1, -2) of (3, 5, 7) is y[a][c][b] = x[a][b][c] */
    volt_tensor *t = volt_transpose(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(3, 5, 7), x), -1, -2);
    int bad = !t || !volt_shape_eq(t->shape, VOLT_SHAPE(3, 7, 5));
    for (int a = 0; !bad && a < 3; a++) for (int b = 0; b < 5; b++) for (int c = 0; c < 7; c++)
        bad += ((float *)t->data)[(a * 7 + c) * 5 + b] != x[(a * 5 + b) * 7 + c];
    CHECK(bad == 0, "transpose(-1,-2) values");

    /* slice (3, 7, 5) dim 1 [2, 5) */
    volt_tensor *sl = volt_slice(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(3, 7, 5), x), 1, 2, 3);
    bad = !sl || !volt_shape_eq(sl->shape, VOLT_SHAPE(3, 3, 5));
    for (int a = 0; !bad && a < 3; a++) for (int b = 0; b < 3; b++) for (int c = 0; c < 5; c++)
        bad += ((float *)sl->data)[(a * 3 + b) * 5 + c] != x[(a * 7 + b + 2) * 5 + c];
    CHECK(bad == 0, "slice values");

    /* select (4, 9, 6) dim 1 index 0 -> (4, 6); index -1 -> the last token */
    float *z = iota(4 * 9 * 6);
    volt_tensor *zt = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4, 9, 6), z);
    volt_tensor *cls = volt_select(s, zt, 1, 0), *lst = volt_select(s, zt, 1, -1);
    bad = !cls || !lst || !volt_shape_eq(cls->shape, VOLT_SHAPE(4, 6)) || !volt_shape_eq(lst->shape, VOLT_SHAPE(4, 6));
    for (int a = 0; !bad && a < 4; a++) for (int c = 0; c < 6; c++) {
        bad += ((float *)cls->data)[a * 6 + c] != z[(a * 9 + 0) * 6 + c];
        bad += ((float *)lst->data)[a * 6 + c] != z[(a * 9 + 8) * 6 + c];
    }
    CHECK(bad == 0, "select values");
    volt_tensor *sc = volt_select(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(5), z), 0, 3);
    CHECK(sc && sc->shape.ndim == 0 && volt_tensor_item(sc) == z[3], "select of a 1-d tensor is a scalar");

    /* concat along dim 1: (2, 1, 3), (2, 5, 3), (2, 4, 3) -> (2, 10, 3) */
    float *a0 = iota(6), *a1 = iota(30), *a2 = iota(24);
    for (int i = 0; i < 30; i++) a1[i] += 100;
    for (int i = 0; i < 24; i++) a2[i] += 200;
    volt_tensor *parts[3] = { volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 1, 3), a0),
                              volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 5, 3), a1),
                              volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 4, 3), a2) };
    volt_tensor *cat = volt_concat(s, parts, 3, 1);
    bad = !cat || !volt_shape_eq(cat->shape, VOLT_SHAPE(2, 10, 3));
    for (int a = 0; !bad && a < 2; a++) for (int j = 0; j < 10; j++) for (int c = 0; c < 3; c++) {
        float want = j < 1 ? a0[(a * 1 + j) * 3 + c] : j < 6 ? a1[(a * 5 + j - 1) * 3 + c] : a2[(a * 4 + j - 6) * 3 + c];
        bad += ((float *)cat->data)[(a * 10 + j) * 3 + c] != want;
    }
    CHECK(bad == 0, "concat dim 1 values");
    /* dim 0 is plain back-to-back */
    volt_tensor *c0 = volt_concat(s, (volt_tensor *[]){ volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 3), a0),
                                                        volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(10, 3), a1) }, 2, 0);
    bad = !c0 || !volt_shape_eq(c0->shape, VOLT_SHAPE(12, 3));
    for (int i = 0; !bad && i < 36; i++) bad += ((float *)c0->data)[i] != (i < 6 ? a0[i] : a1[i - 6]);
    CHECK(bad == 0, "concat dim 0 values");

    /* non-float forward: ids can be sliced, permuted and concatenated */
    int32_t ids[12] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 };
    volt_tensor *it = volt_tensor_wrap(s, VOLT_I32, VOLT_SHAPE(3, 4), ids);
    volt_tensor *is = volt_slice(s, it, 1, 1, 2), *ip = volt_transpose(s, it, 0, 1);
    CHECK(is && is->dtype == VOLT_I32 && ((int32_t *)is->data)[0] == 1 && ((int32_t *)is->data)[3] == 6, "i32 slice");
    CHECK(ip && ((int32_t *)ip->data)[1] == 4 && ((int32_t *)ip->data)[11] == 11, "i32 transpose");
    int64_t l0[2] = { 1, 2 }, l1[3] = { 3, 4, 5 };
    volt_tensor *ic = volt_concat(s, (volt_tensor *[]){ volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(2), l0),
                                                        volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(3), l1) }, 2, 0);
    CHECK(ic && ic->dtype == VOLT_I64 && ((int64_t *)ic->data)[4] == 5 && ((int64_t *)ic->data)[1] == 2, "i64 concat");
    uint8_t u[6] = { 1, 2, 3, 4, 5, 6 };
    volt_tensor *ut = volt_transpose(s, volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(2, 3), u), 0, 1);
    CHECK(ut && ((uint8_t *)ut->data)[1] == 4 && ((uint8_t *)ut->data)[2] == 2, "u8 transpose");
    /* edge sizes: a 0-d permute, an empty part in a concat, an empty slice */
    float one = 4.f;
    volt_tensor *p0 = volt_permute(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SCALAR, &one), NULL);
    CHECK(p0 && p0->shape.ndim == 0 && volt_tensor_item(p0) == 4.f, "permute of a scalar");
    volt_tensor *ce = volt_concat(s, (volt_tensor *[]){ volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 0, 3), a0),
                                                        volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 1, 3), a0) }, 2, 1);
    CHECK(ce && volt_shape_eq(ce->shape, VOLT_SHAPE(2, 1, 3)) && ((float *)ce->data)[5] == a0[5], "concat with an empty part");
    volt_tensor *se = volt_slice(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 3), a0), 1, 3, 0);
    CHECK(se && volt_shape_eq(se->shape, VOLT_SHAPE(2, 0)), "empty slice at the end");
    CHECK_OK(volt_step_status(s));
    volt_step_end(s);

    free(x); free(z); free(a0); free(a1); free(a2);
    volt_step_destroy(s);
}

/* The error message must name the op and contain every fragment given. */
static void expect_err(volt_step *s, volt_tensor *y, volt_status want, const char *a, const char *b, const char *c) {
    const char *m = volt_step_errmsg(s);
    CHECK(y == NULL && volt_step_status(s) == want, "expected %s, got %s: %s", volt_status_str(want),
          volt_status_str(volt_step_status(s)), m);
    CHECK(strstr(m, a) && (!b || strstr(m, b)) && (!c || strstr(m, c)), "message: %s", m);
    volt_step_end(s);
}

static void errors(void) {
    volt_step *s = mkstep();
    volt_shape x4 = VOLT_SHAPE(2, 3, 5, 7);
#define X4 volt_tensor_new(s, VOLT_F32, x4)
    volt_step_begin(s, true, 0);
    expect_err(s, volt_permute(s, X4, (int[]){ 0, 1, 1, 3 }), VOLT_ERR_INVALID_ARG, "permute", "[0, 1, 1, 3]", "(2, 3, 5, 7)");
    volt_step_begin(s, true, 0);
    expect_err(s, volt_permute(s, X4, (int[]){ 0, 1, 2, 4 }), VOLT_ERR_INVALID_ARG, "permute", "not a permutation", "(2, 3, 5, 7)");
    volt_step_begin(s, true, 0);
    expect_err(s, volt_permute(s, X4, NULL), VOLT_ERR_INVALID_ARG, "permute", "NULL", NULL);
    volt_step_begin(s, true, 0);
    expect_err(s, volt_transpose(s, X4, 0, 4), VOLT_ERR_INVALID_ARG, "transpose", "dim 4", "(2, 3, 5, 7)");
    volt_step_begin(s, true, 0);
    expect_err(s, volt_transpose(s, X4, -5, 0), VOLT_ERR_INVALID_ARG, "transpose", "dim -5", NULL);

    volt_step_begin(s, true, 0);
    expect_err(s, volt_slice(s, X4, 1, 2, 2), VOLT_ERR_INVALID_ARG, "slice", "[2, 4)", "(2, 3, 5, 7)");
    volt_step_begin(s, true, 0);
    expect_err(s, volt_slice(s, X4, 3, 0, -1), VOLT_ERR_INVALID_ARG, "slice", "size 7", NULL);
    volt_step_begin(s, true, 0);
    expect_err(s, volt_slice(s, X4, 4, 0, 1), VOLT_ERR_INVALID_ARG, "slice", "dim 4", NULL);
    volt_step_begin(s, true, 0);
    expect_err(s, volt_select(s, X4, 1, 3), VOLT_ERR_INVALID_ARG, "select", "index 3", "(2, 3, 5, 7)");
    volt_step_begin(s, true, 0);
    expect_err(s, volt_select(s, X4, 1, -4), VOLT_ERR_INVALID_ARG, "select", "index -4", NULL);

    volt_step_begin(s, true, 0);
    volt_tensor *a = X4, *b = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 4, 5, 7));
    expect_err(s, volt_concat(s, (volt_tensor *[]){ a, a, b }, 3, 0), VOLT_ERR_SHAPE, "concat", "tensor 2", "(2, 4, 5, 7)");
    volt_step_begin(s, true, 0);
    a = X4;
    b = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3, 5));
    expect_err(s, volt_concat(s, (volt_tensor *[]){ a, b }, 2, 0), VOLT_ERR_SHAPE, "concat", "(2, 3, 5, 7)", "(2, 3, 5)");
    volt_step_begin(s, true, 0);
    a = X4;
    b = volt_tensor_new(s, VOLT_I32, x4);
    expect_err(s, volt_concat(s, (volt_tensor *[]){ a, b }, 2, 0), VOLT_ERR_DTYPE, "concat", "i32", NULL);
    volt_step_begin(s, true, 0);
    expect_err(s, volt_concat(s, (volt_tensor *[]){ X4 }, 0, 0), VOLT_ERR_INVALID_ARG, "concat", "at least one", NULL);
    volt_step_begin(s, true, 0);
    expect_err(s, volt_concat(s, (volt_tensor *[]){ X4 }, 1, 4), VOLT_ERR_INVALID_ARG, "concat", "dim 4", NULL);
    /* errors chain through NULL inputs */
    volt_step_begin(s, true, 0);
    expect_err(s, volt_transpose(s, volt_slice(s, X4, 0, 1, 9), 0, 1), VOLT_ERR_INVALID_ARG, "slice", NULL, NULL);
#undef X4
    volt_step_destroy(s);
}

int main(void) {
    grads();
    values();
    errors();
    return vtest_finish();
}
