/* Parameter store: named parameters grouped into units; each unit one flat, padded f32
 * buffer for values and one for grads (DESIGN §3), in the store's device memory (ps->dev).
 * Host code here touches them only through the backend table: allocation, memset, copies,
 * give-back, and the parameter math (scale, norm, clipping, conversion). */
#include <math.h>
#include <unistd.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
#include "core/init.h"
#include "volt/dtype.h"

#define INIT_STREAM 0x1A17u   /* RNG stream id for parameter init */

#define perr volt_params_fail
volt_status volt_params_fail(volt_params *ps, volt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    volt__set_err(ps->errmsg, sizeof ps->errmsg, fmt, ap);
    va_end(ap);
    return st;
}

void volt_params_config_init(volt_params_config *cfg) {
    *cfg = (volt_params_config){ .version = VOLT_PARAMS_CONFIG_VERSION, .seed = 42, .accelerator = "auto" };
}

volt_status volt_params_create(const volt_params_config *cfg, volt_params **out) {
    if (!out) return VOLT_ERR_INVALID_ARG;
    *out = NULL;
    if (!cfg || !VOLT_VERSION_OK(cfg->version, VOLT_PARAMS_CONFIG_VERSION)) return VOLT_ERR_VERSION;
    volt_device *dev = NULL;
    char err[256];
    if (volt__device_get(cfg->version >= 2 ? cfg->accelerator : NULL, cfg->version >= 2 ? cfg->device : 0, &dev, err,
                         sizeof err) < 0)
        return VOLT_ERR_UNSUPPORTED;
    volt_params *ps = calloc(1, sizeof *ps);
    if (!ps) return VOLT_ERR_NOMEM;
    ps->dev = dev;
    ps->seed = cfg->seed;
    ps->unit_pad = 1;
    *out = ps;
    return VOLT_OK;
}

void volt_params_destroy(volt_params *ps) {
    if (!ps) return;
    for (int i = 0; i < ps->n_units; i++) {
        volt_unit *u = ps->units[i];
        free(u->name);
        free(u->params);
        volt__dev_free(ps->dev, u->data);
        volt__dev_free(ps->dev, u->data16);
        volt__dev_free(ps->dev, u->grad);
        free(u);
    }
    for (int i = 0; i < ps->n_params; i++) {
        free((char *)ps->params[i]->t.name);
        free(ps->params[i]);
    }
    volt__dev_free(ps->dev, ps->norm_dev);
    free(ps->units);
    free(ps->params);
    free(ps);
}

const char *volt_params_errmsg(const volt_params *ps) { return ps->errmsg; }
bool volt_params_finalized(const volt_params *ps) { return ps->finalized; }

static bool grow(void **arr, int *cap, int n, size_t elem) {
    if (n < *cap) return true;
    int nc = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, elem * (size_t)nc);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

volt_status volt_params_unit(volt_params *ps, const char *name) {
    if (ps->finalized) return perr(ps, VOLT_ERR_STATE, "params: unit '%s' declared after finalize", name);
    if (!name || !*name) return perr(ps, VOLT_ERR_INVALID_ARG, "params: unit name is empty");
    for (int i = 0; i < ps->n_units; i++)
        if (!strcmp(ps->units[i]->name, name)) return perr(ps, VOLT_ERR_INVALID_ARG, "params: duplicate unit '%s'", name);
    if (!grow((void **)&ps->units, &ps->cap_units, ps->n_units, sizeof(volt_unit *))) return VOLT_ERR_NOMEM;
    volt_unit *u = calloc(1, sizeof *u);
    if (!u || !(u->name = strdup(name))) { free(u); return VOLT_ERR_NOMEM; }
    u->index = ps->n_units;
    u->first_node = -1;
    ps->units[ps->n_units++] = u;
    return VOLT_OK;
}

