/* core/device.h — the backend is a device (DESIGN §3; ggml-backend's shape).
 *
 * A backend is a registered, versioned const table: it owns memory (alloc/free, memset,
 * copies host<->device and device<->device, give-back and re-commit of a range), a stream
 * with events and synchronize, capabilities and supports_op, the op kernels, and the
 * parameter math (zero, scale, squared norm, clip, unscale + found-inf, optimizer updates,
 * dtype conversion). Everything that holds tensor data — the step arena and kernel scratch,
 * unit buffers (values and grads), optimizer states, the grad scaler's state — is allocated
 * through it, and host code touches that memory only through these calls.
 *
 * "Device memory" is whatever alloc returns. On "cpu" it is ordinary host memory; on
 * "cpu-strict" it is mapped PROT_NONE except while one of the backend's own functions runs
 * (a host dereference anywhere else faults at once, with a stack); on "cuda" it is GPU
 * memory. Code outside core/<backend>/ never dereferences it: it calls the table.
 *
 * Ordering: every call is issued on the device's one compute stream, in program order.
 * copy D2H returns once the host bytes are valid (it synchronizes); every other call may
 * return before the device has finished (CPU backends finish before returning). Events
 * order work across streams (the NCCL comm stream); on CPU they are no-ops.
 *
 * Tables are versioned (VOLT_BACKEND_VERSION, append-only; NULL = optional where said) and
 * checked when a backend registers (volt__backend_register). */
#ifndef VOLT_CORE_DEVICE_H
#define VOLT_CORE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "volt/core.h"
#include "volt/memory.h"
#include "core/ops_list.h"

typedef struct volt_device volt_device;
typedef struct volt_backend volt_backend;
typedef struct volt_kernel volt_kernel;          /* core/internal.h */
typedef struct volt_param_math volt_param_math;

/* ---- capabilities -------------------------------------------------------------------------- */
enum {
    /* Device memory is ordinary host memory the process may read (cpu). Comm backends that
     * take host buffers (mpi) use it in place; otherwise they stage through host copies. */
    VOLT_DEV_HOST_ADDRESSABLE = 1u << 0,
    VOLT_DEV_BF16_NATIVE = 1u << 1,      /* GEMMs with bf16 operands run natively */
    VOLT_DEV_F16_NATIVE = 1u << 2,       /* GEMMs with f16 operands run natively */
    VOLT_DEV_GIVE_BACK = 1u << 3,        /* give_back really returns memory (else it zeroes) */
    VOLT_DEV_TF32 = 1u << 4,             /* f32 GEMMs can run in TF32 when the step allows it */
};

/* H2D_SNAPSHOT (version 5): an H2D copy of the user's host data (volt_tensor_from_host,
 * _copy_from_host, a user's seed grad), which may be gone once the call returns. Outside a
 * capture it is an H2D copy; a captured graph keeps its own copy of the bytes (graph_begin).
 * Tables older than 5 are given VOLT_COPY_H2D instead (volt__dev_h2d_snapshot). */
typedef enum volt_copy_kind {
    VOLT_COPY_H2D = 0, VOLT_COPY_D2H = 1, VOLT_COPY_D2D = 2, VOLT_COPY_H2D_SNAPSHOT = 3
} volt_copy_kind;

typedef struct volt_device_event volt_device_event;
typedef struct volt_device_graph volt_device_graph;   /* an executable captured graph (backend's) */

/* ---- parameter math ------------------------------------------------------------------------ */
/* The optimizer's per-step scalars, computed by the host in double (PyTorch computes them in
 * Python) and rounded to f32 once. They live in DEVICE memory (volt_optimizer keeps one
 * copy there, refreshed by one H2D copy per step), so a captured step (CUDA graph) replays
 * the copy from a fixed host address instead of baking the learning rate in. */
