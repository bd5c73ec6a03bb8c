/* A step's tensors (core/step.c has the step, its tape and backward): the memory records
 * behind their data in the step pool, given back when released and no backward reads them;
 * tensor headers (new, wrap, from host, views' headers via volt__tensor_hdr); copies between
 * the host and a tensor's device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
#include "core/units.h"
#include "volt/dtype.h"

/* ---- tensor memory: the step pool, given back when released and no backward reads it ---- */
/* bytes of device memory from the step's pool for a tensor header's data: the header's
 * `mem` (1-based), 0 + step error on out of memory */
int32_t volt__mem_new(volt_step *s, size_t bytes, void **ptr) {
    *ptr = NULL;
    if (s->n_mem == s->cap_mem) {
        int cap = s->cap_mem ? s->cap_mem * 2 : 256;
        volt_mem *m = realloc(s->mem, sizeof *m * (size_t)cap);
        if (!m) { volt_step_fail(s, VOLT_ERR_NOMEM, "step: out of memory for tensor records"); return 0; }
        s->mem = m;
        s->cap_mem = cap;
        s->heap_allocs++;
    }
    void *p = volt__pool_alloc(&s->grads, bytes);
    if (!p) {
        volt_step_fail(s, VOLT_ERR_NOMEM, "step: out of device memory allocating a %zu-byte tensor", bytes);
        return 0;
    }
    volt__step_note_peak(s);
    s->mem[s->n_mem] = (volt_mem){ .ptr = p, .holders = 1, .bytes = bytes };
    *ptr = p;
    return ++s->n_mem;
}

/* t's memory record when it is this step's (views share their base's) */
volt_mem *volt__mem_of(volt_step *s, const volt_tensor *t) {
    if (!t || t->owner.mem <= 0 || t->owner.mem > s->n_mem) return NULL;
    volt_mem *m = &s->mem[t->owner.mem - 1];
    return m->ptr == t->data ? m : NULL;
}

static void mem_maybe_free(volt_step *s, volt_mem *m) {
    if (m->holders || m->readers || m->pinned || m->freed) return;
    m->freed = true;
    /* tests (VOLT_POISON_GRADS): a read of freed memory sees NaN, not the old values */
    if (s->poison_grads) volt__dev_memset(s->dev, m->ptr, 0xff, m->bytes);
    volt__pool_release(&s->grads, m->ptr);
}

void volt_tensor_release(volt_step *s, volt_tensor *t) {
    if (!s || !t || (t->flags & VOLT_TENSOR_RELEASED)) return;
    volt_mem *m = volt__mem_of(s, t);
    if (!m) return;   /* a parameter, a wrapped buffer: not the step's to give back */
    t->flags |= VOLT_TENSOR_RELEASED;
    if (m->holders) m->holders--;
    mem_maybe_free(s, m);
}

/* Kept to step end whatever is released: what the host reads after the ops (the loss, the
 * index tensors volt_step_check reports from). */
void volt__step_pin(volt_step *s, const volt_tensor *t) {
    volt_mem *m = volt__mem_of(s, t);
    if (m) m->pinned = true;
}

uint32_t volt__op_bwd_reads(volt_op_id op) {
    switch (op) {
    case VOLT_OP_ADD: case VOLT_OP_SCALE: case VOLT_OP_DROPOUT: case VOLT_OP_RESHAPE: case VOLT_OP_PERMUTE:
    case VOLT_OP_SLICE: case VOLT_OP_CONCAT: case VOLT_OP_SUM: case VOLT_OP_MEAN: case VOLT_OP_CAST:
    case VOLT_OP_ARANGE: case VOLT_OP_ARGMAX: case VOLT_OP_ACCURACY:
        return 0;                       /* grads and shapes only; dropout redraws its mask */
    case VOLT_OP_TANH: case VOLT_OP_SIGMOID: case VOLT_OP_SOFTMAX: case VOLT_OP_LOG_SOFTMAX:
        return VOLT_READS_OUT;          /* from y */
    case VOLT_OP_RELU: case VOLT_OP_GELU: case VOLT_OP_GELU_TANH: case VOLT_OP_EMBEDDING:
        return 1u;                      /* from x; embedding: the ids */
    case VOLT_OP_MATMUL: case VOLT_OP_LINEAR: case VOLT_OP_MUL: case VOLT_OP_MSE: case VOLT_OP_CROSS_ENTROPY:
    case VOLT_OP_LAYERNORM: case VOLT_OP_CONV2D:
        return VOLT_READS_ALL_IN;
    default:                            /* attention (q, k, v, mask, out), max_pool2d */
        return VOLT_READS_ALL_IN | VOLT_READS_OUT;
    }
}

