/* The "cuda" backend's fused attention and dropout against the CPU backend (label gpu;
 * exit 77 when no CUDA device or no cuda backend is built in).
 *
 * Each case runs the same op on a "cpu" step and a "cuda" step (same seed and RNG offset)
 * and compares the output and the grads of q, k, v (or x): f32 relative 1e-4 of the
 * largest magnitude, 16-bit compute 1e-2. Dropout draws from the same Philox counters on
 * both backends, so a mask that differs in one element fails by far more than the
 * tolerance. Sizes: T = 1, 37, 128, 513 (16-bit: 257; partial tiles), B 2, H 3, D 64, both layouts
 * (B, H, T, D) and packed (B, T, H*D); key masks u8, i32, i64 (a hole, a padding tail, a
 * fully masked batch row); causal; dropout 0, 0.1, 0.5; grad modes STORE and ADD (q = k = v
 * one tensor; an input used twice). Head dims 8, 32, 40, 128, 200 at small shapes (every
 * tier of core/cuda/attention_*.cu, exact and padded); 257 is refused with a clear error.
 * VOLT_TEST_AGAINST=cpu-strict runs the same comparisons without a GPU (checks this test). */
#include <stdint.h>
#include "core/internal.h"
#include "volt/ops.h"
#include "vtest.h"

typedef struct acase {
    int64_t B, H, Tq, Tk, D;
    int mask;          /* 0 none, 1 u8, 2 i32, 3 i64 */
    int dead_row;      /* batch row 1 masks every key */
    bool causal, self; /* self: q = k = v one tensor (STORE then ADD into its grad) */
    float p;
    volt_dtype compute;
    bool packed;       /* volt_attention_heads: q, k, v (B, T, H*D) */
} acase;

typedef struct result { float *o, *dq, *dk, *dv; volt_status st; char err[256]; } result;

static uint64_t g_rng = 12345;
static float urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
}

static volt_dtype mask_dt(int m) { return m == 1 ? VOLT_U8 : m == 2 ? VOLT_I32 : VOLT_I64; }

/* mask (B, Tk) as dtype m: batch 0 drops key 3 (a hole), batch 1 a padding tail of Tk/3
 * keys, or every key with dead_row */
static void *make_mask(const acase *c) {
    int64_t n = c->B * c->Tk;
    size_t es = c->mask == 1 ? 1 : c->mask == 2 ? 4 : 8;
    char *m = calloc((size_t)n, es);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t j = 0; j < c->Tk; j++) {
            bool keep = b == 0 ? (j != 3 || c->Tk == 1) : (c->dead_row ? false : j < c->Tk - c->Tk / 3);
            int64_t t = b * c->Tk + j;
            if (c->mask == 1) ((uint8_t *)m)[t] = keep;
            else if (c->mask == 2) ((int32_t *)m)[t] = keep;
            else ((int64_t *)m)[t] = keep ? 7 : 0;   /* any nonzero attends */
        }
    return m;
}

/* The backend checked against "cpu": "cuda", or $VOLT_TEST_AGAINST (cpu-strict checks this
 * harness itself on a machine without a GPU). */
static const char *g_dev = "cuda";

static result run(const char *backend, const acase *c, const float *q, const float *k, const float *v,
                  const float *dout, const void *mask) {
    result r = { 0 };
    int64_t nq = c->B * c->H * c->Tq * c->D, nk = c->B * c->H * c->Tk * c->D;
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.backend = backend;
    cfg.seed = 77;
    cfg.arena_bytes = 4u << 20;   /* grows when a case needs more; the simulator fills a new arena with 0xff */
    volt_step *s = NULL;
    if ((r.st = volt_step_create(&cfg, &s)) != VOLT_OK) {
        snprintf(r.err, sizeof r.err, "step on '%s': %s", backend, volt_status_str(r.st));
        return r;
    }
    volt_step_begin(s, true, 5);
    volt_step_set_compute_dtype(s, c->compute);
    volt_shape sq = c->packed ? VOLT_SHAPE(c->B, c->Tq, c->H * c->D) : VOLT_SHAPE(c->B, c->H, c->Tq, c->D);
    volt_shape sk = c->packed ? VOLT_SHAPE(c->B, c->Tk, c->H * c->D) : VOLT_SHAPE(c->B, c->H, c->Tk, c->D);
    volt_tensor *tq = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, sq, q));
    volt_tensor *tk = c->self ? tq : volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, sk, k));
    volt_tensor *tv = c->self ? tq : volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, sk, v));
    volt_tensor *tm = c->mask ? volt_tensor_from_host(s, mask_dt(c->mask), VOLT_SHAPE(c->B, c->Tk), mask) : NULL;
    volt_tensor *o = c->packed ? volt_attention_heads(s, tq, tk, tv, c->H, tm, c->causal, c->p)
                               : volt_attention_dropout(s, tq, tk, tv, tm, c->causal, c->p);
    if (o && volt_step_backward_grad(s, o, dout) == VOLT_OK) {
        r.o = malloc(sizeof(float) * (size_t)nq);
        r.dq = malloc(sizeof(float) * (size_t)nq);
        r.dk = malloc(sizeof(float) * (size_t)nk);
        r.dv = malloc(sizeof(float) * (size_t)nk);
        volt_tensor_to_host(o, r.o);
        volt_tensor_grad_to_host(tq, r.dq);
        volt_tensor_grad_to_host(tk, r.dk);
        volt_tensor_grad_to_host(tv, r.dv);
    } else {
        r.st = volt_step_status(s) ? volt_step_status(s) : VOLT_ERR_BACKEND;
        snprintf(r.err, sizeof r.err, "%s", volt_step_errmsg(s));
    }
    volt_step_end(s);
    volt_step_destroy(s);
    return r;
}

