/* Param store: declaration, units and padding, init distributions, lookup, freezing,
 * gradient clipping, clearing grads without writing them (volt_params_clear_grad), and the
 * errors for bad declarations. */
#include <omp.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/dtype.h"
#include "core/device.h"
#include "core/units.h"

/* Unit buffers are device memory: the tests read and write them only through copies. */
static float gget(const volt_tensor *p, int64_t i) {
    float v;
    volt__dev_d2h(p->device, &v, (const float *)p->grad + i, sizeof v);
    return v;
}
static void gset(volt_tensor *p, int64_t i, float v) { volt__dev_h2d(p->device, (float *)p->grad + i, &v, sizeof v); }
static float *values(const volt_tensor *p) {   /* a malloc'ed host copy */
    float *h = malloc(volt_tensor_bytes(p));
    if (h) volt_tensor_to_host(p, h);
    return h;
}

static volt_params *mk(uint64_t seed) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.seed = seed;
    volt_params *ps = NULL;
    volt_params_create(&pc, &ps);
    return ps;
}

static void test_layout_and_init(void) {
    volt_params *ps = mk(5);
    volt_tensor *w, *b, *e, *n, *z;
    CHECK_OK(volt_params_unit(ps, "fc"));
    CHECK_OK(volt_param_new(ps, "fc.weight", VOLT_SHAPE(300, 200), VOLT_INIT_KAIMING, &w));
    CHECK_OK(volt_param_new(ps, "fc.bias", VOLT_SHAPE(7), VOLT_INIT_ONES, &b));
    CHECK_OK(volt_params_unit(ps, "emb"));
    CHECK_OK(volt_param_new(ps, "emb.weight", VOLT_SHAPE(1000, 64), VOLT_INIT_NORMAL(0.f, 0.02f), &e));
    CHECK_OK(volt_param_new(ps, "emb.norm", VOLT_SHAPE(13), VOLT_INIT_XAVIER, &n));
    CHECK_OK(volt_param_new(ps, "emb.zero", VOLT_SHAPE(3), VOLT_INIT_ZEROS, &z));
    volt_tensor *dup;
    CHECK(volt_param_new(ps, "fc.bias", VOLT_SHAPE(2), VOLT_INIT_ZEROS, &dup) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_params_errmsg(ps), "duplicate"), "duplicate name: %s", volt_params_errmsg(ps));
    volt_tensor *bad;
    CHECK(volt_param_new(ps, "bad", VOLT_SHAPE(3, 0), VOLT_INIT_ZEROS, &bad) == VOLT_ERR_SHAPE, "zero dim rejected");
    {   /* element counts that overflow (an int64, or the bytes of a value, its grad and two
         * moments) are refused naming the parameter, not wrapped into a small or negative layout */
        volt_params *big = mk(5);
        volt_tensor *h;
        CHECK(volt_param_new(big, "huge", VOLT_SHAPE(97, (int64_t)1 << 62), VOLT_INIT_ZEROS, &h) == VOLT_ERR_SHAPE &&
              strstr(volt_params_errmsg(big), "'huge' has too many elements"), "wrapping count: %s", volt_params_errmsg(big));
        CHECK(volt_param_new(big, "big", VOLT_SHAPE((int64_t)1 << 32, (int64_t)1 << 28), VOLT_INIT_ZEROS, &h) == VOLT_ERR_SHAPE,
              "2^60 elements (16 bytes each overflow): %s", volt_params_errmsg(big));
        CHECK(volt_param_new(big, "half1", VOLT_SHAPE((int64_t)1 << 58), VOLT_INIT_ZEROS, &h) == VOLT_OK &&
              volt_param_new(big, "half2", VOLT_SHAPE((int64_t)1 << 58), VOLT_INIT_ZEROS, &h) == VOLT_ERR_SHAPE &&
              strstr(volt_params_errmsg(big), "would hold too many elements"), "a unit's total: %s", volt_params_errmsg(big));
        volt_params_destroy(big);   /* never finalized: nothing allocated */
    }
    CHECK(volt_params_unit(ps, "fc") == VOLT_ERR_INVALID_ARG, "duplicate unit rejected");
    CHECK_OK(volt_params_finalize(ps));
    CHECK(volt_param_new(ps, "late", VOLT_SHAPE(3), VOLT_INIT_ZEROS, &bad) == VOLT_ERR_STATE, "declare after finalize");

    CHECK(volt_params_count(ps) == 5 && volt_params_unit_count(ps) == 2, "counts");
    CHECK(volt_params_numel(ps) == 300 * 200 + 7 + 64000 + 13 + 3, "numel");
    volt_unit *u0 = volt_params_unit_at(ps, 0), *u1 = volt_params_unit_at(ps, 1);
    CHECK(volt_unit_numel(u0) == 60000 + 16 && volt_param_offset(b) == 60000, "unit 0 padded layout");
    CHECK(volt_param_offset(n) == 64000 && volt_param_offset(z) == 64016 && volt_unit_numel(u1) == 64032, "unit 1 layout");
    CHECK((float *)w->data == volt_unit_data(u0), "param views its unit");
    /* Grads hold no memory until something needs them (PyTorch's grad None until backward). */
    float g_host[7];
    CHECK(w->grad == NULL && b->grad == NULL && e->grad == NULL, "no grads after finalize");
    CHECK(volt_tensor_grad_to_host(b, g_host) == VOLT_ERR_STATE, "no grad to read yet");
    if (w->device->caps & VOLT_DEV_GIVE_BACK)
        CHECK(volt__unit_resident_bytes(u0, VOLT_UNIT_GRADS) == 0 && volt__unit_resident_bytes(u1, VOLT_UNIT_GRADS) == 0,
              "grads hold no memory after finalize (%lld bytes resident)",
              (long long)volt__unit_resident_bytes(u0, VOLT_UNIT_GRADS));
    float *g0 = volt_unit_grad(u0);
    CHECK(g0 && w->grad == g0 && b->grad == g0 + 60000, "volt_unit_grad makes the unit's grads");
    CHECK(e->grad == NULL, "... of that unit only");
    CHECK_OK(volt_tensor_grad_to_host(b, g_host));
    CHECK(g_host[0] == 0.f && g_host[6] == 0.f, "fresh grads read zeros");
    CHECK(volt_params_find(ps, "emb.norm") == n && volt_params_find(ps, "nope") == NULL, "find");
    CHECK(w->unit == u0 && !strcmp(volt_unit_name(u1), "emb") && volt_unit_param(u1, 2) == z, "unit membership");
    const char *acc = getenv("VOLT_ACCELERATOR");
    printf("device: %s\n", w->device->be->name);
    CHECK(!acc || !*acc || !strcmp(acc, w->device->be->name), "buffers on %s, asked for %s", w->device->be->name, acc);

    /* init statistics */
    double bound = sqrt(6.0 / 200), mx = 0, mean = 0, var = 0;
    float *wd = values(w), *ed = values(e), *bd = values(b), *zd = values(z), *nd = values(n);
    for (int i = 0; i < 60000; i++) { mx = fmax(mx, fabs(wd[i])); mean += wd[i]; }
    mean /= 60000;
    CHECK(mx <= bound && mx > 0.98 * bound && fabs(mean) < 0.01, "kaiming: max %g bound %g mean %g", mx, bound, mean);
    mean = 0;
    for (int i = 0; i < 64000; i++) mean += ed[i];
    mean /= 64000;
    for (int i = 0; i < 64000; i++) var += (ed[i] - mean) * (ed[i] - mean);
    var /= 64000;
    CHECK(fabs(mean) < 0.001 && fabs(sqrt(var) - 0.02) < 0.001, "normal: mean %g std %g", mean, sqrt(var));
    CHECK(bd[6] == 1.f && zd[2] == 0.f, "const inits");
    double xb = sqrt(6.0 / (13 + 13));
    for (int i = 0; i < 13; i++) CHECK(fabs(nd[i]) <= xb, "xavier bound");

    /* same seed => same init; different seed => different */
    volt_params *p2 = mk(5), *p3 = mk(6);
    volt_tensor *w2, *w3;
    volt_params_unit(p2, "fc"); volt_param_new(p2, "fc.weight", VOLT_SHAPE(300, 200), VOLT_INIT_KAIMING, &w2);
    volt_params_unit(p3, "fc"); volt_param_new(p3, "fc.weight", VOLT_SHAPE(300, 200), VOLT_INIT_KAIMING, &w3);
    volt_params_finalize(p2); volt_params_finalize(p3);
    float *w2d = values(w2), *w3d = values(w3);
    CHECK(!memcmp(wd, w2d, 60000 * 4), "same seed, same init");
    CHECK(memcmp(wd, w3d, 60000 * 4), "different seed, different init");
    free(w2d); free(w3d); free(wd); free(ed); free(bd); free(zd); free(nd);
    volt_params_destroy(p2); volt_params_destroy(p3);

    /* clipping; the "emb" unit's grads are still unborn: zeros that take no memory */
    volt_params_zero_grad(ps);
    gset(w, 0, 3); gset(b, 0, 4);   /* norm 5 */
    float norm = 0;
    CHECK_OK(volt_params_clip_grad_norm(ps, 1.0f, &norm));
    CHECK_CLOSE(norm, 5.0, 1e-6, 0);
    CHECK(e->grad == NULL, "clipping leaves unborn grads unborn");
    CHECK(volt_unit_grad(u1) && e->grad, "volt_unit_grad makes them");
    CHECK_CLOSE(gget(w, 0), 3.0 / 5.0, 1e-5, 0);
    CHECK_CLOSE(gget(b, 0), 4.0 / 5.0, 1e-5, 0);
    CHECK_OK(volt_params_clip_grad_norm(ps, 10.0f, &norm));   /* under the limit: unchanged */
    CHECK_CLOSE(gget(w, 0), 3.0 / 5.0, 1e-5, 0);
    CHECK(volt_params_clip_grad_norm(ps, 0.f, NULL) == VOLT_ERR_INVALID_ARG, "max_norm 0 rejected");
    gset(w, 1, -7); gset(e, 5, 0.25f);
    CHECK_OK(volt_params_clip_grad_value(ps, 0.5f));
    CHECK(gget(w, 1) == -0.5f && gget(e, 5) == 0.25f && gget(b, 0) == 0.5f, "clip by value");
    CHECK(gget(w, 0) == 0.5f, "0.6 clipped to 0.5");
    CHECK_CLOSE(volt_params_grad_sqnorm(ps), 0.25 + 0.25 + 0.25 + 0.0625, 1e-6, 0);

    /* freezing */
    volt_param_set_requires_grad(e, false);
    CHECK(!(e->flags & VOLT_TENSOR_REQUIRES_GRAD), "frozen");
    volt_param_set_requires_grad(e, true);
    CHECK(e->flags & VOLT_TENSOR_REQUIRES_GRAD, "unfrozen");
    volt_params_destroy(ps);
}

