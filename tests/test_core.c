/* Core engine: arena accounting, the strategy-hook order for a 3-unit model, bitwise
 * determinism, small models trained end to end through the tape, the tape's gradient
 * modes (store for the first writer, add after) and arange. Runs on cpu and, as
 * test_core_strict, on cpu-strict (tests/strict_tape.cmake: VOLT_TEST_EXPECT_DEVICE). */
#include "vtest.h"
#include "volt/volt.h"
#include "core/units.h"
#include "core/internal.h"

/* The grad of t as host floats (an explicit device->host copy). */
static void grad_to_host(volt_step *s, volt_tensor *t, float *out) {
    volt_tensor *g = volt_tensor_wrap(s, VOLT_F32, t->shape, t->grad);
    CHECK(g && t->grad && volt_tensor_to_host(g, out) == VOLT_OK, "grad of a tensor to host");
}

/* ---- a 3-unit MLP: fc1 (in->h), fc2 (h->h), head (h->out) ----------------------------- */
typedef struct { volt_tensor *w[3], *b[3]; } mlp3;

static void mlp3_declare(volt_params *ps, mlp3 *m, int in, int h, int out) {
    const char *units[3] = { "fc1", "fc2", "head" };
    int dims[4] = { in, h, h, out };
    for (int l = 0; l < 3; l++) {
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "%s.weight", units[l]);
        snprintf(bn, sizeof bn, "%s.bias", units[l]);
        volt_params_unit(ps, units[l]);
        volt_param_new(ps, wn, VOLT_SHAPE(dims[l + 1], dims[l]), VOLT_INIT_TORCH_LINEAR, &m->w[l]);
        volt_param_new(ps, bn, VOLT_SHAPE(dims[l + 1]), VOLT_INIT_UNIFORM(-0.1f, 0.1f), &m->b[l]);
    }
}

static volt_tensor *mlp3_forward(volt_step *s, mlp3 *m, volt_tensor *x) {
    volt_tensor *h = volt_relu(s, volt_linear(s, x, m->w[0], m->b[0]));
    h = volt_relu(s, volt_linear(s, h, m->w[1], m->b[1]));
    return volt_linear(s, h, m->w[2], m->b[2]);
}

/* ---- hook recording ---------------------------------------------------------------------- */
typedef struct { char log[512]; } rec;
static volt_status rec_use(void *ctx, volt_unit *u) {
    rec *r = ctx;
    snprintf(r->log + strlen(r->log), sizeof r->log - strlen(r->log), "use:%s ", volt_unit_name(u));
    return VOLT_OK;
}
static volt_status rec_ready(void *ctx, volt_unit *u) {
    rec *r = ctx;
    snprintf(r->log + strlen(r->log), sizeof r->log - strlen(r->log), "ready:%s ", volt_unit_name(u));
    return VOLT_OK;
}
static const volt_unit_hooks rec_hooks = { VOLT_UNIT_HOOKS_VERSION, rec_use, rec_ready };

static void make(volt_params **ps, volt_step **s, mlp3 *m, uint64_t seed, int in, int h, int out) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    pc.seed = seed;
    volt_params_create(&pc, ps);
    mlp3_declare(*ps, m, in, h, out);
    CHECK_OK(volt_params_finalize(*ps));
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = *ps;
    sc.arena_bytes = 4096;   /* small on purpose: the first step must grow it */
    CHECK_OK(volt_step_create(&sc, s));
}

