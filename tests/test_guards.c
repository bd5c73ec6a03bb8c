/* The core API's guards against bad input: sizes that would wrap (shapes, reshape, slice, the
 * pool and the arena), empty contractions (linear with in == 0, matmul with K == 0: torch's
 * bias / zeros), NULL data reaching a kernel, ids rewritten between forward and backward,
 * tensors of another step or an earlier begin, parameter inits, argmax over no classes,
 * conv2d's padding in 64 bits, the optimizer's lr and the scheduler's counter, nn declares that
 * fail before opening their unit, NULL handles. Each case failed (or crashed) before its fix. */
#include "vtest.h"
#include "volt/volt.h"
#include "core/internal.h"

static volt_step *mkstep(volt_params *ps) {
    volt_step_config c;
    volt_step_config_init(&c);
    c.backend = "cpu";
    c.params = ps;
    volt_step *s = NULL;
    CHECK_OK(volt_step_create(&c, &s));
    return s;
}
static volt_params *mkps(void) {
    volt_params_config c;
    volt_params_config_init(&c);
    c.accelerator = "cpu";
    volt_params *ps = NULL;
    CHECK_OK(volt_params_create(&c, &ps));
    return ps;
}
/* y is NULL and the step failed with `want`, its message holding `sub` */
static void expect_fail(volt_step *s, const void *y, volt_status want, const char *sub, const char *what) {
    CHECK(!y && volt_step_status(s) == want && strstr(volt_step_errmsg(s), sub), "%s: got %p, status %s, '%s'", what, y,
          volt_status_str(volt_step_status(s)), volt_step_errmsg(s));
}
static void restart(volt_step *s, bool training) {
    volt_step_end(s);
    volt_step_begin(s, training, 0);
}
/* fills the step's pool with 7s so that an output a kernel never writes reads 7, not 0 */
static void dirty_pool(volt_step *s) {
    float sev[64];
    for (int i = 0; i < 64; i++) sev[i] = 7.f;
    for (int rep = 0; rep < 2; rep++) {
        volt_step_begin(s, false, 0);
        for (int k = 0; k < 8; k++) volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(64), sev);
        volt_step_end(s);
    }
}

static void test_sizes(void) {
    volt_step *s = mkstep(NULL);
    volt_step_begin(s, false, 0);
    void *p = volt_step_alloc(s, SIZE_MAX);
    expect_fail(s, p, VOLT_ERR_NOMEM, "step arena", "step_alloc(SIZE_MAX)");
    restart(s, false);
    p = volt_step_alloc(s, SIZE_MAX - 70);
    void *q = volt_step_alloc(s, 64);
    CHECK(!p && q, "step_alloc(SIZE_MAX - 70) = %p, then %p", p, q);
    restart(s, false);
    expect_fail(s, volt_arange(s, VOLT_I64, (1LL << 61) - 1), VOLT_ERR_SHAPE, "too many elements", "arange 2^61-1");
    restart(s, false);
    expect_fail(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE((1LL << 62) - 1)), VOLT_ERR_SHAPE, "too many elements", "new 2^62-1");
    restart(s, false);
    expect_fail(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(1LL << 31, 1LL << 31, 4)), VOLT_ERR_SHAPE, "too many", "new 2^64");
    restart(s, false);
    expect_fail(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(1LL << 61, 2)), VOLT_ERR_SHAPE, "too many", "new 2^62 (sum)");
    restart(s, false);
    expect_fail(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(1LL << 40, 1LL << 40), NULL), VOLT_ERR_SHAPE, "too many",
                "from_host 2^80");
    volt_step_end(s);
    volt_step_destroy(s);

    CHECK(volt_shape_numel((volt_shape){ 5, { 1, 2, 3, 4 } }) == -1, "numel of a 5-d shape");
    CHECK(volt_shape_numel(VOLT_SHAPE(1LL << 62, 4)) == -1, "numel that overflows");
    CHECK(volt_shape_numel(VOLT_SHAPE(0, 1LL << 62, 4)) == 0, "numel with a 0 dim first");
    CHECK(volt_shape_numel(VOLT_SHAPE(3, 5)) == 15 && volt_shape_numel(VOLT_SCALAR) == 1, "numel");
    CHECK(!volt_shape_eq((volt_shape){ 7, { 1 } }, (volt_shape){ 7, { 1 } }), "shape_eq of a bad rank");

    volt_arena a;   /* on the cpu device: a huge block is refused by its allocator, not by ASan's */
    CHECK_OK(volt__arena_init(&a, volt__device_cpu(), 256));
    CHECK(!volt__arena_alloc(&a, SIZE_MAX) && !volt__arena_alloc(&a, SIZE_MAX - 63), "arena alloc of a wrapping size");
    void *x = volt__arena_alloc(&a, 200), *y = volt__arena_alloc(&a, SIZE_MAX - 200);
    CHECK(x && !y, "arena: used + bytes wraps");   /* (it gave base + 256, past the block) */
    volt__arena_free(&a);
    volt_pool pl;
    volt__pool_init(&pl, volt__device_cpu());
    CHECK(!volt__pool_alloc(&pl, SIZE_MAX) && !volt__pool_alloc(&pl, SIZE_MAX - 10), "pool alloc of a wrapping size");
    volt__pool_free(&pl);
}

