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
 * (cfg.state_dtype); parameters are f32 or stored in 16 bits (volt_params_convert).
 *
 * Everything lives on the param store's device: the states are allocated through its
 * backend, and the update is the backend's parameter math (pm->update, core/cpu/param_math.c
 * on cpu). The per-step scalars (volt_opt_coef: learning rate and step count folded into the
 * bias corrections and step size) are computed here in double, rounded to f32 once, and
 * copied to one device volt_opt_coef by one H2D copy per step from a fixed host address
 * (opt->coef_host), so a captured step (CUDA graph) can replay the copy and the kernels
 * without the learning rate baked in.
 *
 * Parameter groups (torch's param_groups; cfg.groups): every parameter belongs to one group
 * (by name, at create), each group has its lr and weight decay and so its own volt_opt_coef.
 * The coefficients of all groups are one array, host and device, still refreshed by one H2D
 * copy per step; a run of adjacent trainable parameters is split where the group changes,
 * and each update reads its group's coefficients.
 *
 * Weight averaging (volt_optimizer_enable_average; Lightning's WeightAveraging): one more
 * state, the last, holding torch AveragedModel's average of the values; each step updates it
 * per unit after the unit's parameter updates (pm->average over the unit's range), what it
 * does (copy, EMA, lerp, nothing) being part of the step's coefficients. */
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/optim.h"
#include "volt/dtype.h"
#include "core/internal.h"
#include "core/err.h"

#include "core/optim_internal.h"

/* n zeroed elements of device memory. */
static void *state_alloc(volt_device *d, int64_t n, size_t esz) {
    if (n <= 0) return NULL;
    const size_t bytes = (size_t)n * esz;
    void *p = volt__dev_alloc(d, bytes);
    if (p) volt__dev_memset(d, p, 0, bytes);
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

/* The config as this library's struct: a version-1 caller's struct ends before n_groups
 * (read no further), and has no groups. */
static void config_copy(volt_optimizer_config *dst, const volt_optimizer_config *src) {
    if (src->version >= 2) {
        *dst = *src;
        return;
    }
    memset(dst, 0, sizeof *dst);
    memcpy(dst, src, offsetof(volt_optimizer_config, n_groups));
}

/* The next element of a comma-separated pattern list at *s into buf, blanks around it
 * dropped: 1 (an element, possibly empty), 0 at the end, -1 when longer than PAT_MAX - 1. */
static int pat_next(const char **s, char buf[PAT_MAX]) {
    const char *p = *s;
    if (!p) return 0;
    const char *e = strchr(p, ',');
    const char *end = e ? e : p + strlen(p);
    *s = e ? e + 1 : NULL;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t')) end--;
    if ((size_t)(end - p) >= PAT_MAX) return -1;
    memcpy(buf, p, (size_t)(end - p));
    buf[end - p] = 0;
    return 1;
}

static bool pat_match(const char *patterns, const char *name) {
    char el[PAT_MAX];
    for (const char *s = patterns; pat_next(&s, el) > 0;)
        if (el[0] && fnmatch(el, name, 0) == 0) return true;
    return false;
}

bool volt_pattern_match(const char *patterns, const char *name) { return patterns && name && pat_match(patterns, name); }

/* The one reading of a pattern list: the config's groups (syntax here, names in
 * groups_check), added groups and callbacks (BackboneFinetuning) all say their faults in
 * these words. "" is one empty element. */
volt_status volt_patterns_check(const char *patterns, const volt_params *ps, char *err, size_t errlen) {
    char dummy[8];
    if (!err || !errlen) { err = dummy; errlen = sizeof dummy; }
    err[0] = 0;
    if (!patterns) { snprintf(err, errlen, "no pattern (NULL)"); return VOLT_ERR_INVALID_ARG; }
    char el[PAT_MAX];
    int r, k = 0;
    for (const char *s = patterns; (r = pat_next(&s, el)) != 0; k++) {
        if (r < 0 || !el[0]) {
            if (r < 0) snprintf(err, errlen, "'%.64s...': a pattern longer than %d bytes (element %d)", patterns, PAT_MAX - 1, k + 1);
            else snprintf(err, errlen, "'%.200s': empty pattern (element %d)", patterns, k + 1);
            return VOLT_ERR_INVALID_ARG;
        }
        bool hit = !ps;
        for (int i = 0; !hit && i < volt_params_count(ps); i++) hit = fnmatch(el, volt_params_at(ps, i)->name, 0) == 0;
        if (!hit) {
            snprintf(err, errlen, "pattern '%s' matches no parameter (patterns are fnmatch globs on the whole name: '*%s' for a "
                     "suffix)", el, el);
            return VOLT_ERR_INVALID_ARG;
        }
    }
    return VOLT_OK;
}

/* The group of parameter `name`: 1 + the first cfg group with a matching element, else 0. */
static int group_of(const volt_optimizer_config *c, const char *name) {
    for (int g = 0; g < c->n_groups; g++)
        if (pat_match(c->groups[g].params, name)) return g + 1;
    return 0;
}

static bool rate_ok(float v) { return isnan(v) || (isfinite(v) && v >= 0.f); }

volt_status volt__optimizer_config_check(const volt_optimizer_config *cin, char *msg, size_t n) {
    if (!cin) { snprintf(msg, n, "optimizer: NULL config"); return VOLT_ERR_INVALID_ARG; }
    if (!VOLT_VERSION_OK(cin->version, VOLT_OPTIMIZER_CONFIG_VERSION)) {
        snprintf(msg, n, "volt_optimizer_config: version %u, this library knows 1..%u "
                 "(call volt_optimizer_config_init)", cin->version, VOLT_OPTIMIZER_CONFIG_VERSION);
        return VOLT_ERR_VERSION;
    }
    volt_optimizer_config cc;
    config_copy(&cc, cin);
    const volt_optimizer_config *c = &cc;
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
    if (c->n_groups < 0 || c->n_groups > VOLT_OPTIM_MAX_GROUPS)
        BAD("optimizer: %d parameter groups, at most %d (n_groups)", c->n_groups, VOLT_OPTIM_MAX_GROUPS);
    for (int g = 0; g < c->n_groups; g++) {
        const volt_optim_group *gr = &c->groups[g];
        if (!gr->params) BAD("optimizer: groups[%d].params is NULL", g);
        char why[PAT_MAX + 160];
        if (volt_patterns_check(gr->params, NULL, why, sizeof why) < 0) BAD("optimizer: groups[%d].params %s", g, why);
        if (!rate_ok(gr->lr)) BAD("optimizer: groups[%d] ('%s'): invalid lr %g (must be >= 0, or NAN for the config's)", g, gr->params, gr->lr);
        if (!rate_ok(gr->weight_decay))
            BAD("optimizer: groups[%d] ('%s'): invalid weight_decay %g (must be >= 0, or NAN for the config's)", g, gr->params,
                gr->weight_decay);
    }
#undef BAD
    return VOLT_OK;
}

/* The groups against the store's parameter names: every element matches some parameter, every
 * group holds at least one. */
static volt_status groups_check(const volt_optimizer_config *c, const volt_params *ps, char *msg, size_t n) {
    int cnt[OPT_GROUPS] = { 0 };
    const int np = volt_params_count(ps);
    for (int g = 0; g < c->n_groups; g++) {
        char why[PAT_MAX + 160];
        if (volt_patterns_check(c->groups[g].params, ps, why, sizeof why) < 0) {
            snprintf(msg, n, "optimizer: groups[%d] %s", g, why);
            return VOLT_ERR_INVALID_ARG;
        }
    }
    for (int i = 0; i < np; i++) cnt[group_of(c, volt_params_at((volt_params *)ps, i)->name)]++;
    for (int g = 0; g < c->n_groups; g++)
        if (!cnt[g + 1]) {
            snprintf(msg, n, "optimizer: groups[%d] ('%s') holds no parameter: every parameter it matches belongs to an "
                     "earlier group", g, c->groups[g].params);
            return VOLT_ERR_INVALID_ARG;
        }
    return VOLT_OK;
}

volt_status volt_optimizer_config_validate(const volt_optimizer_config *cfg) {
    char msg[256];
    return volt__optimizer_config_check(cfg, msg, sizeof msg);
}

volt_status volt_optimizer_config_check(const volt_optimizer_config *cfg, const volt_params *ps, char *err, size_t errlen) {
    char buf[512];
    if (!err || !errlen) { err = buf; errlen = sizeof buf; }
    err[0] = 0;
    volt_status st = volt__optimizer_config_check(cfg, err, errlen);
    if (st < 0 || !ps) return st;
    if (!volt_params_finalized(ps)) {
        snprintf(err, errlen, "optimizer: the param store is not finalized");
        return VOLT_ERR_STATE;
    }
    volt_optimizer_config c;
    config_copy(&c, cfg);
    return groups_check(&c, ps, err, errlen);
}

/* ---- create / destroy ----------------------------------------------------------------- */
static int states_for(const volt_optimizer_config *c) {
    if (c->kind == VOLT_OPTIM_SGD) return c->momentum != 0.f ? 1 : 0;
    return 2;
}

static volt_status map_groups(volt_optimizer *opt);

volt_status volt_optimizer_create(const volt_optimizer_config *cfg, volt_params *ps,
                                  volt_optimizer **out) {
    if (!out) return VOLT_ERR_INVALID_ARG;
    *out = NULL;
    char msg[256];
    volt_status st = volt__optimizer_config_check(cfg, msg, sizeof msg);
    if (st < 0) return st;
    if (!ps) return VOLT_ERR_INVALID_ARG;
    if (!volt_params_finalized(ps)) return VOLT_ERR_STATE;
    volt_optimizer_config c;
    config_copy(&c, cfg);
    if ((st = groups_check(&c, ps, msg, sizeof msg)) < 0) return st;
    if ((st = volt__params_commit_grads(ps)) < 0) return st;   /* the step reads every unit's grads */

    volt_optimizer *opt = calloc(1, sizeof *opt);
    if (!opt) return VOLT_ERR_NOMEM;
    opt->cfg = c;
    opt->ps = ps;
    opt->dev = ps->dev;
    opt->lr = c.lr;
    opt->n_groups = opt->n_cfg_groups = 1 + c.n_groups;
    opt->group_base_lr[0] = opt->group_lr[0] = c.lr;
    opt->group_wd[0] = c.weight_decay;
    for (int g = 1; g < opt->n_groups; g++) {
        const volt_optim_group *gr = &c.groups[g - 1];
        if (!(opt->pattern[g] = strdup(gr->params))) { volt_optimizer_destroy(opt); return VOLT_ERR_NOMEM; }
        opt->cfg.groups[g - 1].params = opt->pattern[g];
        opt->group_base_lr[g] = opt->group_lr[g] = isnan(gr->lr) ? c.lr : gr->lr;
        opt->group_wd[g] = isnan(gr->weight_decay) ? c.weight_decay : gr->weight_decay;
    }
    opt->n_states = states_for(cfg);
    opt->state_dt = cfg->state_dtype;
    opt->n_units = volt_params_unit_count(ps);
    if (opt->n_units > 0) {
        opt->units = calloc((size_t)opt->n_units, sizeof *opt->units);
        if (!opt->units) { free(opt); return VOLT_ERR_NOMEM; }
    }
    /* room for every group there can be: an added group (volt_optimizer_add_param_group) needs
     * no allocation on the device */
    if (!(opt->coef_dev = volt__dev_alloc(opt->dev, sizeof *opt->coef_dev * (size_t)OPT_GROUPS))) {
        volt_optimizer_destroy(opt);
        return VOLT_ERR_NOMEM;
    }
    for (int i = 0; i < opt->n_units; i++) {
        opt_unit *ou = &opt->units[i];
        ou->u = volt_params_unit_at(ps, i);
        ou->lo = 0;
        ou->hi = volt_unit_numel(ou->u);
        for (int k = 0; k < opt->n_states; k++) {
            ou->state[k] = state_alloc(opt->dev, ou->hi - ou->lo, volt_dtype_size(opt->state_dt));
            if (ou->hi > ou->lo && !ou->state[k]) { volt_optimizer_destroy(opt); return VOLT_ERR_NOMEM; }
        }
    }
    if (map_groups(opt) < 0) { volt_optimizer_destroy(opt); return VOLT_ERR_NOMEM; }
    *out = opt;
    return VOLT_OK;
}

void volt_optimizer_destroy(volt_optimizer *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->n_units && opt->units; i++) {
        for (int k = 0; k < OPT_MAX_STATES; k++) volt__dev_free(opt->dev, opt->units[i].state[k]);
        free(opt->units[i].group);
    }
    for (int g = 0; g < OPT_GROUPS; g++) free(opt->pattern[g]);
    free(opt->units);
    volt__dev_free(opt->dev, opt->coef_dev);
    free(opt);
}

const char *volt_optimizer_errmsg(const volt_optimizer *opt) { return opt ? opt->errmsg : ""; }
const volt_optimizer_config *volt_optimizer_get_config(const volt_optimizer *opt) {
    return opt ? &opt->cfg : NULL;
}

/* Group g's scalars for this step. */
static void make_coef(const volt_optimizer *opt, int g, volt_opt_coef *c) {
    const volt_optimizer_config *cfg = &opt->cfg;
    const double lr = opt->group_lr[g];
    const float wd = opt->group_wd[g];
    *c = (volt_opt_coef){ 0 };
    c->neg_lr = (float)-lr;
    if (cfg->kind == VOLT_OPTIM_SGD) {
        c->wd = wd;
        c->momentum = cfg->momentum;
        c->one_minus_damp = (float)(1.0 - (double)cfg->dampening);
        c->nesterov = cfg->nesterov;
        c->first = opt->steps <= opt->group_step0[g];
        return;
    }
    /* an added group counts its own steps (torch's per-parameter step, which starts at a
     * parameter's first update) */
    const int64_t own = opt->steps - opt->group_step0[g];
    const double b1 = cfg->beta1, b2 = cfg->beta2, t = (double)(own > 0 ? own + 1 : 1);
    const double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    c->wd = cfg->kind == VOLT_OPTIM_ADAM ? wd : 0.f;
    c->decay = cfg->kind == VOLT_OPTIM_ADAMW ? (float)(1.0 - lr * (double)wd) : 1.f;
    c->w1 = (float)(1.0 - b1);
    c->one_minus_w1 = 1.f - c->w1;
    c->beta2 = cfg->beta2;
    c->w2 = (float)(1.0 - b2);
    c->bc2_sqrt = (float)sqrt(bc2);
    c->eps = cfg->eps;
    c->neg_step_size = (float)-(lr / bc1);
}

/* ---- step ---------------------------------------------------------------------------- */
static void make_coefs(volt_optimizer *opt) {
    for (int g = 0; g < opt->n_groups; g++) {
        make_coef(opt, g, &opt->coef_host[g]);
        volt__optim_avg_coef(opt, opt->avg_next, &opt->coef_host[g]);
    }
}

/* The update of ou's elements [a, b) (none when empty), all of group g */
static void update_run(volt_optimizer *opt, const opt_unit *ou, volt_update_args *ua, int g, int64_t a, int64_t b) {
    if (b <= a) return;
    ua->coef = opt->coef_dev + g;   /* device address: the group's block of the one copy */
    const size_t vesz = volt_dtype_size(ua->p_dt), sesz = volt_dtype_size(ua->s_dt);
    /* device addresses: computed here, dereferenced only by the backend */
    ua->p = (char *)volt_unit_values(ou->u) + (size_t)a * vesz;
    ua->g = volt_unit_grad(ou->u) + a;
    ua->s0 = opt->n_states > 0 ? (char *)ou->state[0] + (size_t)(a - ou->lo) * sesz : NULL;
    ua->s1 = opt->n_states > 1 ? (char *)ou->state[1] + (size_t)(a - ou->lo) * sesz : NULL;
    ua->n = b - a;
    opt->dev->be->pm->update(opt->dev, ua);
    opt->launches++;
}

volt_status volt_optimizer_step(volt_optimizer *opt) { return volt__optimizer_step_unless(opt, NULL); }

volt_status volt__optimizer_step_unless(volt_optimizer *opt, const float *skip) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    opt->errmsg[0] = '\0';
    VOLT_TRY(volt_optimizer_check_lr(opt));   /* before anything moves: the step is refused whole */
    const volt_dtype vdt = volt_params_dtype(opt->ps);
    make_coefs(opt);
    /* the one copy per step, every group's coefficients */
    volt__dev_h2d(opt->dev, opt->coef_dev, opt->coef_host, sizeof opt->coef_host[0] * (size_t)opt->n_groups);
    volt_update_args ua = { .kind = opt->cfg.kind == VOLT_OPTIM_SGD ? VOLT_UPDATE_SGD
                                    : opt->cfg.kind == VOLT_OPTIM_ADAMW ? VOLT_UPDATE_ADAMW : VOLT_UPDATE_ADAM,
                            .p_dt = vdt, .s_dt = opt->state_dt, .coef = opt->coef_dev, .skip = skip };

    for (int ui = 0; ui < opt->n_units; ui++) {
        opt_unit *ou = &opt->units[ui];
        if (ou->hi <= ou->lo) continue;
        const bool has_values = volt_unit_values(ou->u) != NULL;
        if (!has_values || !volt_unit_grad(ou->u))
            return opt_fail(opt, VOLT_ERR_STATE, "optimizer step: unit '%s' has no %s buffer",
                            volt_unit_name(ou->u), has_values ? "grad" : "value");
        /* one update per run of adjacent trainable parameters of one group: the math is
         * elementwise with the group's coefficients, so a unit of trainable parameters of one
         * group is one launch */
        int64_t ra = 0, rb = 0;   /* the run being gathered, [ra, rb) */
        int rg = 0;               /* ... and its group */
        for (int pi = 0; pi < volt_unit_param_count(ou->u); pi++) {
            const volt_tensor *p = volt_unit_param(ou->u, pi);
            if (!(p->flags & VOLT_TENSOR_REQUIRES_GRAD)) continue;   /* frozen */
            const int64_t off = volt_param_offset(p);
            const int64_t a = off > ou->lo ? off : ou->lo;
            const int64_t b = off + volt_tensor_numel(p) < ou->hi ? off + volt_tensor_numel(p) : ou->hi;
            if (a >= b) continue;
            const int g = ou->group ? ou->group[pi] : 0;
            if (a != rb || g != rg) {   /* not adjacent, or another group: the run so far is one update */
                update_run(opt, ou, &ua, rg, ra, rb);
                ra = a;
                rg = g;
            }
            rb = b;
        }
        update_run(opt, ou, &ua, rg, ra, rb);
        volt__optim_average_unit(opt, ou, skip);
    }
    opt->steps++;
    if (opt->avg_mode && opt->avg_next) opt->avg_count++;
    return VOLT_OK;
}

