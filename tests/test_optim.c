/* Optimizers and LR schedulers: SGD (plain, momentum, dampening, nesterov, L2), Adam, AdamW
 * against a double-precision reference of the torch.optim formulas; frozen params; padding;
 * set_range (ZeRO slices) against the full step; state access and resume; determinism
 * across thread counts; schedulers against the HF / torch formulas; invalid configs;
 * parameter groups (bitwise against one optimizer per group, with set_range, under a
 * scheduler, bad patterns). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "volt/optim.h"
#include "volt/dtype.h"
#include "core/device.h"
#include "core/internal.h"
#include "vtest.h"

/* Unit buffers and optimizer states are device memory: the tests read them through copies
 * (a ring of host buffers, freed at exit) and write them with copies. */
static void *ring[16];
static int ring_i;
static volt_device *udev(const volt_unit *u) { return volt_unit_param(u, 0)->device; }
static void *host_copy(volt_device *d, const void *src, size_t bytes) {
    if (!src) return NULL;
    const int i = ring_i++ % 16;
    free(ring[i]);
    ring[i] = malloc(bytes ? bytes : 1);
    volt__dev_d2h(d, ring[i], src, bytes);
    return ring[i];
}
static const float *H_DATA(const volt_unit *u) {
    return host_copy(udev(u), volt_unit_data(u), sizeof(float) * (size_t)volt_unit_numel(u));
}
static const float *H_STATE(volt_optimizer *opt, volt_params *ps, int ui, int k, int64_t *lo, int64_t *hi) {
    int64_t l = 0, h = 0;
    const float *d = volt_optimizer_state(opt, ui, k, &l, &h);
    if (lo) *lo = l;
    if (hi) *hi = h;
    return host_copy(udev(volt_params_unit_at(ps, ui)), d, sizeof(float) * (size_t)(h - l));
}
static void ring_free(void) { for (int i = 0; i < 16; i++) { free(ring[i]); ring[i] = NULL; } }

#define RTOL 1e-6
#define ATOL 1e-7
#define NSTEPS 3
#define TEST_PI 3.14159265358979323846

/* Units with odd sizes: enc.0 = W (7,13) + b (5); enc.1 = V (3,11) + s (scalar); and enc.2 =
 * A (2,16) + c (16) + e (5), which sit back to back (whole VOLT_PARAM_ALIGN blocks): one
 * run, one backend update per step. */
typedef struct store { volt_params *ps; volt_tensor *W, *b, *V, *s, *A, *c, *e; } store;

static void store_make(store *st, uint64_t seed) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.seed = seed;
    *st = (store){ 0 };
    CHECK_OK(volt_params_create(&pc, &st->ps));
    CHECK_OK(volt_params_unit(st->ps, "enc.0"));
    CHECK_OK(volt_param_new(st->ps, "enc.0.weight", VOLT_SHAPE(7, 13), VOLT_INIT_UNIFORM(-1.f, 1.f), &st->W));
    CHECK_OK(volt_param_new(st->ps, "enc.0.bias", VOLT_SHAPE(5), VOLT_INIT_UNIFORM(-0.5f, 0.5f), &st->b));
    CHECK_OK(volt_params_unit(st->ps, "enc.1"));
    CHECK_OK(volt_param_new(st->ps, "enc.1.weight", VOLT_SHAPE(3, 11), VOLT_INIT_NORMAL(0.f, 0.5f), &st->V));
    CHECK_OK(volt_param_new(st->ps, "enc.1.scale", VOLT_SCALAR, VOLT_INIT_CONST(0.3f), &st->s));
    CHECK_OK(volt_params_unit(st->ps, "enc.2"));
    CHECK_OK(volt_param_new(st->ps, "enc.2.weight", VOLT_SHAPE(2, 16), VOLT_INIT_UNIFORM(-1.f, 1.f), &st->A));
    CHECK_OK(volt_param_new(st->ps, "enc.2.bias", VOLT_SHAPE(16), VOLT_INIT_UNIFORM(-0.5f, 0.5f), &st->c));
    CHECK_OK(volt_param_new(st->ps, "enc.2.gain", VOLT_SHAPE(5), VOLT_INIT_CONST(1.f), &st->e));
    CHECK_OK(volt_params_finalize(st->ps));
}

/* The grad of unit float k at step t (1-based); every param gets one, frozen or not. */
static float gfun(int u, int64_t k, int t) {
    return (float)(0.5 * sin(0.37 * (double)k + 1.1 * t + 2.3 * u) + 0.1 * cos(1.7 * (double)k * t));
}

static void set_grads(volt_params *ps, int t) {
    for (int ui = 0; ui < volt_params_unit_count(ps); ui++) {
        volt_unit *u = volt_params_unit_at(ps, ui);
        float *g = calloc((size_t)volt_unit_numel(u), sizeof(float));
        for (int i = 0; i < volt_unit_param_count(u); i++) {
            const volt_tensor *p = volt_unit_param(u, i);
            int64_t off = volt_param_offset(p);
            for (int64_t k = off; k < off + volt_tensor_numel(p); k++) g[k] = gfun(ui, k, t);
        }
        volt__dev_h2d(udev(u), volt_unit_grad(u), g, sizeof(float) * (size_t)volt_unit_numel(u));
        free(g);
    }
}

/* 1 where unit float k belongs to a trainable param, 0 for frozen params and padding. */
static void trainable_mask(volt_unit *u, unsigned char *mask) {
    memset(mask, 0, (size_t)volt_unit_numel(u));
    for (int i = 0; i < volt_unit_param_count(u); i++) {
        const volt_tensor *p = volt_unit_param(u, i);
        if (!(p->flags & VOLT_TENSOR_REQUIRES_GRAD)) continue;
        int64_t off = volt_param_offset(p);
        memset(mask + off, 1, (size_t)volt_tensor_numel(p));
    }
}

/* ---- the double-precision reference (torch.optim formulas) ------------------------- */
typedef struct ref_elem { double p, b, m, v; } ref_elem;

static void ref_step(const volt_optimizer_config *c, double lr, int t, ref_elem *e, double g) {
    const double wd = c->weight_decay;
    if (c->kind == VOLT_OPTIM_SGD) {
        const double mom = c->momentum;
        g += wd * e->p;
        if (mom != 0) {
            e->b = t == 1 ? g : mom * e->b + (1.0 - (double)c->dampening) * g;
            g = c->nesterov ? g + mom * e->b : e->b;
        }
        e->p -= lr * g;
        return;
    }
    const double b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    if (c->kind == VOLT_OPTIM_ADAMW) e->p *= 1.0 - lr * wd;
    else g += wd * e->p;
    e->m = b1 * e->m + (1.0 - b1) * g;
    e->v = b2 * e->v + (1.0 - b2) * g * g;
    const double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    e->p -= lr / bc1 * e->m / (sqrt(e->v) / sqrt(bc2) + eps);
}

static const double LRS[NSTEPS] = { 1.0, 0.5, 0.25 };   /* lr multipliers per step (set_lr) */

/* Run NSTEPS on a fresh store against the reference. freeze_bias freezes enc.0.bias. */
static void run_case(const char *name, const volt_optimizer_config *cfg, bool freeze_bias) {
    store st;
    store_make(&st, 42);
    if (freeze_bias) volt_param_set_requires_grad(st.b, false);
    volt_optimizer *opt = NULL;
    CHECK_OK(volt_optimizer_create(cfg, st.ps, &opt));
    if (!opt) return;
    const int nu = volt_params_unit_count(st.ps);
    ref_elem *ref[3];
    float *init[3];
    unsigned char *mask[3];
    for (int ui = 0; ui < nu; ui++) {
        volt_unit *u = volt_params_unit_at(st.ps, ui);
        int64_t n = volt_unit_numel(u);
        ref[ui] = calloc((size_t)n, sizeof(ref_elem));
        init[ui] = malloc(sizeof(float) * (size_t)n);
        mask[ui] = malloc((size_t)n);
        memcpy(init[ui], H_DATA(u), sizeof(float) * (size_t)n);
        for (int64_t k = 0; k < n; k++) ref[ui][k].p = init[ui][k];
        trainable_mask(u, mask[ui]);
    }
    /* the launches a step should take: adjacent trainable parameters of a unit are one run
     * (enc.2's three are one) */
    CHECK(nu == 3 && volt_param_offset(st.c) == 32 && volt_param_offset(st.e) == 48, "%s: enc.2's layout", name);
    int64_t runs = 0;
    for (int ui = 0; ui < nu; ui++) {
        volt_unit *u = volt_params_unit_at(st.ps, ui);
        int64_t end = -1;
        for (int pi = 0; pi < volt_unit_param_count(u); pi++) {
            const volt_tensor *p = volt_unit_param(u, pi);
            if (!(p->flags & VOLT_TENSOR_REQUIRES_GRAD)) continue;
            if (volt_param_offset(p) != end) runs++;
            end = volt_param_offset(p) + volt_tensor_numel(p);
        }
    }
    double worst = 0;
    int bad = 0, frozen_bad = 0, state_bad = 0;
    for (int t = 1; t <= NSTEPS; t++) {
        const float lr = (float)(cfg->lr * LRS[t - 1]);
        volt_optimizer_set_lr(opt, lr);
        set_grads(st.ps, t);
        CHECK_OK(volt_optimizer_step(opt));
        for (int ui = 0; ui < nu; ui++) {
            volt_unit *u = volt_params_unit_at(st.ps, ui);
            const float *d = H_DATA(u);
            for (int64_t k = 0; k < volt_unit_numel(u); k++) {
                if (!mask[ui][k]) {      /* frozen or padding: bitwise untouched */
                    if (memcmp(&d[k], &init[ui][k], sizeof(float))) frozen_bad++;
                    continue;
                }
                ref_step(cfg, lr, t, &ref[ui][k], gfun(ui, k, t));
                double r = ref[ui][k].p, err = fabs(d[k] - r);
                if (err > ATOL + RTOL * fabs(r)) bad++;
                if (err / (fabs(r) + 1e-30) > worst && fabs(r) > 1e-3) worst = err / fabs(r);
            }
            /* states: same reference values; frozen/padding states stay 0 */
            for (int s = 0; s < volt_optimizer_state_count(opt); s++) {
                int64_t lo = -1, hi = -1;
                const float *sb = H_STATE(opt, st.ps, ui, s, &lo, &hi);
                CHECK(sb && lo == 0 && hi == volt_unit_numel(u), "%s: state %d range [%lld, %lld)",
                      name, s, (long long)lo, (long long)hi);
                if (!sb) continue;
                for (int64_t k = 0; k < hi; k++) {
                    double r = !mask[ui][k] ? 0.0
                             : cfg->kind == VOLT_OPTIM_SGD ? ref[ui][k].b : s == 0 ? ref[ui][k].m : ref[ui][k].v;
                    if (fabs(sb[k] - r) > ATOL + RTOL * fabs(r)) state_bad++;
                }
            }
        }
        CHECK(volt_optimizer_step_count(opt) == t, "%s: step count %lld", name,
              (long long)volt_optimizer_step_count(opt));
    }
    CHECK(volt__optimizer_launches(opt) == runs * NSTEPS, "%s: %lld backend updates in %d steps, expected %lld "
          "(one per run of adjacent trainable parameters)", name, (long long)volt__optimizer_launches(opt), NSTEPS,
          (long long)(runs * NSTEPS));
    CHECK(bad == 0, "%s: %d values off the double reference", name, bad);
    CHECK(frozen_bad == 0, "%s: %d frozen/padding values changed", name, frozen_bad);
    CHECK(state_bad == 0, "%s: %d state values off the reference", name, state_bad);
    printf("  %-28s max rel err vs double reference %.2e\n", name, worst);
    for (int ui = 0; ui < nu; ui++) { free(ref[ui]); free(init[ui]); free(mask[ui]); }
    volt_optimizer_destroy(opt);
    volt_params_destroy(st.ps);
}

