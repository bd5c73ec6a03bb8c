/* Logged metrics: step values, epoch means (batch-size weighted), and the "fresh" set
 * loggers read after each step / epoch end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/trainer_internal.h"
#include "volt/ops.h"

static volt_metric *find_metric(volt_trainer *t, const char *name) {
    for (int i = 0; i < t->n_metrics; i++)
        if (!strcmp(t->metrics[i].name, name)) return &t->metrics[i];
    return NULL;
}

void volt__metric_set(volt_trainer *t, const char *name, double value, unsigned flags) {
    volt_metric *m = find_metric(t, name);
    if (!m) {
        if (t->n_metrics == VOLT_MAX_METRICS) return;
        m = &t->metrics[t->n_metrics++];
        snprintf(m->name, sizeof m->name, "%s", name);
    }
    m->value = value;
    m->flags = flags;
    m->fresh = true;
}

volt_status volt__trainer_log(void *ctx, const char *name, double value, unsigned flags) {
    volt_trainer *t = ctx;
    if (!name || !*name || strlen(name) > 80) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_log: bad metric name");
    if (t->sanity) return VOLT_OK;   /* sanity-check values are not metrics (Lightning) */
    if ((flags & VOLT_LOG_SYNC) && (flags & VOLT_LOG_STEP) && t->world > 1) {
        volt_status st = t->strategy->ops->all_reduce_mean(t->strategy, &value, 1);
        if (st < 0) return volt__terr(t, st, "volt_log('%s'): sync across ranks failed: %s", name, t->strategy->ops->errmsg(t->strategy));
    }
    if (!(flags & (VOLT_LOG_STEP | VOLT_LOG_EPOCH)))
        flags |= t->stage == VOLT_STAGE_FIT ? VOLT_LOG_STEP : VOLT_LOG_EPOCH;
    bool both = (flags & VOLT_LOG_STEP) && (flags & VOLT_LOG_EPOCH);
    char nm[96];
    if (flags & VOLT_LOG_STEP) {
        snprintf(nm, sizeof nm, both ? "%s_step" : "%s", name);
        volt__metric_set(t, nm, value, flags & ~(unsigned)VOLT_LOG_EPOCH);
    }
    if (flags & VOLT_LOG_EPOCH) {
        snprintf(nm, sizeof nm, both ? "%s_epoch" : "%s", name);
        volt_accum *a = NULL;
        for (int i = 0; i < t->n_accums; i++)
            if (!strcmp(t->accums[i].name, nm) && t->accums[i].stage == t->stage) { a = &t->accums[i]; break; }
        if (!a) {
            if (t->n_accums == VOLT_MAX_METRICS) return volt__terr(t, VOLT_ERR_NOMEM, "volt_log: too many metrics");
            a = &t->accums[t->n_accums++];
            *a = (volt_accum){ .stage = t->stage };
            snprintf(a->name, sizeof a->name, "%s", nm);
        }
        double w = t->cur_batch_size > 0 ? (double)t->cur_batch_size : 1.0;
        a->sum += value * w;
        a->weight += w;
        a->flags = flags & ~(unsigned)VOLT_LOG_STEP;
    }
    return VOLT_OK;
}

void volt__metrics_clear_fresh(volt_trainer *t) {
    for (int i = 0; i < t->n_metrics; i++) t->metrics[i].fresh = false;
}

static int accum_cmp(const void *a, const void *b) {
    return strcmp(((const volt_accum *)a)->name, ((const volt_accum *)b)->name);
}

/* Epoch means. Under a distributed strategy every epoch metric is reduced across ranks
 * (weighted by each rank's samples), not only VOLT_LOG_SYNC ones: ModelCheckpoint and
 * EarlyStopping must see the same value on every rank, or their file names and stop
 * decisions diverge. One collective per epoch end, over the stage's metrics sorted by name. */
