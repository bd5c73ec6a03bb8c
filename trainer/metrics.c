/* Logged metrics: step values, epoch means (batch-size weighted), and the "fresh" set
 * loggers read after each step / epoch end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/fsutil.h"
#include "trainer/trainer_internal.h"
#include "volt/ops.h"

static volt_metric *find_metric(volt_trainer *t, const char *name) {
    for (int i = 0; i < t->n_metrics; i++)
        if (!strcmp(t->metrics[i].name, name)) return &t->metrics[i];
    return NULL;
}

volt_status volt__metric_set(volt_trainer *t, const char *name, double value, unsigned flags) {
    volt_metric *m = find_metric(t, name);
    if (!m) {
        if (t->n_metrics == VOLT_MAX_METRICS)
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "metric '%s': more than %d metric names in one call (the table is "
                              "full): log fewer names", name, VOLT_MAX_METRICS);
        m = &t->metrics[t->n_metrics++];
        size_t n = strnlen(name, sizeof m->name - 1);   /* names are checked <= 80 bytes by volt_log */
        memcpy(m->name, name, n);
        m->name[n] = 0;
    }
    m->value = value;
    m->flags = flags;
    m->fresh = true;
    return VOLT_OK;
}

/* nm's accumulator in this stage (made at its first value), or NULL and *why: logged before as
 * counts and now as values (or the other way), or with another reduce_fx, or no room. */
static volt_accum *accum_for(volt_trainer *t, const char *nm, bool exact, unsigned flags, const char **why) {
    for (int i = 0; i < t->n_accums; i++)
        if (!strcmp(t->accums[i].name, nm) && t->accums[i].stage == t->stage) {
            volt_accum *a = &t->accums[i];
            *why = a->exact != exact ? "logged both as counts (volt_log_ratio) and as values in this epoch"
                   : (a->flags & VOLT__LOG_REDUCE_MASK) != (flags & VOLT__LOG_REDUCE_MASK)
                       ? "logged with another reduce (VOLT_LOG_REDUCE_*) earlier in this epoch" : NULL;
            return *why ? NULL : a;
        }
    *why = "too many epoch metrics in this stage";
    if (t->n_accums == VOLT_MAX_METRICS) return NULL;
    *why = NULL;
    volt_accum *a = &t->accums[t->n_accums++];
    *a = (volt_accum){ .stage = t->stage, .exact = exact };
    snprintf(a->name, sizeof a->name, "%s", nm);
    return a;
}

/* A step value logged with VOLT_LOG_SYNC is all-reduced where every rank makes the same
 * exchange: in fit's training loop, and in an evaluation loop for the batches every rank runs
 * (the first eval_span: per-rank datasets may give the ranks other counts). Past those a rank
 * keeps its own value (an exchange made by some ranks only would wait for the comm's timeout). */
static bool step_sync(const volt_trainer *t, unsigned flags) {
    return (flags & VOLT_LOG_SYNC) && (flags & VOLT_LOG_STEP) && t->world > 1 &&
           (t->num_eval_batches < 0 || t->eval_idx < t->eval_span);
}

/* "/dataloader_idx_<k>" while loader k of several runs an evaluation loop's step (Lightning's
 * add_dataloader_idx), else "": each loader's values are metrics of their own. */
static const char *dl_suffix(const volt_trainer *t, char *buf, size_t n) {
    buf[0] = 0;
    if (t->n_eval_dl > 1 && t->eval_dl >= 0 && t->num_eval_batches >= 0) snprintf(buf, n, "/dataloader_idx_%d", t->eval_dl);
    return buf;
}

int volt_step_dataloader_idx(const volt_step *s) {
    if (!s || s->log_fn != volt__trainer_log) return 0;
    const volt_trainer *t = s->log_ctx;
    return t->n_eval_dl > 0 && t->eval_dl >= 0 ? t->eval_dl : 0;
}

/* Why a metric name cannot be one (NULL: it can): it names a CSV column, a TensorBoard tag and a
 * checkpoint's metadata key. */
static const char *name_problem(const char *name) {
    if (!name || !*name) return "empty";
    if (strlen(name) > 80) return "longer than 80 bytes";
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return "a control character (a newline?) in it";
    if (!volt__utf8_ok(name)) return "not UTF-8 (a TensorBoard tag must be)";
    return NULL;
}

/* Why a log call's reduce flags cannot be (NULL: they can), at the call (queued) or when logged. */
static const char *reduce_problem(unsigned flags, bool counts) {
    if (volt__log_reduce(flags) < 0) return "more than one of VOLT_LOG_REDUCE_SUM, _MAX and _MIN (Lightning's reduce_fx is one function)";
    if (counts && (flags & VOLT__LOG_REDUCE_MASK))
        return "VOLT_LOG_REDUCE_* is for values; counts add up exactly (their epoch value is the total ratio)";
    return NULL;
}

