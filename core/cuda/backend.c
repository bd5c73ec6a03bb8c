/* The "cuda" backend (core/device.h): device memory is GPU memory from the stream-ordered
 * pool (cudaMallocAsync; the pool keeps freed memory, so the step arena's rare allocations
 * cost no driver call), every call is issued on the device's one non-blocking stream in
 * program order, copies D2H synchronize for the caller, events are CUDA events. The kernel
 * table is assembled once from the parts' fillers (core/cuda/cuda.h, kernels.h); an op whose
 * row stays empty reports "not implemented on backend 'cuda'" from the step.
 *
 * No driver or no GPU: device_count is 0 (cudaGetDeviceCount's error means "no device"),
 * "auto" picks the CPU and nothing else here runs. Errors of the calls that return nothing
 * (memory, copies, parameter math) are kept in the context (ctx->error) and reported by
 * the next op that checks a launch (a CUDA error is sticky on the device anyway). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/cuda/cuda.h"
#include "core/cuda/memstat.h"

const volt_backend *volt__backend_cuda(void);

static int g_count = -1;
static pthread_once_t g_count_once = PTHREAD_ONCE_INIT;

static void count_init(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) n = 0;
    cudaGetLastError();   /* no driver / no device: not an error, clear it */
    /* a driver is installed but the runtime cannot use it (older than this CUDA needs, a
     * broken install): said once, else every gpu test skips as on a machine without a GPU */
    if (e != cudaSuccess && e != cudaErrorNoDevice) {
        void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (!drv) drv = dlopen("libcuda.so.1", RTLD_LAZY);
        if (drv) {
            fprintf(stderr, "volt: cuda: a driver is installed but no device is usable: cudaGetDeviceCount: %s (%s)\n",
                    cudaGetErrorName(e), cudaGetErrorString(e));
            dlclose(drv);
        }
    }
    g_count = n;
}
static int cuda_count(void) {
    pthread_once(&g_count_once, count_init);
    return g_count;
}

void volt__cuda_use(volt_cuda_ctx *c) {
    if (cuda_count() > 1) cudaSetDevice(c->ordinal);
}

static void note(volt_cuda_ctx *c, cudaError_t e) {
    if (e != cudaSuccess && !c->error) c->error = (int)e;
}

static void ctx_release(volt_cuda_ctx *c) {
    volt__cuda_vmm_release(c);
    volt__cuda_gemm_release(c);
    if (c->partials) cudaFree(c->partials);
    if (c->colpart) cudaFree(c->colpart);
    if (c->info) cudaFree(c->info);
    if (c->errword) cudaFree(c->errword);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

static volt_status cuda_open(int ordinal, void **ctx, char *err, size_t errlen) {
    volt_cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "cuda: out of memory"); return VOLT_ERR_NOMEM; }
    c->ordinal = ordinal;
    cudaError_t e = cudaSetDevice(ordinal);
    const char *what = "cudaSetDevice";
    if (e == cudaSuccess) { what = "stream"; e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking); }
    if (e == cudaSuccess) {   /* the pool keeps what is freed (the arena regrows rarely) */
        cudaMemPool_t pool;
        what = "memory pool";
        if ((e = cudaDeviceGetDefaultMemPool(&pool, ordinal)) == cudaSuccess) {
            uint64_t keep = UINT64_MAX;
            e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
        }
    }
    if (e == cudaSuccess) { what = "scratch"; e = cudaMalloc((void **)&c->partials, sizeof(double) * VOLT_CU_REDUCE_PARTIALS); }
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->colpart, 2 * sizeof(float) * VOLT_CU_COLSUM_PARTIALS);
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->info, 2 * sizeof(int64_t));
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->errword, sizeof(uint64_t));
    /* no error; on the stream the kernels that read it run on (cudaMemset is on the legacy stream,
     * which a non-blocking stream does not wait for) */
    if (e == cudaSuccess) e = cudaMemsetAsync(c->errword, 0xff, sizeof(uint64_t), c->stream);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda: device %d: %s: %s", ordinal, what, cudaGetErrorString(e));
        cudaGetLastError();
        ctx_release(c);
        return e == cudaErrorMemoryAllocation ? VOLT_ERR_NOMEM : VOLT_ERR_BACKEND;
    }
    volt_status st = volt__cuda_gemm_init(c, err, errlen);
    if (st < 0) { ctx_release(c); return st; }
    volt__cuda_vmm_init(c);   /* unit buffers that shrink; off when the driver cannot */
    struct cudaDeviceProp prop;   /* the name, for ThroughputMonitor's peak table */
    if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess) {
        memcpy(c->name, prop.name, sizeof c->name < sizeof prop.name ? sizeof c->name : sizeof prop.name);
        c->name[sizeof c->name - 1] = 0;
    } else {
        cudaGetLastError();   /* no name is not an error */
    }
    *ctx = c;
    return VOLT_OK;
}