/* ---- the backend's parameter math against plain host references ------------------------- */
static uint32_t rng_state = 12345u;
static float frand(void) {   /* [-2, 2) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) * (1.0 / 16777216.0)) * 4.f - 2.f;
}
static void *dev_from(volt_device *d, const void *h, size_t bytes) {
    void *p = volt__dev_alloc(d, bytes);
    if (p) volt__dev_h2d(d, p, h, bytes);
    return p;
}
static double ref_sqnorm(const float *x, int64_t n) {   /* four sequential lanes */
    double l[4] = { 0, 0, 0, 0 };
    int64_t k = 0;
    for (; k + 4 <= n; k += 4)
        for (int j = 0; j < 4; j++) l[j] += (double)x[k + j] * x[k + j];
    for (; k < n; k++) l[0] += (double)x[k] * x[k];
    return (l[0] + l[1]) + (l[2] + l[3]);
}
static uint16_t ref_bf16(float f) {   /* round to nearest even (finite inputs) */
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

static void test_param_math(void) {
    volt_device *d = NULL;
    char err[256];
    CHECK_OK(volt__device_get(NULL, 0, &d, err, sizeof err));
    const volt_param_math *pm = d->be->pm;
    CHECK(pm && pm->scale && pm->sqnorm_acc && pm->update && pm->convert, "%s has parameter math", d->be->name);
    /* the parameter math is a required part of a backend's table */
    volt_backend nopm = *d->be;
    nopm.name = "test-no-pm";
    nopm.pm = NULL;
    CHECK(volt__backend_register(&nopm, err, sizeof err) == VOLT_ERR_INVALID_ARG && strstr(err, "parameter math"),
          "a backend without parameter math is refused: %s", err);
    volt_param_math half = *pm;
    half.update = NULL;
    nopm.name = "test-half-pm";
    nopm.pm = &half;
    CHECK(volt__backend_register(&nopm, err, sizeof err) == VOLT_ERR_INVALID_ARG, "a backend without pm->update is refused");
    enum { N = 100003 };   /* past the parallel thresholds, not a multiple of 4 */
    float *h = malloc(sizeof(float) * N), *r = malloc(sizeof(float) * N), *o = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) h[i] = frand();
    float *x = dev_from(d, h, sizeof(float) * N);

    /* scale */
    pm->scale(d, x, N, 0.37f);
    volt__dev_d2h(d, o, x, sizeof(float) * N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += o[i] != h[i] * 0.37f;
    CHECK(!bad, "scale: %d elements differ from x * coef", bad);

    /* squared norm: fixed order, the same bits for 1 and 2 threads, accumulates; twice:
     * plain data, and lanes of very different magnitudes (where the order of the lane
     * sums shows in the bits) */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < N; i++) r[i] = pass ? h[i] * (i % 4 == 1 ? 3e3f : i % 4 == 3 ? 1e-3f : 1.f) : h[i];
        volt__dev_h2d(d, x, r, sizeof(float) * N);
        double init = 1.5, got[2];
        double *acc = dev_from(d, &init, sizeof init);
        for (int t = 0; t < 2; t++) {
            omp_set_num_threads(t + 1);
            volt__dev_h2d(d, acc, &init, sizeof init);
            pm->sqnorm_acc(d, x, N, acc);
            volt__dev_d2h(d, &got[t], acc, sizeof got[t]);
        }
        omp_set_num_threads(2);
        const double want = 1.5 + ref_sqnorm(r, N);
        CHECK(!memcmp(&got[0], &want, sizeof want) && !memcmp(&got[1], &want, sizeof want),
              "sqnorm (data %d): %.17g (1 thread) %.17g (2 threads), reference %.17g", pass, got[0], got[1], want);
        volt__dev_free(d, acc);
    }

    /* clip by norm: the coefficient from the device norm; finite norms under the limit and
     * non-finite norms leave x as it is */
    volt__dev_h2d(d, x, h, sizeof(float) * N);
    const double sq25 = 25.0, sqinf = INFINITY, sqnan = NAN;
    double *sq = dev_from(d, &sq25, sizeof sq25);
    pm->clip_by_norm(d, x, N, sq, 1.0f);
    volt__dev_d2h(d, o, x, sizeof(float) * N);
    const float coef = (float)(1.0 / (5.0 + 1e-6));
    bad = 0;
    for (int i = 0; i < N; i++) bad += o[i] != h[i] * coef;
    CHECK(!bad, "clip_by_norm: %d elements differ from x * %g", bad, coef);
    const double sqs[3] = { sq25, sqinf, sqnan };
    const float maxes[3] = { 10.f, 1.f, 1.f };
    for (int c = 0; c < 3; c++) {
        volt__dev_h2d(d, x, h, sizeof(float) * N);
        volt__dev_h2d(d, sq, &sqs[c], sizeof sqs[c]);
        pm->clip_by_norm(d, x, N, sq, maxes[c]);
        volt__dev_d2h(d, o, x, sizeof(float) * N);
        CHECK(!memcmp(o, h, sizeof(float) * N), "clip_by_norm case %d (norm^2 %g, max %g) leaves x", c, sqs[c], maxes[c]);
    }

    /* clip by value */
    volt__dev_h2d(d, x, h, sizeof(float) * N);
    pm->clip_value(d, x, N, 0.75f);
    volt__dev_d2h(d, o, x, sizeof(float) * N);
    bad = 0;
    for (int i = 0; i < N; i++) bad += o[i] != (h[i] > 0.75f ? 0.75f : h[i] < -0.75f ? -0.75f : h[i]);
    CHECK(!bad, "clip_value: %d elements differ", bad);

    /* unscale + found_inf: finite grads leave the flag at 0; one inf or one NaN sets it;
     * a later clean call does not clear it */
    volt_scaler_state hs = { .scale = 65536.f, .found_inf = 0.f, .growth_tracker = 3 }, ho;
    volt_scaler_state *st = dev_from(d, &hs, sizeof hs);
    volt__dev_h2d(d, x, h, sizeof(float) * N);
    pm->unscale(d, x, N, st);
    volt__dev_d2h(d, o, x, sizeof(float) * N);
    volt__dev_d2h(d, &ho, st, sizeof ho);
    const float inv = (float)(1.0 / 65536.0);
    bad = 0;
    for (int i = 0; i < N; i++) bad += o[i] != h[i] * inv;
    CHECK(!bad && ho.found_inf == 0.f && ho.scale == 65536.f && ho.growth_tracker == 3,
          "unscale finite: %d differ, found_inf %g", bad, ho.found_inf);
    const float specials[2] = { INFINITY, NAN };
    for (int c = 0; c < 2; c++) {
        volt__dev_h2d(d, st, &hs, sizeof hs);
        memcpy(r, h, sizeof(float) * N);
        r[N / 2 + c] = specials[c];
        volt__dev_h2d(d, x, r, sizeof(float) * N);
        pm->unscale(d, x, N, st);
        volt__dev_d2h(d, &ho, st, sizeof ho);
        CHECK(ho.found_inf == 1.f, "unscale: found_inf %g with one %s", ho.found_inf, c ? "NaN" : "inf");
        volt__dev_h2d(d, x, h, sizeof(float) * N);
        pm->unscale(d, x, N, st);   /* clean grads: the flag stays set */
        volt__dev_d2h(d, &ho, st, sizeof ho);
        CHECK(ho.found_inf == 1.f, "unscale does not clear found_inf");
    }

    /* scaler update (torch's _amp_update_scale_) */
    hs = (volt_scaler_state){ .scale = 1024.f, .found_inf = 1.f, .growth_tracker = 5 };
    volt__dev_h2d(d, st, &hs, sizeof hs);
    pm->scaler_update(d, st, 2.f, 0.5f, 2);
    volt__dev_d2h(d, &ho, st, sizeof ho);
    /* found_inf is kept: the step's decision, which a captured step's host reads after the launch */
    CHECK(ho.scale == 512.f && ho.growth_tracker == 0 && ho.found_inf == 1.f, "backoff: %g %lld %g", ho.scale,
          (long long)ho.growth_tracker, ho.found_inf);
    const float clear = 0.f;   /* the next boundary's unscale starts from a cleared flag */
    volt__dev_h2d(d, &st->found_inf, &clear, sizeof clear);
    pm->scaler_update(d, st, 2.f, 0.5f, 2);
    volt__dev_d2h(d, &ho, st, sizeof ho);
    CHECK(ho.scale == 512.f && ho.growth_tracker == 1, "one good step: %g %lld", ho.scale, (long long)ho.growth_tracker);
    pm->scaler_update(d, st, 2.f, 0.5f, 2);
    volt__dev_d2h(d, &ho, st, sizeof ho);
    CHECK(ho.scale == 1024.f && ho.growth_tracker == 0, "growth: %g %lld", ho.scale, (long long)ho.growth_tracker);
    hs = (volt_scaler_state){ .scale = 3e38f, .found_inf = 0.f, .growth_tracker = 1 };
    volt__dev_h2d(d, st, &hs, sizeof hs);
    pm->scaler_update(d, st, 2.f, 0.5f, 2);
    volt__dev_d2h(d, &ho, st, sizeof ho);
    CHECK(ho.scale == 3e38f && ho.growth_tracker == 0, "growth kept finite: %g", ho.scale);

    /* convert: f32 -> bf16 (round to nearest even), bf16 -> f32 (exact), f32 -> f16 and a
     * same-dtype copy */
    uint16_t *hb = malloc(2 * N), *ob = malloc(2 * N);
    for (int i = 0; i < N; i++) hb[i] = ref_bf16(h[i]);
    volt__dev_h2d(d, x, h, sizeof(float) * N);
    uint16_t *b16 = volt__dev_alloc(d, 2 * N);
    float *x2 = volt__dev_alloc(d, sizeof(float) * N);
    pm->convert(d, b16, VOLT_BF16, x, VOLT_F32, N);
    volt__dev_d2h(d, ob, b16, 2 * N);
    CHECK(!memcmp(ob, hb, 2 * N), "convert f32 -> bf16 rounds to nearest even");
    pm->convert(d, x2, VOLT_F32, b16, VOLT_BF16, N);
    volt__dev_d2h(d, o, x2, sizeof(float) * N);
    bad = 0;
    for (int i = 0; i < N; i++) {
        uint32_t w = (uint32_t)hb[i] << 16;
        float f;
        memcpy(&f, &w, 4);
        bad += o[i] != f;
    }
    CHECK(!bad, "convert bf16 -> f32: %d differ", bad);
    pm->convert(d, b16, VOLT_F16, x, VOLT_F32, N);
    volt__dev_d2h(d, ob, b16, 2 * N);
    volt_convert(hb, VOLT_F16, h, VOLT_F32, N);
    bad = 0;
    for (int i = 0; i < N; i++) {   /* |x| < 2: f16 keeps 11 significant bits */
        float back;
        volt_convert(&back, VOLT_F32, &ob[i], VOLT_F16, 1);
        bad += ob[i] != hb[i] || fabsf(back - h[i]) > 1.0f / 1024.f;
    }
    CHECK(!bad, "convert f32 -> f16: %d differ", bad);
    pm->convert(d, x2, VOLT_F32, x, VOLT_F32, N);
    volt__dev_d2h(d, o, x2, sizeof(float) * N);
    CHECK(!memcmp(o, h, sizeof(float) * N), "convert f32 -> f32 copies");

    volt__dev_free(d, x); volt__dev_free(d, x2); volt__dev_free(d, b16);
    volt__dev_free(d, sq); volt__dev_free(d, st);
    free(h); free(r); free(o); free(hb); free(ob);
}