volt_status volt__trainer_log(void *ctx, const char *name, double value, unsigned flags) {
    volt_trainer *t = ctx;
    const char *bad = name_problem(name);
    if (bad) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_log: bad metric name '%s': %s", name ? name : "(null)", bad);
    if ((bad = reduce_problem(flags, false)) != NULL) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_log('%s'): %s", name, bad);
    const int reduce = volt__log_reduce(flags);
    if (t->sanity) return VOLT_OK;   /* sanity-check values are not metrics (Lightning resets them after the
                                        check; its hooks during it see them, volt's do not) */
    const double local = value;   /* the epoch folds this rank's values; the ranks' folds meet at its end */
    if (step_sync(t, flags)) {   /* the ranks' values by the reduce: mean, sum, max or min */
        volt_status st = reduce == VOLT_REDUCE_MEAN ? volt__strategy_all_reduce_mean(t->strategy, &value, 1, "step metric sync")
                                                    : volt_trainer_all_reduce(t, &value, 1, (volt_reduce_op)reduce);
        if (st < 0) return volt__terr(t, st, "volt_log('%s'): sync across ranks failed: %s", name, volt__strategy_errmsg(t->strategy));
    }
    if (!(flags & (VOLT_LOG_STEP | VOLT_LOG_EPOCH)))
        flags |= t->stage == VOLT_STAGE_FIT ? VOLT_LOG_STEP : VOLT_LOG_EPOCH;
    bool both = (flags & VOLT_LOG_STEP) && (flags & VOLT_LOG_EPOCH);
    char nm[128], sfx[32];
    dl_suffix(t, sfx, sizeof sfx);
    if (flags & VOLT_LOG_STEP) {
        snprintf(nm, sizeof nm, "%s%s%s", name, both ? "_step" : "", sfx);
        VOLT_TRY(volt__metric_set(t, nm, value, flags & ~(unsigned)VOLT_LOG_EPOCH));
    }
    if (flags & VOLT_LOG_EPOCH) {
        snprintf(nm, sizeof nm, "%s%s%s", name, both ? "_epoch" : "", sfx);
        const char *why;
        volt_accum *a = accum_for(t, nm, false, flags, &why);
        if (!a) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_log('%s'): %s", name, why);
        if (reduce == VOLT_REDUCE_MEAN) {   /* weighted by the batch size, as Lightning's mean */
            double w = t->cur_batch_size > 0 ? (double)t->cur_batch_size : 1.0;
            a->sum += local * w;
            a->weight += w;
        } else {   /* sum / max / min of the step values: weight 1 once there is one */
            a->sum = a->weight > 0 ? volt__reduce_fold(reduce, a->sum, local) : local;
            a->weight = 1;
        }
        a->flags = flags & ~(unsigned)VOLT_LOG_STEP;
    }
    return VOLT_OK;
}

/* A ratio of counts (hits / rows): the step value is num/den; the epoch value is
 * Σnum/Σden over every batch and rank, summed as integers (exact in a double below 2^53),
 * so the same hits over the same rows give the same bits under every strategy. */
static volt_status trainer_log_counts(volt_trainer *t, const char *name, int64_t num, int64_t den, unsigned flags) {
    const char *bad = name_problem(name);
    if (bad) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_log_ratio: bad metric name '%s': %s", name ? name : "(null)", bad);
    if (num < 0 || den < 0 || num > den) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_log_ratio('%s'): want 0 <= num <= den, got %lld/%lld", name, (long long)num, (long long)den);
    if ((bad = reduce_problem(flags, true)) != NULL) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_log_ratio('%s'): %s", name, bad);
    if (t->sanity) return VOLT_OK;
    if (!(flags & (VOLT_LOG_STEP | VOLT_LOG_EPOCH)))
        flags |= t->stage == VOLT_STAGE_FIT ? VOLT_LOG_STEP : VOLT_LOG_EPOCH;
    bool both = (flags & VOLT_LOG_STEP) && (flags & VOLT_LOG_EPOCH);
    char nm[128], sfx[32];
    dl_suffix(t, sfx, sizeof sfx);
    if (flags & VOLT_LOG_STEP) {
        double v = den ? (double)num / (double)den : 0.0;
        if (step_sync(t, flags)) {
            double c[2] = { (double)num, (double)den };
            volt_status st = volt__strategy_all_reduce_mean(t->strategy, c, 2, "step ratio sync");
            if (st < 0) return volt__terr(t, st, "volt_log_ratio('%s'): sync across ranks failed: %s", name, volt__strategy_errmsg(t->strategy));
            v = c[1] > 0 ? round(c[0] * t->world) / round(c[1] * t->world) : 0.0;
        }
        snprintf(nm, sizeof nm, "%s%s%s", name, both ? "_step" : "", sfx);
        VOLT_TRY(volt__metric_set(t, nm, v, flags & ~(unsigned)VOLT_LOG_EPOCH));
    }
    if (flags & VOLT_LOG_EPOCH) {
        snprintf(nm, sizeof nm, "%s%s%s", name, both ? "_epoch" : "", sfx);
        const char *why;
        volt_accum *a = accum_for(t, nm, true, flags, &why);
        if (!a) return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_log_ratio('%s'): %s", name, why);
        a->sum += (double)num;
        a->weight += (double)den;
        a->flags = flags & ~(unsigned)VOLT_LOG_STEP;
    }
    return VOLT_OK;
}

