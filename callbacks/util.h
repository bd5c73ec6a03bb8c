/* callbacks/util.h — small helpers the built-in callbacks share: Python-style number
 * formatting, mkdir -p, the logger's version folder, atomic text files, CSV line splitting.
 * Each callback's own logic lives in its file, behind its private header (model_checkpoint.h,
 * early_stopping.h, progress_bar.h, csv_logger.h) so tests can drive it directly. Private to
 * callbacks/ and tests/: not installed, not part of the public API. */
#ifndef VOLT_CALLBACKS_UTIL_H
#define VOLT_CALLBACKS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include "volt/trainer.h"
#include "core/fsutil.h"   /* volt__mkdirs */

#define VOLT_CB_PATH_MAX 4096

/* ---- numbers ------------------------------------------------------------------------------ */
/* Python's repr(float): the shortest string that reads back to v ("0.1", "2.0", "1e-05",
 * "1e+16", "nan", "inf", "-inf"). What Lightning's CSV logger writes for a float. */
void volt__cb_repr(double v, char *out, size_t n);
/* Format v with a Python format spec ("" = repr for floats, plain for ints; ".4f", "03d",
 * "+.2e", ".1%" ...). Supported: [sign][0][width][.precision][type], type one of
 * d e E f F g G %. is_int: v is an integer (epoch, step), as Python formats an int. */
volt_status volt__cb_format_number(double v, bool is_int, const char *spec, char *out, size_t n);

/* ---- scores (ModelCheckpoint, EarlyStopping) -------------------------------------------- */
/* Strictly better under mode (ties are not better: the earlier checkpoint stays). */
bool volt__cb_better(double a, double b, volt_mode mode);

/* ---- files ----------------------------------------------------------------------------------- */
/* The next version number under root: 1 + the largest N of the "version_N" folders, 0 if none
 * (or if root does not exist), as Lightning's CSVLogger picks it. */
int volt__cb_next_version(const char *root);
/* Atomic small text file write (path.tmp, fsync, rename). */
volt_status volt__cb_write_text(const char *path, const char *text, char *err, size_t errlen);

/* ---- CSV ----------------------------------------------------------------------------------- */
/* Split one CSV line (RFC 4180 quoting, no embedded newlines) into malloc'ed cells. Returns
 * the count, -1 on a quoting error or no memory. The caller frees cells[i] and *cells. */
int volt__cb_csv_split(const char *line, char ***cells);

/* ---- JSON ---------------------------------------------------------------------------------- */
/* o printed with every number exact (malloc'ed; NULL on no memory): cJSON prints "%.15g" and
 * reads back within a relative epsilon, which drops the last digit of integers near 2^53 (a
 * seed of 9007199254740991 came back 9007199254740990 from hparams.json), in objects and arrays
 * at any depth; inf and nan stay cJSON's null. */
struct cJSON;
char *volt__cb_json_print(const struct cJSON *o, bool formatted);
/* A score in a callback's state: a number, or "nan" / "inf" / "-inf" for the non-finite ones
 * (JSON has none); NULL on no memory. _get reads either form back (false for anything else). */
struct cJSON *volt__cb_json_score(double v);
bool volt__cb_json_get_score(const struct cJSON *j, double *out);

/* A callback of this table name was added to t (the one-per-trainer checks, the defaults). */
bool volt__cb_has(const volt_trainer *t, const char *name);
/* t has a logger: enable_logger, fast_dev_run (Lightning's DummyLogger) or a callback whose
 * name ends in "Logger" (what LearningRateMonitor and DeviceStatsMonitor need, as Lightning's). */
bool volt__cb_has_logger(const volt_trainer *t);

#endif
