/* volt/core.h — status codes, dtypes, shapes, tensors, the per-step context.
 *
 * A volt_step is the context every op runs in: it owns the step arena (activations,
 * activation grads, scratch; released by volt_step_end) and the autograd tape. Ops are
 * declared in volt/ops.h; parameters in volt/params.h. */
#ifndef VOLT_CORE_H
#define VOLT_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "volt/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VOLT_MAX_DIMS 4

/* ---- status ---------------------------------------------------------------- */
typedef enum volt_status {
    VOLT_OK = 0,
    VOLT_STOP = 1,                 /* a hook asks for a graceful stop; not an error */
    VOLT_SKIP_EPOCH = 2,           /* the module's on_train_batch_start: skip the rest of this epoch's
                                      training (Lightning's -1; docs/TRAINER.md); not an error */
    VOLT_ERR_NOMEM = -1,
    VOLT_ERR_INVALID_ARG = -2,
    VOLT_ERR_SHAPE = -3,
    VOLT_ERR_DTYPE = -4,
    VOLT_ERR_IO = -5,
    VOLT_ERR_CORRUPT = -6,
    VOLT_ERR_UNSUPPORTED = -7,
    VOLT_ERR_BACKEND = -8,
    VOLT_ERR_COMM = -9,
    VOLT_ERR_VERSION = -10,
    VOLT_ERR_STATE = -11,          /* called at the wrong time (e.g. backward twice) */
    VOLT_ERR_NOT_FOUND = -12,
    VOLT_ERR_TIMEOUT = -13,
    VOLT_ERR_NUMERIC = -14,        /* NaN/inf where a finite value is required; a loss spike (SpikeDetection) */
    VOLT_ERR_INTERRUPTED = -15,    /* SIGINT / SIGTERM: the run stopped at a batch end (docs/TRAINER.md) */
} volt_status;

VOLT_API const char *volt_status_str(volt_status s);

/* Evaluate a volt_status expression; return it from the enclosing function if < 0. */
#define VOLT_TRY(expr) do { volt_status volt__st = (expr); if (volt__st < 0) return volt__st; } while (0)
/* The one rule for the `version` field of every public table and config struct: a struct
 * filled for this release or an earlier one (fields are only ever appended) is accepted, a
 * zeroed one (0, "never initialised") or one from a newer library is refused with
 * VOLT_ERR_VERSION and a message naming the struct. */
#define VOLT_VERSION_OK(v, current) ((v) >= 1u && (v) <= (current))

/* ---- dtypes ------------------------------------------------------------------ */
typedef enum volt_dtype {
    VOLT_F32 = 0, VOLT_BF16, VOLT_F16, VOLT_I32, VOLT_I64, VOLT_U8, VOLT_DTYPE_COUNT
} volt_dtype;

VOLT_API size_t volt_dtype_size(volt_dtype dt);
VOLT_API const char *volt_dtype_name(volt_dtype dt);          /* "f32", "bf16", ... */

/* ---- shapes ------------------------------------------------------------------ */
typedef struct volt_shape {
    int32_t ndim;                  /* 0 = scalar, at most VOLT_MAX_DIMS */
    int64_t d[VOLT_MAX_DIMS];
} volt_shape;

#define VOLT__NARGS(...) VOLT__NARGS_(__VA_ARGS__, 4, 3, 2, 1, 0)
#define VOLT__NARGS_(a, b, c, d, n, ...) n
/* VOLT_SHAPE(7, 13) is a 2-d shape; VOLT_SCALAR the 0-d one. */
#define VOLT_SHAPE(...) ((volt_shape){ VOLT__NARGS(__VA_ARGS__), { __VA_ARGS__ } })
#define VOLT_SCALAR ((volt_shape){ 0, { 0 } })

/* The product of the dims; -1 when ndim is outside 0..VOLT_MAX_DIMS or the product
 * overflows int64 (a tensor is refused long before: volt_tensor_new). */
VOLT_API int64_t volt_shape_numel(volt_shape s);
VOLT_API bool volt_shape_eq(volt_shape a, volt_shape b);
/* Writes "(7, 13)" into buf (always NUL-terminated); returns buf. */
VOLT_API char *volt_shape_str(volt_shape s, char *buf, size_t n);

/* ---- tensors ----------------------------------------------------------------- */
typedef struct volt_step volt_step;
typedef struct volt_unit volt_unit;      /* a param-store unit; see volt/params.h */

enum {
    VOLT_TENSOR_REQUIRES_GRAD = 1u << 0,  /* backward computes a grad for it */
    VOLT_TENSOR_PARAM = 1u << 1,          /* lives in the param store */
    VOLT_TENSOR_RELEASED = 1u << 2,       /* volt_tensor_release: no op may read it again */
};

/* A contiguous, row-major tensor. Activations are created by ops inside a step and live
 * until volt_step_end, or until volt_tensor_release says nothing reads them any more;
 * parameters live in the param store. Fields are read-only for users except `data`
 * contents. */