/* The stage's confusion matrix named prefix (NULL: none, and none made unless make; beyond
 * VOLT_MAX_CONFUSION stages there is none). */
volt_confusion_acc *volt__confusion_find(volt_trainer *t, volt_stage stage, const char *prefix, bool make) {
    for (int i = 0; i < t->n_confusion; i++)
        if (t->confusion[i].stage == stage && !strcmp(t->confusion[i].prefix, prefix)) return &t->confusion[i];
    if (!make || t->n_confusion == VOLT_MAX_CONFUSION) return NULL;
    volt_confusion_acc *m = &t->confusion[t->n_confusion++];
    *m = (volt_confusion_acc){ .stage = stage };
    snprintf(m->prefix, sizeof m->prefix, "%s", prefix);
    return m;
}

/* m holds C classes or more: the counts laid out again for the larger C, what they held kept. */
volt_status volt__confusion_grow(volt_confusion_acc *m, int C) {
    if (C <= m->n_classes) return VOLT_OK;
    int64_t *nc = calloc((size_t)C * (size_t)C, sizeof *nc);
    if (!nc) return VOLT_ERR_NOMEM;
    for (int r = 0; r < m->n_classes; r++)
        for (int c = 0; c < m->n_classes; c++) nc[r * C + c] = m->counts[r * m->n_classes + c];
    free(m->counts);
    m->counts = nc;
    m->n_classes = C;
    return VOLT_OK;
}

/* The confusion matrix of a non-train stage (val, test): counts[true * C + pred]; pred and
 * y (n rows) are host copies. */
static volt_status confusion_add(volt_trainer *t, const char *prefix, int C, const int64_t *pred, const void *y,
                                 volt_dtype ydt, int64_t n) {
    if (t->sanity || C < 1 || C > 4096) return VOLT_OK;
    char key[sizeof ((volt_confusion_acc *)0)->prefix], sfx[32];
    snprintf(key, sizeof key, "%s%s", prefix, dl_suffix(t, sfx, sizeof sfx));
    volt_confusion_acc *m = volt__confusion_find(t, t->stage, key, true);
    if (!m) return VOLT_OK;    /* beyond a few stages: accuracy only */
    /* first batch of the stage (or more classes): once, not per step */
    if (volt__confusion_grow(m, C) < 0) return volt__terr(t, VOLT_ERR_NOMEM, "confusion matrix %dx%d", C, C);
    C = m->n_classes;
    for (int64_t r = 0; r < n; r++) {
        int64_t yt = ydt == VOLT_I32 ? ((const int32_t *)y)[r] : ((const int64_t *)y)[r];
        if (yt < 0 || yt >= C) continue;    /* -100: ignored */
        m->counts[yt * C + pred[r]]++;
    }
    m->used = true;
    return VOLT_OK;
}

void volt_confusion_scores(int C, const int64_t *counts, volt_class_scores *out) {
    *out = (volt_class_scores){ 0 };
    int64_t total = 0, hits = 0;
    double p = 0, r = 0, f = 0;
    int present = 0;
    for (int k = 0; k < C; k++) {
        int64_t tp = counts[k * C + k], row = 0, col = 0;
        for (int j = 0; j < C; j++) { row += counts[k * C + j]; col += counts[j * C + k]; }
        total += row;
        hits += tp;
        if (row == 0 && col == 0) continue;   /* a class absent from targets and predictions */
        present++;
        double pk = col ? (double)tp / (double)col : 0.0, rk = row ? (double)tp / (double)row : 0.0;
        p += pk;
        r += rk;
        f += pk + rk > 0 ? 2.0 * pk * rk / (pk + rk) : 0.0;
    }
    out->total = total;
    out->correct = hits;
    out->accuracy = total ? (double)hits / (double)total : 0.0;
    if (present) { out->precision = p / present; out->recall = r / present; out->f1 = f / present; }
}

