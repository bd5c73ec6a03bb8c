/* The step: arena + autograd tape. Ops append nodes in creation order (a topological
 * order); backward walks them in reverse, accumulating grads, and tells the param store's
 * hooks when each unit's grads are complete. The step's tensors and the memory behind them
 * (the pool, release, host copies) are core/tensor.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
#include "volt/dtype.h"
#include "volt/ops.h"


#define HOST_ARENA_BYTES (1u << 20)   /* grows to the step's peak like the device arena */

void volt_step_config_init(volt_step_config *cfg) {
    *cfg = (volt_step_config){ .version = VOLT_STEP_CONFIG_VERSION, .backend = "auto",
                               .arena_bytes = 64u << 20, .tape_capacity = 1024, .seed = 0 };
}

volt_status volt_step_create(const volt_step_config *cfg, volt_step **out) {
    if (!out) return VOLT_ERR_INVALID_ARG;
    *out = NULL;
    if (!cfg || !VOLT_VERSION_OK(cfg->version, VOLT_STEP_CONFIG_VERSION)) return VOLT_ERR_VERSION;
    /* the param store's device when there is one (its tensors are read by the step's ops) */
    volt_device *dev = cfg->params ? cfg->params->dev : NULL;
    char err[256];
    if (!dev && volt__device_get(cfg->backend, 0, &dev, err, sizeof err) < 0) return VOLT_ERR_UNSUPPORTED;
    if (cfg->params && cfg->backend && strcmp(cfg->backend, "auto") && volt__backend_find(cfg->backend) != dev->be)
        return VOLT_ERR_INVALID_ARG;   /* the step would run on another device than its parameters */
    volt_step *s = calloc(1, sizeof *s);
    if (!s) return VOLT_ERR_NOMEM;
    s->dev = dev;
    s->be = dev->be;
    s->params = cfg->params;
    s->seed = cfg->seed;
    s->cap_nodes = cfg->tape_capacity > 0 ? cfg->tape_capacity : 1024;
    s->tape = malloc(sizeof *s->tape * (size_t)s->cap_nodes);
    /* tensor data in device memory; headers and the tape's bookkeeping on the host */
    if (!s->tape || volt__arena_init(&s->arena, dev, cfg->arena_bytes ? cfg->arena_bytes : (64u << 20)) ||
        volt__arena_init(&s->host, NULL, HOST_ARENA_BYTES)) {
        volt__arena_free(&s->arena);
        free(s->tape);
        free(s);
        return VOLT_ERR_NOMEM;
    }
    volt__pool_init(&s->grads, dev);
    if (!(s->rng_dev = volt__dev_alloc(dev, sizeof *s->rng_dev))) {
        volt_step_destroy(s);
        return VOLT_ERR_NOMEM;
    }
    s->heap_allocs = 1;
    const char *poison = getenv("VOLT_POISON_GRADS");
    s->poison_grads = poison && poison[0] && strcmp(poison, "0") != 0;
    if (volt__profile_create(s) < 0) {
        volt_step_destroy(s);
        return VOLT_ERR_NOMEM;
    }
    *out = s;
    return VOLT_OK;
}

void volt_step_destroy(volt_step *s) {
    if (!s) return;
    volt__profile_destroy(s);
    free(s->anomaly_buf);
    volt__scratch_free(s);
    volt__dev_free(s->dev, s->rng_dev);
    volt__pool_free(&s->grads);
    free(s->mem);
    volt__arena_free(&s->arena);
    volt__arena_free(&s->host);
    free(s->tape);
    free(s);
}

volt_status volt_step_fail(volt_step *s, volt_status st, const char *fmt, ...) {
    if (s && s->status >= 0) {      /* keep the first error: later ones are usually fallout */
        va_list ap;
        va_start(ap, fmt);
        volt__set_err(s->errmsg, sizeof s->errmsg, fmt, ap);
        va_end(ap);
        s->status = st;
    }
    return st;
}

