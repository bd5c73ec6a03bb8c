/* callbacks/fmt.h — the pure logic of the built-in callbacks, kept apart from the hooks so
 * tests can drive it directly (tests include "callbacks/fmt.h"). Private to callbacks/ and
 * tests/: not installed, not part of the public API. Nothing here touches a volt_trainer. */
#ifndef VOLT_CALLBACKS_FMT_H
#define VOLT_CALLBACKS_FMT_H

#include <stdio.h>
#include "volt/trainer.h"

#define VOLT_CB_PATH_MAX 4096

/* ---- numbers ------------------------------------------------------------------------------ */
/* Python's repr(float): the shortest string that reads back to v ("0.1", "2.0", "1e-05",
 * "1e+16", "nan", "inf", "-inf"). What Lightning's CSV logger writes for a float. */
void volt_cb_repr(double v, char *out, size_t n);
/* Format v with a Python format spec ("" = repr for floats, plain for ints; ".4f", "03d",
 * "+.2e", ".1%" ...). Supported: [sign][0][width][.precision][type], type one of
 * d e E f F g G %. is_int: v is an integer (epoch, step), as Python formats an int. */
volt_status volt_cb_format_number(double v, bool is_int, const char *spec, char *out, size_t n);

/* ---- ModelCheckpoint file names ------------------------------------------------------------- */
/* Looks a template name up: true with *v (and *is_int for epoch/step) when known. */
typedef bool (*volt_cb_lookup_fn)(void *ctx, const char *name, double *v, bool *is_int);
/* Lightning's format_checkpoint_name with auto_insert_metric_name: "{epoch}-{val_acc:.4f}" ->
 * "epoch=2-val_acc=0.8812"; a name the lookup does not know formats as the integer 0 (as
 * Lightning does); "{{" / "}}" are literal braces; ver > 0 appends "-v<ver>". No directory,
 * no extension. INVALID_ARG (message in err) for an unbalanced brace, a bad spec, a name
 * with '/' or a result that does not fit. */
volt_status volt_cb_format_name(const char *tmpl, volt_cb_lookup_fn lookup, void *ctx, int ver,
                                char *out, size_t n, char *err, size_t errlen);

/* ---- top-k bookkeeping ------------------------------------------------------------------------ */
typedef struct volt_cb_topk_entry { char *path; double score; } volt_cb_topk_entry;
/* The kept checkpoints in the order they were saved (earlier first). */
typedef struct volt_cb_topk { volt_cb_topk_entry *e; int n, cap; } volt_cb_topk;

/* NaN is stored as the worst value (+inf for min, -inf for max), as Lightning does. */
double volt_cb_topk_sanitize(double score, volt_mode mode);
/* Strictly better under mode (ties are not better: the earlier checkpoint stays). */
bool volt_cb_better(double a, double b, volt_mode mode);
/* Would a checkpoint scoring `score` enter a top-k of size k (-1 = all, 0 = none)? */
bool volt_cb_topk_should_save(const volt_cb_topk *tk, int k, volt_mode mode, double score);
/* Index of the best (earliest among ties) / worst (latest among ties); -1 when empty. */
int volt_cb_topk_best(const volt_cb_topk *tk, volt_mode mode);
int volt_cb_topk_worst(const volt_cb_topk *tk, volt_mode mode);
int volt_cb_topk_find(const volt_cb_topk *tk, const char *path);
volt_status volt_cb_topk_push(volt_cb_topk *tk, const char *path, double score);   /* copies path */
/* Remove entry i; returns its path (the caller frees it). */
char *volt_cb_topk_take(volt_cb_topk *tk, int i);
void volt_cb_topk_clear(volt_cb_topk *tk);

/* ---- EarlyStopping decision ------------------------------------------------------------------ */
typedef struct volt_cb_es_state {
    double best;             /* +inf (min) / -inf (max) before the first check */
    int64_t wait;            /* checks without improvement since the last one */
    int64_t stopped_epoch;   /* epoch at which it asked to stop, 0 if it did not */
} volt_cb_es_state;
void volt_cb_es_init(volt_cb_es_state *st, volt_mode mode);
/* One check with the monitored value (Lightning's _evaluate_stopping_criteria): updates best
 * and wait; true = stop, with the reason in `reason` (when reason is non-NULL). */
bool volt_cb_es_update(const volt_early_stopping_config *cfg, volt_cb_es_state *st, double current,
                       char *reason, size_t n);

/* ---- progress bar text ------------------------------------------------------------------------- */
/* "mm:ss", or "h:mm:ss" from one hour; "?" for a negative or non-finite time. */
void volt_cb_fmt_duration(double secs, char *out, size_t n);
/* "<prefix>: 37/469 [00:12<02:41, 28.3it/s<, postfix>]" (total <= 0: "37 [00:12, 28.3it/s]";
 * under one item per second the rate reads "3.52s/it"). The rate counts the done - start
 * items of the `elapsed` seconds (start > 0: a resumed epoch). Returns the length written. */
size_t volt_cb_progress_line(char *out, size_t n, const char *prefix, int64_t done, int64_t total,
                             int64_t start, double elapsed, const char *postfix);

/* ---- files ----------------------------------------------------------------------------------- */
/* mkdir -p (0755). IO with a message in err on failure. */
volt_status volt_cb_mkdirs(const char *path, char *err, size_t errlen);
/* The next version number under root: 1 + the largest N of the "version_N" folders, 0 if none
 * (or if root does not exist), as Lightning's CSVLogger picks it. */
int volt_cb_next_version(const char *root);
/* Atomic small text file write (path.tmp, fsync, rename). */
volt_status volt_cb_write_text(const char *path, const char *text, char *err, size_t errlen);

/* ---- metrics.csv --------------------------------------------------------------------------------- */
/* An append-only CSV of rows "epoch,step,<metrics...>"; a row with a metric the header lacks
 * rewrites the file (atomically) with the wider header, old rows getting empty cells, as
 * Lightning's CSVLogger does. Metric columns are kept sorted by name. Opening an existing
 * file reads its header and appends after its rows (a resumed run keeps earlier rows). */
typedef struct volt_cb_csv {
    char *path;
    int ncols;               /* "epoch", "step", then the metric names */
    char **cols;
    bool on_disk;            /* the file exists with a header */
} volt_cb_csv;
volt_status volt_cb_csv_open(volt_cb_csv *c, const char *path, char *err, size_t errlen);
/* names[i] = vals[i] (names "epoch"/"step" are ignored: those columns come from the args). */
volt_status volt_cb_csv_write_row(volt_cb_csv *c, int64_t epoch, int64_t step, int n,
                                  const char *const *names, const double *vals, char *err, size_t errlen);
void volt_cb_csv_close(volt_cb_csv *c);
/* Split one CSV line (RFC 4180 quoting, no embedded newlines) into malloc'ed cells. Returns
 * the count, -1 on a quoting error or no memory. The caller frees cells[i] and *cells. */
int volt_cb_csv_split(const char *line, char ***cells);

/* CRC-32C (Castagnoli), as TFRecord framing uses it (callbacks/tensorboard.c). */
uint32_t volt_cb_crc32c(const void *data, size_t n);

#endif
