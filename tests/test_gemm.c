/* The CPU GEMM entry (core/cpu/gemm.c): oneDNN primitives (or OpenBLAS) against a naive
 * double-precision reference at odd sizes, every transpose combination, alpha/beta, fused
 * bias, batches with strides, padded leading dimensions, inside an OpenMP parallel region;
 * the bf16 path against the f32 GEMM of the rounded operands; bitwise repeatability; the
 * primitive cache (repeat calls reuse it, more shapes than it holds still give right
 * results). */
#include <omp.h>
#include "vtest.h"
#include "core/cpu/kernels.h"
#include "volt/precision.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) {   /* uniform in [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rand_buf(int64_t n) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = urand();
    return p;
}

/* C_ref = alpha (op(A) op(B) + bias) + beta C0, in double. */
static void ref_gemm(const volt__cpu_gemm_op *g, const float *A, const float *B, const float *C0, double *R) {
    for (int64_t z = 0; z < g->batch; z++)
        for (int64_t i = 0; i < g->M; i++)
            for (int64_t j = 0; j < g->N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < g->K; k++) {
                    double a = A[z * g->sa + (g->ta == 'T' ? k * g->lda + i : i * g->lda + k)];
                    double b = B[z * g->sb + (g->tb == 'T' ? j * g->ldb + k : k * g->ldb + j)];
                    acc += a * b;
                }
                if (g->bias) acc += g->bias[j];
                int64_t c = z * g->sc + i * g->ldc + j;
                R[c] = g->alpha * acc + (g->beta == 0 ? 0.0 : g->beta * (double)C0[c]);
            }
}

/* Max |C - R| / (1 + max |R|) over the written elements; untouched padding checked equal. */
static double rel_err(const volt__cpu_gemm_op *g, const float *C, const float *C0, const double *R, bool *pad_ok) {
    double e = 0, mx = 0;
    *pad_ok = true;
    for (int64_t z = 0; z < g->batch; z++)
        for (int64_t i = 0; i < g->M; i++)
            for (int64_t j = 0; j < g->ldc; j++) {
                int64_t c = z * g->sc + i * g->ldc + j;
                if (j >= g->N) { if (C[c] != C0[c]) *pad_ok = false; continue; }
                double d = fabs((double)C[c] - R[c]);
                if (d > e) e = d;
                if (fabs(R[c]) > mx) mx = fabs(R[c]);
            }
    return e / (1 + mx);
}

