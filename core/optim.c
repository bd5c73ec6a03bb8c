/* Optimizers on the param store's flat unit buffers: SGD, Adam, AdamW.
 *
 * The per-element math follows PyTorch's _single_tensor_sgd / _single_tensor_adam
 * (torch 2.x, non-foreach, non-capturable, maximize=False, amsgrad=False) operation by
 * operation in f32; the per-step scalars are computed in double (PyTorch does that in
 * Python) and rounded to f32 once, as PyTorch's CPU kernels do with scalar arguments.
 * Every element is independent, so the OpenMP split cannot change a result bit.
 *
 * State: per unit, state_count buffers of (hi - lo) elements covering unit elements [lo, hi);
 * element i of a state buffer belongs to unit element lo + i. States are f32, or bf16/f16
 * (cfg.state_dtype); parameters are f32 or stored in 16 bits (volt_params_convert). With
 * any 16-bit buffer the update runs on f32 copies of OPT_CHUNK-element pieces with the same
 * kernels, and the results are rounded to nearest even on store. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <immintrin.h>
#endif
#include "volt/optim.h"
#include "volt/dtype.h"
#include "core/internal.h"   /* VOLT__SIMD_CLONES */
#include "core/err.h"

#define OPT_MAX_STATES 2
#define OPT_ALIGN 64
/* Below this many floats a segment is updated by one thread (fork/join costs more). */
#define OPT_PAR_MIN 32768
/* Elements per piece when parameters or states are 16-bit (f32 scratch: 3 pieces). */
#define OPT_CHUNK 65536

typedef struct opt_unit {
    volt_unit *u;
    int64_t lo, hi;                 /* range of the unit this optimizer updates */
    void *state[OPT_MAX_STATES];    /* hi - lo elements of state_dt each, NULL when empty */
} opt_unit;

struct volt_optimizer {
    volt_optimizer_config cfg;
    volt_params *ps;                /* borrowed */
    int n_units;
    opt_unit *units;
    int n_states;
    volt_dtype state_dt;            /* cfg.state_dtype */
    float *scratch;                 /* 3 * OPT_CHUNK floats once anything is 16-bit */
    float lr;
    int64_t steps;
    char errmsg[256];
};

/* Per-step scalars, already rounded to the f32 the kernels use. */
typedef struct opt_coef {
    float wd;                       /* L2 decay added to the grad (SGD, Adam); 0 = none */
    /* SGD */
    float momentum, one_minus_damp, neg_lr;
    bool nesterov, first;
    /* Adam / AdamW */
    float decay;                    /* AdamW: p *= decay; 1 = none */
    float w1, one_minus_w1, beta2, w2, bc2_sqrt, eps, neg_step_size;
} opt_coef;

#define opt_fail(opt, st, ...) VOLT__OBJ_ERRF(opt, st, __VA_ARGS__)

