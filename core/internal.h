/* Private structures of the core: arena, tape nodes, backend vtable, param store.
 * Included by the library layers (core/, precision/, strategies/, data/, trainer/), never by
 * models/, callbacks/ or apps/, which use include/volt/ only. */
#ifndef VOLT_CORE_INTERNAL_H
#define VOLT_CORE_INTERNAL_H

#include <stdarg.h>
#include "volt/core.h"
#include "core/units.h"
#include "core/err.h"
#include "core/clock.h"
#include "core/rng.h"
#include "volt/params.h"
#include "core/ops_list.h"
#include "core/device.h"

/* ---- arena: bump allocation, released at step end -------------------------------- */
/* Blocks come from `dev`'s backend (device memory: tensor data, grads, saved data, scratch)
 * or, with dev == NULL, from the host heap (tensor headers, node input arrays, the tape's
 * bookkeeping: what host code reads). */
typedef struct volt_arena_block { struct volt_arena_block *next; char *base; size_t cap, used; } volt_arena_block;
typedef struct volt_arena {
    volt_device *dev;      /* NULL = host memory */
    char *base;            /* main block */
    size_t cap, used;      /* main block */
    volt_arena_block *overflow;  /* blocks allocated when the main block ran out (headers: host) */
    size_t overflow_used;  /* bytes handed out from overflow blocks */
    size_t peak;           /* max (used + overflow_used) ever */
    uint64_t heap_allocs;  /* number of block allocations made */
} volt_arena;

volt_status volt__arena_init(volt_arena *a, volt_device *dev, size_t cap);
void *volt__arena_alloc(volt_arena *a, size_t bytes);   /* 64-byte aligned, NULL on OOM */
/* Release everything; if overflow blocks were needed, regrow the main block to the peak
 * so later steps of the same size never allocate. */
void volt__arena_reset(volt_arena *a);
void volt__arena_free(volt_arena *a);

/* ---- step pool: tensor data and activation grads, given back as they die (core/pool.c) --- */
typedef struct volt_pool_seg { size_t off, size; bool free; int id; } volt_pool_seg;   /* id: the block's request number */
typedef struct volt_pool_ext { void *ptr; size_t bytes; int id; } volt_pool_ext;
typedef struct volt_pool {
    volt_device *dev;
    char *base;            /* main block (device memory) */
    size_t cap;
    volt_pool_seg *seg;    /* segments of the main block by offset, covering [0, cap) (host) */
    int n_seg, cap_seg;
    volt_pool_ext *ext;    /* blocks of their own for requests that did not fit (host list) */
    int n_ext, cap_ext;
    bool overflowed;       /* since the last reset: regrow then */
    size_t used, step_peak;   /* bytes handed out now, max this step */
    int64_t *log;          /* this step's requests (bytes) and give-backs (~id): the regrow's replay */
    int n_log, cap_log;
    bool log_broken;       /* the log could not grow: regrow by the live peak instead */
    int n_ids;             /* requests this step */
    volt_pool_seg *sim;    /* the replay's segments (host scratch) */
    int cap_sim;
    size_t *off;           /* the replay's offset per request (host scratch) */
    int cap_off;
    uint64_t heap_allocs;
} volt_pool;
void volt__pool_init(volt_pool *p, volt_device *dev);
void *volt__pool_alloc(volt_pool *p, size_t bytes);   /* 64-byte aligned, NULL on OOM */
void volt__pool_release(volt_pool *p, void *ptr);     /* give one block back */
/* Give everything back; regrow the main block to what this step needed if it did not fit. */
void volt__pool_reset(volt_pool *p);
void volt__pool_free(volt_pool *p);

/* ---- tape ----------------------------------------------------------------------- */
/* What a backward kernel does with input k's grad (n->grad_mode[k]), decided by the tape
 * before the kernel runs (cuBLAS beta semantics):
 *   NONE   write nothing: the input needs no grad, or the tape made the upstream grad
 *          n->out->grad its grad (ops with volt__op_grad_alias, when the input had none);
 *   STORE  the tape has just allocated the grad (uninitialised): this is its first write,
 *          store every element (beta 0);
 *   ADD    the grad holds earlier contributions: add (beta 1).
 * When one tensor is several inputs of a node, the first gets STORE and the later ones ADD:
 * a kernel writes its inputs' grads in input order. */