/* One case: f32 GEMM vs the double reference (tolerance scaled by sqrt(K)). */
static void check_f32(char ta, char tb, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                      bool bias, int pad, bool nested) {
    int64_t rowsA = ta == 'T' ? K : M, colsA = ta == 'T' ? M : K;
    int64_t rowsB = tb == 'T' ? N : K, colsB = tb == 'T' ? K : N;
    volt__cpu_gemm_op g = {.ta = ta, .tb = tb, .batch = batch, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta,
                          .ab = VOLT_F32, .lda = colsA + pad, .ldb = colsB + pad, .ldc = N + pad};
    g.sa = rowsA * g.lda; g.sb = rowsB * g.ldb; g.sc = M * g.ldc;
    float *A = rand_buf(batch * g.sa), *B = rand_buf(batch * g.sb), *C0 = rand_buf(batch * g.sc);
    float *C = malloc(sizeof(float) * (size_t)(batch * g.sc)), *bv = bias ? rand_buf(N) : NULL;
    double *R = malloc(sizeof(double) * (size_t)(batch * g.sc));
    memcpy(C, C0, sizeof(float) * (size_t)(batch * g.sc));
    g.A = A; g.B = B; g.C = C; g.bias = bv;
    ref_gemm(&g, A, B, C0, R);
    if (nested) {   /* the same GEMM from every thread of a parallel region, own output each */
        int nt = omp_get_max_threads();
        float *Cs = malloc(sizeof(float) * (size_t)(batch * g.sc * nt));
        for (int t = 0; t < nt; t++) memcpy(Cs + t * batch * g.sc, C0, sizeof(float) * (size_t)(batch * g.sc));
        #pragma omp parallel num_threads(nt)
        {
            volt__cpu_gemm_op gt = g;
            gt.C = Cs + omp_get_thread_num() * batch * g.sc;
            volt__cpu_gemm_ex(&gt);
        }
        for (int t = 0; t < nt; t++) {
            bool pad_ok;
            double e = rel_err(&g, Cs + t * batch * g.sc, C0, R, &pad_ok);
            CHECK(e < 2e-6 * sqrt((double)K + 1) && pad_ok, "nested %c%c b%lld %lldx%lldx%lld thread %d: err %g pad %d",
                  ta, tb, (long long)batch, (long long)M, (long long)N, (long long)K, t, e, pad_ok);
        }
        free(Cs);
    } else {
        volt__cpu_gemm_ex(&g);
        bool pad_ok;
        double e = rel_err(&g, C, C0, R, &pad_ok);
        CHECK(e < 2e-6 * sqrt((double)K + 1) && pad_ok,
              "%c%c batch %lld %lldx%lldx%lld alpha %g beta %g bias %d pad %d: err %g pad ok %d", ta, tb,
              (long long)batch, (long long)M, (long long)N, (long long)K, alpha, beta, bias, pad, e, pad_ok);
        /* bitwise repeatable: the cached primitive again on the same inputs */
        float *C2 = malloc(sizeof(float) * (size_t)(batch * g.sc));
        memcpy(C2, C0, sizeof(float) * (size_t)(batch * g.sc));
        g.C = C2;
        volt__cpu_gemm_ex(&g);
        CHECK(!memcmp(C, C2, sizeof(float) * (size_t)(batch * g.sc)), "%c%c %lldx%lldx%lld: a second run differs",
              ta, tb, (long long)M, (long long)N, (long long)K);
        free(C2);
    }
    free(A); free(B); free(C0); free(C); free(bv); free(R);
}

/* bf16 operands: against the f32 GEMM of the operands rounded to bf16 (products of two
 * bf16 are exact in f32: only the summation order may differ) and the double reference
 * of the rounded operands. */
static void check_bf16(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    int64_t rowsA = ta == 'T' ? K : M, colsA = ta == 'T' ? M : K, rowsB = tb == 'T' ? N : K, colsB = tb == 'T' ? K : N;
    int64_t na = rowsA * colsA, nb = rowsB * colsB;
    float *A = rand_buf(na), *B = rand_buf(nb), *C0 = rand_buf(M * N), *C = malloc(sizeof(float) * (size_t)(M * N));
    float *Cf = malloc(sizeof(float) * (size_t)(M * N));
    uint16_t *Ah = malloc(2 * (size_t)na), *Bh = malloc(2 * (size_t)nb);
    volt_f32_to_bf16_array(A, Ah, na);
    volt_f32_to_bf16_array(B, Bh, nb);
    volt_bf16_to_f32_array(Ah, A, na);   /* A, B: the rounded values */
    volt_bf16_to_f32_array(Bh, B, nb);
    memcpy(C, C0, sizeof(float) * (size_t)(M * N));
    memcpy(Cf, C0, sizeof(float) * (size_t)(M * N));
    volt__cpu_gemm_bf16(ta, tb, M, N, K, alpha, Ah, colsA, Bh, colsB, beta, C, N);
    volt__cpu_gemm(ta, tb, M, N, K, alpha, A, colsA, B, colsB, beta, Cf, N);
    volt__cpu_gemm_op g = {.ta = ta, .tb = tb, .batch = 1, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta,
                          .lda = colsA, .ldb = colsB, .ldc = N};
    double *R = malloc(sizeof(double) * (size_t)(M * N));
    ref_gemm(&g, A, B, C0, R);
    double e = 0, ef = 0, mx = 0;
    for (int64_t i = 0; i < M * N; i++) {
        e = fmax(e, fabs(C[i] - R[i]));
        ef = fmax(ef, fabs((double)C[i] - Cf[i]));
        mx = fmax(mx, fabs(R[i]));
    }
    CHECK(e / (1 + mx) < 2e-6 * sqrt((double)K + 1) && ef / (1 + mx) < 4e-6 * sqrt((double)K + 1),
          "bf16 %c%c %lldx%lldx%lld: vs double %g, vs rounded-operand f32 %g", ta, tb, (long long)M, (long long)N,
          (long long)K, e / (1 + mx), ef / (1 + mx));
    free(A); free(B); free(C0); free(C); free(Cf); free(Ah); free(Bh); free(R);
}

