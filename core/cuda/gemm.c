/* cuBLASLt GEMMs for the "cuda" backend (core/cuda/cuda.h, volt__cuda_gemm).
 *
 * Row-major C (M, N) = op(A) op(B) is column-major C^T (N, M) = op(B)^T op(A)^T: cuBLASLt
 * gets B as its "A" and A as its "B", m = N, n = M, with the transposes kept. The bias is
 * CUBLASLT_EPILOGUE_BIAS (one f32 per row of the column-major D = per column of C).
 * Precision: f32 operands run CUBLAS_COMPUTE_32F (no TF32: the same math as the CPU up to
 * summation order), or CUBLAS_COMPUTE_32F_FAST_TF32 when the step allows TF32 (the trainer's
 * matmul_precision "high" / "medium", s->matmul_tf32: part of the plan key); bf16 and f16
 * operands run natively with f32 accumulation and f32 C.
 *
 * One plan per shape: the matmul descriptor, the four layouts and the heuristic's best
 * algorithm are made the first time a key (transposes, sizes, leading dimensions, batch
 * strides, dtype, bias, beta, pointer alignment) is seen and kept in the device's cache
 * (GEMM_SLOTS entries, least recently used replaced). One workspace per device
 * (VOLT_CUDA_WORKSPACE_MB, default 32). A steady-state step creates no plan and allocates
 * nothing; setting the bias pointer on a cached descriptor is a host-side write. The
 * library itself is loaded at run time (below).
 * Where the heuristic has no algorithm with the bias epilogue (a type, layout or alignment
 * without a fused kernel), the plan runs the GEMM plain and volt_cu_fill_bias adds the bias
 * (stderr says so once per device); VOLT_CUBLASLT_EPILOGUE=0 makes every bias go that way,
 * which is how the fallback is tested on a GPU (tests/gpu_cuda.cmake). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cublasLt.h>
#include "core/dynlib.h"
#include "core/cuda/cuda.h"

/* ---- cuBLASLt, loaded when the first device opens --------------------------------------
 * Not linked: a binary built with CUDA starts on a machine without the toolkit (the CPU
 * backends need nothing of it), and on a GPU machine it takes whichever libcublasLt is
 * there: $VOLT_CUBLASLT, then libcublasLt.so.13 from the loader's path or the toolkit it was
 * built with, then .so.12 (the entry points used here are the same in both). */
#define LT_FUNCS(X) X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusString) \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulPreferenceDestroy) \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatrixLayoutDestroy) \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulDescDestroy) \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
static struct {
#define LT_MEMBER_(f) __typeof__(&f) f;
    LT_FUNCS(LT_MEMBER_)
#undef LT_MEMBER_
} g_lt;
static pthread_once_t g_lt_once = PTHREAD_ONCE_INIT;
static char g_lt_err[512];

#ifndef VOLT_CUDA_LIBDIR
#define VOLT_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif
static void lt_load(void) {
    const char *env = getenv("VOLT_CUBLASLT");
    const char *const names[] = { env, "libcublasLt.so.13", VOLT_CUDA_LIBDIR "/libcublasLt.so.13", "libcublasLt.so.12" };
    char tried[400];
    void *h = volt__dynlib_open(names, 4, tried, sizeof tried, NULL, 0);
    if (!h) {
        snprintf(g_lt_err, sizeof g_lt_err, "cuda: cuBLASLt not found (tried %s); set VOLT_CUBLASLT to its path", tried);
        return;
    }
#define LT_SYM_(f) { #f, (void **)(void *)&g_lt.f },
    static const volt__dynsym syms[] = { LT_FUNCS(LT_SYM_) };
#undef LT_SYM_
    const char *missing = volt__dynlib_resolve(h, syms, (int)(sizeof syms / sizeof syms[0]));
    if (missing) snprintf(g_lt_err, sizeof g_lt_err, "cuda: cuBLASLt has no %s", missing);
}
#define cublasLtCreate g_lt.cublasLtCreate
#define cublasLtDestroy g_lt.cublasLtDestroy
#define cublasLtGetStatusString g_lt.cublasLtGetStatusString
#define cublasLtMatmulPreferenceCreate g_lt.cublasLtMatmulPreferenceCreate
#define cublasLtMatmulPreferenceSetAttribute g_lt.cublasLtMatmulPreferenceSetAttribute
#define cublasLtMatmulPreferenceDestroy g_lt.cublasLtMatmulPreferenceDestroy
#define cublasLtMatrixLayoutCreate g_lt.cublasLtMatrixLayoutCreate
#define cublasLtMatrixLayoutSetAttribute g_lt.cublasLtMatrixLayoutSetAttribute
#define cublasLtMatrixLayoutDestroy g_lt.cublasLtMatrixLayoutDestroy
#define cublasLtMatmulDescCreate g_lt.cublasLtMatmulDescCreate
#define cublasLtMatmulDescSetAttribute g_lt.cublasLtMatmulDescSetAttribute
#define cublasLtMatmulDescDestroy g_lt.cublasLtMatmulDescDestroy
#define cublasLtMatmulAlgoGetHeuristic g_lt.cublasLtMatmulAlgoGetHeuristic
#define cublasLtMatmul g_lt.cublasLtMatmul