/* A replayed step (compile): the host half of volt_optimizer_step — this step's scalars into
 * coef_host, the H2D copy's fixed source which the graph launch re-issues, and the step
 * count; the updates themselves are in the graph. */
void volt__optimizer_advance(volt_optimizer *opt) {
    make_coefs(opt);
    opt->steps++;
    if (opt->avg_mode && opt->avg_next) opt->avg_count++;
}

void volt__optimizer_unstep(volt_optimizer *opt) {
    if (!opt) return;
    if (opt->steps > 0) opt->steps--;
    if (opt->avg_mode && opt->avg_next && opt->avg_count > 0) opt->avg_count--;
}

int64_t volt__optimizer_launches(const volt_optimizer *opt) { return opt ? opt->launches : 0; }

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
        fresh[k] = state_alloc(opt->dev, hi - lo, esz);
        if (hi > lo && !fresh[k]) {
            for (int j = 0; j < k; j++) volt__dev_free(opt->dev, fresh[j]);
            return opt_fail(opt, VOLT_ERR_NOMEM, "optimizer set_range: unit '%s': out of memory",
                            volt_unit_name(ou->u));
        }
    }
    /* The average starts as the values (AveragedModel's copy of the model) where it is new. */
    if (opt->avg_mode && hi > lo)
        opt->dev->be->pm->convert(opt->dev, fresh[opt->avg_k], opt->state_dt,
                                  (const char *)volt_unit_values(ou->u) + (size_t)lo * volt_dtype_size(volt_params_dtype(opt->ps)),
                                  volt_params_dtype(opt->ps), hi - lo);
    /* Keep what the old and new ranges share (a restore may have filled it already). */
    const int64_t a = lo > ou->lo ? lo : ou->lo, b = hi < ou->hi ? hi : ou->hi;
    for (int k = 0; k < opt->n_states; k++) {
        if (a < b) volt__dev_d2d(opt->dev, (char *)fresh[k] + (size_t)(a - lo) * esz,
                                 (char *)ou->state[k] + (size_t)(a - ou->lo) * esz, (size_t)(b - a) * esz);
        volt__dev_free(opt->dev, ou->state[k]);
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
/* LambdaLR: one factor, lr / cfg.lr, for every group's base lr (in double, rounded once). */
volt_status volt_optimizer_set_lr(volt_optimizer *opt, float lr) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    if (!isfinite(lr) || lr < 0.f) return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer set_lr: invalid lr %g (must be >= 0)", lr);
    opt->lr = opt->group_lr[0] = lr;
    const float base = opt->cfg.lr;
    for (int g = 1; g < opt->n_cfg_groups; g++) {   /* an added group keeps its own lr */
        const float gb = opt->group_base_lr[g];
        opt->group_lr[g] = gb == base || !(base > 0.f) ? lr : (float)((double)gb * ((double)lr / (double)base));
    }
    return VOLT_OK;
}

