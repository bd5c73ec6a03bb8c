/* CPU kernels: one forward/backward pair per op (core/ops_list.h), OpenBLAS for GEMMs,
 * OpenMP static schedules for loops, reductions in a fixed order (bitwise reproducible
 * for a given thread count). */
#ifndef VOLT_CPU_KERNELS_H
#define VOLT_CPU_KERNELS_H
#include "core/internal.h"

#define VOLT_CPU_KERNEL_DECL_(id, name) \
    volt_status volt_cpu_##id##_fwd(volt_step *s, volt_node *n); \
    volt_status volt_cpu_##id##_bwd(volt_step *s, volt_node *n);
VOLT_OPS(VOLT_CPU_KERNEL_DECL_)
#undef VOLT_CPU_KERNEL_DECL_

/* Helpers shared by kernels. */
/* C (M,N) = alpha * op(A) op(B) + beta * C, row-major, f32; trans = 'N' or 'T'. */
void volt_cpu_gemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc);
/* A float tensor's data as f32: itself when f32, else converted into scratch slot `slot`
 * (core/cpu/cast.c). NULL on OOM (step error set). */
const float *volt_cpu_as_f32(volt_step *s, const volt_tensor *t, int slot);
/* x (n floats) rounded to dt and back (dt = f32: x itself), in scratch slot `slot`. */
const float *volt_cpu_round_f32(volt_step *s, const float *x, int64_t n, volt_dtype dt, int slot);
#endif
