/* volt_tensor_release (core/tensor.c): a step's tensor memory goes back to the step pool when
 * the caller is done with the tensor and no recorded backward still reads it.
 *   - a tensor no backward reads is given back at once, and the next tensor of its size
 *     lands on its memory; one a backward reads (tanh's output, gelu's input) is kept until
 *     that backward has run; the grads are the analytic ones either way;
 *   - views hold the memory too; releasing is idempotent; a released tensor given to an op
 *     fails the step naming the op, and cannot be copied to the host;
 *   - under bf16 compute the gelus keep their input's bf16 rounding, not the f32 input;
 *   - VOLT_POISON_GRADS=1 fills given-back memory with NaN bytes (what the poison tests rely
 *     on to catch a backward that reads what it declared it does not);
 *   - the encoder layer (nn/encoder.c) releases its temporaries: after a post-LN block's
 *     forward the step holds what backward reads (17 activations of D per token here), not
 *     every tensor the block made (20);
 *   - a step of the same shape allocates nothing, releases and all (the first full step
 *     sizes the pool: rep 0 stops at the failing op). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "vtest.h"
#include "core/internal.h"
#include "volt/ops.h"
#include "volt/nn.h"
#include "volt/dtype.h"

#define N 1024
static volt_step *new_step(const char *backend, volt_params *ps) {
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.backend = backend;
    sc.params = ps;
    volt_step *s = NULL;
    CHECK_OK(volt_step_create(&sc, &s));
    return s;
}

static void test_chain(void) {
    volt_step *s = new_step("cpu", NULL);
    float x0[N], g[N], h[N];
    for (int i = 0; i < N; i++) x0[i] = (float)((i % 41) - 20) / 16.f;
    const size_t A = sizeof(float) * N;
    uint64_t allocs[4] = { 0 };
    for (int rep = 0; rep < 4; rep++) {
        CHECK_OK(volt_step_begin(s, true, 0));
        volt_tensor *x = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(N), x0));
        volt_tensor *b = volt_scale(s, x, 2.f);       /* scale's backward reads nothing */
        volt_tensor *c = volt_tanh(s, b);              /* tanh's reads its output */
        void *b_mem = b->data;
        size_t used = volt_step_arena_used(s);
        volt_tensor_release(s, b);
        CHECK(volt_step_arena_used(s) == used - A, "rep %d: b given back at once (%zu -> %zu)", rep, used,
              volt_step_arena_used(s));
        volt_tensor_release(s, b);                     /* idempotent */
        CHECK(volt_step_arena_used(s) == used - A, "a second release changes nothing");
        volt_tensor *d = volt_scale(s, c, 3.f);
        CHECK(d && (rep < 2 || d->data == b_mem), "rep %d: the next tensor of b's size reuses b's memory", rep);
        used = volt_step_arena_used(s);
        volt_tensor_release(s, c);                     /* tanh's backward still reads it */
        CHECK(volt_step_arena_used(s) == used, "c is kept for tanh's backward");
        volt_tensor *r = volt_reshape(s, d, VOLT_SHAPE(N / 4, 4));
        volt_tensor_release(s, d);                     /* the view holds it */
        CHECK(volt_step_arena_used(s) == used, "d is held by its view");
        volt_tensor *e = volt_gelu(s, r);              /* gelu's backward reads its input */
        used = volt_step_arena_used(s);
        volt_tensor_release(s, r);
        CHECK(volt_step_arena_used(s) == used, "gelu's input is kept for its backward");
        /* a released tensor is gone for ops and the host */
        CHECK(volt_tensor_to_host(b, h) == VOLT_ERR_STATE, "to_host of a released tensor");
        if (rep == 0) {
            volt_tensor *bad = volt_scale(s, b, 1.f);
            CHECK(!bad && volt_step_status(s) == VOLT_ERR_STATE && strstr(volt_step_errmsg(s), "released") &&
                  strstr(volt_step_errmsg(s), "scale"), "an op given a released tensor: %s", volt_step_errmsg(s));
            volt_step_end(s);
            continue;
        }
        volt_tensor *loss = volt_sum(s, e);
        size_t before = volt_step_arena_used(s);
        CHECK_OK(volt_step_backward(s, loss));
        /* c, d (through r) and the rest of the chain went back during backward */
        CHECK(volt_step_arena_used(s) + A <= before + 256, "backward gave back c and d (%zu -> %zu)", before,
              volt_step_arena_used(s));
        CHECK_OK(volt_tensor_grad_to_host(x, g));
        double worst = 0;
        for (int i = 0; i < N; i++) {
            double t = tanh(2.0 * x0[i]), u = 3.0 * t;
            double dg = 0.5 * (1 + erf(u / sqrt(2.0))) + u * exp(-0.5 * u * u) / sqrt(2 * M_PI);
            double want = dg * 3.0 * (1 - t * t) * 2.0, err = fabs(g[i] - want) / (fabs(want) + 1e-3);
            if (err > worst) worst = err;
        }
        CHECK(worst < 1e-4, "grads with releases: rel err %g", worst);
        allocs[rep] = volt_step_heap_allocs(s);
        volt_step_end(s);
    }
    CHECK(allocs[3] == allocs[2], "steady state allocates nothing (%llu -> %llu)", (unsigned long long)allocs[2],
          (unsigned long long)allocs[3]);
    CHECK(volt_step_mem_held(s) >= volt_step_arena_peak(s), "held %zu >= peak %zu", volt_step_mem_held(s),
          volt_step_arena_peak(s));
    volt_step_destroy(s);
}

/* Under bf16 compute the gelus keep x's bf16 rounding for backward (volt__gelu_keep): their
 * f32 input is given back as soon as it is released, and the grad is f'(x) at the rounding
 * (as autocast's bf16 GELU computes it), which the f32 formula misses. */