void volt__optimizer_set_group_lr(volt_optimizer *opt, int g, float lr) {
    if (!opt || g < 0 || g >= opt->n_groups) return;
    opt->group_lr[g] = lr;
    if (g == 0) opt->lr = lr;
}

void volt__optimizer_set_group_lr_noted(volt_optimizer *opt, int g, float lr, const char *fmt, ...) {
    if (!opt || g < 0 || g >= opt->n_groups) return;
    volt__optimizer_set_group_lr(opt, g, lr);
    if (isfinite(lr) && lr >= 0.f) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(opt->bad_lr_note[g], sizeof opt->bad_lr_note[g], fmt, ap);
    va_end(ap);
}

/* An lr of inf (a StepLR with gamma > 1 past float's range), NaN (0 x inf) or below 0 would turn
 * every weight of its group to NaN (or step uphill) without a word: refused, as torch would not
 * notice. Only a scheduler can put one there (set_lr / set_group_lr refuse them). */
volt_status volt_optimizer_check_lr(volt_optimizer *opt) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    for (int g = 0; g < opt->n_groups; g++) {
        const float lr = opt->group_lr[g];
        if (isfinite(lr) && lr >= 0.f) continue;
        const char *note = opt->bad_lr_note[g];
        return opt_fail(opt, VOLT_ERR_NUMERIC, "at step %lld, group %d's lr is %g%s%s%s: refusing to step with it (its weights "
                        "would turn to NaN)", (long long)opt->steps, g, (double)lr, note[0] ? " (" : "", note, note[0] ? ")" : "");
    }
    return VOLT_OK;
}