bool volt_trainer_confusion_matrix(const volt_trainer *t, const char *prefix, int *n_classes, const int64_t **counts) {
    for (int i = 0; i < t->n_confusion; i++)
        if (!strcmp(t->confusion[i].prefix, prefix) && t->confusion[i].n_classes > 0) {
            *n_classes = t->confusion[i].n_classes;
            *counts = t->confusion[i].counts;
            return true;
        }
    return false;
}

void volt__metrics_clear_fresh(volt_trainer *t) {
    for (int i = 0; i < t->n_metrics; i++) t->metrics[i].fresh = false;
}

/* The matrices of the stage's last finished epoch stay readable until the next one starts;
 * then they go (a run over other loaders keeps other names: none is left behind, zeroed, under
 * a name this run does not count, and the slots do not run out). A matrix is allocated at its
 * first batch of each run: once per epoch, not per step. */
static void confusion_reset(volt_trainer *t, volt_stage stage) {
    int keep = 0;
    for (int i = 0; i < t->n_confusion; i++) {
        if (t->confusion[i].stage == stage) free(t->confusion[i].counts);
        else t->confusion[keep++] = t->confusion[i];
    }
    t->n_confusion = keep;
}

void volt__metrics_drop_accums(volt_trainer *t, volt_stage stage) {
    int keep = 0;
    for (int i = 0; i < t->n_accums; i++)
        if (t->accums[i].stage != stage) t->accums[keep++] = t->accums[i];
    t->n_accums = keep;
    confusion_reset(t, stage);
}

void volt__metric_restore(volt_trainer *t, const char *name, double value) {
    if (volt__metric_set(t, name, value, VOLT_LOG_STEP) < 0) return;   /* a full table: nothing to read back */
    volt_metric *m = find_metric(t, name);
    if (m) m->fresh = false;   /* read, not logged again */
}

void volt__metrics_reset_call(volt_trainer *t) {
    t->n_metrics = 0;
    t->n_accums = 0;
    for (int i = 0; i < t->n_confusion; i++) free(t->confusion[i].counts);
    t->n_confusion = 0;
}

void volt__metrics_free(volt_trainer *t) {
    for (int i = 0; i < t->n_confusion; i++) free(t->confusion[i].counts);
    t->n_confusion = 0;
    if (t->dev) volt__dev_free(t->dev, t->log_dev);
    free(t->log_host);
    free(t->pending);
    t->log_dev = NULL;
    t->log_host = NULL;
    t->pending = NULL;
    t->log_cap = t->log_used = 0;
    t->n_pending = t->cap_pending = 0;
}

/* ---- public ---------------------------------------------------------------------------- */
/* ---- logged tensors: one device->host copy per step ------------------------------------------ */
/* Inside a trainer step, volt_log / volt_log_value / volt_log_ratio / volt_classification_step
 * queue their values in call order; tensor values are first copied device->device into the
 * trainer's staging buffer (log_dev). volt__metrics_flush reads the whole buffer with one
 * device->host copy and turns the queue into metrics, in order. Staging and queue grow on
 * the first steps and are reused (no allocation in the steady state). */
typedef enum { PEND_TENSOR, PEND_VALUE, PEND_RATIO, PEND_CLASSIFY, PEND_LOSS } pend_kind;   /* LOSS: no metric */
typedef struct volt_pending_log {
    pend_kind kind;
    char name[96];           /* metric name; CLASSIFY: the stage prefix ("train", "val", ...) */
    unsigned flags;
    volt_dtype dt, ydt;      /* TENSOR: the value's dtype; CLASSIFY: i64 predictions, ydt targets */
    size_t off, yoff;        /* in log_dev / log_host */
    int64_t n, num, den;     /* CLASSIFY: rows; RATIO: counts */
    double value;            /* VALUE */
    int C;                   /* CLASSIFY: classes */
} volt_pending_log;

static bool queueing(const volt_step *s) {
    return s->log_fn == volt__trainer_log && ((volt_trainer *)s->log_ctx)->in_step;
}

/* STEP and/or EPOCH as the loop will read flags (neither: by stage, as volt__trainer_log does). */
static unsigned when_flags(const volt_trainer *t, unsigned flags) {
    const unsigned w = flags & (VOLT_LOG_STEP | VOLT_LOG_EPOCH);
    return w ? w : t->stage == VOLT_STAGE_FIT ? VOLT_LOG_STEP : VOLT_LOG_EPOCH;
}

/* "x" logged with STEP and EPOCH is recorded as "x_step" and "x_epoch": a's names meet b's. */
static bool names_meet(const char *a, unsigned fa, const char *b) {
    if (!(fa & VOLT_LOG_STEP) || !(fa & VOLT_LOG_EPOCH)) return false;
    const size_t n = strlen(a);
    return !strncmp(a, b, n) && (!strcmp(b + n, "_step") || !strcmp(b + n, "_epoch"));
}