static void *state_alloc(int64_t n, size_t esz) {
    if (n <= 0) return NULL;
    size_t bytes = (size_t)n * esz;
    bytes = (bytes + OPT_ALIGN - 1) & ~(size_t)(OPT_ALIGN - 1);
    void *p = aligned_alloc(OPT_ALIGN, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

/* ---- config ------------------------------------------------------------------------ */
void volt_optimizer_config_init(volt_optimizer_config *cfg) {
    if (!cfg) return;
    *cfg = (volt_optimizer_config){
        .version = VOLT_OPTIMIZER_CONFIG_VERSION,
        .kind = VOLT_OPTIM_ADAM,
        .lr = 1e-3f,
        .momentum = 0.f,
        .dampening = 0.f,
        .nesterov = false,
        .weight_decay = 0.f,
        .beta1 = 0.9f,
        .beta2 = 0.999f,
        .eps = 1e-8f,
        .state_dtype = VOLT_F32,
    };
}

volt_status volt__optimizer_config_check(const volt_optimizer_config *c, char *msg, size_t n) {
    if (!c) { snprintf(msg, n, "optimizer: NULL config"); return VOLT_ERR_INVALID_ARG; }
    if (!VOLT_VERSION_OK(c->version, VOLT_OPTIMIZER_CONFIG_VERSION)) {
        snprintf(msg, n, "volt_optimizer_config: version %u, this library knows 1..%u "
                 "(call volt_optimizer_config_init)", c->version, VOLT_OPTIMIZER_CONFIG_VERSION);
        return VOLT_ERR_VERSION;
    }
#define BAD(...) do { snprintf(msg, n, __VA_ARGS__); return VOLT_ERR_INVALID_ARG; } while (0)
    if ((unsigned)c->kind >= VOLT_OPTIM_KIND_COUNT) BAD("optimizer: unknown kind %d", (int)c->kind);
    if (!isfinite(c->lr) || c->lr < 0.f) BAD("optimizer: invalid lr %g (must be >= 0)", c->lr);
    if (!isfinite(c->weight_decay) || c->weight_decay < 0.f)
        BAD("optimizer: invalid weight_decay %g (must be >= 0)", c->weight_decay);
    if (c->kind == VOLT_OPTIM_SGD) {
        if (!isfinite(c->momentum) || c->momentum < 0.f)
            BAD("optimizer: invalid momentum %g (must be >= 0)", c->momentum);
        if (!isfinite(c->dampening)) BAD("optimizer: invalid dampening %g", c->dampening);
        if (c->nesterov && (c->momentum <= 0.f || c->dampening != 0.f))
            BAD("optimizer: nesterov momentum requires momentum > 0 and dampening == 0 "
                "(momentum %g, dampening %g)", c->momentum, c->dampening);
    } else {
        if (!(c->beta1 >= 0.f && c->beta1 < 1.f)) BAD("optimizer: invalid beta1 %g (must be in [0, 1))", c->beta1);
        if (!(c->beta2 >= 0.f && c->beta2 < 1.f)) BAD("optimizer: invalid beta2 %g (must be in [0, 1))", c->beta2);
        if (!isfinite(c->eps) || c->eps < 0.f) BAD("optimizer: invalid eps %g (must be >= 0)", c->eps);
    }
    if (c->state_dtype != VOLT_F32 && c->state_dtype != VOLT_BF16 && c->state_dtype != VOLT_F16)
        BAD("optimizer: state_dtype must be f32, bf16 or f16, got %d", (int)c->state_dtype);
#undef BAD
    return VOLT_OK;
}

volt_status volt_optimizer_config_validate(const volt_optimizer_config *cfg) {
    char msg[256];
    return volt__optimizer_config_check(cfg, msg, sizeof msg);
}

/* ---- create / destroy ----------------------------------------------------------------- */
static int states_for(const volt_optimizer_config *c) {
    if (c->kind == VOLT_OPTIM_SGD) return c->momentum != 0.f ? 1 : 0;
    return 2;
}

volt_status volt_optimizer_create(const volt_optimizer_config *cfg, volt_params *ps,
                                  volt_optimizer **out) {
    if (!out) return VOLT_ERR_INVALID_ARG;
    *out = NULL;
    char msg[256];
    volt_status st = volt__optimizer_config_check(cfg, msg, sizeof msg);
    if (st < 0) return st;
    if (!ps) return VOLT_ERR_INVALID_ARG;
    if (!volt_params_finalized(ps)) return VOLT_ERR_STATE;

    volt_optimizer *opt = calloc(1, sizeof *opt);
    if (!opt) return VOLT_ERR_NOMEM;
    opt->cfg = *cfg;
    opt->ps = ps;
    opt->lr = cfg->lr;
    opt->n_states = states_for(cfg);
    opt->state_dt = cfg->state_dtype;
    opt->n_units = volt_params_unit_count(ps);
    if (opt->n_units > 0) {
        opt->units = calloc((size_t)opt->n_units, sizeof *opt->units);
        if (!opt->units) { free(opt); return VOLT_ERR_NOMEM; }
    }
    for (int i = 0; i < opt->n_units; i++) {
        opt_unit *ou = &opt->units[i];
        ou->u = volt_params_unit_at(ps, i);
        ou->lo = 0;
        ou->hi = volt_unit_numel(ou->u);
        for (int k = 0; k < opt->n_states; k++) {
            ou->state[k] = state_alloc(ou->hi - ou->lo, volt_dtype_size(opt->state_dt));
            if (ou->hi > ou->lo && !ou->state[k]) { volt_optimizer_destroy(opt); return VOLT_ERR_NOMEM; }
        }
    }
    *out = opt;
    return VOLT_OK;
}

void volt_optimizer_destroy(volt_optimizer *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->n_units && opt->units; i++)
        for (int k = 0; k < OPT_MAX_STATES; k++) free(opt->units[i].state[k]);
    free(opt->units);
    free(opt->scratch);
    free(opt);
}

const char *volt_optimizer_errmsg(const volt_optimizer *opt) { return opt ? opt->errmsg : ""; }
const volt_optimizer_config *volt_optimizer_get_config(const volt_optimizer *opt) {
    return opt ? &opt->cfg : NULL;
}

/* ---- kernels ------------------------------------------------------------------------ */
/* p, g, b: n floats of one parameter's slice (b = momentum buffer, NULL without momentum). */
static void sgd_kernel(const opt_coef *c, float *restrict p, const float *restrict g,
                       float *restrict b, int64_t n) {
    const float wd = c->wd, mom = c->momentum, omd = c->one_minus_damp, neg_lr = c->neg_lr;
    const bool first = c->first, nesterov = c->nesterov;
    #pragma omp parallel for schedule(static) if (n >= OPT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        if (wd != 0.f) gi = gi + wd * p[i];                       /* grad.add(param, alpha=wd) */
        if (b) {
            float bi;
            if (first) bi = gi;                                   /* buf = clone(grad) */
            else bi = b[i] * mom + omd * gi;                      /* buf.mul_(m).add_(g, 1-d) */
            b[i] = bi;
            gi = nesterov ? gi + mom * bi : bi;                   /* grad.add(buf, alpha=m) */
        }
        p[i] = p[i] + neg_lr * gi;                                /* param.add_(grad, -lr) */
    }
}

