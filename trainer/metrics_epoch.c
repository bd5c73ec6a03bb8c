/* A stage's epoch means (metrics.c accumulates them, weighted by batch size, or exact counts).
 *
 * Under a distributed strategy every epoch metric is reduced across ranks (weighted by each
 * rank's samples), not only VOLT_LOG_SYNC ones: ModelCheckpoint and EarlyStopping must see the
 * same value on every rank, or their file names and stop decisions diverge. The reduction must
 * be made by every rank alike, and the ranks need not have logged the same names: with datasets
 * of their own a rank may have run no batch at all (and logged nothing), and a metric logged on
 * some batches only may be on some ranks only. So the ranks first agree on the union of what
 * they logged: each rank's description (its accumulators' names, kinds and flags, by name, and
 * its confusion matrices' prefixes and class counts) is hashed and the hashes exchanged, a slot
 * per rank (volt__rank_values). When every rank has the same one, that is the union and nothing
 * more is sent (the common case); otherwise the lowest rank of each different description
 * broadcasts it and every rank merges them in rank order. Then one all-reduce of (sum, weight)
 * per name in the union, a rank adding zeros for the names it lacks, and the confusion
 * matrices' counts in blocks on the stack. Nothing between the collectives can fail on one rank
 * alone: a rank that cannot allocate its list says so in the hash exchange (every rank fails
 * there alike), and one that cannot grow a confusion matrix adds zeros and fails after them.
 * Lightning syncs each logged metric once at the epoch end, on every rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/trainer_internal.h"

typedef struct desc_acc { char name[sizeof ((volt_accum *)0)->name]; uint32_t flags; uint32_t exact; } desc_acc;
typedef struct desc_conf { char prefix[sizeof ((volt_confusion_acc *)0)->prefix]; int32_t classes; } desc_conf;
typedef struct stage_desc {   /* broadcast as bytes: filled from zeros */
    int32_t n_acc, n_conf;
    desc_acc acc[VOLT_MAX_METRICS];    /* by name */
    desc_conf conf[VOLT_MAX_CONFUSION];
} stage_desc;

enum { DISTINCT = 8 /* different descriptions the ranks may have */, BLOCK = 512 /* counts per all-reduce */ };

static int accum_cmp(const void *a, const void *b) {
    return strcmp(((const volt_accum *)a)->name, ((const volt_accum *)b)->name);
}

static void describe(const volt_trainer *t, volt_stage stage, const volt_accum *mine, int n, stage_desc *d) {
    memset(d, 0, sizeof *d);
    for (int i = 0; i < n; i++) {
        memcpy(d->acc[i].name, mine[i].name, sizeof d->acc[i].name);   /* the same size */
        d->acc[i].flags = mine[i].flags;
        d->acc[i].exact = mine[i].exact;
    }
    d->n_acc = n;
    for (int i = 0; i < t->n_confusion; i++) {
        const volt_confusion_acc *m = &t->confusion[i];
        if (m->stage != stage || !m->used || !m->n_classes) continue;
        memcpy(d->conf[d->n_conf].prefix, m->prefix, sizeof d->conf[0].prefix);   /* the same size */
        d->conf[d->n_conf++].classes = m->n_classes;
    }
}

/* 0 for a rank that logged nothing, else 1 + 40 bits of FNV-1a over the description: an
 * integer the slot exchange carries exactly (below 2^52 / world). */
static double desc_key(const stage_desc *d) {
    if (!d->n_acc && !d->n_conf) return 0;
    uint64_t h = 1469598103934665603ull;
#define MIX(p, len) do { const unsigned char *q_ = (const unsigned char *)(p); \
        for (size_t k_ = 0; k_ < (len); k_++) h = (h ^ q_[k_]) * 1099511628211ull; } while (0)
    for (int i = 0; i < d->n_acc; i++) {
        MIX(d->acc[i].name, strlen(d->acc[i].name) + 1);
        MIX(&d->acc[i].flags, sizeof d->acc[i].flags);
        MIX(&d->acc[i].exact, sizeof d->acc[i].exact);
    }
    MIX("|", 1);
    for (int i = 0; i < d->n_conf; i++) {
        MIX(d->conf[i].prefix, strlen(d->conf[i].prefix) + 1);
        MIX(&d->conf[i].classes, sizeof d->conf[i].classes);
    }
