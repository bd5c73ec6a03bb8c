/* Learning-rate schedulers: the Hugging Face / torch lambdas, in double, times base lr.
 *
 * As with torch's LambdaLR, scheduler step k (0 at creation) gives lr_at(k): the trainer
 * steps the scheduler after each optimizer step, so optimizer step k runs with lr_at(k). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "volt/optim.h"
#include "core/internal.h"
#include "core/optim_internal.h"

#define SCHED_PI 3.14159265358979323846   /* Python math.pi */

struct volt_scheduler {
    volt_scheduler_config cfg;
    volt_optimizer *opt;            /* borrowed; the groups' base lrs are its own */
    int64_t last_step;
    volt_plateau_state plateau;     /* PLATEAU */
    char *monitor;                  /* cfg.monitor's own copy */
};

void volt_scheduler_config_init(volt_scheduler_config *cfg) {
    if (!cfg) return;
    *cfg = (volt_scheduler_config){
        .version = VOLT_SCHEDULER_CONFIG_VERSION,
        .kind = VOLT_SCHED_CONSTANT,
        .warmup_steps = 0,
        .total_steps = 0,
        .step_size = 0,
        .gamma = 0.1f,
        .min_lr_ratio = 0.f,
        .interval = VOLT_SCHED_EVERY_STEP,
        .strict = true,
        .factor = 0.1,
        .patience = 10,
        .threshold = 1e-4,
        .eps = 1e-8,
    };
}

static const char *const kind_names[VOLT_SCHED_KIND_COUNT] = {
    [VOLT_SCHED_CONSTANT] = "constant", [VOLT_SCHED_LINEAR_WARMUP] = "linear_warmup",
    [VOLT_SCHED_LINEAR] = "linear", [VOLT_SCHED_COSINE] = "cosine", [VOLT_SCHED_STEP] = "step",
    [VOLT_SCHED_PLATEAU] = "plateau",
};

volt_status volt__scheduler_config_check(const volt_scheduler_config *c, char *msg, size_t n) {
#define BAD(...) return volt__errf(msg, n, VOLT_ERR_INVALID_ARG, __VA_ARGS__)
    if (!c) BAD("scheduler: NULL config");
    if (!VOLT_VERSION_OK(c->version, VOLT_SCHEDULER_CONFIG_VERSION))
        return volt__errf(msg, n, VOLT_ERR_VERSION, "volt_scheduler_config: version %u, this library knows 1..%u "
                          "(call volt_scheduler_config_init)", c->version, VOLT_SCHEDULER_CONFIG_VERSION);
    if ((unsigned)c->kind >= VOLT_SCHED_KIND_COUNT || !kind_names[c->kind]) BAD("scheduler: unknown kind %d", (int)c->kind);
    const char *k = kind_names[c->kind];
    if (c->interval != VOLT_SCHED_EVERY_STEP && c->interval != VOLT_SCHED_EVERY_EPOCH)
        BAD("scheduler '%s': interval %d is neither VOLT_SCHED_EVERY_STEP nor VOLT_SCHED_EVERY_EPOCH", k, (int)c->interval);
    switch (c->kind) {
    case VOLT_SCHED_CONSTANT:
        break;
    case VOLT_SCHED_LINEAR_WARMUP:
        if (c->warmup_steps < 0) BAD("scheduler '%s': warmup_steps must be >= 0, got %lld", k, (long long)c->warmup_steps);
        break;
    case VOLT_SCHED_COSINE:
        if (!(c->min_lr_ratio >= 0.f && c->min_lr_ratio <= 1.f))
            BAD("scheduler '%s': min_lr_ratio must be in [0, 1], got %g", k, (double)c->min_lr_ratio);
        /* fall through */
    case VOLT_SCHED_LINEAR:
        if (c->warmup_steps < 0) BAD("scheduler '%s': warmup_steps must be >= 0, got %lld", k, (long long)c->warmup_steps);
        if (c->total_steps <= c->warmup_steps)
            BAD("scheduler '%s': total_steps (%lld) must be > warmup_steps (%lld)", k,
                (long long)c->total_steps, (long long)c->warmup_steps);
        break;
    case VOLT_SCHED_STEP:
        if (c->step_size <= 0) BAD("scheduler '%s': step_size must be > 0, got %lld", k, (long long)c->step_size);
        if (!isfinite(c->gamma) || c->gamma < 0.f) BAD("scheduler '%s': gamma must be finite and >= 0, got %g", k, (double)c->gamma);
        break;
    case VOLT_SCHED_PLATEAU:   /* its fields exist from config version 2 on */
        if (c->version < 2u) BAD("scheduler '%s': a config of version %u has no plateau settings (call volt_scheduler_config_init)",
                                 k, c->version);
        if (!(c->factor >= 0.0 && c->factor < 1.0)) BAD("scheduler '%s': factor must be in [0, 1), got %g", k, (double)c->factor);
        if (c->patience < 0) BAD("scheduler '%s': patience must be >= 0, got %lld", k, (long long)c->patience);
        if (c->cooldown < 0) BAD("scheduler '%s': cooldown must be >= 0, got %lld", k, (long long)c->cooldown);
        if (!(c->threshold >= 0.0) || !isfinite(c->threshold))
            BAD("scheduler '%s': threshold must be finite and >= 0, got %g", k, (double)c->threshold);
        if (!(c->min_lr >= 0.0) || !isfinite(c->min_lr)) BAD("scheduler '%s': min_lr must be finite and >= 0, got %g", k, (double)c->min_lr);
        if (!(c->eps >= 0.0) || !isfinite(c->eps)) BAD("scheduler '%s': eps must be finite and >= 0, got %g", k, (double)c->eps);
        if (c->monitor && !*c->monitor) BAD("scheduler '%s': monitor is empty (NULL: none)", k);
        break;
    default:
        BAD("scheduler: unknown kind %d", (int)c->kind);
    }
#undef BAD
    return VOLT_OK;
}