/* The tensor node n's backward reads as `bit` (input k: 1 << k; VOLT_READS_OUT: the output) */
static volt_tensor *read_of(const volt_node *n, uint32_t bit) {
    if (bit == VOLT_READS_OUT) return n->out;
    int k = 0;
    while (!(bit & 1u)) bit >>= 1, k++;
    return n->in[k];
}

/* The tape holds what node n's backward reads (n->bwd_reads) until that backward has run. */
void volt__hold_reads(volt_step *s, volt_node *n) {
    n->held = 0;
    for (int k = 31; k < n->n_in; k++) {   /* past the mask's bits: kept to step end when the op reads its inputs */
        volt_mem *m = volt__mem_of(s, n->in[k]);
        if (m && (n->bwd_reads & VOLT_READS_ALL_IN) == VOLT_READS_ALL_IN) m->pinned = true;
    }
    const uint32_t inputs = n->n_in >= 31 ? VOLT_READS_ALL_IN : (1u << n->n_in) - 1u;
    for (uint32_t want = n->bwd_reads & (inputs | VOLT_READS_OUT); want; want &= want - 1) {
        const uint32_t bit = want & -want;
        volt_mem *m = volt__mem_of(s, read_of(n, bit));
        if (!m) continue;
        m->readers++;
        n->held |= bit;
    }
}

void volt__drop_reads(volt_step *s, volt_node *n) {
    for (uint32_t held = n->held; held; held &= held - 1) {
        volt_mem *m = volt__mem_of(s, read_of(n, held & -held));
        if (!m) continue;
        if (m->readers) m->readers--;
        mem_maybe_free(s, m);
    }
    n->held = 0;
}

/* bytes from the host into dst, which may be pool memory the step reused: on a device the
 * host cannot address, through fresh arena memory and a device copy. A captured step
 * (docs/CUDA.md, "compile") re-issues its H2D copies before the graph at every launch, so
 * an H2D's destination must be memory no earlier node of the step writes: true of an arena
 * block (never reused within a step), not of a pool block (a released tensor's, or a grad's
 * given back). The copy into dst is then a device copy, in stream order. Staged eagerly
 * too: the captured step must allocate what the eager step of its shape did.
 * user: src is the user's (volt_tensor_from_host, _copy_from_host, a seed grad), valid
 * during the call only: a snapshot copy, whose bytes a captured graph keeps (core/device.h).
 * Else src is the library's, at an address it rewrites before each replay, or constant. */
bool volt__step_h2d(volt_step *s, void *dst, const void *src, size_t bytes, bool user) {
    void (*h2d)(volt_device *, void *, const void *, size_t) = user ? volt__dev_h2d_snapshot : volt__dev_h2d;
    if (volt__dev_host_addressable(s->dev) || !bytes) {
        h2d(s->dev, dst, src, bytes);
        return true;
    }
    void *stage = volt_step_alloc(s, bytes);
    if (!stage) return false;
    h2d(s->dev, stage, src, bytes);
    volt__dev_d2d(s->dev, dst, stage, bytes);
    return true;
}

/* The stamp of the begin a tensor made now belongs to: made between volt_step_end and the
 * next volt_step_begin, the next one's (record() and backward refuse a tensor of another). */