volt_status volt_param_new(volt_params *ps, const char *name, volt_shape shape, volt_init init,
                           volt_tensor **out) {
    if (out) *out = NULL;
    if (ps->finalized) return perr(ps, VOLT_ERR_STATE, "params: '%s' declared after finalize", name ? name : "?");
    if (!name || !*name || !out) return perr(ps, VOLT_ERR_INVALID_ARG, "params: parameter needs a name and an out pointer");
    if (shape.ndim < 0 || shape.ndim > VOLT_MAX_DIMS) return perr(ps, VOLT_ERR_SHAPE, "params: '%s' has %d dims", name, shape.ndim);
    for (int i = 0; i < shape.ndim; i++)
        if (shape.d[i] <= 0) return perr(ps, VOLT_ERR_SHAPE, "params: '%s' dimension %d is %lld", name, i, (long long)shape.d[i]);
    if (volt_params_find(ps, name)) return perr(ps, VOLT_ERR_INVALID_ARG, "params: duplicate parameter '%s'", name);
    char why[160];
    if (volt__init_check(init, why, sizeof why) < 0) return perr(ps, VOLT_ERR_INVALID_ARG, "params: '%s': %s", name, why);
    /* its elements, aligned, and the unit's total: counts whose bytes (the value, its grad and
     * two optimizer moments, 16 bytes an element) fit an int64 */
    const int64_t cap = INT64_MAX / 16;
    int64_t numel = 1;
    for (int i = 0; i < shape.ndim; i++)
        if (__builtin_mul_overflow(numel, shape.d[i], &numel) || numel > cap) numel = -1;
    if (numel < 0 || numel > cap - VOLT_PARAM_ALIGN)
        return perr(ps, VOLT_ERR_SHAPE, "params: '%s' has too many elements for a parameter (%s)", name,
                    volt_shape_str(shape, (char[128]){ 0 }, 128));
    if (!ps->n_units) VOLT_TRY(volt_params_unit(ps, "default"));
    volt_unit *u = ps->units[ps->n_units - 1];
    const int64_t aligned = (numel + VOLT_PARAM_ALIGN - 1) / VOLT_PARAM_ALIGN * VOLT_PARAM_ALIGN;
    if (u->numel > cap - aligned)
        return perr(ps, VOLT_ERR_SHAPE, "params: unit '%s' would hold too many elements with '%s' (%lld + %lld)", u->name,
                    name, (long long)u->numel, (long long)numel);
    if (!grow((void **)&ps->params, &ps->cap_params, ps->n_params, sizeof(volt_param_rec *)) ||
        !grow((void **)&u->params, &u->cap_params, u->n_params, sizeof(volt_tensor *)))
        return VOLT_ERR_NOMEM;
    volt_param_rec *r = calloc(1, sizeof *r);
    char *nm = strdup(name);
    if (!r || !nm) { free(r); free(nm); return VOLT_ERR_NOMEM; }
    r->t = (volt_tensor){ .dtype = VOLT_F32, .shape = shape, .node = -1, .unit = u, .name = nm, .device = ps->dev,
                          .flags = VOLT_TENSOR_PARAM | VOLT_TENSOR_REQUIRES_GRAD };
    r->init = init;
    r->requires_grad = true;
    r->offset = u->numel;
    u->numel += aligned;
    u->params[u->n_params++] = &r->t;
    ps->params[ps->n_params++] = r;
    *out = &r->t;
    return VOLT_OK;
}

volt_status volt__init_check(volt_init in, char *why, size_t n) {
    const char *msg = NULL;
    if ((unsigned)in.kind > (unsigned)VOLT_INIT_KIND_KAIMING_NORMAL) msg = "unknown init kind";
    else if (!isfinite(in.a) || !isfinite(in.b)) msg = "init arguments must be finite";
    else if (in.kind == VOLT_INIT_KIND_NORMAL && in.b < 0.f) msg = "NORMAL needs std >= 0";
    else if (in.kind == VOLT_INIT_KIND_UNIFORM && in.a > in.b) msg = "UNIFORM needs lo <= hi";
    else if ((in.kind == VOLT_INIT_KIND_XAVIER_UNIFORM || in.kind == VOLT_INIT_KIND_XAVIER_NORMAL) && in.a < 0.f)
        msg = "XAVIER needs gain >= 0";
    if (!msg) return VOLT_OK;
    if (why && n) snprintf(why, n, "%s (kind %d, %g, %g)", msg, (int)in.kind, (double)in.a, (double)in.b);
    return VOLT_ERR_INVALID_ARG;
}