volt_status volt_scheduler_config_validate(const volt_scheduler_config *c) {
    char msg[256];
    return volt__scheduler_config_check(c, msg, sizeof msg);
}

static double max1(int64_t n) { return n > 1 ? (double)n : 1.0; }

/* The multiplier of base lr at `step` (HF's lr_lambda / torch StepLR's closed form). */
static double factor_at(const volt_scheduler_config *c, int64_t step) {
    const int64_t w = c->warmup_steps, T = c->total_steps;
    switch (c->kind) {
    case VOLT_SCHED_CONSTANT:
        return 1.0;
    case VOLT_SCHED_LINEAR_WARMUP:         /* get_constant_schedule_with_warmup */
        return step < w ? (double)step / max1(w) : 1.0;
    case VOLT_SCHED_LINEAR: {              /* get_linear_schedule_with_warmup */
        if (step < w) return (double)step / max1(w);
        double f = (double)(T - step) / max1(T - w);
        return f > 0.0 ? f : 0.0;
    }
    case VOLT_SCHED_COSINE: {              /* get_cosine_[with_min_lr_]schedule_with_warmup */
        if (step < w) return (double)step / max1(w);
        const double progress = (double)(step - w) / max1(T - w);
        double f = 0.5 * (1.0 + cos(SCHED_PI * 0.5 * 2.0 * progress));   /* num_cycles = 0.5 */
        const double r = c->min_lr_ratio;
        if (r != 0.0) f = f * (1.0 - r) + r;
        return f > 0.0 ? f : 0.0;
    }
    case VOLT_SCHED_STEP:                  /* StepLR: gamma ** (last_epoch // step_size) */
        return pow((double)c->gamma, (double)((step >= 0 ? step : 0) / c->step_size));
    default:
        return 1.0;
    }
}

float volt_scheduler_lr_at(const volt_scheduler_config *cfg, float base_lr, int64_t step) {
    if (!cfg || volt_scheduler_config_validate(cfg) < 0) return base_lr;
    if (step < 0) step = 0;   /* before the first step: the lr at creation (a warmup would go negative) */
    return (float)((double)base_lr * factor_at(cfg, step));
}

/* Every parameter group's lr at the counter: lr_at(its own base lr), group 0's being the
 * config's (LambdaLR: the factor applies to every group's initial lr; exact also when the
 * config's base lr is 0, where volt_optimizer_set_lr has no ratio to scale by). The groups
 * of the optimizer's config only: one added later (volt_optimizer_add_param_group) keeps the
 * lr its owner sets, as torch's schedulers zip their base lrs with the groups they knew. */