static void result_free(result *r) { free(r->o); free(r->dq); free(r->dk); free(r->dv); }

/* max |a - b| / max(max |b|, floor) (NaN counts as a failure) */
static double rel_err(const float *a, const float *b, int64_t n, double floor) {
    double e = 0, sc = floor > 1e-30 ? floor : 1e-30;
    for (int64_t t = 0; t < n; t++) {
        double d = fabs((double)a[t] - b[t]);
        if (!(d <= e)) e = d;
        if (fabs(b[t]) > sc) sc = fabs(b[t]);
    }
    return e / sc;
}

static void check_case(const acase *c) {
    int64_t nq = c->B * c->H * c->Tq * c->D, nk = c->B * c->H * c->Tk * c->D;
    float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk),
          *v = malloc(sizeof(float) * (size_t)nk), *g = malloc(sizeof(float) * (size_t)nq);
    for (int64_t t = 0; t < nq; t++) { q[t] = 2.f * urand(); g[t] = urand(); }
    for (int64_t t = 0; t < nk; t++) { k[t] = 2.f * urand(); v[t] = urand(); }
    void *mask = c->mask ? make_mask(c) : NULL;
    result rc = run("cpu", c, q, k, v, g, mask), rg = run(g_dev, c, q, k, v, g, mask);
    char name[160];
    snprintf(name, sizeof name, "B%lld H%lld Tq%lld Tk%lld D%lld mask%d%s%s%s%s p%g %s", (long long)c->B,
             (long long)c->H, (long long)c->Tq, (long long)c->Tk, (long long)c->D, c->mask, c->dead_row ? " dead-row" : "", c->causal ? " causal" : "",
             c->self ? " q=k=v" : "", c->packed ? " packed" : "", c->p, c->compute == VOLT_F32 ? "f32" : c->compute == VOLT_BF16 ? "bf16" : "f16");
    CHECK(rc.st == VOLT_OK, "%s: cpu: %s", name, rc.err);
    CHECK(rg.st == VOLT_OK, "%s: cuda: %s", name, rg.err);
    if (rc.st == VOLT_OK && rg.st == VOLT_OK) {
        double tol = c->compute == VOLT_F32 ? 1e-4 : 1e-2;
        /* dq and dk on the scale of dv as well: with one visible key the softmax is constant,
         * so they are exactly 0 and both backends give rounding noise of dP - delta (the CUDA
         * simulator showed ~1e-7 against dv ~ 1, i.e. "rel err 1.5" against the noise) */
        double sdv = 0;
        for (int64_t t = 0; t < nk; t++) sdv = fabs(rc.dv[t]) > sdv ? fabs(rc.dv[t]) : sdv;
        double eo = rel_err(rg.o, rc.o, nq, 0), eq = rel_err(rg.dq, rc.dq, nq, sdv);
        double ek = rel_err(rg.dk, rc.dk, nk, sdv), ev = rel_err(rg.dv, rc.dv, nk, 0);
        printf("%-66s o %.2e dq %.2e dk %.2e dv %.2e\n", name, eo, eq, ek, ev);
        CHECK(eo <= tol, "%s: output rel err %.3e > %.0e", name, eo, tol);
        CHECK(eq <= tol, "%s: dq rel err %.3e > %.0e", name, eq, tol);
        CHECK(ek <= tol, "%s: dk rel err %.3e > %.0e", name, ek, tol);
        CHECK(ev <= tol, "%s: dv rel err %.3e > %.0e", name, ev, tol);
        if (c->dead_row) {   /* batch row 1 sees no key: zero output and grads, no NaN */
            int64_t half = nq / 2, bad = 0;
            for (int64_t t = half; t < nq; t++) bad += rg.o[t] != 0.f || rg.dq[t] != 0.f;
            CHECK(bad == 0, "%s: %lld nonzero outputs/grads on the fully masked batch row", name, (long long)bad);
        }
    }
    result_free(&rc);
    result_free(&rg);
    free(q); free(k); free(v); free(g); free(mask);
}