static volt_optimizer_config sgd_cfg(float lr, float mom, float damp, bool nest, float wd) {
    volt_optimizer_config c;
    volt_optimizer_config_init(&c);
    c.kind = VOLT_OPTIM_SGD;
    c.lr = lr; c.momentum = mom; c.dampening = damp; c.nesterov = nest; c.weight_decay = wd;
    return c;
}

static volt_optimizer_config adam_cfg(volt_optim_kind kind, float lr, float wd, float b1, float b2) {
    volt_optimizer_config c;
    volt_optimizer_config_init(&c);
    c.kind = kind;
    c.lr = lr; c.weight_decay = wd; c.beta1 = b1; c.beta2 = b2;
    return c;
}

static void test_reference(void) {
    volt_optimizer_config c;
    c = sgd_cfg(0.1f, 0.f, 0.f, false, 0.f);     run_case("sgd", &c, false);
    c = sgd_cfg(0.1f, 0.f, 0.f, false, 0.05f);   run_case("sgd wd", &c, false);
    c = sgd_cfg(0.1f, 0.9f, 0.f, false, 0.f);    run_case("sgd momentum", &c, false);
    c = sgd_cfg(0.1f, 0.9f, 0.25f, false, 0.01f);run_case("sgd momentum damp wd", &c, true);
    c = sgd_cfg(0.05f, 0.8f, 0.f, true, 0.f);    run_case("sgd nesterov", &c, false);
    c = sgd_cfg(0.05f, 0.8f, 0.f, true, 0.1f);   run_case("sgd nesterov wd frozen", &c, true);
    c = adam_cfg(VOLT_OPTIM_ADAM, 1e-2f, 0.f, 0.9f, 0.999f);   run_case("adam", &c, false);
    c = adam_cfg(VOLT_OPTIM_ADAM, 1e-2f, 0.05f, 0.8f, 0.99f);  run_case("adam l2 betas", &c, true);
    c = adam_cfg(VOLT_OPTIM_ADAM, 1e-2f, 0.f, 0.3f, 0.5f);     run_case("adam beta1<0.5 (lerp)", &c, false);
    c = adam_cfg(VOLT_OPTIM_ADAMW, 1e-2f, 0.1f, 0.9f, 0.999f); run_case("adamw", &c, false);
    c = adam_cfg(VOLT_OPTIM_ADAMW, 3e-2f, 0.01f, 0.9f, 0.95f); run_case("adamw frozen", &c, true);
}

/* ---- set_range: a slice updates exactly like the full step inside it ----------------- */
static void test_range_kind(const volt_optimizer_config *cfg, const char *name) {
    store a, b;
    store_make(&a, 7);
    store_make(&b, 7);
    volt_optimizer *oa = NULL, *ob = NULL;
    CHECK_OK(volt_optimizer_create(cfg, a.ps, &oa));
    CHECK_OK(volt_optimizer_create(cfg, b.ps, &ob));
    if (!oa || !ob) return;
    volt_unit *u0 = volt_params_unit_at(b.ps, 0), *u1 = volt_params_unit_at(b.ps, 1);
    const int64_t n0 = volt_unit_numel(u0), n1 = volt_unit_numel(u1);
    /* unit 0: [20, 99) cuts W, spans its padding and half the bias; unit 1: nothing */
    const int64_t lo = 20, hi = 99;
    CHECK_OK(volt_optimizer_set_range(ob, 0, lo, hi));
    CHECK_OK(volt_optimizer_set_range(ob, 1, 0, 0));
    float *init0 = malloc(sizeof(float) * (size_t)n0), *init1 = malloc(sizeof(float) * (size_t)n1);
    memcpy(init0, H_DATA(u0), sizeof(float) * (size_t)n0);
    memcpy(init1, H_DATA(u1), sizeof(float) * (size_t)n1);
    for (int t = 1; t <= NSTEPS; t++) {
        set_grads(a.ps, t);
        set_grads(b.ps, t);
        CHECK_OK(volt_optimizer_step(oa));
        CHECK_OK(volt_optimizer_step(ob));
    }
    const float *da = H_DATA(volt_params_unit_at(a.ps, 0)), *db = H_DATA(u0);
    int in_bad = 0, out_bad = 0;
    for (int64_t k = 0; k < n0; k++) {
        if (k >= lo && k < hi) in_bad += memcmp(&da[k], &db[k], sizeof(float)) != 0;
        else out_bad += memcmp(&init0[k], &db[k], sizeof(float)) != 0;
    }
    CHECK(in_bad == 0, "%s: %d floats in the range differ from the full step", name, in_bad);
    CHECK(out_bad == 0, "%s: %d floats outside the range changed", name, out_bad);
    CHECK(memcmp(init1, H_DATA(u1), sizeof(float) * (size_t)n1) == 0, "%s: empty-range unit changed", name);
    for (int s = 0; s < volt_optimizer_state_count(ob); s++) {
        int64_t l = -1, h = -1, la, ha;
        const float *sb = H_STATE(ob, b.ps, 0, s, &l, &h);
        const float *sa = H_STATE(oa, a.ps, 0, s, &la, &ha);
        CHECK(sb && l == lo && h == hi, "%s: state range [%lld, %lld)", name, (long long)l, (long long)h);
        if (sb && sa) CHECK(memcmp(sb, sa + lo, sizeof(float) * (size_t)(hi - lo)) == 0,
                            "%s: sliced state differs from the full state", name);
        CHECK(volt_optimizer_state(ob, 1, s, &l, &h) == NULL && l == 0 && h == 0,
              "%s: empty range has a state buffer", name);
    }
    int64_t l, h;
    CHECK_OK(volt_optimizer_range(ob, 0, &l, &h));
    CHECK(l == lo && h == hi, "range getter [%lld, %lld)", (long long)l, (long long)h);
    free(init0);
    free(init1);
    volt_optimizer_destroy(oa);
    volt_optimizer_destroy(ob);
    volt_params_destroy(a.ps);
    volt_params_destroy(b.ps);
}

static void test_range(void) {
    volt_optimizer_config c;
    c = adam_cfg(VOLT_OPTIM_ADAMW, 1e-2f, 0.1f, 0.9f, 0.999f); test_range_kind(&c, "range adamw");
    c = adam_cfg(VOLT_OPTIM_ADAM, 1e-2f, 0.1f, 0.9f, 0.999f);  test_range_kind(&c, "range adam");
    c = sgd_cfg(0.1f, 0.9f, 0.1f, false, 0.01f);               test_range_kind(&c, "range sgd momentum");
    c = sgd_cfg(0.1f, 0.f, 0.f, false, 0.01f);                 test_range_kind(&c, "range sgd");

    /* re-ranging keeps the overlap, zeroes the rest; bad ranges are rejected */
    store st;
    store_make(&st, 3);
    volt_optimizer *opt = NULL;
    c = adam_cfg(VOLT_OPTIM_ADAM, 1e-3f, 0.f, 0.9f, 0.999f);
    CHECK_OK(volt_optimizer_create(&c, st.ps, &opt));
    if (!opt) return;
    const int64_t n0 = volt_unit_numel(volt_params_unit_at(st.ps, 0));
    CHECK_OK(volt_optimizer_set_range(opt, 0, 10, 50));
    float s1h[40];
    for (int64_t i = 0; i < 40; i++) s1h[i] = (float)(10 + i);
    volt__dev_h2d(udev(volt_params_unit_at(st.ps, 0)), volt_optimizer_state(opt, 0, 1, NULL, NULL), s1h, sizeof s1h);
    CHECK_OK(volt_optimizer_set_range(opt, 0, 30, n0));
    int64_t lo, hi;
    const float *s1 = H_STATE(opt, st.ps, 0, 1, &lo, &hi);
    CHECK(lo == 30 && hi == n0, "re-range [%lld, %lld)", (long long)lo, (long long)hi);
    int kept = 1;
    for (int64_t k = 30; k < n0; k++) kept &= s1[k - 30] == (k < 50 ? (float)k : 0.f);
    CHECK(kept, "re-range keeps the overlap and zeroes the rest");
    CHECK(volt_optimizer_set_range(opt, 3, 0, 1) == VOLT_ERR_INVALID_ARG, "bad unit");
    CHECK(volt_optimizer_set_range(opt, -1, 0, 1) == VOLT_ERR_INVALID_ARG, "negative unit");
    CHECK(volt_optimizer_set_range(opt, 0, -1, 4) == VOLT_ERR_INVALID_ARG, "lo < 0");
    CHECK(volt_optimizer_set_range(opt, 0, 5, 4) == VOLT_ERR_INVALID_ARG, "hi < lo");
    CHECK(volt_optimizer_set_range(opt, 0, 0, n0 + 1) == VOLT_ERR_INVALID_ARG, "hi > numel");
    CHECK(strlen(volt_optimizer_errmsg(opt)) > 0, "errmsg set");
    CHECK(volt_optimizer_range(opt, 9, &lo, &hi) == VOLT_ERR_INVALID_ARG, "range getter bad unit");
    volt_optimizer_destroy(opt);
    volt_params_destroy(st.ps);
}