static void fans(volt_shape s, double *fan_in, double *fan_out) {
    if (s.ndim < 2) { *fan_in = *fan_out = (double)(s.ndim ? s.d[0] : 1); return; }
    double rf = 1;
    for (int i = 2; i < s.ndim; i++) rf *= (double)s.d[i];
    *fan_in = (double)s.d[1] * rf;
    *fan_out = (double)s.d[0] * rf;
}

/* Parameter idx's initial values into x (host memory, numel floats). */
static void init_param(volt_params *ps, int idx, volt_param_rec *r, float *x) {
    int64_t n = volt_tensor_numel(&r->t);
    double fi, fo;
    fans(r->t.shape, &fi, &fo);
    const volt_init in = r->init;
    double lo = 0, hi = 0, std = 0, mean = 0;
    bool normal = false;
    switch (in.kind) {
    case VOLT_INIT_KIND_ZEROS: memset(x, 0, sizeof(float) * (size_t)n); return;
    case VOLT_INIT_KIND_CONST: for (int64_t i = 0; i < n; i++) x[i] = in.a; goto rows;
    case VOLT_INIT_KIND_NORMAL: normal = true; mean = in.a; std = in.b; break;
    case VOLT_INIT_KIND_UNIFORM: lo = in.a; hi = in.b; break;
    case VOLT_INIT_KIND_XAVIER_UNIFORM: hi = in.a * sqrt(6.0 / (fi + fo)); lo = -hi; break;
    case VOLT_INIT_KIND_XAVIER_NORMAL: normal = true; std = in.a * sqrt(2.0 / (fi + fo)); break;
    case VOLT_INIT_KIND_KAIMING_UNIFORM: hi = sqrt(2.0 / (1.0 + (double)in.a * in.a)) * sqrt(3.0 / fi); lo = -hi; break;
    case VOLT_INIT_KIND_KAIMING_NORMAL: normal = true; std = sqrt(2.0 / (1.0 + (double)in.a * in.a)) / sqrt(fi); break;
    }
    /* Each value is a function of (seed, parameter, index) alone, so the threads' split of the
     * loop does not change a bit (tests/test_params.c: one thread against several). */
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int64_t i = 0; i < n; i++) {
        if (normal) x[i] = (float)(mean + std * volt__rng_normal(ps->seed, (uint64_t)idx, INIT_STREAM, (uint64_t)i));
        else x[i] = (float)(lo + (hi - lo) * volt__rng_uniform(ps->seed, (uint64_t)idx, INIT_STREAM, (uint64_t)i));
    }
rows:
    if (r->zero_row1) {
        int64_t cols = n / r->t.shape.d[0];
        memset(x + (r->zero_row1 - 1) * cols, 0, sizeof(float) * (size_t)cols);
    }
}

volt_status volt_param_set_init_zero_row(volt_params *ps, volt_tensor *p, int64_t row) {
    if (!ps || !p || !(p->flags & VOLT_TENSOR_PARAM)) return VOLT_ERR_INVALID_ARG;
    if (ps->finalized) return perr(ps, VOLT_ERR_STATE, "params: '%s': init zero row set after finalize", p->name);
    if (p->shape.ndim < 1 || row < 0 || row >= p->shape.d[0])
        return perr(ps, VOLT_ERR_INVALID_ARG, "params: '%s': zero row %lld outside 0..%lld", p->name, (long long)row,
                    (long long)(p->shape.ndim ? p->shape.d[0] - 1 : -1));
    volt__param_rec(p)->zero_row1 = row + 1;
    return VOLT_OK;
}

static size_t page_size(void) {
    static size_t ps;
    if (!ps) {
        long v = sysconf(_SC_PAGESIZE);
        ps = v > 0 ? (size_t)v : 4096;
    }
    return ps;
}

volt_status volt_params_set_unit_padding(volt_params *ps, int64_t multiple) {
    if (ps->finalized) return perr(ps, VOLT_ERR_STATE, "params: unit padding set after finalize");
    if (multiple < 1 || multiple > (1 << 20))
        return perr(ps, VOLT_ERR_INVALID_ARG, "params: unit padding multiple must be in [1, 2^20], got %lld", (long long)multiple);
    ps->unit_pad = multiple;
    return VOLT_OK;
}