/* PLATEAU: torch's reduction of one lr (max(lr * factor, min_lr), kept only when it lowers lr by
 * more than eps), in double as torch's param_groups hold it. */
static double plateau_cut(const volt_scheduler_config *c, double lr) {
    const double next = fmax(lr * c->factor, c->min_lr);
    return lr - next > c->eps ? next : lr;
}

/* A config group's lr after `reductions` reductions from its base lr. */
static float plateau_lr(const volt_scheduler_config *c, float base, int64_t reductions) {
    double lr = base;
    for (int64_t i = 0; i < reductions; i++) {
        const double next = plateau_cut(c, lr);
        if (next == lr) break;   /* at the floor: every later reduction leaves it too */
        lr = next;
    }
    return (float)lr;
}

/* Sets the config groups' lrs. An lr past float's range (StepLR with gamma > 1: base x
 * gamma^(step // step_size) overflows to inf; 0 x inf is NaN) is set all the same, as torch
 * would, with a note naming this scheduler, its step and the numbers: the optimizer's next
 * step refuses it with VOLT_ERR_NUMERIC and that note. VOLT_ERR_NUMERIC when there was one. */
static volt_status apply(volt_scheduler *s) {
    volt_status st = VOLT_OK;
    for (int g = 0; g < volt_optimizer_config_group_count(s->opt); g++) {
        const float base = volt_optimizer_group_base_lr(s->opt, g);
        if (s->cfg.kind == VOLT_SCHED_PLATEAU) {   /* only lowers an lr: never past the base */
            volt__optimizer_set_group_lr(s->opt, g, plateau_lr(&s->cfg, base, s->plateau.reductions));
            continue;
        }
        const float lr = volt_scheduler_lr_at(&s->cfg, base, s->last_step);
        if (isfinite(lr) && lr >= 0.f) {
            volt__optimizer_set_group_lr(s->opt, g, lr);
        } else if (s->cfg.kind == VOLT_SCHED_STEP) {
            volt__optimizer_set_group_lr_noted(s->opt, g, lr, "set by scheduler '%s' (torch StepLR) at its step %lld: base lr "
                                               "%g x gamma %g ^ %lld", kind_names[s->cfg.kind], (long long)s->last_step,
                                               (double)base, (double)s->cfg.gamma, (long long)(s->last_step / s->cfg.step_size));
        } else {
            volt__optimizer_set_group_lr_noted(s->opt, g, lr, "set by scheduler '%s' at its step %lld: base lr %g x factor %g",
                                               kind_names[s->cfg.kind], (long long)s->last_step, (double)base,
                                               factor_at(&s->cfg, s->last_step));
        }
        if (!(isfinite(lr) && lr >= 0.f)) st = VOLT_ERR_NUMERIC;
    }
    return st;
}

volt_status volt_scheduler_create(const volt_scheduler_config *cfg, volt_optimizer *opt,
                                  volt_scheduler **out) {
    if (!out) return VOLT_ERR_INVALID_ARG;
    *out = NULL;
    if (!cfg || !opt) return VOLT_ERR_INVALID_ARG;
    VOLT_TRY(volt_scheduler_config_validate(cfg));
    const float base = volt_optimizer_base_lr(opt);
    if (!isfinite(base) || base < 0.f) return VOLT_ERR_INVALID_ARG;
    volt_scheduler *s = calloc(1, sizeof *s);
    if (!s) return VOLT_ERR_NOMEM;
    if (cfg->version < VOLT_SCHEDULER_CONFIG_VERSION) {   /* an older caller's struct ends before the new fields */
        volt_scheduler_config_init(&s->cfg);
        memcpy(&s->cfg, cfg, offsetof(volt_scheduler_config, monitor));
    } else {
        s->cfg = *cfg;
    }
    if (s->cfg.monitor && !(s->cfg.monitor = s->monitor = strdup(s->cfg.monitor))) {   /* the caller's string may not last */
        free(s);
        return VOLT_ERR_NOMEM;
    }
    s->opt = opt;
    s->last_step = 0;
    s->plateau = (volt_plateau_state){ .best = s->cfg.kind == VOLT_SCHED_PLATEAU && s->cfg.mode_max ? -INFINITY : INFINITY };
    (void)apply(s);   /* lr_at(0) is the base lr: finite */
    *out = s;
    return VOLT_OK;
}