typedef struct volt_opt_coef {
    float wd;                            /* L2 decay added to the grad (SGD, Adam); 0 = none */
    float momentum, one_minus_damp, neg_lr;   /* SGD */
    int32_t nesterov, first;                  /* SGD: bools */
    float decay;                         /* AdamW: p *= decay; 1 = none */
    float w1, one_minus_w1, beta2, w2, bc2_sqrt, eps, neg_step_size;   /* Adam / AdamW */
    /* weight averaging (version 6; volt_param_math.average): what this step does to the
     * average, decided by the host per step (a captured step replays the copy, so a step
     * that leaves the average alone is avg_op NONE, not a missing launch) */
    int32_t avg_op;                      /* volt_avg_op */
    float avg_a, avg_b;                  /* EMA: a = decay, b = 1 - decay; LERP: a = weight */
} volt_opt_coef;

/* What volt_param_math.average does to each element avg[i] with the parameter p[i]:
 * NONE leaves it; COPY: avg = p (torch AveragedModel's first update); EMA: avg = a*avg + b*p
 * (torch.optim.swa_utils.get_ema_avg_fn, two f32 products and a sum, no FMA); LERP: torch's
 * lerp_(p, a) (get_swa_multi_avg_fn with a = 1/(n_averaged+1)): a < 0.5 ? avg + a*(p-avg)
 * : p - (p-avg)*(1-a). */
typedef enum volt_avg_op { VOLT_AVG_NONE = 0, VOLT_AVG_COPY = 1, VOLT_AVG_EMA = 2, VOLT_AVG_LERP = 3 } volt_avg_op;

typedef enum volt_update_kind { VOLT_UPDATE_SGD = 0, VOLT_UPDATE_ADAM = 1, VOLT_UPDATE_ADAMW = 2 } volt_update_kind;

/* One optimizer update over n elements: values p (p_dt: f32, bf16 or f16), f32 grads g,
 * states s0 (SGD momentum buffer or Adam exp_avg; NULL when SGD has no momentum) and s1
 * (Adam exp_avg_sq) in s_dt. 16-bit values/states are widened to f32, updated with the same
 * f32 operations and rounded to nearest even on store. All pointers are device memory. */
typedef struct volt_update_args {
    volt_update_kind kind;
    void *p;
    volt_dtype p_dt;
    const float *g;
    void *s0, *s1;
    volt_dtype s_dt;
    int64_t n;
    const volt_opt_coef *coef;           /* device memory */
    /* NULL, or a device flag read by the update itself: nonzero = change nothing. A captured
     * step (compile) under 16-mixed passes the grad scaler's found_inf here, so the graph
     * skips the step on inf/NaN without a host read. */
    const float *skip;
} volt_update_args;

/* The dynamic grad scaler's state (16-mixed), in device memory: torch.amp.GradScaler's
 * scale / growth tracker / found_inf tensors. */
typedef struct volt_scaler_state {
    float scale;
    float found_inf;                     /* 0 or 1 after unscale; kept by scaler_update (the
                                            boundary's decision, until the next unscale) */
    int64_t growth_tracker;
} volt_scaler_state;

struct volt_param_math {
    /* x[0..n) *= coef. */
    void (*scale)(volt_device *d, float *x, int64_t n, float coef);
    /* *acc (a device double) += sum of x[i]^2, in a fixed order (four sequential lanes,
     * (l0+l1)+(l2+l3)): the same bits for any thread count. */
    void (*sqnorm_acc)(volt_device *d, const float *x, int64_t n, double *acc);
    /* Clip by global norm: with norm = sqrt(*sqnorm) (device double) and
     * coef = (float)(max_norm / (norm + 1e-6)), x *= coef when coef < 1 and norm is finite;
     * nothing otherwise (like torch.nn.utils.clip_grad_norm_, error_if_nonfinite=False). */
    void (*clip_by_norm)(volt_device *d, float *x, int64_t n, const double *sqnorm, float max_norm);
    /* x clamped to [-v, v]. */
    void (*clip_value)(volt_device *d, float *x, int64_t n, float v);
    /* x *= (float)(1.0 / st->scale); st->found_inf = 1 if any x (before scaling) is inf/NaN
     * (it is never cleared here: the boundary clears it before the first unit). */
    void (*unscale)(volt_device *d, float *x, int64_t n, volt_scaler_state *st);
    /* torch's _amp_update_scale_: on found_inf scale *= backoff and the tracker restarts;
     * else every `interval` good steps scale *= growth (kept finite). found_inf is left as
     * it was: the step's decision, which a captured step's host reads after the launch. */
    void (*scaler_update)(volt_device *d, volt_scaler_state *st, float growth, float backoff, int64_t interval);
    /* One optimizer update (volt_update_args). */
    void (*update)(volt_device *d, const volt_update_args *a);
    /* n elements from src (src_dt) into dst (dst_dt): f32 <-> bf16/f16 rounding to nearest
     * even, or a copy when the dtypes match. Device memory on both sides. */
    void (*convert)(volt_device *d, void *dst, volt_dtype dst_dt, const void *src, volt_dtype src_dt, int64_t n);
    /* ---- backend version 6 (read only from tables of version >= 6; NULL = not supported) ---- */
    /* Weight averaging over n elements: avg (a_dt) updated from the parameter values p (p_dt)
     * as coef->avg_op says (volt_avg_op), the math in f32, 16-bit rounded to nearest even on
     * store. skip: NULL or a device flag, nonzero = change nothing (16-mixed's inf/NaN step). */
    void (*average)(volt_device *d, void *avg, volt_dtype a_dt, const void *p, volt_dtype p_dt, int64_t n,
                    const volt_opt_coef *coef, const float *skip);
};