static size_t unit_bytes(const volt_unit *u, size_t esz) {
    size_t bytes = esz * (size_t)(u->numel ? u->numel : VOLT_PARAM_ALIGN);
    return (bytes + page_size() - 1) / page_size() * page_size();   /* whole pages: volt__unit_release */
}

static _Atomic uint64_t g_inits;
uint64_t volt__params_inits(void) { return atomic_load(&g_inits); }

volt_status volt_params_finalize(volt_params *ps) {
    if (!ps) return VOLT_ERR_INVALID_ARG;
    if (ps->finalized) return VOLT_OK;
    const int64_t pad = ps->unit_pad * VOLT_PARAM_ALIGN;
    if (!ps->norm_dev && !(ps->norm_dev = volt__dev_alloc(ps->dev, sizeof(double))))
        return perr(ps, VOLT_ERR_NOMEM, "params: out of device memory");
    size_t host_max = 0;
    for (int i = 0; i < ps->n_units; i++) {
        volt_unit *u = ps->units[i];
        u->numel = (u->numel + pad - 1) / pad * pad;
        u->grad_lo = 0;
        u->grad_hi = u->numel;
        const size_t bytes = unit_bytes(u, sizeof(float));
        if (bytes > host_max) host_max = bytes;
        if (!u->data) u->data = volt__dev_alloc_givable(ps->dev, bytes);
        if (!u->grad) u->grad = volt__dev_alloc_givable(ps->dev, bytes);
        if (!u->data || !u->grad) return perr(ps, VOLT_ERR_NOMEM, "params: cannot allocate unit '%s' (%zu bytes)", u->name, bytes);
        /* Grads hold no memory until something writes them: a validate/test/predict-only
         * run never does (the given-back pages read as zeros once committed). */
        ps->dev->be->give_back(ps->dev, u->grad, bytes);
        u->given_back[VOLT_UNIT_GRADS] = u->grads_unborn = true;
    }
    for (int ui = 0; ui < ps->n_units; ui++) {
        volt_unit *u = ps->units[ui];
        for (int k = 0; k < u->n_params; k++) {
            volt_param_rec *r = volt__param_rec(u->params[k]);
            r->t.data = u->data + r->offset;
            r->t.grad = NULL;   /* unborn: volt__unit_commit points it into u->grad */
        }
        if (ps->skip_init) volt__dev_memset(ps->dev, u->data, 0, unit_bytes(u, sizeof(float)));
    }
    if (ps->skip_init) {   /* a checkpoint overwrites every value next: zeros, nothing drawn */
        ps->finalized = true;
        return VOLT_OK;
    }
    atomic_fetch_add(&g_inits, 1);
    /* Initial values: one unit at a time in a host buffer, then one copy to the device
     * (parameters are declared unit by unit, so declaration order is unit order). */
    float *host = host_max ? malloc(host_max) : NULL;
    if (host_max && !host) return perr(ps, VOLT_ERR_NOMEM, "params: out of memory (%zu bytes to initialise a unit)", host_max);
    for (int ui = 0; ui < ps->n_units; ui++) {
        volt_unit *u = ps->units[ui];
        const size_t bytes = unit_bytes(u, sizeof(float));
        memset(host, 0, bytes);
        for (int i = 0; i < ps->n_params; i++)   /* the RNG stream is the declaration index */
            if (ps->params[i]->t.unit == u) init_param(ps, i, ps->params[i], host + ps->params[i]->offset);
        volt__dev_h2d(ps->dev, u->data, host, bytes);
    }
    free(host);
    ps->finalized = true;
    return VOLT_OK;
}

/* Flips of requires_grad and moves between optimizer groups, process-wide: a captured step
 * froze which parameters it updates, and how (the launches split by group) */
static _Atomic uint64_t g_trainable_gen;
uint64_t volt__params_trainable_gen(void) { return atomic_load(&g_trainable_gen); }
void volt__params_layout_changed(void) { atomic_fetch_add(&g_trainable_gen, 1); }

