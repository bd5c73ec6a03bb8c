/* callbacks/early_stopping.h — EarlyStopping's decision (callbacks/early_stopping.c).
 * Private to callbacks/ and tests/: not installed, not part of the public API. */
#ifndef VOLT_CALLBACKS_EARLY_STOPPING_H
#define VOLT_CALLBACKS_EARLY_STOPPING_H

#include <stdio.h>
#include "volt/trainer.h"

/* ---- EarlyStopping decision ------------------------------------------------------------------ */
typedef struct volt_cb_es_state {
    double best;             /* +inf (min) / -inf (max) before the first check */
    int64_t wait;            /* checks without improvement since the last one */
    int64_t stopped_epoch;   /* epoch at which it asked to stop, 0 if it did not */
} volt_cb_es_state;
void volt__cb_es_init(volt_cb_es_state *st, volt_mode mode);
/* One check with the monitored value (Lightning's _evaluate_stopping_criteria): updates best
 * and wait; true = stop, with the reason in `reason` (when reason is non-NULL). */
bool volt__cb_es_update(const volt_early_stopping_config *cfg, volt_cb_es_state *st, double current,
                       char *reason, size_t n);


#endif