/* ---- resume: state + step count copied into a fresh optimizer continue exactly ----------- */
static void test_resume_kind(const volt_optimizer_config *cfg, const char *name) {
    store a, b;
    store_make(&a, 11);
    store_make(&b, 11);
    volt_optimizer *oa = NULL, *ob = NULL, *oc = NULL;
    CHECK_OK(volt_optimizer_create(cfg, a.ps, &oa));
    CHECK_OK(volt_optimizer_create(cfg, b.ps, &ob));
    if (!oa || !ob) return;
    for (int t = 1; t <= NSTEPS; t++) { set_grads(a.ps, t); CHECK_OK(volt_optimizer_step(oa)); }
    set_grads(b.ps, 1);
    CHECK_OK(volt_optimizer_step(ob));
    /* "checkpoint" ob, "restore" into oc (fresh) */
    CHECK_OK(volt_optimizer_create(cfg, b.ps, &oc));
    if (!oc) return;
    for (int ui = 0; ui < 2; ui++)
        for (int s = 0; s < volt_optimizer_state_count(ob); s++) {
            int64_t lo, hi;
            const float *src = volt_optimizer_state(ob, ui, s, &lo, &hi);
            float *dst = volt_optimizer_state(oc, ui, s, NULL, NULL);
            volt__dev_d2d(udev(volt_params_unit_at(b.ps, ui)), dst, src, sizeof(float) * (size_t)(hi - lo));
        }
    volt_optimizer_set_step_count(oc, volt_optimizer_step_count(ob));
    volt_optimizer_destroy(ob);
    for (int t = 2; t <= NSTEPS; t++) { set_grads(b.ps, t); CHECK_OK(volt_optimizer_step(oc)); }
    int same = 1;
    for (int ui = 0; ui < 2; ui++) {
        volt_unit *ua = volt_params_unit_at(a.ps, ui), *ub = volt_params_unit_at(b.ps, ui);
        same &= memcmp(H_DATA(ua), H_DATA(ub), sizeof(float) * (size_t)volt_unit_numel(ua)) == 0;
    }
    CHECK(same, "%s: resumed run differs from the uninterrupted one", name);
    volt_optimizer_destroy(oa);
    volt_optimizer_destroy(oc);
    volt_params_destroy(a.ps);
    volt_params_destroy(b.ps);
}

static void test_resume(void) {
    volt_optimizer_config c;
    c = sgd_cfg(0.1f, 0.9f, 0.3f, false, 0.01f);               test_resume_kind(&c, "resume sgd momentum");
    c = sgd_cfg(0.1f, 0.9f, 0.f, true, 0.01f);                 test_resume_kind(&c, "resume sgd nesterov");
    c = adam_cfg(VOLT_OPTIM_ADAMW, 1e-2f, 0.1f, 0.9f, 0.999f); test_resume_kind(&c, "resume adamw");
}

/* ---- determinism: the parallel path gives the same bits for 1 and 4 threads ----------- */
static void run_big(int threads, float *out, int64_t n) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    volt_params_config pc;
    volt_params_config_init(&pc);
    volt_params *ps = NULL;
    volt_tensor *w = NULL;
    CHECK_OK(volt_params_create(&pc, &ps));
    CHECK_OK(volt_param_new(ps, "big", VOLT_SHAPE(n), VOLT_INIT_NORMAL(0.f, 1.f), &w));
    CHECK_OK(volt_params_finalize(ps));
    volt_optimizer_config c = adam_cfg(VOLT_OPTIM_ADAMW, 1e-2f, 0.1f, 0.9f, 0.999f);
    volt_optimizer *opt = NULL;
    CHECK_OK(volt_optimizer_create(&c, ps, &opt));
    for (int t = 1; t <= NSTEPS; t++) {
        set_grads(ps, t);
        CHECK_OK(volt_optimizer_step(opt));
    }
    CHECK_OK(volt_tensor_to_host(w, out));
    volt_optimizer_destroy(opt);
    volt_params_destroy(ps);
}

static void test_determinism(void) {
    const int64_t n = 100003;
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    run_big(1, a, n);
    run_big(4, b, n);
    CHECK(memcmp(a, b, sizeof(float) * (size_t)n) == 0, "1 vs 4 threads differ");
    run_big(4, a, n);
    CHECK(memcmp(a, b, sizeof(float) * (size_t)n) == 0, "run to run differs");
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    free(a);
    free(b);
}

/* ---- API: defaults, names, validation ------------------------------------------------ */
static void test_api(void) {
    volt_optimizer_config c;
    volt_optimizer_config_init(&c);
    CHECK(c.version == VOLT_OPTIMIZER_CONFIG_VERSION && c.kind == VOLT_OPTIM_ADAM && c.lr == 1e-3f &&
          c.beta1 == 0.9f && c.beta2 == 0.999f && c.eps == 1e-8f && c.weight_decay == 0.f, "defaults");
    CHECK_OK(volt_optimizer_config_validate(&c));

    store st;
    store_make(&st, 5);
    volt_optimizer *opt = NULL;
    c.lr = 3e-4f;
    CHECK_OK(volt_optimizer_create(&c, st.ps, &opt));
    CHECK(volt_optimizer_state_count(opt) == 2, "adam states");
    CHECK(!strcmp(volt_optimizer_state_name(opt, 0), "exp_avg") &&
          !strcmp(volt_optimizer_state_name(opt, 1), "exp_avg_sq") &&
          volt_optimizer_state_name(opt, 2) == NULL, "adam state names");
    CHECK(volt_optimizer_state(opt, 0, 2, NULL, NULL) == NULL && volt_optimizer_state(opt, 3, 0, NULL, NULL) == NULL,
          "bad state index");
    CHECK(volt_optimizer_lr(opt) == 3e-4f && volt_optimizer_base_lr(opt) == 3e-4f, "lr");
    volt_optimizer_set_lr(opt, 1e-5f);
    CHECK(volt_optimizer_lr(opt) == 1e-5f && volt_optimizer_base_lr(opt) == 3e-4f &&
          volt_optimizer_get_config(opt)->lr == 3e-4f, "set_lr keeps base");
    volt_optimizer_set_step_count(opt, 17);
    CHECK(volt_optimizer_step_count(opt) == 17, "set_step_count");
    volt_optimizer_destroy(opt);

    volt_optimizer_config s = sgd_cfg(0.1f, 0.f, 0.f, false, 0.f);
    CHECK_OK(volt_optimizer_create(&s, st.ps, &opt));
    CHECK(volt_optimizer_state_count(opt) == 0 && volt_optimizer_state_name(opt, 0) == NULL, "sgd: no state");
    volt_optimizer_destroy(opt);
    s.momentum = 0.9f;
    CHECK_OK(volt_optimizer_create(&s, st.ps, &opt));
    CHECK(volt_optimizer_state_count(opt) == 1 && !strcmp(volt_optimizer_state_name(opt, 0), "momentum_buffer"),
          "sgd momentum state");
    volt_optimizer_destroy(opt);
    volt_optimizer_destroy(NULL);

    /* invalid configs */
    struct { volt_optimizer_config c; volt_status want; const char *what; } bad[16];
    int nb = 0;
#define BADCFG(expr, st) do { volt_optimizer_config_init(&bad[nb].c); { volt_optimizer_config *x = &bad[nb].c; expr; } \
                              bad[nb].want = st; bad[nb].what = #expr; nb++; } while (0)
    BADCFG(x->lr = -1e-3f, VOLT_ERR_INVALID_ARG);
    BADCFG(x->lr = NAN, VOLT_ERR_INVALID_ARG);
    BADCFG(x->weight_decay = -0.1f, VOLT_ERR_INVALID_ARG);
    BADCFG(x->beta1 = 1.f, VOLT_ERR_INVALID_ARG);
    BADCFG(x->beta2 = -0.1f, VOLT_ERR_INVALID_ARG);
    BADCFG(x->eps = -1e-8f, VOLT_ERR_INVALID_ARG);
    BADCFG(x->kind = (volt_optim_kind)99, VOLT_ERR_INVALID_ARG);
    BADCFG((x->kind = VOLT_OPTIM_SGD, x->momentum = -0.5f), VOLT_ERR_INVALID_ARG);
    BADCFG((x->kind = VOLT_OPTIM_SGD, x->nesterov = true), VOLT_ERR_INVALID_ARG);
    BADCFG((x->kind = VOLT_OPTIM_SGD, x->nesterov = true, x->momentum = 0.9f, x->dampening = 0.1f), VOLT_ERR_INVALID_ARG);
    BADCFG(x->version = 0, VOLT_ERR_VERSION);
#undef BADCFG
    for (int i = 0; i < nb; i++) {
        opt = (volt_optimizer *)&st;   /* must be reset to NULL on failure */
        volt_status r = volt_optimizer_create(&bad[i].c, st.ps, &opt);
        CHECK(r == bad[i].want && opt == NULL, "%s: got %s", bad[i].what, volt_status_str(r));
        CHECK(volt_optimizer_config_validate(&bad[i].c) == bad[i].want, "validate %s", bad[i].what);
    }
    volt_optimizer_config_init(&c);
    CHECK(volt_optimizer_create(NULL, st.ps, &opt) == VOLT_ERR_INVALID_ARG, "NULL config");
    CHECK(volt_optimizer_create(&c, NULL, &opt) == VOLT_ERR_INVALID_ARG, "NULL store");
    CHECK(volt_optimizer_create(&c, st.ps, NULL) == VOLT_ERR_INVALID_ARG, "NULL out");
    volt_params_destroy(st.ps);

    volt_params_config pc;
    volt_params_config_init(&pc);
    volt_params *ps = NULL;
    volt_tensor *w = NULL;
    CHECK_OK(volt_params_create(&pc, &ps));
    CHECK_OK(volt_param_new(ps, "w", VOLT_SHAPE(3), VOLT_INIT_ZEROS, &w));
    CHECK(volt_optimizer_create(&c, ps, &opt) == VOLT_ERR_STATE, "store not finalized");
    volt_params_destroy(ps);
}

/* ---- schedulers ---------------------------------------------------------------------- */
static volt_scheduler_config sched_cfg(volt_sched_kind kind, int64_t warmup, int64_t total) {
    volt_scheduler_config c;
    volt_scheduler_config_init(&c);
    c.kind = kind;
    c.warmup_steps = warmup;
    c.total_steps = total;
    return c;
}

#define LR_AT(cfg, base, step, want) CHECK_CLOSE(volt_scheduler_lr_at(&(cfg), (base), (step)), (want), 1e-6, 1e-12)