static void test_shape_ops(void) {
    volt_step *s = mkstep(NULL);
    float buf[16] = { 1, 2, 3, 4 };
    volt_step_begin(s, false, 0);
    volt_tensor *x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), buf);
    expect_fail(s, volt_slice(s, x, 0, 3, INT64_MAX), VOLT_ERR_INVALID_ARG, "is outside dim 0", "slice 3 + INT64_MAX");
    restart(s, false);
    x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), buf);
    volt_tensor *y = volt_slice(s, x, 0, 1, 3);
    CHECK(y && y->shape.d[0] == 3, "slice [1, 4)");
    expect_fail(s, volt_slice(s, x, 0, 5, 0), VOLT_ERR_INVALID_ARG, "outside", "slice start 5 of 4");
    restart(s, false);
    x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(16), buf);
    expect_fail(s, volt_reshape(s, x, VOLT_SHAPE((1LL << 62) + 4, 4)), VOLT_ERR_SHAPE, "", "reshape (2^62+4, 4)");
    restart(s, false);
    x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(16), buf);
    expect_fail(s, volt_reshape(s, x, VOLT_SHAPE(-1, 1LL << 62, 4)), VOLT_ERR_SHAPE, "too many", "reshape (-1, 2^62, 4)");
    volt_step_end(s);
    volt_step_destroy(s);
}

static void test_empty_contractions(void) {
    volt_step *s = mkstep(NULL);
    float bias[4] = { 1, 2, 3, 4 }, o[12];
    dirty_pool(s);
    volt_step_begin(s, true, 0);
    volt_tensor *x = volt_tensor_requires_grad(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(3, 0)));
    volt_tensor *w = volt_tensor_requires_grad(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(4, 0)));
    volt_tensor *b = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), bias));
    volt_tensor *y = volt_linear(s, x, w, b);
    CHECK(y && y->shape.ndim == 2 && y->shape.d[0] == 3 && y->shape.d[1] == 4, "linear in 0: %s", volt_step_errmsg(s));
    if (y) {
        CHECK_OK(volt_tensor_to_host(y, o));
        bool ok = true;
        for (int i = 0; i < 12; i++) ok &= o[i] == bias[i % 4];
        CHECK(ok, "linear in 0 is the bias broadcast: %g %g %g %g", o[0], o[1], o[4], o[11]);
        CHECK_OK(volt_step_backward(s, volt_sum(s, y)));
        float db[4];
        CHECK(b->grad && volt_tensor_grad_to_host(b, db) == VOLT_OK && db[0] == 3 && db[3] == 3, "db of linear in 0");
    }
    restart(s, false);
    y = volt_linear(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3, 0)), volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(4, 0)), NULL);
    CHECK(y && y->shape.d[1] == 3 && y->shape.d[2] == 4, "linear (2, 3, 0) no bias: %s", volt_step_errmsg(s));
    if (y) {
        bool ok = true;
        float o24[24];
        CHECK_OK(volt_tensor_to_host(y, o24));
        for (int i = 0; i < 24; i++) ok &= o24[i] == 0.f;
        CHECK(ok, "linear in 0 without bias is zeros: %g", o24[23]);
    }
    volt_step_end(s);

    dirty_pool(s);
    volt_step_begin(s, false, 0);
    volt_tensor *a = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(3, 0));
    volt_tensor *bm = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(0, 4));
    y = volt_matmul(s, a, bm);
    CHECK(y && y->shape.d[0] == 3 && y->shape.d[1] == 4, "matmul K 0: %s", volt_step_errmsg(s));
    if (y) {
        CHECK_OK(volt_tensor_to_host(y, o));
        bool ok = true;
        for (int i = 0; i < 12; i++) ok &= o[i] == 0.f;
        CHECK(ok, "matmul with K 0 is zeros: %g %g", o[0], o[11]);
    }
    volt_step_end(s);
    volt_step_destroy(s);
}

