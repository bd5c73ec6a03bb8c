/* Gradient clipping in Lightning's order, and the module's configure_gradient_clipping (module
 * table version 6) with volt_trainer_clip_gradients:
 *   - on_before_optimizer_step sees the grads before the clip (Lightning 2 calls the hooks, then
 *     clips), under 16-mixed already unscaled;
 *   - configure_gradient_clipping gets the config's gradient_clip_val / _algorithm and replaces
 *     the trainer's clip: clipping there with 0.01 gives bit for bit the weights of a run with
 *     gradient_clip_val = 0.01, and clipping nothing those of a run without clipping, whatever
 *     the config says;
 *   - the hook passing its arguments on clips as the config alone; a clip_gradients call that
 *     disagrees with the config's clip is refused, as Lightning's "use only one of them";
 *   - volt_trainer_clip_gradients outside the hook, with a bad algorithm or value: errors named;
 *     a failing hook fails fit naming it. (compile's refusal: test_compile.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vtest.h"
#include "volt/volt.h"
#include "volt/trainer.h"

typedef enum { HOOK_NONE, HOOK_CLIP, HOOK_SKIP, HOOK_TWICE, HOOK_BAD_ALGO, HOOK_PASS, HOOK_PASS_NULL, HOOK_OTHER_VAL,
               HOOK_OTHER_ALGO } hook_mode;

typedef struct lin {
    volt_tensor *w, *b;        /* first: vtest_lin4's */
    hook_mode mode;
    int calls;                 /* configure_gradient_clipping calls */
    float got_val;             /* its arguments, the last call's */
    char got_algo[16];
    double pre_norm;           /* the grad norm on_before_optimizer_step saw (the last boundary) */
    double hook_norm;          /* the grad norm configure_gradient_clipping saw */
} lin;

static double grad_norm(volt_trainer *t) { return sqrt(volt_params_grad_sqnorm(volt_trainer_params(t))); }

static volt_status lin_opt(void *self, volt_optim_setup *o) {
    o->optimizer.kind = VOLT_OPTIM_SGD;
    o->optimizer.lr = 0.1f;
    return VOLT_OK;
}
static volt_status lin_before_step(void *self, volt_trainer *t) {
    ((lin *)self)->pre_norm = grad_norm(t);
    return VOLT_OK;
}
static volt_status lin_clip(void *self, volt_trainer *t, float val, const char *algo) {
    lin *m = self;
    m->calls++;
    m->got_val = val;
    snprintf(m->got_algo, sizeof m->got_algo, "%s", algo ? algo : "(null)");
    m->hook_norm = grad_norm(t);
    switch (m->mode) {
    case HOOK_CLIP: return volt_trainer_clip_gradients(t, 0.01f, "norm");
    case HOOK_TWICE:   /* the second clip sees what the first left: by value 0.004, then by norm 0.005 */
        VOLT_TRY(volt_trainer_clip_gradients(t, 0.004f, "value"));
        return volt_trainer_clip_gradients(t, 0.005f, NULL);
    case HOOK_BAD_ALGO: return volt_trainer_clip_gradients(t, 0.01f, "l2");
    case HOOK_PASS: return volt_trainer_clip_gradients(t, val, algo);        /* Lightning's default implementation */
    case HOOK_PASS_NULL: return volt_trainer_clip_gradients(t, val, NULL);   /* NULL: the config's algorithm */
    case HOOK_OTHER_VAL: return volt_trainer_clip_gradients(t, 2 * val, algo);
    case HOOK_OTHER_ALGO: return volt_trainer_clip_gradients(t, val, "norm");
    default: return VOLT_OK;
    }
}

static const volt_module_ops plain_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = vtest_lin4_setup, .configure_optimizers = lin_opt,
    .training_step = vtest_lin4_train, .on_before_optimizer_step = lin_before_step,
};
static const volt_module_ops hook_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "lin", .setup = vtest_lin4_setup, .configure_optimizers = lin_opt,
    .training_step = vtest_lin4_train, .on_before_optimizer_step = lin_before_step, .configure_gradient_clipping = lin_clip,
};

/* One epoch of 6 steps; the weights after it in w[5]. */
static volt_status run(volt_dataset *ds, const volt_module_ops *ops, lin *m, float clip, const char *algo,
                       const char *precision, float w[5], char *err, size_t errlen) {
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    c.gradient_clip_val = clip;
    c.gradient_clip_algorithm = algo;
    c.precision = precision;
    c.seed = 5;
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    volt_loader *l = vtest_loader(ds, 4, false);
    volt_status st = volt_trainer_fit(t, ops, m, l, NULL, NULL);
    if (err) snprintf(err, errlen, "%s", volt_trainer_errmsg(t));
    if (st >= 0) {
        CHECK_OK(volt_tensor_to_host(m->w, w));
        CHECK_OK(volt_tensor_to_host(m->b, w + 4));
    }
    volt_loader_destroy(l);
    volt_trainer_destroy(t);
    return st;
}