static uint32_t step_stamp_now(const volt_step *s) { return (uint32_t)(s->stamp + (s->active ? 0 : 1)); }
bool volt__tensor_current(const volt_step *s, const volt_tensor *t) {
    return t->owner.step == s && t->owner.stamp == (uint32_t)s->stamp;
}

volt_tensor *volt__tensor_hdr(volt_step *s, volt_dtype dt, volt_shape shape) {
    if (!s) return NULL;
    if ((unsigned)dt >= VOLT_DTYPE_COUNT || shape.ndim < 0 || shape.ndim > VOLT_MAX_DIMS) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "tensor: bad dtype %d or ndim %d", (int)dt, shape.ndim);
        return NULL;
    }
    for (int i = 0; i < shape.ndim; i++)
        if (shape.d[i] < 0) {
            volt_step_fail(s, VOLT_ERR_SHAPE, "tensor: negative dimension %lld", (long long)shape.d[i]);
            return NULL;
        }
    /* numel * 16 (the widest dtype's bytes and then some) fits an int64: a byte count, an
     * offset or an aligned size computed from it never wraps */
    int64_t numel = volt_shape_numel(shape);
    if (numel < 0 || numel > INT64_MAX / 16) {
        char b[128];
        volt_step_fail(s, VOLT_ERR_SHAPE, "tensor: shape %s has too many elements", volt_shape_str(shape, b, sizeof b));
        return NULL;
    }
    volt_tensor *t = volt__step_host_alloc(s, sizeof *t);
    if (!t) return NULL;
    *t = (volt_tensor){ .dtype = dt, .shape = shape, .node = -1, .device = s->dev,
                        .owner = { .step = s, .stamp = step_stamp_now(s) } };
    return t;
}

volt_tensor *volt_tensor_new(volt_step *s, volt_dtype dt, volt_shape shape) {
    volt_tensor *t = volt__tensor_hdr(s, dt, shape);
    if (!t) return NULL;
    size_t bytes = (size_t)volt_shape_numel(shape) * volt_dtype_size(dt);
    if (!(t->owner.mem = volt__mem_new(s, bytes, &t->data))) return NULL;
    volt__dev_memset(s->dev, t->data, 0, bytes);
    return t;
}

volt_tensor *volt_tensor_wrap(volt_step *s, volt_dtype dt, volt_shape shape, void *data) {
    volt_tensor *t = volt__tensor_hdr(s, dt, shape);
    if (t && !data && volt_tensor_numel(t)) {
        char b[128];
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "tensor_wrap: data is NULL for a %s tensor of shape %s",
                       volt_dtype_name(dt), volt_shape_str(shape, b, sizeof b));
        return NULL;
    }
    if (t) t->data = data;
    return t;
}

volt_tensor *volt_tensor_requires_grad(volt_step *s, volt_tensor *t) {
    if (!t) return NULL;
    if (t->dtype != VOLT_F32 && t->dtype != VOLT_BF16 && t->dtype != VOLT_F16)
        return volt__dtype_err(s, "requires_grad", t, "a float dtype");
    t->flags |= VOLT_TENSOR_REQUIRES_GRAD;
    return t;
}

size_t volt_tensor_bytes(const volt_tensor *t) { return (size_t)volt_tensor_numel(t) * volt_dtype_size(t->dtype); }

volt_tensor *volt_tensor_from_host(volt_step *s, volt_dtype dt, volt_shape shape, const void *src) {
    volt_tensor *t = volt__tensor_hdr(s, dt, shape);
    if (!t) return NULL;
    size_t bytes = volt_tensor_bytes(t);
    if (!src && bytes) {
        char b[128];
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "tensor_from_host: src is NULL for a %s tensor of shape %s",
                       volt_dtype_name(dt), volt_shape_str(shape, b, sizeof b));
        return NULL;
    }
    if (!(t->owner.mem = volt__mem_new(s, bytes, &t->data)) || !volt__step_h2d(s, t->data, src, bytes, true)) return NULL;
    return t;
}