typedef struct volt_tensor {
    volt_dtype dtype;
    volt_shape shape;
    uint32_t flags;        /* VOLT_TENSOR_* */
    int32_t node;          /* tape index of the producing op, -1 for leaves */
    void *data;            /* numel * dtype size bytes on the step's device */
    float *grad;           /* f32 gradient (numel floats) or NULL until backward needs it */
    volt_unit *unit;       /* owning unit for parameters, else NULL */
    const char *name;      /* parameter name, else NULL */
    struct volt_device *device;   /* where data and grad live (opaque); host code reads them
                                     only through volt_tensor_to_host / volt_tensor_item */
    /* The library's bookkeeping, not for users to read or write: the step that made the
     * tensor (NULL for a parameter or a tensor filled in by hand) and which of that step's
     * memory records holds its data (0: none, e.g. a wrapped buffer), so that
     * volt_tensor_release can give the memory back and copies know where it lives. */
    struct { volt_step *step; int32_t mem; uint32_t stamp; } owner;   /* stamp: the step's begin it belongs to */
} volt_tensor;

static inline int64_t volt_tensor_numel(const volt_tensor *t) { return volt_shape_numel(t->shape); }
static inline float *volt_tensor_f32(const volt_tensor *t) { return (float *)t->data; }

/* ---- the step ---------------------------------------------------------------- */
typedef struct volt_params volt_params;

typedef struct volt_step_config {
    uint32_t version;              /* VOLT_STEP_CONFIG_VERSION, set by _init */
    const char *backend;           /* the accelerator: "auto" (default: the param store's device,
                                      else $VOLT_ACCELERATOR, else cuda if present, else cpu),
                                      "cpu", "cpu-strict", "cuda" */
    size_t arena_bytes;            /* initial arena size; grows on first steps, 0 = 64 MiB */
    int tape_capacity;             /* initial node capacity, grows; 0 = 1024 */
    uint64_t seed;                 /* dropout RNG seed */
    volt_params *params;           /* borrowed; may be NULL (no parameters) */
} volt_step_config;
#define VOLT_STEP_CONFIG_VERSION 1u

VOLT_API void volt_step_config_init(volt_step_config *cfg);
VOLT_API volt_status volt_step_create(const volt_step_config *cfg, volt_step **out);   /* out NULL: INVALID_ARG */
VOLT_API void volt_step_destroy(volt_step *s);              /* NULL-safe */

/* Begin a step: training=true records the tape and makes dropout active. `rng_offset`
 * selects the dropout stream (the trainer passes the global micro-step). Tensors of the
 * previous begin can no longer be given to ops. INVALID_ARG for a NULL step. */
VOLT_API volt_status volt_step_begin(volt_step *s, bool training, uint64_t rng_offset);
/* Backward from a scalar f32 loss: accumulates into parameter grads (param store) and
 * activation grads (the step's grad pool). Errors if loss is not scalar or depends on no
 * parameter. Afterwards leaves (parameters, volt_tensor_requires_grad tensors) hold their
 * grads; an op output's grad was given back as soon as backward had passed its op (its
 * t->grad is NULL, like PyTorch's non-retained grads). */
VOLT_API volt_status volt_step_backward(volt_step *s, volt_tensor *loss);
/* Backward from a tensor of any shape with the given upstream gradient (numel floats),
 * like torch.autograd.backward(t, grad). grad_out is read during the call only (a step
 * captured as a CUDA graph keeps its values, as volt_tensor_from_host does). */
VOLT_API volt_status volt_step_backward_grad(volt_step *s, volt_tensor *t, const float *grad_out);
/* Release the step's arena and tape. Tensors from this step become invalid. Runs
 * volt_step_check first: a deferred error is the step's status after it returns. */
VOLT_API void volt_step_end(volt_step *s);
/* Report errors a backend found on the device and has not reported yet: an embedding id or
 * a cross-entropy target out of range on "cuda" is flagged in a device word by the kernel
 * (no host synchronisation per op) and turned here into the message the CPU gives at the
 * op (the op, the bad value, its index). One synchronising 8-byte read when the step has
 * such checks pending; nothing on cpu (errors there surface at the op). Returns the step's
 * status. */
VOLT_API volt_status volt_step_check(volt_step *s);

/* The first error recorded in the step (ops return NULL on error and keep the message).
 * An op or volt_step_fail given a NULL step does nothing and returns NULL (the error);
 * status INVALID_ARG and errmsg "" for NULL. */