/* volt_params_clear_grad: nothing written at the call; the next backward stores into the
 * grads it reaches (old values gone, not added to), the end of that backward writes zeros
 * for the parameters it did not reach, a second backward adds; volt_unit_grad and the norm
 * read zeros before any backward; volt_params_zero_grad after a clear writes zeros and the
 * next backward adds to them. The grads are read straight from their buffers (gget): what
 * is checked is what was written. */
static void fill_grads(volt_tensor **ts, int n, float v) {
    for (int i = 0; i < n; i++)
        for (int64_t k = 0; k < volt_tensor_numel(ts[i]); k++) gset(ts[i], k, v);
}

static void linear_backward(volt_step *s, volt_tensor *w, volt_tensor *b) {
    static const float x[8] = { 1, -2, 0.5f, 3, -1, 0.25f, 2, -0.5f }, g[6] = { 1, 2, -1, 0.5f, -3, 1 };
    volt_step_begin(s, true, 0);
    volt_tensor *y = volt_linear(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 4), (void *)x), w, b);
    CHECK(y && volt_step_backward_grad(s, y, g) == VOLT_OK, "backward: %s", volt_step_errmsg(s));
    volt_step_end(s);
}

static void test_clear_grad(void) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    volt_params *ps;
    volt_tensor *w, *b, *e;
    CHECK_OK(volt_params_create(&pc, &ps));
    volt_params_unit(ps, "fc");
    volt_param_new(ps, "fc.weight", VOLT_SHAPE(3, 4), VOLT_INIT_KAIMING, &w);
    volt_param_new(ps, "fc.bias", VOLT_SHAPE(3), VOLT_INIT_ZEROS, &b);
    volt_params_unit(ps, "unused");
    volt_param_new(ps, "unused.e", VOLT_SHAPE(5), VOLT_INIT_ZEROS, &e);
    CHECK_OK(volt_params_finalize(ps));
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = ps;
    volt_step *s;
    CHECK_OK(volt_step_create(&sc, &s));
    volt_tensor *all[3] = { w, b, e };
    float g1[15];
    linear_backward(s, w, b);   /* from the zeros of finalize: the reference grads */
    for (int k = 0; k < 12; k++) g1[k] = gget(w, k);
    for (int k = 0; k < 3; k++) g1[12 + k] = gget(b, k);
    CHECK(g1[0] != 0.f && g1[12] != 0.f, "reference grads are not zero");
    CHECK(e->grad == NULL, "a unit the backward did not reach has no grads yet");
    float *ge = volt_unit_grad(volt_params_unit_at(ps, 1));
    CHECK(ge && ge == e->grad, "volt_unit_grad makes them");

    fill_grads(all, 3, 7.f);
    volt_params_clear_grad(ps);
    CHECK(gget(w, 0) == 7.f, "clear_grad writes nothing at the call");
    linear_backward(s, w, b);
    bool same = true;
    for (int k = 0; k < 12; k++) same &= gget(w, k) == g1[k];
    for (int k = 0; k < 3; k++) same &= gget(b, k) == g1[12 + k];
    CHECK(same, "the backward after clear_grad stores its grads (w[0] %g, want %g)", gget(w, 0), g1[0]);
    CHECK(gget(e, 0) == 0.f && gget(e, 4) == 0.f, "a parameter the backward did not reach reads 0 after it (%g)",
          gget(e, 0));
    linear_backward(s, w, b);   /* no clear: accumulate */
    CHECK(gget(w, 3) == 2.f * g1[3] && gget(b, 1) == 2.f * g1[13], "a second backward adds (%g vs %g)", gget(w, 3),
          2.f * g1[3]);

    fill_grads(all, 3, 7.f);
    volt_params_clear_grad(ps);
    CHECK(volt_params_grad_sqnorm(ps) == 0.0, "cleared grads have norm 0");
    CHECK(gget(w, 5) == 0.f && gget(e, 2) == 0.f, "read before a backward: zeros written");

    fill_grads(all, 3, 7.f);
    volt_params_clear_grad(ps);
    volt_unit *u = volt_params_unit_at(ps, 0);
    float *gp = volt_unit_grad(u);
    float h0 = -1.f;
    volt__dev_d2h(w->device, &h0, gp, sizeof h0);
    CHECK(h0 == 0.f && gget(b, 2) == 0.f, "volt_unit_grad after clear_grad: zeros (%g)", h0);
    CHECK(gget(e, 1) == 7.f, "only the unit read is written");

    fill_grads(all, 3, 7.f);
    volt_params_clear_grad(ps);
    volt_params_zero_grad(ps);   /* eager after a clear: zeros now, the next backward adds */
    CHECK(gget(w, 0) == 0.f && gget(e, 0) == 0.f, "zero_grad writes zeros");
    linear_backward(s, w, b);
    linear_backward(s, w, b);
    CHECK(gget(w, 7) == 2.f * g1[7], "after zero_grad two backwards add (%g vs %g)", gget(w, 7), 2.f * g1[7]);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

