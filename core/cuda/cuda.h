/* core/cuda/cuda.h — the "cuda" backend's private C side: the per-device context, the
 * helpers the op glue uses (stream, status from a launch, scratch), and the fillers of the
 * kernel table. C only (core/internal.h); the .cu files see core/cuda/launch.h. */
#ifndef VOLT_CUDA_CUDA_H
#define VOLT_CUDA_CUDA_H
#include <cuda_runtime_api.h>
#include "core/cuda/kernels.h"
#include "core/cuda/launch.h"

typedef struct volt_cuda_gemm_cache volt_cuda_gemm_cache;   /* core/cuda/gemm.c */

/* One per opened ordinal (volt_device.ctx). Everything runs on `stream`, in order. */
typedef struct volt_cuda_ctx {
    int ordinal;
    cudaStream_t stream;
    void *lt;                      /* cublasLtHandle_t */
    void *workspace;               /* cuBLASLt workspace (device), workspace_bytes */
    size_t workspace_bytes;
    double *partials;              /* VOLT_CU_REDUCE_PARTIALS doubles: the parameter math's norms */
    float *colpart;                /* 2 x VOLT_CU_COLSUM_PARTIALS floats: column sums' chunk partials */
    int64_t *info;                 /* 2 int64 (device): flags the op glue reads back */
    volt_cuda_gemm_cache *gemm;    /* cuBLASLt plans, one per shape */
    int error;                     /* first CUDA error of a call that returns void (memory, pm) */
    uint64_t *errword;             /* the error word (device; all bits set = no error): core/deferred.c */
    struct volt_cuda_capture *cap; /* non-NULL while a graph is being captured (core/cuda/graph.c) */
    int n_graphs;                  /* captured graphs alive (a replay may touch any unit buffer) */
    struct volt_cuda_vmm *vmm;     /* unit buffers mapped granule by granule (core/cuda/vmm.c); NULL = off */
    char name[256];                /* cudaDeviceProp.name ("NVIDIA H200"); "" when the driver gave none */
} volt_cuda_ctx;
typedef struct volt_cuda_vmm volt_cuda_vmm;

static inline volt_cuda_ctx *volt__cuda_ctx(volt_device *d) { return (volt_cuda_ctx *)d->ctx; }
/* The column sums' partials scratch (volt_cu_colsum, volt_cu_layernorm_grad_wb): one buffer
 * per device, fixed for the context's life (so a captured graph's launches keep it), used by
 * one kernel pair at a time in stream order. */
static inline float *volt__cuda_colpart(volt_step *s) { return volt__cuda_ctx(s->dev)->colpart; }
/* Makes this device current (only when more than one is present: cudaSetDevice per call
 * costs little, but nothing at all on a one-GPU machine). */
void volt__cuda_use(volt_cuda_ctx *c);
/* The step's stream, its device made current (a kernel goes to its own device's stream). */
static inline void *volt__cuda_stream(volt_step *s) {
    volt_cuda_ctx *c = volt__cuda_ctx(s->dev);
    volt__cuda_use(c);
    return c->stream;
}
/* A launcher's return code as the step's status: VOLT_OK, else VOLT_ERR_BACKEND with
 * "<op>: CUDA error <name>: <string>" recorded in the step. */
volt_status volt__cuda_check(volt_step *s, int rc, const char *op);
/* Zero the grads the tape handed over for a first write (STORE) and make them ADD: the
 * scatter-style kernels accumulate (core/cpu/kernels.h's volt__cpu_zero_stores). */
void volt__cuda_zero_stores(volt_step *s, volt_node *n);
static inline bool volt__cuda_acc(const volt_node *n, int k) { return n->grad_mode[k] == VOLT_GRAD_ADD; }
/* A float tensor's data in dtype dt on the device: itself when it is dt, else converted into
 * scratch slot `slot`. NULL on OOM (step error set). */
const void *volt__cuda_as(volt_step *s, const volt_tensor *t, volt_dtype dt, int slot);
/* n f32 values at x (device) in dtype dt: x itself for f32, else converted into scratch slot */
const void *volt__cuda_f32_as(volt_step *s, const float *x, int64_t n, volt_dtype dt, int slot);
/* Graph capture (core/cuda/graph.c; the table's graph_* entries, core/device.h). While
 * ctx->cap is set the memory and copy entries of backend.c call these instead of the
 * runtime: refuse records the first call a captured step may not make (alloc, free, D2H,
 * synchronize) for graph_end's message; h2d records a copy for every launch to re-issue
 * (snapshot: from a copy of src's bytes now, which the graph owns, not from src). */
