/* core/units.h — what strategies (and the trainer, for checkpoints) do with the param
 * store's units beyond the user-facing volt/params.h: give memory back, grad ranges,
 * staleness, and the two tape hooks (DESIGN §3). Internal: not installed. */
#ifndef VOLT_CORE_UNITS_H
#define VOLT_CORE_UNITS_H

#include <stdbool.h>
#include <stdint.h>
#include "volt/params.h"

/* ---- memory of sharded units (strategies) -------------------------------------------- */
/* Unit buffers are page-aligned whole pages, so a strategy can give the part of a unit it
 * does not own back to the OS and fetch it again later at the same address (saved tensors
 * of the tape keep pointing at it). */
typedef enum volt_unit_buf { VOLT_UNIT_VALUES = 0, VOLT_UNIT_GRADS = 1 } volt_unit_buf;
/* Zero elements [lo, hi) of the unit's value buffer (in the store's dtype) or f32 grad
 * buffer and give the whole pages (device granules) inside the range back (they hold no
 * memory, and may not be touched, until volt__unit_commit). Values: VOLT_ERR_STATE when the
 * tape is running an op that reads the unit right now (then nothing changes; release it
 * later). */
volt_status volt__unit_release(volt_unit *u, volt_unit_buf which, int64_t lo, int64_t hi);
/* Make the whole buffer usable again after releases (what was given back reads as zeros).
 * Cheap when nothing was given back. Anything that writes or reads a unit buffer outside
 * the part its strategy keeps calls it first: the tape before backward writes parameter
 * grads, a gather before it writes the values, zero_grad, checkpoints. VOLT_ERR_NOMEM when
 * the device is out of memory (message on the store). */
volt_status volt__unit_commit(volt_unit *u, volt_unit_buf which);
/* volt_params_grad_bytes of the units whose grads exist: finalize makes none, a unit's come
 * with backward's first write to it, an optimizer over the store or volt_unit_grad. */
int64_t volt__params_grad_bytes_held(const volt_params *ps);
/* Bytes of the buffer resident in memory (pages the OS reports present, mincore(2)). */
int64_t volt__unit_resident_bytes(const volt_unit *u, volt_unit_buf which);
/* The part [lo, hi) of the unit's grads this process uses once they are reduced (a sharding
 * strategy's owned slice; the whole unit by default). Scaling (clipping by norm, unscaling
 * under 16-mixed) and clipping by value touch only it, so the rest of the buffer stays
 * given back. */
void volt__unit_set_grad_range(volt_unit *u, int64_t lo, int64_t hi);
void volt__unit_grad_range(const volt_unit *u, int64_t *lo, int64_t *hi);
/* Stale: part of the unit's values is not valid in this process (FSDP keeps only its shard).
 * While a unit is stale, every op that reads one of its parameters, in forward and in
 * backward, fires unit_use first (the strategy gathers the values and clears the flag). */
void volt__unit_set_stale(volt_unit *u, bool stale);
bool volt__unit_stale(const volt_unit *u);
/* Part or all of the unit's grad buffer is given back (a sharding strategy keeps only its
 * slice after the reduce-scatter, and none after zero_grad) and not committed again. */
bool volt__unit_grads_given_back(const volt_unit *u);

/* ---- strategy hooks ---------------------------------------------------------------- */
typedef struct volt_unit_hooks {
    uint32_t version;                                        /* VOLT_UNIT_HOOKS_VERSION */
    volt_status (*unit_use)(void *ctx, volt_unit *u);        /* first forward read per step, and
                                                                any read (forward or backward)
                                                                of a stale unit */
    volt_status (*unit_grads_ready)(void *ctx, volt_unit *u);/* backward done with the unit */
} volt_unit_hooks;
#define VOLT_UNIT_HOOKS_VERSION 1u

/* Install hooks (borrowed; must outlive the store or be replaced). NULL = none. */
volt_status volt__params_set_hooks(volt_params *ps, const volt_unit_hooks *hooks, void *ctx);  /* VERSION: message on ps */

#endif
