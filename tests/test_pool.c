/* The grad pool (core/pool.c): activation gradients are given back during backward, so a
 * training step holds forward's activations plus the grads in flight, not every grad.
 *   - the pool itself: best fit, merging, blocks of their own past the main block, regrow
 *     at reset, then no heap allocation for a step of the same shape;
 *   - a step: a chain of 24 tanh (each activation A bytes) keeps ~24 A + a few grads at its
 *     peak instead of ~48 A; the leaf's grad survives backward and is right; an
 *     intermediate's grad is gone after backward (VOLT_ERR_STATE, as PyTorch's non-leaf
 *     .grad is None);
 *   - residual branches (add: one grad buffer passed on to an input) and reshape views
 *     give the same grads as the analytic ones. */
#include "vtest.h"
#include "core/internal.h"
#include "volt/ops.h"

static void test_pool_unit(void) {
    volt_pool p;
    volt__pool_init(&p, volt__device_cpu());
    /* empty pool: everything is a block of its own, freed at once when given back */
    char *a = volt__pool_alloc(&p, 1000), *b = volt__pool_alloc(&p, 3000);
    CHECK(a && b && p.n_ext == 2 && p.used == 1024 + 3008, "ext blocks %d used %zu", p.n_ext, p.used);
    volt__pool_release(&p, a);
    CHECK(p.n_ext == 1 && p.used == 3008, "released ext: %d %zu", p.n_ext, p.used);
    volt__pool_release(&p, b);
    volt__pool_reset(&p);
    CHECK(p.cap >= 4032 && p.n_seg == 1 && p.seg[0].free, "regrown to the step peak: cap %zu", p.cap);
    uint64_t allocs = p.heap_allocs;
    /* the same requests now land in the main block, in order */
    a = volt__pool_alloc(&p, 1000);
    b = volt__pool_alloc(&p, 3000);
    CHECK(a == p.base && b == p.base + 1024, "offsets %td %td", a - p.base, b - p.base);
    CHECK(p.heap_allocs == allocs && p.n_ext == 0, "no allocation in a step of the same shape");
    /* give back a, then a smaller request takes a's place (best fit), the rest merges */
    volt__pool_release(&p, a);
    char *c = volt__pool_alloc(&p, 512);
    CHECK(c == p.base, "best fit reuses the freed hole");
    volt__pool_release(&p, c);
    volt__pool_release(&p, b);
    CHECK(p.used == 0 && p.n_seg == 1 && p.seg[0].size == p.cap, "all merged: %d segments", p.n_seg);
    volt__pool_release(&p, p.base + 64);   /* not a block start: ignored */
    CHECK(p.used == 0, "foreign pointer ignored");
    volt__pool_free(&p);
}

/* The regrow is the step's own layout: a step that fragments (a hole too small for a later
 * request) gets a block of exactly its best-fit high-water, and the same step then lands on
 * the same offsets with no block of its own. */
static void test_pool_exact(void) {
    volt_pool p;
    volt__pool_init(&p, volt__device_cpu());
    size_t offs[2][4];
    for (int rep = 0; rep < 3; rep++) {
        char *a = volt__pool_alloc(&p, 1000), *b = volt__pool_alloc(&p, 3000);
        volt__pool_release(&p, a);                      /* a 1024-byte hole */
        char *c = volt__pool_alloc(&p, 2000);           /* does not fit the hole: past b */
        char *d = volt__pool_alloc(&p, 900);            /* fits the hole */
        volt__pool_release(&p, b);
        char *e = volt__pool_alloc(&p, 5000);           /* too big for b's hole: the tail, past c */
        CHECK(a && b && c && d && e, "allocations");
        if (rep) {
            CHECK(p.n_ext == 0 && !p.overflowed, "rep %d: blocks of their own %d", rep, p.n_ext);
            offs[rep - 1][0] = (size_t)(c - p.base);
            offs[rep - 1][1] = (size_t)(d - p.base);
            offs[rep - 1][2] = (size_t)(e - p.base);
            offs[rep - 1][3] = p.cap;
            /* 1024 (d in a's hole) + 3008 (b's hole) + 2048 (c) + 5056 (e): the high-water */
            CHECK(d == p.base && c == p.base + 4032 && e == p.base + 6080 && p.cap == 6080 + 5056,
                  "layout: c %td d %td e %td cap %zu", c - p.base, d - p.base, e - p.base, p.cap);
        }
        volt__pool_release(&p, c);
        volt__pool_release(&p, d);
        volt__pool_release(&p, e);
        volt__pool_reset(&p);
    }
    CHECK(!memcmp(offs[0], offs[1], sizeof offs[0]), "the same step, the same offsets");
    volt__pool_free(&p);
}

