/* CUDA graph capture for the "cuda" backend (core/device.h, graph_* entries; docs/CUDA.md,
 * "compile").
 *
 * graph_begin puts the device's stream in capture (cudaStreamCaptureModeThreadLocal: a
 * call this thread may not make during capture fails instead of running). Until graph_end,
 * kernels, GEMMs, memsets and device copies issued on the stream become graph nodes. The
 * backend's own entries watch for what a replayable step must not do (backend.c calls in
 * here while ctx->cap is set): an allocation (the arena and grad pool are warmed by an
 * eager step of the same shape, so a second one allocates nothing), a free, a
 * device->host read, a synchronize — the first is named in graph_end's error. An H2D copy
 * is not captured: it is recorded (destination, host source, bytes) and every launch issues
 * it again, before the graph, from the same host address, so the step's per-step inputs
 * (the RNG offset, the optimizer's scalars) are what the host wrote there before launching.
 * An H2D_SNAPSHOT copy — the user's host data: volt_tensor_from_host, _copy_from_host, a
 * seed grad given to backward — is recorded with a copy of its bytes taken at capture,
 * which the graph owns (freed by graph_destroy), and every launch issues it from that copy:
 * the user's buffer may be a stack array or freed by the time a replay runs, and what
 * training_step did on the host is frozen at capture anyway.
 * A recorded copy must not be overwritten by an earlier node of the same graph: the step's
 * H2D copies (RNG offset at begin, optimizer scalars) target buffers of their own, and the
 * step's copies into its pool (the loss's seed grad, a tensor made from host data, a copy
 * into a tensor the step made) go through fresh arena memory and a device copy
 * (core/tensor.c, volt__step_h2d): a pool block may be a tensor released earlier in the same step,
 * which an earlier node wrote. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/cuda/cuda.h"

/* own: the snapshot src points at (malloc'd, the capture's then the graph's), or NULL */
typedef struct cu_h2d { void *dst; const void *src; size_t n; void *own; } cu_h2d;

typedef struct volt_cuda_capture {
    const volt_device *dev;        /* its capture_note names what runs */
    const char *note;              /* dev->capture_note when the first refusal happened */
    char refused[256];             /* the first call the step may not make while captured */
    cu_h2d *h2d;
    int n_h2d, cap_h2d;
    void **frees;                  /* frees asked for during capture, done after it */
    int n_frees, cap_frees;
    bool oom;                      /* a host allocation of this file failed */
} volt_cuda_capture;

struct volt_device_graph {
    cudaGraphExec_t exec;
    cu_h2d *h2d;
    int n_h2d;
};

void volt__cuda_capture_refuse(volt_cuda_ctx *c, const char *fmt, ...) {
    if (!c->cap || c->cap->refused[0]) return;
    c->cap->note = c->cap->dev->capture_note;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->cap->refused, sizeof c->cap->refused, fmt, ap);
    va_end(ap);
    if (c->cap->note && n > 0 && (size_t)n < sizeof c->cap->refused)
        snprintf(c->cap->refused + n, sizeof c->cap->refused - (size_t)n, " (in %s)", c->cap->note);
}

static bool grow(void **arr, int *cap, size_t elem) {
    int nc = *cap ? 2 * *cap : 16;
    void *p = realloc(*arr, elem * (size_t)nc);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

void volt__cuda_capture_h2d(volt_cuda_ctx *c, void *dst, const void *src, size_t n, bool snapshot) {
    volt_cuda_capture *k = c->cap;
    if (k->n_h2d == k->cap_h2d && !grow((void **)&k->h2d, &k->cap_h2d, sizeof *k->h2d)) { k->oom = true; return; }
    void *own = NULL;
    if (snapshot) {
        if (!(own = malloc(n ? n : 1))) { k->oom = true; return; }
        memcpy(own, src, n);
        src = own;
    }
    k->h2d[k->n_h2d++] = (cu_h2d){ dst, src, n, own };
}

static void free_snapshots(cu_h2d *h, int n) {
    for (int i = 0; i < n; i++) free(h[i].own);
}

void volt__cuda_capture_defer_free(volt_cuda_ctx *c, void *p) {
    volt_cuda_capture *k = c->cap;
    volt__cuda_capture_refuse(c, "freed device memory (a block the warmed step should have kept)");
    if (k->n_frees == k->cap_frees && !grow((void **)&k->frees, &k->cap_frees, sizeof *k->frees)) { k->oom = true; return; }
    k->frees[k->n_frees++] = p;
}

static void capture_free(volt_cuda_ctx *c) {
    volt_cuda_capture *k = c->cap;
    c->cap = NULL;
    if (!k) return;
    for (int i = 0; i < k->n_frees; i++) volt__cuda_free_now(c, k->frees[i]);
    free(k->frees);
    free_snapshots(k->h2d, k->n_h2d);   /* none left when a graph took them */
    free(k->h2d);
    free(k);
}

volt_status volt__cuda_graph_begin(volt_device *d, char *err, size_t errlen) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    if (c->cap) { snprintf(err, errlen, "cuda: graph capture already in progress"); return VOLT_ERR_STATE; }
    if (c->error) {
        snprintf(err, errlen, "cuda: an earlier call failed (%s) before graph capture",
                 cudaGetErrorString((cudaError_t)c->error));
        return VOLT_ERR_BACKEND;
    }
    volt__cuda_use(c);
    volt_cuda_capture *k = calloc(1, sizeof *k);
    if (!k) { snprintf(err, errlen, "cuda: out of host memory starting a graph capture"); return VOLT_ERR_NOMEM; }
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        free(k);
        cudaGetLastError();
        snprintf(err, errlen, "cuda: cudaStreamBeginCapture: %s", cudaGetErrorString(e));
        return VOLT_ERR_BACKEND;
    }
    k->dev = d;
    c->cap = k;
    return VOLT_OK;
}

