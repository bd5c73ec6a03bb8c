/* The progress bar: one line on stderr, rank 0 only.
 *
 * On a terminal the line is redrawn in place (\r, at most ~10 times a second):
 *   Epoch 0/2: 37/469 [00:12<02:41, 28.3it/s, train_loss=0.512, val_acc=0.871]
 * Epochs count from 0 as trainer.current_epoch and the checkpoint names do ("Epoch 0/2" is
 * the first of 3, as Lightning's rich bar writes it). A standalone validate / test line
 * shows only the metrics that loop logged (no training values from an earlier fit).
 * validation and the sanity check borrow the line while they run, and each epoch ends with
 * a newline. Not a terminal (a log file, CI): a plain line every ~10% of the epoch, one at
 * epoch end, and one per validation run; test and predict ("Predicting: 12/834 [...]") a line
 * every ~10% and one at their end. Metrics logged with VOLT_LOG_PROG_BAR are
 * shown (latest values, "%.3g" as tqdm shows them). Several evaluation loaders: a line each,
 * "Validation DataLoader 1: ..." as Lightning's (the stage's metrics on the last one's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "volt/trainer.h"
#include "callbacks/progress_bar.h"

/* ---- progress bar text ------------------------------------------------------------------------- */

void volt__cb_fmt_duration(double secs, char *out, size_t n) {
    if (!(secs >= 0) || !isfinite(secs) || secs > 1e9) { snprintf(out, n, "?"); return; }
    long long s = (long long)secs;
    long long h = s / 3600, m = (s / 60) % 60, r = s % 60;
    if (h) snprintf(out, n, "%lld:%02lld:%02lld", h, m, r);
    else snprintf(out, n, "%02lld:%02lld", m, r);
}

size_t volt__cb_progress_line(char *out, size_t n, const char *prefix, int64_t done, int64_t total,
                             int64_t start, double elapsed, const char *postfix) {
    if (!n) return 0;
    char el[32], rem[32], rate[32];
    volt__cb_fmt_duration(elapsed, el, sizeof el);
    int64_t timed = done - (start > 0 ? start : 0);
    double r = elapsed > 0 && timed > 0 ? (double)timed / elapsed : 0;
    if (r <= 0) snprintf(rate, sizeof rate, "?it/s");
    else if (r < 1) snprintf(rate, sizeof rate, "%.2fs/it", 1.0 / r);
    else snprintf(rate, sizeof rate, r >= 100 ? "%.0fit/s" : r >= 10 ? "%.1fit/s" : "%.2fit/s", r);
    const char *pf = postfix && *postfix ? postfix : NULL;
    int len;
    if (total > 0) {
        if (r > 0) volt__cb_fmt_duration((double)(total - done) / r, rem, sizeof rem);
        else snprintf(rem, sizeof rem, "?");
        len = snprintf(out, n, "%s: %lld/%lld [%s<%s, %s%s%s]", prefix, (long long)done,
                       (long long)total, el, rem, rate, pf ? ", " : "", pf ? pf : "");
    } else {
        len = snprintf(out, n, "%s: %lld [%s, %s%s%s]", prefix, (long long)done, el, rate,
                       pf ? ", " : "", pf ? pf : "");
    }
    if (len < 0) { out[0] = 0; return 0; }
    return (size_t)len < n ? (size_t)len : n - 1;
}

typedef struct pb {
    bool tty;
    bool on_screen;          /* a TTY line without its newline yet */
    double t0, v0;           /* train epoch / eval loop start */
    int64_t start, vstart;   /* first batch index of the epoch / loop (resumed epochs) */
    int64_t last_done;       /* train batches done so far this epoch */
    double last_draw;
    int decile, vdecile;
    bool in_epoch;
    int vdl;                 /* the evaluation loader the line is of (several: a line each) */
    int64_t vdone;           /* its batches done */
} pb;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool pb_off(const volt_trainer *t) { return !volt_trainer_is_global_zero(t); }

static void pb_postfix(const volt_trainer *t, char *out, size_t n) {
    size_t k = 0;
    out[0] = 0;
    int cnt = volt_trainer_metric_count(t);
    for (int i = 0; i < cnt && k < n; i++) {
        double v;
        unsigned fl = 0;
        const char *nm = volt_trainer_metric_name(t, i, &v, &fl);
        if (!nm || !(fl & VOLT_LOG_PROG_BAR)) continue;
        int w = snprintf(out + k, n - k, "%s%s=%.3g", k ? ", " : "", nm, v);
        if (w < 0) break;
        k += (size_t)w;
    }
    if (k >= n) out[n - 1] = 0;
}

