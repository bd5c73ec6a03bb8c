/* CSVLogger: <default_root_dir>/<logger_name>/version_N/metrics.csv (+ config.json with every
 * trainer setting, trainer/config_fields.h, and hparams.json with the app's run_config_json), rank 0 only.
 *
 * The logger picks version_N (1 + the largest existing N) and tells the trainer with
 * volt_trainer_set_log_dir, unless the trainer already has a log dir (a resumed run keeps
 * its checkpoint's folder): then metrics.csv is appended to, never truncated. Rows:
 * every log_every_n_steps optimizer steps (the step's fresh metrics), at train epoch end
 * (epoch means) and after each validation / test run. Columns: epoch, step, then the
 * metric names sorted; the step column is Lightning's: the index of the last optimizer
 * step (global_step - 1) during fit, global_step in validate / test. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "core/err.h"
#include "volt/trainer.h"
#include "callbacks/csv_logger.h"
#include "callbacks/util.h"
#include "trainer/config_fields.h"

/* ---- metrics.csv ------------------------------------------------------------------------------- */

static void free_cells(char **c, int n) {
    for (int i = 0; i < n; i++) free(c[i]);
    free(c);
}

static void put_cell(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void put_header(FILE *f, const volt_cb_csv *c) {
    for (int i = 0; i < c->ncols; i++) {
        if (i) fputc(',', f);
        put_cell(f, c->cols[i]);
    }
    fputc('\n', f);
}

/* One line of a file into a growing buffer (without the newline); false at EOF. */
static bool read_line(FILE *f, char **buf, size_t *cap) {
    size_t k = 0;
    int ch;
    if (!*buf) { *cap = 256; if (!(*buf = malloc(*cap))) return false; }
    while ((ch = fgetc(f)) != EOF && ch != '\n') {
        if (k + 2 > *cap) {
            char *b = realloc(*buf, *cap * 2);
            if (!b) return false;
            *buf = b;
            *cap *= 2;
        }
        (*buf)[k++] = (char)ch;
    }
    if (k && (*buf)[k - 1] == '\r') k--;
    (*buf)[k] = 0;
    return ch != EOF || k > 0;
}

volt_status volt__cb_csv_open(volt_cb_csv *c, const char *path, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (!(c->path = strdup(path))) return VOLT_ERR_NOMEM;
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    if (f && read_line(f, &line, &cap) && line[0]) {
        char **cells;
        int n = volt__cb_csv_split(line, &cells);
        fclose(f);
        free(line);
        if (n < 0) {
            snprintf(err, errlen, "'%s': cannot parse the header line", path);
            volt__cb_csv_close(c);
            return VOLT_ERR_CORRUPT;
        }
        c->cols = cells;
        c->ncols = n;
        c->on_disk = true;
        return VOLT_OK;
    }
    if (f) fclose(f);
    free(line);
    static const char *const base[] = { "epoch", "step" };
    if (!(c->cols = calloc(2, sizeof *c->cols))) { volt__cb_csv_close(c); return VOLT_ERR_NOMEM; }
    for (int i = 0; i < 2; i++)
        if (!(c->cols[c->ncols++] = strdup(base[i]))) { volt__cb_csv_close(c); return VOLT_ERR_NOMEM; }
    return VOLT_OK;
}

void volt__cb_csv_close(volt_cb_csv *c) {
    if (!c) return;
    free_cells(c->cols, c->ncols);
    free(c->path);
    memset(c, 0, sizeof *c);
}

static int col_index(const volt_cb_csv *c, const char *name) {
    for (int i = 0; i < c->ncols; i++)
        if (strcmp(c->cols[i], name) == 0) return i;
    return -1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Rewrite the file with the current (wider) header: each old row's cells move under their
 * column's new position. Atomic: path.tmp, then rename. */
static volt_status csv_rewrite(volt_cb_csv *c, char *err, size_t errlen) {
    char tmp[VOLT_CB_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", c->path);
    FILE *in = fopen(c->path, "r");
    if (!in) { snprintf(err, errlen, "cannot read '%s': %s", c->path, strerror(errno)); return VOLT_ERR_IO; }
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        snprintf(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
        return VOLT_ERR_IO;
    }
    volt_status st = VOLT_OK;
    char *line = NULL, **old = NULL;
    size_t cap = 0;
    int nold = -1;
    int *map = NULL;
    if (!read_line(in, &line, &cap) || (nold = volt__cb_csv_split(line, &old)) < 0) {
        snprintf(err, errlen, "'%s': cannot parse the header line", c->path);
        st = VOLT_ERR_CORRUPT;
    } else if (!(map = malloc((size_t)(nold ? nold : 1) * sizeof *map))) {
        st = VOLT_ERR_NOMEM;
    } else {
        for (int i = 0; i < nold; i++) map[i] = col_index(c, old[i]);
        put_header(out, c);
        const char **row = calloc((size_t)c->ncols, sizeof *row);
        if (!row) st = VOLT_ERR_NOMEM;
        while (st == VOLT_OK && read_line(in, &line, &cap)) {
            if (!line[0]) continue;
            char **cells;
            int n = volt__cb_csv_split(line, &cells);
            if (n < 0) { snprintf(err, errlen, "'%s': cannot parse a row", c->path); st = VOLT_ERR_CORRUPT; break; }
            for (int i = 0; i < c->ncols; i++) row[i] = "";
            for (int i = 0; i < n && i < nold; i++)
                if (map[i] >= 0) row[map[i]] = cells[i];
            for (int i = 0; i < c->ncols; i++) {
                if (i) fputc(',', out);
                put_cell(out, row[i]);
            }
            fputc('\n', out);
            free_cells(cells, n);
        }
        free(row);
    }
    if (old) free_cells(old, nold);
    free(map);
    free(line);
    fclose(in);
    if (fflush(out) != 0 || ferror(out)) {
        if (st == VOLT_OK) { snprintf(err, errlen, "cannot write '%s'", tmp); st = VOLT_ERR_IO; }
    }
    fclose(out);
    if (st == VOLT_OK && rename(tmp, c->path) != 0) {
        snprintf(err, errlen, "cannot rename '%s': %s", tmp, strerror(errno));
        st = VOLT_ERR_IO;
    }
    if (st != VOLT_OK) remove(tmp);
    return st;
}

volt_status volt__cb_csv_write_row(volt_cb_csv *c, int64_t epoch, int64_t step, int n,
                                  const char *const *names, const double *vals, char *err, size_t errlen) {
    int added = 0;
    for (int i = 0; i < n; i++) {
        if (!names[i] || strcmp(names[i], "epoch") == 0 || strcmp(names[i], "step") == 0) continue;
        if (col_index(c, names[i]) >= 0) continue;
        char **cols = realloc(c->cols, (size_t)(c->ncols + 1) * sizeof *cols);
        if (!cols) return VOLT_ERR_NOMEM;
        c->cols = cols;
        if (!(c->cols[c->ncols] = strdup(names[i]))) return VOLT_ERR_NOMEM;
        c->ncols++;
        added++;
    }
    if (added) {
        /* epoch, step stay in front (where they are); the metric columns are sorted. */
        int lead = 0;
        while (lead < c->ncols && (strcmp(c->cols[lead], "epoch") == 0 || strcmp(c->cols[lead], "step") == 0)) lead++;
        qsort(c->cols + lead, (size_t)(c->ncols - lead), sizeof *c->cols, cmp_str);
        if (c->on_disk) VOLT_TRY(csv_rewrite(c, err, errlen));
    }
    FILE *f = fopen(c->path, c->on_disk ? "a" : "w");
    if (!f) { snprintf(err, errlen, "cannot write '%s': %s", c->path, strerror(errno)); return VOLT_ERR_IO; }
    if (!c->on_disk) put_header(f, c);
    for (int j = 0; j < c->ncols; j++) {
        if (j) fputc(',', f);
        char num[64] = "";
        if (strcmp(c->cols[j], "epoch") == 0) snprintf(num, sizeof num, "%lld", (long long)epoch);
        else if (strcmp(c->cols[j], "step") == 0) snprintf(num, sizeof num, "%lld", (long long)step);
        else
            for (int i = n - 1; i >= 0; i--)           /* the last value given for a name wins */
                if (names[i] && strcmp(names[i], c->cols[j]) == 0) { volt__cb_repr(vals[i], num, sizeof num); break; }
        fputs(num, f);
    }
    fputc('\n', f);
    bool bad = fflush(f) != 0 || ferror(f);
    if (fclose(f) != 0 || bad) { snprintf(err, errlen, "cannot write '%s'", c->path); return VOLT_ERR_IO; }
    c->on_disk = true;
    return VOLT_OK;
}

/* ---- the logger callback ----------------------------------------------------------------------- */

/* A row being collected from visited metrics. */
typedef struct rowbuf {
    int n, cap;
    char **names;
    double *vals;
    volt_status err;
    unsigned need;                   /* visit only metrics with one of these flags (0 = all) */
} rowbuf;

typedef struct csvl {
    volt_cb_csv csv;
    char *dir;                       /* the log dir metrics.csv lives in, NULL until opened */
    rowbuf row;
    rowbuf stash;                    /* the train epoch means, while the epoch-end validation runs */
    rowbuf valrow;                   /* the names of the last validation row */
    int64_t last_row_step;
    bool val_after_batch;            /* a validation ran since the last train batch */
    bool warned;                     /* the log_every_n_steps warning was printed */
} csvl;

static void row_visit(void *ctx, const char *name, double value, unsigned flags) {
    rowbuf *r = ctx;
    if (r->err || (flags & VOLT_LOG_NO_LOGGER) || !name || (r->need && !(flags & r->need))) return;
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->names[i], name) == 0) { r->vals[i] = value; return; }
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 16;
        char **nm = realloc(r->names, (size_t)cap * sizeof *nm);
        if (nm) r->names = nm;
        double *v = realloc(r->vals, (size_t)cap * sizeof *v);
        if (v) r->vals = v;
        if (!nm || !v) { r->err = VOLT_ERR_NOMEM; return; }
        r->cap = cap;
    }
    if (!(r->names[r->n] = strdup(name))) { r->err = VOLT_ERR_NOMEM; return; }
    r->vals[r->n++] = value;
}