/* A queue entry, the queue grown as needed (the first steps only). */
static volt_pending_log *pend_push(volt_step *s, volt_trainer *t, pend_kind kind, const char *name, unsigned flags) {
    if (t->n_pending == t->cap_pending) {
        int cap = t->cap_pending ? 2 * t->cap_pending : 16;
        volt_pending_log *np = realloc(t->pending, sizeof *np * (size_t)cap);
        if (!np) { volt_step_fail(s, VOLT_ERR_NOMEM, "volt_log('%s'): out of memory", name); return NULL; }
        t->pending = np;
        t->cap_pending = cap;
    }
    volt_pending_log *p = &t->pending[t->n_pending++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->flags = flags;
    snprintf(p->name, sizeof p->name, "%s", name);
    return p;
}

static volt_pending_log *pend_new(volt_step *s, volt_trainer *t, pend_kind kind, const char *name, unsigned flags) {
    const char *bad = name_problem(name);
    if (bad) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "volt_log: bad metric name '%s': %s", name ? name : "(null)", bad);
        return NULL;
    }
    /* one name, one meaning per step (Lightning refuses the same too): the same name with other
     * flags, or a name that a STEP|EPOCH value's "_step" / "_epoch" column already takes, would
     * merge two values into one metric, the last one winning */
    if ((bad = reduce_problem(flags, kind == PEND_RATIO)) != NULL) {
        volt_step_fail(s, VOLT_ERR_INVALID_ARG, "%s('%s'): %s", kind == PEND_RATIO ? "volt_log_ratio" : "volt_log", name, bad);
        return NULL;
    }
    const unsigned w = when_flags(t, flags);
    for (int i = 0; i < t->n_pending; i++) {
        const volt_pending_log *q = &t->pending[i];
        const unsigned qw = when_flags(t, q->flags);
        if (!strcmp(q->name, name) && qw == w && (q->flags & VOLT__LOG_REDUCE_MASK) != (flags & VOLT__LOG_REDUCE_MASK)) {
            volt_step_fail(s, VOLT_ERR_INVALID_ARG, "volt_log('%s'): logged twice in this step with another reduce "
                           "(VOLT_LOG_REDUCE_*): one name, one meaning", name);
            return NULL;
        }
        if (!strcmp(q->name, name) && qw != w) {
            volt_step_fail(s, VOLT_ERR_INVALID_ARG, "volt_log('%s'): logged twice in this step with other flags (%s, then "
                           "%s): one name, one meaning", name, qw == VOLT_LOG_STEP ? "step" : qw == VOLT_LOG_EPOCH ? "epoch" :
                           "step and epoch", w == VOLT_LOG_STEP ? "step" : w == VOLT_LOG_EPOCH ? "epoch" : "step and epoch");
            return NULL;
        }
        if (names_meet(q->name, qw, name) || names_meet(name, w, q->name)) {
            volt_step_fail(s, VOLT_ERR_INVALID_ARG, "volt_log('%s'): clashes with '%s' logged with step and epoch (recorded as "
                           "'<name>_step' and '<name>_epoch')", name, q->name);
            return NULL;
        }
    }
    return pend_push(s, t, kind, name, flags);
}

/* Copy a tensor's data device->device into the staging buffer; *off = where. */
static volt_status stage_tensor(volt_step *s, volt_trainer *t, const volt_tensor *v, size_t *off) {
    size_t bytes = volt_tensor_bytes(v), at = (t->log_used + 7) & ~(size_t)7;
    if (at + bytes > t->log_cap) {   /* grow (first steps only): keep what is staged */
        size_t cap = t->log_cap ? 2 * t->log_cap : 4096;
        while (cap < at + bytes) cap *= 2;
        void *nd = volt__dev_alloc(t->dev, cap);
        unsigned char *nh = malloc(cap);
        if (!nd || !nh) {
            volt__dev_free(t->dev, nd);
            free(nh);
            return volt_step_fail(s, VOLT_ERR_NOMEM, "volt_log: %zu bytes of log staging", cap);
        }
        volt__dev_d2d(t->dev, nd, t->log_dev, t->log_used);
        volt__dev_free(t->dev, t->log_dev);
        free(t->log_host);
        t->log_dev = nd;
        t->log_host = nh;
        t->log_cap = cap;
    }
    volt__dev_d2d(t->dev, (char *)t->log_dev + at, v->data, bytes);
    t->log_used = at + bytes;
    *off = at;
    return VOLT_OK;
}