void volt_scheduler_destroy(volt_scheduler *s) {
    if (!s) return;
    free(s->monitor);
    free(s);
}

const volt_scheduler_config *volt_scheduler_get_config(const volt_scheduler *s) {
    return s ? &s->cfg : NULL;
}

void volt_scheduler_step(volt_scheduler *s) {
    if (!s || s->cfg.kind == VOLT_SCHED_PLATEAU) return;
    if (s->last_step < INT64_MAX) s->last_step++;   /* saturates (set_last_step may put it at the top) */
    (void)apply(s);   /* an lr past float's range: the optimizer's next step refuses it, naming this */
}

/* torch's ReduceLROnPlateau.is_better (NaN is never better) */
static bool plateau_better(const volt_scheduler_config *c, double a, double best) {
    const double th = c->threshold;
    if (!c->mode_max) return c->threshold_abs ? a < best - th : a < best * (1.0 - th);
    return c->threshold_abs ? a > best + th : a > best * (th + 1.0);
}

volt_status volt_scheduler_step_metric(volt_scheduler *s, double metric) {
    if (!s || s->cfg.kind != VOLT_SCHED_PLATEAU) return VOLT_ERR_INVALID_ARG;
    volt_plateau_state *p = &s->plateau;
    if (s->last_step < INT64_MAX) s->last_step++;
    if (plateau_better(&s->cfg, metric, p->best)) {
        p->best = metric;
        p->num_bad = 0;
    } else {
        p->num_bad++;
    }
    if (p->cooldown_left > 0) {   /* bad steps in a cooldown are not counted */
        p->cooldown_left--;
        p->num_bad = 0;
    }
    if (p->num_bad > s->cfg.patience) {   /* torch's _reduce_lr over every param group */
        bool lowered = false;
        const int nc = volt_optimizer_config_group_count(s->opt), ng = volt_optimizer_group_count(s->opt);
        for (int g = 0; g < nc && !lowered; g++) {
            const float base = volt_optimizer_group_base_lr(s->opt, g);
            lowered = plateau_lr(&s->cfg, base, p->reductions + 1) != plateau_lr(&s->cfg, base, p->reductions);
        }
        if (lowered) p->reductions++;   /* counted only when an lr moved: at every floor the count stops */
        for (int g = nc; g < ng; g++) {   /* groups added since: from their current lr */
            const double lr = volt_optimizer_group_lr(s->opt, g), next = plateau_cut(&s->cfg, lr);
            if (next != lr) volt__optimizer_set_group_lr(s->opt, g, (float)next);
        }
        p->cooldown_left = s->cfg.cooldown;
        p->num_bad = 0;
        (void)apply(s);
    }
    return VOLT_OK;
}

volt_status volt_scheduler_plateau_state(const volt_scheduler *s, volt_plateau_state *out) {
    if (!s || !out || s->cfg.kind != VOLT_SCHED_PLATEAU) return VOLT_ERR_INVALID_ARG;
    *out = s->plateau;
    return VOLT_OK;
}

volt_status volt_scheduler_set_plateau_state(volt_scheduler *s, const volt_plateau_state *st) {
    if (!s || !st || s->cfg.kind != VOLT_SCHED_PLATEAU || st->num_bad < 0 || st->num_bad > s->cfg.patience ||
        st->cooldown_left < 0 || st->cooldown_left > s->cfg.cooldown || st->reductions < 0 || st->reductions > 100000 ||
        isnan(st->best))
        return VOLT_ERR_INVALID_ARG;
    s->plateau = *st;
    (void)apply(s);
    return VOLT_OK;
}

int64_t volt_scheduler_last_step(const volt_scheduler *s) { return s ? s->last_step : 0; }

volt_status volt_scheduler_set_last_step(volt_scheduler *s, int64_t step) {
    if (!s || step < 0) return VOLT_ERR_INVALID_ARG;
    s->last_step = step;
    return apply(s);
}
