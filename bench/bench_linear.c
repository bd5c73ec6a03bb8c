/* Linear layer forward + backward through the tape vs the same three GEMMs called on
 * cblas_sgemm directly, in the same process. Prints ms and the throughput ratio.
 *   usage: bench_linear [rows in out reps]   (default 4096 768 3072 5) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>
#include "volt/volt.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int R = argc > 1 ? atoi(argv[1]) : 4096, In = argc > 2 ? atoi(argv[2]) : 768;
    int O = argc > 3 ? atoi(argv[3]) : 3072, reps = argc > 4 ? atoi(argv[4]) : 5;
    if (reps > 64) reps = 64;
    volt_params_config pc;
    volt_params_config_init(&pc);
    volt_params *ps;
    volt_tensor *w, *b;
    volt_params_create(&pc, &ps);
    volt_params_unit(ps, "fc");
    volt_param_new(ps, "fc.weight", VOLT_SHAPE(O, In), VOLT_INIT_TORCH_LINEAR, &w);
    volt_param_new(ps, "fc.bias", VOLT_SHAPE(O), VOLT_INIT_ZEROS, &b);
    if (volt_params_finalize(ps)) return 1;
    volt_step_config sc;
    volt_step_config_init(&sc);
    sc.params = ps;
    volt_step *s;
    if (volt_step_create(&sc, &s)) return 1;

    float *x = malloc(sizeof(float) * (size_t)R * In), *dy = malloc(sizeof(float) * (size_t)R * O);
    float *y = malloc(sizeof(float) * (size_t)R * O), *dx = malloc(sizeof(float) * (size_t)R * In);
    float *dw = malloc(sizeof(float) * (size_t)O * In);
    for (size_t i = 0; i < (size_t)R * In; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.f - 0.5f;
    for (size_t i = 0; i < (size_t)R * O; i++) dy[i] = (float)((i * 40503u) % 1000) / 1000.f - 0.5f;

    double t_raw[64], t_op[64];
    for (int r = -1; r < reps; r++) {   /* r = -1: warm-up */
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, O, In, 1.f, x, In, w->data, In, 0.f, y, O);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, In, O, 1.f, dy, O, w->data, In, 0.f, dx, In);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, In, R, 1.f, dy, O, x, In, 0.f, dw, In);
        double t1 = now();
        volt_step_begin(s, true, 0);
        volt_tensor *xt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(R, In), x));
        volt_tensor *yt = volt_linear(s, xt, w, b);
        if (!yt || volt_step_backward_grad(s, yt, dy)) { fprintf(stderr, "%s\n", volt_step_errmsg(s)); return 1; }
        volt_step_end(s);
        volt_params_zero_grad(ps);
        double t2 = now();
        if (r >= 0) { t_raw[r] = t1 - t0; t_op[r] = t2 - t1; }
    }
    qsort(t_raw, (size_t)reps, sizeof(double), cmp);
    qsort(t_op, (size_t)reps, sizeof(double), cmp);
    double raw = t_raw[reps / 2], op = t_op[reps / 2];
    double gflop = 3.0 * 2.0 * R * (double)In * O / 1e9;
    printf("linear fwd+bwd  x(%d,%d) w(%d,%d), median of %d\n", R, In, O, In, reps);
    printf("| %-28s | %9s | %8s |\n", "what", "ms", "GFLOP/s");
    printf("|------------------------------|-----------|----------|\n");
    printf("| %-28s | %9.2f | %8.1f |\n", "3x cblas_sgemm (peer)", raw * 1e3, gflop / raw);
    printf("| %-28s | %9.2f | %8.1f |\n", "volt_linear fwd+bwd (tape)", op * 1e3, gflop / op);
    printf("throughput ratio volt/raw = %.3f\n", raw / op);
    volt_step_destroy(s);
    volt_params_destroy(ps);
    free(x); free(dy); free(y); free(dx); free(dw);
    return 0;
}
