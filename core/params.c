/* Parameter store: named parameters grouped into units; each unit one flat, padded f32
 * buffer for values and one for grads (DESIGN §3). */
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
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
        free(u->data);
        free(u->data16);
        free(u->grad);
        free(u);
    }
    for (int i = 0; i < ps->n_params; i++) {
        free((char *)ps->params[i]->t.name);
        free(ps->params[i]);
    }
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
    if (!ps->n_units) VOLT_TRY(volt_params_unit(ps, "default"));
    volt_unit *u = ps->units[ps->n_units - 1];
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
    u->numel += (volt_shape_numel(shape) + VOLT_PARAM_ALIGN - 1) / VOLT_PARAM_ALIGN * VOLT_PARAM_ALIGN;
    u->params[u->n_params++] = &r->t;
    ps->params[ps->n_params++] = r;
    *out = &r->t;
    return VOLT_OK;
}

static void fans(volt_shape s, double *fan_in, double *fan_out) {
    if (s.ndim < 2) { *fan_in = *fan_out = (double)(s.ndim ? s.d[0] : 1); return; }
    double rf = 1;
    for (int i = 2; i < s.ndim; i++) rf *= (double)s.d[i];
    *fan_in = (double)s.d[1] * rf;
    *fan_out = (double)s.d[0] * rf;
}