typedef enum volt_grad_mode { VOLT_GRAD_NONE = 0, VOLT_GRAD_STORE = 1, VOLT_GRAD_ADD = 2 } volt_grad_mode;

/* Per-op attributes, one named struct per op (or family), set by the front-end (core/ops_*.c)
 * and read by the kernels. GEMM and attention nodes keep the step's compute dtype (volt/ops.h). */
typedef struct volt_attr_matmul {          /* a (M, K) x b (K, N), batch 1; or (B, M, K) x (B, K, N) */
    bool batched;
    int64_t batch, M, K, N;
    volt_dtype compute;
} volt_attr_matmul;
typedef struct volt_attr_linear { int64_t rows, in, out; volt_dtype compute; } volt_attr_linear;
typedef struct volt_attr_broadcast { int64_t inner, outer; } volt_attr_broadcast;   /* add, mul: a (outer, inner), b (inner) */
typedef struct volt_attr_scale { float alpha; } volt_attr_scale;
typedef struct volt_attr_rows { int64_t rows, cols; } volt_attr_rows;              /* softmax, log_softmax: x (rows, cols) */
typedef struct volt_attr_cross_entropy {
    int64_t n, classes, ignore_index;
    float label_smoothing;
    int64_t count;                         /* targets not ignored (written by the forward kernel) */
} volt_attr_cross_entropy;
typedef struct volt_attr_layernorm {
    int64_t rows, cols;
    int32_t w_index, b_index;              /* where weight and bias sit in in[] (-1 = absent) */
    float eps;
} volt_attr_layernorm;
typedef struct volt_attr_embedding { int64_t n, num, dim, padding_idx; } volt_attr_embedding;   /* padding_idx -1 = none */
typedef struct volt_attr_dropout { uint32_t call; float p; } volt_attr_dropout;   /* call: index in the step (RNG) */
typedef struct volt_attr_attention {
    int64_t B, H, Tq, Tk, D;
    bool causal;
    bool packed;                           /* q, k, v, out (B, T, H*D): heads side by side in a row */
    float scale, dropout;
    volt_dtype compute;
    uint32_t call;                         /* dropout call index in the step (RNG) */
} volt_attr_attention;
typedef struct volt_attr_permute { int32_t perm[VOLT_MAX_DIMS]; int32_t ndim; } volt_attr_permute;
typedef struct volt_attr_slice { int64_t outer, size, inner, start, len; } volt_attr_slice;
typedef struct volt_attr_concat { int64_t outer, inner, total; int32_t dim; } volt_attr_concat;
typedef struct volt_attr_conv2d { int64_t stride, padding; } volt_attr_conv2d;
typedef struct volt_attr_max_pool2d { int64_t kernel, stride; } volt_attr_max_pool2d;

typedef union volt_attr {
    volt_attr_matmul matmul;
    volt_attr_linear linear;
    volt_attr_broadcast broadcast;
    volt_attr_scale scale;
    volt_attr_rows rows;
    volt_attr_cross_entropy cross_entropy;
    volt_attr_layernorm layernorm;
    volt_attr_embedding embedding;
    volt_attr_dropout dropout;
    volt_attr_attention attention;
    volt_attr_permute permute;
    volt_attr_slice slice;
    volt_attr_concat concat;
    volt_attr_conv2d conv2d;
    volt_attr_max_pool2d max_pool2d;
} volt_attr;

typedef struct volt_node {
    volt_op_id op;
    int32_t n_in;
    volt_tensor **in;      /* n_in inputs (host arena) */
    volt_tensor *out;
    uint8_t *grad_mode;    /* n_in volt_grad_mode, set by the tape before backward (host arena) */
    void *saved;           /* op-specific data kept for backward (device arena) */
    volt_attr attr;        /* the op's attributes (the member named after the op) */
    /* What the op's backward reads of its tensors: bit k input k's data, VOLT_READS_OUT the
     * output's (volt__op_bwd_reads; a forward kernel may clear a bit: a linear that kept
     * its own 16-bit copy of x does not read x again). The tape holds that memory for the
     * node (`held`: the bits it counted) until its backward has run. */
    uint32_t bwd_reads, held;
} volt_node;
#define VOLT_READS_OUT (1u << 31)
#define VOLT_READS_ALL_IN 0x7fffffffu
/* The op's backward reads, on every backend (their union): VOLT_READS_* bits. */
uint32_t volt__op_bwd_reads(volt_op_id op);