void volt_param_set_requires_grad(volt_tensor *p, bool requires_grad) {
    if (!p || !(p->flags & VOLT_TENSOR_PARAM)) return;
    if (volt__param_rec(p)->requires_grad != requires_grad) atomic_fetch_add(&g_trainable_gen, 1);
    volt__param_rec(p)->requires_grad = requires_grad;
    if (requires_grad) p->flags |= VOLT_TENSOR_REQUIRES_GRAD;
    else p->flags &= ~(uint32_t)VOLT_TENSOR_REQUIRES_GRAD;
}

int volt_params_count(const volt_params *ps) { return ps->n_params; }
volt_tensor *volt_params_at(const volt_params *ps, int i) {
    return (i >= 0 && i < ps->n_params) ? &ps->params[i]->t : NULL;
}
volt_tensor *volt_params_find(const volt_params *ps, const char *name) {
    for (int i = 0; i < ps->n_params; i++)
        if (!strcmp(ps->params[i]->t.name, name)) return &ps->params[i]->t;
    return NULL;
}
int64_t volt_params_numel(const volt_params *ps) {
    int64_t n = 0;
    for (int i = 0; i < ps->n_params; i++) n += volt_tensor_numel(&ps->params[i]->t);
    return n;
}
int volt_params_unit_count(const volt_params *ps) { return ps->n_units; }
volt_unit *volt_params_unit_at(const volt_params *ps, int i) {
    return (i >= 0 && i < ps->n_units) ? ps->units[i] : NULL;
}
const char *volt_unit_name(const volt_unit *u) { return u->name; }
int volt_unit_index(const volt_unit *u) { return u->index; }
int volt_unit_param_count(const volt_unit *u) { return u->n_params; }
volt_tensor *volt_unit_param(const volt_unit *u, int i) { return (i >= 0 && i < u->n_params) ? u->params[i] : NULL; }
int64_t volt_param_offset(const volt_tensor *p) { return volt__param_rec(p)->offset; }
int64_t volt_unit_numel(const volt_unit *u) { return u->numel; }
float *volt_unit_data(const volt_unit *u) { return u->data; }
float *volt_unit_grad(const volt_unit *u) {
    if (u->grads_unborn && volt__unit_commit((volt_unit *)u, VOLT_UNIT_GRADS) < 0) return NULL;
    volt__unit_grads_settle((volt_unit *)u);   /* cleared grads read as zeros */
    return u->grad;
}

volt_status volt__params_commit_grads(volt_params *ps) {
    for (int i = 0; i < ps->n_units; i++)
        if (ps->units[i]->grads_unborn && volt__unit_commit(ps->units[i], VOLT_UNIT_GRADS) < 0)
            return perr(ps, VOLT_ERR_NOMEM, "params: out of device memory for the grads of unit '%s' (%zu bytes)",
                        ps->units[i]->name, unit_bytes(ps->units[i], sizeof(float)));
    return VOLT_OK;
}

static void unit_mark_clear(volt_unit *u, bool clear);

void volt__unit_grads_settle(volt_unit *u) {
    if (u->n_clear <= 0) return;
    if (u->given_back[VOLT_UNIT_GRADS]) {   /* the zeros are what a commit gives: write nothing */
        unit_mark_clear(u, false);
        return;
    }
    for (int k = 0; k < u->n_params; k++) {
        volt_param_rec *r = volt__param_rec(u->params[k]);
        if (!r->grad_clear) continue;
        r->grad_clear = false;
        volt__dev_memset(r->t.device, r->t.grad, 0, sizeof(float) * (size_t)volt_tensor_numel(&r->t));
    }
    u->n_clear = 0;
}

/* Mark (or unmark) every parameter grad of u as cleared (volt_param_rec.grad_clear). */
static void unit_mark_clear(volt_unit *u, bool clear) {
    for (int k = 0; k < u->n_params; k++) volt__param_rec(u->params[k])->grad_clear = clear;
    u->n_clear = clear ? u->n_params : 0;
}

void volt_params_zero_grad(volt_params *ps) {
    for (int i = 0; i < ps->n_units; i++) {
        volt_unit *u = ps->units[i];
        if (!u->grad) continue;
        unit_mark_clear(u, false);
        if (u->given_back[VOLT_UNIT_GRADS]) continue;   /* reads as zeros once committed */
        volt__dev_memset(ps->dev, u->grad, 0, sizeof(float) * (size_t)u->numel);
    }
}