volt_status volt_step_status(const volt_step *s) { return s ? s->status : VOLT_ERR_INVALID_ARG; }
const char *volt_step_errmsg(const volt_step *s) { return s ? s->errmsg : ""; }
bool volt_step_training(const volt_step *s) { return s->training; }
volt_params *volt_step_params(const volt_step *s) { return s->params; }
const char *volt_step_device(const volt_step *s) { return s->be->name; }
static size_t mem_used(const volt_step *s) { return s->arena.used + s->arena.overflow_used + s->grads.used; }
void volt__step_note_peak(volt_step *s) {
    size_t u = mem_used(s);
    if (u > s->mem_peak) s->mem_peak = u;
}
size_t volt_step_arena_used(const volt_step *s) { return mem_used(s); }
size_t volt_step_arena_peak(const volt_step *s) { return s->mem_peak; }
size_t volt_step_mem_held(const volt_step *s) {
    size_t n = s->arena.cap + s->grads.cap;
    for (const volt_arena_block *b = s->arena.overflow; b; b = b->next) n += b->cap;
    for (int i = 0; i < s->grads.n_ext; i++) n += s->grads.ext[i].bytes;
    for (int i = 0; i < VOLT_SCRATCH_SLOTS; i++) n += s->scratch_cap[i];
    return n;
}
uint64_t volt_step_heap_allocs(const volt_step *s) {
    return s->arena.heap_allocs + s->host.heap_allocs + s->grads.heap_allocs + s->heap_allocs;
}

volt_status volt_step_begin(volt_step *s, bool training, uint64_t rng_offset) {
    if (!s) return VOLT_ERR_INVALID_ARG;
    if (s->active) volt_step_end(s);
    s->active = true;
    s->training = training;
    s->backward_done = false;
    s->rng_offset = rng_offset;
    s->rng_calls = 0;
    s->stamp++;
    s->null_notes = volt__null_note_count();
    s->n_nodes = 0;
    s->loss = NULL;
    s->status = VOLT_OK;
    s->errmsg[0] = 0;
    s->n_deferred = 0;
    /* from the field's fixed address: a captured step re-issues this copy at every replay */
    volt__dev_h2d(s->dev, s->rng_dev, &s->rng_offset, sizeof s->rng_offset);
    if (s->prof) volt__profile_begin(s);
    if (s->params && !volt_params_finalized(s->params))
        return volt_step_fail(s, VOLT_ERR_STATE, "step: parameter store is not finalized");
    return VOLT_OK;
}

void volt_step_end(volt_step *s) {
    if (!s) return;
    if (s->n_deferred) volt_step_check(s);   /* before the index tensors are released */
    if (s->prof && s->active) volt__profile_end(s);
    s->active = false;
    s->n_nodes = 0;
    s->n_mem = 0;   /* the pool's reset gives every tensor back */
    volt__pool_reset(&s->grads);
    volt__arena_reset(&s->arena);
    volt__arena_reset(&s->host);
}

void *volt_step_alloc(volt_step *s, size_t bytes) {
    if (!s) return NULL;
    void *p = volt__arena_alloc(&s->arena, bytes);
    if (!p) volt_step_fail(s, VOLT_ERR_NOMEM, "step arena: out of memory allocating %zu bytes", bytes);
    else volt__step_note_peak(s);
    return p;
}

void *volt__step_host_alloc(volt_step *s, size_t bytes) {
    void *p = volt__arena_alloc(&s->host, bytes);
    if (!p) volt_step_fail(s, VOLT_ERR_NOMEM, "step: out of host memory allocating %zu bytes", bytes);
    return p;
}

/* ---- kernel scratch: device memory from the step's backend ---------------------------- */
float *volt__scratch(volt_step *s, int slot, size_t n) {
    if (n > SIZE_MAX / 8) {
        volt_step_fail(s, VOLT_ERR_NOMEM, "step scratch: %zu floats do not fit a size", n);
        return NULL;
    }
    size_t bytes = (n ? n : 1) * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    if (bytes > s->scratch_cap[slot]) {
        void *p = volt__dev_alloc(s->dev, bytes);
        if (!p) {
            volt_step_fail(s, VOLT_ERR_NOMEM, "step scratch: out of device memory allocating %zu bytes", bytes);
            return NULL;
        }
        volt__dev_free(s->dev, s->scratch[slot]);
        s->scratch[slot] = p;
        s->scratch_cap[slot] = bytes;
        s->heap_allocs++;
    }
    return s->scratch[slot];
}