/* The memory behind a step's tensor (volt_tensor.owner.mem - 1): freed to the step's pool when no
 * tensor header holds it (volt_tensor_release) and no tape node's backward still reads it. */
typedef struct volt_mem {
    void *ptr;
    uint32_t holders;      /* headers (the tensor, its views) not released */
    uint32_t readers;      /* tape nodes whose backward reads it and has not run */
    bool pinned;           /* kept to step end (the loss, index tensors the step checks) */
    bool freed;
    size_t bytes;
} volt_mem;

/* ---- backend vtable ---------------------------------------------------------------- */
/* forward computes n->out from n->in. backward writes n->in[k]->grad as n->grad_mode[k]
 * says (store or add; the tape has allocated every grad it asks for); n->out->grad holds
 * the upstream gradient. */
struct volt_kernel {
    const char *name;
    volt_status (*forward)(volt_step *s, volt_node *n);
    volt_status (*backward)(volt_step *s, volt_node *n);
};

const volt_backend *volt__backend_cpu(void);
const volt_backend *volt__backend_cpu_strict(void);

/* ---- step ----------------------------------------------------------------------- */
#define VOLT_SCRATCH_SLOTS 4
/* An index check a kernel runs on the device (core/deferred.c): what the host needs to turn
 * the error word's (slot, position) into the CPU's message. By value: a replayed graph keeps
 * its copy after the step's tensors are gone (the data pointer is a captured address). */
#define VOLT_MAX_DEFERRED 256
#define VOLT_DEFER_SHIFT 40            /* error word key = slot << 40 | position */
typedef struct volt_deferred_check {
    volt_op_id op;                     /* VOLT_OP_EMBEDDING (ids) or VOLT_OP_CROSS_ENTROPY (targets) */
    volt_dtype dtype;                  /* of the index tensor: i32 or i64 */
    volt_shape shape;
    const void *data;                  /* device memory */
    int64_t bound;                     /* valid indices are [0, bound) */
} volt_deferred_check;
struct volt_step {
    volt_device *dev;      /* where its tensors live (the param store's device) */
    const volt_backend *be;   /* dev->be */
    volt_params *params;
    volt_arena arena;      /* device memory: tensor data, grads, kernels' saved data */
    volt_arena host;       /* host memory: tensor headers, node input arrays, grad modes */
    volt_pool grads;       /* device memory: tensor data and activation grads, given back as
                              they die (released tensors, grads after their node's backward) */
    volt_mem *mem;         /* the step's tensor memory records (host; grows, reused) */
    int n_mem, cap_mem;
    size_t mem_peak;       /* max (arena + grad pool) bytes in use at once, since create */
    volt_node *tape;       /* nodes that need backward, creation (= topological) order */
    int n_nodes, cap_nodes;
    uint64_t seed, rng_offset;
    uint32_t rng_calls;    /* dropout calls this step: part of the RNG counter */
    uint64_t stamp;        /* increments every begin; units remember the stamp of first use */
    uint64_t null_notes;   /* volt__null_note_count() at begin: a later note is this step's */
    bool active, training, backward_done;
    uint64_t heap_allocs;  /* tape growth mallocs */
    volt_tensor *loss;     /* set by volt_step_set_loss */
    /* where volt_log sends values (the trainer); NULL = logging is a no-op */
    volt_status (*log_fn)(void *ctx, const char *name, double value, unsigned flags);
    void *log_ctx;
    volt_status status;
    char errmsg[512];
    /* precision (core/ops_cast.c): GEMM operand dtype */
    volt_dtype compute_dtype;
    /* tests: linears convert their bf16 operands at use instead of keeping forward's copies
     * for backward (core/cpu/basic.c), to compare the two paths */
    bool linear_keep_bf16_off;
    /* f32 GEMMs may use TF32 (matmul_precision "high"/"medium"; only on a backend with the
     * VOLT_DEV_TF32 cap: the trainer refuses it elsewhere) */
    bool matmul_tf32;
    /* kernel scratch reused by every op (16-bit operands converted to f32): device memory
     * from the step's backend; grows, freed at destroy */
    void *scratch[VOLT_SCRATCH_SLOTS];
    size_t scratch_cap[VOLT_SCRATCH_SLOTS];
    /* index checks pending in the backend's error word (volt__dev_error_word), this step */
    volt_deferred_check deferred[VOLT_MAX_DEFERRED];
    int n_deferred;
    /* rng_offset in device memory (8 bytes), written by volt_step_begin with one H2D copy
     * from &rng_offset: kernels that read it there (cuda dropout, attention) see the offset
     * of each replay of a captured step, which re-issues that copy */
    uint64_t *rng_dev;
    /* VOLT_PROFILE=1: per-op kernel times (core/profile.c); NULL when off */
    struct volt_profile *prof;
    /* VOLT_POISON_GRADS=1: every grad the tape allocates is filled with NaN bytes (0xff) before
     * its STORE kernel runs, so a kernel that leaves elements of a STORE grad unwritten makes
     * NaN the op tests see, not a stale value the pool happened to hold (tests/poison.cmake) */
    bool poison_grads;
    /* detect_anomaly (core/anomaly.c): a training step reads back every op's output and every
     * grad backward writes and fails at the first NaN; scratch host buffer, grown, kept */
    bool detect_anomaly;
    void *anomaly_buf;
    size_t anomaly_cap;
};
volt_status volt__anomaly_forward(volt_step *s, const volt_node *n, int index);
volt_status volt__anomaly_backward(volt_step *s, const volt_node *n, int index);