static void test_hook_order(void) {
    volt_params *ps;
    volt_step *s;
    mlp3 m;
    make(&ps, &s, &m, 1, 5, 8, 3);
    rec r = { "" };
    /* the one version rule for the hook table: 0 and current+1 are refused, naming it */
    for (uint32_t v = 0; v <= VOLT_UNIT_HOOKS_VERSION + 1; v += VOLT_UNIT_HOOKS_VERSION + 1) {
        volt_unit_hooks h = rec_hooks;
        h.version = v;
        CHECK(volt__params_set_hooks(ps, &h, &r) == VOLT_ERR_VERSION && strstr(volt_params_errmsg(ps), "volt_unit_hooks: version"),
              "unit hooks version %u: %s", v, volt_params_errmsg(ps));
    }
    CHECK_OK(volt__params_set_hooks(ps, &rec_hooks, &r));
    float x[10] = { 0 };
    int64_t y[2] = { 0, 2 };
    volt_step_begin(s, true, 0);
    volt_tensor *logits = mlp3_forward(s, &m, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 5), x));
    volt_tensor *loss = volt_cross_entropy(s, logits, volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(2), y));
    strcat(r.log, "| ");
    CHECK_OK(volt_step_backward(s, loss));
    volt_step_end(s);
    const char *want = "use:fc1 use:fc2 use:head | ready:head ready:fc2 ready:fc1 ";
    CHECK(!strcmp(r.log, want), "hook order:\n  got  %s\n  want %s", r.log, want);

    /* eval step: unit_use fires, grads_ready does not (no backward) */
    r.log[0] = 0;
    volt_step_begin(s, false, 0);
    mlp3_forward(s, &m, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 5), x));
    volt_step_end(s);
    CHECK(!strcmp(r.log, "use:fc1 use:fc2 use:head "), "eval hooks: %s", r.log);

    /* a unit the loss never touches becomes ready at the end of backward */
    r.log[0] = 0;
    volt_step_begin(s, true, 0);
    volt_tensor *h = volt_relu(s, volt_linear(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 5), x), m.w[0], m.b[0]));
    CHECK_OK(volt_step_backward(s, volt_sum(s, h)));
    volt_step_end(s);
    CHECK(!strcmp(r.log, "use:fc1 ready:fc1 ready:fc2 ready:head "), "unused units: %s", r.log);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

/* ---- arena ----------------------------------------------------------------------------- */
static void test_arena(void) {
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.arena_bytes = 1000;
    volt_step *s;
    CHECK_OK(volt_step_create(&sc, &s));
    volt_step_begin(s, false, 0);
    CHECK(volt_step_arena_used(s) == 0, "fresh arena in use");
    void *a = volt_step_alloc(s, 100), *b = volt_step_alloc(s, 1);
    CHECK(((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0, "64-byte alignment");
    CHECK(volt_step_arena_used(s) == 192, "used %zu", volt_step_arena_used(s));
    void *big = volt_step_alloc(s, 5000);   /* overflow block */
    CHECK(big != NULL, "overflow alloc");
    volt__dev_memset(s->dev, big, 1, 5000);   /* device memory: through the backend */
    size_t peak = volt_step_arena_peak(s);
    CHECK(peak >= 192 + 5000, "peak %zu", peak);
    uint64_t allocs = volt_step_heap_allocs(s);
    volt_step_end(s);
    CHECK(volt_step_arena_used(s) == 0, "reset to 0");
    CHECK(volt_step_arena_peak(s) == peak, "peak survives reset");
    /* the same step again fits the regrown block: no heap allocation */
    uint64_t after_reset = volt_step_heap_allocs(s);
    CHECK(after_reset == allocs + 1, "regrow once (%llu -> %llu)", (unsigned long long)allocs, (unsigned long long)after_reset);
    for (int k = 0; k < 3; k++) {
        volt_step_begin(s, false, 0);
        volt_step_alloc(s, 100); volt_step_alloc(s, 1); volt_step_alloc(s, 5000);
        volt_step_end(s);
    }
    CHECK(volt_step_heap_allocs(s) == after_reset, "no allocation in steady state");
    volt_step_destroy(s);
}

/* ---- training loops --------------------------------------------------------------------- */
static float train(mlp3 *m, volt_params *ps, volt_step *s, volt_optimizer *opt, const float *X, const int64_t *Y,
                   int n, int in, int steps, uint64_t *allocs_after_warmup) {
    float last = 0;
    for (int it = 0; it < steps; it++) {
        volt_step_begin(s, true, (uint64_t)it);
        volt_tensor *x = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(n, in), (void *)X);
        volt_tensor *y = volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(n), (void *)Y);
        volt_tensor *loss = volt_cross_entropy(s, mlp3_forward(s, m, x), y);
        if (volt_step_backward(s, loss) != VOLT_OK) { CHECK(0, "backward: %s", volt_step_errmsg(s)); return NAN; }
        last = (float)volt_tensor_item(loss);
        volt_step_end(s);
        volt_optimizer_step(opt);
        volt_params_zero_grad(ps);
        if (it == 2 && allocs_after_warmup) *allocs_after_warmup = volt_step_heap_allocs(s);
    }
    return last;
}

static float accuracy(mlp3 *m, volt_step *s, const float *X, const int64_t *Y, int n, int in) {
    volt_step_begin(s, false, 0);
    float acc = (float)volt_tensor_item(volt_accuracy(s, mlp3_forward(s, m, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(n, in), (void *)X)),
                                                     volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(n), (void *)Y)));
    volt_step_end(s);
    return acc;
}