static void row_reset(rowbuf *r) {
    for (int i = 0; i < r->n; i++) free(r->names[i]);
    r->n = 0;
    r->err = VOLT_OK;
}

static void row_free(rowbuf *r) {
    row_reset(r);
    free(r->names);
    free(r->vals);
}

static bool csvl_disabled(const volt_trainer *t) {
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    return cfg && cfg->fast_dev_run > 0;
}

static char *hparams_json(const char *run) {
    cJSON *o = run ? cJSON_Parse(run) : NULL;
    if (!o) {                        /* none, or not JSON: keep the text as a string */
        o = cJSON_CreateObject();
        if (o && run) cJSON_AddStringToObject(o, "run_config", run);
    }
    char *s = o ? volt__cb_json_print(o, true) : NULL;   /* numbers as the run had them */
    cJSON_Delete(o);
    return s;
}

static volt_status csvl_write_json(volt_trainer *t, const char *dir, const char *name, char *text) {
    if (!text) return VOLT_ERR_NOMEM;
    char path[VOLT_CB_PATH_MAX], err[VOLT_CB_PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    volt_status st = volt__cb_write_text(path, text, err, sizeof err);
    free(text);
    return st == VOLT_OK ? st : volt_trainer_fail(t, st, "CSVLogger: %s", err);
}

/* Make sure the run has a log dir and (rank 0) metrics.csv is open in it. */
static volt_status csvl_open(csvl *l, volt_trainer *t) {
    if (csvl_disabled(t)) return VOLT_OK;
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    const char *ld = volt_trainer_log_dir(t);
    if (!ld) {
        const char *root = cfg && cfg->default_root_dir ? cfg->default_root_dir : ".";
        const char *name = cfg && cfg->logger_name ? cfg->logger_name : "lightning_logs";
        char lroot[VOLT_CB_PATH_MAX], dir[VOLT_CB_PATH_MAX + 32];
        snprintf(lroot, sizeof lroot, "%s/%s", root, name);
        snprintf(dir, sizeof dir, "%s/version_%d", lroot, volt__cb_next_version(lroot));
        VOLT_TRY(volt_trainer_set_log_dir(t, dir));
        ld = volt_trainer_log_dir(t);
        if (!ld) return volt_trainer_fail(t, VOLT_ERR_STATE, "CSVLogger: the trainer kept no log dir");
    }
    if (!volt_trainer_is_global_zero(t)) return VOLT_OK;
    char err[VOLT_CB_PATH_MAX + 128];
    volt_status st = volt__mkdirs(ld, err, sizeof err);
    if (st != VOLT_OK) return volt_trainer_fail(t, st, "CSVLogger: %s", err);
    if (!l->dir || strcmp(l->dir, ld) != 0) {
        volt__cb_csv_close(&l->csv);
        free(l->dir);
        if (!(l->dir = strdup(ld))) return VOLT_ERR_NOMEM;
        char path[VOLT_CB_PATH_MAX];
        snprintf(path, sizeof path, "%s/metrics.csv", ld);
        st = volt__cb_csv_open(&l->csv, path, err, sizeof err);
        if (st != VOLT_OK) {
            free(l->dir);
            l->dir = NULL;
            return volt_trainer_fail(t, st, "CSVLogger: %s", err);
        }
    }
    if (cfg) {
        VOLT_TRY(csvl_write_json(t, ld, "config.json", volt__trainer_config_json(cfg)));
        VOLT_TRY(csvl_write_json(t, ld, "hparams.json", hparams_json(cfg->run_config_json)));
    }
    return VOLT_OK;
}

/* Write r as one row (nothing when it is empty), then empty it. */
static volt_status csvl_write(csvl *l, volt_trainer *t, rowbuf *r, int64_t step) {
    volt_status st = r->err;
    if (st == VOLT_OK && r->n > 0 && l->dir) {
        char err[VOLT_CB_PATH_MAX + 128];
        st = volt__cb_csv_write_row(&l->csv, volt_trainer_current_epoch(t), step < 0 ? 0 : step, r->n,
                                   (const char *const *)r->names, r->vals, err, sizeof err);
        if (st != VOLT_OK) st = volt_trainer_fail(t, st, "CSVLogger: %s", err);
    }
    row_reset(r);
    return st;
}

/* The fresh metrics as one row. */
static volt_status csvl_row(csvl *l, volt_trainer *t, int64_t step) {
    if (csvl_disabled(t) || !volt_trainer_is_global_zero(t) || !l->dir) return VOLT_OK;
    row_reset(&l->row);
    volt_trainer_visit_fresh_metrics(t, row_visit, &l->row);
    return csvl_write(l, t, &l->row, step);
}

static volt_status csvl_on_fit_start(void *self, volt_trainer *t) {
    csvl *l = self;
    l->last_row_step = -1;
    l->val_after_batch = false;
    row_reset(&l->stash);
    return csvl_open(l, t);
}

static volt_status csvl_on_test_start(void *self, volt_trainer *t) { return csvl_open(self, t); }

/* predict as test: a row at the end with what its epoch-end hooks logged (ThroughputMonitor's
 * predict keys; the loop keeps no epoch means for predict). Lightning's loggers take the
 * monitor's predict metrics too. */
static volt_status csvl_on_predict_start(void *self, volt_trainer *t) { return csvl_on_test_start(self, t); }

/* Inside fit (volt_trainer_state_fn FIT; its validation runs with stage VALIDATE), the
 * epoch-end validation starts right after the train epoch means became the fresh metrics, and
 * it replaces them: keep them for the epoch row. (A mid-epoch validation finds only step values
 * fresh, which have no VOLT_LOG_EPOCH flag.) */
static volt_status csvl_on_validation_start(void *self, volt_trainer *t) {
    csvl *l = self;
    if (volt_trainer_state_fn(t) != VOLT_FN_FIT) return csvl_open(l, t);
    if (volt_trainer_sanity_checking(t) || !volt_trainer_is_global_zero(t)) return VOLT_OK;
    row_reset(&l->stash);
    l->stash.need = VOLT_LOG_EPOCH;
    volt_trainer_visit_fresh_metrics(t, row_visit, &l->stash);
    return l->stash.err;
}

static volt_status csvl_on_validation_end(void *self, volt_trainer *t) {
    csvl *l = self;
    if (volt_trainer_sanity_checking(t)) return VOLT_OK;
    int64_t gs = volt_trainer_global_step(t);
    const bool in_fit = volt_trainer_state_fn(t) == VOLT_FN_FIT;
    if (in_fit) {
        l->val_after_batch = true;
        row_reset(&l->valrow);
        volt_trainer_visit_fresh_metrics(t, row_visit, &l->valrow);
    }
    return csvl_row(l, t, in_fit ? gs - 1 : gs);
}

/* Lightning's warning: with fewer optimizer steps per epoch than log_every_n_steps, no step
 * row (train_loss) is ever written, and nothing else would say why. */
static volt_status csvl_on_train_epoch_start(void *self, volt_trainer *t) {
    csvl *l = self;
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    if (l->warned || csvl_disabled(t) || !cfg || !volt_trainer_is_global_zero(t)) return VOLT_OK;
    int64_t nb = volt_trainer_num_train_batches(t), acc = cfg->accumulate_grad_batches > 0 ? cfg->accumulate_grad_batches : 1;
    int64_t steps = (nb + acc - 1) / acc;
    if (nb > 0 && steps < cfg->log_every_n_steps) {
        l->warned = true;
        fprintf(stderr, "warning: The number of training batches (%lld) is smaller than the logging interval "
                        "log_every_n_steps=%lld: no per-step rows (train_loss) reach metrics.csv. Set a lower value "
                        "for log_every_n_steps (--trainer.log_every_n_steps) if you want to see logs for the training "
                        "epoch.\n",
                (long long)steps, (long long)cfg->log_every_n_steps);
    }
    return VOLT_OK;
}

static volt_status csvl_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    csvl *l = self;
    l->val_after_batch = false;
    row_reset(&l->stash);
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    int64_t gs = volt_trainer_global_step(t), n = cfg ? cfg->log_every_n_steps : 50;
    if (n <= 0 || gs <= 0 || gs == l->last_row_step || gs % n != 0) return VOLT_OK;
    l->last_row_step = gs;
    return csvl_row(l, t, gs - 1);
}

