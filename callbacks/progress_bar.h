/* callbacks/progress_bar.h — the progress bar's text (callbacks/progress_bar.c).
 * Private to callbacks/ and tests/: not installed, not part of the public API. */
#ifndef VOLT_CALLBACKS_PROGRESS_BAR_H
#define VOLT_CALLBACKS_PROGRESS_BAR_H

#include <stdio.h>
#include "volt/trainer.h"

/* ---- progress bar text ------------------------------------------------------------------------- */
/* "mm:ss", or "h:mm:ss" from one hour; "?" for a negative or non-finite time. */
void volt__cb_fmt_duration(double secs, char *out, size_t n);
/* "<prefix>: 37/469 [00:12<02:41, 28.3it/s<, postfix>]" (total <= 0: "37 [00:12, 28.3it/s]";
 * under one item per second the rate reads "3.52s/it"). The rate counts the done - start
 * items of the `elapsed` seconds (start > 0: a resumed epoch). Returns the length written. */
size_t volt__cb_progress_line(char *out, size_t n, const char *prefix, int64_t done, int64_t total,
                             int64_t start, double elapsed, const char *postfix);


#endif