/* volt_dropout on both backends: forward bit-identical (the same mask, the same x * scale),
 * backward through STORE (y alone) and ADD (x also feeds a scale: its grad already holds
 * 2 dy when dropout's backward runs). */
static void check_dropout(int64_t n, float p, bool add) {
    float *x = malloc(sizeof(float) * (size_t)n), *g = malloc(sizeof(float) * (size_t)n);
    for (int64_t t = 0; t < n; t++) { x[t] = urand(); g[t] = urand(); }
    float *y[2], *dx[2];
    const char *be[2] = { "cpu", g_dev };
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        y[i] = calloc((size_t)n, sizeof(float));
        dx[i] = calloc((size_t)n, sizeof(float));
        volt_step_config cfg;
        volt_step_config_init(&cfg);
        cfg.backend = be[i];
        cfg.seed = 1234;
        cfg.arena_bytes = 4u << 20;
        volt_step *s = NULL;
        if (volt_step_create(&cfg, &s) != VOLT_OK) { ok = false; CHECK(false, "step on %s", be[i]); continue; }
        volt_step_begin(s, true, 3);
        volt_tensor *tx = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(n), x));
        volt_tensor *d = volt_dropout(s, tx, p);
        volt_tensor *out = add ? volt_add(s, d, volt_scale(s, tx, 2.f)) : d;
        volt_status st = out ? volt_step_backward_grad(s, out, g) : volt_step_status(s);
        CHECK(st == VOLT_OK, "dropout n=%lld on %s: %s", (long long)n, be[i], volt_step_errmsg(s));
        if (st == VOLT_OK) {
            volt_tensor_to_host(d, y[i]);
            volt_tensor_grad_to_host(tx, dx[i]);
        } else ok = false;
        volt_step_end(s);
        volt_step_destroy(s);
    }
    if (ok) {
        int64_t dy = 0, kept = 0;
        for (int64_t t = 0; t < n; t++) {
            dy += memcmp(&y[0][t], &y[1][t], sizeof(float)) != 0;
            kept += y[0][t] != 0.f;
        }
        double e = rel_err(dx[1], dx[0], n, 0);
        printf("dropout n=%-8lld p=%.2f %s: %lld forward elements differ, kept %lld, dx rel err %.2e\n",
               (long long)n, p, add ? "ADD  " : "STORE", (long long)dy, (long long)kept, e);
        CHECK(dy == 0, "dropout n=%lld p=%g: %lld elements differ between cpu and cuda", (long long)n, p, (long long)dy);
        CHECK(e <= 1e-6, "dropout n=%lld p=%g: dx rel err %.3e", (long long)n, p, e);
    }
    for (int i = 0; i < 2; i++) { free(y[i]); free(dx[i]); }
    free(x); free(g);
}