static void pb_emit(pb *p, const char *line, bool final) {
    if (p->tty) {
        fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
        p->on_screen = !final;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

static void pb_train_line(pb *p, const volt_trainer *t, int64_t done, char *line, size_t n) {
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    char prefix[64], post[1024];
    int64_t ep = volt_trainer_current_epoch(t);
    if (cfg && cfg->max_epochs > 0) snprintf(prefix, sizeof prefix, "Epoch %lld/%lld", (long long)ep, (long long)cfg->max_epochs - 1);
    else snprintf(prefix, sizeof prefix, "Epoch %lld", (long long)ep);
    pb_postfix(t, post, sizeof post);
    volt__cb_progress_line(line, n, prefix, done, volt_trainer_num_train_batches(t), p->start,
                          now_s() - p->t0, post);
}

typedef struct postbuf { char *out; size_t n, k; } postbuf;

static void post_visit(void *ctx, const char *name, double value, unsigned flags) {
    postbuf *b = ctx;
    if (!(flags & VOLT_LOG_PROG_BAR) || b->k >= b->n) return;
    int w = snprintf(b->out + b->k, b->n - b->k, "%s%s=%.3g", b->k ? ", " : "", name, value);
    if (w > 0) b->k += (size_t)w;
    if (b->k >= b->n) { b->k = b->n; b->out[b->n - 1] = 0; }
}

/* metrics: the prog-bar metrics this loop made fresh (its epoch means), nothing older */
static void pb_eval_line(pb *p, const volt_trainer *t, const char *prefix, int64_t done, bool metrics,
                         char *line, size_t n) {
    char post[1024] = "";
    if (metrics) {
        postbuf b = { post, sizeof post, 0 };
        volt_trainer_visit_fresh_metrics(t, post_visit, &b);
    }
    volt__cb_progress_line(line, n, prefix, done, volt_trainer_num_eval_batches(t), p->vstart,
                          now_s() - p->v0, post);
}

/* With several evaluation loaders each has its line, "Validation DataLoader 1" as Lightning's. */
static const char *eval_prefix_of(const volt_trainer *t, int dl, char *buf, size_t n) {
    const volt_stage st = volt_trainer_stage(t);
    const char *what = volt_trainer_sanity_checking(t) ? "Sanity Checking" : st == VOLT_STAGE_TEST ? "Testing"
                     : st == VOLT_STAGE_PREDICT ? "Predicting" : "Validation";
    if (volt_trainer_num_eval_dataloaders(t) > 1) snprintf(buf, n, "%s DataLoader %d", what, dl);
    else snprintf(buf, n, "%s", what);
    return buf;
}

/* ---- training ------------------------------------------------------------------------------- */

static volt_status pb_on_train_epoch_start(void *self, volt_trainer *t) {
    pb *p = self;
    p->t0 = now_s();
    p->start = volt_trainer_batch_in_epoch(t);
    p->last_done = p->start;
    p->decile = 0;
    p->last_draw = 0;
    p->in_epoch = true;
    return VOLT_OK;
}

static volt_status pb_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    pb *p = self;
    if (pb_off(t)) return VOLT_OK;
    int64_t done = i + 1, total = volt_trainer_num_train_batches(t);
    p->last_done = done;
    char line[1400];
    if (p->tty) {
        double now = now_s();
        if (now - p->last_draw < 0.1 && done != total) return VOLT_OK;
        p->last_draw = now;
        pb_train_line(p, t, done, line, sizeof line);
        pb_emit(p, line, false);
    } else if (total > 0) {
        int dec = (int)(done * 10 / total);
        if (dec > p->decile && done < total) {
            p->decile = dec;
            pb_train_line(p, t, done, line, sizeof line);
            pb_emit(p, line, false);
        }
    }
    return VOLT_OK;
}

static volt_status pb_on_train_epoch_end(void *self, volt_trainer *t) {
    pb *p = self;
    if (pb_off(t) || !p->in_epoch) return VOLT_OK;
    char line[1400];
    pb_train_line(p, t, p->last_done, line, sizeof line);
    pb_emit(p, line, true);
    p->in_epoch = false;
    return VOLT_OK;
}

static volt_status pb_on_fit_end(void *self, volt_trainer *t) {
    pb *p = self;
    if (!pb_off(t) && p->tty && p->on_screen) { fputc('\n', stderr); p->on_screen = false; }
    p->in_epoch = false;
    return VOLT_OK;
}

/* ---- validation / test ----------------------------------------------------------------------- */

static void pb_eval_start(pb *p) {
    p->v0 = now_s();
    p->vstart = 0;
    p->vdecile = 0;
    p->last_draw = 0;
    p->vdl = 0;
    p->vdone = 0;
}

/* The first batch of another loader ends the last loader's line (its total, no metrics: they
 * come at the stage's end), and the next starts. */
static volt_status pb_on_eval_batch_start(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    (void)b;
    pb *p = self;
    const int dl = volt_trainer_dataloader_idx(t);
    if (i != 0 || dl == p->vdl) return VOLT_OK;
    /* inside fit a terminal's line goes back to the epoch; a log gets every loader's line */
    if (!pb_off(t) && !volt_trainer_sanity_checking(t) && (volt_trainer_state_fn(t) != VOLT_FN_FIT || !p->tty)) {
        char line[1400], pfx[64];
        eval_prefix_of(t, p->vdl, pfx, sizeof pfx);
        volt__cb_progress_line(line, sizeof line, pfx, p->vdone, p->vdone, p->vstart, now_s() - p->v0, "");
        pb_emit(p, line, true);
    }
    pb_eval_start(p);
    p->vdl = dl;
    return VOLT_OK;
}


static volt_status pb_on_eval_start(void *self, volt_trainer *t) {
    pb_eval_start(self);
    return VOLT_OK;
}

static volt_status pb_on_eval_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    pb *p = self;
    if (pb_off(t)) return VOLT_OK;
    int64_t done = i + 1, total = volt_trainer_num_eval_batches(t);
    p->vdone = done;
    char line[1400], pfx[64];
    if (p->tty) {
        double now = now_s();
        if (now - p->last_draw < 0.1 && done != total) return VOLT_OK;
        p->last_draw = now;
        eval_prefix_of(t, volt_trainer_dataloader_idx(t), pfx, sizeof pfx);
        pb_eval_line(p, t, pfx, done, false, line, sizeof line);
        pb_emit(p, line, false);
    } else if ((volt_trainer_stage(t) == VOLT_STAGE_TEST || volt_trainer_stage(t) == VOLT_STAGE_PREDICT) && total > 0) {
        int dec = (int)(done * 10 / total);
        if (dec > p->vdecile && done < total) {
            p->vdecile = dec;
            eval_prefix_of(t, volt_trainer_dataloader_idx(t), pfx, sizeof pfx);
        pb_eval_line(p, t, pfx, done, false, line, sizeof line);
            pb_emit(p, line, false);
        }
    }
    return VOLT_OK;
}