VOLT_API volt_status volt_step_status(const volt_step *s);
VOLT_API const char *volt_step_errmsg(const volt_step *s);
VOLT_API volt_status volt_step_fail(volt_step *s, volt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
VOLT_API bool volt_step_training(const volt_step *s);
VOLT_API volt_params *volt_step_params(const volt_step *s);
/* The step's device: its backend's name ("cpu", "cpu-strict", "cuda"). Static storage. */
VOLT_API const char *volt_step_device(const volt_step *s);

/* Step memory accounting (device bytes: tensors and grads in the step's pool, kernels' saved
 * data in its arena): in use now, and the most in use at once since create. */
VOLT_API size_t volt_step_arena_used(const volt_step *s);
VOLT_API size_t volt_step_arena_peak(const volt_step *s);
/* Device bytes the step holds now: its arena's and its pool's blocks (what the device
 * allocator counts as in use), which is at least the peak above once a step of the shape
 * has run (fragmentation and the arena's margin on top). */
VOLT_API size_t volt_step_mem_held(const volt_step *s);
/* How many heap allocations the arena and tape have made since create (0 growth after
 * warm-up is what "no malloc in the hot loop" means; tests check it). */
VOLT_API uint64_t volt_step_heap_allocs(const volt_step *s);

/* Tensors owned by the step (valid until volt_step_end). _new is zero-filled;
 * _wrap borrows `data` (caller keeps it alive for the step) and copies nothing. A tensor
 * belongs to the step that made it and to that step's current begin (one made between
 * volt_step_end and volt_step_begin, to the next begin): an op or a backward of another step,
 * or after the next volt_step_begin, fails naming the input. NULL + the step's error for a
 * shape of more than INT64_MAX / 16 elements (VOLT_ERR_SHAPE) and for _wrap of NULL data with
 * elements (VOLT_ERR_INVALID_ARG). */
VOLT_API volt_tensor *volt_tensor_new(volt_step *s, volt_dtype dt, volt_shape shape);
VOLT_API volt_tensor *volt_tensor_wrap(volt_step *s, volt_dtype dt, volt_shape shape, void *data);
/* Mark a step-owned leaf as requiring grad (a float tensor); returns t. After backward
 * its gradient is in t->grad. Useful for gradient checks and input saliency. */
VOLT_API volt_tensor *volt_tensor_requires_grad(volt_step *s, volt_tensor *t);
/* The caller will not use t again in this step, as Python's `del t`: its memory goes back
 * to the step's pool as soon as no backward still needs it (at once for a tensor no
 * recorded op's backward reads, else after the last such backward has run), and later
 * tensors of the step reuse it. An op given t afterwards fails the step naming the op and
 * the input; volt_tensor_to_host returns VOLT_ERR_STATE. Views (volt_reshape) share the
 * memory: it goes back when they are all released. A no-op for NULL, a parameter, a
 * wrapped buffer, or a tensor already released. Models call it on their temporaries
 * (nn/encoder.c), which is what lets a training step hold only what backward reads. */
VOLT_API void volt_tensor_release(volt_step *s, volt_tensor *t);
/* Memory from the step arena: DEVICE memory on the step's device (volt_step_device), 64-byte
 * aligned, NOT zeroed, valid until volt_step_end. Host code may hand it to ops
 * (volt_tensor_wrap) and copy it (volt_tensor_to_host / _copy_from_host), but must not
 * dereference it: on "cpu" it is host memory, on "cpu-strict" a read faults, on "cuda" it is
 * GPU memory. NULL (and the step's error) on out of memory. */
VOLT_API void *volt_step_alloc(volt_step *s, size_t bytes);

/* Read a scalar tensor (any float/int dtype) as double: one device->host copy. NAN for NULL. */
VOLT_API double volt_tensor_item(const volt_tensor *t);

/* Data between the host and the tensor's device (explicit copies: on "cpu" a memcpy, on
 * "cuda" a transfer, on "cpu-strict" the only legal way to touch it). numel * dtype size
 * bytes. _from_host makes a new step-owned tensor holding a copy of host `src`;
 * _copy_from_host overwrites t's data with host `src`. Both read `src` during the call only
 * (it may be freed or reused on return). In a step captured as a CUDA graph (compile,
 * docs/CUDA.md) the bytes are taken at capture and every replay uses them, whatever `src`
 * holds then: data that changes per step comes in the batch. A copy into a tensor the step
 * made goes, on a device the host cannot address, through fresh step arena memory and a
 * device copy (a released tensor's memory is reused by later ones, in stream order). */
VOLT_API volt_tensor *volt_tensor_from_host(volt_step *s, volt_dtype dt, volt_shape shape, const void *src);   /* src NULL: error */
/* VOLT_ERR_STATE for a released tensor, and for a parameter of a unit a sharding strategy has
 * not gathered (fsdp between its uses; ZeRO after a failed fit swapped the average back): only
 * this rank's slice holds its values then. After fit, or inside a step, they are whole;
 * volt_trainer_export_full reads the slices of every rank. volt_tensor_copy_from_host refuses
 * such a parameter too (the next gather would overwrite the write). */
VOLT_API volt_status volt_tensor_to_host(const volt_tensor *t, void *dst);
VOLT_API volt_status volt_tensor_copy_from_host(volt_tensor *t, const void *src);
/* t's f32 gradient (numel floats) into host memory; VOLT_ERR_STATE when it has none, and for
 * a parameter whose grads a sharding strategy gave back (deepspeed_stage_2 / fsdp keep only
 * this rank's slice after the reduce-scatter, and nothing after zero_grad). */
VOLT_API volt_status volt_tensor_grad_to_host(const volt_tensor *t, float *dst);
/* Bytes of t's data (numel * dtype size). */
VOLT_API size_t volt_tensor_bytes(const volt_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
