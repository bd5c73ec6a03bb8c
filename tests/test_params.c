/* Param store: declaration, units and padding, init distributions, lookup, freezing,
 * gradient clipping, and the errors for bad declarations. */
#include "vtest.h"
#include "volt/volt.h"

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
    CHECK(volt_params_unit(ps, "fc") == VOLT_ERR_INVALID_ARG, "duplicate unit rejected");
    CHECK_OK(volt_params_finalize(ps));
    CHECK(volt_param_new(ps, "late", VOLT_SHAPE(3), VOLT_INIT_ZEROS, &bad) == VOLT_ERR_STATE, "declare after finalize");

    CHECK(volt_params_count(ps) == 5 && volt_params_unit_count(ps) == 2, "counts");
    CHECK(volt_params_numel(ps) == 300 * 200 + 7 + 64000 + 13 + 3, "numel");
    volt_unit *u0 = volt_params_unit_at(ps, 0), *u1 = volt_params_unit_at(ps, 1);
    CHECK(volt_unit_numel(u0) == 60000 + 16 && volt_param_offset(b) == 60000, "unit 0 padded layout");
    CHECK(volt_param_offset(n) == 64000 && volt_param_offset(z) == 64016 && volt_unit_numel(u1) == 64032, "unit 1 layout");
    CHECK((float *)w->data == volt_unit_data(u0) && w->grad == volt_unit_grad(u0), "param views its unit");
    CHECK(volt_params_find(ps, "emb.norm") == n && volt_params_find(ps, "nope") == NULL, "find");
    CHECK(w->unit == u0 && !strcmp(volt_unit_name(u1), "emb") && volt_unit_param(u1, 2) == z, "unit membership");

    /* init statistics */
    double bound = sqrt(6.0 / 200), mx = 0, mean = 0, var = 0;
    const float *wd = w->data;
    for (int i = 0; i < 60000; i++) { mx = fmax(mx, fabs(wd[i])); mean += wd[i]; }
    mean /= 60000;
    CHECK(mx <= bound && mx > 0.98 * bound && fabs(mean) < 0.01, "kaiming: max %g bound %g mean %g", mx, bound, mean);
    const float *ed = e->data;
    mean = 0;
    for (int i = 0; i < 64000; i++) mean += ed[i];
    mean /= 64000;
    for (int i = 0; i < 64000; i++) var += (ed[i] - mean) * (ed[i] - mean);
    var /= 64000;
    CHECK(fabs(mean) < 0.001 && fabs(sqrt(var) - 0.02) < 0.001, "normal: mean %g std %g", mean, sqrt(var));
    CHECK(((float *)b->data)[6] == 1.f && ((float *)z->data)[2] == 0.f, "const inits");
    double xb = sqrt(6.0 / (13 + 13));
    for (int i = 0; i < 13; i++) CHECK(fabs(((float *)n->data)[i]) <= xb, "xavier bound");

    /* same seed => same init; different seed => different */
    volt_params *p2 = mk(5), *p3 = mk(6);
    volt_tensor *w2, *w3;
    volt_params_unit(p2, "fc"); volt_param_new(p2, "fc.weight", VOLT_SHAPE(300, 200), VOLT_INIT_KAIMING, &w2);
    volt_params_unit(p3, "fc"); volt_param_new(p3, "fc.weight", VOLT_SHAPE(300, 200), VOLT_INIT_KAIMING, &w3);
    volt_params_finalize(p2); volt_params_finalize(p3);
    CHECK(!memcmp(w->data, w2->data, 60000 * 4), "same seed, same init");
    CHECK(memcmp(w->data, w3->data, 60000 * 4), "different seed, different init");
    volt_params_destroy(p2); volt_params_destroy(p3);

    /* clipping */
    volt_params_zero_grad(ps);
    w->grad[0] = 3; b->grad[0] = 4;   /* norm 5 */
    float norm = 0;
    CHECK_OK(volt_params_clip_grad_norm(ps, 1.0f, &norm));
    CHECK_CLOSE(norm, 5.0, 1e-6, 0);
    CHECK_CLOSE(w->grad[0], 3.0 / 5.0, 1e-5, 0);
    CHECK_CLOSE(b->grad[0], 4.0 / 5.0, 1e-5, 0);
    CHECK_OK(volt_params_clip_grad_norm(ps, 10.0f, &norm));   /* under the limit: unchanged */
    CHECK_CLOSE(w->grad[0], 3.0 / 5.0, 1e-5, 0);
    CHECK(volt_params_clip_grad_norm(ps, 0.f, NULL) == VOLT_ERR_INVALID_ARG, "max_norm 0 rejected");
    w->grad[1] = -7; e->grad[5] = 0.25f;
    CHECK_OK(volt_params_clip_grad_value(ps, 0.5f));
    CHECK(w->grad[1] == -0.5f && e->grad[5] == 0.25f && b->grad[0] == 0.5f, "clip by value");
    CHECK(w->grad[0] == 0.5f, "0.6 clipped to 0.5");
    CHECK_CLOSE(volt_params_grad_sqnorm(ps), 0.25 + 0.25 + 0.25 + 0.0625, 1e-6, 0);

    /* freezing */
    volt_param_set_requires_grad(e, false);
    CHECK(!(e->flags & VOLT_TENSOR_REQUIRES_GRAD), "frozen");
    volt_param_set_requires_grad(e, true);
    CHECK(e->flags & VOLT_TENSOR_REQUIRES_GRAD, "unfrozen");
    volt_params_destroy(ps);
}

int main(void) {
    test_layout_and_init();
    return vtest_finish();
}