static unsigned cuda_caps(volt_device *d) {
    const volt_cuda_ctx *c = d->ctx;
    return VOLT_DEV_BF16_NATIVE | VOLT_DEV_F16_NATIVE | VOLT_DEV_TF32 | (c && c->vmm ? VOLT_DEV_GIVE_BACK : 0u);
}

static const char *cuda_name(volt_device *d) {
    const volt_cuda_ctx *c = d->ctx;
    return c && c->name[0] ? c->name : NULL;
}

static bool cuda_supports(volt_device *d, volt_op_id op, volt_dtype dt) {
    (void)d; (void)dt;
    return op >= 0 && op < VOLT_OP_COUNT && volt__backend_cuda()->kernels[op].forward != NULL;
}

/* ---- memory: 256-byte aligned (cudaMallocAsync), see docs/CUDA.md ----------------------- */
static void *cuda_alloc(volt_device *d, size_t bytes) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    void *p = NULL;
    if (c->cap) {   /* a warmed step allocates nothing: fail the capture, naming the request */
        volt__cuda_capture_refuse(c, "allocated %zu bytes of device memory", bytes);
        return NULL;
    }
    if (cudaMallocAsync(&p, bytes ? bytes : 1, c->stream) != cudaSuccess) {
        cudaGetLastError();   /* out of memory is not sticky: the caller reports it */
        return NULL;
    }
    return p;
}
/* Unit buffers: a VMM block when the driver has VMM and the buffer is a granule or more. */
static void *cuda_alloc_givable(volt_device *d, size_t bytes) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    if (!c->vmm || c->cap || bytes < volt__cuda_vmm_granule(c)) return cuda_alloc(d, bytes);
    volt__cuda_use(c);
    void *p = volt__cuda_vmm_alloc(c, bytes);
    return p ? p : cuda_alloc(d, bytes);
}
void volt__cuda_free_now(volt_cuda_ctx *c, void *p) {
    if (!volt__cuda_vmm_free(c, p)) note(c, cudaFreeAsync(p, c->stream));
}
static void cuda_free(volt_device *d, void *p) {
    if (!p) return;
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    if (c->cap) { volt__cuda_capture_defer_free(c, p); return; }
    volt__cuda_free_now(c, p);
}
static void cuda_memset(volt_device *d, void *p, int v, size_t n) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    note(c, cudaMemsetAsync(p, v, n, c->stream));
}
static void cuda_copy(volt_device *d, void *dst, const void *src, size_t n, volt_copy_kind k) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    const bool h2d = k == VOLT_COPY_H2D || k == VOLT_COPY_H2D_SNAPSHOT;
    enum cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice
                             : k == VOLT_COPY_D2H ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
    if (k == VOLT_COPY_D2D && dst == src) return;
    if (c->cap && h2d) {   /* re-issued per launch: from src, or from the graph's copy of it */
        volt__cuda_capture_h2d(c, dst, src, n, k == VOLT_COPY_H2D_SNAPSHOT);
        return;
    }
    if (c->cap && k == VOLT_COPY_D2H) {
        volt__cuda_capture_refuse(c, "read %zu bytes of device memory on the host (a device->host copy)", n);
        return;
    }
    note(c, cudaMemcpyAsync(dst, src, n, kind, c->stream));
    if (k == VOLT_COPY_D2H) note(c, cudaStreamSynchronize(c->stream));   /* the host bytes are valid on return */
}
/* A VMM block's whole granules are unmapped once the stream is past this point (vmm.c);
 * pool memory is only zeroed (it stays held). */
static void cuda_give_back(volt_device *d, void *p, size_t bytes) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    if (!volt__cuda_vmm_give_back(c, p, bytes)) cuda_memset(d, p, 0, bytes);
}
static volt_status cuda_recommit(volt_device *d, void *p, size_t bytes) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    const int e = volt__cuda_vmm_recommit(c, p, bytes);
    if (!e) return VOLT_OK;
    cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? VOLT_ERR_NOMEM : VOLT_ERR_BACKEND;
}
static int64_t cuda_resident(volt_device *d, const void *p, size_t bytes) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    const int64_t n = volt__cuda_vmm_resident(c, p, bytes);
    return n < 0 ? (int64_t)bytes : n;   /* pool memory is all held */
}

static void cuda_sync(volt_device *d) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    if (c->cap) { volt__cuda_capture_refuse(c, "synchronized the device with the host"); return; }
    note(c, cudaStreamSynchronize(c->stream));
    volt__cuda_vmm_sync(c);
}
static volt_device_event *cuda_event_create(volt_device *d) {
    volt__cuda_use(volt__cuda_ctx(d));
    cudaEvent_t e = NULL;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) { cudaGetLastError(); return NULL; }
    return (volt_device_event *)e;
}
static void cuda_event_record(volt_device *d, volt_device_event *e) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    if (e) { volt__cuda_use(c); note(c, cudaEventRecord((cudaEvent_t)e, c->stream)); }
}
static void cuda_event_wait(volt_device *d, volt_device_event *e) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    if (e) { volt__cuda_use(c); note(c, cudaStreamWaitEvent(c->stream, (cudaEvent_t)e, 0)); }
}
static uint64_t *cuda_error_word(volt_device *d) { return volt__cuda_ctx(d)->errword; }