/* B packed for oneDNN's bf16 kernel (volt__cpu_pack_b_bf16): every element where the layout
 * puts it (tiles of 32 k x 64 n, k-pairs innermost), zeros in the padding, and the GEMM on
 * the packed B equal to the GEMM on the plain bf16 B, bit for bit (the same kernel reads the
 * same values). Full tiles and cut ones; B given transposed or not, as f32 or bf16. */
static void check_packed(int64_t M, int64_t N, int64_t K, bool trans, bool bf16_src, float beta, bool bias,
                         bool specials) {
    int64_t ld = trans ? K : N, nb = K * N, np = volt__cpu_packed_b_elems(K, N);
    int64_t kp = (K + 31) / 32 * 32, npad = (N + 63) / 64 * 64;
    CHECK(np == kp * npad, "packed %lldx%lld: %lld elements, want %lld", (long long)K, (long long)N, (long long)np,
          (long long)(kp * npad));
    float *Bf = rand_buf(nb), *A = rand_buf(M * K), *C0 = rand_buf(M * N), *bv = rand_buf(N);
    if (specials) {   /* NaNs (quiet and signalling), infinities, signed zero, subnormals, a rounding tie */
        const uint32_t sp[] = {0x7fc00001u, 0xff800001u, 0x7f800000u, 0xff800000u, 0x80000000u, 0x00000001u,
                               0x807fffffu, 0x3f808000u, 0x3f818000u, 0x7f7fffffu};
        for (int64_t i = 0; i < nb; i += 7) memcpy(&Bf[i], &sp[(i / 7) % 10], 4);
    }
    uint16_t *Bh = malloc(2 * (size_t)nb), *Ah = malloc(2 * (size_t)(M * K)), *P = malloc(2 * (size_t)np);
    volt_f32_to_bf16_array(Bf, Bh, nb);
    volt_f32_to_bf16_array(A, Ah, M * K);
    memset(P, 0xa5, 2 * (size_t)np);
    volt__cpu_pack_b_bf16(bf16_src ? (const void *)Bh : (const void *)Bf, bf16_src ? VOLT_BF16 : VOLT_F32, K, N, ld,
                          trans, P);
    int64_t bad = 0;
    for (int64_t k = 0; k < kp; k++)
        for (int64_t n = 0; n < npad; n++) {
            int64_t at = ((n / 64) * (kp / 32) + k / 32) * 2048 + ((k % 32) / 2) * 128 + (n % 64) * 2 + k % 2;
            uint16_t want = k < K && n < N ? Bh[trans ? n * ld + k : k * ld + n] : 0;
            bad += P[at] != want;
        }
    CHECK(bad == 0, "packed %lldx%lld trans %d bf16 %d: %lld elements misplaced", (long long)K, (long long)N, trans,
          bf16_src, (long long)bad);
    volt__cpu_gemm_op g = {.ta = 'N', .tb = trans ? 'T' : 'N', .batch = 1, .M = M, .N = N, .K = K, .alpha = 1.f,
                           .beta = beta, .ab = VOLT_BF16, .A = Ah, .lda = K, .B = Bh, .ldb = ld, .ldc = N,
                           .bias = bias ? bv : NULL};
    if (specials) {
        /* the layout only */
    } else if (volt__cpu_gemm_packs_b(&g)) {
        float *C = malloc(sizeof(float) * (size_t)(M * N)), *Cp = malloc(sizeof(float) * (size_t)(M * N));
        memcpy(C, C0, sizeof(float) * (size_t)(M * N));
        memcpy(Cp, C0, sizeof(float) * (size_t)(M * N));
        g.C = C;
        volt__cpu_gemm_ex(&g);
        g.B = P;
        g.b_packed = true;
        g.C = Cp;
        volt__cpu_gemm_ex(&g);
        CHECK(!memcmp(C, Cp, sizeof(float) * (size_t)(M * N)), "packed %lldx%lldx%lld trans %d beta %g bias %d: "
              "result differs from the plain B", (long long)M, (long long)N, (long long)K, trans, beta, bias);
        free(C); free(Cp);
    } else {
        CHECK(!volt__cpu_bf16_native(), "packed B refused on a CPU with native bf16");
    }
    free(Bf); free(A); free(C0); free(bv); free(Bh); free(Ah); free(P);
}