static void test_null_data(void) {
    volt_params *ps = mkps();
    volt_tensor *p;
    CHECK_OK(volt_param_new(ps, "w", VOLT_SHAPE(4), VOLT_INIT_ONES, &p));
    volt_step *s = mkstep(NULL);
    volt_step_begin(s, false, 0);
    expect_fail(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4), NULL), VOLT_ERR_INVALID_ARG, "tensor_wrap: data is NULL",
                "wrap NULL");
    restart(s, false);
    CHECK(volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(0, 3), NULL) != NULL, "wrap NULL of no elements");
    expect_fail(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), NULL), VOLT_ERR_INVALID_ARG, "src is NULL",
                "from_host NULL");
    restart(s, false);
    expect_fail(s, volt_relu(s, p), VOLT_ERR_STATE, "'w' has no data (its parameter store is not finalized)",
                "a parameter of a store not finalized");
    volt_step_end(s);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

static void test_embedding_ids_changed(void) {
    volt_params *ps = mkps();
    volt_tensor *tab;
    CHECK_OK(volt_param_new(ps, "emb", VOLT_SHAPE(4, 3), VOLT_INIT_ONES, &tab));
    CHECK_OK(volt_params_finalize(ps));
    volt_step *s = mkstep(ps);
    volt_step_begin(s, true, 0);
    int64_t ids[3] = { 0, 1, 2 }, bad[3] = { 0, 1, 1000000 };
    volt_tensor *it = volt_tensor_from_host(s, VOLT_I64, VOLT_SHAPE(3), ids);
    volt_tensor *l = volt_sum(s, volt_embedding(s, it, tab));
    CHECK_OK(volt_tensor_copy_from_host(it, bad));
    volt_status st = volt_step_backward(s, l);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_step_errmsg(s), "embedding backward: ids[2] = 1000000 is outside [0, 4)"),
          "backward after the ids changed: %s '%s'", volt_status_str(st), volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

static void test_foreign_tensors(void) {
    float buf[4] = { 1, 2, 3, 4 };
    volt_step *s = mkstep(NULL), *s2 = mkstep(NULL);
    volt_step_begin(s, true, 0);
    volt_step_begin(s2, true, 0);
    volt_tensor *x = volt_tensor_requires_grad(s2, volt_tensor_from_host(s2, VOLT_F32, VOLT_SHAPE(4), buf));
    volt_tensor *l = volt_sum(s2, volt_scale(s2, x, 2));
    volt_status st = volt_step_backward(s, l);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(volt_step_errmsg(s), "another step") && !x->grad,
          "backward of another step's loss: %s '%s'", volt_status_str(st), volt_step_errmsg(s));
    restart(s, true);
    expect_fail(s, volt_relu(s, x), VOLT_ERR_STATE, "input 0 belongs to another step", "an op on another step's tensor");
    volt_step_end(s2);
    volt_step_destroy(s2);

    restart(s, true);
    x = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), buf));
    l = volt_sum(s, volt_scale(s, x, 2));
    volt_tensor *kept = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), buf);
    restart(s, true);
    st = volt_step_backward(s, l);
    CHECK(st == VOLT_ERR_STATE && strstr(volt_step_errmsg(s), "earlier step"), "backward of the last begin's loss: %s '%s'",
          volt_status_str(st), volt_step_errmsg(s));
    restart(s, true);
    expect_fail(s, volt_relu(s, kept), VOLT_ERR_STATE, "input 0 is from an earlier step", "an op on the last begin's tensor");
    volt_step_end(s);
    /* made between end and begin: the next begin's */
    volt_tensor *early = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), buf);
    volt_step_begin(s, false, 0);
    CHECK(volt_relu(s, early) != NULL, "a tensor made before begin: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_destroy(s);
}