/* Register an index check for the backend's error word: *key_base (slot << 40) is what the
 * kernel adds to the bad position it reports. VOLT_ERR_NOMEM past VOLT_MAX_DEFERRED checks
 * in one step. core/deferred.c. */
volt_status volt__step_defer(volt_step *s, volt_op_id op, const volt_tensor *idx, int64_t bound, uint64_t *key_base);
/* Keep t's memory to step end whatever is released (the loss; index tensors volt_step_check
 * reads back). A no-op for a tensor that is not the step's. core/tensor.c. */
void volt__step_pin(volt_step *s, const volt_tensor *t);

/* ---- a step's tensors and their memory (core/tensor.c; the tape in core/step.c) ---- */
/* A tensor header from the step's host arena (data NULL, no memory record); NULL + step
 * error on a bad dtype or shape. */
volt_tensor *volt__tensor_hdr(volt_step *s, volt_dtype dt, volt_shape shape);
/* t was made by s since its last volt_step_begin (or, made while s was not begun, for the
 * begin that followed): what an op or a backward of s may read. core/tensor.c. */
bool volt__tensor_current(const volt_step *s, const volt_tensor *t);
/* bytes of the step pool for a header's data: its `owner.mem` (1-based), 0 + step error on OOM. */
int32_t volt__mem_new(volt_step *s, size_t bytes, void **ptr);
/* t's memory record if t is this step's, else NULL. */
volt_mem *volt__mem_of(volt_step *s, const volt_tensor *t);
/* A tape node's backward reads (n->bwd_reads) hold its inputs' (and output's) memory, and
 * let it go once that backward ran (memory nothing holds goes back to the pool). */
void volt__hold_reads(volt_step *s, volt_node *n);
void volt__drop_reads(volt_step *s, volt_node *n);
/* Host bytes into dst of the step's device, staged through fresh arena memory when dst may
 * be reused pool memory (a captured step re-issues H2D copies before the graph); user: src
 * is the caller's, a snapshot copy (core/device.h). false + step error on OOM. */
bool volt__step_h2d(volt_step *s, void *dst, const void *src, size_t bytes, bool user);
/* The step's arena + pool high-water, after an allocation (volt_step_arena_peak). core/step.c. */
void volt__step_note_peak(volt_step *s);

/* GELU (exact and tanh) under bf16 compute (volt_step_set_compute_dtype), on the tape: the
 * node keeps x's bf16 rounding for backward, as autocast's bf16 GELU keeps its bf16 input,
 * and so does not hold the f32 input (half the bytes of the FFN's widest activation). The
 * forward kernel fills k->x (numel halves, arena) from x; backward takes f'(x) at it.
 * volt__gelu_keep sets n->saved and clears the node's read of x; NULL when the node keeps
 * nothing (another dtype, not on the tape) or on out of memory (step error set).
 * core/ops_act.c. */
