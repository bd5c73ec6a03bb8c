/* The five precision plugins (Lightning's names) and their lookup. What differs between
 * them is data (dtypes) plus, for 16-mixed, the grad scaler's steps (precision/scaler.c).
 *
 *   mode        GEMM operands  parameters  f32 masters  loss scaling
 *   32-true     f32            f32         -            -
 *   16-mixed    f16            f32         yes          dynamic (GradScaler)
 *   bf16-mixed  bf16           f32         yes          -
 *   bf16-true   bf16           bf16        -            -
 *   16-true     f16            f16         -            -                              */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "precision/precision.h"
#include "volt/ops.h"

/* ---- storage: the true modes keep parameters in 16 bits --------------------------------- */
static volt_status convert_params(volt_precision *p, volt_params *ps, char *err, size_t n) {
    volt_status st = volt_params_convert(ps, p->ops->info.param_dtype);
    if (st < 0) snprintf(err, n, "precision '%s': %s", p->ops->info.name, volt_params_errmsg(ps));
    return st;
}

/* ---- 16-mixed: the grad scaler ------------------------------------------------------------ */
/* loss * the device's scale (a 1-element tensor over the scaler state): the same product as
 * volt_scale with the host copy, but a captured step's replays read each step's scale */
static volt_tensor *scaler_scale_loss(volt_precision *p, volt_step *s, volt_tensor *loss) {
    volt_grad_scaler *g = &p->scaler;
    if (!loss || !loss->device || volt__scaler_attach(g, loss->device) < 0 || g->dev != loss->device)
        return volt_scale(s, loss, g->scale);
    return volt_mul(s, loss, volt_tensor_wrap(s, VOLT_F32, loss->shape, &g->state->scale));
}

static float *scaler_skip_flag(volt_precision *p) { return p->scaler.state ? &p->scaler.state->found_inf : NULL; }
static void scaler_update_on_device(volt_precision *p) { volt__scaler_update_on_device(&p->scaler); }
static void scaler_read_back(volt_precision *p, bool *skipped) { volt__scaler_read_back(&p->scaler, skipped); }

static void scaler_unscale(volt_precision *p, volt_params *ps, bool *found_inf) {
    volt__scaler_unscale(&p->scaler, ps, found_inf);
}

static void scaler_update(volt_precision *p, bool found_inf) { volt__scaler_update(&p->scaler, found_inf); }

static volt_status scaler_save(volt_precision *p, volt_meta_put_fn put, void *ctx) {
    char b[64];
    snprintf(b, sizeof b, "%.9g", (double)p->scaler.scale);
    VOLT_TRY(put(ctx, "volt.grad_scaler.scale", b));
    snprintf(b, sizeof b, "%lld", (long long)p->scaler.growth_tracker);
    VOLT_TRY(put(ctx, "volt.grad_scaler.growth_tracker", b));
    snprintf(b, sizeof b, "%lld", (long long)p->skipped_steps);
    return put(ctx, "volt.grad_scaler.skipped_steps", b);
}

static volt_status scaler_load(volt_precision *p, volt_meta_get_fn get, void *ctx, bool apply, char *err, size_t n) {
    const char *sc = get(ctx, "volt.grad_scaler.scale");
    const char *gt = get(ctx, "volt.grad_scaler.growth_tracker");
    const char *sk = get(ctx, "volt.grad_scaler.skipped_steps");
    if (!sc && !gt) return VOLT_OK;            /* saved under another precision: keep ours */
    char *end = NULL;
    double scale = sc ? strtod(sc, &end) : NAN;
    if (!sc || end == sc || *end || !isfinite(scale) || !(scale > 0)) {
        snprintf(err, n, "grad scaler: scale '%s' is not a positive number", sc ? sc : "(missing)");
        return VOLT_ERR_CORRUPT;
    }
    long long tracker = gt ? strtoll(gt, &end, 10) : -1;
    if (!gt || end == gt || *end || tracker < 0) {
        snprintf(err, n, "grad scaler: growth_tracker '%s' is not a count", gt ? gt : "(missing)");
        return VOLT_ERR_CORRUPT;
    }
    long long skipped = sk ? strtoll(sk, &end, 10) : 0;
    if (sk && (end == sk || *end || skipped < 0)) {
        snprintf(err, n, "grad scaler: skipped_steps '%s' is not a count", sk);
        return VOLT_ERR_CORRUPT;
    }
    if (apply) {
        volt__scaler_set(&p->scaler, (float)scale, tracker);
        p->skipped_steps = skipped;
    }
    return VOLT_OK;
}