void volt__scratch_free(volt_step *s) {
    for (int i = 0; i < VOLT_SCRATCH_SLOTS; i++) {
        volt__dev_free(s->dev, s->scratch[i]);
        s->scratch[i] = NULL;
        s->scratch_cap[i] = 0;
    }
}

bool volt__op_differentiable(volt_op_id op) {
    return op != VOLT_OP_ARGMAX && op != VOLT_OP_ACCURACY && op != VOLT_OP_ARANGE;
}

int volt__op_grad_alias(volt_op_id op) {
    switch (op) {
    case VOLT_OP_RESHAPE: return 0;   /* dx is dy (a view) */
    case VOLT_OP_ADD: return 0;       /* da is dy (a has the output's shape) */
    default: return -1;
    }
}

bool volt__any_null(volt_step *s, const char *op, int n, volt_tensor *const *in) {
    if (!s) return true;   /* no step to record the error on: the op returns NULL */
    for (int i = 0; i < n; i++)
        if (!in[i]) {
            const bool noted = volt__null_note_count() != s->null_notes;
            if (s->status >= 0)
                volt_step_fail(s, VOLT_ERR_INVALID_ARG, "%s: input %d is NULL%s%s%s", op, i, noted ? " (earlier in this step: " : "",
                               noted ? volt__null_note_text() : "", noted ? ")" : "");
            return true;
        }
    return s->status < 0;
}

volt_tensor *volt__shape_err(volt_step *s, const char *op, const char *what,
                             const volt_tensor *a, const volt_tensor *b) {
    char sa[64], sb[64];
    volt_shape_str(a->shape, sa, sizeof sa);
    if (b) volt_shape_str(b->shape, sb, sizeof sb);
    volt_step_fail(s, VOLT_ERR_SHAPE, "%s: %s: got %s%s%s", op, what, sa, b ? " and " : "", b ? sb : "");
    return NULL;
}

volt_tensor *volt__dtype_err(volt_step *s, const char *op, const volt_tensor *t, const char *want) {
    volt_step_fail(s, VOLT_ERR_DTYPE, "%s: expected %s, got %s", op, want, volt_dtype_name(t->dtype));
    return NULL;
}

/* The units an op reads (its parameter inputs): unit_use on the first read of the step and
 * on any read of a stale unit. The node's units are busy meanwhile: a strategy releasing
 * units from the hook leaves them alone. */
static volt_status use_units(volt_step *s, int n_in, volt_tensor *const *in, int node_index, bool forward) {
    volt_params *ps = s->params;
    const bool hooked = ps && ps->hooks && ps->hooks->unit_use;
    bool any = false;
    for (int i = 0; i < n_in; i++)
        if (in[i]->unit) { in[i]->unit->busy = true; any = true; }
    if (!any) return VOLT_OK;
    volt_status st = VOLT_OK;
    for (int i = 0; i < n_in && st >= 0; i++) {
        volt_unit *u = in[i]->unit;
        if (!u) continue;
        const bool first = forward && u->use_stamp != s->stamp;
        if (!first && !u->stale) continue;
        if (first) {
            u->use_stamp = s->stamp;
            u->first_node = node_index;
        }
        if (hooked && (st = ps->hooks->unit_use(ps->hooks_ctx, u)) < 0)
            volt_step_fail(s, st, "strategy: unit_use('%s') failed", u->name);
        else if (u->stale)
            st = volt_step_fail(s, VOLT_ERR_STATE, "unit '%s' is stale (sharded) and no strategy gathered it", u->name);
    }
    for (int i = 0; i < n_in; i++)
        if (in[i]->unit) in[i]->unit->busy = false;
    return st < 0 ? st : VOLT_OK;
}

