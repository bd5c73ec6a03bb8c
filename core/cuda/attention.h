/* core/cuda/attention.h — the launchers of core/cuda/attention_fwd.cu and attention_bwd.cu (extern "C", plain pointers,
 * a cudaStream_t passed as void *). Shapes: q, o (B, H, Tq, D), k, v (B, H, Tk, D), row-major
 * f32 device memory (q, k, v: or their 16-bit copies, qkv16), or packed (volt_attention_heads): q, o (B, Tq, H*D), k, v (B, Tk, H*D),
 * rows ld = H*D apart; grads as their tensors; lse and delta (B, H, Tq). Head dim D in
 * 1..VOLT_CUDA_ATTN_MAX_D (32, 64 and 128 exact, others padded: attention_fwd.cu). */
#ifndef VOLT_CUDA_ATTENTION_H
#define VOLT_CUDA_ATTENTION_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

#define VOLT_CUDA_ATTN_MAX_D 256   /* the largest head dim the kernels are built for */
/* compute dtypes (core/cuda/launch.h's VOLT_CU_F32/BF16/F16 codes) */
enum { VOLT_CU_ATTN_F32 = 0, VOLT_CU_ATTN_BF16 = 1, VOLT_CU_ATTN_F16 = 2 };

typedef struct volt_cuda_attn {
    int64_t B, H, Tq, Tk;
    int causal;                /* key j visible to query i only if j <= i (Tq == Tk) */
    int packed;                /* 1: (B, T, H*D) layout */
    int64_t ld;                /* row stride in elements: D, or H*D packed */
    float scale;               /* applied to q k^T */
    float p;                   /* attention dropout probability, 0 = none */
    int compute;               /* VOLT_CU_ATTN_*: q, k, v (and dO) read as their roundings */
    const void *mask;          /* (B, Tk) key mask, nonzero = attend; NULL = none */
    int mask_dtype;            /* 1 u8, 2 i32, 3 i64 */
    uint64_t key, c0, c1;      /* dropout's Philox stream (core/cuda/philox.cuh) */
    /* When set, c0 (the step's RNG offset) is read here on the device and the key derived
     * from seed (a captured step replays with each step's offset); key and c0 are unused. */
    const uint64_t *c0_dev;
    uint64_t seed;
    int64_t D;                 /* head dim, 1..VOLT_CUDA_ATTN_MAX_D (the fields above keep their offsets) */
    int qkv16;                 /* 1: q, k, v are 16-bit copies (dtype `compute`, same layout), read as stored */
} volt_cuda_attn;

/* o = softmax(scale q k^T + mask) (dropped) v; lse (may be NULL) = per-row logsumexp,
 * -inf for a row that sees no key (its o row is 0). Returns the cudaError_t of the launches
 * (0 = success), as the launchers of core/cuda/launch.h; zero-size calls launch nothing. */
int volt__cuda_attention_fwd(void *stream, const volt_cuda_attn *a, const void *q, const void *k,
                              const void *v, float *o, float *lse);
/* dq, dk, dv from dout, with P recomputed from lse; delta (B, H, Tq) is scratch. Each
 * grad is written as its mode says (volt_grad_mode: 0 none, 1 store, 2 add), dq before
 * dk before dv (one tensor given as several inputs). Returns the cudaError_t (0 = success). */
int volt__cuda_attention_bwd(void *stream, const volt_cuda_attn *a, const void *q, const void *k,
                              const void *v, const float *o, const float *dout, const float *lse, float *delta,
                              float *dq, int dq_mode, float *dk, int dk_mode, float *dv, int dv_mode);

#ifdef __cplusplus
}
#endif
#endif