/* s[i] = sqrtf(x[i]) for i < n, four at a time with SSE where available (sqrtps is IEEE
 * sqrt like sqrtf): GCC keeps any sqrtf loop scalar because of errno. */
static void sqrt_span(const float *x, float *out, int64_t n) {
    int64_t i = 0;
#ifdef __SSE2__
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
    for (; i < n; i++) out[i] = sqrtf(x[i]);
}

#define OPT_SPAN 2048   /* elements per adam_span call (its sqrt buffer) */

/* m = exp_avg, v = exp_avg_sq; decay (AdamW), wd (Adam, != 0) and small_w (torch lerp's
 * branch) are constants in each inlined copy, so the loops have no branches and
 * vectorise. Elements [0, n <= OPT_SPAN): the update in three passes over the span (m, v
 * and the decayed p; sqrt(v); p), the same f32 operations in the same order as the
 * one-pass formula, so the same bits. */
static inline __attribute__((always_inline)) void adam_span_(const opt_coef *c, bool decay_on, bool wd_on,
                                                             bool small_w, float *restrict p, const float *restrict g,
                                                             float *restrict m, float *restrict v, int64_t n) {
    const float wd = c->wd, decay = c->decay;
    const float w1 = c->w1, omw1 = c->one_minus_w1, beta2 = c->beta2, w2 = c->w2;
    const float bc2_sqrt = c->bc2_sqrt, eps = c->eps, neg_ss = c->neg_step_size;
    float sq[OPT_SPAN];
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i], gi = g[i];
        if (decay_on) pi = pi * decay;                            /* AdamW: param.mul_(1 - lr*wd) */
        if (wd_on) gi = gi + wd * pi;                             /* Adam: grad.add(param, alpha=wd) */
        float mi = m[i];
        mi = small_w ? mi + w1 * (gi - mi)                        /* exp_avg.lerp_(grad, 1-b1) */
                     : gi - (gi - mi) * omw1;
        float vi = v[i] * beta2;                                  /* exp_avg_sq.mul_(b2) */
        vi = vi + w2 * gi * gi;                                   /* .addcmul_(g, g, 1-b2) */
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
    }
    sqrt_span(v, sq, n);
    for (int64_t i = 0; i < n; i++) {
        float denom = sq[i] / bc2_sqrt + eps;                     /* (sqrt(v)/bc2_sqrt).add_(eps) */
        p[i] = p[i] + neg_ss * m[i] / denom;                      /* addcdiv_(m, denom, -step_size) */
    }
}