typedef struct volt_kept16 { void *x; volt_dtype dt; } volt_kept16;
volt_kept16 *volt__gelu_keep(volt_step *s, volt_node *n);
const volt_kept16 *volt__gelu_kept(const volt_node *n);

/* ---- per-op profile (core/profile.c; VOLT_PROFILE=1, VOLT_PROFILE_WARMUP=N) ---- */
typedef struct volt_profile volt_profile;
volt_status volt__profile_create(volt_step *s);          /* s->prof from the environment */
void volt__profile_destroy(volt_step *s);                /* prints the table to stderr, frees */
void volt__profile_begin(volt_step *s);
void volt__profile_end(volt_step *s);
double volt__profile_mark(volt_step *s);                 /* a start time (0 when not counting) */
/* adds now - t0 to op's forward (what 0), backward (1) or to the grad set-up (2) */
void volt__profile_add(volt_step *s, volt_op_id op, int what, double t0);
size_t volt__profile_format(const volt_step *s, char *buf, size_t len);

/* Kernel scratch slot `slot` (< VOLT_SCRATCH_SLOTS) of at least n floats of device memory
 * (the step's backend allocates it), 64-byte aligned, valid until the next request of that
 * slot (ops run one at a time); NULL + step error on OOM. Not the arena: it is reused, so
 * converting operands does not grow the step. Called by kernels. */
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
 * NULL: none). Returns the output or NULL (error recorded). */
volt_tensor *volt__op(volt_step *s, volt_op_id op, int n_in, volt_tensor *const *in,
                      volt_dtype out_dt, volt_shape out_shape, const volt_attr *attrs);
/* Same, but the output aliases `view_of`'s data (reshape). */
volt_tensor *volt__op_view(volt_step *s, volt_op_id op, volt_tensor *in, volt_shape shape);
/* True if any input is NULL or the step already failed: front-ends then return NULL. A NULL
 * input fails the step naming op and the input, with a volt__null_note said during the step
 * (why the caller got a NULL: a misspelt batch field). */
bool volt__any_null(volt_step *s, const char *op, int n, volt_tensor *const *in);
/* Shape error naming the op and shapes. Returns NULL for use in `return volt__shape_err(...)`. */
volt_tensor *volt__shape_err(volt_step *s, const char *op, const char *what,
                             const volt_tensor *a, const volt_tensor *b);
volt_tensor *volt__dtype_err(volt_step *s, const char *op, const volt_tensor *t, const char *want);
/* An embedding id outside [0, num) at flat position pos of ids: the step's error, naming the
 * position as a multi-index into ids' shape (core/ops_act.c; every backend's kernel). */
volt_status volt__embedding_id_err(volt_step *s, const volt_tensor *ids, int64_t pos, int64_t id, int64_t num);
/* The same with the op's name and a reason appended ("embedding backward", " (...)"). */
volt_status volt__embedding_id_err_in(volt_step *s, const char *op, const char *why, const volt_tensor *ids, int64_t pos,
                                      int64_t id, int64_t num);
/* A shape's dims and row-major strides padded to 4 with leading size-1 dims (stride 0):
 * the permute kernels' index arithmetic. ndim <= 4. */
static inline void volt__shape_pad4(volt_shape sh, int64_t d[4], int64_t st[4]) {
    int off = 4 - sh.ndim;
    int64_t acc = 1;
    for (int i = 3; i >= 0; i--) {
        d[i] = i >= off ? sh.d[i - off] : 1;
        st[i] = i >= off ? acc : 0;
        acc *= d[i];
    }
}

/* A permute node's copies as 4-D gathers (every backend's permute kernels): forward reads
 * the input with dims D and strides S into the contiguous output; backward reads the
 * output's grad with the input's dims D and strides S into the input's grad. */