static void test_sched_formulas(void) {
    const double base = 1e-3;
    const float fb = 1e-3f;
    volt_scheduler_config c;
    volt_scheduler_config_init(&c);
    CHECK(c.version == VOLT_SCHEDULER_CONFIG_VERSION && c.kind == VOLT_SCHED_CONSTANT &&
          c.interval == VOLT_SCHED_EVERY_STEP && c.gamma == 0.1f, "sched defaults");
    LR_AT(c, fb, 0, base);
    LR_AT(c, fb, 12345, base);

    c = sched_cfg(VOLT_SCHED_LINEAR_WARMUP, 4, 0);
    LR_AT(c, fb, 0, 0.0);
    LR_AT(c, fb, 1, base * 0.25);
    LR_AT(c, fb, 3, base * 0.75);
    LR_AT(c, fb, 4, base);
    LR_AT(c, fb, 1000, base);
    c.warmup_steps = 0;
    LR_AT(c, fb, 0, base);

    c = sched_cfg(VOLT_SCHED_LINEAR, 10, 110);
    LR_AT(c, fb, 0, 0.0);
    LR_AT(c, fb, 5, base * 0.5);
    LR_AT(c, fb, 10, base);
    LR_AT(c, fb, 35, base * 75.0 / 100.0);
    LR_AT(c, fb, 60, base * 0.5);
    LR_AT(c, fb, 109, base * 0.01);
    LR_AT(c, fb, 110, 0.0);
    LR_AT(c, fb, 500, 0.0);
    c.warmup_steps = 0;
    LR_AT(c, fb, 0, base);
    LR_AT(c, fb, 55, base * 0.5);

    c = sched_cfg(VOLT_SCHED_COSINE, 10, 110);
    LR_AT(c, fb, 0, 0.0);
    LR_AT(c, fb, 3, base * 0.3);
    LR_AT(c, fb, 10, base);
    LR_AT(c, fb, 35, base * 0.5 * (1.0 + cos(TEST_PI * 0.25)));
    LR_AT(c, fb, 60, base * 0.5);
    LR_AT(c, fb, 85, base * 0.5 * (1.0 + cos(TEST_PI * 0.75)));
    LR_AT(c, fb, 110, 0.0);
    LR_AT(c, fb, 160, base * 0.5);          /* HF: past total the cosine comes back up */
    c.min_lr_ratio = 0.1f;
    const double r = (double)0.1f;
    LR_AT(c, fb, 5, base * 0.5);            /* warmup ignores the floor */
    LR_AT(c, fb, 10, base);
    LR_AT(c, fb, 35, base * (0.5 * (1.0 + cos(TEST_PI * 0.25)) * (1.0 - r) + r));
    LR_AT(c, fb, 60, base * (0.5 * (1.0 - r) + r));
    LR_AT(c, fb, 110, base * r);

    c = sched_cfg(VOLT_SCHED_STEP, 0, 0);
    c.step_size = 3;
    c.gamma = 0.5f;
    LR_AT(c, fb, 0, base);
    LR_AT(c, fb, 2, base);
    LR_AT(c, fb, 3, base * 0.5);
    LR_AT(c, fb, 5, base * 0.5);
    LR_AT(c, fb, 8, base * 0.25);
    LR_AT(c, fb, 9, base * 0.125);
    LR_AT(c, fb, 30, base * pow(0.5, 10));
}

static void test_sched_object(void) {
    store st;
    store_make(&st, 9);
    volt_optimizer_config oc = sgd_cfg(0.1f, 0.f, 0.f, false, 0.f);
    volt_optimizer *opt = NULL;
    CHECK_OK(volt_optimizer_create(&oc, st.ps, &opt));
    volt_scheduler_config c = sched_cfg(VOLT_SCHED_LINEAR, 2, 6);
    volt_scheduler *s = NULL;
    CHECK_OK(volt_scheduler_create(&c, opt, &s));
    if (!s) return;
    CHECK(volt_optimizer_lr(opt) == 0.f && volt_scheduler_last_step(s) == 0, "create sets lr_at(0)");
    /* optimizer step k runs with lr_at(k): check the effect on a param too */
    for (int k = 0; k < 8; k++) {
        const float lr = volt_optimizer_lr(opt);
        CHECK(lr == volt_scheduler_lr_at(&c, 0.1f, k), "step %d lr %g", k, lr);
        float before = H_DATA(st.W->unit)[0];
        set_grads(st.ps, k + 1);
        CHECK_OK(volt_optimizer_step(opt));
        CHECK(H_DATA(st.W->unit)[0] == before + (-lr) * gfun(0, 0, k + 1), "step %d applied lr", k);
        volt_scheduler_step(s);
    }
    CHECK(volt_scheduler_last_step(s) == 8, "last step");
    CHECK_OK(volt_scheduler_set_last_step(s, 3));
    CHECK(volt_scheduler_last_step(s) == 3 && volt_optimizer_lr(opt) == volt_scheduler_lr_at(&c, 0.1f, 3),
          "set_last_step resets the lr");
    CHECK(volt_scheduler_set_last_step(s, -1) == VOLT_ERR_INVALID_ARG, "negative last step");
    CHECK(volt_scheduler_get_config(s)->total_steps == 6, "get_config");
    volt_scheduler_destroy(s);
    volt_scheduler_destroy(NULL);

    /* invalid configs */
    volt_scheduler_config bad[10];
    int nb = 0;
    bad[nb++] = sched_cfg(VOLT_SCHED_LINEAR, 10, 10);
    bad[nb++] = sched_cfg(VOLT_SCHED_LINEAR, 0, 0);
    bad[nb++] = sched_cfg(VOLT_SCHED_COSINE, 20, 5);
    bad[nb++] = sched_cfg(VOLT_SCHED_COSINE, -1, 5);
    bad[nb++] = sched_cfg(VOLT_SCHED_LINEAR_WARMUP, -3, 0);
    bad[nb++] = sched_cfg(VOLT_SCHED_STEP, 0, 0);                 /* step_size 0 */
    bad[nb] = sched_cfg(VOLT_SCHED_STEP, 0, 0); bad[nb++].step_size = -2;
    bad[nb] = sched_cfg(VOLT_SCHED_COSINE, 1, 5); bad[nb++].min_lr_ratio = 1.5f;
    bad[nb] = sched_cfg(VOLT_SCHED_CONSTANT, 0, 0); bad[nb++].kind = (volt_sched_kind)42;
    for (int i = 0; i < nb; i++) {
        s = (volt_scheduler *)&st;
        volt_status r = volt_scheduler_create(&bad[i], opt, &s);
        CHECK(r == VOLT_ERR_INVALID_ARG && s == NULL, "bad scheduler config %d: %s", i, volt_status_str(r));
        CHECK(volt_scheduler_config_validate(&bad[i]) == VOLT_ERR_INVALID_ARG, "validate bad %d", i);
    }
    c = sched_cfg(VOLT_SCHED_CONSTANT, 0, 0);
    c.version = 7;
    CHECK(volt_scheduler_create(&c, opt, &s) == VOLT_ERR_VERSION, "scheduler version");
    c = sched_cfg(VOLT_SCHED_CONSTANT, 0, 0);
    CHECK(volt_scheduler_create(&c, NULL, &s) == VOLT_ERR_INVALID_ARG, "NULL optimizer");
    volt_optimizer_destroy(opt);
    volt_params_destroy(st.ps);
}

/* ---- parameter groups ------------------------------------------------------------------ */
/* Bias-like parameters and enc.1.scale in group 1 (lr x3, no decay), enc.2.gain in group 2
 * (the config's lr, decay 0.5): in enc.2 the three groups sit back to back. */
static void groups_cfg(volt_optimizer_config *c) {
    c->n_groups = 2;
    c->groups[0] = (volt_optim_group){ .params = " *.bias, enc.1.scale", .lr = c->lr * 3.f, .weight_decay = 0.f };
    c->groups[1] = (volt_optim_group){ .params = "enc.2.gain", .lr = NAN, .weight_decay = 0.5f };
}

/* p's floats in unit buffers a and b are the same bits */
static bool same_param(const volt_tensor *p, const float *a, const float *b) {
    return !memcmp(a + volt_param_offset(p), b + volt_param_offset(p), sizeof(float) * (size_t)volt_tensor_numel(p));
}

/* A grouped step equals, bit for bit, one single-group optimizer per group over the same
 * parameters (the others frozen), values and states. */
static void test_groups_kind(const volt_optimizer_config *base, const char *name) {
    volt_optimizer_config gc = *base;
    groups_cfg(&gc);
    store a, b[3];
    store_make(&a, 11);
    volt_optimizer *oa = NULL, *ob[3] = { 0 };
    CHECK_OK(volt_optimizer_create(&gc, a.ps, &oa));
    if (!oa) return;
    CHECK(volt_optimizer_group_count(oa) == 3 && volt_optimizer_group_param_count(oa, 0) == 3 &&
          volt_optimizer_group_param_count(oa, 1) == 3 && volt_optimizer_group_param_count(oa, 2) == 1,
          "%s: groups of 3, 3 and 1 parameters", name);
    CHECK(volt_optimizer_param_group(oa, a.W) == 0 && volt_optimizer_param_group(oa, a.b) == 1 &&
          volt_optimizer_param_group(oa, a.s) == 1 && volt_optimizer_param_group(oa, a.c) == 1 &&
          volt_optimizer_param_group(oa, a.e) == 2 && volt_optimizer_param_group(oa, a.A) == 0, "%s: membership", name);
    CHECK(volt_optimizer_group_base_lr(oa, 1) == base->lr * 3.f && volt_optimizer_group_base_lr(oa, 2) == base->lr &&
          volt_optimizer_group_weight_decay(oa, 1) == 0.f && volt_optimizer_group_weight_decay(oa, 2) == 0.5f &&
          volt_optimizer_group_weight_decay(oa, 0) == base->weight_decay, "%s: resolved lr / weight_decay", name);
    CHECK(!strcmp(volt_optimizer_get_config(oa)->groups[0].params, " *.bias, enc.1.scale") &&
          volt_optimizer_get_config(oa)->groups[0].params != gc.groups[0].params, "%s: patterns copied", name);
    for (int g = 0; g < 3; g++) {
        store_make(&b[g], 11);
        volt_tensor *ps[7] = { b[g].W, b[g].b, b[g].V, b[g].s, b[g].A, b[g].c, b[g].e };
        const int grp[7] = { 0, 1, 0, 1, 0, 1, 2 };
        for (int i = 0; i < 7; i++) volt_param_set_requires_grad(ps[i], grp[i] == g);
        volt_optimizer_config sc = *base;
        sc.lr = volt_optimizer_group_base_lr(oa, g);
        sc.weight_decay = volt_optimizer_group_weight_decay(oa, g);
        CHECK_OK(volt_optimizer_create(&sc, b[g].ps, &ob[g]));
    }
    int bad = 0, lr_bad = 0;
    for (int t = 1; t <= NSTEPS; t++) {
        volt_optimizer_set_lr(oa, (float)(base->lr * LRS[t - 1]));   /* x1, x0.5, x0.25: exact ratios */
        set_grads(a.ps, t);
        CHECK_OK(volt_optimizer_step(oa));
        for (int g = 0; g < 3; g++) {
            if (!ob[g]) continue;
            const float lr = (float)(volt_optimizer_group_base_lr(oa, g) * LRS[t - 1]);
            lr_bad += volt_optimizer_group_lr(oa, g) != lr;
            volt_optimizer_set_lr(ob[g], lr);
            set_grads(b[g].ps, t);
            CHECK_OK(volt_optimizer_step(ob[g]));
        }
        volt_tensor *pa[7] = { a.W, a.b, a.V, a.s, a.A, a.c, a.e };
        const int grp[7] = { 0, 1, 0, 1, 0, 1, 2 };
        for (int i = 0; i < 7; i++) {
            const int g = grp[i], ui = volt_unit_index(pa[i]->unit);
            if (!ob[g]) continue;
            const float *va = H_DATA(pa[i]->unit), *vb = H_DATA(volt_params_unit_at(b[g].ps, ui));
            bad += !same_param(pa[i], va, vb);
            for (int k = 0; k < volt_optimizer_state_count(oa); k++)
                bad += !same_param(pa[i], H_STATE(oa, a.ps, ui, k, NULL, NULL), H_STATE(ob[g], b[g].ps, ui, k, NULL, NULL));
        }
    }
    CHECK(lr_bad == 0, "%s: %d group lrs are not base lr x the schedule's factor", name, lr_bad);
    CHECK(bad == 0, "%s: %d parameters (values or states) differ from the per-group optimizers'", name, bad);
    /* runs split at group boundaries: enc.0 W | b, enc.1 V | s, enc.2 A | c | e */
    CHECK(volt__optimizer_launches(oa) == 7 * NSTEPS, "%s: %lld backend updates in %d steps, want %d (one per run of one group)",
          name, (long long)volt__optimizer_launches(oa), NSTEPS, 7 * NSTEPS);
    for (int g = 0; g < 3; g++) {
        volt_optimizer_destroy(ob[g]);
        volt_params_destroy(b[g].ps);
    }
    volt_optimizer_destroy(oa);
    volt_params_destroy(a.ps);
}