/* ---- the table ----------------------------------------------------------------------------- */
struct volt_backend {
    uint32_t version;                    /* VOLT_BACKEND_VERSION */
    const char *name;                    /* "cpu", "cpu-strict", "cuda" */
    const char *description;             /* one line, for --help and errors */
    /* Devices of this kind present (0 = none: "auto" skips the backend). */
    int (*device_count)(void);
    /* Open device `ordinal`: *ctx is the backend's state for it (may stay NULL). Called once
     * per ordinal per process (volt__device_get caches the device). */
    volt_status (*open)(int ordinal, void **ctx, char *err, size_t errlen);
    unsigned (*caps)(volt_device *d);    /* VOLT_DEV_* */
    /* NULL = every op in `kernels` with a forward is supported for every dtype. */
    bool (*supports_op)(volt_device *d, volt_op_id op, volt_dtype dt);

    /* memory: alloc returns `bytes` of device memory aligned to at least 64 bytes (whole
     * pages, page-aligned, for allocations of a page or more), or NULL when out of memory.
     * Contents are undefined. */
    void *(*alloc)(volt_device *d, size_t bytes);
    void (*free)(volt_device *d, void *p);                        /* NULL-safe */
    void (*memset)(volt_device *d, void *p, int value, size_t bytes);
    void (*copy)(volt_device *d, void *dst, const void *src, size_t bytes, volt_copy_kind kind);
    /* The whole pages (device granules) inside [p, p+bytes) stop holding memory until
     * recommit; partial pages are zeroed. p lies in one allocation. The given-back pages
     * may not be read or written (by kernels, copies, memset) until recommit: on cuda they
     * are unmapped, on cpu-strict they fault even inside the backend. Issued in stream
     * order: work already queued that touches the range completes first. */
    void (*give_back)(volt_device *d, void *p, size_t bytes);
    /* Make [p, p+bytes) usable again after give_back: the pages given back read as zeros
     * (cpu: nothing to do, pages fault in as zeros). VOLT_ERR_NOMEM when the device has no
     * memory left for them. NULL = nothing to do. */
    volt_status (*recommit)(volt_device *d, void *p, size_t bytes);
    /* Bytes of [p, p+bytes) holding memory now (cpu: mincore). */
    int64_t (*resident_bytes)(volt_device *d, const void *p, size_t bytes);

    /* stream and events */
    void (*synchronize)(volt_device *d);
    volt_device_event *(*event_create)(volt_device *d);
    void (*event_record)(volt_device *d, volt_device_event *e);
    void (*event_wait)(volt_device *d, volt_device_event *e);     /* the stream waits */
    void (*event_destroy)(volt_device *d, volt_device_event *e);

    const volt_kernel *kernels;          /* VOLT_OP_COUNT entries, indexed by volt_op_id */
    const volt_param_math *pm;