/* Compiled for AVX-512 and AVX2 too (core/internal.h): memory-bound, but the default
 * x86-64-v2 copy spent half its time in 4-wide arithmetic. */
static VOLT__SIMD_CLONES void adam_span(const opt_coef *c, bool adamw, float *restrict p, const float *restrict g,
                      float *restrict m, float *restrict v, int64_t n) {
    const bool small_w = fabsf(c->w1) < 0.5f, decay_on = adamw && c->decay != 1.f, wd_on = !adamw && c->wd != 0.f;
    if (decay_on) {
        if (small_w) adam_span_(c, true, false, true, p, g, m, v, n);
        else adam_span_(c, true, false, false, p, g, m, v, n);
    } else if (wd_on) {
        if (small_w) adam_span_(c, false, true, true, p, g, m, v, n);
        else adam_span_(c, false, true, false, p, g, m, v, n);
    } else {
        if (small_w) adam_span_(c, false, false, true, p, g, m, v, n);
        else adam_span_(c, false, false, false, p, g, m, v, n);
    }
}

static void adam_kernel(const opt_coef *c, bool adamw, float *restrict p, const float *restrict g,
                        float *restrict m, float *restrict v, int64_t n) {
    int64_t ns = (n + OPT_SPAN - 1) / OPT_SPAN;
    #pragma omp parallel for schedule(static) if (n >= OPT_PAR_MIN)
    for (int64_t k = 0; k < ns; k++) {
        int64_t o = k * OPT_SPAN;
        adam_span(c, adamw, p + o, g + o, m + o, v + o, n - o < OPT_SPAN ? n - o : OPT_SPAN);
    }
}

static void make_coef(const volt_optimizer *opt, opt_coef *c) {
    const volt_optimizer_config *cfg = &opt->cfg;
    const double lr = opt->lr;
    *c = (opt_coef){ 0 };
    c->neg_lr = (float)-lr;
    if (cfg->kind == VOLT_OPTIM_SGD) {
        c->wd = cfg->weight_decay;
        c->momentum = cfg->momentum;
        c->one_minus_damp = (float)(1.0 - (double)cfg->dampening);
        c->nesterov = cfg->nesterov;
        c->first = opt->steps == 0;
        return;
    }
    const double b1 = cfg->beta1, b2 = cfg->beta2, t = (double)(opt->steps + 1);
    const double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    c->wd = cfg->kind == VOLT_OPTIM_ADAM ? cfg->weight_decay : 0.f;
    c->decay = cfg->kind == VOLT_OPTIM_ADAMW ? (float)(1.0 - lr * (double)cfg->weight_decay) : 1.f;
    c->w1 = (float)(1.0 - b1);
    c->one_minus_w1 = 1.f - c->w1;
    c->beta2 = cfg->beta2;
    c->w2 = (float)(1.0 - b2);
    c->bc2_sqrt = (float)sqrt(bc2);
    c->eps = cfg->eps;
    c->neg_step_size = (float)-(lr / bc1);
}

/* ---- step ---------------------------------------------------------------------------- */
/* n elements of one parameter: values at unit element a, state at state element so. The
 * all-f32 case runs the kernel in place; otherwise OPT_CHUNK pieces are converted to f32,
 * updated and rounded back. */