int main(void) {
    const char *against = getenv("VOLT_TEST_AGAINST");
    if (against && *against) g_dev = against;
    const volt_backend *cuda = volt__backend_find(g_dev);
    if (!cuda) { printf("SKIP: no '%s' backend in this build\n", g_dev); return 77; }
    if (cuda->device_count() < 1) { printf("SKIP: no '%s' device\n", g_dev); return 77; }
    /* VOLT_TEST_QUICK=1: one sequence length (37: partial tiles), two head dims and the small
     * dropout cases, every kernel still launched (f32 and tensor-core, forward and backward):
     * what scripts/device-check.sh's sanitize stage runs under compute-sanitizer, where each
     * launch is ~100 times slower */
    const char *qe = getenv("VOLT_TEST_QUICK");
    const bool quick = qe && *qe && strcmp(qe, "0");
    printf("checking '%s' against 'cpu'%s\n", g_dev, quick ? " (VOLT_TEST_QUICK: a subset)" : "");

    const int64_t Ts[] = { 37, 1, 128, 513 };
    for (size_t ti = 0; ti < (quick ? 1 : sizeof Ts / sizeof Ts[0]); ti++) {
        int64_t T = Ts[ti];
        /* 16-bit compute runs on tensor cores: wmma costs the simulator 32 times its work (every
         * lane does the whole tile), so the 16-bit cases take T = 257 (five key tiles, a partial
         * one) and one head in place of T = 513 */
        int64_t H16 = T > 256 ? 1 : 3, T16 = T > 256 ? 257 : T;
        acase cs[] = {
            { 2, 3, T, T, 64, 0, 0, false, false, 0.f, VOLT_F32, false },
            { 2, 3, T, T, 64, 1, 0, false, false, 0.1f, VOLT_F32, false },
            { 2, 3, T, T, 64, 3, 0, true, false, 0.f, VOLT_F32, false },
            { 2, 3, T, T, 64, 2, 1, true, false, 0.5f, VOLT_F32, false },
            { 2, 3, T, T, 64, 1, 0, false, true, 0.1f, VOLT_F32, false },
            { 2, H16, T16, T16, 64, 2, 0, false, false, 0.1f, VOLT_BF16, false },
            { 2, H16, T16, T16, 64, 0, 0, true, false, 0.f, VOLT_F16, false },
            /* 16-bit q = k = v (the tensor-core backward's STORE then ADD), dead row, dropout */
            { 2, H16, T16, T16, 64, 3, 1, true, true, 0.1f, VOLT_F16, true },
        };
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_case(&cs[i]);
    }
    /* cross attention, Tq != Tk */
    if (!quick) check_case(&(acase){ 2, 3, 37, 129, 64, 1, 0, false, false, 0.1f, VOLT_F32, false });
    /* the packed layout (volt_attention_heads, what nn's attention uses): rows H*D apart */
    check_case(&(acase){ 2, 3, 37, 129, 64, 3, 0, false, false, 0.1f, VOLT_F32, true });
    if (!quick) {
        check_case(&(acase){ 2, 3, 130, 130, 64, 1, 0, false, false, 0.1f, VOLT_F32, true });
        check_case(&(acase){ 2, 3, 130, 130, 64, 2, 1, true, false, 0.f, VOLT_F32, true });
        check_case(&(acase){ 2, 2, 257, 257, 64, 1, 0, false, false, 0.1f, VOLT_BF16, true });
        check_case(&(acase){ 2, 3, 128, 128, 64, 1, 0, true, true, 0.1f, VOLT_F32, true });
    }

    /* other head dims (core/cuda/attention_tile.cuh tiers): 8 and 40 padded to 32 and 64, 32 and 128 exact,
     * 200 padded to 256; f32 and 16-bit, masks, causal, dropout, q = k = v, both layouts.
     * Small shapes: partial query and key tiles at every tier (37 rows, 19 or 70 keys). */
    const int64_t Ds[] = { 40, 128, 8, 32, 200 };
    for (size_t di = 0; di < (quick ? 2 : sizeof Ds / sizeof Ds[0]); di++) {
        int64_t D = Ds[di];
        acase cs[] = {
            { 2, 2, 37, 37, D, 1, 0, false, false, 0.1f, VOLT_F32, false },
            { 2, 2, 37, 37, D, 2, 1, true, false, 0.5f, VOLT_F32, false },
            { 2, 2, 19, 70, D, 3, 0, false, false, 0.1f, VOLT_F32, true },
            { 1, 2, 37, 37, D, 1, 0, false, true, 0.1f, VOLT_F32, true },
            { 2, 2, 70, 70, D, 2, 0, true, false, 0.1f, VOLT_BF16, false },
            { 2, 2, 37, 19, D, 1, 0, false, false, 0.f, VOLT_F16, true },
            { 2, 2, 37, 37, D, 2, 1, false, true, 0.5f, VOLT_F16, false },
            { 1, 2, 129, 129, D, 1, 0, true, false, 0.1f, VOLT_BF16, true },
        };
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_case(&cs[i]);
    }

    /* a head dim past the kernels' (VOLT_CUDA_ATTN_MAX_D = 256): a clear error, not a wrong
     * answer (the cpu backend takes any) */
    {
        acase c = { 1, 1, 2, 2, 257, 0, 0, false, false, 0.f, VOLT_F32, false };
        float *buf = calloc(2 * 257, sizeof(float));
        result r = run(g_dev, &c, buf, buf, buf, buf, NULL);
        if (!strcmp(g_dev, "cuda"))
            CHECK(r.st == VOLT_ERR_UNSUPPORTED && strstr(r.err, "head dim 257"), "D=257 on cuda: %s (%s)",
                  volt_status_str(r.st), r.err);
        else
            CHECK(r.st == VOLT_OK, "D=257 on %s: %s (%s)", g_dev, volt_status_str(r.st), r.err);
        result_free(&r);
        free(buf);
    }

    check_dropout(1, 0.5f, false);
    check_dropout(4099, 0.1f, false);
    if (!quick) {
        check_dropout(12 * 512 * 768 + 3, 0.1f, true);
        check_dropout(100003, 0.9f, true);
    }
    return vtest_finish();
}