static volt_node *tape_push(volt_step *s) {
    if (s->n_nodes == s->cap_nodes) {
        int cap = s->cap_nodes * 2;
        volt_node *t = realloc(s->tape, sizeof *t * (size_t)cap);
        if (!t) { volt_step_fail(s, VOLT_ERR_NOMEM, "tape: out of memory"); return NULL; }
        s->tape = t;
        s->cap_nodes = cap;
        s->heap_allocs++;
    }
    return &s->tape[s->n_nodes++];
}

static volt_tensor *record(volt_step *s, volt_op_id op, int n_in, volt_tensor *const *in,
                           volt_tensor *out, const volt_attr *attrs, bool run_forward) {
    if (!s->active) {
        volt_step_fail(s, VOLT_ERR_STATE, "%s: called outside volt_step_begin/volt_step_end",
                       s->be->kernels[op].name);
        return NULL;
    }
    for (int i = 0; i < n_in; i++) {
        const volt_tensor *t = in[i];
        if (t->flags & VOLT_TENSOR_RELEASED) {
            volt_step_fail(s, VOLT_ERR_STATE, "%s: input %d was released (volt_tensor_release) earlier in the step",
                           s->be->kernels[op].name, i);
            return NULL;
        }
        if (t->owner.step && !volt__tensor_current(s, t)) {   /* its memory may hold another step's tensors now */
            volt_step_fail(s, VOLT_ERR_STATE, "%s: input %d %s", s->be->kernels[op].name, i,
                           t->owner.step != s ? "belongs to another step"
                                              : "is from an earlier step (made before the last volt_step_begin)");
            return NULL;
        }
        if (!t->data && volt_tensor_numel(t)) {
            volt_step_fail(s, VOLT_ERR_STATE, "%s: input %d%s%s%s has no data (%s)", s->be->kernels[op].name, i,
                           t->name ? " '" : "", t->name ? t->name : "", t->name ? "'" : "",
                           t->flags & VOLT_TENSOR_PARAM ? "its parameter store is not finalized" : "data is NULL");
            return NULL;
        }
    }
    bool grad = false;
    if (s->training && volt__op_differentiable(op))
        for (int i = 0; i < n_in; i++) grad |= volt__needs_grad(in[i]);
    if (use_units(s, n_in, in, s->n_nodes, true) < 0) return NULL;

    volt_node tmp, *n = &tmp;
    if (grad && !(n = tape_push(s))) return NULL;
    memset(n, 0, sizeof *n);
    if (attrs) n->attr = *attrs;
    n->op = op;
    n->n_in = n_in;
    n->bwd_reads = volt__op_bwd_reads(op);   /* a forward kernel may clear bits */
    n->in = volt__step_host_alloc(s, sizeof(volt_tensor *) * (size_t)(n_in ? n_in : 1));
    if (!n->in) return NULL;
    if (n_in) memcpy(n->in, in, sizeof(volt_tensor *) * (size_t)n_in);
    n->grad_mode = NULL;
    if (grad && !(n->grad_mode = volt__step_host_alloc(s, (size_t)(n_in ? n_in : 1)))) return NULL;
    n->out = out;
    if (grad) {
        out->flags |= VOLT_TENSOR_REQUIRES_GRAD;
        out->node = s->n_nodes - 1;
    }
    if (run_forward) {
        const volt_kernel *k = &s->be->kernels[op];
        if (!k->forward) {
            volt_step_fail(s, VOLT_ERR_UNSUPPORTED, "%s: not implemented on backend '%s'", k->name, s->be->name);
            return NULL;
        }
        double t0 = s->prof ? volt__profile_mark(s) : 0.;
        volt_status st = k->forward(s, n);
        if (s->prof) volt__profile_add(s, op, 0, t0);
        if (st < 0) {
            if (s->status >= 0) volt_step_fail(s, st, "%s: forward failed (%s)", k->name, volt_status_str(st));
            return NULL;
        }
        if (s->detect_anomaly && s->training && volt__anomaly_forward(s, n, grad ? s->n_nodes - 1 : -1) < 0) return NULL;
    }
    if (grad) volt__hold_reads(s, n);
    return out;
}