/* A tensor's device: its own, else the CPU (tensors filled in by hand). */
static volt_device *tensor_dev(const volt_tensor *t) { return t->device ? t->device : volt__device_cpu(); }

volt_status volt_tensor_to_host(const volt_tensor *t, void *dst) {
    if (!t || !dst || (!t->data && volt_tensor_numel(t))) return VOLT_ERR_INVALID_ARG;
    if (t->flags & VOLT_TENSOR_RELEASED) return VOLT_ERR_STATE;   /* its memory may hold another tensor */
    /* a sharded parameter whose unit is not gathered: only the owned slice holds its values
     * (the rest was given back, or holds what another rank had) */
    if ((t->flags & VOLT_TENSOR_PARAM) && t->unit && volt__unit_stale(t->unit)) return VOLT_ERR_STATE;
    volt__dev_d2h(tensor_dev(t), dst, t->data, volt_tensor_bytes(t));
    return VOLT_OK;
}

volt_status volt_tensor_grad_to_host(const volt_tensor *t, float *dst) {
    if (!t || !dst) return VOLT_ERR_INVALID_ARG;
    if (!t->grad) return VOLT_ERR_STATE;
    /* a sharding strategy gave this unit's grads back (all after zero_grad, the rest of its
     * slice after the reduce-scatter): no whole grad to read (on cuda, unmapped memory) */
    if ((t->flags & VOLT_TENSOR_PARAM) && t->unit && volt__unit_grads_given_back(t->unit)) return VOLT_ERR_STATE;
    if ((t->flags & VOLT_TENSOR_PARAM) && t->unit) volt__unit_grads_settle(t->unit);   /* cleared: zeros */
    volt__dev_d2h(tensor_dev(t), dst, t->grad, sizeof(float) * (size_t)volt_tensor_numel(t));
    return VOLT_OK;
}

/* Into the step's pool (t->owner.mem): staged like volt_tensor_from_host (volt__step_h2d), since the
 * block may have held a tensor released earlier in the step. A parameter, a wrapped buffer
 * (memory that is not the step's to reuse) or a tensor filled in by hand: copied directly. */
volt_status volt_tensor_copy_from_host(volt_tensor *t, const void *src) {
    if (!t || !src || (!t->data && volt_tensor_numel(t))) return VOLT_ERR_INVALID_ARG;
    if (t->flags & VOLT_TENSOR_RELEASED) return VOLT_ERR_STATE;
    /* a sharded parameter whose unit is not gathered: its next gather would overwrite what
     * lies outside the owned slice (on cuda: unmapped granules) */
    if ((t->flags & VOLT_TENSOR_PARAM) && t->unit && volt__unit_stale(t->unit)) return VOLT_ERR_STATE;
    volt_step *s = t->owner.step;
    if (s && volt__mem_of(s, t)) return volt__step_h2d(s, t->data, src, volt_tensor_bytes(t), true) ? VOLT_OK : s->status;
    volt__dev_h2d_snapshot(tensor_dev(t), t->data, src, volt_tensor_bytes(t));
    return VOLT_OK;
}

double volt_tensor_item(const volt_tensor *t) {
    unsigned char b[8] = { 0 };
    if (!t) return NAN;
    if (!t->data) return 0;
    if (t->flags & VOLT_TENSOR_RELEASED) return NAN;
    volt__dev_d2h(tensor_dev(t), b, t->data, volt_dtype_size(t->dtype));
    switch (t->dtype) {
    case VOLT_F32: { float f; memcpy(&f, b, 4); return f; }
    case VOLT_I32: { int32_t v; memcpy(&v, b, 4); return v; }
    case VOLT_I64: { int64_t v; memcpy(&v, b, 8); return (double)v; }
    case VOLT_U8: return b[0];
    case VOLT_BF16: { uint16_t h; memcpy(&h, b, 2); return volt_bf16_to_f32(h); }
    case VOLT_F16: { uint16_t h; memcpy(&h, b, 2); return volt_f16_to_f32(h); }
    default: return 0;
    }
}
