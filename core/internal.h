/* Private structures of the core: arena, tape nodes, backend vtable, param store.
 * Included by the library layers (core/, precision/, strategies/, data/, trainer/), never by
 * models/, callbacks/ or apps/, which use include/volt/ only. */
#ifndef VOLT_CORE_INTERNAL_H
#define VOLT_CORE_INTERNAL_H

#include <stdarg.h>
#include "volt/core.h"
#include "core/units.h"
#include "core/err.h"
#include "core/rng.h"
#include "volt/params.h"
#include "core/ops_list.h"
#include "core/device.h"

/* ---- arena: bump allocation, released at step end -------------------------------- */
typedef struct volt_arena_block { struct volt_arena_block *next; size_t cap, used; } volt_arena_block;
typedef struct volt_arena {
    char *base;            /* main block */
    size_t cap, used;      /* main block */
    volt_arena_block *overflow;  /* blocks allocated when the main block ran out */
    size_t overflow_used;  /* bytes handed out from overflow blocks */
    size_t peak;           /* max (used + overflow_used) ever */
    uint64_t heap_allocs;  /* number of malloc calls made */
} volt_arena;

volt_status volt__arena_init(volt_arena *a, size_t cap);
void *volt__arena_alloc(volt_arena *a, size_t bytes);   /* 64-byte aligned, NULL on OOM */
/* Release everything; if overflow blocks were needed, regrow the main block to the peak
 * so later steps of the same size never allocate. */
void volt__arena_reset(volt_arena *a);
void volt__arena_free(volt_arena *a);

/* ---- tape ----------------------------------------------------------------------- */
typedef struct volt_node {
    volt_op_id op;
    int32_t n_in;
    volt_tensor **in;      /* n_in inputs (arena) */
    volt_tensor *out;
    void *saved;           /* op-specific data kept for backward (arena) */
    float f[4];            /* op attributes (float) */
    int64_t i[8];          /* op attributes (int) */
} volt_node;
/* GEMM nodes (linear, matmul) keep the step's compute dtype here (volt/ops.h). */
#define VOLT_GEMM_COMPUTE_ATTR 7

/* ---- backend vtable ---------------------------------------------------------------- */
/* forward computes n->out from n->in. backward ACCUMULATES into n->in[k]->grad for every
 * input with VOLT_TENSOR_REQUIRES_GRAD (the tape has allocated and zeroed those grads);
 * n->out->grad holds the upstream gradient. Ops the backend marks in first_write get no
 * such preparation: an input grad may still be NULL (this node is its first writer), and
 * the kernel takes it with volt__grad_w / volt__grad_alias, storing instead of adding. */
struct volt_kernel {
    const char *name;
    volt_status (*forward)(volt_step *s, volt_node *n);
    volt_status (*backward)(volt_step *s, volt_node *n);
};

const volt_backend *volt__backend_cpu(void);
const volt_backend *volt__backend_cpu_strict(void);

/* ---- step ----------------------------------------------------------------------- */
#define VOLT_SCRATCH_SLOTS 4
struct volt_step {
    volt_device *dev;      /* where its tensors live (the param store's device) */
    const volt_backend *be;   /* dev->be */
    volt_params *params;
    volt_arena arena;
    volt_node *tape;       /* nodes that need backward, creation (= topological) order */
    int n_nodes, cap_nodes;
    uint64_t seed, rng_offset;
    uint32_t rng_calls;    /* dropout calls this step: part of the RNG counter */
    uint64_t stamp;        /* increments every begin; units remember the stamp of first use */
    bool active, training, backward_done;
    uint64_t heap_allocs;  /* tape growth mallocs */
    volt_tensor *loss;     /* set by volt_step_set_loss */
    /* where volt_log sends values (the trainer); NULL = logging is a no-op */
    volt_status (*log_fn)(void *ctx, const char *name, double value, unsigned flags);
    void *log_ctx;
    volt_status status;
    char errmsg[512];
    /* precision (core/ops_cast.c): GEMM operand dtype, and kernel scratch reused by every
     * op (16-bit operands converted to f32); grows, freed at destroy */
    volt_dtype compute_dtype;
    void *scratch[VOLT_SCRATCH_SLOTS];
    size_t scratch_cap[VOLT_SCRATCH_SLOTS];
};

/* Kernel scratch slot `slot` (< VOLT_SCRATCH_SLOTS) of at least n floats, 64-byte aligned,
 * valid until the next request of that slot (ops run one at a time); NULL + step error on
 * OOM. Not the arena: it is reused, so converting operands does not grow the step. */
float *volt__scratch(volt_step *s, int slot, size_t n);
void volt__scratch_free(volt_step *s);
/* Ops whose kernels take 16-bit float inputs; volt__op gives every other op an f32 copy of a
 * 16-bit input through a recorded CAST node. */
bool volt__op_takes_16bit(volt_op_id op);
static inline bool volt__is_16bit(const volt_tensor *t) { return t->dtype == VOLT_BF16 || t->dtype == VOLT_F16; }
static inline bool volt__is_float(const volt_tensor *t) { return t->dtype == VOLT_F32 || volt__is_16bit(t); }