float volt_optimizer_lr(const volt_optimizer *opt) { return opt ? opt->lr : 0.f; }
float volt_optimizer_base_lr(const volt_optimizer *opt) { return opt ? opt->cfg.lr : 0.f; }

int volt_optimizer_group_count(const volt_optimizer *opt) { return opt ? opt->n_groups : 0; }
#define GROUP_GET(field) (opt && g >= 0 && g < opt->n_groups ? opt->field[g] : 0)
float volt_optimizer_group_lr(const volt_optimizer *opt, int g) { return GROUP_GET(group_lr); }
float volt_optimizer_group_base_lr(const volt_optimizer *opt, int g) { return GROUP_GET(group_base_lr); }
float volt_optimizer_group_weight_decay(const volt_optimizer *opt, int g) { return GROUP_GET(group_wd); }
int volt_optimizer_group_param_count(const volt_optimizer *opt, int g) { return GROUP_GET(group_params); }
#undef GROUP_GET

int volt_optimizer_param_group(const volt_optimizer *opt, const volt_tensor *p) {
    if (!opt || !p || !p->unit) return -1;
    const int ui = volt_unit_index(p->unit);
    if (ui < 0 || ui >= opt->n_units || opt->units[ui].u != p->unit) return -1;
    const opt_unit *ou = &opt->units[ui];
    for (int pi = 0; pi < volt_unit_param_count(ou->u); pi++)
        if (volt_unit_param(ou->u, pi) == p) return ou->group ? ou->group[pi] : 0;
    return -1;
}
/* ---- added groups (torch's add_param_group) ------------------------------------------- */
/* The group of parameter `name` with the added groups: the last added group matching it (each
 * add moved its parameters), else the config's. */