#define GEMM_SLOTS 256

typedef struct {
    int64_t batch, M, N, K, lda, ldb, ldc, sa, sb, sc;
    uint32_t align;          /* the smallest alignment of A, B, C (and bias), capped at 256 */
    uint32_t bias_align;     /* the bias's own (the heuristic reads it from the bias pointer), 0 = none */
    uint8_t ta, tb, ab, bias, beta1, tf32, pad_[2];   /* tf32: f32 operands, matmul_precision high */
} gemm_key;

typedef struct {
    gemm_key k;
    uint64_t hash, last;     /* hash 0: empty */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    bool bias_kernel;        /* no algorithm with the bias epilogue: the GEMM runs plain, a kernel adds the bias */
} gemm_plan;

struct volt_cuda_gemm_cache {
    gemm_plan p[GEMM_SLOTS];
    uint64_t clock;
    bool no_epilogue;        /* VOLT_CUBLASLT_EPILOGUE=0: every bias by the kernel (the fallback, tested) */
    bool told;               /* the fallback's note is printed once per device */
    cublasLtMatmulPreference_t pref;
};

static void plan_release(gemm_plan *p) {
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

volt_status volt__cuda_gemm_init(volt_cuda_ctx *c, char *err, size_t errlen) {
    pthread_once(&g_lt_once, lt_load);
    if (g_lt_err[0]) { snprintf(err, errlen, "%s", g_lt_err); return VOLT_ERR_UNSUPPORTED; }
    cublasLtHandle_t h = NULL;
    cublasStatus_t st = cublasLtCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cuda: cublasLtCreate failed: %s", cublasLtGetStatusString(st));
        return VOLT_ERR_BACKEND;
    }
    c->lt = h;
    const char *mb = getenv("VOLT_CUDA_WORKSPACE_MB");
    long m = mb && *mb ? strtol(mb, NULL, 10) : 32;
    c->workspace_bytes = (size_t)(m > 0 ? m : 0) << 20;
    if (c->workspace_bytes && cudaMalloc(&c->workspace, c->workspace_bytes) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "cuda: out of device memory for the %zu-byte cuBLASLt workspace", c->workspace_bytes);
        return VOLT_ERR_NOMEM;
    }
    c->gemm = calloc(1, sizeof *c->gemm);
    if (!c->gemm) { snprintf(err, errlen, "cuda: out of memory"); return VOLT_ERR_NOMEM; }
    const char *ep = getenv("VOLT_CUBLASLT_EPILOGUE");
    c->gemm->no_epilogue = ep && !strcmp(ep, "0");
    uint64_t ws = c->workspace_bytes;
    if (cublasLtMatmulPreferenceCreate(&c->gemm->pref) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(c->gemm->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) !=
            CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cuda: cuBLASLt preference setup failed");
        return VOLT_ERR_BACKEND;
    }
    return VOLT_OK;
}

