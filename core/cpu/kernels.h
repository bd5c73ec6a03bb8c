/* CPU kernels: one forward/backward pair per op (core/ops_list.h), oneDNN/OpenBLAS for GEMMs,
 * OpenMP static schedules for loops, reductions in a fixed order (bitwise reproducible
 * for a given thread count). */
#ifndef VOLT_CPU_KERNELS_H
#define VOLT_CPU_KERNELS_H
#include <string.h>
#include "core/internal.h"

/* Hot element loops are compiled for AVX-512 and AVX2 (with FMA) too, picked at load time;
 * the library itself targets x86-64-v2 (SSE4.2). The results of a loop may differ in the
 * last bit between those ISAs (FMA contraction), never between runs or thread counts. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VOLT__SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VOLT__SIMD_CLONES
#endif

#define VOLT_CPU_KERNEL_DECL_(id, name) \
    volt_status volt__cpu_##id##_fwd(volt_step *s, volt_node *n); \
    volt_status volt__cpu_##id##_bwd(volt_step *s, volt_node *n);
VOLT_OPS(VOLT_CPU_KERNEL_DECL_)
#undef VOLT_CPU_KERNEL_DECL_

/* The cpu backend's table entries, shared with cpu-strict (core/cpu/backend.c, strict.c). */
const volt_kernel *volt__cpu_kernels(void);
size_t volt__cpu_page_size(void);
unsigned volt__cpu_caps(volt_device *d);
void *volt__cpu_alloc(volt_device *d, size_t bytes);
void volt__cpu_free(volt_device *d, void *p);
void volt__cpu_memset(volt_device *d, void *p, int v, size_t n);
void volt__cpu_copy(volt_device *d, void *dst, const void *src, size_t n, volt_copy_kind k);
void volt__cpu_give_back(volt_device *d, void *p, size_t bytes);
volt_status volt__cpu_recommit(volt_device *d, void *p, size_t bytes);
int64_t volt__cpu_resident_bytes(volt_device *d, const void *p, size_t bytes);
/* Parameter math (core/cpu/param_math.c); cpu-strict wraps each entry. */
extern const volt_param_math volt__cpu_param_math;
void volt__cpu_pm_scale(volt_device *d, float *x, int64_t n, float coef);
void volt__cpu_pm_sqnorm_acc(volt_device *d, const float *x, int64_t n, double *acc);
void volt__cpu_pm_clip_by_norm(volt_device *d, float *x, int64_t n, const double *sqnorm, float max_norm);
void volt__cpu_pm_clip_value(volt_device *d, float *x, int64_t n, float v);
void volt__cpu_pm_unscale(volt_device *d, float *x, int64_t n, volt_scaler_state *st);
void volt__cpu_pm_scaler_update(volt_device *d, volt_scaler_state *st, float growth, float backoff, int64_t interval);
void volt__cpu_pm_update(volt_device *d, const volt_update_args *a);
void volt__cpu_pm_convert(volt_device *d, void *dst, volt_dtype dst_dt, const void *src, volt_dtype src_dt, int64_t n);
void volt__cpu_pm_average(volt_device *d, void *avg, volt_dtype a_dt, const void *p, volt_dtype p_dt, int64_t n,
                          const volt_opt_coef *coef, const float *skip);
/* cpu-strict: open the device region around host-side backend work (nested). */
void volt__strict_enter(void);
void volt__strict_leave(void);
bool volt__strict_owns(const void *p);

/* Helpers shared by kernels. */
/* Input k's grad is to be added to (else stored: the tape's first write, core/internal.h). */
static inline bool volt__cpu_acc(const volt_node *n, int k) { return n->grad_mode[k] == VOLT_GRAD_ADD; }
/* Scatter-style backward kernels (embedding, pooling, slices...) accumulate into zeros:
 * the grads the tape handed over for a first write (STORE) are zeroed here, after which
 * every grad the node writes is added to. */
static inline void volt__cpu_zero_stores(volt_node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->grad_mode[k] == VOLT_GRAD_STORE) {
            memset(n->in[k]->grad, 0, sizeof(float) * (size_t)volt_tensor_numel(n->in[k]));
            n->grad_mode[k] = VOLT_GRAD_ADD;
        }
}
/* dx[k] (+)= expr over k < N, OpenMP-split above par_min elements; a store writes 0.f + expr
 * so the bits are those of adding to a zeroed grad (-0 becomes +0). */
#define VOLT_CPU_GRAD_LOOP(acc, N, par_min, dx, expr) do { \
    const int64_t volt_n_ = (N), volt_min_ = (par_min); \
    if (acc) { \
        _Pragma("omp parallel for schedule(static) if (volt_n_ > volt_min_)") \
        for (int64_t k = 0; k < volt_n_; k++) (dx)[k] += (expr); \
    } else { \
        _Pragma("omp parallel for schedule(static) if (volt_n_ > volt_min_)") \
        for (int64_t k = 0; k < volt_n_; k++) (dx)[k] = 0.f + (expr); \
    } } while (0)