static void cuda_event_destroy(volt_device *d, volt_device_event *e) {
    (void)d;
    if (e) cudaEventDestroy((cudaEvent_t)e);
}

/* ---- helpers for the op glue (core/cuda/cuda.h) ------------------------------------------ */
volt_status volt__cuda_check(volt_step *s, int rc, const char *op) {
    volt_cuda_ctx *c = volt__cuda_ctx(s->dev);
    if (!rc && c->error) rc = c->error;   /* an earlier void call failed */
    if (!rc) return VOLT_OK;
    return volt_step_fail(s, rc == cudaErrorMemoryAllocation ? VOLT_ERR_NOMEM : VOLT_ERR_BACKEND, "%s: CUDA error %s: %s",
                          op, cudaGetErrorName((cudaError_t)rc), cudaGetErrorString((cudaError_t)rc));
}

void volt__cuda_zero_stores(volt_step *s, volt_node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->grad_mode[k] == VOLT_GRAD_STORE) {
            cuda_memset(s->dev, n->in[k]->grad, 0, sizeof(float) * (size_t)volt_tensor_numel(n->in[k]));
            n->grad_mode[k] = VOLT_GRAD_ADD;
        }
}

const void *volt__cuda_f32_as(volt_step *s, const float *x, int64_t n, volt_dtype dt, int slot) {
    if (dt == VOLT_F32) return x;
    void *buf = volt__scratch(s, slot, (size_t)(n + 1) / 2);
    if (!buf) return NULL;
    if (volt__cuda_check(s, volt_cu_convert(volt__cuda_stream(s), buf, dt, x, VOLT_F32, n), "convert") < 0) return NULL;
    return buf;
}

const void *volt__cuda_as(volt_step *s, const volt_tensor *t, volt_dtype dt, int slot) {
    if (t->dtype == dt) return t->data;
    const int64_t n = volt_tensor_numel(t);
    void *buf = volt__scratch(s, slot, dt == VOLT_F32 ? (size_t)n : (size_t)(n + 1) / 2);
    if (!buf) return NULL;
    if (volt__cuda_check(s, volt_cu_convert(volt__cuda_stream(s), buf, dt, t->data, t->dtype, n), "convert") < 0)
        return NULL;
    return buf;
}

/* ---- the table ---------------------------------------------------------------------------- */
static volt_kernel g_kernels[VOLT_OP_COUNT];
static volt_backend g_backend;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void build(void) {
    static const char *const names[VOLT_OP_COUNT] = {
#define VOLT_CUDA_NAME_(id, nm) [VOLT_OP_##id] = nm,
        VOLT_OPS(VOLT_CUDA_NAME_)
#undef VOLT_CUDA_NAME_
    };
    for (int i = 0; i < VOLT_OP_COUNT; i++) g_kernels[i].name = names[i];
    volt__cuda_kernels_gemm(g_kernels);
    volt__cuda_kernels_basic(g_kernels);
    volt__cuda_kernels_rows(g_kernels);
    volt__cuda_kernels_shape(g_kernels);
    volt__cuda_kernels_conv(g_kernels);
    volt__cuda_kernels_attention(g_kernels);   /* core/cuda/attention_op.c */
    volt__cuda_kernels_dropout(g_kernels);     /* core/cuda/dropout_op.c */
    g_backend = (volt_backend){
        .version = VOLT_BACKEND_VERSION, .name = "cuda",
        .description = "NVIDIA GPUs (cuBLASLt GEMMs, CUDA kernels; sm_90 + PTX)",
        .device_count = cuda_count, .open = cuda_open, .caps = cuda_caps, .supports_op = cuda_supports,
        .alloc = cuda_alloc, .free = cuda_free, .memset = cuda_memset, .copy = cuda_copy,
        .give_back = cuda_give_back, .recommit = cuda_recommit, .resident_bytes = cuda_resident,
        .synchronize = cuda_sync, .event_create = cuda_event_create, .event_record = cuda_event_record,
        .event_wait = cuda_event_wait, .event_destroy = cuda_event_destroy,
        .kernels = g_kernels, .pm = &volt__cuda_param_math,
        .error_word = cuda_error_word, .graph_begin = volt__cuda_graph_begin, .graph_end = volt__cuda_graph_end,
        .graph_launch = volt__cuda_graph_launch, .graph_destroy = volt__cuda_graph_destroy,
        .alloc_givable = cuda_alloc_givable, .device_name = cuda_name,
        .memory_stats = volt__cuda_memory_stats,
    };
}

const volt_backend *volt__backend_cuda(void) {
    pthread_once(&g_once, build);
    return &g_backend;
}