/* Nothing is written now: each parameter's grad is marked cleared, the next backward's first
 * write to it stores (core/step.c prepare_grads), and a read before that writes its zeros
 * first (volt__unit_grads_settle). The unit buffers' padding is never written by either: it
 * stays 0. */
void volt_params_clear_grad(volt_params *ps) {
    for (int i = 0; i < ps->n_units; i++)
        if (ps->units[i]->grad) unit_mark_clear(ps->units[i], true);
}

int volt__params_grads_cleared(const volt_params *ps) {
    int all = 1, none = 1;
    for (int i = 0; i < ps->n_units; i++) {
        const volt_unit *u = ps->units[i];
        if (!u->grad || u->n_params == 0) continue;
        if (u->n_clear != u->n_params) all = 0;
        if (u->n_clear != 0) none = 0;
    }
    return all ? 1 : none ? 0 : -1;   /* a store without grads: 1 (nothing to store or add) */
}

void volt__params_mark_grads_cleared(volt_params *ps, bool cleared) {
    for (int i = 0; i < ps->n_units; i++)
        if (ps->units[i]->grad) unit_mark_clear(ps->units[i], cleared);
}

/* u's grads this process uses (grad_lo .. grad_hi), cleared ones written as zeros first;
 * NULL when there are none. */
static float *grad_range(volt_unit *u, int64_t *n) {
    *n = u->grads_unborn ? 0 : u->grad_hi - u->grad_lo;   /* never written: zeros add nothing */
    float *g = *n > 0 ? volt_unit_grad(u) : NULL;
    return g ? g + u->grad_lo : NULL;
}

/* The squared global grad norm into ps->norm_dev (device double), summed unit by unit in
 * a fixed order. */
static volt_status grad_sqnorm_dev(volt_params *ps) {
    if (!ps->norm_dev && !(ps->norm_dev = volt__dev_alloc(ps->dev, sizeof(double))))
        return perr(ps, VOLT_ERR_NOMEM, "params: out of device memory");
    const volt_param_math *pm = ps->dev->be->pm;
    volt__dev_memset(ps->dev, ps->norm_dev, 0, sizeof(double));
    for (int i = 0; i < ps->n_units; i++) {
        int64_t n;
        float *g = grad_range(ps->units[i], &n);
        if (g) pm->sqnorm_acc(ps->dev, g, n, ps->norm_dev);
    }
    return VOLT_OK;
}

double volt_params_grad_sqnorm(const volt_params *ps) {
    volt_params *w = (volt_params *)ps;   /* the device scratch only */
    if (grad_sqnorm_dev(w) < 0) return NAN;
    double total = 0;
    volt__dev_d2h(ps->dev, &total, ps->norm_dev, sizeof total);   /* the one host read */
    return total;
}

volt_status volt__params_grad_sqnorm_dev(volt_params *ps, double **sq) {
    VOLT_TRY(grad_sqnorm_dev(ps));
    *sq = ps->norm_dev;
    return VOLT_OK;
}

void volt__params_clip_by_dev_norm(volt_params *ps, float max_norm) {
    const volt_param_math *pm = ps->dev->be->pm;
    for (int i = 0; i < ps->n_units; i++) {   /* on the device: coef from the device norm */
        int64_t n;
        float *g = grad_range(ps->units[i], &n);
        if (g) pm->clip_by_norm(ps->dev, g, n, ps->norm_dev, max_norm);
    }
}

volt_status volt_params_clip_grad_norm(volt_params *ps, float max_norm, float *total_norm) {
    if (!(max_norm > 0)) return perr(ps, VOLT_ERR_INVALID_ARG, "clip_grad_norm: max_norm must be > 0, got %g", max_norm);
    VOLT_TRY(grad_sqnorm_dev(ps));
    if (total_norm) {   /* read only when the caller wants the number */
        double sq = 0;
        volt__dev_d2h(ps->dev, &sq, ps->norm_dev, sizeof sq);
        *total_norm = (float)sqrt(sq);
    }
    volt__params_clip_by_dev_norm(ps, max_norm);
    return VOLT_OK;
}

void volt_params_scale_grads(volt_params *ps, float coef) {
    const volt_param_math *pm = ps->dev->be->pm;
    for (int i = 0; i < ps->n_units; i++) {
        int64_t n;
        float *g = grad_range(ps->units[i], &n);
        if (g) pm->scale(ps->dev, g, n, coef);
    }
}