    /* ---- version 3: deferred errors and graph capture (all optional: NULL = none) ---- */
    /* A device word (uint64, all bits set = "no error") kernels atomically lower to the key
     * (slot << 40 | position) of a bad index they find, instead of the host reading a flag
     * back after each op (volt__step_defer, volt_step_check). NULL: kernels report bad
     * indices at the op (cpu). The word lives as long as the device. */
    uint64_t *(*error_word)(volt_device *d);
    /* Capture: every call issued on the device's stream between graph_begin and graph_end
     * becomes part of the graph instead of running (kernels, GEMMs, memset, D2D copies).
     * While capturing, alloc returns NULL and free, D2H copies and synchronize are refused;
     * graph_end then fails naming the first such call. An H2D copy is recorded with its host
     * source address and re-issued by every graph_launch, before the graph, from that same
     * address: the host writes a step's inputs (RNG offset, optimizer scalars) there before
     * launching. An H2D_SNAPSHOT copy (version 5) is re-issued the same way from the graph's
     * own copy of the bytes, taken at capture (freed by graph_destroy): the user's host data
     * is frozen at capture, like every other host decision of the captured step. Errors are
     * formatted into err. */
    volt_status (*graph_begin)(volt_device *d, char *err, size_t errlen);
    volt_status (*graph_end)(volt_device *d, volt_device_graph **out, char *err, size_t errlen);
    volt_status (*graph_launch)(volt_device *d, volt_device_graph *g, char *err, size_t errlen);
    void (*graph_destroy)(volt_device *d, volt_device_graph *g);   /* NULL-safe */

    /* ---- version 4: memory that can shrink (optional: NULL = alloc) ---- */
    /* Like alloc, for buffers a strategy gives back in part and recommits later at the same
     * address (the param store's unit values and grads): whole device granules inside a
     * given-back range really stop holding memory (cuda: a reserved virtual range mapped
     * granule by granule). Freed with free. */
    void *(*alloc_givable)(volt_device *d, size_t bytes);

    /* ---- version 5: no new entries; copy may be given VOLT_COPY_H2D_SNAPSHOT ---- */
    /* ---- version 6: no new entries here; pm->average (weight averaging) may be set ---- */

    /* ---- version 7 (optional: NULL = none) ---- */
    /* The device's product name as its driver reports it ("NVIDIA H200"), for the peak-FLOP/s
     * table of ThroughputMonitor's MFU (volt_available_flops); NULL when it has none (cpu).
     * Valid for the device's life. */
    const char *(*device_name)(volt_device *d);

    /* ---- version 8 (optional: NULL = none) ---- */
    /* The device's memory now (volt_device_memory, volt/memory.h): what volt holds, its
     * high-waters, the device's free and total bytes. No synchronization. NULL where device
     * memory is the host's (cpu): the host's own figures say it. VOLT_ERR_BACKEND when the
     * runtime cannot say (err says why). */
    volt_status (*memory_stats)(volt_device *d, volt_device_memory *out, char *err, size_t errlen);
};
#define VOLT_BACKEND_VERSION 8u

/* An open device: the backend, its ordinal and the backend's state. Process-lifetime. */
struct volt_device {
    const volt_backend *be;
    int ordinal;
    unsigned caps;
    void *ctx;
    /* Between volt__dev_graph_begin and volt__dev_graph_end: the stream is being captured
     * (nothing runs; a synchronize would be refused). */
    bool capturing;
    /* While a graph is captured: what the caller is running ("training_step", "backward",
     * ...), which a backend names when it refuses a call (graph_end's message). A note, not
     * a state: `capturing` says whether a capture is open. */
    const char *capture_note;
};

/* ---- registry ------------------------------------------------------------------------------ */
/* Add a backend (built-ins register themselves: cpu, cpu-strict, and cuda when compiled in).
 * VOLT_ERR_VERSION when be->version is not one this library knows; VOLT_ERR_INVALID_ARG when
 * a required entry is NULL or the name is taken. */
volt_status volt__backend_register(const volt_backend *be, char *err, size_t errlen);
const volt_backend *volt__backend_find(const char *name);
int volt__backend_count(void);
const volt_backend *volt__backend_at(int i);
/* Resolve Lightning's accelerator/devices: accelerator "cpu", "cpu-strict", "cuda" or "auto"
 * (NULL = "auto": $VOLT_ACCELERATOR when set, else "cuda" when a GPU is present, else "cpu");
 * `ordinal` picks the device. The device is opened once and cached. Errors name the
 * accelerators known and present. */