static volt_optimizer *adam(volt_params *ps, float lr) {
    volt_optimizer_config oc;
    volt_optimizer_config_init(&oc);
    oc.kind = VOLT_OPTIM_ADAMW;
    oc.lr = lr;
    oc.weight_decay = 0.f;
    volt_optimizer *o = NULL;
    CHECK_OK(volt_optimizer_create(&oc, ps, &o));
    return o;
}

static void test_separable(void) {
    enum { N = 200, IN = 7, C = 3 };
    static float X[N * IN];
    static int64_t Y[N];
    uint64_t st = 12345;
    for (int i = 0; i < N; i++) {   /* three well separated Gaussian blobs */
        Y[i] = i % C;
        for (int k = 0; k < IN; k++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            float noise = (float)((st >> 40) & 0xFFFF) / 65536.f - 0.5f;
            X[i * IN + k] = noise + (k % C == Y[i] ? 2.f : 0.f);
        }
    }
    volt_params *ps; volt_step *s; mlp3 m;
    make(&ps, &s, &m, 7, IN, 16, C);
    volt_optimizer *o = adam(ps, 1e-2f);
    uint64_t warm = 0;
    train(&m, ps, s, o, X, Y, N, IN, 150, &warm);
    float acc = accuracy(&m, s, X, Y, N, IN);
    CHECK(acc == 1.0f, "separable: train accuracy %.3f, want 1.0", acc);
    CHECK(volt_step_heap_allocs(s) == warm, "hot loop allocated: %llu -> %llu heap allocations",
          (unsigned long long)warm, (unsigned long long)volt_step_heap_allocs(s));
    printf("separable: accuracy %.3f, arena peak %zu bytes\n", acc, volt_step_arena_peak(s));
    volt_optimizer_destroy(o); volt_step_destroy(s); volt_params_destroy(ps);
}

static void test_xor(void) {
    float X[8] = { 0, 0, 0, 1, 1, 0, 1, 1 };
    int64_t Y[4] = { 0, 1, 1, 0 };
    volt_params *ps; volt_step *s; mlp3 m;
    make(&ps, &s, &m, 3, 2, 8, 2);
    volt_optimizer *o = adam(ps, 3e-2f);
    float loss = train(&m, ps, s, o, X, Y, 4, 2, 400, NULL);
    CHECK(loss < 0.01f, "xor: final loss %.5f, want < 0.01", loss);
    printf("xor: final loss %.6f\n", loss);
    volt_optimizer_destroy(o); volt_step_destroy(s); volt_params_destroy(ps);
}

static void test_determinism(void) {
    enum { N = 64, IN = 13, C = 5 };
    static float X[N * IN];
    static int64_t Y[N];
    for (int i = 0; i < N * IN; i++) X[i] = sinf((float)i * 0.37f);
    for (int i = 0; i < N; i++) Y[i] = (i * 7) % C;
    float *final[2];
    int64_t numel = 0;
    for (int run = 0; run < 2; run++) {
        volt_params *ps; volt_step *s; mlp3 m;
        make(&ps, &s, &m, 99, IN, 37, C);
        volt_optimizer *o = adam(ps, 1e-3f);
        train(&m, ps, s, o, X, Y, N, IN, 20, NULL);
        numel = 0;
        final[run] = malloc(sizeof(float) * 4096);
        for (int u = 0; u < volt_params_unit_count(ps); u++) {
            volt_unit *un = volt_params_unit_at(ps, u);
            volt__dev_d2h(ps->dev, final[run] + numel, volt_unit_data(un), sizeof(float) * (size_t)volt_unit_numel(un));
            numel += volt_unit_numel(un);
        }
        volt_optimizer_destroy(o); volt_step_destroy(s); volt_params_destroy(ps);
    }
    CHECK(numel < 4096 && memcmp(final[0], final[1], sizeof(float) * (size_t)numel) == 0,
          "two runs with the same seed differ after 20 steps");
    free(final[0]); free(final[1]);
}

/* ---- the tape's gradient modes ----------------------------------------------------------- */
/* x is read by two scale nodes: backward reaches the later one first, which must STORE into
 * the fresh (uninitialised) grad; the earlier one must ADD. The step runs twice so the second
 * run's fresh grad is the first run's memory: a first writer that added would see 5 + 5. */