/* set_range (a ZeRO slice) through group boundaries: the slice updates exactly like the full
 * grouped step inside it and nothing outside. */
static void test_groups_range(void) {
    volt_optimizer_config c = adam_cfg(VOLT_OPTIM_ADAMW, 1e-2f, 0.1f, 0.9f, 0.999f);
    groups_cfg(&c);
    store a, b;
    store_make(&a, 13);
    store_make(&b, 13);
    volt_optimizer *oa = NULL, *ob = NULL;
    CHECK_OK(volt_optimizer_create(&c, a.ps, &oa));
    CHECK_OK(volt_optimizer_create(&c, b.ps, &ob));
    if (!oa || !ob) return;
    /* enc.2: A [0, 32) group 0, c [32, 48) group 1, e [48, 53) group 2; enc.0: W then b */
    const int64_t lo2 = 20, hi2 = 50, lo0 = 60, hi0 = volt_param_offset(b.b) + 3;
    CHECK_OK(volt_optimizer_set_range(ob, 2, lo2, hi2));
    CHECK_OK(volt_optimizer_set_range(ob, 0, lo0, hi0));
    CHECK_OK(volt_optimizer_set_range(ob, 1, 0, 0));
    float *init[3];
    for (int ui = 0; ui < 3; ui++) {
        const volt_unit *u = volt_params_unit_at(b.ps, ui);
        init[ui] = malloc(sizeof(float) * (size_t)volt_unit_numel(u));
        memcpy(init[ui], H_DATA(u), sizeof(float) * (size_t)volt_unit_numel(u));
    }
    int bad = 0;
    for (int t = 1; t <= NSTEPS; t++) {
        set_grads(a.ps, t);
        set_grads(b.ps, t);
        CHECK_OK(volt_optimizer_step(oa));
        CHECK_OK(volt_optimizer_step(ob));
        for (int ui = 0; ui < 3; ui++) {
            const volt_unit *u = volt_params_unit_at(b.ps, ui);
            int64_t lo, hi;
            volt_optimizer_range(ob, ui, &lo, &hi);
            const float *va = H_DATA(volt_params_unit_at(a.ps, ui)), *vb = H_DATA(u);
            for (int64_t k = 0; k < volt_unit_numel(u); k++)
                bad += memcmp(&vb[k], k >= lo && k < hi ? &va[k] : &init[ui][k], sizeof(float)) != 0;
            for (int s = 0; s < 2 && hi > lo; s++) {
                const float *sa = H_STATE(oa, a.ps, ui, s, NULL, NULL), *sb = H_STATE(ob, b.ps, ui, s, NULL, NULL);
                bad += memcmp(sa + lo, sb, sizeof(float) * (size_t)(hi - lo)) != 0;
            }
        }
    }
    CHECK(bad == 0, "groups with set_range: %d values or states differ from the full grouped step", bad);
    for (int ui = 0; ui < 3; ui++) free(init[ui]);
    volt_optimizer_destroy(oa);
    volt_optimizer_destroy(ob);
    volt_params_destroy(a.ps);
    volt_params_destroy(b.ps);
}

/* Schedulers: each group runs lr_at(its own base lr) (LambdaLR), so the ratios hold; set_lr
 * scales every group by lr / base; a base lr of 0 still schedules the other groups. */
static void test_groups_sched(void) {
    store st;
    store_make(&st, 17);
    volt_optimizer_config oc = adam_cfg(VOLT_OPTIM_ADAMW, 2e-3f, 0.01f, 0.9f, 0.999f);
    groups_cfg(&oc);
    oc.groups[1].lr = 5e-4f;
    volt_optimizer *opt = NULL;
    CHECK_OK(volt_optimizer_create(&oc, st.ps, &opt));
    if (!opt) return;
    volt_scheduler_config c = sched_cfg(VOLT_SCHED_COSINE, 2, 8);
    volt_scheduler *s = NULL;
    CHECK_OK(volt_scheduler_create(&c, opt, &s));
    int bad = 0, ratio_bad = 0;
    for (int k = 0; k < 10; k++) {
        for (int g = 0; g < 3; g++) bad += volt_optimizer_group_lr(opt, g) != volt_scheduler_lr_at(&c, volt_optimizer_group_base_lr(opt, g), k);
        const double l0 = volt_optimizer_lr(opt);
        if (l0 > 0)
            ratio_bad += fabs(volt_optimizer_group_lr(opt, 1) / l0 - 3.0) > 1e-6 || fabs(volt_optimizer_group_lr(opt, 2) / l0 - 0.25) > 1e-6;
        volt_scheduler_step(s);
    }
    CHECK(bad == 0, "scheduler: %d group lrs are not lr_at(the group's base lr)", bad);
    CHECK(ratio_bad == 0, "scheduler: %d steps where the groups' lr ratios (3, 0.25) changed", ratio_bad);
    CHECK_OK(volt_scheduler_set_last_step(s, 5));
    CHECK(volt_optimizer_group_lr(opt, 1) == volt_scheduler_lr_at(&c, 6e-3f, 5), "set_last_step sets every group");
    volt_scheduler_destroy(s);
    /* set_lr (lr_find): one factor for every group, in double */
    volt_optimizer_set_lr(opt, 7e-4f);
    CHECK(volt_optimizer_lr(opt) == 7e-4f && volt_optimizer_group_lr(opt, 1) == (float)(6e-3f * (7e-4f / (double)2e-3f)) &&
          volt_optimizer_group_lr(opt, 2) == (float)(5e-4f * (7e-4f / (double)2e-3f)), "set_lr keeps the ratios");
    volt_optimizer_destroy(opt);
    /* base lr 0 (the default group frozen in effect): the scheduler still drives group 1 */
    oc.lr = 0.f;
    oc.groups[0].lr = 1e-2f;
    oc.groups[1].lr = NAN;   /* the config's: 0 */
    CHECK_OK(volt_optimizer_create(&oc, st.ps, &opt));
    CHECK_OK(volt_scheduler_create(&c, opt, &s));
    volt_scheduler_step(s);
    volt_scheduler_step(s);
    CHECK(volt_optimizer_lr(opt) == 0.f && volt_optimizer_group_lr(opt, 1) == volt_scheduler_lr_at(&c, 1e-2f, 2) &&
          volt_optimizer_group_lr(opt, 1) > 0.f && volt_optimizer_group_lr(opt, 2) == 0.f, "base lr 0: group 1 scheduled");
    volt_scheduler_destroy(s);
    volt_optimizer_set_lr(opt, 1e-3f);   /* no ratio to keep: every group gets lr */
    CHECK(volt_optimizer_group_lr(opt, 1) == 1e-3f && volt_optimizer_group_lr(opt, 2) == 1e-3f, "base lr 0: set_lr sets every group");
    volt_optimizer_destroy(opt);
    volt_params_destroy(st.ps);
}