static double host_scalar(const void *p, volt_dtype dt) {
    switch (dt) {
    case VOLT_F32: { float f; memcpy(&f, p, 4); return f; }
    case VOLT_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case VOLT_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case VOLT_U8: return *(const unsigned char *)p;
    case VOLT_BF16: { uint16_t h; memcpy(&h, p, 2); return volt_bf16_to_f32(h); }
    case VOLT_F16: { uint16_t h; memcpy(&h, p, 2); return volt_f16_to_f32(h); }
    default: return 0;
    }
}

/* Accuracy counts over host rows (targets -100 ignored). */
static void count_hits(const int64_t *pred, const void *y, volt_dtype ydt, int64_t n, int64_t *hits, int64_t *rows) {
    *hits = *rows = 0;
    for (int64_t r = 0; r < n; r++) {
        int64_t yt = ydt == VOLT_I32 ? ((const int32_t *)y)[r] : ((const int64_t *)y)[r];
        if (yt == -100) continue;
        ++*rows;
        *hits += pred[r] == yt;
    }
}

static volt_status classify_log(volt_trainer *t, const char *stage, const int64_t *pred, const void *y, volt_dtype ydt,
                                int64_t n, int C) {
    bool train = !strcmp(stage, "train");
    int64_t hits, rows;
    count_hits(pred, y, ydt, n, &hits, &rows);
    char name[128];
    snprintf(name, sizeof name, "%s_acc", stage);
    VOLT_TRY(trainer_log_counts(t, name, hits, rows, train ? VOLT_LOG_EPOCH : VOLT_LOG_EPOCH | VOLT_LOG_PROG_BAR));
    return train ? VOLT_OK : confusion_add(t, stage, C, pred, y, ydt, n);
}

volt_status volt__metrics_flush(volt_trainer *t) {
    if (!t->n_pending) return VOLT_OK;
    if (t->log_used) volt__dev_d2h(t->dev, t->log_host, t->log_dev, t->log_used);   /* the step's one read */
    int n = t->n_pending;
    t->n_pending = 0;
    t->log_used = 0;
    for (int i = 0; i < n; i++) {
        const volt_pending_log *p = &t->pending[i];
        switch (p->kind) {
        case PEND_TENSOR: VOLT_TRY(volt__trainer_log(t, p->name, host_scalar(t->log_host + p->off, p->dt), p->flags)); break;
        case PEND_VALUE: VOLT_TRY(volt__trainer_log(t, p->name, p->value, p->flags)); break;
        case PEND_RATIO: VOLT_TRY(trainer_log_counts(t, p->name, p->num, p->den, p->flags)); break;
        case PEND_LOSS:
            t->step_loss = host_scalar(t->log_host + p->off, p->dt);
            t->step_loss_set = true;
            break;
        case PEND_CLASSIFY:
            VOLT_TRY(classify_log(t, p->name, (const int64_t *)(t->log_host + p->off), t->log_host + p->yoff, p->ydt, p->n, p->C));
            break;
        }
    }
    return VOLT_OK;
}

volt_status volt__metrics_snapshot(volt_trainer *t, struct volt_pending_log **out, int *n, size_t *used, char *why,
                                   size_t whylen) {
    *out = NULL;
    *n = t->n_pending;
    *used = t->log_used;
    for (int i = 0; i < t->n_pending; i++)
        if (t->pending[i].kind == PEND_VALUE || t->pending[i].kind == PEND_RATIO) {
            snprintf(why, whylen, "metric '%s' was logged from a host value (volt_log_value / volt_log_ratio), which every "
                     "replay would repeat unchanged: log a tensor (volt_log) instead", t->pending[i].name);
            return VOLT_ERR_UNSUPPORTED;
        }
    if (!t->n_pending) return VOLT_OK;
    if (!(*out = malloc(sizeof **out * (size_t)t->n_pending))) {
        snprintf(why, whylen, "out of memory keeping the step's logged values");
        return VOLT_ERR_NOMEM;
    }
    memcpy(*out, t->pending, sizeof **out * (size_t)t->n_pending);
    return VOLT_OK;
}

volt_status volt__metrics_replay(volt_trainer *t, const struct volt_pending_log *p, int n, size_t used) {
    if (n > t->cap_pending) {
        volt_pending_log *np = realloc(t->pending, sizeof *np * (size_t)n);
        if (!np) return volt__terr(t, VOLT_ERR_NOMEM, "compile: out of memory restoring the logged values");
        t->pending = np;
        t->cap_pending = n;
    }
    if (n) memcpy(t->pending, p, sizeof *p * (size_t)n);
    t->n_pending = n;
    t->log_used = used;
    return VOLT_OK;
}

volt_status volt__metrics_stage_loss(volt_trainer *t, volt_step *s) {
    if (!t->track_step_loss || !s->loss) return VOLT_OK;
    volt_pending_log *p = pend_push(s, t, PEND_LOSS, "(the step's loss)", 0);
    if (!p) return volt_step_status(s);
    p->dt = s->loss->dtype;
    const volt_status st = stage_tensor(s, t, s->loss, &p->off);
    if (st < 0) t->n_pending--;
    return st;
}