static int group_now(const volt_optimizer *opt, const char *name) {
    for (int g = opt->n_groups - 1; g >= opt->n_cfg_groups; g--)
        if (pat_match(opt->pattern[g], name)) return g;
    return group_of(&opt->cfg, name);
}

/* Every unit's group map and the groups' counts from the config and the added groups (at
 * create, and after every add or drop). The maps are allocated first, so a failure changes
 * nothing. */
static volt_status map_groups(volt_optimizer *opt) {
    for (int i = 0; i < opt->n_units; i++) {
        opt_unit *ou = &opt->units[i];
        const int np = volt_unit_param_count(ou->u);
        /* zeroed: a map made here is for a store that had one group, and a failure on a later
         * unit leaves the earlier ones saying group 0, which they are */
        if (opt->n_groups > 1 && np > 0 && !ou->group && !(ou->group = calloc((size_t)np, 1))) return VOLT_ERR_NOMEM;
    }
    int cnt[OPT_GROUPS] = { 0 };
    for (int i = 0; i < volt_params_count(opt->ps); i++) cnt[group_now(opt, volt_params_at(opt->ps, i)->name)]++;
    for (int i = 0; i < opt->n_units; i++) {
        opt_unit *ou = &opt->units[i];
        for (int pi = 0; ou->group && pi < volt_unit_param_count(ou->u); pi++)
            ou->group[pi] = (uint8_t)group_now(opt, volt_unit_param(ou->u, pi)->name);
    }
    for (int g = 0; g < opt->n_groups; g++) opt->group_params[g] = cnt[g];
    return VOLT_OK;
}