/* The epoch row: without a validation since the last batch, the fresh metrics (the epoch
 * means). After one, the means kept at its start plus any epoch metric made fresh since
 * that was not in the validation's own row (so it works whichever comes first). */
static volt_status csvl_on_train_epoch_end(void *self, volt_trainer *t) {
    csvl *l = self;
    int64_t step = volt_trainer_global_step(t) - 1;
    if (!l->val_after_batch) return csvl_row(l, t, step);
    l->val_after_batch = false;
    if (csvl_disabled(t) || !volt_trainer_is_global_zero(t) || !l->dir) { row_reset(&l->stash); return VOLT_OK; }
    row_reset(&l->row);
    l->row.need = VOLT_LOG_EPOCH;
    volt_trainer_visit_fresh_metrics(t, row_visit, &l->row);
    l->row.need = 0;
    for (int i = 0; i < l->row.n && l->stash.err == VOLT_OK; i++) {
        bool in_val = false;
        for (int j = 0; j < l->valrow.n && !in_val; j++) in_val = !strcmp(l->row.names[i], l->valrow.names[j]);
        if (!in_val) row_visit(&l->stash, l->row.names[i], l->row.vals[i], VOLT_LOG_EPOCH);
    }
    row_reset(&l->row);
    row_reset(&l->valrow);
    return csvl_write(l, t, &l->stash, step);
}