void volt__metrics_finish_epoch(volt_trainer *t, volt_stage stage, bool in_fit_val) {
    (void)in_fit_val;
    int keep = 0, n = 0;
    volt_accum mine[VOLT_MAX_METRICS];
    for (int i = 0; i < t->n_accums; i++) {
        if (t->accums[i].stage == stage) mine[n++] = t->accums[i];
        else t->accums[keep++] = t->accums[i];
    }
    t->n_accums = keep;
    if (n && t->world > 1) {
        qsort(mine, (size_t)n, sizeof mine[0], accum_cmp);
        double v[2 * VOLT_MAX_METRICS];
        for (int i = 0; i < n; i++) { v[2 * i] = mine[i].sum; v[2 * i + 1] = mine[i].weight; }
        if (t->strategy->ops->all_reduce_mean(t->strategy, v, 2 * n) == VOLT_OK)
            for (int i = 0; i < n; i++) { mine[i].sum = v[2 * i]; mine[i].weight = v[2 * i + 1]; }
    }
    for (int i = 0; i < n; i++)
        if (mine[i].weight > 0) volt__metric_set(t, mine[i].name, mine[i].sum / mine[i].weight, mine[i].flags);
}

void volt__metrics_drop_accums(volt_trainer *t, volt_stage stage) {
    int keep = 0;
    for (int i = 0; i < t->n_accums; i++)
        if (t->accums[i].stage != stage) t->accums[keep++] = t->accums[i];
    t->n_accums = keep;
}

/* ---- public ---------------------------------------------------------------------------- */
volt_status volt_log(volt_step *s, const char *name, const volt_tensor *value, unsigned flags) {
    if (!value) return s->status < 0 ? s->status : volt_step_fail(s, VOLT_ERR_INVALID_ARG, "volt_log('%s'): value is NULL", name);
    if (volt_tensor_numel(value) != 1) {
        char b[64];
        return volt_step_fail(s, VOLT_ERR_SHAPE, "volt_log('%s'): value must be a scalar, got %s", name,
                              volt_shape_str(value->shape, b, sizeof b));
    }
    return volt_log_value(s, name, volt_tensor_item(value), flags);
}

volt_status volt_log_value(volt_step *s, const char *name, double value, unsigned flags) {
    if (!s->log_fn) return VOLT_OK;
    return s->log_fn(s->log_ctx, name, value, flags);
}

volt_status volt_classification_step(volt_step *s, volt_tensor *logits, volt_tensor *y, const char *stage) {
    bool train = !strcmp(stage, "train");
    volt_tensor *loss = volt_cross_entropy(s, logits, y);
    volt_tensor *acc = volt_accuracy(s, logits, y);
    if (!loss || !acc) return volt_step_status(s);
    unsigned eval = VOLT_LOG_EPOCH | VOLT_LOG_PROG_BAR;
    char name[64];
    snprintf(name, sizeof name, "%s_loss", stage);
    VOLT_TRY(volt_log(s, name, loss, train ? VOLT_LOG_STEP | VOLT_LOG_PROG_BAR : eval));
    snprintf(name, sizeof name, "%s_acc", stage);
    VOLT_TRY(volt_log(s, name, acc, train ? VOLT_LOG_EPOCH : eval));
    return train ? volt_step_set_loss(s, loss) : VOLT_OK;
}

volt_status volt_step_set_loss(volt_step *s, volt_tensor *loss) {
    if (!loss) return s->status < 0 ? s->status : volt_step_fail(s, VOLT_ERR_INVALID_ARG, "set_loss: loss is NULL");
    s->loss = loss;
    return VOLT_OK;
}

bool volt_trainer_metric(const volt_trainer *t, const char *name, double *value) {
    for (int i = 0; i < t->n_metrics; i++)
        if (!strcmp(t->metrics[i].name, name)) {
            if (value) *value = t->metrics[i].value;
            return true;
        }
    return false;
}

int volt_trainer_metric_count(const volt_trainer *t) { return t->n_metrics; }

const char *volt_trainer_metric_name(const volt_trainer *t, int i, double *value, unsigned *flags) {
    if (i < 0 || i >= t->n_metrics) return NULL;
    if (value) *value = t->metrics[i].value;
    if (flags) *flags = t->metrics[i].flags;
    return t->metrics[i].name;
}

void volt_trainer_visit_fresh_metrics(const volt_trainer *t, volt_metric_visit_fn fn, void *ctx) {
    for (int i = 0; i < t->n_metrics; i++)
        if (t->metrics[i].fresh) fn(ctx, t->metrics[i].name, t->metrics[i].value, t->metrics[i].flags);
}

volt_status volt_trainer_log_metric(volt_trainer *t, const char *name, double value, unsigned flags) {
    if (!name || !*name) return volt__terr(t, VOLT_ERR_INVALID_ARG, "log_metric: empty name");
    volt__metric_set(t, name, value, flags ? flags : VOLT_LOG_STEP);
    return VOLT_OK;
}