/* Bad groups: rejected with a message naming the pattern; a version-1 config has no groups. */
static void test_groups_errors(void) {
    store st;
    store_make(&st, 19);
    struct { const char *params; float lr, wd; int n; volt_status want; const char *msg; } bad[] = {
        { "enc.0.bais", NAN, 0.f, 1, VOLT_ERR_INVALID_ARG, "groups[0] pattern 'enc.0.bais' matches no parameter" },
        { "*.bias,bias", NAN, 0.f, 1, VOLT_ERR_INVALID_ARG, "pattern 'bias' matches no parameter (patterns are fnmatch globs on the whole name: '*bias'" },
        { "", NAN, 0.f, 1, VOLT_ERR_INVALID_ARG, "groups[0].params '': empty pattern" },
        { "*.bias,,enc.2.gain", NAN, 0.f, 1, VOLT_ERR_INVALID_ARG, "empty pattern (element 2)" },
        { "*.bias, ", NAN, 0.f, 1, VOLT_ERR_INVALID_ARG, "empty pattern (element 2)" },
        { NULL, NAN, 0.f, 1, VOLT_ERR_INVALID_ARG, "groups[0].params is NULL" },
        { "*.bias", -1e-3f, 0.f, 1, VOLT_ERR_INVALID_ARG, "groups[0] ('*.bias'): invalid lr -0.001" },
        { "*.bias", INFINITY, 0.f, 1, VOLT_ERR_INVALID_ARG, "invalid lr inf" },
        { "*.bias", NAN, -0.01f, 1, VOLT_ERR_INVALID_ARG, "groups[0] ('*.bias'): invalid weight_decay -0.01" },
        { "*.bias", NAN, 0.f, VOLT_OPTIM_MAX_GROUPS + 1, VOLT_ERR_INVALID_ARG, "9 parameter groups, at most 8" },
        { "*.bias", NAN, 0.f, -1, VOLT_ERR_INVALID_ARG, "-1 parameter groups" },
        /* the second group's only match is taken by the first: it would change nothing */
        { "*.bias", NAN, 0.f, 2, VOLT_ERR_INVALID_ARG, "groups[1] ('enc.2.bias') holds no parameter" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        volt_optimizer_config c;
        volt_optimizer_config_init(&c);
        c.n_groups = bad[i].n;
        for (int g = 0; g < VOLT_OPTIM_MAX_GROUPS; g++)
            c.groups[g] = (volt_optim_group){ .params = g == 1 && bad[i].n == 2 ? "enc.2.bias" : bad[i].params, .lr = bad[i].lr,
                                               .weight_decay = bad[i].wd };
        volt_optimizer *opt = (volt_optimizer *)&st;
        char err[512];
        const volt_status r = volt_optimizer_create(&c, st.ps, &opt);
        const volt_status r2 = volt_optimizer_config_check(&c, st.ps, err, sizeof err);
        CHECK(r == bad[i].want && opt == NULL && r2 == r, "bad group %zu: create %s, check %s", i, volt_status_str(r), volt_status_str(r2));
        CHECK(strstr(err, bad[i].msg) != NULL, "bad group %zu: message '%s' lacks '%s'", i, err, bad[i].msg);
    }
    /* a version-1 config knows no groups: whatever lies past its end is not read */
    volt_optimizer_config c;
    volt_optimizer_config_init(&c);
    c.version = 1;
    c.n_groups = 99;
    volt_optimizer *opt = NULL;
    CHECK_OK(volt_optimizer_create(&c, st.ps, &opt));
    CHECK(opt && volt_optimizer_group_count(opt) == 1 && volt_optimizer_get_config(opt)->n_groups == 0, "version 1: one group");
    CHECK(volt_optimizer_group_lr(opt, 1) == 0.f && volt_optimizer_param_group(opt, st.W) == 0, "version 1: getters");
    volt_optimizer_destroy(opt);
    volt_params_destroy(st.ps);
}

static void test_groups(void) {
    volt_optimizer_config c;
    c = adam_cfg(VOLT_OPTIM_ADAMW, 1e-2f, 0.1f, 0.9f, 0.999f); test_groups_kind(&c, "groups adamw");
    c = adam_cfg(VOLT_OPTIM_ADAM, 1e-2f, 0.05f, 0.8f, 0.99f);  test_groups_kind(&c, "groups adam l2");
    c = sgd_cfg(0.1f, 0.9f, 0.f, true, 0.05f);                 test_groups_kind(&c, "groups sgd nesterov wd");
    test_groups_range();
    test_groups_sched();
    test_groups_errors();
}

/* ---- pm->update (the backend's kernel) against a plain f32 host reference ------------------ */
static uint32_t lcg = 777u;
static float urand(void) {   /* [-1, 1) */
    lcg = lcg * 1664525u + 1013904223u;
    return (float)((lcg >> 8) * (1.0 / 16777216.0)) * 2.f - 1.f;
}

/* The torch single-tensor formulas in f32, operation by operation (the kernel's order). */
static void ref_update(volt_update_kind kind, const volt_opt_coef *c, float *p, const float *g, float *s0, float *s1,
                       int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (kind == VOLT_UPDATE_SGD) {
            float gi = g[i];
            if (c->wd != 0.f) gi = gi + c->wd * p[i];
            if (s0) {
                float bi = c->first ? gi : s0[i] * c->momentum + c->one_minus_damp * gi;
                s0[i] = bi;
                gi = c->nesterov ? gi + c->momentum * bi : bi;
            }
            p[i] = p[i] + c->neg_lr * gi;
            continue;
        }
        float pi = p[i], gi = g[i];
        if (kind == VOLT_UPDATE_ADAMW && c->decay != 1.f) pi = pi * c->decay;
        if (kind == VOLT_UPDATE_ADAM && c->wd != 0.f) gi = gi + c->wd * pi;
        float mi = s0[i];
        mi = fabsf(c->w1) < 0.5f ? mi + c->w1 * (gi - mi) : gi - (gi - mi) * c->one_minus_w1;
        float vi = s1[i] * c->beta2;
        vi = vi + c->w2 * gi * gi;
        s0[i] = mi;
        s1[i] = vi;
        float denom = sqrtf(vi) / c->bc2_sqrt + c->eps;
        p[i] = pi + c->neg_step_size * mi / denom;
    }
}

static void test_pm_update(void) {
    volt_device *d = NULL;
    char err[256];
    CHECK_OK(volt__device_get(NULL, 0, &d, err, sizeof err));
    const char *acc = getenv("VOLT_ACCELERATOR");
    printf("device: %s\n", d->be->name);
    CHECK(!acc || !*acc || !strcmp(acc, d->be->name), "running on %s, asked for %s", d->be->name, acc);
    enum { N = 70001 };   /* parallel, not a multiple of the kernels' spans */
    const size_t fb = sizeof(float) * N;
    float *hp = malloc(fb), *hg = malloc(fb), *hs0 = malloc(fb), *hs1 = malloc(fb);
    float *rp = malloc(fb), *rs0 = malloc(fb), *rs1 = malloc(fb), *op = malloc(fb), *os0 = malloc(fb), *os1 = malloc(fb);
    for (int i = 0; i < N; i++) { hp[i] = urand(); hg[i] = urand(); hs0[i] = 0.1f * urand(); hs1[i] = 0.01f * fabsf(urand()); }
    float *p = volt__dev_alloc(d, fb), *g = volt__dev_alloc(d, fb), *s0 = volt__dev_alloc(d, fb), *s1 = volt__dev_alloc(d, fb);
    uint16_t *p16 = volt__dev_alloc(d, 2 * N), *a16 = volt__dev_alloc(d, 2 * N), *b16 = volt__dev_alloc(d, 2 * N);
    volt_opt_coef *cd = volt__dev_alloc(d, sizeof *cd);
    float *flag = volt__dev_alloc(d, sizeof *flag);
    const float zero = 0.f, one = 1.f;
    volt__dev_h2d(d, g, hg, fb);

    struct { const char *name; volt_update_kind kind; volt_opt_coef c; bool states; } cases[] = {
        { "sgd", VOLT_UPDATE_SGD, { .neg_lr = -0.1f }, false },
        { "sgd momentum wd", VOLT_UPDATE_SGD, { .wd = 0.01f, .momentum = 0.9f, .one_minus_damp = 0.75f, .neg_lr = -0.1f }, true },
        { "sgd nesterov first", VOLT_UPDATE_SGD, { .momentum = 0.8f, .one_minus_damp = 1.f, .neg_lr = -0.05f, .nesterov = 1, .first = 1 }, true },
        { "adam l2", VOLT_UPDATE_ADAM, { .wd = 0.05f, .decay = 1.f, .w1 = 0.1f, .one_minus_w1 = 0.9f, .beta2 = 0.999f, .w2 = 0.001f,
                                         .bc2_sqrt = 0.0447f, .eps = 1e-8f, .neg_step_size = -0.1f }, true },
        { "adamw lerp", VOLT_UPDATE_ADAMW, { .decay = 0.999f, .w1 = 0.7f, .one_minus_w1 = 0.3f, .beta2 = 0.5f, .w2 = 0.5f,
                                            .bc2_sqrt = 0.7071f, .eps = 1e-8f, .neg_step_size = -0.01f }, true },
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const volt_opt_coef *c = &cases[ci].c;
        const bool adam = cases[ci].kind != VOLT_UPDATE_SGD, st = cases[ci].states;
        volt__dev_h2d(d, cd, c, sizeof *c);
        /* f32 values and states against the host reference */
        volt__dev_h2d(d, p, hp, fb);
        volt__dev_h2d(d, s0, hs0, fb);
        volt__dev_h2d(d, s1, hs1, fb);
        volt__dev_h2d(d, flag, &zero, sizeof zero);   /* a skip flag at 0: the update runs */
        volt_update_args a = { .kind = cases[ci].kind, .p = p, .p_dt = VOLT_F32, .g = g, .s0 = st ? s0 : NULL,
                               .s1 = adam ? s1 : NULL, .s_dt = VOLT_F32, .n = N, .coef = cd, .skip = flag };
        d->be->pm->update(d, &a);
        volt__dev_d2h(d, op, p, fb);
        volt__dev_d2h(d, os0, s0, fb);
        volt__dev_d2h(d, os1, s1, fb);
        memcpy(rp, hp, fb); memcpy(rs0, hs0, fb); memcpy(rs1, hs1, fb);
        ref_update(cases[ci].kind, c, rp, hg, st ? rs0 : NULL, adam ? rs1 : NULL, N);
        int bad = 0;
        double worst = 0;
        for (int i = 0; i < N; i++) {
            /* SGD: the same bits. Adam: the kernel may be an FMA clone (core/internal.h
             * VOLT__SIMD_CLONES), so within a few ulps of the plain reference */
            const double scale = fabs(rp[i]) + fabs(hp[i]) + fabs((double)rp[i] - hp[i]);   /* p0, step, p1 */
            const double e = fabs((double)op[i] - rp[i]) / (scale + 1e-30);
            if (e > worst) worst = e;
            if (adam ? e > 1e-6 : memcmp(&op[i], &rp[i], 4) != 0) bad++;
            const double sc0 = fabs(rs0[i]) + fabs(hs0[i]) + fabs(hg[i]), sc1 = fabs(rs1[i]) + fabs(hs1[i]) + hg[i] * hg[i];
            if (st && (adam ? fabs((double)os0[i] - rs0[i]) > 1e-6 * sc0 : memcmp(&os0[i], &rs0[i], 4) != 0)) bad++;
            if (adam && fabs((double)os1[i] - rs1[i]) > 1e-6 * sc1) bad++;
        }
        CHECK(!bad, "pm update %s f32: %d elements off the host reference (worst rel %.2g)", cases[ci].name, bad, worst);
        /* the flag set (16-mixed's inf/NaN step in a captured step): nothing changes */
        volt__dev_h2d(d, flag, &one, sizeof one);
        d->be->pm->update(d, &a);
        volt__dev_d2h(d, rp, p, fb);
        volt__dev_d2h(d, rs0, s0, fb);
        volt__dev_d2h(d, rs1, s1, fb);
        CHECK(!memcmp(rp, op, fb) && !memcmp(rs0, os0, fb) && !memcmp(rs1, os1, fb),
              "pm update %s f32: a set skip flag still changed the values or states", cases[ci].name);

        /* 16-bit values and states (bf16; f16 states; f32 values with bf16 states): exactly
         * the f32 update of the widened numbers, rounded to nearest even */
        const volt_dtype pdts[3] = { VOLT_BF16, VOLT_BF16, VOLT_F32 }, sdts[3] = { VOLT_BF16, VOLT_F16, VOLT_BF16 };
        for (int m = 0; m < 3; m++) {
            const volt_dtype pdt = pdts[m], sdt = sdts[m];
            void *pv = pdt == VOLT_F32 ? (void *)p : (void *)p16;
            /* the 16-bit run */
            volt__dev_h2d(d, p, hp, fb);
            volt__dev_h2d(d, s0, hs0, fb);
            volt__dev_h2d(d, s1, hs1, fb);
            if (pdt != VOLT_F32) d->be->pm->convert(d, p16, pdt, p, VOLT_F32, N);
            d->be->pm->convert(d, a16, sdt, s0, VOLT_F32, N);
            d->be->pm->convert(d, b16, sdt, s1, VOLT_F32, N);
            volt_update_args h = { .kind = cases[ci].kind, .p = pv, .p_dt = pdt, .g = g, .s0 = st ? (void *)a16 : NULL,
                                   .s1 = adam ? (void *)b16 : NULL, .s_dt = sdt, .n = N, .coef = cd };
            d->be->pm->update(d, &h);
            uint16_t *got[3] = { malloc(2 * N), malloc(2 * N), malloc(2 * N) };
            float *gotp = malloc(fb);
            if (pdt == VOLT_F32) volt__dev_d2h(d, gotp, p, fb);
            else volt__dev_d2h(d, got[0], p16, 2 * N);
            volt__dev_d2h(d, got[1], a16, 2 * N);
            volt__dev_d2h(d, got[2], b16, 2 * N);
            /* the f32 run on the widened inputs, then rounded */
            if (pdt != VOLT_F32) d->be->pm->convert(d, p, VOLT_F32, p16, pdt, N);   /* p16 is the updated one: redo */
            volt__dev_h2d(d, p, hp, fb);
            if (pdt != VOLT_F32) { d->be->pm->convert(d, p16, pdt, p, VOLT_F32, N); d->be->pm->convert(d, p, VOLT_F32, p16, pdt, N); }
            volt__dev_h2d(d, s0, hs0, fb);
            volt__dev_h2d(d, s1, hs1, fb);
            d->be->pm->convert(d, a16, sdt, s0, VOLT_F32, N); d->be->pm->convert(d, s0, VOLT_F32, a16, sdt, N);
            d->be->pm->convert(d, b16, sdt, s1, VOLT_F32, N); d->be->pm->convert(d, s1, VOLT_F32, b16, sdt, N);
            volt_update_args f = { .kind = cases[ci].kind, .p = p, .p_dt = VOLT_F32, .g = g, .s0 = st ? s0 : NULL,
                                   .s1 = adam ? s1 : NULL, .s_dt = VOLT_F32, .n = N, .coef = cd };
            d->be->pm->update(d, &f);
            float *wp = malloc(fb), *w0 = malloc(fb), *w1 = malloc(fb);
            volt__dev_d2h(d, wp, p, fb);
            volt__dev_d2h(d, w0, s0, fb);
            volt__dev_d2h(d, w1, s1, fb);
            uint16_t *want[3] = { malloc(2 * N), malloc(2 * N), malloc(2 * N) };
            if (pdt != VOLT_F32) volt_convert(want[0], pdt, wp, VOLT_F32, N);
            volt_convert(want[1], sdt, w0, VOLT_F32, N);
            volt_convert(want[2], sdt, w1, VOLT_F32, N);
            const bool pok = pdt == VOLT_F32 ? !memcmp(gotp, wp, fb) : !memcmp(got[0], want[0], 2 * N);
            const bool s0ok = !st || !memcmp(got[1], want[1], 2 * N), s1ok = !adam || !memcmp(got[2], want[2], 2 * N);
            CHECK(pok && s0ok && s1ok, "pm update %s (values %s, states %s): values %s, state0 %s, state1 %s",
                  cases[ci].name, volt_dtype_name(pdt), volt_dtype_name(sdt), pok ? "ok" : "differ",
                  s0ok ? "ok" : "differ", s1ok ? "ok" : "differ");
            for (int k = 0; k < 3; k++) { free(got[k]); free(want[k]); }
            free(gotp); free(wp); free(w0); free(w1);
        }
    }
    volt__dev_free(d, p); volt__dev_free(d, g); volt__dev_free(d, s0); volt__dev_free(d, s1);
    volt__dev_free(d, p16); volt__dev_free(d, a16); volt__dev_free(d, b16); volt__dev_free(d, cd);
    volt__dev_free(d, flag);
    free(hp); free(hg); free(hs0); free(hs1); free(rp); free(rs0); free(rs1); free(op); free(os0); free(os1);
}