volt_tensor *volt__op(volt_step *s, volt_op_id op, int n_in, volt_tensor *const *in,
                      volt_dtype out_dt, volt_shape out_shape, const volt_attr *attrs) {
    if (!s) return NULL;
    if (volt__any_null(s, s->be->kernels[op].name, n_in, in)) return NULL;
    volt_tensor *const *orig = in;
    volt_tensor **cp = NULL;
    if (!volt__op_takes_16bit(op)) {   /* 16-bit inputs: the kernel gets an f32 copy (core/ops_cast.c) */
        for (int i = 0; i < n_in; i++) {
            if (!volt__is_16bit(in[i])) continue;
            if (!cp) {
                if (!(cp = volt__step_host_alloc(s, sizeof *cp * (size_t)n_in))) return NULL;
                memcpy(cp, in, sizeof *cp * (size_t)n_in);
            }
            if (!(cp[i] = volt_cast(s, in[i], VOLT_F32))) return NULL;
        }
        if (cp) in = cp;
    }
    volt_tensor *out = volt__tensor_hdr(s, out_dt, out_shape);
    if (!out) return NULL;
    /* not zeroed: every forward kernel writes its whole output */
    if (!(out->owner.mem = volt__mem_new(s, (size_t)volt_shape_numel(out_shape) * volt_dtype_size(out_dt), &out->data)))
        return NULL;
    out = record(s, op, n_in, in, out, attrs, true);
    if (cp)   /* the f32 copies are this op's alone: the tape holds what its backward reads */
        for (int i = 0; i < n_in; i++)
            if (cp[i] != orig[i]) volt_tensor_release(s, cp[i]);
    return out;
}

volt_tensor *volt__op_view(volt_step *s, volt_op_id op, volt_tensor *in, volt_shape shape) {
    if (!s) return NULL;
    if (volt__any_null(s, s->be->kernels[op].name, 1, &in)) return NULL;
    volt_tensor *out = volt__tensor_hdr(s, in->dtype, shape);
    if (!out) return NULL;
    out->data = in->data;
    volt_mem *m = volt__mem_of(s, in);
    if (m && !(in->flags & VOLT_TENSOR_RELEASED)) {   /* the view holds the memory too */
        out->owner.mem = in->owner.mem;
        m->holders++;
    }
    return record(s, op, 1, &in, out, NULL, false);
}

/* ---- backward ------------------------------------------------------------------- */
/* A fresh, uninitialised f32 grad for t from the grad pool (device memory). */
static float *grad_alloc(volt_step *s, volt_tensor *t) {
    size_t bytes = (size_t)volt_tensor_numel(t) * sizeof(float);
    if (!(t->grad = volt__pool_alloc(&s->grads, bytes)))
        volt_step_fail(s, VOLT_ERR_NOMEM, "backward: out of device memory allocating a %zu-byte grad", bytes);
    else {
        volt__step_note_peak(s);
        if (s->poison_grads) volt__dev_memset(s->dev, t->grad, 0xff, bytes);
    }
    return t->grad;
}

/* After node i's backward nothing reads its output's grad: give it back to the pool, unless
 * the node passed the buffer on to an input (volt__op_grad_alias: the input owns it now).
 * Leaves (user tensors that require grad) and parameters have no node and keep theirs. */
static void release_out_grad(volt_step *s, volt_node *n, int i) {
    volt_tensor *o = n->out;
    if (!o->grad || o->node != i) return;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k]->grad == o->grad) {   /* aliased: the input owns it now */
            o->grad = NULL;
            return;
        }
    volt__pool_release(&s->grads, o->grad);
    o->grad = NULL;
}

/* The tape owns gradient allocation: before node n's backward, every input that needs a
 * grad and has none gets one (or, for volt__op_grad_alias ops, the upstream grad itself),
 * and n->grad_mode says per input whether the kernel stores or adds (core/internal.h). */