volt_status volt_params_clip_grad_value(volt_params *ps, float v) {
    if (!(v > 0)) return perr(ps, VOLT_ERR_INVALID_ARG, "clip_grad_value: clip value must be > 0, got %g", v);
    const volt_param_math *pm = ps->dev->be->pm;
    for (int i = 0; i < ps->n_units; i++) {
        int64_t n;
        float *g = grad_range(ps->units[i], &n);
        if (g) pm->clip_value(ps->dev, g, n, v);
    }
    return VOLT_OK;
}

void volt__unit_set_grad_range(volt_unit *u, int64_t lo, int64_t hi) {
    if (lo < 0) lo = 0;
    if (hi > u->numel) hi = u->numel;
    u->grad_lo = lo < hi ? lo : hi;
    u->grad_hi = hi;
}

void volt__unit_grad_range(const volt_unit *u, int64_t *lo, int64_t *hi) {
    *lo = u->grad_lo;
    *hi = u->grad_hi;
}

volt_status volt__params_set_hooks(volt_params *ps, const volt_unit_hooks *hooks, void *ctx) {
    if (hooks && !VOLT_VERSION_OK(hooks->version, VOLT_UNIT_HOOKS_VERSION))
        return perr(ps, VOLT_ERR_VERSION, "volt_unit_hooks: version %u, this library knows 1..%u",
                    hooks->version, VOLT_UNIT_HOOKS_VERSION);
    ps->hooks = hooks;
    ps->hooks_ctx = ctx;
    return VOLT_OK;
}

/* ---- storage dtype (precision plugins: bf16-true, 16-true) --------------------------------- */
volt_status volt_params_convert(volt_params *ps, volt_dtype dt) {
    if (!ps->finalized) return perr(ps, VOLT_ERR_STATE, "params: convert before finalize");
    if (!volt_dtype_is_float(dt))
        return perr(ps, VOLT_ERR_DTYPE, "params: cannot store parameters as %s (f32, bf16 or f16)",
                    (unsigned)dt < VOLT_DTYPE_COUNT ? volt_dtype_name(dt) : "?");
    if (dt == ps->dtype) return VOLT_OK;
    const size_t esz = volt_dtype_size(dt);
    void **fresh = calloc((size_t)(ps->n_units ? ps->n_units : 1), sizeof *fresh);
    if (!fresh) return perr(ps, VOLT_ERR_NOMEM, "params: out of memory converting to %s", volt_dtype_name(dt));
    for (int i = 0; i < ps->n_units; i++) {   /* all or nothing: allocate every unit first */
        const size_t bytes = unit_bytes(ps->units[i], esz);
        if (!(fresh[i] = volt__dev_alloc_givable(ps->dev, bytes))) {
            for (int j = 0; j < i; j++) volt__dev_free(ps->dev, fresh[j]);
            free(fresh);
            return perr(ps, VOLT_ERR_NOMEM, "params: cannot allocate unit '%s' as %s (%zu bytes)",
                        ps->units[i]->name, volt_dtype_name(dt), bytes);
        }
        volt__dev_memset(ps->dev, fresh[i], 0, bytes);
    }
    for (int i = 0; i < ps->n_units; i++) {
        volt_unit *u = ps->units[i];
        void *old = u->data ? (void *)u->data : (void *)u->data16;
        if (volt__unit_commit(u, VOLT_UNIT_VALUES) < 0) {   /* convert reads the whole buffer */
            for (int j = i; j < ps->n_units; j++) volt__dev_free(ps->dev, fresh[j]);
            free(fresh);
            return perr(ps, VOLT_ERR_NOMEM, "params: out of device memory recommitting unit '%s'", u->name);
        }
        ps->dev->be->pm->convert(ps->dev, fresh[i], dt, old, ps->dtype, u->numel);   /* RNE; padding stays zero */
        volt__dev_free(ps->dev, old);
        u->data = dt == VOLT_F32 ? fresh[i] : NULL;
        u->data16 = dt == VOLT_F32 ? NULL : fresh[i];
    }
    free(fresh);
    for (int i = 0; i < ps->n_params; i++) {
        volt_param_rec *r = ps->params[i];
        r->t.data = (char *)volt_unit_values(r->t.unit) + (size_t)r->offset * esz;
        r->t.dtype = dt;
    }
    ps->dtype = dt;
    return VOLT_OK;
}