static inline void volt__permute_gather_fwd(const volt_node *n, int64_t D[4], int64_t S[4]) {
    const int32_t *perm = n->attr.permute.perm;
    const int off = 4 - n->attr.permute.ndim;
    int64_t xd[4], xs[4];
    volt__shape_pad4(n->in[0]->shape, xd, xs);
    for (int i = 0; i < 4; i++) {   /* output dim i reads input dim perm[i] */
        int src = i >= off ? perm[i - off] + off : i;
        D[i] = xd[src];
        S[i] = xs[src];
    }
}
static inline void volt__permute_gather_bwd(const volt_node *n, int64_t D[4], int64_t S[4]) {
    const int32_t *perm = n->attr.permute.perm;
    const int off = 4 - n->attr.permute.ndim;
    int64_t xs[4], yd[4], ys[4];
    volt__shape_pad4(n->in[0]->shape, D, xs);
    volt__shape_pad4(n->out->shape, yd, ys);
    for (int i = 0; i < 4; i++) S[i] = ys[i];
    for (int i = off; i < 4; i++) S[perm[i - off] + off] = ys[i];   /* input dim perm[i] <- output dim i */
}

/* Host-memory bump allocation for the step's bookkeeping (released at step end). */
void *volt__step_host_alloc(volt_step *s, size_t bytes);
/* Input index of `op` whose grad may BE the node's upstream grad when it has none yet (the
 * tape then gives it n->out->grad, mode NONE: no copy), or -1. Only for inputs with the
 * output's element count whose grad is dy itself (reshape, add's full-size operand). */
int volt__op_grad_alias(volt_op_id op);
/* False for ops whose output carries no gradient (argmax, accuracy, arange): the tape
 * records no node for them whatever their inputs. */
bool volt__op_differentiable(volt_op_id op);

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
    int32_t n_clear;       /* parameters whose grad is cleared but not written yet (volt_params_clear_grad) */
    bool given_back[2];    /* part of the values / grads was given back (volt__unit_release): recommit
                              before anything touches the buffer outside the kept range (volt__unit_commit) */
    bool grads_unborn;     /* finalize gave the grads back untouched (no memory held) and nothing has
                              committed them since: backward's first write, an optimizer over the
                              store or volt_unit_grad does (PyTorch's grad None until backward) */
    void *strategy_data;   /* owned by the strategy */
};

typedef struct volt_param_rec {   /* per-parameter bookkeeping next to its tensor */
    volt_tensor t;
    int64_t offset;               /* elements into the unit buffers */
    volt_init init;
    int64_t zero_row1;            /* 1 + row zeroed after init (volt_param_set_init_zero_row), 0 = none */
    bool requires_grad;
    /* The grad is 0 by volt_params_clear_grad, but its buffer was not written (PyTorch's
     * set_to_none): the next backward stores into it instead of adding (a STORE grad mode,
     * no memset), and a read before that (volt__unit_grads_settle) writes the zeros. */
    bool grad_clear;
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
    bool skip_init;        /* volt__params_skip_init: finalize zeroes the values, draws nothing */
    char errmsg[512];
};
/* Before finalize: the values will be overwritten whole (the trainer loads a checkpoint next),
 * so finalize sets them to zero instead of drawing the inits. */
static inline void volt__params_skip_init(volt_params *ps) { ps->skip_init = true; }
/* A new step for this store (the trainer renewed its step: trainer/setup.c): every unit forgets
 * the old step's stamp of first use, which the new step's count would otherwise meet again
 * (core/step.c use_units: a unit whose use_stamp matched would skip its first use). */
static inline void volt__params_forget_step(volt_params *ps) {
    for (int i = 0; i < ps->n_units; i++) {
        ps->units[i]->use_stamp = 0;
        ps->units[i]->first_node = -1;
    }
}
/* Stores whose finalize drew their inits (tests: a load that skips them draws none). */
uint64_t volt__params_inits(void);
/* Counts every change of a parameter's requires_grad in the process (volt_param_set_requires_grad)
 * and every move of parameters between optimizer groups: a captured step (trainer/compile.c)
 * froze which parameters get grads and updates, and how the updates split by group. */
uint64_t volt__params_trainable_gen(void);
void volt__params_layout_changed(void);   /* bumps it: an optimizer's groups moved parameters */