void volt__cuda_gemm_release(volt_cuda_ctx *c) {
    if (g_lt_err[0] || !cublasLtDestroy) return;   /* nothing was made (the macro is g_lt.cublasLtDestroy) */
    if (c->gemm) {
        for (int i = 0; i < GEMM_SLOTS; i++)
            if (c->gemm->p[i].hash) plan_release(&c->gemm->p[i]);
        if (c->gemm->pref) cublasLtMatmulPreferenceDestroy(c->gemm->pref);
        free(c->gemm);
        c->gemm = NULL;
    }
    if (c->workspace) cudaFree(c->workspace);
    c->workspace = NULL;
    if (c->lt) cublasLtDestroy((cublasLtHandle_t)c->lt);
    c->lt = NULL;
}

static uint64_t key_hash(const gemm_key *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h ? h : 1;
}

static cudaDataType_t cuda_type(uint8_t ab) {
    return ab == VOLT_BF16 ? CUDA_R_16BF : ab == VOLT_F16 ? CUDA_R_16F : CUDA_R_32F;
}

static bool layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                   int64_t stride) {
    if (cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld) != CUBLAS_STATUS_SUCCESS) return false;
    if (batch == 1) return true;
    int32_t b = (int32_t)batch;
    return cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride) ==
               CUBLAS_STATUS_SUCCESS;
}

/* The plan for key k: descriptors in cuBLASLt's column-major view (see the top). */
/* bias: this call's bias pointer. It is set on the descriptor before the heuristic, which
 * reads its alignment (there is no preference attribute for it): with a NULL pointer the
 * heuristic may pick a kernel that assumes a 16-byte aligned bias (PyTorch hit this). The
 * plan is keyed by that alignment, and every matmul sets the pointer again. */
static const char *plan_make(volt_cuda_ctx *c, gemm_plan *p, const gemm_key *k, const float *bias) {
    const cudaDataType_t t = cuda_type(k->ab);
    /* cuBLASLt's A = our B: B row-major (K, N) with ldb is column-major (N, K); 'T': (K, N) stored */
    const int64_t ar = k->tb ? k->K : k->N, ac = k->tb ? k->N : k->K;
    const int64_t br = k->ta ? k->M : k->K, bc = k->ta ? k->K : k->M;
    if (!layout(&p->la, t, ar, ac, k->ldb, k->batch, k->sb) || !layout(&p->lb, t, br, bc, k->lda, k->batch, k->sa) ||
        !layout(&p->lc, CUDA_R_32F, k->N, k->M, k->ldc, k->batch, k->sc))
        return "matrix layout";
    /* TF32 tensor cores for f32 operands only when the step allows it (matmul_precision) */
    const cublasComputeType_t ct = k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if (cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return "descriptor";
    int32_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) ||
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb))
        return "transposes";
    if (k->bias && !c->gemm->no_epilogue) {
        uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
        int32_t bt = CUDA_R_32F;
        if (cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ||
            cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt) ||
            cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias))
            return "bias epilogue";
    }
    cublasLtMatmulPreference_t pref = c->gemm->pref;
    uint32_t al = k->align;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    memset(&res, 0, sizeof res);
    p->bias_kernel = k->bias && c->gemm->no_epilogue;
    if (cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)c->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &n) !=
            CUBLAS_STATUS_SUCCESS || n < 1) {
        if (!k->bias || p->bias_kernel) return "no cuBLASLt algorithm";
        /* No fused kernel for the bias at this type, layout or alignment: the same GEMM without the
         * epilogue, and the bias added by volt_cu_fill_bias after it (one more pass over C) */
        uint32_t none = CUBLASLT_EPILOGUE_DEFAULT;
        const void *null = NULL;
        if (cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &none, sizeof none) ||
            cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &null, sizeof null))
            return "descriptor without the bias epilogue";
        n = 0;
        memset(&res, 0, sizeof res);
        if (cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)c->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res,
                                           &n) != CUBLAS_STATUS_SUCCESS || n < 1)
            return "no cuBLASLt algorithm, with or without the bias epilogue";
        p->bias_kernel = true;
        if (!c->gemm->told) {
            c->gemm->told = true;
            fprintf(stderr,
                    "volt: cuda: cuBLASLt has no algorithm with the bias epilogue for a %c%c %s GEMM (M %lld N %lld K %lld); "
                    "the bias is added by a separate kernel there (said once)\n",
                    k->ta ? 'T' : 'N', k->tb ? 'T' : 'N', volt_dtype_name((volt_dtype)k->ab), (long long)k->M,
                    (long long)k->N, (long long)k->K);
        }
    }
    p->algo = res.algo;
    return NULL;
}