static volt_status prepare_grads(volt_step *s, volt_node *n) {
    const int alias = volt__op_grad_alias(n->op);
    for (int k = 0; k < n->n_in; k++) {
        volt_tensor *t = n->in[k];
        if (!volt__needs_grad(t)) n->grad_mode[k] = VOLT_GRAD_NONE;
        else if (t->unit && volt__unit_commit(t->unit, VOLT_UNIT_GRADS) < 0)   /* grads a strategy gave back */
            return volt_step_fail(s, VOLT_ERR_NOMEM, "backward: out of device memory recommitting the grads of unit '%s'",
                                  t->unit->name);
        else if (t->grad)   /* earlier writers, a later input, or a parameter (STORE when clear_grad cleared it) */
            n->grad_mode[k] = volt__param_take_clear(t) ? VOLT_GRAD_STORE : VOLT_GRAD_ADD;
        else if (k == alias && volt_tensor_numel(t) == volt_tensor_numel(n->out)) {
            t->grad = n->out->grad;   /* nothing reads dy after this node: no copy */
            n->grad_mode[k] = VOLT_GRAD_NONE;
        } else {
            if (!grad_alloc(s, t)) return s->status;
            n->grad_mode[k] = VOLT_GRAD_STORE;
        }
    }
    return VOLT_OK;
}

static volt_status run_backward(volt_step *s) {
    volt_params *ps = s->params;
    const volt_unit_hooks *h = ps ? ps->hooks : NULL;
    /* Each unit becomes ready once backward has processed its first forward node. */
    int *ready_next = NULL, *ready_head = NULL;
    int n_units = ps ? ps->n_units : 0;
    if (n_units) {
        ready_next = volt__step_host_alloc(s, sizeof(int) * (size_t)n_units);
        ready_head = volt__step_host_alloc(s, sizeof(int) * (size_t)(s->n_nodes + 1));
        if (!ready_next || !ready_head) return s->status;
        for (int i = 0; i <= s->n_nodes; i++) ready_head[i] = -1;
        for (int u = n_units - 1; u >= 0; u--) {
            volt_unit *un = ps->units[u];
            int at = (un->use_stamp == s->stamp && un->first_node < s->n_nodes) ? un->first_node : s->n_nodes;
            /* units never read this step (or read only outside the tape) are ready at the end */
            ready_next[u] = ready_head[at];
            ready_head[at] = u;
        }
    }
    for (int i = s->n_nodes - 1; i >= 0; i--) {
        volt_node *n = &s->tape[i];
        if (n->out->grad) {
            if (n_units && use_units(s, n->n_in, n->in, i, false) < 0) return s->status;   /* stale units */
            double t0 = s->prof ? volt__profile_mark(s) : 0.;
            if (prepare_grads(s, n) < 0) return s->status;
            if (s->prof) {
                volt__profile_add(s, n->op, 2, t0);
                t0 = volt__profile_mark(s);
            }
            const volt_kernel *kern = &s->be->kernels[n->op];
            if (!kern->backward)
                return volt_step_fail(s, VOLT_ERR_UNSUPPORTED, "%s: backward not implemented", kern->name);
            volt_status st = kern->backward(s, n);
            if (s->prof) volt__profile_add(s, n->op, 1, t0);
            if (st < 0) return volt_step_fail(s, st, "%s: backward failed", kern->name);
            if (s->detect_anomaly && volt__anomaly_backward(s, n, i) < 0) return s->status;
            release_out_grad(s, n, i);
        }
        volt__drop_reads(s, n);   /* backward has read what it reads of node i: released memory goes back */
        if (n_units && h && h->unit_grads_ready)
            for (int u = ready_head[i]; u >= 0; u = ready_next[u]) {
                volt__unit_grads_settle(ps->units[u]);   /* parameters this step did not use: zeros */
                volt_status st = h->unit_grads_ready(ps->hooks_ctx, ps->units[u]);
                if (st < 0) return volt_step_fail(s, st, "strategy: unit_grads_ready('%s') failed", ps->units[u]->name);
            }
    }
    /* cleared grads of parameters the step did not use are zeros from here on */
    for (int u = 0; u < n_units; u++) volt__unit_grads_settle(ps->units[u]);
    if (n_units && h && h->unit_grads_ready)
        for (int u = ready_head[s->n_nodes]; u >= 0; u = ready_next[u]) {
            volt_status st = h->unit_grads_ready(ps->hooks_ctx, ps->units[u]);
            if (st < 0) return volt_step_fail(s, st, "strategy: unit_grads_ready('%s') failed", ps->units[u]->name);
        }
    s->backward_done = true;
    return VOLT_OK;
}