static void test_inits(void) {
    volt_params *ps = mkps();
    volt_tensor *t;
    CHECK(volt_param_new(ps, "a", VOLT_SHAPE(4), (volt_init){ (volt_init_kind)99, 1, 2 }, &t) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "'a': unknown init kind"), "kind 99: %s", volt_params_errmsg(ps));
    CHECK(volt_param_new(ps, "b", VOLT_SHAPE(4), VOLT_INIT_NORMAL(0, NAN), &t) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "finite"), "NORMAL(0, NaN): %s", volt_params_errmsg(ps));
    CHECK(volt_param_new(ps, "c", VOLT_SHAPE(4), VOLT_INIT_UNIFORM(5, -INFINITY), &t) == VOLT_ERR_INVALID_ARG,
          "UNIFORM(5, -inf)");
    CHECK(volt_param_new(ps, "d", VOLT_SHAPE(4), VOLT_INIT_UNIFORM(5, 1), &t) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "lo <= hi"), "UNIFORM(5, 1): %s", volt_params_errmsg(ps));
    CHECK(volt_param_new(ps, "e", VOLT_SHAPE(4), VOLT_INIT_NORMAL(0, -1), &t) == VOLT_ERR_INVALID_ARG, "NORMAL(0, -1)");
    CHECK(volt_param_new(ps, "f", VOLT_SHAPE(4), VOLT_INIT_CONST(INFINITY), &t) == VOLT_ERR_INVALID_ARG, "CONST(inf)");
    CHECK_OK(volt_param_new(ps, "g", VOLT_SHAPE(4), VOLT_INIT_UNIFORM(2, 2), &t));
    CHECK_OK(volt_param_new(ps, "h", VOLT_SHAPE(4, 4), VOLT_INIT_KAIMING, &t));
    CHECK(volt_params_count(ps) == 2, "only the good ones are declared: %d", volt_params_count(ps));
    CHECK_OK(volt_params_finalize(ps));
    volt_params_destroy(ps);
}

static void test_argmax_no_classes(void) {
    volt_step *s = mkstep(NULL);
    volt_step_begin(s, false, 0);
    int64_t tg[2] = { 0, 0 };
    volt_tensor *lg = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 0));
    expect_fail(s, volt_argmax(s, lg), VOLT_ERR_SHAPE, "argmax: need C >= 1", "argmax (2, 0)");
    restart(s, false);
    lg = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 0));
    expect_fail(s, volt_accuracy(s, lg, volt_tensor_from_host(s, VOLT_I64, VOLT_SHAPE(2), tg)), VOLT_ERR_SHAPE,
                "accuracy: need C >= 1", "accuracy (2, 0)");
    volt_step_end(s);
    volt_step_destroy(s);
}

static void test_conv_padding(void) {
    volt_step *s = mkstep(NULL);
    float xv[9], wv[9];
    double want = 0;
    for (int i = 0; i < 9; i++) xv[i] = (float)(i + 1), wv[i] = (float)(i % 3) - 1.f, want += (double)xv[i] * wv[i];
    volt_step_begin(s, false, 0);
    volt_tensor *x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(1, 1, 3, 3), xv);
    volt_tensor *w = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(1, 1, 3, 3), wv);
    /* 3 + 2 * 2^30 - 3 over stride 2^30: a 3x3 output whose centre sees the input exactly
     * (2 * padding overflowed an int: "kernel larger than the padded input") */
    volt_tensor *y = volt_conv2d(s, x, w, NULL, 1 << 30, 1 << 30);
    CHECK(y && y->shape.d[2] == 3 && y->shape.d[3] == 3, "conv2d padding 2^30: %s", volt_step_errmsg(s));
    if (y) {
        float o[9];
        CHECK_OK(volt_tensor_to_host(y, o));
        CHECK(o[4] == (float)want && o[0] == 0.f && o[8] == 0.f, "conv2d padding 2^30: centre %g (want %g), corner %g", o[4],
              want, o[0]);
    }
    volt_step_end(s);
    volt_step_destroy(s);
}