void volt__cuda_capture_refuse(volt_cuda_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void volt__cuda_capture_h2d(volt_cuda_ctx *c, void *dst, const void *src, size_t n, bool snapshot);
void volt__cuda_capture_defer_free(volt_cuda_ctx *c, void *p);
volt_status volt__cuda_graph_begin(volt_device *d, char *err, size_t errlen);
volt_status volt__cuda_graph_end(volt_device *d, volt_device_graph **out, char *err, size_t errlen);
volt_status volt__cuda_graph_launch(volt_device *d, volt_device_graph *g, char *err, size_t errlen);
void volt__cuda_graph_destroy(volt_device *d, volt_device_graph *g);

/* Memory that shrinks (core/cuda/vmm.c). init leaves ctx->vmm NULL when the driver has no
 * VMM (or VOLT_CUDA_VMM=0). alloc returns NULL for sizes under a granule (the pool's) or on
 * failure; free/give_back return false for memory that is not theirs (the pool's); recommit
 * returns 0 or a cudaError_t; resident returns -1 for memory not theirs. */
void volt__cuda_vmm_init(volt_cuda_ctx *c);
void volt__cuda_vmm_release(volt_cuda_ctx *c);
void *volt__cuda_vmm_alloc(volt_cuda_ctx *c, size_t bytes);
bool volt__cuda_vmm_free(volt_cuda_ctx *c, void *p);
bool volt__cuda_vmm_give_back(volt_cuda_ctx *c, void *p, size_t bytes);
int volt__cuda_vmm_recommit(volt_cuda_ctx *c, void *p, size_t bytes);
int64_t volt__cuda_vmm_resident(volt_cuda_ctx *c, const void *p, size_t bytes);
void volt__cuda_vmm_sync(volt_cuda_ctx *c);   /* after a stream synchronize: unmap what is due */
size_t volt__cuda_vmm_granule(const volt_cuda_ctx *c);   /* 0 = off */
/* The most physical memory VMM held at once (mapped or cached granules); reset: from now */
size_t volt__cuda_vmm_phys_high(volt_cuda_ctx *c, bool reset);
/* Physical bytes VMM holds now (mapped or cached granules) and their high-water; of them the
 * bytes mapped into unit buffers now and their high-water. No reset. */
void volt__cuda_vmm_phys(const volt_cuda_ctx *c, size_t *phys, size_t *phys_high, size_t *mapped, size_t *mapped_high);
/* Free device memory now (the pool's or a VMM block), outside a capture. */
void volt__cuda_free_now(volt_cuda_ctx *c, void *p);

/* Fillers of the kernel table (core/cuda/backend.c calls each once). */
void volt__cuda_kernels_gemm(volt_kernel *t);      /* core/cuda/gemm_ops.c: MATMUL, LINEAR */
void volt__cuda_kernels_basic(volt_kernel *t);     /* core/cuda/ops_basic.c */
void volt__cuda_kernels_rows(volt_kernel *t);      /* core/cuda/ops_rows.c */
void volt__cuda_kernels_shape(volt_kernel *t);     /* core/cuda/ops_shape.c */
void volt__cuda_kernels_conv(volt_kernel *t);      /* core/cuda/ops_conv.c */
extern const volt_param_math volt__cuda_param_math;   /* core/cuda/param_math.c */

/* cuBLASLt (core/cuda/gemm.c). For z < batch, row-major:
 *   C_z (M, N) = op(A_z) op(B_z) + bias + beta C_z
 * A and B both of dtype ab (f32: no TF32; bf16 or f16: f32 accumulation), C and bias f32,
 * beta 0 or 1, op = transpose for 'T'. The plan (descriptor, layouts, algorithm) is made the
 * first time a shape is seen and cached on the device. */
typedef struct volt_cuda_gemm {
    char ta, tb;
    int64_t batch, M, N, K;
    float beta;
    volt_dtype ab;
    const void *A, *B;
    int64_t lda, ldb, sa, sb;
    const float *bias;
    float *C;
    int64_t ldc, sc;
} volt_cuda_gemm;
volt_status volt__cuda_gemm(volt_step *s, const volt_cuda_gemm *g, const char *op);
volt_status volt__cuda_gemm_init(volt_cuda_ctx *c, char *err, size_t errlen);
void volt__cuda_gemm_release(volt_cuda_ctx *c);
#endif