int main(void) {
    vtest_check_accelerator();
    volt_dataset *ds = vtest_rows4(24);
    float wa[5], wb[5], wc[5], wd[5], we[5];
    /* A: the config clips by norm 0.01; on_before_optimizer_step saw the unclipped grads */
    lin a = { .mode = HOOK_NONE };
    CHECK_OK(run(ds, &plain_ops, &a, 0.01f, "norm", NULL, wa, NULL, 0));
    CHECK(a.pre_norm > 0.02, "on_before_optimizer_step saw the grads before the clip: norm %g (clip 0.01)", a.pre_norm);
    /* D: no clipping at all */
    lin d = { .mode = HOOK_NONE };
    CHECK_OK(run(ds, &plain_ops, &d, 0.f, "norm", NULL, wd, NULL, 0));
    CHECK(memcmp(wa, wd, sizeof wa) != 0, "clipping changes the weights (the test bites)");
    /* B: the config clips nothing, the hook clips by norm 0.01: A's weights, bit for bit */
    lin b = { .mode = HOOK_CLIP };
    CHECK_OK(run(ds, &hook_ops, &b, 0.f, "norm", NULL, wb, NULL, 0));
    CHECK(b.calls == 6 && b.got_val == 0.f && !strcmp(b.got_algo, "norm"), "hook: %d calls with (%g, %s)", b.calls,
          (double)b.got_val, b.got_algo);
    CHECK(!memcmp(wa, wb, sizeof wa), "the hook's clip is the config's: %.9g vs %.9g", (double)wb[0], (double)wa[0]);
    CHECK(b.hook_norm == b.pre_norm, "the hook saw the grads on_before_optimizer_step saw (%g, %g)", b.hook_norm, b.pre_norm);
    /* C: the config clips by value, the hook clips nothing: D's weights */
    lin cc = { .mode = HOOK_SKIP };
    CHECK_OK(run(ds, &hook_ops, &cc, 0.01f, "value", NULL, wc, NULL, 0));
    CHECK(cc.calls == 6 && fabsf(cc.got_val - 0.01f) == 0.f && !strcmp(cc.got_algo, "value"), "hook args (%g, %s)",
          (double)cc.got_val, cc.got_algo);
    CHECK(!memcmp(wc, wd, sizeof wc), "a hook that clips nothing replaces the config's clip");
    /* E: two clips in one hook differ from one */
    lin e = { .mode = HOOK_TWICE };
    CHECK_OK(run(ds, &hook_ops, &e, 0.f, "norm", NULL, we, NULL, 0));
    CHECK(memcmp(we, wb, sizeof we) != 0 && memcmp(we, wd, sizeof we) != 0, "two clips in the hook both act");
    /* 16-mixed: the hook and on_before_optimizer_step see unscaled grads (the loss scale is 65536) */
    lin h = { .mode = HOOK_CLIP }, h32 = { .mode = HOOK_CLIP };
    float wh[5];
    CHECK_OK(run(ds, &hook_ops, &h32, 0.f, "norm", NULL, wh, NULL, 0));
    CHECK_OK(run(ds, &hook_ops, &h, 0.f, "norm", "16-mixed", wh, NULL, 0));
    CHECK(h.hook_norm > 0 && fabs(h.hook_norm - h32.hook_norm) < 0.1 * h32.hook_norm && h.pre_norm == h.hook_norm,
          "16-mixed: unscaled grads in the hooks (norm %g, 32-true %g)", h.hook_norm, h32.hook_norm);
    /* the hook passing its arguments on clips as the config alone: by value 0.01 (NULL too) */
    float wv[5], wp[5];
    lin v = { .mode = HOOK_NONE }, p = { .mode = HOOK_PASS }, pn = { .mode = HOOK_PASS_NULL };
    CHECK_OK(run(ds, &plain_ops, &v, 0.01f, "value", NULL, wv, NULL, 0));
    CHECK(memcmp(wv, wd, sizeof wv) != 0 && memcmp(wv, wa, sizeof wv) != 0, "clipping by value 0.01 differs from by norm");
    CHECK_OK(run(ds, &hook_ops, &p, 0.01f, "value", NULL, wp, NULL, 0));
    CHECK(!memcmp(wp, wv, sizeof wp), "the hook's arguments passed on: the config's clip");
    CHECK_OK(run(ds, &hook_ops, &pn, 0.01f, "value", NULL, wp, NULL, 0));
    CHECK(!memcmp(wp, wv, sizeof wp), "NULL algorithm: the config's (by value)");
    /* errors */
    char err[1024];
    lin ov = { .mode = HOOK_OTHER_VAL }, oa = { .mode = HOOK_OTHER_ALGO };
    volt_status st = run(ds, &hook_ops, &ov, 0.01f, "value", NULL, wp, err, sizeof err);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "gradient_clip_val is 0.01 and clip_gradients was given 0.02") &&
          strstr(err, "use only one of them"), "another value than the config's: %s", err);
    st = run(ds, &hook_ops, &oa, 0.01f, "value", NULL, wp, err, sizeof err);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "gradient_clip_algorithm is \"value\" and clip_gradients was given "
          "\"norm\""), "another algorithm than the config's: %s", err);
    lin bad = { .mode = HOOK_BAD_ALGO };
    st = run(ds, &hook_ops, &bad, 0.f, "norm", NULL, wh, err, sizeof err);
    CHECK(st == VOLT_ERR_INVALID_ARG && strstr(err, "configure_gradient_clipping") && strstr(err, "\"l2\""),
          "a bad algorithm fails fit naming the hook: %s", err);
    volt_trainer_config c;
    vtest_quiet_config(&c, vtest_tmpdir());
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    st = volt_trainer_clip_gradients(t, 1.f, "norm");
    CHECK(st == VOLT_ERR_STATE && strstr(volt_trainer_errmsg(t), "only inside"), "outside the hook: %s", volt_trainer_errmsg(t));
    volt_trainer_destroy(t);
    volt_dataset_destroy(ds);
    return vtest_finish();
}