#define CHAIN 24
#define N 4096
static void test_chain(void) {
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.backend = "cpu";
    volt_step *s;
    CHECK_OK(volt_step_create(&sc, &s));
    float *x0 = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x0[i] = (float)((i % 97) - 48) / 64.f;
    const size_t A = sizeof(float) * N;
    size_t peaks[3];
    uint64_t allocs[3];
    for (int rep = 0; rep < 3; rep++) {
        CHECK_OK(volt_step_begin(s, true, 0));
        volt_tensor *x = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(N), x0));
        volt_tensor *h = x, *mid = NULL;
        for (int k = 0; k < CHAIN; k++) {
            h = volt_tanh(s, h);
            if (k == CHAIN / 2) mid = h;
        }
        volt_tensor *loss = volt_sum(s, h);
        size_t fwd = volt_step_arena_used(s);
        CHECK_OK(volt_step_backward(s, loss));
        peaks[rep] = volt_step_arena_peak(s);
        allocs[rep] = volt_step_heap_allocs(s);
        /* forward holds x + CHAIN activations; backward adds the leaf's grad and at most
         * two grads in flight (a node's dy and dx), not one per activation */
        CHECK(peaks[rep] <= fwd + 4 * A, "peak %zu > forward %zu + 4 activations (%zu)", peaks[rep], fwd, 4 * A);
        CHECK(fwd >= (CHAIN + 1) * A, "forward holds the chain: %zu", fwd);
        /* the leaf's grad: prod of (1 - tanh^2) along the chain */
        CHECK_OK(volt_tensor_grad_to_host(x, g));
        double worst = 0;
        for (int i = 0; i < N; i += 37) {
            double v = x0[i], d = 1;
            for (int k = 0; k < CHAIN; k++) { v = tanh(v); d *= 1 - v * v; }
            double e = fabs(g[i] - d) / (fabs(d) + 1e-6);
            if (e > worst) worst = e;
        }
        CHECK(worst < 1e-4, "leaf grad rel err %g", worst);
        CHECK(volt_tensor_grad_to_host(mid, y) == VOLT_ERR_STATE, "intermediate grad given back");
        volt_step_end(s);
    }
    CHECK(allocs[2] == allocs[1], "steady state allocates nothing (%llu -> %llu)",
          (unsigned long long)allocs[1], (unsigned long long)allocs[2]);
    volt_step_destroy(s);
    free(x0); free(g); free(y);
}

/* y = sum(tanh(x) + reshape(reshape(x)) * x): the add hands its grad buffer to its first
 * input, the reshapes hand theirs on too; grads must equal the analytic ones. */
static void test_alias(void) {
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.backend = "cpu";
    volt_step *s;
    CHECK_OK(volt_step_create(&sc, &s));
    enum { R = 7, C = 9 };
    float x0[R * C], g[R * C];
    for (int i = 0; i < R * C; i++) x0[i] = (float)(i - 30) / 17.f;
    for (int rep = 0; rep < 2; rep++) {
        CHECK_OK(volt_step_begin(s, true, 0));
        volt_tensor *x = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(R, C), x0));
        volt_tensor *r = volt_reshape(s, volt_reshape(s, x, VOLT_SHAPE(C, R)), VOLT_SHAPE(R, C));
        volt_tensor *t = volt_add(s, volt_tanh(s, x), volt_mul(s, r, x));
        CHECK_OK(volt_step_backward(s, volt_sum(s, volt_add(s, t, t))));
        CHECK_OK(volt_tensor_grad_to_host(x, g));
        for (int i = 0; i < R * C; i++) {
            double th = tanh(x0[i]), want = 2 * ((1 - th * th) + 2 * x0[i]);
            CHECK_CLOSE(g[i], want, 1e-5, 1e-6);
        }
        volt_step_end(s);
    }
    volt_step_destroy(s);
}

int main(void) {
    test_pool_unit();
    test_pool_exact();
    test_chain();
    test_alias();
    return vtest_finish();
}