int main(void) {
    printf("GEMM library: %s\n", volt__cpu_gemm_library());
    static const int64_t packed[][3] = {{8, 64, 32}, {37, 768, 768}, {20, 70, 100}, {3, 65, 33}, {2, 3, 5},
                                         {64, 128, 64}, {16, 3072, 768}, {16, 768, 3072}};
    for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++)
        for (int t = 0; t < 2; t++)
            for (int h = 0; h < 2; h++) {
                check_packed(packed[i][0], packed[i][1], packed[i][2], t, h, 0.f, false, false);
                check_packed(packed[i][0], packed[i][1], packed[i][2], t, h, 1.f, t, false);
                check_packed(packed[i][0], packed[i][1], packed[i][2], t, h, 0.f, false, true);
            }
    const char tr[2] = {'N', 'T'};
    static const int64_t sizes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 48, 96}, {129, 67, 255}, {5, 300, 2}};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                const int64_t *d = sizes[s];
                check_f32(tr[a], tr[b], 1, d[0], d[1], d[2], 1.f, 0.f, false, 0, false);
                check_f32(tr[a], tr[b], 1, d[0], d[1], d[2], 0.37f, 1.f, false, 3, false);
                check_f32(tr[a], tr[b], 1, d[0], d[1], d[2], 1.f, 0.5f, true, 0, false);
                check_f32(tr[a], tr[b], 3, d[0], d[1], d[2], -1.25f, 1.f, false, 1, false);
                check_f32(tr[a], tr[b], 1, d[0], d[1], d[2], 0.125f, 0.f, false, 2, true);
                check_f32(tr[a], tr[b], 4, d[0], d[1], d[2], 1.f, 1.f, false, 0, true);
                check_bf16(tr[a], tr[b], d[0], d[1], d[2], 1.f, 0.f);
                check_bf16(tr[a], tr[b], d[0], d[1], d[2], 0.5f, 1.f);
            }
    check_f32('N', 'T', 1, 256, 768, 768, 1.f, 0.f, true, 0, false);   /* a DistilBERT projection */
    check_f32('T', 'N', 12, 128, 64, 128, 1.f, 1.f, false, 0, false);  /* attention-shaped batch */
    check_f32('N', 'N', 1, 3, 4, 0, 1.f, 0.5f, true, 0, false);        /* K = 0: alpha bias + beta C */
    /* more shapes than a thread's cache holds (256): entries are replaced, results stay right */
    for (int64_t m = 1; m <= 300; m++) check_f32('N', 'N', 1, m, 9, 17, 1.f, 0.f, false, 0, false);
    check_f32('N', 'T', 1, 256, 768, 768, 1.f, 0.f, true, 0, false);
    printf("native bf16: %s\n", volt__cpu_bf16_native() ? "yes" : "no");
    return vtest_finish();
}
