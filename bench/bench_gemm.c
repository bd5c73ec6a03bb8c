/* GEMM libraries side by side, in one process: OpenBLAS cblas_sgemm, volt's GEMM entry
 * (core/cpu/gemm.c: oneDNN for f32 above its size threshold) and the same entry with bf16
 * operands (native AVX512-BF16/AMX kernels where the CPU has them), at the shapes of
 * DistilBERT's projections (base and small presets), the attention's batched products,
 * the fused attention's per-tile products (one thread each: run with OMP_NUM_THREADS=1
 * for their rate), and small GEMMs. Prints the median ms of `reps` calls after a warm-up, and GFLOP/s.
 *   usage: bench_gemm [reps]   (default 9); threads: OMP_NUM_THREADS */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cblas.h>
#include "volt/precision.h"
#include "core/cpu/kernels.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct { const char *what; char ta, tb; int64_t batch, M, N, K; } shape;

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    if (reps < 1 || reps > 1000) { fprintf(stderr, "usage: bench_gemm [reps 1..1000]\n"); return 2; }
    static const shape shapes[] = {
        {"base FFN up (x W1^T)", 'N', 'T', 1, 1024, 3072, 768},
        {"base FFN down", 'N', 'T', 1, 1024, 768, 3072},
        {"base q/k/v/out proj", 'N', 'T', 1, 1024, 768, 768},
        {"base dW (dy^T x)", 'T', 'N', 1, 768, 768, 1024},
        {"base attention QK^T", 'N', 'T', 96, 128, 128, 64},
        {"small FFN up", 'N', 'T', 1, 1536, 512, 128},
        {"small proj", 'N', 'T', 1, 1536, 128, 128},
        {"small attention PV", 'N', 'N', 24, 128, 64, 128},
        {"attn tile S (q k^T)", 'N', 'T', 1, 64, 128, 64},
        {"attn tile o (P v)", 'N', 'N', 1, 64, 64, 128},
        {"attn tile dk (dS^T q)", 'T', 'N', 1, 128, 64, 64},
        {"64^3", 'N', 'N', 1, 64, 64, 64},
        {"16^3", 'N', 'N', 1, 16, 16, 16},
    };
    double *t = malloc(sizeof(double) * (size_t)reps);
    printf("GEMM library: %s; OpenBLAS: %s\n", volt__cpu_gemm_library(), openblas_get_config());
    printf("| %-22s | %5s | %16s | %15s | %15s | %15s | %9s |\n", "shape", "batch", "M x N x K", "OpenBLAS ms",
           "volt f32 ms", "volt bf16 ms", "f32 ratio");
    printf("|------------------------|-------|------------------|-----------------|-----------------|"
           "-----------------|-----------|\n");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *s = &shapes[si];
        int64_t na = s->M * s->K, nb = s->K * s->N, nc = s->M * s->N;
        float *A = malloc(sizeof(float) * (size_t)(na * s->batch)), *B = malloc(sizeof(float) * (size_t)(nb * s->batch));
        float *C = malloc(sizeof(float) * (size_t)(nc * s->batch));
        uint16_t *Ah = malloc(2 * (size_t)(na * s->batch)), *Bh = malloc(2 * (size_t)(nb * s->batch));
        for (int64_t i = 0; i < na * s->batch; i++) A[i] = (float)((i * 7919) % 1000) / 1000.f - 0.5f;
        for (int64_t i = 0; i < nb * s->batch; i++) B[i] = (float)((i * 104729) % 1000) / 1000.f - 0.5f;
        volt_f32_to_bf16_array(A, Ah, na * s->batch);
        volt_f32_to_bf16_array(B, Bh, nb * s->batch);
        int64_t lda = s->ta == 'T' ? s->M : s->K, ldb = s->tb == 'T' ? s->K : s->N;
        double ms[3], flop = 2.0 * (double)s->batch * (double)s->M * (double)s->N * (double)s->K;
        for (int lib = 0; lib < 3; lib++) {
            volt__cpu_gemm_op g = {.ta = s->ta, .tb = s->tb, .batch = s->batch, .M = s->M, .N = s->N, .K = s->K,
                                  .alpha = 1.f, .beta = 0.f, .ab = lib == 2 ? VOLT_BF16 : VOLT_F32,
                                  .A = lib == 2 ? (const void *)Ah : A, .B = lib == 2 ? (const void *)Bh : B,
                                  .lda = lda, .ldb = ldb, .sa = na, .sb = nb, .C = C, .ldc = s->N, .sc = nc};
            for (int r = -1; r < reps; r++) {
                double t0 = now();
                if (lib == 0)
                    for (int64_t z = 0; z < s->batch; z++)
                        cblas_sgemm(CblasRowMajor, s->ta == 'T' ? CblasTrans : CblasNoTrans,
                                    s->tb == 'T' ? CblasTrans : CblasNoTrans, (blasint)s->M, (blasint)s->N,
                                    (blasint)s->K, 1.f, A + z * na, (blasint)lda, B + z * nb, (blasint)ldb, 0.f,
                                    C + z * nc, (blasint)s->N);
                else
                    volt__cpu_gemm_ex(&g);
                if (r >= 0) t[r] = now() - t0;
            }
            qsort(t, (size_t)reps, sizeof(double), cmp);
            ms[lib] = t[reps / 2] * 1e3;
        }
        char dims[40];
        snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)s->M, (long long)s->N, (long long)s->K);
        printf("| %-22s | %5lld | %16s | %7.3f (%5.0f) | %7.3f (%5.0f) | %7.3f (%5.0f) | %9.2f |\n", s->what,
               (long long)s->batch, dims, ms[0], flop / ms[0] * 1e-6, ms[1], flop / ms[1] * 1e-6, ms[2],
               flop / ms[2] * 1e-6, ms[0] / ms[1]);
        free(A); free(B); free(C); free(Ah); free(Bh);
    }
    printf("(GFLOP/s in parentheses; f32 ratio = OpenBLAS ms / volt f32 ms, > 1: volt's choice faster)\n");
    free(t);
    return 0;
}