volt_status volt__optimizer_add_group_at(volt_optimizer *opt, const volt_optim_group *gr, int64_t step0, float lr_now) {
    if (!opt || !gr) return VOLT_ERR_INVALID_ARG;
    opt->errmsg[0] = '\0';
    if (opt->n_groups >= OPT_GROUPS)
        return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer add_param_group: it has %d groups besides the default one, at most %d",
                        opt->n_groups - 1, VOLT_OPTIM_MAX_GROUPS);
    if (!gr->params || !gr->params[0]) return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer add_param_group: no params pattern");
    if (!rate_ok(gr->lr) || !rate_ok(gr->weight_decay))
        return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer add_param_group '%s': invalid lr %g or weight_decay %g (>= 0, or NAN "
                        "for the config's)", gr->params, gr->lr, gr->weight_decay);
    if (!(isfinite(lr_now) || isnan(lr_now)) || lr_now < 0.f)
        return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer add_param_group '%s': invalid current lr %g", gr->params, lr_now);
    char why[PAT_MAX + 160];
    if (volt_patterns_check(gr->params, opt->ps, why, sizeof why) < 0)
        return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer add_param_group: %s", why);
    const int g = opt->n_groups;
    if (!(opt->pattern[g] = strdup(gr->params))) return opt_fail(opt, VOLT_ERR_NOMEM, "optimizer add_param_group: out of memory");
    opt->group_base_lr[g] = isnan(gr->lr) ? opt->cfg.lr : gr->lr;
    opt->group_lr[g] = isnan(lr_now) ? opt->group_base_lr[g] : lr_now;
    opt->group_wd[g] = isnan(gr->weight_decay) ? opt->cfg.weight_decay : gr->weight_decay;
    opt->group_step0[g] = step0;
    opt->n_groups++;
    volt_status st = map_groups(opt);
    if (st < 0) {
        opt->n_groups--;
        free(opt->pattern[g]);
        opt->pattern[g] = NULL;
        return opt_fail(opt, st, "optimizer add_param_group: out of memory");
    }
    volt__params_layout_changed();   /* a captured step's updates split by the old groups */
    return VOLT_OK;
}