static uint32_t ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

volt_status volt__cuda_gemm(volt_step *s, const volt_cuda_gemm *g, const char *op) {
    if (g->M <= 0 || g->N <= 0 || g->batch <= 0) return VOLT_OK;
    volt_cuda_ctx *c = volt__cuda_ctx(s->dev);
    volt__cuda_use(c);
    if (g->K <= 0)
        return volt__cuda_check(s, volt_cu_fill_bias(c->stream, g->C, g->ldc, g->sc, g->batch, g->M, g->N, g->bias, g->beta),
                                op);
    gemm_key k;
    memset(&k, 0, sizeof k);
    k.batch = g->batch; k.M = g->M; k.N = g->N; k.K = g->K;
    k.lda = g->lda; k.ldb = g->ldb; k.ldc = g->ldc;
    if (g->batch > 1) { k.sa = g->sa; k.sb = g->sb; k.sc = g->sc; }
    k.ta = (uint8_t)(g->ta == 'T'); k.tb = (uint8_t)(g->tb == 'T');
    k.ab = (uint8_t)g->ab; k.bias = g->bias != NULL; k.beta1 = g->beta != 0.f;
    k.tf32 = (uint8_t)(g->ab == VOLT_F32 && s->matmul_tf32);
    uint32_t al = ptr_align(g->A), t;
    if ((t = ptr_align(g->B)) < al) al = t;
    if ((t = ptr_align(g->C)) < al) al = t;
    if (g->bias && (t = ptr_align(g->bias)) < al) al = t;
    k.align = al;
    k.bias_align = g->bias ? ptr_align(g->bias) : 0;

    volt_cuda_gemm_cache *cache = c->gemm;
    const uint64_t h = key_hash(&k);
    size_t i0 = (size_t)(h % GEMM_SLOTS), victim = i0;
    gemm_plan *p = NULL;
    for (size_t q = 0; q < GEMM_SLOTS; q++) {
        gemm_plan *e = &cache->p[(i0 + q) % GEMM_SLOTS];
        if (e->hash == h && !memcmp(&e->k, &k, sizeof k)) { p = e; break; }
        if (e->hash == 0) { victim = (i0 + q) % GEMM_SLOTS; break; }
        if (e->last < cache->p[victim].last) victim = (i0 + q) % GEMM_SLOTS;
    }
    if (!p) {
        p = &cache->p[victim];
        if (p->hash) plan_release(p);
        const char *why = plan_make(c, p, &k, g->bias);
        if (why) {
            plan_release(p);
            return volt_step_fail(s, VOLT_ERR_BACKEND,
                                  "%s: cuBLASLt cannot run this GEMM (%s): %c%c batch %lld, M %lld N %lld K %lld, %s",
                                  op, why, g->ta, g->tb, (long long)g->batch, (long long)g->M, (long long)g->N,
                                  (long long)g->K, volt_dtype_name(g->ab));
        }
        p->k = k;
        p->hash = h;
    }
    p->last = ++cache->clock;
    if (g->bias && !p->bias_kernel &&
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias) !=
            CUBLAS_STATUS_SUCCESS)
        return volt_step_fail(s, VOLT_ERR_BACKEND, "%s: cuBLASLt bias pointer", op);
    const float one = 1.f, beta = g->beta;
    cublasStatus_t st = cublasLtMatmul((cublasLtHandle_t)c->lt, p->desc, &one, g->B, p->la, g->A, p->lb, &beta, g->C,
                                       p->lc, g->C, p->lc, &p->algo, c->workspace, c->workspace_bytes,
                                       (cudaStream_t)c->stream);
    if (st != CUBLAS_STATUS_SUCCESS)
        return volt_step_fail(s, VOLT_ERR_BACKEND, "%s: cublasLtMatmul failed: %s", op, cublasLtGetStatusString(st));
    if (p->bias_kernel)   /* C += bias per column (beta 1: C already holds A B + beta C) */
        return volt__cuda_check(s, volt_cu_fill_bias(c->stream, g->C, g->ldc, g->sc, g->batch, g->M, g->N, g->bias, 1.f),
                                op);
    return VOLT_OK;
}