/* A finished validation inside fit hands the line back to the epoch (its metrics show on
 * the epoch line); a standalone validate / test ends with its metrics on their own line. */
static volt_status pb_eval_end(pb *p, volt_trainer *t) {
    if (pb_off(t)) return VOLT_OK;
    int64_t total = volt_trainer_num_eval_batches(t);
    char line[1400], pfx[64];
    const bool in_fit = volt_trainer_state_fn(t) == VOLT_FN_FIT;   /* its stage is VALIDATE */
    if (volt_trainer_sanity_checking(t)) {
        if (p->tty && p->on_screen) { fprintf(stderr, "\r\033[K"); p->on_screen = false; }
        return VOLT_OK;
    }
    if (p->tty && in_fit) {
        if (p->in_epoch) {
            pb_train_line(p, t, p->last_done, line, sizeof line);
            pb_emit(p, line, false);
        } else if (p->on_screen) {
            fprintf(stderr, "\r\033[K");
            p->on_screen = false;
        }
        return VOLT_OK;
    }
    eval_prefix_of(t, volt_trainer_dataloader_idx(t), pfx, sizeof pfx);
    pb_eval_line(p, t, pfx, total > 0 ? total : 0, !in_fit, line, sizeof line);
    pb_emit(p, line, true);
    return VOLT_OK;
}

static volt_status pb_on_validation_end(void *self, volt_trainer *t) { return pb_eval_end(self, t); }
static volt_status pb_on_test_start(void *self, volt_trainer *t) { return pb_on_eval_start(self, t); }

static volt_status pb_on_test_end(void *self, volt_trainer *t) { return pb_eval_end(self, t); }
static volt_status pb_on_predict_batch_end(void *self, volt_trainer *t, const volt_tensor *pred, const volt_batch *b,
                                           int64_t i) {
    (void)pred;
    return pb_on_eval_batch_end(self, t, b, i);
}

static void pb_destroy(void *self) { free(self); }

static const volt_callback_ops pb_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "ProgressBar",
    .on_fit_end = pb_on_fit_end,
    .on_sanity_check_start = pb_on_eval_start,
    .on_train_epoch_start = pb_on_train_epoch_start,
    .on_train_epoch_end = pb_on_train_epoch_end,
    .on_train_batch_end = pb_on_train_batch_end,
    .on_validation_start = pb_on_eval_start,
    .on_validation_end = pb_on_validation_end,
    .on_validation_batch_end = pb_on_eval_batch_end,
    .on_validation_batch_start = pb_on_eval_batch_start,
    .on_test_batch_start = pb_on_eval_batch_start,
    .on_predict_batch_start = pb_on_eval_batch_start,
    .on_test_start = pb_on_test_start,
    .on_test_end = pb_on_test_end,
    .on_test_batch_end = pb_on_eval_batch_end,
    .destroy = pb_destroy,
    .on_predict_start = pb_on_test_start,   /* a line of its own, as test's */
    .on_predict_batch_end = pb_on_predict_batch_end,
    .on_predict_end = pb_on_test_end,
};

volt_status volt_add_progress_bar(volt_trainer *t) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    pb *p = calloc(1, sizeof *p);
    if (!p) return VOLT_ERR_NOMEM;
    p->tty = isatty(fileno(stderr)) == 1;
    return volt_trainer_add_callback(t, &pb_ops, p);
}