/* GEMMs (core/cpu/gemm.c): oneDNN matmul primitives cached per shape and thread (OpenBLAS
 * where it wins, and as the fallback). For z < batch:
 *   C_z (M,N) = alpha (op(A_z) op(B_z) + bias) + beta C_z
 * row-major, op = transpose when ta/tb is 'T'; A and B both f32 or both bf16 (ab, uint16_t
 * bits), f32 accumulation, C and bias f32. A_z = A + z sa (elements), likewise B, C. */
typedef struct {
    char ta, tb;
    int64_t batch, M, N, K;
    float alpha, beta;
    volt_dtype ab;            /* VOLT_F32 or VOLT_BF16 */
    const void *A, *B;
    int64_t lda, ldb, sa, sb;
    const float *bias;        /* N floats added to every row, or NULL */
    float *C;
    int64_t ldc, sc;
    bool b_packed;            /* B is bf16 packed by volt__cpu_pack_b_bf16 (tb, ldb unused; batch 1) */
} volt__cpu_gemm_op;
void volt__cpu_gemm_ex(const volt__cpu_gemm_op *g);
/* True when g (bf16, batch 1) runs natively with a packed B: then pack B for it. */
bool volt__cpu_gemm_packs_b(const volt__cpu_gemm_op *g);
/* Packed B: oneDNN's bf16 blocked layout BA16a64b2a, tiles of VOLT_PACK_K k x VOLT_PACK_N n
 * (N-tiles outermost), inside a tile 16 k-pairs x 64 n x the pair; K, N padded to the tile
 * with zeros. volt__cpu_packed_at: where element (k, n) of a packed K-row B sits. */
#define VOLT_PACK_K 32
#define VOLT_PACK_N 64
static inline int64_t volt__cpu_packed_at(int64_t k, int64_t n, int64_t K) {
    int64_t kt = (K + VOLT_PACK_K - 1) / VOLT_PACK_K;
    return ((n / VOLT_PACK_N) * kt + k / VOLT_PACK_K) * (VOLT_PACK_K * VOLT_PACK_N) +
           ((k % VOLT_PACK_K) / 2) * (2 * VOLT_PACK_N) + (n % VOLT_PACK_N) * 2 + k % 2;
}
/* B (K x N) packed as bf16 (core/cpu/cast.c): (k, n) = trans ? src[n ld + k] : src[k ld + n],
 * src f32 or bf16; dst holds volt__cpu_packed_b_elems(K, N) halves. */
int64_t volt__cpu_packed_b_elems(int64_t K, int64_t N);
void volt__cpu_pack_b_bf16(const void *src, volt_dtype sdt, int64_t K, int64_t N, int64_t ld, bool trans,
                           uint16_t *dst);
/* One f32 GEMM: C (M,N) = alpha * op(A) op(B) + beta * C; trans = 'N' or 'T'. */
void volt__cpu_gemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc);
/* The same with bf16 operands (bit patterns) and f32 accumulation and output: native
 * AVX512-BF16/AMX kernels when volt__cpu_bf16_native(), else slow (callers then round
 * operands to bf16 in f32 and call volt__cpu_gemm). */
void volt__cpu_gemm_bf16(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb, float beta,
                        float *C, int64_t ldc);
/* True when GEMMs with bf16 operands run natively (oneDNN reports AVX512-BF16 or AMX; not
 * with VOLT_CPU_BF16=0 or VOLT_GEMM=openblas). */
bool volt__cpu_bf16_native(void);
/* "oneDNN 2.6.3 (avx512_core_bf16), native bf16" or "OpenBLAS ...": for benchmarks. */
const char *volt__cpu_gemm_library(void);
/* A float tensor's data as bf16 bits: itself when bf16, else converted (round to nearest
 * even) into scratch slot `slot`. NULL on OOM (step error set). */
const uint16_t *volt__cpu_as_bf16(volt_step *s, const volt_tensor *t, int slot);
/* n f32 values as bf16 bits in scratch slot `slot`. */
const uint16_t *volt__cpu_to_bf16(volt_step *s, const float *x, int64_t n, int slot);
/* A float tensor's data as f32: itself when f32, else converted into scratch slot `slot`
 * (core/cpu/cast.c). NULL on OOM (step error set). */
const float *volt__cpu_as_f32(volt_step *s, const volt_tensor *t, int slot);
/* x (n floats) rounded to dt and back (dt = f32: x itself), in scratch slot `slot`. */
const float *volt__cpu_round_f32(volt_step *s, const float *x, int64_t n, volt_dtype dt, int slot);
#endif