static volt_status backward_check(volt_step *s, volt_tensor *t) {
    if (!s) return VOLT_ERR_INVALID_ARG;
    if (s->status < 0) return s->status;
    if (!t) return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "backward: tensor is NULL");
    if (t->owner.step && t->owner.step != s)
        return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "backward: the loss belongs to another step (not on this step's tape)");
    if (t->owner.step && !volt__tensor_current(s, t))
        return volt_step_fail(s, VOLT_ERR_STATE, "backward: the loss is from an earlier step (made before the last "
                              "volt_step_begin; its tape is gone)");
    if (!s->active || !s->training)
        return volt_step_fail(s, VOLT_ERR_STATE, "backward: step was not begun in training mode");
    if (s->backward_done)
        return volt_step_fail(s, VOLT_ERR_STATE, "backward: already run for this step (tape is consumed)");
    if (t->dtype != VOLT_F32)
        return volt_step_fail(s, VOLT_ERR_DTYPE, "backward: loss must be f32, got %s", volt_dtype_name(t->dtype));
    if (!volt__needs_grad(t))
        return volt_step_fail(s, VOLT_ERR_INVALID_ARG,
                              "backward: tensor does not depend on any parameter (or tensor requiring grad)");
    return VOLT_OK;
}

/* t's grad += seed (host, numel floats; NULL = a scalar 1), through backend copies: a fresh
 * grad is one H2D copy; a grad that exists already (t is a parameter or a leaf another
 * backward wrote) is read back, added on the host and written again (rare, not per op). */
static volt_status seed_grad(volt_step *s, volt_tensor *t, const float *seed) {
    static const float one = 1.0f;
    const size_t bytes = (size_t)volt_tensor_numel(t) * sizeof(float);
    if (!seed) seed = &one;
    if (t->unit && volt__unit_commit(t->unit, VOLT_UNIT_GRADS) < 0)   /* backward from a parameter itself */
        return volt_step_fail(s, VOLT_ERR_NOMEM, "backward: out of device memory committing the grads of unit '%s'",
                              t->unit->name);
    if (!t->grad) {
        if (!grad_alloc(s, t) || !volt__step_h2d(s, t->grad, seed, bytes, seed != &one)) return s->status;
    } else {
        float *h = malloc(bytes ? bytes : 1);
        if (!h) return volt_step_fail(s, VOLT_ERR_NOMEM, "backward: out of memory seeding the grad");
        volt__dev_d2h(s->dev, h, t->grad, bytes);
        for (size_t i = 0; i < bytes / sizeof(float); i++) h[i] += seed[i];
        volt__dev_h2d_snapshot(s->dev, t->grad, h, bytes);   /* h is freed next */
        free(h);
    }
    return run_backward(s);
}

volt_status volt_step_backward(volt_step *s, volt_tensor *loss) {
    VOLT_TRY(backward_check(s, loss));
    if (volt_tensor_numel(loss) != 1) {
        char b[64];
        return volt_step_fail(s, VOLT_ERR_SHAPE, "backward: loss must be a scalar, got shape %s",
                              volt_shape_str(loss->shape, b, sizeof b));
    }
    return seed_grad(s, loss, NULL);
}

volt_status volt_step_backward_grad(volt_step *s, volt_tensor *t, const float *grad_out) {
    VOLT_TRY(backward_check(s, t));
    if (!grad_out) return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "backward: grad_out is NULL");
    return seed_grad(s, t, grad_out);
}