static void update_slice(volt_optimizer *opt, const opt_coef *c, void *values, volt_dtype vdt,
                         const float *grad, opt_unit *ou, int64_t a, int64_t so, int64_t n) {
    const bool sgd = opt->cfg.kind == VOLT_OPTIM_SGD, adamw = opt->cfg.kind == VOLT_OPTIM_ADAMW;
    const int ns = opt->n_states;
    if (vdt == VOLT_F32 && opt->state_dt == VOLT_F32) {
        float *p = (float *)values + a, *s0 = ns > 0 ? (float *)ou->state[0] + so : NULL;
        if (sgd) sgd_kernel(c, p, grad + a, s0, n);
        else adam_kernel(c, adamw, p, grad + a, s0, (float *)ou->state[1] + so, n);
        return;
    }
    const size_t vesz = volt_dtype_size(vdt), sesz = volt_dtype_size(opt->state_dt);
    for (int64_t c0 = 0; c0 < n; c0 += OPT_CHUNK) {
        const int64_t m = n - c0 < OPT_CHUNK ? n - c0 : OPT_CHUNK;
        void *pv = (char *)values + (size_t)(a + c0) * vesz;
        float *p = vdt == VOLT_F32 ? pv : opt->scratch;
        float *st[OPT_MAX_STATES] = { NULL, NULL };
        void *sv[OPT_MAX_STATES] = { NULL, NULL };
        if (vdt != VOLT_F32) volt_convert(p, VOLT_F32, pv, vdt, m);
        for (int k = 0; k < ns; k++) {
            sv[k] = (char *)ou->state[k] + (size_t)(so + c0) * sesz;
            st[k] = opt->state_dt == VOLT_F32 ? sv[k] : opt->scratch + (1 + k) * OPT_CHUNK;
            if (opt->state_dt != VOLT_F32) volt_convert(st[k], VOLT_F32, sv[k], opt->state_dt, m);
        }
        if (sgd) sgd_kernel(c, p, grad + a + c0, st[0], m);
        else adam_kernel(c, adamw, p, grad + a + c0, st[0], st[1], m);
        if (vdt != VOLT_F32) volt_convert(pv, vdt, p, VOLT_F32, m);
        for (int k = 0; k < ns && opt->state_dt != VOLT_F32; k++) volt_convert(sv[k], opt->state_dt, st[k], VOLT_F32, m);
    }
}

volt_status volt_optimizer_step(volt_optimizer *opt) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    opt->errmsg[0] = '\0';
    const volt_dtype vdt = volt_params_dtype(opt->ps);
    if ((vdt != VOLT_F32 || opt->state_dt != VOLT_F32) && !opt->scratch) {
        /* once: the store went 16-bit after create (the trainer converts before it creates) */
        opt->scratch = aligned_alloc(OPT_ALIGN, sizeof(float) * 3 * OPT_CHUNK);
        if (!opt->scratch) return opt_fail(opt, VOLT_ERR_NOMEM, "optimizer step: out of memory (16-bit scratch)");
    }
    opt_coef c;
    make_coef(opt, &c);

    for (int ui = 0; ui < opt->n_units; ui++) {
        opt_unit *ou = &opt->units[ui];
        if (ou->hi <= ou->lo) continue;
        void *data = volt_unit_values(ou->u);
        float *grad = volt_unit_grad(ou->u);
        if (!data || !grad)
            return opt_fail(opt, VOLT_ERR_STATE, "optimizer step: unit '%s' has no %s buffer",
                            volt_unit_name(ou->u), data ? "grad" : "value");
        const int np = volt_unit_param_count(ou->u);
        for (int pi = 0; pi < np; pi++) {
            const volt_tensor *p = volt_unit_param(ou->u, pi);
            if (!(p->flags & VOLT_TENSOR_REQUIRES_GRAD)) continue;   /* frozen */
            const int64_t off = volt_param_offset(p);
            int64_t a = off, b = off + volt_tensor_numel(p);
            if (a < ou->lo) a = ou->lo;
            if (b > ou->hi) b = ou->hi;
            if (a >= b) continue;
            update_slice(opt, &c, data, vdt, grad, ou, a, a - ou->lo, b - a);
        }
    }
    opt->steps++;
    return VOLT_OK;
}