static void init_param(volt_params *ps, int idx, volt_param_rec *r) {
    float *x = r->t.data;
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

volt_status volt_params_finalize(volt_params *ps) {
    if (ps->finalized) return VOLT_OK;
    const int64_t pad = ps->unit_pad * VOLT_PARAM_ALIGN;
    for (int i = 0; i < ps->n_units; i++) {
        volt_unit *u = ps->units[i];
        u->numel = (u->numel + pad - 1) / pad * pad;
        u->grad_lo = 0;
        u->grad_hi = u->numel;
        size_t bytes = sizeof(float) * (size_t)(u->numel ? u->numel : VOLT_PARAM_ALIGN);
        bytes = (bytes + page_size() - 1) / page_size() * page_size();   /* whole pages: volt__unit_release */
        u->data = aligned_alloc(page_size(), bytes);
        u->grad = aligned_alloc(page_size(), bytes);
        if (!u->data || !u->grad) return perr(ps, VOLT_ERR_NOMEM, "params: cannot allocate unit '%s' (%zu bytes)", u->name, bytes);
        memset(u->data, 0, bytes);
        memset(u->grad, 0, bytes);
    }
    for (int i = 0; i < ps->n_params; i++) {
        volt_param_rec *r = ps->params[i];
        volt_unit *u = r->t.unit;
        r->t.data = u->data + r->offset;
        r->t.grad = u->grad + r->offset;
        init_param(ps, i, r);
    }
    ps->finalized = true;
    return VOLT_OK;
}

void volt_param_set_requires_grad(volt_tensor *p, bool requires_grad) {
    if (!p || !(p->flags & VOLT_TENSOR_PARAM)) return;
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
float *volt_unit_grad(const volt_unit *u) { return u->grad; }

void volt_params_zero_grad(volt_params *ps) {
    for (int i = 0; i < ps->n_units; i++)
        if (ps->units[i]->grad) memset(ps->units[i]->grad, 0, sizeof(float) * (size_t)ps->units[i]->numel);
}

double volt_params_grad_sqnorm(const volt_params *ps) {
    double total = 0;
    for (int i = 0; i < ps->n_units; i++) {
        const volt_unit *u = ps->units[i];
        if (!u->grad) continue;
        const float *g = u->grad + u->grad_lo;
        const int64_t n = u->grad_hi - u->grad_lo;
        /* sequential, four lanes: the same sum for any thread count */
        double acc[4] = { 0, 0, 0, 0 };
        int64_t k = 0;
        for (; k + 4 <= n; k += 4)
            for (int l = 0; l < 4; l++) acc[l] += (double)g[k + l] * g[k + l];
        for (; k < n; k++) acc[0] += (double)g[k] * g[k];
        double unit_sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        total += unit_sum;
    }
    return total;
}

volt_status volt_params_clip_grad_norm(volt_params *ps, float max_norm, float *total_norm) {
    if (!(max_norm > 0)) return perr(ps, VOLT_ERR_INVALID_ARG, "clip_grad_norm: max_norm must be > 0, got %g", max_norm);
    double norm = sqrt(volt_params_grad_sqnorm(ps));
    if (total_norm) *total_norm = (float)norm;
    if (!isfinite(norm)) return VOLT_OK;   /* like PyTorch (error_if_nonfinite=False): grads left as they are */
    float coef = (float)(max_norm / (norm + 1e-6));
    if (coef < 1.0f) volt_params_scale_grads(ps, coef);
    return VOLT_OK;
}

void volt_params_scale_grads(volt_params *ps, float coef) {
    for (int i = 0; i < ps->n_units; i++) {
        float *g = ps->units[i]->grad;
        const int64_t lo = ps->units[i]->grad_lo, hi = ps->units[i]->grad_hi;
        if (!g) continue;
        #pragma omp parallel for schedule(static) if (hi - lo > 65536)
        for (int64_t k = lo; k < hi; k++) g[k] *= coef;
    }
}

volt_status volt_params_clip_grad_value(volt_params *ps, float v) {
    if (!(v > 0)) return perr(ps, VOLT_ERR_INVALID_ARG, "clip_grad_value: clip value must be > 0, got %g", v);
    for (int i = 0; i < ps->n_units; i++) {
        float *g = ps->units[i]->grad;
        for (int64_t k = ps->units[i]->grad_lo; k < ps->units[i]->grad_hi; k++) g[k] = g[k] > v ? v : (g[k] < -v ? -v : g[k]);
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
        size_t bytes = esz * (size_t)(ps->units[i]->numel ? ps->units[i]->numel : VOLT_PARAM_ALIGN);
        bytes = (bytes + page_size() - 1) / page_size() * page_size();   /* whole pages: volt__unit_release */
        if (!(fresh[i] = aligned_alloc(page_size(), bytes))) {
            for (int j = 0; j < i; j++) free(fresh[j]);
            free(fresh);
            return perr(ps, VOLT_ERR_NOMEM, "params: cannot allocate unit '%s' as %s (%zu bytes)",
                        ps->units[i]->name, volt_dtype_name(dt), bytes);
        }
        memset(fresh[i], 0, bytes);
    }
    for (int i = 0; i < ps->n_units; i++) {
        volt_unit *u = ps->units[i];
        void *old = u->data ? (void *)u->data : (void *)u->data16;
        volt_convert(fresh[i], dt, old, ps->dtype, u->numel);   /* RNE; padding stays zero */
        free(old);
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

volt_status volt__unit_release(volt_unit *u, volt_unit_buf which, int64_t lo, int64_t hi) {
    size_t esz;
    char *buf = unit_buf(u, which, &esz);
    if (!buf) return VOLT_ERR_STATE;
    if (lo < 0) lo = 0;
    if (hi > u->numel) hi = u->numel;
    if (lo >= hi) return VOLT_OK;
    if (which == VOLT_UNIT_VALUES && u->busy) return VOLT_ERR_STATE;
    const size_t pg = page_size();
    uintptr_t a = (uintptr_t)(buf + (size_t)lo * esz), b = (uintptr_t)(buf + (size_t)hi * esz);
    uintptr_t pa = (a + pg - 1) / pg * pg, pb = b / pg * pg;
    if (pa >= pb) { memset((void *)a, 0, b - a); return VOLT_OK; }
    memset((void *)a, 0, pa - a);
    memset((void *)pb, 0, b - pb);
    if (madvise((void *)pa, pb - pa, MADV_DONTNEED) != 0) memset((void *)pa, 0, pb - pa);
    return VOLT_OK;
}

int64_t volt__unit_resident_bytes(const volt_unit *u, volt_unit_buf which) {
    size_t esz;
    const char *buf = unit_buf(u, which, &esz);
    if (!buf) return 0;
    const size_t pg = page_size(), n = (esz * (size_t)(u->numel ? u->numel : VOLT_PARAM_ALIGN) + pg - 1) / pg;
    unsigned char vec[256];
    int64_t pages = 0;
    for (size_t i = 0; i < n; i += sizeof vec) {
        size_t m = n - i < sizeof vec ? n - i : sizeof vec;
        if (mincore((void *)(buf + i * pg), m * pg, vec) != 0) return (int64_t)(n * pg);   /* unknown: all */
        for (size_t k = 0; k < m; k++) pages += vec[k] & 1;
    }
    return pages * (int64_t)pg;
}

void volt__unit_set_stale(volt_unit *u, bool stale) { u->stale = stale; }
bool volt__unit_stale(const volt_unit *u) { return u->stale; }