/* ---- weight averaging ----------------------------------------------------------------------- */
/* The backend's average entry (on the device VOLT_ACCELERATOR picks: the simulator runs the
 * CUDA kernel) against the same f32 operations on the host, bit for bit: copy, EMA, lerp
 * (both branches), the skip flag, and bf16 / f16 buffers as the widened f32 math rounded. */
static void test_pm_average(void) {
    volt_device *d = NULL;
    char err[256];
    CHECK_OK(volt__device_get(NULL, 0, &d, err, sizeof err));
    CHECK(d->be->version >= 6 && d->be->pm->average, "backend %s has no average entry", d->be->name);
    if (!(d->be->version >= 6 && d->be->pm->average)) return;
    enum { N = 70001 };
    const size_t fb = sizeof(float) * N;
    float *hp = malloc(fb), *ha = malloc(fb), *out = malloc(fb), *want = malloc(fb);
    for (int i = 0; i < N; i++) { hp[i] = urand(); ha[i] = urand(); }
    float *p = volt__dev_alloc(d, fb), *a = volt__dev_alloc(d, fb), *flag = volt__dev_alloc(d, sizeof(float));
    uint16_t *p16 = volt__dev_alloc(d, 2 * N), *a16 = volt__dev_alloc(d, 2 * N);
    volt_opt_coef *cd = volt__dev_alloc(d, sizeof *cd);
    const float zero = 0.f, one = 1.f;
    volt__dev_h2d(d, p, hp, fb);
    struct { const char *name; volt_opt_coef c; } cases[] = {
        { "none", { .avg_op = VOLT_AVG_NONE } },
        { "copy", { .avg_op = VOLT_AVG_COPY } },
        { "ema 0.999", { .avg_op = VOLT_AVG_EMA, .avg_a = 0.999f, .avg_b = (float)(1.0 - (double)0.999f) } },
        { "lerp 1/3", { .avg_op = VOLT_AVG_LERP, .avg_a = 1.f / 3.f } },
        { "lerp 1/2", { .avg_op = VOLT_AVG_LERP, .avg_a = 0.5f } },
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const volt_opt_coef *c = &cases[ci].c;
        volt__dev_h2d(d, cd, c, sizeof *c);
        volt__dev_h2d(d, a, ha, fb);
        volt__dev_h2d(d, flag, &zero, sizeof zero);
        d->be->pm->average(d, a, VOLT_F32, p, VOLT_F32, N, cd, flag);
        volt__dev_d2h(d, out, a, fb);
        for (int i = 0; i < N; i++) {
            const float av = ha[i], pv = hp[i], x = c->avg_a * av, y = c->avg_b * pv;
            want[i] = c->avg_op == VOLT_AVG_NONE ? av : c->avg_op == VOLT_AVG_COPY ? pv : c->avg_op == VOLT_AVG_EMA ? x + y
                    : c->avg_a < 0.5f ? av + c->avg_a * (pv - av) : pv - (pv - av) * (1.f - c->avg_a);
        }
        CHECK(!memcmp(out, want, fb), "pm average %s f32: differs from the host's f32 operations", cases[ci].name);
        /* a set skip flag: nothing changes */
        volt__dev_h2d(d, flag, &one, sizeof one);
        volt__dev_h2d(d, a, ha, fb);
        d->be->pm->average(d, a, VOLT_F32, p, VOLT_F32, N, cd, flag);
        volt__dev_d2h(d, out, a, fb);
        CHECK(!memcmp(out, ha, fb), "pm average %s: a set skip flag still changed the average", cases[ci].name);
        /* 16-bit average and values: the widened f32 math, rounded to nearest even */
        const volt_dtype dts[2] = { VOLT_BF16, VOLT_F16 };
        for (int m = 0; m < 2; m++) {
            volt__dev_h2d(d, a, ha, fb);
            d->be->pm->convert(d, a16, dts[m], a, VOLT_F32, N);
            d->be->pm->convert(d, p16, dts[m], p, VOLT_F32, N);
            d->be->pm->average(d, a16, dts[m], p16, dts[m], N, cd, NULL);
            uint16_t *got = malloc(2 * N), *w16 = malloc(2 * N);
            volt__dev_d2h(d, got, a16, 2 * N);
            float *wa = malloc(fb), *wp = malloc(fb);
            uint16_t *t16 = malloc(2 * N);
            volt_convert(t16, dts[m], ha, VOLT_F32, N); volt_convert(wa, VOLT_F32, t16, dts[m], N);
            volt_convert(t16, dts[m], hp, VOLT_F32, N); volt_convert(wp, VOLT_F32, t16, dts[m], N);
            for (int i = 0; i < N; i++) {
                const float av = wa[i], pv = wp[i], x = c->avg_a * av, y = c->avg_b * pv;
                wa[i] = c->avg_op == VOLT_AVG_NONE ? av : c->avg_op == VOLT_AVG_COPY ? pv : c->avg_op == VOLT_AVG_EMA ? x + y
                      : c->avg_a < 0.5f ? av + c->avg_a * (pv - av) : pv - (pv - av) * (1.f - c->avg_a);
            }
            volt_convert(w16, dts[m], wa, VOLT_F32, N);
            CHECK(!memcmp(got, w16, 2 * N), "pm average %s %s: differs from the widened f32 math", cases[ci].name,
                  volt_dtype_name(dts[m]));
            free(got); free(w16); free(wa); free(wp); free(t16);
        }
    }
    volt__dev_free(d, p); volt__dev_free(d, a); volt__dev_free(d, flag); volt__dev_free(d, p16); volt__dev_free(d, a16);
    volt__dev_free(d, cd);
    free(hp); free(ha); free(out); free(want);
}