static void test_lr(void) {
    volt_params *ps = mkps();
    volt_tensor *w;
    CHECK_OK(volt_param_new(ps, "w", VOLT_SHAPE(4), VOLT_INIT_ONES, &w));
    CHECK_OK(volt_params_finalize(ps));
    volt_optimizer_config oc;
    volt_optimizer_config_init(&oc);
    oc.kind = VOLT_OPTIM_SGD;
    oc.lr = 0.5f;
    volt_optimizer *o = NULL;
    CHECK_OK(volt_optimizer_create(&oc, ps, &o));
    const float bad[3] = { NAN, -1.f, INFINITY };
    for (int i = 0; i < 3; i++) {
        volt_status st = volt_optimizer_set_lr(o, bad[i]);
        CHECK(st == VOLT_ERR_INVALID_ARG && volt_optimizer_lr(o) == 0.5f && strstr(volt_optimizer_errmsg(o), "set_lr"),
              "set_lr(%g): %s, lr %g, '%s'", bad[i], volt_status_str(st), volt_optimizer_lr(o), volt_optimizer_errmsg(o));
    }
    CHECK_OK(volt_optimizer_set_lr(o, 0.25f));
    CHECK(volt_optimizer_lr(o) == 0.25f, "set_lr(0.25)");
    CHECK(volt_optimizer_set_lr(NULL, 1.f) == VOLT_ERR_INVALID_ARG, "set_lr(NULL)");

    volt_scheduler_config sc;
    volt_scheduler_config_init(&sc);
    sc.kind = VOLT_SCHED_LINEAR;
    sc.total_steps = 10;
    volt_scheduler *sch = NULL;
    CHECK_OK(volt_scheduler_create(&sc, o, &sch));
    CHECK_OK(volt_scheduler_set_last_step(sch, INT64_MAX));
    volt_scheduler_step(sch);
    CHECK(volt_scheduler_last_step(sch) == INT64_MAX && volt_optimizer_lr(o) == 0.f, "step past INT64_MAX: %lld, lr %g",
          (long long)volt_scheduler_last_step(sch), volt_optimizer_lr(o));
    volt_scheduler_destroy(sch);
    sc.warmup_steps = 10;
    sc.total_steps = 20;
    CHECK(volt_scheduler_lr_at(&sc, 1.f, -5) == 0.f && volt_scheduler_lr_at(&sc, 1.f, INT64_MIN) == 0.f &&
          volt_scheduler_lr_at(&sc, 1.f, 5) == 0.5f, "lr_at a negative step: %g", volt_scheduler_lr_at(&sc, 1.f, -5));
    volt_optimizer_destroy(o);
    volt_params_destroy(ps);
}

static void test_nn_declare_retry(void) {
    volt_params *ps = mkps();
    volt_nn_encoder_config c;
    volt_nn_encoder_config_init(&c);
    c.n_heads = 3;
    volt_nn_encoder_layer e;
    CHECK(volt_nn_encoder_declare(ps, "enc", 8, &c, &e) == VOLT_ERR_INVALID_ARG && strstr(volt_params_errmsg(ps), "n_heads"),
          "encoder 8 / 3 heads: %s", volt_params_errmsg(ps));
    c.n_heads = 2;
    CHECK_OK(volt_nn_encoder_declare(ps, "enc", 8, &c, &e));
    CHECK(volt_params_unit_count(ps) == 1, "one unit after the retry: %d", volt_params_unit_count(ps));

    volt_nn_mha_config mc;
    volt_nn_mha_config_init(&mc);
    mc.k_name = "";
    volt_nn_mha a;
    CHECK(volt_nn_mha_declare(ps, "att", 8, &mc, &a) == VOLT_ERR_INVALID_ARG, "mha with an empty name");
    mc.k_name = "k";
    CHECK_OK(volt_nn_mha_declare(ps, "att", 8, &mc, &a));

    volt_nn_linear_config lc;
    volt_nn_linear_config_init(&lc);
    lc.bias = false;
    volt_nn_linear l;
    CHECK(volt_nn_linear_declare_ex(ps, "fc", 1LL << 31, 1LL << 31, &lc, &l) == VOLT_ERR_SHAPE, "linear 2^31 x 2^31: %s",
          volt_params_errmsg(ps));
    lc.init = VOLT_NN_INIT_CUSTOM;
    lc.weight_init = VOLT_INIT_NORMAL(0.f, NAN);
    CHECK(volt_nn_linear_declare_ex(ps, "fc", 4, 4, &lc, &l) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "linear 'fc': weight init"), "linear custom NaN init: %s", volt_params_errmsg(ps));
    lc.weight_init = VOLT_INIT_NORMAL(0.f, 0.1f);
    CHECK_OK(volt_nn_linear_declare_ex(ps, "fc", 4, 4, &lc, &l));

    volt_nn_conv2d_config cc;
    volt_nn_conv2d_config_init(&cc);
    cc.init = VOLT_NN_INIT_CUSTOM;
    cc.weight_init = VOLT_INIT_UNIFORM(1, 0);
    volt_nn_conv2d cv;
    CHECK(volt_nn_conv2d_declare_ex(ps, "conv", 1, 2, 3, &cc, &cv) == VOLT_ERR_INVALID_ARG, "conv custom bad init");
    cc.weight_init = VOLT_INIT_UNIFORM(0, 1);
    CHECK_OK(volt_nn_conv2d_declare_ex(ps, "conv", 1, 2, 3, &cc, &cv));

    volt_nn_embedding_config ec;
    volt_nn_embedding_config_init(&ec);
    ec.init = VOLT_NN_INIT_CUSTOM;
    ec.weight_init = (volt_init){ (volt_init_kind)42, 0, 0 };
    volt_nn_embedding em;
    CHECK(volt_nn_embedding_declare_ex(ps, "emb", 5, 2, &ec, &em) == VOLT_ERR_INVALID_ARG, "embedding custom bad init");
    ec.weight_init = VOLT_INIT_ZEROS;
    CHECK_OK(volt_nn_embedding_declare_ex(ps, "emb", 5, 2, &ec, &em));
    CHECK(volt_params_unit_count(ps) == 5, "units enc, att, fc, conv, emb: %d", volt_params_unit_count(ps));
    CHECK_OK(volt_params_finalize(ps));
    volt_params_destroy(ps);
}