/* Record an op: checks inputs (NULL => propagate the step's error), fires unit_use for
 * parameter inputs, allocates the output, runs the forward kernel and appends a tape
 * node when the output needs grad. The node's attributes are copied from *attrs (may be
 * NULL). Returns the output or NULL (error recorded). */
volt_tensor *volt__op(volt_step *s, volt_op_id op, int n_in, volt_tensor *const *in,
                      volt_dtype out_dt, volt_shape out_shape, const volt_node *attrs);
/* Same, but the output aliases `view_of`'s data (reshape). */
volt_tensor *volt__op_view(volt_step *s, volt_op_id op, volt_tensor *in, volt_shape shape);
/* True if any input is NULL (the step already carries an error) — front-ends return NULL. */
bool volt__any_null(volt_step *s, int n, volt_tensor *const *in);
/* Shape error naming the op and shapes. Returns NULL for use in `return volt__shape_err(...)`. */
volt_tensor *volt__shape_err(volt_step *s, const char *op, const char *what,
                             const volt_tensor *a, const volt_tensor *b);
volt_tensor *volt__dtype_err(volt_step *s, const char *op, const volt_tensor *t, const char *want);

/* Float grad of t (allocated + zeroed lazily in the arena for activations). */
float *volt__grad(volt_step *s, volt_tensor *t);
/* For first_write backward kernels. t's grad to write into: when t has none yet it is
 * allocated uninitialised and *acc = false (store every element: this is the first
 * write), else *acc = true (add). NULL on OOM (step error set). */
float *volt__grad_w(volt_step *s, volt_tensor *t, bool *acc);
/* When t has no grad yet, make `buf` its grad (no copy) and return true. buf must be the
 * node's own upstream grad n->out->grad, which nothing reads once this backward is done,
 * and at most one input of a node may take it. */
bool volt__grad_alias(volt_tensor *t, float *buf);

static inline bool volt__needs_grad(const volt_tensor *t) {
    return (t->flags & VOLT_TENSOR_REQUIRES_GRAD) != 0;
}

/* ---- param store ---------------------------------------------------------------- */
struct volt_unit {
    char *name;
    int index;
    int n_params, cap_params;
    volt_tensor **params;
    int64_t numel;         /* padded length of the flat buffers */
    float *data, *grad;    /* data is NULL when parameters are stored in 16 bits: */
    uint16_t *data16;      /* ... then the values are here (volt_params_convert) */
    uint64_t use_stamp;    /* step stamp of the last unit_use */
    int32_t first_node;    /* tape index of the first node reading the unit this step */
    bool busy;             /* an op being recorded reads it (its unit_use hooks are firing) */
    int64_t grad_lo, grad_hi;  /* the grads this process uses after the reduction (the owned slice) */
    bool stale;            /* some values are not valid here (sharded): reads fire unit_use first */
    void *strategy_data;   /* owned by the strategy */
};

typedef struct volt_param_rec {   /* per-parameter bookkeeping next to its tensor */
    volt_tensor t;
    int64_t offset;               /* elements into the unit buffers */
    volt_init init;
    int64_t zero_row1;            /* 1 + row zeroed after init (volt_param_set_init_zero_row), 0 = none */
    bool requires_grad;
} volt_param_rec;

struct volt_params {
    volt_device *dev;      /* where unit buffers (and the optimizer's states) live */
    uint64_t seed;
    bool finalized;
    int n_units, cap_units;
    volt_unit **units;
    int n_params, cap_params;
    volt_param_rec **params;
    const volt_unit_hooks *hooks;
    void *hooks_ctx;
    int64_t unit_pad;      /* unit buffers padded to a multiple of unit_pad * VOLT_PARAM_ALIGN floats */
    volt_dtype dtype;      /* parameter storage: f32 (default), bf16 or f16 */
    double *norm_dev;      /* device scratch: the squared grad norm (volt_params_grad_sqnorm) */
    char errmsg[512];
};

static inline volt_param_rec *volt__param_rec(const volt_tensor *t) { return (volt_param_rec *)t; }

/* Hot element loops are compiled for AVX-512 and AVX2 (with FMA) too, picked at load time;
 * the library itself targets x86-64-v2 (SSE4.2). The results of a loop may differ in the
 * last bit between those ISAs (FMA contraction), never between runs or thread counts. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VOLT__SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VOLT__SIMD_CLONES
#endif

/* ---- config checks with their reason (volt/optim.h's _validate return only the status):
 * write "which field is wrong and why" into msg (n bytes); the trainer reports it. ---- */
struct volt_optimizer_config;
struct volt_scheduler_config;
volt_status volt__optimizer_config_check(const struct volt_optimizer_config *c, char *msg, size_t n);
volt_status volt__scheduler_config_check(const struct volt_scheduler_config *c, char *msg, size_t n);

/* ---- RNG: core/rng.h ---- */

#endif