void volt__metrics_discard(volt_trainer *t) {
    t->n_pending = 0;
    t->log_used = 0;
}

/* ---- public ---------------------------------------------------------------------------- */
volt_status volt_log(volt_step *s, const char *name, const volt_tensor *value, unsigned flags) {
    if (!value) return s->status < 0 ? s->status : volt_step_fail(s, VOLT_ERR_INVALID_ARG, "volt_log('%s'): value is NULL", name);
    if (volt_tensor_numel(value) != 1) {
        char b[64];
        return volt_step_fail(s, VOLT_ERR_SHAPE, "volt_log('%s'): value must be a scalar, got %s", name,
                              volt_shape_str(value->shape, b, sizeof b));
    }
    if (queueing(s)) {
        volt_trainer *t = s->log_ctx;
        if (!value->device || value->device == t->dev) {
            volt_pending_log *p = pend_new(s, t, PEND_TENSOR, name, flags);
            if (!p) return volt_step_status(s);
            p->dt = value->dtype;
            volt_status st = stage_tensor(s, t, value, &p->off);
            if (st < 0) t->n_pending--;
            return st;
        }
    }
    return volt_log_value(s, name, volt_tensor_item(value), flags);   /* another device: read now */
}

volt_status volt_log_value(volt_step *s, const char *name, double value, unsigned flags) {
    if (!s->log_fn) return VOLT_OK;
    if (queueing(s)) {   /* in order with the step's tensor values */
        volt_pending_log *p = pend_new(s, s->log_ctx, PEND_VALUE, name, flags);
        if (!p) return volt_step_status(s);
        p->value = value;
        return VOLT_OK;
    }
    return s->log_fn(s->log_ctx, name, value, flags);
}

volt_status volt_log_ratio(volt_step *s, const char *name, int64_t num, int64_t den, unsigned flags) {
    if (!s->log_fn) return VOLT_OK;
    if (queueing(s)) {
        if (num < 0 || den < 0 || num > den)   /* the error at the call, as when logged at once */
            return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "volt_log_ratio('%s'): want 0 <= num <= den, got %lld/%lld", name,
                                  (long long)num, (long long)den);
        volt_pending_log *p = pend_new(s, s->log_ctx, PEND_RATIO, name, flags);
        if (!p) return volt_step_status(s);
        p->num = num;
        p->den = den;
        return VOLT_OK;
    }
    if (s->log_fn == volt__trainer_log) return trainer_log_counts(s->log_ctx, name, num, den, flags);
    return s->log_fn(s->log_ctx, name, den ? (double)num / (double)den : 0.0, flags);
}

/* The stages volt_classification_step knows: its "<stage>_" prefixes, the trainer's loops. */
static const char *const classify_stages[] = { "train", "val", "test", "predict" };

