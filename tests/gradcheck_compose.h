/* gradcheck_compose.h — the f32 finite-difference check for *compositions* of ops (the nn
 * layers of tests/test_nn.c): it checks how a layer wires ops together, at probed elements,
 * with f32 central differences and loose tolerances. Every op itself is checked element by
 * element against a double-precision reference in tests/test_ops_*.c (tests/gradcheck.h),
 * and the layers' values against PyTorch (the nn fixture), so a wrong derivative cannot
 * hide here. Use gradcheck.h for ops. */
#ifndef GRADCHECK_COMPOSE_H
#define GRADCHECK_COMPOSE_H
#include "gradcheck.h"
#include "vtest.h"
#include "volt/volt.h"

#define GC_MAX_PROBES 48

/* f32 central differences at up to GC_MAX_PROBES elements per input (the inputs, the
 * random generator and gc_loss are gradcheck.h's). */
static double gcc_rtol = 1e-2, gcc_atol = 1e-3, gcc_eps = 3e-3;

static int gradcheck_compose(const char *name, gc_fn f, void *ctx, int n, const gc_input *ins) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 20;
    cfg.seed = 1234;
    volt_step *s;
    if (volt_step_create(&cfg, &s) != VOLT_OK) { CHECK(0, "%s: step_create", name); return 1; }
    void *bufs[8];
    volt_tensor *in_t[8], *out;
    for (int i = 0; i < n; i++) {
        int64_t ne = volt_shape_numel(ins[i].shape);
        size_t bytes = (size_t)(ne ? ne : 1) * volt_dtype_size(ins[i].dt);
        bufs[i] = malloc(bytes);
        if (ins[i].data) memcpy(bufs[i], ins[i].data, bytes);
        else for (int64_t k = 0; k < ne; k++) {
            if (ins[i].dt == VOLT_F32) ((float *)bufs[i])[k] = (float)(gc_normal() * (ins[i].scale ? ins[i].scale : 1));
            else if (ins[i].dt == VOLT_I64) ((int64_t *)bufs[i])[k] = (int64_t)(gc_uniform() * (double)ins[i].int_hi);
            else if (ins[i].dt == VOLT_I32) ((int32_t *)bufs[i])[k] = (int32_t)(gc_uniform() * (double)ins[i].int_hi);
            else if (ins[i].dt == VOLT_U8) ((uint8_t *)bufs[i])[k] = (uint8_t)(gc_uniform() * (double)ins[i].int_hi);
        }
    }
    int64_t on = 0;
    gc_loss(s, f, ctx, n, ins, bufs, NULL, &on, &out, in_t);
    int bad = 0;
    if (!out) {
        CHECK(0, "%s: forward failed: %s", name, volt_step_errmsg(s));
        bad = 1;
        goto done;
    }
    float *R = malloc(sizeof(float) * (size_t)(on ? on : 1));
    for (int64_t k = 0; k < on; k++) R[k] = (float)gc_normal();
    /* analytic */
    volt_status st = volt_step_backward_grad(s, out, R);
    CHECK(st == VOLT_OK, "%s: backward: %s", name, volt_step_errmsg(s));
    float *ana[8] = { 0 };
    for (int i = 0; i < n; i++) {
        if (!ins[i].diff) continue;
        int64_t ne = volt_shape_numel(ins[i].shape);
        ana[i] = calloc((size_t)(ne ? ne : 1), sizeof(float));
        if (in_t[i]->grad) memcpy(ana[i], in_t[i]->grad, sizeof(float) * (size_t)ne);
    }
    for (int i = 0; i < n; i++) {
        if (!ins[i].diff) continue;
        int64_t ne = volt_shape_numel(ins[i].shape);
        int64_t stride = ne > GC_MAX_PROBES ? ne / GC_MAX_PROBES : 1;
        float *x = bufs[i];
        for (int64_t k = 0; k < ne; k += stride) {
            int64_t idx = stride > 1 ? (k + (int64_t)(gc_uniform() * (double)stride)) % ne : k;
            float x0 = x[idx];
            x[idx] = x0 + (float)gcc_eps;
            double lp = gc_loss(s, f, ctx, n, ins, bufs, R, &on, &out, in_t);
            x[idx] = x0 - (float)gcc_eps;
            double lm = gc_loss(s, f, ctx, n, ins, bufs, R, &on, &out, in_t);
            x[idx] = x0;
            double num = (lp - lm) / (2 * gcc_eps), an = ana[i][idx];
            double tol = gcc_atol + gcc_rtol * fmax(fabs(num), fabs(an));
            if (!(fabs(num - an) <= tol)) {
                if (bad < 5)
                    fprintf(stderr, "FAIL gradcheck %s: input %d elem %lld: analytic %.6g numeric %.6g\n",
                            name, i, (long long)idx, an, num);
                bad++;
            }
        }
        free(ana[i]);
    }
    free(R);
    CHECK(bad == 0, "gradcheck %s: %d mismatches", name, bad);
done:
    volt_step_end(s);
    volt_step_destroy(s);
    for (int i = 0; i < n; i++) free(bufs[i]);
    return bad;
}
#endif