volt_dtype volt_params_dtype(const volt_params *ps) { return ps->dtype; }
void *volt_unit_values(const volt_unit *u) { return u->data ? (void *)u->data : (void *)u->data16; }

int64_t volt_params_value_bytes(const volt_params *ps) {
    int64_t n = 0;
    for (int i = 0; i < ps->n_units; i++) n += ps->units[i]->numel;
    return n * (int64_t)volt_dtype_size(ps->dtype);
}

int64_t volt__params_grad_bytes_held(const volt_params *ps) {
    int64_t n = 0;
    for (int i = 0; i < ps->n_units; i++)
        if (!ps->units[i]->grads_unborn) n += ps->units[i]->numel;
    return n * (int64_t)sizeof(float);
}

int64_t volt_params_grad_bytes(const volt_params *ps) {
    int64_t n = 0;
    for (int i = 0; i < ps->n_units; i++) n += ps->units[i]->numel;
    return n * (int64_t)sizeof(float);
}

/* ---- memory of sharded units --------------------------------------------------------------- */
static char *unit_buf(const volt_unit *u, volt_unit_buf which, size_t *esz) {
    *esz = which == VOLT_UNIT_VALUES && !u->data ? sizeof(uint16_t) : sizeof(float);
    return which == VOLT_UNIT_GRADS ? (char *)u->grad : (char *)volt_unit_values(u);
}

/* The device of the unit's buffers (the CPU's for a unit without parameters). */
static volt_device *unit_device(const volt_unit *u) {
    volt_device *d = u->params && u->n_params ? u->params[0]->device : NULL;
    return d ? d : volt__device_cpu();
}

volt_status volt__unit_release(volt_unit *u, volt_unit_buf which, int64_t lo, int64_t hi) {
    size_t esz;
    char *buf = unit_buf(u, which, &esz);
    if (!buf) return VOLT_ERR_STATE;
    if (lo < 0) lo = 0;
    if (hi > u->numel) hi = u->numel;
    if (lo >= hi) return VOLT_OK;
    if (which == VOLT_UNIT_VALUES && u->busy) return VOLT_ERR_STATE;
    volt_device *d = unit_device(u);
    d->be->give_back(d, buf + (size_t)lo * esz, (size_t)(hi - lo) * esz);
    u->given_back[which] = true;
    return VOLT_OK;
}

volt_status volt__unit_commit(volt_unit *u, volt_unit_buf which) {
    if (!u->given_back[which]) return VOLT_OK;
    size_t esz;
    char *buf = unit_buf(u, which, &esz);
    if (!buf) return VOLT_OK;
    volt_device *d = unit_device(u);
    if (d->be->recommit) {
        volt_status st = d->be->recommit(d, buf, unit_bytes(u, esz));
        if (st < 0) return st;
    }
    u->given_back[which] = false;
    if (which == VOLT_UNIT_GRADS && u->grads_unborn) {   /* the parameters' grads exist from now on */
        u->grads_unborn = false;
        for (int k = 0; k < u->n_params; k++) {
            volt_param_rec *r = volt__param_rec(u->params[k]);
            r->t.grad = u->grad + r->offset;
        }
    }
    return VOLT_OK;
}

int64_t volt__unit_resident_bytes(const volt_unit *u, volt_unit_buf which) {
    size_t esz;
    const char *buf = unit_buf(u, which, &esz);
    if (!buf) return 0;
    volt_device *d = unit_device(u);
    if (!d->be->resident_bytes) return (int64_t)unit_bytes(u, esz);   /* unknown: all */
    return d->be->resident_bytes(d, buf, unit_bytes(u, esz));
}

void volt__unit_set_stale(volt_unit *u, bool stale) { u->stale = stale; }
bool volt__unit_stale(const volt_unit *u) { return u->stale; }
bool volt__unit_grads_given_back(const volt_unit *u) { return u->given_back[VOLT_UNIT_GRADS]; }