static void test_grad_modes(void) {
    volt_step_config sc;
    volt_step_config_init(&sc);
    volt_step *s;
    CHECK_OK(volt_step_create(&sc, &s));
    const char *want = getenv("VOLT_TEST_EXPECT_DEVICE");
    printf("step device: %s\n", s->dev->be->name);
    if (want) CHECK(!strcmp(s->dev->be->name, want), "step runs on '%s', expected '%s'", s->dev->be->name, want);
    const float xv[4] = { 1, -2, 3, 0.5f };
    for (int run = 0; run < 3; run++) {
        volt_step_begin(s, true, 0);
        volt_tensor *x = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), xv));
        volt_tensor *a = volt_scale(s, x, 2.f), *b = volt_scale(s, x, 3.f);
        CHECK_OK(volt_step_backward(s, volt_sum(s, volt_add(s, a, b))));
        float g[4];
        grad_to_host(s, x, g);
        for (int k = 0; k < 4; k++) CHECK(g[k] == 5.f, "run %d: x used twice: grad[%d] = %g, want 2 + 3", run, k, g[k]);
        /* tape: scale 2, scale 3, add, sum; backward visits sum, add, scale 3, scale 2 */
        CHECK(s->n_nodes == 4 && s->tape[0].op == VOLT_OP_SCALE && s->tape[1].op == VOLT_OP_SCALE, "tape layout");
        CHECK(s->tape[1].grad_mode[0] == VOLT_GRAD_STORE, "first writer of x gets accumulate = false (mode %d)",
              s->tape[1].grad_mode[0]);
        CHECK(s->tape[0].grad_mode[0] == VOLT_GRAD_ADD, "second writer of x gets accumulate = true (mode %d)",
              s->tape[0].grad_mode[0]);
        /* add's a takes the upstream grad itself (no copy); its b (same shape) gets a store */
        CHECK(s->tape[2].grad_mode[0] == VOLT_GRAD_NONE && a->grad == s->tape[2].out->grad, "add aliases dy into a");
        CHECK(s->tape[2].grad_mode[1] == VOLT_GRAD_STORE, "add's b: a first write");
        volt_step_end(s);
    }
    /* one node reading one tensor twice: mul(x, x) -> 2x, add(x, x) -> 2; the first input
     * stores, the second adds */
    for (int run = 0; run < 2; run++) {
        volt_step_begin(s, true, 0);
        volt_tensor *x = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), xv));
        volt_tensor *m = volt_mul(s, x, x);
        CHECK_OK(volt_step_backward(s, volt_sum(s, m)));
        float g[4];
        grad_to_host(s, x, g);
        for (int k = 0; k < 4; k++) CHECK(g[k] == 2.f * xv[k], "mul(x, x): grad[%d] = %g, want %g", k, g[k], 2.f * xv[k]);
        CHECK(s->tape[0].grad_mode[0] == VOLT_GRAD_STORE && s->tape[0].grad_mode[1] == VOLT_GRAD_ADD, "mul(x, x) modes");
        volt_step_end(s);
        volt_step_begin(s, true, 0);
        x = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), xv));
        CHECK_OK(volt_step_backward(s, volt_sum(s, volt_add(s, x, x))));
        grad_to_host(s, x, g);
        for (int k = 0; k < 4; k++) CHECK(g[k] == 2.f, "add(x, x): grad[%d] = %g, want 2", k, g[k]);
        volt_step_end(s);
    }
    /* backward_grad seeds through a copy; a second seed on a tensor that has a grad adds */
    volt_step_begin(s, true, 0);
    volt_tensor *x = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4), xv));
    const float dy[4] = { 1, 2, 3, 4 };
    CHECK_OK(volt_step_backward_grad(s, volt_scale(s, x, -1.f), dy));
    float g[4];
    grad_to_host(s, x, g);
    for (int k = 0; k < 4; k++) CHECK(g[k] == -dy[k], "backward_grad: grad[%d] = %g", k, g[k]);
    volt_step_end(s);
    volt_step_destroy(s);
}