#undef MIX
    return (double)(1 + (h >> 24));
}

typedef struct keys {
    int n, root[DISTINCT];            /* the lowest rank of each different description */
    double key[DISTINCT];
    int failed;                       /* the lowest rank that could not describe its own, else -1 */
    bool empty, overflow;             /* a rank logged nothing; more than DISTINCT descriptions */
} keys;

static bool key_visit(void *ctx, int r, double v) {
    keys *k = ctx;
    const double key = (double)llround(v);
    if (key < 0) { if (k->failed < 0) k->failed = r; return true; }
    if (key == 0) { k->empty = true; return true; }
    for (int i = 0; i < k->n; i++)
        if (k->key[i] == key) return true;
    if (k->n == DISTINCT) { k->overflow = true; return true; }
    k->key[k->n] = key;
    k->root[k->n++] = r;
    return true;
}

/* u += d, keeping u's order by name; the same on every rank (the same inputs). */
static volt_status merge(volt_trainer *t, const char *what, stage_desc *u, const stage_desc *d, int root) {
    for (int i = 0; i < d->n_acc; i++) {
        int j = 0;
        while (j < u->n_acc && strcmp(u->acc[j].name, d->acc[i].name) < 0) j++;
        if (j < u->n_acc && !strcmp(u->acc[j].name, d->acc[i].name)) {
            if (u->acc[j].exact != d->acc[i].exact)
                return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: metric '%s' was logged as counts (volt_log_ratio) on some ranks "
                                  "and as values on others (rank %d)", what, d->acc[i].name, root);
            if ((u->acc[j].flags ^ d->acc[i].flags) & VOLT__LOG_REDUCE_MASK)
                return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: metric '%s' was logged with another reduce (VOLT_LOG_REDUCE_*) "
                                  "on rank %d than on a lower rank", what, d->acc[i].name, root);
            continue;
        }
        if (u->n_acc == VOLT_MAX_METRICS)
            return volt__terr(t, VOLT_ERR_NOMEM, "%s: the ranks logged more than %d epoch metrics between them", what, VOLT_MAX_METRICS);
        memmove(&u->acc[j + 1], &u->acc[j], sizeof u->acc[0] * (size_t)(u->n_acc - j));
        u->acc[j] = d->acc[i];
        u->n_acc++;
    }
    for (int i = 0; i < d->n_conf; i++) {
        int j = 0;
        while (j < u->n_conf && strcmp(u->conf[j].prefix, d->conf[i].prefix)) j++;
        if (j == u->n_conf) {
            if (u->n_conf == VOLT_MAX_CONFUSION)
                return volt__terr(t, VOLT_ERR_NOMEM, "%s: the ranks kept more than %d confusion matrices between them", what,
                                  VOLT_MAX_CONFUSION);
            u->conf[u->n_conf++] = d->conf[i];
        } else if (d->conf[i].classes > u->conf[j].classes) {
            u->conf[j].classes = d->conf[i].classes;
        }
    }
    return VOLT_OK;
}