static void test_null_handles(void) {
    volt_step_config c;
    volt_step_config_init(&c);
    c.backend = "cpu";
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.accelerator = "cpu";
    CHECK(volt_step_create(&c, NULL) == VOLT_ERR_INVALID_ARG, "step_create(cfg, NULL)");
    CHECK(volt_params_create(&pc, NULL) == VOLT_ERR_INVALID_ARG, "params_create(cfg, NULL)");
    CHECK(volt_step_begin(NULL, true, 0) == VOLT_ERR_INVALID_ARG, "step_begin(NULL)");
    volt_step_end(NULL);
    CHECK(volt_relu(NULL, NULL) == NULL && volt_matmul(NULL, NULL, NULL) == NULL, "ops with a NULL step");
    CHECK(volt_tensor_new(NULL, VOLT_F32, VOLT_SHAPE(2)) == NULL && volt_arange(NULL, VOLT_I64, 3) == NULL &&
          volt_step_alloc(NULL, 8) == NULL, "tensors with a NULL step");
    CHECK(volt_step_fail(NULL, VOLT_ERR_SHAPE, "x") == VOLT_ERR_SHAPE, "step_fail(NULL)");
    CHECK(volt_step_status(NULL) == VOLT_ERR_INVALID_ARG && !strcmp(volt_step_errmsg(NULL), ""), "status of NULL");
    CHECK(volt_step_backward(NULL, NULL) == VOLT_ERR_INVALID_ARG, "backward(NULL)");
    CHECK(volt_params_finalize(NULL) == VOLT_ERR_INVALID_ARG, "params_finalize(NULL)");
    CHECK(isnan(volt_tensor_item(NULL)), "tensor_item(NULL)");
    float f[4] = { 0 };
    CHECK(volt_convert(NULL, VOLT_F32, f, VOLT_BF16, 4) == VOLT_ERR_INVALID_ARG &&
          volt_convert(f, VOLT_F32, NULL, VOLT_BF16, 4) == VOLT_ERR_INVALID_ARG, "convert with NULL");
    CHECK_OK(volt_convert(NULL, VOLT_F32, NULL, VOLT_BF16, 0));
}

/* one test by name (argv[1]), or all: the cases that crash without their fix run alone */
int main(int argc, char **argv) {
    static const struct { const char *name; void (*fn)(void); } tests[] = {
        { "sizes", test_sizes }, { "shape_ops", test_shape_ops }, { "empty_contractions", test_empty_contractions },
        { "null_data", test_null_data }, { "embedding_ids_changed", test_embedding_ids_changed },
        { "foreign_tensors", test_foreign_tensors }, { "inits", test_inits }, { "argmax_no_classes", test_argmax_no_classes },
        { "conv_padding", test_conv_padding }, { "lr", test_lr }, { "nn_declare_retry", test_nn_declare_retry },
        { "null_handles", test_null_handles },
    };
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++)
        if (argc < 2 || !strcmp(argv[1], tests[i].name)) tests[i].fn();
    return vtest_finish();
}