/* ---- arange ---------------------------------------------------------------------------- */
static void test_arange(void) {
    volt_step_config sc;
    volt_step_config_init(&sc);
    volt_step *s;
    CHECK_OK(volt_step_create(&sc, &s));
    volt_step_begin(s, true, 0);
    volt_tensor *a = volt_arange(s, VOLT_I32, 37), *b = volt_arange(s, VOLT_I64, 5), *e = volt_arange(s, VOLT_I32, 0);
    CHECK(a && b && e && a->dtype == VOLT_I32 && a->shape.ndim == 1 && a->shape.d[0] == 37 && volt_tensor_numel(e) == 0,
          "arange shapes: %s", volt_step_errmsg(s));
    int32_t ha[37];
    int64_t hb[5];
    CHECK_OK(volt_tensor_to_host(a, ha));
    CHECK_OK(volt_tensor_to_host(b, hb));
    for (int i = 0; i < 37; i++) CHECK(ha[i] == i, "arange i32 [%d] = %d", i, ha[i]);
    for (int i = 0; i < 5; i++) CHECK(hb[i] == i, "arange i64 [%d] = %lld", i, (long long)hb[i]);
    CHECK(s->n_nodes == 0, "arange is not on the tape");
    CHECK(volt_arange(s, VOLT_F32, 3) == NULL && volt_step_status(s) == VOLT_ERR_DTYPE && strstr(volt_step_errmsg(s), "i32 or i64"),
          "arange f32: %s", volt_step_errmsg(s));
    volt_step_begin(s, true, 0);
    CHECK(volt_arange(s, VOLT_I64, -1) == NULL && volt_step_status(s) == VOLT_ERR_INVALID_ARG && strstr(volt_step_errmsg(s), "-1"),
          "arange -1: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_destroy(s);
}


/* detect_anomaly (core/anomaly.c): a NaN in an op's output (forward) or in a gradient its
 * backward wrote fails the step naming the op and its parameters; off, the step goes on. */
static void test_anomaly(void) {
    volt_params *ps;
    volt_step *s;
    mlp3 m;
    make(&ps, &s, &m, 3, 4, 6, 2);
    const float xv[8] = { 1, -2, 3, 0.5f, -1, 2, 0, 1 };
    float nan_seed[4];
    for (int i = 0; i < 4; i++) nan_seed[i] = i == 2 ? NAN : 1.f;
    for (int on = 0; on < 2; on++) {   /* backward: the NaN comes from the seed */
        s->detect_anomaly = on;
        volt_step_begin(s, true, 0);
        volt_tensor *x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(2, 4), xv);
        volt_tensor *h = volt_relu(s, volt_linear(s, x, m.w[0], m.b[0]));
        volt_tensor *y = volt_linear(s, volt_linear(s, h, m.w[1], m.b[1]), m.w[2], m.b[2]);
        volt_status st = volt_step_backward_grad(s, y, nan_seed);
        if (on) CHECK(st == VOLT_ERR_NUMERIC && strstr(volt_step_errmsg(s), "detect_anomaly") && strstr(volt_step_errmsg(s), "linear") &&
                      strstr(volt_step_errmsg(s), "backward") && strstr(volt_step_errmsg(s), "head.weight"),
                      "anomaly in backward: %s (%s)", volt_step_errmsg(s), volt_status_str(st));
        else CHECK(st == VOLT_OK, "off: the NaN goes through (%s)", volt_step_errmsg(s));
        volt_step_end(s);
    }
    /* forward: a NaN weight */
    float w[36];   /* fc2.weight: 6 x 6 */
    CHECK_OK(volt_tensor_to_host(m.w[1], w));
    w[5] = NAN;
    CHECK_OK(volt_tensor_copy_from_host(m.w[1], w));
    s->detect_anomaly = true;
    volt_step_begin(s, true, 0);
    volt_tensor *x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(2, 4), xv);
    volt_tensor *h = volt_linear(s, volt_relu(s, volt_linear(s, x, m.w[0], m.b[0])), m.w[1], m.b[1]);
    CHECK(!h && volt_step_status(s) == VOLT_ERR_NUMERIC && strstr(volt_step_errmsg(s), "'linear' returned nan values in its output") &&
          strstr(volt_step_errmsg(s), "fc2.weight") && strstr(volt_step_errmsg(s), "tape node 2"), "anomaly in forward: %s",
          volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, false, 0);   /* evaluation steps are not checked */
    x = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(2, 4), xv);
    h = volt_linear(s, volt_relu(s, volt_linear(s, x, m.w[0], m.b[0])), m.w[1], m.b[1]);
    CHECK(h != NULL && volt_step_status(s) == VOLT_OK, "not in an evaluation step");
    volt_step_end(s);
    volt_step_destroy(s);
    volt_params_destroy(ps);
}

int main(void) {
    test_grad_modes();
    test_arange();
    test_arena();
    test_hook_order();
    test_separable();
    test_xor();
    test_determinism();
    test_anomaly();
    return vtest_finish();
}