/* ---- ranges -------------------------------------------------------------------------- */
volt_status volt_optimizer_set_range(volt_optimizer *opt, int unit, int64_t lo, int64_t hi) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    if (unit < 0 || unit >= opt->n_units)
        return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer set_range: unit %d out of [0, %d)",
                        unit, opt->n_units);
    opt_unit *ou = &opt->units[unit];
    const int64_t numel = volt_unit_numel(ou->u);
    if (lo < 0 || hi < lo || hi > numel)
        return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer set_range: unit '%s': range "
                        "[%lld, %lld) not inside [0, %lld)", volt_unit_name(ou->u),
                        (long long)lo, (long long)hi, (long long)numel);
    void *fresh[OPT_MAX_STATES] = { 0 };
    const size_t esz = volt_dtype_size(opt->state_dt);
    for (int k = 0; k < opt->n_states; k++) {
        fresh[k] = state_alloc(hi - lo, esz);
        if (hi > lo && !fresh[k]) {
            for (int j = 0; j < k; j++) free(fresh[j]);
            return opt_fail(opt, VOLT_ERR_NOMEM, "optimizer set_range: unit '%s': out of memory",
                            volt_unit_name(ou->u));
        }
    }
    /* Keep what the old and new ranges share (a restore may have filled it already). */
    const int64_t a = lo > ou->lo ? lo : ou->lo, b = hi < ou->hi ? hi : ou->hi;
    for (int k = 0; k < opt->n_states; k++) {
        if (a < b) memcpy((char *)fresh[k] + (size_t)(a - lo) * esz, (char *)ou->state[k] + (size_t)(a - ou->lo) * esz,
                          (size_t)(b - a) * esz);
        free(ou->state[k]);
        ou->state[k] = fresh[k];
    }
    ou->lo = lo;
    ou->hi = hi;
    return VOLT_OK;
}

volt_status volt_optimizer_range(const volt_optimizer *opt, int unit, int64_t *lo, int64_t *hi) {
    if (!opt || unit < 0 || unit >= opt->n_units) return VOLT_ERR_INVALID_ARG;
    if (lo) *lo = opt->units[unit].lo;
    if (hi) *hi = opt->units[unit].hi;
    return VOLT_OK;
}

/* ---- lr and step count --------------------------------------------------------------- */
void volt_optimizer_set_lr(volt_optimizer *opt, float lr) { if (opt) opt->lr = lr; }
float volt_optimizer_lr(const volt_optimizer *opt) { return opt ? opt->lr : 0.f; }
float volt_optimizer_base_lr(const volt_optimizer *opt) { return opt ? opt->cfg.lr : 0.f; }
int64_t volt_optimizer_step_count(const volt_optimizer *opt) { return opt ? opt->steps : 0; }
void volt_optimizer_set_step_count(volt_optimizer *opt, int64_t steps) {
    if (opt) opt->steps = steps > 0 ? steps : 0;
}

/* ---- state access ---------------------------------------------------------------------- */
int volt_optimizer_state_count(const volt_optimizer *opt) { return opt ? opt->n_states : 0; }

const char *volt_optimizer_state_name(const volt_optimizer *opt, int k) {
    if (!opt || k < 0 || k >= opt->n_states) return NULL;
    if (opt->cfg.kind == VOLT_OPTIM_SGD) return "momentum_buffer";
    return k == 0 ? "exp_avg" : "exp_avg_sq";
}

void *volt_optimizer_state_raw(volt_optimizer *opt, int unit, int k, int64_t *lo, int64_t *hi) {
    if (!opt || unit < 0 || unit >= opt->n_units || k < 0 || k >= opt->n_states) return NULL;
    const opt_unit *ou = &opt->units[unit];
    if (lo) *lo = ou->lo;
    if (hi) *hi = ou->hi;
    return ou->state[k];
}

float *volt_optimizer_state(volt_optimizer *opt, int unit, int k, int64_t *lo, int64_t *hi) {
    if (opt && opt->state_dt != VOLT_F32) return NULL;
    return volt_optimizer_state_raw(opt, unit, k, lo, hi);
}

volt_dtype volt_optimizer_state_dtype(const volt_optimizer *opt) { return opt ? opt->state_dt : VOLT_F32; }

int64_t volt_optimizer_state_bytes(const volt_optimizer *opt) {
    if (!opt) return 0;
    int64_t n = 0;
    for (int i = 0; i < opt->n_units; i++) n += opt->units[i].hi - opt->units[i].lo;
    return n * opt->n_states * (int64_t)volt_dtype_size(opt->state_dt);
}