static volt_status sync_err(volt_trainer *t, volt_status st, const char *what) {
    return volt__terr(t, st, "%s: syncing the epoch metrics across ranks (strategy '%s'): %s", what,
                      volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
}

/* mine[0..*n) (sorted by name) becomes the union's (sum, weight) per name, summed over ranks;
 * the stage's confusion matrices in the union hold every rank's counts. */
static volt_status sync_ranks(volt_trainer *t, volt_stage stage, const char *what, volt_accum *mine, int *n) {
    const int W = t->world;
    /* 40 KiB, off the stack; a rank that cannot have it says so in the exchange (-1), and every
     * rank stops there alike */
    struct { stage_desc own, got, uni; } *d = malloc(sizeof *d);
    if (d) describe(t, stage, mine, *n, &d->own);
    keys k = { .failed = -1 };
    volt_status st = volt__rank_values(t, d ? desc_key(&d->own) : -1.0, "epoch metric keys", key_visit, &k);
    if (st < 0) { free(d); return sync_err(t, st, what); }
    if (k.failed >= 0) {
        free(d);
        return volt__terr(t, VOLT_ERR_NOMEM, "%s: syncing the epoch metrics: rank %d of %d ran out of memory", what, k.failed, W);
    }
    if (k.overflow) {
        free(d);
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "%s: the ranks logged more than %d different sets of epoch metrics", what, DISTINCT);
    }
    if (k.n == 0) { free(d); return VOLT_OK; }   /* nothing logged anywhere */
    stage_desc *u = &d->own;
    if (k.n > 1 || k.empty) {   /* the union of the descriptions, broadcast by one rank each */
        u = &d->uni;
        memset(u, 0, sizeof *u);
        for (int i = 0; i < k.n && st >= 0; i++) {
            stage_desc *g = &d->got;
            if (t->rank == k.root[i]) *g = d->own;
            else memset(g, 0, sizeof *g);
            if ((st = volt__strategy_broadcast(t->strategy, g, sizeof *g, k.root[i], "epoch metric names")) < 0) st = sync_err(t, st, what);
            else if (g->n_acc < 0 || g->n_acc > VOLT_MAX_METRICS || g->n_conf < 0 || g->n_conf > VOLT_MAX_CONFUSION)
                st = volt__terr(t, VOLT_ERR_CORRUPT, "%s: rank %d's list of its metrics arrived damaged", what, k.root[i]);
            else {
                for (int j = 0; j < g->n_acc; j++) g->acc[j].name[sizeof g->acc[j].name - 1] = 0;
                for (int j = 0; j < g->n_conf; j++) g->conf[j].prefix[sizeof g->conf[j].prefix - 1] = 0;
                st = merge(t, what, u, g, k.root[i]);
            }
        }
        if (st < 0) { free(d); return st; }
    }
    /* (sum, weight) per name of the union: this rank's, or zeros */
    double v[2 * VOLT_MAX_METRICS];
    for (int i = 0, j = 0; i < u->n_acc; i++) {
        while (j < *n && strcmp(mine[j].name, u->acc[i].name) < 0) j++;
        const bool have = j < *n && !strcmp(mine[j].name, u->acc[i].name);
        v[2 * i] = have ? mine[j].sum : 0;
        v[2 * i + 1] = have ? mine[j].weight : 0;
    }
    if (u->n_acc && (st = volt__strategy_all_reduce_mean(t->strategy, v, 2 * u->n_acc, "epoch metric sums")) < 0) { free(d); return sync_err(t, st, what); }
    /* sum / max / min (reduce_fx): the ranks' own folds, folded again in rank order (exact) */
    int idx[VOLT_MAX_METRICS], red[VOLT_MAX_METRICS], m = 0;
    double fv[VOLT_MAX_METRICS], fh[VOLT_MAX_METRICS];
    for (int i = 0, j = 0; i < u->n_acc; i++) {
        const int r = volt__log_reduce(u->acc[i].flags);
        if (u->acc[i].exact || r < 0 || r == VOLT_REDUCE_MEAN) continue;
        while (j < *n && strcmp(mine[j].name, u->acc[i].name) < 0) j++;
        const bool have = j < *n && !strcmp(mine[j].name, u->acc[i].name) && mine[j].weight > 0;
        idx[m] = i;
        red[m] = r;
        fv[m] = have ? mine[j].sum : 0;
        fh[m++] = have;
    }
    if (m && (st = volt__rank_fold(t, red, fv, fh, m)) < 0) { free(d); return sync_err(t, st, what); }
    for (int q = 0; q < m; q++) {
        v[2 * idx[q]] = fv[q];
        v[2 * idx[q] + 1] = fh[q];   /* weight 1: the value as folded; 0 when no rank had one */
    }
    for (int i = 0; i < u->n_acc; i++) {
        volt_accum *a = &mine[i];
        *a = (volt_accum){ .stage = stage, .exact = u->acc[i].exact != 0, .flags = u->acc[i].flags, .sum = v[2 * i],
                           .weight = v[2 * i + 1] };
        memcpy(a->name, u->acc[i].name, sizeof a->name);
        if (a->exact) {   /* the mean of integers times world: the integer sum back */
            a->sum = round(a->sum * W);
            a->weight = round(a->weight * W);
        }
    }
    *n = u->n_acc;
    /* the confusion matrices: exact sums of integer counts, a block at a time */
    volt_status mem = VOLT_OK;
    for (int i = 0; i < u->n_conf && st >= 0; i++) {
        const int C = u->conf[i].classes;
        volt_confusion_acc *m = volt__confusion_find(t, stage, u->conf[i].prefix, true);
        if (!m || volt__confusion_grow(m, C) < 0) {
            if (mem == VOLT_OK) mem = volt__terr(t, VOLT_ERR_NOMEM, "%s: confusion matrix '%s' %dx%d", what, u->conf[i].prefix, C, C);
            m = NULL;   /* adds zeros, keeps nothing: the collectives stay every rank's */
        }
        double b[BLOCK];
        const int64_t cc = (int64_t)C * C;
        for (int64_t at = 0; at < cc && st >= 0; at += BLOCK) {
            const int kb = cc - at < BLOCK ? (int)(cc - at) : BLOCK;
            for (int q = 0; q < kb; q++) b[q] = m ? (double)m->counts[at + q] : 0.0;
            if ((st = volt__strategy_all_reduce_mean(t->strategy, b, kb, "confusion counts")) < 0) st = sync_err(t, st, what);
            else if (m)
                for (int q = 0; q < kb; q++) m->counts[at + q] = (int64_t)llround(b[q] * W);
        }
        if (m) m->used = true;   /* counted on some rank */
    }
    free(d);
    return st < 0 ? st : mem;
}