static inline volt_param_rec *volt__param_rec(const volt_tensor *t) { return (volt_param_rec *)t; }
/* volt_params_clip_grad_norm in two halves, for a strategy that sums the norm over ranks on the
 * device between them (strategies/boundary.c, a captured step under ddp / ZeRO): the sum of
 * squares of the grad ranges into the store's device double, *sq; then every grad range
 * scaled by max_norm / (sqrt(*sq) + 1e-6) where that is below 1 and the norm finite. */
volt_status volt__params_grad_sqnorm_dev(volt_params *ps, double **sq);
/* Commit the grads of every unit finalize left unborn (volt_unit.grads_unborn): an optimizer
 * over the store reads all of them. VOLT_ERR_NOMEM with a message on the store. */
volt_status volt__params_commit_grads(volt_params *ps);
void volt__params_clip_by_dev_norm(volt_params *ps, float max_norm);
/* compile (trainer/compile.c): whether the grads are marked cleared (volt_params_clear_grad),
 * which decides each parameter grad's STORE or ADD in backward (core/step.c prepare_grads), a
 * host decision a captured step freezes: 1 every grad of every unit with grads, 0 none, -1 some.
 * And the mark set to `cleared` on every such grad without writing anything: after a replay,
 * what the captured step left (its backward wrote the grads, its boundary cleared them). */
int volt__params_grads_cleared(const volt_params *ps);
void volt__params_mark_grads_cleared(volt_params *ps, bool cleared);
/* Write the zeros of u's cleared grads (volt_param_rec.grad_clear): every reader of a unit's
 * grad buffer outside a backward kernel calls it first (volt_unit_grad does). */
void volt__unit_grads_settle(volt_unit *u);
/* t a parameter whose grad is cleared: takes the clear mark (the caller stores into it) */
static inline bool volt__param_take_clear(volt_tensor *t) {
    if (!t->unit) return false;
    volt_param_rec *r = volt__param_rec(t);
    if (!r->grad_clear) return false;
    r->grad_clear = false;
    t->unit->n_clear--;
    return true;
}


/* ---- config checks with their reason (volt/optim.h's _validate return only the status):
 * write "which field is wrong and why" into msg (n bytes); the trainer reports it. ---- */
struct volt_optimizer_config;
struct volt_scheduler_config;
volt_status volt__optimizer_config_check(const struct volt_optimizer_config *c, char *msg, size_t n);
volt_status volt__scheduler_config_check(const struct volt_scheduler_config *c, char *msg, size_t n);

/* A captured optimizer step's host half on replay (core/optim.c): this step's volt_opt_coef
 * into the host source of the H2D copy the graph launch re-issues, and the step count. */
struct volt_optimizer;
struct volt_optim_group;
void volt__optimizer_advance(struct volt_optimizer *opt);
/* volt_optimizer_step whose updates read a device flag first and change nothing when it is
 * nonzero (volt_update_args.skip; NULL: volt_optimizer_step). The step count advances either
 * way: a caller that learns afterwards that the step was skipped sets it back
 * (volt_optimizer_set_step_count). */
volt_status volt__optimizer_step_unless(struct volt_optimizer *opt, const float *skip);
/* The host learnt that the last step was skipped on the device (16-mixed under compile): the
 * step count and, when that step was to update the weight average, its n_averaged go back. */
void volt__optimizer_unstep(struct volt_optimizer *opt);
/* Backend updates (pm->update) issued so far: one per run of adjacent trainable parameters
 * of one group per unit and step (tests). */
int64_t volt__optimizer_launches(const struct volt_optimizer *opt);
/* Group g's current lr, alone (volt_scheduler: lr_at of the group's own base lr). */
void volt__optimizer_set_group_lr(struct volt_optimizer *opt, int g, float lr);
/* A checkpoint's added group back (trainer/checkpoint.c): as volt_optimizer_add_param_group,
 * with the step count it was added at and its current lr (NAN: its base lr). */
volt_status volt__optimizer_add_group_at(struct volt_optimizer *opt, const struct volt_optim_group *gr, int64_t step0, float lr_now);
/* Drops the added groups from index n on (a failed resume's), their parameters back where
 * they were. */
void volt__optimizer_truncate_groups(struct volt_optimizer *opt, int n);

/* ---- RNG: core/rng.h ---- */

#endif