volt_status volt__cuda_graph_end(volt_device *d, volt_device_graph **out, char *err, size_t errlen) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    *out = NULL;
    volt_cuda_capture *k = c->cap;
    if (!k) { snprintf(err, errlen, "cuda: graph_end without graph_begin"); return VOLT_ERR_STATE; }
    volt__cuda_use(c);
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &graph);   /* ends capture even when it was invalidated */
    volt_status st = VOLT_OK;
    if (k->refused[0]) {
        snprintf(err, errlen, "the captured step %s, which a CUDA graph cannot replay", k->refused);
        st = VOLT_ERR_UNSUPPORTED;
    } else if (k->oom) {
        snprintf(err, errlen, "cuda: out of host memory recording the capture");
        st = VOLT_ERR_NOMEM;
    } else if (e != cudaSuccess || c->error) {
        cudaError_t f = e != cudaSuccess ? e : (cudaError_t)c->error;
        snprintf(err, errlen, "cuda: stream capture failed: %s: %s", cudaGetErrorName(f), cudaGetErrorString(f));
        st = VOLT_ERR_BACKEND;
    }
    volt_device_graph *g = NULL;
    if (st == VOLT_OK) {
        g = calloc(1, sizeof *g);
        if (g && k->n_h2d && !(g->h2d = malloc(sizeof *g->h2d * (size_t)k->n_h2d))) { free(g); g = NULL; }
        if (!g) { snprintf(err, errlen, "cuda: out of host memory keeping a graph"); st = VOLT_ERR_NOMEM; }
    }
    if (st == VOLT_OK && (e = cudaGraphInstantiate(&g->exec, graph, 0)) != cudaSuccess) {
        snprintf(err, errlen, "cuda: cudaGraphInstantiate: %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
        st = VOLT_ERR_BACKEND;
    }
    if (graph) cudaGraphDestroy(graph);
    if (st == VOLT_OK) {
        if (k->n_h2d) memcpy(g->h2d, k->h2d, sizeof *g->h2d * (size_t)k->n_h2d);
        g->n_h2d = k->n_h2d;
        k->n_h2d = 0;   /* the snapshots are the graph's now */
        *out = g;
        c->n_graphs++;   /* until destroyed, give_back only zeroes (core/cuda/vmm.c) */
    } else if (g) {
        free(g->h2d);
        free(g);
    }
    cudaGetLastError();    /* a failed capture's error is reported above, not sticky for later calls */
    if (st < 0 && c->error == (int)cudaErrorStreamCaptureInvalidated) c->error = 0;
    capture_free(c);
    return st;
}

volt_status volt__cuda_graph_launch(volt_device *d, volt_device_graph *g, char *err, size_t errlen) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    if (!g) { snprintf(err, errlen, "cuda: graph_launch: no graph"); return VOLT_ERR_INVALID_ARG; }
    volt__cuda_use(c);
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < g->n_h2d && e == cudaSuccess; i++)   /* the step's inputs, and the user's snapshots */
        e = cudaMemcpyAsync(g->h2d[i].dst, g->h2d[i].src, g->h2d[i].n, cudaMemcpyHostToDevice, c->stream);
    if (e == cudaSuccess) e = cudaGraphLaunch(g->exec, c->stream);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda: cudaGraphLaunch: %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
        return e == cudaErrorMemoryAllocation ? VOLT_ERR_NOMEM : VOLT_ERR_BACKEND;
    }
    return VOLT_OK;
}

void volt__cuda_graph_destroy(volt_device *d, volt_device_graph *g) {
    if (!g) return;
    if (d && volt__cuda_ctx(d)->n_graphs > 0) volt__cuda_ctx(d)->n_graphs--;
    if (g->exec) cudaGraphExecDestroy(g->exec);
    free_snapshots(g->h2d, g->n_h2d);
    free(g->h2d);
    free(g);
}