volt_status volt__metrics_finish_epoch(volt_trainer *t, volt_stage stage, const char *what) {
    int keep = 0, n = 0;
    volt_accum mine[VOLT_MAX_METRICS];
    for (int i = 0; i < t->n_accums; i++) {
        if (t->accums[i].stage == stage) mine[n++] = t->accums[i];
        else t->accums[keep++] = t->accums[i];
    }
    t->n_accums = keep;
    if (t->world > 1 && t->strategy) {
        qsort(mine, (size_t)n, sizeof mine[0], accum_cmp);
        VOLT_TRY(sync_ranks(t, stage, what, mine, &n));
    }
    for (int i = 0; i < n; i++)
        if (mine[i].weight > 0) VOLT_TRY(volt__metric_set(t, mine[i].name, mine[i].sum / mine[i].weight, mine[i].flags));
    for (int i = 0; i < t->n_confusion; i++) {
        volt_confusion_acc *m = &t->confusion[i];
        if (m->stage != stage || !m->n_classes) continue;
        if (m->used) {
            volt_class_scores sc;
            volt_confusion_scores(m->n_classes, m->counts, &sc);
            /* "val" -> val_f1; one of several loaders' "val/dataloader_idx_1" -> val_f1/dataloader_idx_1 */
            const char *sfx = strchr(m->prefix, '/');
            const int pl = sfx ? (int)(sfx - m->prefix) : (int)strlen(m->prefix);
            if (!sfx) sfx = "";
            char nm[128];
            const unsigned fl = VOLT_LOG_EPOCH;
            snprintf(nm, sizeof nm, "%.*s_precision%s", pl, m->prefix, sfx);
            VOLT_TRY(volt__metric_set(t, nm, sc.precision, fl));
            snprintf(nm, sizeof nm, "%.*s_recall%s", pl, m->prefix, sfx);
            VOLT_TRY(volt__metric_set(t, nm, sc.recall, fl));
            snprintf(nm, sizeof nm, "%.*s_f1%s", pl, m->prefix, sfx);
            VOLT_TRY(volt__metric_set(t, nm, sc.f1, fl));
        }
        m->used = false;
    }
    return VOLT_OK;
}