volt_status volt_classification_step(volt_step *s, volt_tensor *logits, volt_tensor *y, const char *stage) {
    bool known = false;
    for (size_t i = 0; stage && i < sizeof classify_stages / sizeof classify_stages[0]; i++) known |= !strcmp(stage, classify_stages[i]);
    /* a typo ("trian") logged "trian_loss" and then failed as a training_step without a loss */
    if (!known)
        return volt_step_fail(s, VOLT_ERR_INVALID_ARG, "volt_classification_step: stage %s%s%s is not one of \"train\", \"val\", "
                              "\"test\", \"predict\" (it prefixes the logged names; \"train\" also sets the step's loss)",
                              stage ? "\"" : "", stage ? stage : "NULL", stage ? "\"" : "");
    bool train = !strcmp(stage, "train");
    volt_tensor *loss = volt_cross_entropy(s, logits, y);
    volt_tensor *pred = volt_argmax(s, logits);
    if (!loss || !pred) return volt_step_status(s);
    if ((y->dtype != VOLT_I32 && y->dtype != VOLT_I64) || y->shape.ndim != 1 || y->shape.d[0] != pred->shape.d[0])
        return volt_step_fail(s, VOLT_ERR_SHAPE, "volt_classification_step: want targets (N) i32/i64 for logits (N, C)");
    unsigned eval = VOLT_LOG_EPOCH | VOLT_LOG_PROG_BAR;
    char name[64];
    snprintf(name, sizeof name, "%s_loss", stage);
    VOLT_TRY(volt_log(s, name, loss, train ? VOLT_LOG_STEP | VOLT_LOG_PROG_BAR : eval));
    /* accuracy as counts (hits, rows), like torchmetrics: exact across batches and ranks;
     * predictions and targets reach the host with the step's other logged values */
    int64_t n = y->shape.d[0];
    int C = (int)logits->shape.d[1];
    if (queueing(s) && (!pred->device || pred->device == ((volt_trainer *)s->log_ctx)->dev) &&
        (!y->device || y->device == ((volt_trainer *)s->log_ctx)->dev)) {
        volt_trainer *t = s->log_ctx;
        volt_pending_log *p = pend_new(s, t, PEND_CLASSIFY, stage, 0);
        if (!p) return volt_step_status(s);
        *p = (volt_pending_log){ .kind = PEND_CLASSIFY, .ydt = y->dtype, .n = n, .C = C };
        snprintf(p->name, sizeof p->name, "%s", stage);
        volt_status st = stage_tensor(s, t, pred, &p->off);
        if (st >= 0) st = stage_tensor(s, t, y, &p->yoff);
        if (st < 0) { t->n_pending--; return st; }
    } else if (s->log_fn) {   /* outside the trainer's loop: read both now */
        size_t yb = volt_tensor_bytes(y);
        int64_t *hp = malloc(volt_tensor_bytes(pred) + yb);
        if (!hp) return volt_step_fail(s, VOLT_ERR_NOMEM, "volt_classification_step: out of memory");
        volt_tensor_to_host(pred, hp);
        volt_tensor_to_host(y, hp + n);
        volt_status st;
        if (s->log_fn == volt__trainer_log) st = classify_log(s->log_ctx, stage, hp, hp + n, y->dtype, n, C);
        else {
            int64_t hits, rows;
            count_hits(hp, hp + n, y->dtype, n, &hits, &rows);
            snprintf(name, sizeof name, "%s_acc", stage);
            st = volt_log_ratio(s, name, hits, rows, train ? VOLT_LOG_EPOCH : eval);
        }
        free(hp);
        VOLT_TRY(st);
    }
    return train ? volt_step_set_loss(s, loss) : VOLT_OK;
}

volt_status volt_step_set_loss(volt_step *s, volt_tensor *loss) {
    if (!loss) return s->status < 0 ? s->status : volt_step_fail(s, VOLT_ERR_INVALID_ARG, "set_loss: loss is NULL");
    s->loss = loss;
    volt__step_pin(s, loss);   /* the trainer reads it after backward */
    return VOLT_OK;
}

bool volt_trainer_metric(const volt_trainer *t, const char *name, double *value) {
    if (!t || !name) return false;
    for (int i = 0; i < t->n_metrics; i++)
        if (!strcmp(t->metrics[i].name, name)) {
            if (value) *value = t->metrics[i].value;
            return true;
        }
    return false;
}

int volt_trainer_metric_count(const volt_trainer *t) { return t ? t->n_metrics : 0; }

const char *volt_trainer_metric_name(const volt_trainer *t, int i, double *value, unsigned *flags) {
    if (!t || i < 0 || i >= t->n_metrics) return NULL;
    if (value) *value = t->metrics[i].value;
    if (flags) *flags = t->metrics[i].flags;
    return t->metrics[i].name;
}

void volt_trainer_metric_names(const volt_trainer *t, char *out, size_t n) {
    if (!out || !n) return;
    out[0] = 0;
    if (!t) return;
    size_t k = 0;
    const int cnt = volt_trainer_metric_count(t);
    for (int i = 0; i < cnt; i++) {
        const char *nm = volt_trainer_metric_name(t, i, NULL, NULL);
        if (!nm) continue;
        const int w = snprintf(out + k, n - k, "%s'%s'", k ? ", " : "", nm);
        if (w < 0 || (size_t)w >= n - k) {   /* full: end with "..." where it fits */
            if (n >= 4) snprintf(out + (k + 4 <= n ? k : n - 4), 4, "...");
            return;
        }
        k += (size_t)w;
    }
}

void volt_trainer_visit_fresh_metrics(const volt_trainer *t, volt_metric_visit_fn fn, void *ctx) {
    for (int i = 0; i < t->n_metrics; i++)
        if (t->metrics[i].fresh) fn(ctx, t->metrics[i].name, t->metrics[i].value, t->metrics[i].flags);
}

volt_status volt_trainer_log_metric(volt_trainer *t, const char *name, double value, unsigned flags) {
    const char *bad = name_problem(name);
    if (bad) return volt__terr(t, VOLT_ERR_INVALID_ARG, "log_metric: bad metric name '%s': %s", name ? name : "(null)", bad);
    if (flags & VOLT__LOG_REDUCE_MASK)   /* one value, set now: nothing to fold */
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "log_metric('%s'): VOLT_LOG_REDUCE_* is for values a step logs (volt_log)",
                          name);
    return volt__metric_set(t, name, value, flags ? flags : VOLT_LOG_STEP);
}