static double gelu_d(double v) { return 0.5 * (1 + erf(v / sqrt(2.0))) + v * exp(-0.5 * v * v) / sqrt(2 * M_PI); }
static double gelu_tanh_d(double v) {
    const double k0 = sqrt(2.0 / M_PI), k1 = 0.044715, u = k0 * (v + k1 * v * v * v), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k0 * (1 + 3 * k1 * v * v);
}
static void test_gelu_bf16(void) {
    volt_step *s = new_step("cpu", NULL);
    float x0[N], g[N];
    for (int i = 0; i < N; i++) x0[i] = (float)(i - N / 2) / 97.f + 1e-3f * (float)(i % 7);
    const size_t A = sizeof(float) * N;
    for (int tanh_form = 0; tanh_form < 2; tanh_form++) {
        CHECK_OK(volt_step_begin(s, true, 0));
        CHECK_OK(volt_step_set_compute_dtype(s, VOLT_BF16));
        volt_tensor *x = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(N), x0));
        volt_tensor *h = volt_scale(s, x, 1.f);
        volt_tensor *y = tanh_form ? volt_gelu_tanh(s, h) : volt_gelu(s, h);
        size_t used = volt_step_arena_used(s);
        volt_tensor_release(s, h);
        CHECK(volt_step_arena_used(s) == used - A, "%s: its f32 input is not held for backward",
              tanh_form ? "gelu_tanh" : "gelu");
        CHECK_OK(volt_step_backward(s, volt_sum(s, y)));
        CHECK_OK(volt_tensor_grad_to_host(x, g));
        double at16 = 0, at32 = 0;
        for (int i = 0; i < N; i++) {
            const double r = volt_bf16_to_f32(volt_f32_to_bf16(x0[i]));
            const double w16 = tanh_form ? gelu_tanh_d(r) : gelu_d(r), w32 = tanh_form ? gelu_tanh_d(x0[i]) : gelu_d(x0[i]);
            if (fabs(g[i] - w16) > at16) at16 = fabs(g[i] - w16);
            if (fabs(g[i] - w32) > at32) at32 = fabs(g[i] - w32);
        }
        CHECK(at16 < 2e-6 && at32 > 1e-4, "%s: grad at the bf16 rounding (max err %g) not at x (%g)",
              tanh_form ? "gelu_tanh" : "gelu", at16, at32);
        volt_step_end(s);
    }
    volt_step_destroy(s);
}

/* With VOLT_POISON_GRADS=1, given-back memory reads as NaN (seen here through a wrap of the
 * raw address, which the "cpu" backend allows). */
static void test_poison(void) {
    setenv("VOLT_POISON_GRADS", "1", 1);
    volt_step *s = new_step("cpu", NULL);
    unsetenv("VOLT_POISON_GRADS");
    float x0[N], h[N];
    for (int i = 0; i < N; i++) x0[i] = (float)i;
    /* the first step sizes the pool (its blocks are the backend's own, freed when given
     * back); the second gives y back inside the pool's block, which stays readable */
    for (int rep = 0; rep < 2; rep++) {
        CHECK_OK(volt_step_begin(s, false, 0));
        volt_tensor *x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(N), x0);
        volt_tensor *y = volt_scale(s, x, 2.f);
        void *mem = y->data;
        volt_tensor_release(s, y);
        if (rep) {
            CHECK_OK(volt_tensor_to_host(volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N), mem), h));
            int nan = 0;
            for (int i = 0; i < N; i++) nan += isnan(h[i]);
            CHECK(nan == N, "given-back memory is NaN under VOLT_POISON_GRADS: %d of %d", nan, N);
        }
        volt_step_end(s);
    }
    volt_step_destroy(s);
}

/* A post-LN encoder block (DistilBERT's) on (B, T, D): after forward the step holds x, q, k,
 * v, the attention's output, the first residual sum and its norm, the FFN's two (B, T, F)
 * activations, the second sum and the output: 17 x D per token with F = 4 D. Without the
 * block's releases it would also hold the out-projection's output, FFN2's and its dropout's
 * (20 x D). Counted in the step pool, where tensors live (kernels' saved data is in the arena). */
static void test_encoder(void) {
    enum { B = 2, T = 16, D = 32, H = 4 };
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.seed = 3;
    volt_params *ps = NULL;
    CHECK_OK(volt_params_create(&pc, &ps));
    volt_nn_encoder_config ec;
    volt_nn_encoder_config_init(&ec);
    ec.n_heads = H;
    ec.attention_dropout = 0.f;   /* no saved mask: the bound below is the activations */
    volt_nn_encoder_layer e;
    CHECK_OK(volt_nn_encoder_declare(ps, "layer", D, &ec, &e));
    CHECK_OK(volt_params_finalize(ps));
    volt_step *s = new_step("cpu", ps);
    static float x0[B * T * D];
    for (int i = 0; i < B * T * D; i++) x0[i] = sinf(0.37f * (float)i);
    const size_t act = sizeof(float) * B * T * D;
    CHECK_OK(volt_step_begin(s, true, 0));
    volt_tensor *x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(B, T, D), x0);
    volt_tensor *y = volt_nn_encoder_forward(s, &e, x, NULL);
    CHECK(y != NULL, "forward: %s", volt_step_errmsg(s));
    const size_t held = s->grads.used;   /* with x */
    CHECK(held < 18 * act, "after the block's forward the step holds %.2f activations of D per token (want 17)",
          (double)held / (double)act);
    CHECK(held >= 17 * act, "the step holds what backward reads: %.2f activations", (double)held / (double)act);
    volt_step_end(s);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

int main(void) {
    test_chain();
    test_poison();
    test_gelu_bf16();
    test_encoder();
    return vtest_finish();
}
