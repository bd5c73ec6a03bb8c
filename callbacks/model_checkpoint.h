/* callbacks/model_checkpoint.h — ModelCheckpoint's pure logic (callbacks/model_checkpoint_topk.c):
 * file-name templates and top-k bookkeeping. Private to callbacks/ and tests/: not installed,
 * not part of the public API. */
#ifndef VOLT_CALLBACKS_MODEL_CHECKPOINT_H
#define VOLT_CALLBACKS_MODEL_CHECKPOINT_H

#include <stdio.h>
#include "volt/trainer.h"

/* ---- ModelCheckpoint file names ------------------------------------------------------------- */
/* Looks a template name up: true with *v (and *is_int for epoch/step) when known. */
typedef bool (*volt_cb_lookup_fn)(void *ctx, const char *name, double *v, bool *is_int);
/* Lightning's format_checkpoint_name: "{epoch}-{val_acc:.4f}" -> "epoch=2-val_acc=0.8812"
 * with insert_names (auto_insert_metric_name), "2-0.8812" without; a name the lookup does not
 * know formats as the integer 0 (as Lightning does); "{{" / "}}" are literal braces; ver > 0
 * appends "-v<ver>". No directory, no extension. INVALID_ARG (message in err) for an
 * unbalanced brace, a bad spec, a name with '/' or a result that does not fit. */
volt_status volt__cb_format_name(const char *tmpl, volt_cb_lookup_fn lookup, void *ctx, int ver, bool insert_names,
                                char *out, size_t n, char *err, size_t errlen);

/* ---- top-k bookkeeping ------------------------------------------------------------------------ */
typedef struct volt_cb_topk_entry { char *path; double score; } volt_cb_topk_entry;
/* The kept checkpoints in the order they were saved (earlier first). */
typedef struct volt_cb_topk { volt_cb_topk_entry *e; int n, cap; } volt_cb_topk;

/* NaN is stored as the worst value (+inf for min, -inf for max), as Lightning does. */
double volt__cb_topk_sanitize(double score, volt_mode mode);
/* Would a checkpoint scoring `score` enter a top-k of size k (-1 = all, 0 = none)? */
bool volt__cb_topk_should_save(const volt_cb_topk *tk, int k, volt_mode mode, double score);
/* Index of the best (earliest among ties) / worst (latest among ties); -1 when empty. */
int volt__cb_topk_best(const volt_cb_topk *tk, volt_mode mode);
int volt__cb_topk_worst(const volt_cb_topk *tk, volt_mode mode);
int volt__cb_topk_find(const volt_cb_topk *tk, const char *path);
volt_status volt__cb_topk_push(volt_cb_topk *tk, const char *path, double score);   /* copies path */
/* As push, at place i (0 .. n; out of range: at the end). */
volt_status volt__cb_topk_insert(volt_cb_topk *tk, int i, const char *path, double score);
/* Remove entry i; returns its path (the caller frees it). */
char *volt__cb_topk_take(volt_cb_topk *tk, int i);
void volt__cb_topk_clear(volt_cb_topk *tk);

/* ---- the clock of train_time_interval (tests) -------------------------------------------------- */
/* Seconds on some monotonic scale. */
typedef double (*volt_cb_clock_fn)(void *ctx);
/* volt_add_model_checkpoint whose train_time_interval reads now(ctx) instead of
 * CLOCK_MONOTONIC (NULL: that clock), so a test decides when time passes; ctx is borrowed
 * for the trainer's life. */
volt_status volt__add_model_checkpoint_clock(volt_trainer *t, const volt_checkpoint_config *cfg, volt_cb_clock_fn now,
                                             void *ctx);


#endif