/* Large parameters are initialised by several threads (core/params.c): each value depends on
 * the seed, the parameter and its index only, so one thread and two give the same bits. */
static void init_with(int threads, float **wd, float **ud) {
    omp_set_num_threads(threads);
    volt_params *ps = mk(11);
    volt_tensor *w, *u;
    CHECK_OK(volt_params_unit(ps, "big"));
    CHECK_OK(volt_param_new(ps, "big.weight", VOLT_SHAPE(401, 300), VOLT_INIT_NORMAL(0.f, 0.02f), &w));
    CHECK_OK(volt_param_new(ps, "big.proj", VOLT_SHAPE(300, 299), VOLT_INIT_KAIMING, &u));
    CHECK_OK(volt_params_finalize(ps));
    *wd = values(w);
    *ud = values(u);
    volt_params_destroy(ps);
}
static void test_init_threads(void) {
    float *w1, *u1, *w2, *u2;
    init_with(1, &w1, &u1);
    init_with(2, &w2, &u2);
    CHECK(w1 && w2 && !memcmp(w1, w2, 401 * 300 * 4), "normal init: one thread and two differ");
    CHECK(u1 && u2 && !memcmp(u1, u2, 300 * 299 * 4), "kaiming init: one thread and two differ");
    CHECK(w1 && u1 && w1[120299] != 0.f && u1[89699] != 0.f && w1[0] != w1[1], "init fills to the last element");
    free(w1); free(u1); free(w2); free(u2);
    omp_set_num_threads(2);
}

int main(void) {
    test_layout_and_init();
    test_init_threads();
    test_param_math();
    test_clear_grad();
    return vtest_finish();
}