static volt_status csvl_on_test_end(void *self, volt_trainer *t) {
    return csvl_row(self, t, volt_trainer_global_step(t));
}

static volt_status csvl_on_predict_end(void *self, volt_trainer *t) { return csvl_on_test_end(self, t); }

static void csvl_destroy(void *self) {
    csvl *l = self;
    if (!l) return;
    row_free(&l->row);
    row_free(&l->stash);
    row_free(&l->valrow);
    free(l->dir);
    volt__cb_csv_close(&l->csv);
    free(l);
}

static const volt_callback_ops csvl_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "CSVLogger",
    .on_fit_start = csvl_on_fit_start,
    .on_train_epoch_start = csvl_on_train_epoch_start,
    .on_train_batch_end = csvl_on_train_batch_end,
    .on_train_epoch_end = csvl_on_train_epoch_end,
    .on_validation_start = csvl_on_validation_start,
    .on_validation_end = csvl_on_validation_end,
    .on_test_start = csvl_on_test_start,
    .on_test_end = csvl_on_test_end,
    .on_predict_start = csvl_on_predict_start,
    .on_predict_end = csvl_on_predict_end,
    .destroy = csvl_destroy,
};

volt_status volt_add_csv_logger(volt_trainer *t) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    csvl *l = calloc(1, sizeof *l);
    if (!l) return VOLT_ERR_NOMEM;
    l->last_row_step = -1;
    return volt_trainer_add_callback(t, &csvl_ops, l);
}