/* ---- the tables ------------------------------------------------------------------------------ */
static const volt_precision_ops k_plugins[] = {
    { VOLT_PRECISION_OPS_VERSION, { "32-true", VOLT_F32, VOLT_F32, false, false },
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL },
    { VOLT_PRECISION_OPS_VERSION, { "16-mixed", VOLT_F16, VOLT_F32, true, true },
      NULL, scaler_scale_loss, scaler_unscale, scaler_update, scaler_save, scaler_load,
      scaler_skip_flag, scaler_update_on_device, scaler_read_back },
    { VOLT_PRECISION_OPS_VERSION, { "bf16-mixed", VOLT_BF16, VOLT_F32, true, false },
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL },
    { VOLT_PRECISION_OPS_VERSION, { "bf16-true", VOLT_BF16, VOLT_BF16, false, false },
      convert_params, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL },
    { VOLT_PRECISION_OPS_VERSION, { "16-true", VOLT_F16, VOLT_F16, false, false },
      convert_params, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct { const char *alias, *name; } k_aliases[] = {
    { "32", "32-true" }, { "16", "16-mixed" }, { "bf16", "bf16-mixed" },
};

static const volt_precision_ops *find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof k_aliases / sizeof k_aliases[0]; i++)
        if (!strcmp(name, k_aliases[i].alias)) name = k_aliases[i].name;
    for (size_t i = 0; i < sizeof k_plugins / sizeof k_plugins[0]; i++)
        if (!strcmp(name, k_plugins[i].info.name)) return &k_plugins[i];
    return NULL;
}

const char *volt_precision_names(void) {
    return "32-true, 16-mixed, bf16-mixed, bf16-true, 16-true (aliases 32, 16, bf16)";
}

volt_status volt_precision_lookup(const char *name, volt_precision_info *out) {
    const volt_precision_ops *o = find(name);
    if (!o) return VOLT_ERR_UNSUPPORTED;
    if (out) *out = o->info;
    return VOLT_OK;
}

static bool parse_dtype(const char *s, volt_dtype *dt) {
    if (!strcmp(s, "f32") || !strcmp(s, "32") || !strcmp(s, "float32")) *dt = VOLT_F32;
    else if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16")) *dt = VOLT_BF16;
    else if (!strcmp(s, "f16") || !strcmp(s, "16") || !strcmp(s, "float16")) *dt = VOLT_F16;
    else return false;
    return true;
}

volt_status volt__precision_create(const volt_precision_config *cfg, volt_precision **out, char *err, size_t n) {
    *out = NULL;
    const volt_precision_ops *o = find(cfg->name);
    if (!o) {
        snprintf(err, n, "precision '%s' is not available (valid: %s)", cfg->name ? cfg->name : "(null)",
                 volt_precision_names());
        return VOLT_ERR_UNSUPPORTED;
    }
    if (!VOLT_VERSION_OK(o->version, VOLT_PRECISION_OPS_VERSION)) {
        snprintf(err, n, "volt_precision_ops '%s': version %u, this library knows 1..%u", o->info.name, o->version,
                 VOLT_PRECISION_OPS_VERSION);
        return VOLT_ERR_VERSION;
    }
    if (o->info.grad_scaling) {
        if (!(cfg->init_scale > 0) || !isfinite(cfg->init_scale)) {
            snprintf(err, n, "precision '%s': grad scaler init_scale must be finite and > 0, got %g", o->info.name, (double)cfg->init_scale);
            return VOLT_ERR_INVALID_ARG;
        }
        if (!(cfg->growth_factor > 1) || !isfinite(cfg->growth_factor)) {
            snprintf(err, n, "precision '%s': grad scaler growth_factor must be > 1, got %g", o->info.name, (double)cfg->growth_factor);
            return VOLT_ERR_INVALID_ARG;
        }
        if (!(cfg->backoff_factor > 0 && cfg->backoff_factor < 1)) {
            snprintf(err, n, "precision '%s': grad scaler backoff_factor must be in (0, 1), got %g", o->info.name, (double)cfg->backoff_factor);
            return VOLT_ERR_INVALID_ARG;
        }
        if (cfg->growth_interval < 1) {
            snprintf(err, n, "precision '%s': grad scaler growth_interval must be >= 1, got %lld", o->info.name, (long long)cfg->growth_interval);
            return VOLT_ERR_INVALID_ARG;
        }
    }
    /* "auto": optimizer states in the parameters' storage dtype, except f16: its range
     * underflows Adam's second moment (exp_avg_sq of grads ~1e-4 is below f16's smallest
     * subnormal) and training diverges, as with model.half() in PyTorch. bf16 has f32's range. */
    volt_dtype odt = o->info.param_dtype == VOLT_F16 ? VOLT_F32 : o->info.param_dtype;
    bool explicit_dt = false;
    if (cfg->optimizer_dtype && strcmp(cfg->optimizer_dtype, "auto")) {
        if (!parse_dtype(cfg->optimizer_dtype, &odt)) {
            snprintf(err, n, "optimizer_dtype '%s' is not one of auto, f32, bf16, f16", cfg->optimizer_dtype);
            return VOLT_ERR_INVALID_ARG;
        }
        explicit_dt = true;
    }
    volt_precision *p = calloc(1, sizeof *p);
    if (!p) return VOLT_ERR_NOMEM;
    p->ops = o;
    p->scaler = (volt_grad_scaler){ .scale = o->info.grad_scaling ? cfg->init_scale : 1.f,
                                    .growth_factor = cfg->growth_factor, .backoff_factor = cfg->backoff_factor,
                                    .growth_interval = cfg->growth_interval };
    p->optim_dtype = odt;
    p->optim_dtype_explicit = explicit_dt;
    *out = p;
    return VOLT_OK;
}

void volt__precision_destroy(volt_precision *p) {
    if (!p) return;
    volt__scaler_release(&p->scaler);
    free(p);
}
