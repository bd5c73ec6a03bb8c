/* callbacks/csv_logger.h — CSVLogger's metrics.csv (callbacks/csv_logger.c).
 * Private to callbacks/ and tests/: not installed, not part of the public API. */
#ifndef VOLT_CALLBACKS_CSV_LOGGER_H
#define VOLT_CALLBACKS_CSV_LOGGER_H

#include <stdio.h>
#include "volt/trainer.h"

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
volt_status volt__cb_csv_open(volt_cb_csv *c, const char *path, char *err, size_t errlen);
/* names[i] = vals[i] (names "epoch"/"step" are ignored: those columns come from the args). */
volt_status volt__cb_csv_write_row(volt_cb_csv *c, int64_t epoch, int64_t step, int n,
                                  const char *const *names, const double *vals, char *err, size_t errlen);
void volt__cb_csv_close(volt_cb_csv *c);

#endif