volt_status volt__device_get(const char *accelerator, int ordinal, volt_device **out, char *err, size_t errlen);
/* Its first half: the backend the accelerator names, with a device present, opening none
 * (volt_trainer_config_check); NULL and err (the same message) otherwise. */
const volt_backend *volt__device_resolve(const char *accelerator, char *err, size_t errlen);
/* The process's default CPU device. */
volt_device *volt__device_cpu(void);

/* ---- shorthands (host side) ----------------------------------------------------------------- */
static inline void *volt__dev_alloc(volt_device *d, size_t n) { return d->be->alloc(d, n); }
static inline void volt__dev_free(volt_device *d, void *p) { if (p) d->be->free(d, p); }
static inline void volt__dev_memset(volt_device *d, void *p, int v, size_t n) { if (n) d->be->memset(d, p, v, n); }
static inline void volt__dev_h2d(volt_device *d, void *dst, const void *src, size_t n) { if (n) d->be->copy(d, dst, src, n, VOLT_COPY_H2D); }
/* The user's host data (volt_copy_kind): a captured graph replays the bytes src held now. */
static inline void volt__dev_h2d_snapshot(volt_device *d, void *dst, const void *src, size_t n) {
    if (n) d->be->copy(d, dst, src, n, d->be->version >= 5 ? VOLT_COPY_H2D_SNAPSHOT : VOLT_COPY_H2D);
}
static inline void volt__dev_d2h(volt_device *d, void *dst, const void *src, size_t n) { if (n) d->be->copy(d, dst, src, n, VOLT_COPY_D2H); }
static inline void volt__dev_d2d(volt_device *d, void *dst, const void *src, size_t n) { if (n) d->be->copy(d, dst, src, n, VOLT_COPY_D2D); }
static inline bool volt__dev_host_addressable(const volt_device *d) { return (d->caps & VOLT_DEV_HOST_ADDRESSABLE) != 0; }
/* The version-3 entries, NULL for older tables (which do not have the fields). */
/* Unit buffers: the version-4 alloc_givable when the backend has one, else alloc. */
static inline void *volt__dev_alloc_givable(volt_device *d, size_t n) {
    return d->be->version >= 4 && d->be->alloc_givable ? d->be->alloc_givable(d, n) : d->be->alloc(d, n);
}
/* The version-6 weight averaging entry, NULL for older tables or a backend without it. */
static inline void (*volt__dev_pm_average(const volt_device *d))(volt_device *, void *, volt_dtype, const void *, volt_dtype,
                                                                 int64_t, const volt_opt_coef *, const float *) {
    return d->be->version >= 6 ? d->be->pm->average : NULL;
}
static inline bool volt__dev_has_graphs(const volt_device *d) { return d->be->version >= 3 && d->be->graph_begin; }
/* The version-7 device_name when the backend has one, else NULL. */
static inline const char *volt__dev_name(volt_device *d) {
    return d->be->version >= 7 && d->be->device_name ? d->be->device_name(d) : NULL;
}
/* The version-8 memory_stats: VOLT_ERR_UNSUPPORTED (err says so) for a backend without one. */
static inline volt_status volt__dev_memory_stats(volt_device *d, volt_device_memory *out, char *err, size_t errlen) {
    if (d->be->version >= 8 && d->be->memory_stats) return d->be->memory_stats(d, out, err, errlen);
    snprintf(err, errlen, "the '%s' backend has no device memory of its own (it is the host's)", d->be->name);
    return VOLT_ERR_UNSUPPORTED;
}
/* The backend's graph_begin / graph_end, keeping d->capturing. */
static inline volt_status volt__dev_graph_begin(volt_device *d, char *err, size_t errlen) {
    volt_status st = d->be->graph_begin(d, err, errlen);
    d->capturing = st >= 0;
    return st;
}
static inline volt_status volt__dev_graph_end(volt_device *d, volt_device_graph **out, char *err, size_t errlen) {
    d->capturing = false;
    return d->be->graph_end(d, out, err, errlen);
}
static inline uint64_t *volt__dev_error_word(volt_device *d) {
    return d->be->version >= 3 && d->be->error_word ? d->be->error_word(d) : NULL;
}

#endif