/* The average as an optimizer state over NSTEPS SGD steps against a double-precision
 * reference of the parameters and of torch's AveragedModel (first update copies; EMA decay*avg
 * + (1-decay)*p; SWA the mean of the updates), a step gated off leaving it, swap twice bit
 * for bit, copy, and the errors. */
static void average_case(volt_optim_average mode, float decay, bool frozen) {
    const char *name = mode == VOLT_OPTIM_AVERAGE_EMA ? "ema" : "swa";
    store st;
    store_make(&st, 7);
    if (frozen) volt_param_set_requires_grad(st.b, false);
    volt_optimizer_config cfg = sgd_cfg(0.1f, 0.5f, 0.f, false, 0.01f);
    volt_optimizer *opt = NULL;
    CHECK_OK(volt_optimizer_create(&cfg, st.ps, &opt));
    if (!opt) return;
    CHECK_OK(volt_optimizer_enable_average(opt, mode, decay));
    CHECK(volt_optimizer_state_count(opt) == 2 && !strcmp(volt_optimizer_state_name(opt, 1), "weight_average"),
          "%s: the average is the last state (count %d)", name, volt_optimizer_state_count(opt));
    const int nu = volt_params_unit_count(st.ps);
    ref_elem *ref[3];
    double *avg[3];
    unsigned char *mask[3];
    for (int ui = 0; ui < nu; ui++) {
        volt_unit *u = volt_params_unit_at(st.ps, ui);
        const int64_t n = volt_unit_numel(u);
        ref[ui] = calloc((size_t)n, sizeof(ref_elem));
        avg[ui] = calloc((size_t)n, sizeof(double));
        mask[ui] = malloc((size_t)n);
        trainable_mask(u, mask[ui]);
        const float *d = H_DATA(u);
        for (int64_t k = 0; k < n; k++) ref[ui][k].p = avg[ui][k] = d[k];
        /* the average starts as the values, bit for bit */
        const float *sa = H_STATE(opt, st.ps, ui, 1, NULL, NULL);
        CHECK(!memcmp(sa, H_DATA(u), sizeof(float) * (size_t)n), "%s: unit %d's average does not start as its values", name, ui);
    }
    const int T = 6;
    int64_t n_avg = 0;
    int bad = 0;
    double worst = 0;
    for (int t = 1; t <= T; t++) {
        const bool gate = t != 4;   /* step 4 leaves the average */
        volt_optimizer_set_average_updates(opt, gate);
        set_grads(st.ps, t);
        CHECK_OK(volt_optimizer_step(opt));
        for (int ui = 0; ui < nu; ui++) {
            volt_unit *u = volt_params_unit_at(st.ps, ui);
            const float *sa = H_STATE(opt, st.ps, ui, 1, NULL, NULL);
            for (int64_t k = 0; k < volt_unit_numel(u); k++) {
                if (mask[ui][k]) ref_step(&cfg, 0.1, t, &ref[ui][k], gfun(ui, k, t));
                if (gate) {
                    const double pv = ref[ui][k].p;
                    avg[ui][k] = n_avg == 0 ? pv : mode == VOLT_OPTIM_AVERAGE_EMA ? decay * avg[ui][k] + (1.0 - decay) * pv
                               : avg[ui][k] + (pv - avg[ui][k]) / (double)(n_avg + 1);
                }
                const double r = avg[ui][k], e = fabs(sa[k] - r);
                if (e > 1e-6 + 1e-5 * fabs(r)) bad++;
                if (e > worst) worst = e;
            }
        }
        if (gate) n_avg++;
        CHECK(volt_optimizer_average_count(opt) == n_avg, "%s: n_averaged %lld after step %d, expected %lld", name,
              (long long)volt_optimizer_average_count(opt), t, (long long)n_avg);
    }
    CHECK(bad == 0, "%s%s: %d average elements off the double reference (worst abs %.2g)", name, frozen ? " frozen" : "", bad, worst);
    printf("  average %-4s%s max abs err vs double reference %.2e\n", name, frozen ? " (frozen bias)" : "", worst);
    /* swap: values <-> average; twice: every bit back */
    for (int ui = 0; ui < nu; ui++) {
        volt_unit *u = volt_params_unit_at(st.ps, ui);
        const size_t b = sizeof(float) * (size_t)volt_unit_numel(u);
        float *v0 = malloc(b), *a0 = malloc(b);
        memcpy(v0, H_DATA(u), b);
        memcpy(a0, H_STATE(opt, st.ps, ui, 1, NULL, NULL), b);
        CHECK(memcmp(v0, a0, b) != 0, "%s: unit %d: the values equal the average (the test proves nothing)", name, ui);
        CHECK_OK(volt_optimizer_average_swap(opt));
        CHECK(!memcmp(H_DATA(u), a0, b) && !memcmp(H_STATE(opt, st.ps, ui, 1, NULL, NULL), v0, b), "%s: swap did not exchange unit %d", name, ui);
        CHECK_OK(volt_optimizer_average_swap(opt));
        CHECK(!memcmp(H_DATA(u), v0, b) && !memcmp(H_STATE(opt, st.ps, ui, 1, NULL, NULL), a0, b), "%s: two swaps are not the identity (unit %d)", name, ui);
        if (ui == nu - 1) {
            CHECK_OK(volt_optimizer_average_copy_to_params(opt));
            CHECK(!memcmp(H_DATA(u), a0, b), "%s: copy_to_params", name);
        }
        free(v0); free(a0);
    }
    for (int ui = 0; ui < nu; ui++) { free(ref[ui]); free(avg[ui]); free(mask[ui]); }
    volt_optimizer_destroy(opt);
    volt_params_destroy(st.ps);
}

static void test_average(void) {
    average_case(VOLT_OPTIM_AVERAGE_EMA, 0.9f, false);
    average_case(VOLT_OPTIM_AVERAGE_EMA, 0.999f, true);
    average_case(VOLT_OPTIM_AVERAGE_SWA, 0.f, false);
    /* a set_range (ZeRO slice) keeps the shared part and starts the new part from the values */
    store st;
    store_make(&st, 3);
    volt_optimizer_config cfg = adam_cfg(VOLT_OPTIM_ADAM, 0.01f, 0.f, 0.9f, 0.999f);
    volt_optimizer *opt = NULL;
    CHECK_OK(volt_optimizer_create(&cfg, st.ps, &opt));
    CHECK(volt_optimizer_enable_average(opt, VOLT_OPTIM_AVERAGE_EMA, 1.0f) == VOLT_ERR_INVALID_ARG, "decay 1 accepted");
    CHECK(volt_optimizer_enable_average(opt, VOLT_OPTIM_AVERAGE_EMA, -0.1f) == VOLT_ERR_INVALID_ARG, "decay -0.1 accepted");
    CHECK(volt_optimizer_average_swap(opt) == VOLT_ERR_STATE, "swap without an average");
    CHECK_OK(volt_optimizer_enable_average(opt, VOLT_OPTIM_AVERAGE_EMA, 0.5f));
    CHECK(volt_optimizer_enable_average(opt, VOLT_OPTIM_AVERAGE_SWA, 0.f) == VOLT_ERR_STATE, "enabled twice");
    CHECK(volt_optimizer_state_count(opt) == 3 && !strcmp(volt_optimizer_state_name(opt, 2), VOLT_OPTIM_AVERAGE_STATE),
          "adam + average: 3 states");
    set_grads(st.ps, 1);
    CHECK_OK(volt_optimizer_step(opt));
    volt_unit *u = volt_params_unit_at(st.ps, 0);
    const int64_t n = volt_unit_numel(u);
    float *a0 = malloc(sizeof(float) * (size_t)n);
    memcpy(a0, H_STATE(opt, st.ps, 0, 2, NULL, NULL), sizeof(float) * (size_t)n);
    CHECK_OK(volt_optimizer_set_range(opt, 0, 8, n));
    int64_t lo, hi;
    const float *sa = H_STATE(opt, st.ps, 0, 2, &lo, &hi);
    CHECK(lo == 8 && hi == n && !memcmp(sa, a0 + 8, sizeof(float) * (size_t)(n - 8)), "set_range: the average's shared part kept");
    CHECK_OK(volt_optimizer_set_range(opt, 0, 0, n));
    sa = H_STATE(opt, st.ps, 0, 2, &lo, &hi);
    const float *v = H_DATA(u);
    CHECK(!memcmp(sa, v, 8 * sizeof(float)) && !memcmp(sa + 8, a0 + 8, sizeof(float) * (size_t)(n - 8)),
          "set_range: the average's new part starts from the values");
    free(a0);
    volt_optimizer_destroy(opt);
    /* 16-bit parameters with f32 states: refused (the swap would round the average) */
    CHECK_OK(volt_params_convert(st.ps, VOLT_BF16));
    CHECK_OK(volt_optimizer_create(&cfg, st.ps, &opt));
    CHECK(volt_optimizer_enable_average(opt, VOLT_OPTIM_AVERAGE_EMA, 0.9f) == VOLT_ERR_UNSUPPORTED, "bf16 values, f32 average accepted");
    volt_optimizer_destroy(opt);
    /* bf16 values and bf16 states: the average in bf16, swapped exactly */
    cfg.state_dtype = VOLT_BF16;
    CHECK_OK(volt_optimizer_create(&cfg, st.ps, &opt));
    CHECK_OK(volt_optimizer_enable_average(opt, VOLT_OPTIM_AVERAGE_EMA, 0.9f));
    for (int t = 1; t <= 3; t++) { set_grads(st.ps, t); CHECK_OK(volt_optimizer_step(opt)); }
    const size_t b16 = 2 * (size_t)n;
    uint16_t *v0 = malloc(b16), *s0 = malloc(b16);
    volt__dev_d2h(udev(u), v0, volt_unit_values(u), b16);
    volt__dev_d2h(udev(u), s0, volt_optimizer_state_raw(opt, 0, 2, NULL, NULL), b16);
    CHECK(memcmp(v0, s0, b16) != 0, "bf16: the average equals the values");
    CHECK_OK(volt_optimizer_average_swap(opt));
    CHECK_OK(volt_optimizer_average_swap(opt));
    uint16_t *v1 = malloc(b16);
    volt__dev_d2h(udev(u), v1, volt_unit_values(u), b16);
    CHECK(!memcmp(v0, v1, b16), "bf16: two swaps are not the identity");
    free(v0); free(s0); free(v1);
    volt_optimizer_destroy(opt);
    volt_params_destroy(st.ps);
}

int main(void) {
    test_pm_update();
    test_pm_average();
    test_average();
    test_reference();
    test_range();
    test_resume();
    test_determinism();
    test_api();
    test_sched_formulas();
    test_sched_object();
    test_groups();
    ring_free();
    return vtest_finish();
}