volt_status volt_optimizer_add_param_group(volt_optimizer *opt, const volt_optim_group *gr) {
    return volt__optimizer_add_group_at(opt, gr, opt ? opt->steps : 0, NAN);
}

void volt__optimizer_truncate_groups(volt_optimizer *opt, int n) {
    if (!opt || n < opt->n_cfg_groups || n >= opt->n_groups) return;
    for (int g = n; g < opt->n_groups; g++) {
        free(opt->pattern[g]);
        opt->pattern[g] = NULL;
        opt->group_step0[g] = 0;
    }
    opt->n_groups = n;
    (void)map_groups(opt);   /* the maps exist: nothing to allocate */
    volt__params_layout_changed();
}

volt_status volt_optimizer_set_group_lr(volt_optimizer *opt, int g, float lr) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    if (g < 0 || g >= opt->n_groups) return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer set_group_lr: group %d of %d", g, opt->n_groups);
    if (!isfinite(lr) || lr < 0.f) return opt_fail(opt, VOLT_ERR_INVALID_ARG, "optimizer set_group_lr: invalid lr %g (must be >= 0)", lr);
    volt__optimizer_set_group_lr(opt, g, lr);
    return VOLT_OK;
}

int volt_optimizer_config_group_count(const volt_optimizer *opt) { return opt ? opt->n_cfg_groups : 0; }
const char *volt_optimizer_group_params(const volt_optimizer *opt, int g) {
    return opt && g > 0 && g < opt->n_groups ? opt->pattern[g] : NULL;
}
int64_t volt_optimizer_group_first_step(const volt_optimizer *opt, int g) {
    return opt && g >= 0 && g < opt->n_groups ? opt->group_step0[g] : 0;
}

int64_t volt_optimizer_step_count(const volt_optimizer *opt) { return opt ? opt->steps : 0; }
void volt_optimizer_set_step_count(volt_optimizer *opt, int64_t steps) {
    if (opt) opt->steps = steps > 0 ? steps : 0;
}

/* ---- state access ---------------------------------------------------------------------- */
int volt_optimizer_state_count(const volt_optimizer *opt) { return opt ? opt->n_states : 0; }

const char *volt_optimizer_state_name(const volt_optimizer *opt, int k) {
    if (!opt || k < 0 || k >= opt->n_states) return NULL;
    if (opt->avg_mode && k == opt->avg_k) return VOLT_OPTIM_AVERAGE_STATE;
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

