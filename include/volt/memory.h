/* volt/memory.h — the per-rank memory report of model state (docs/STRATEGIES.md). Filled
 * by the strategy, read through volt_trainer_memory_report (volt/trainer.h). */
#ifndef VOLT_MEMORY_H
#define VOLT_MEMORY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-rank bytes of model state. The *_bytes fields follow the strategy's formula over the
 * padded parameter count (docs/STRATEGIES.md); held_* are what this process holds right now
 * (pages of the unit buffers that are resident, optimizer state slices), and
 * activation_peak_bytes is the step's high-water mark so far: its tensors and grads (the
 * step pool; a released tensor counts until no backward reads it) and kernels' saved data
 * (the arena), at once (volt_step_arena_peak). */
typedef struct volt_memory_report {
    const char *strategy;      /* strategy name */
    int rank, world;
    int64_t numel;             /* Ψ: parameters (unpadded) */
    int64_t padded_numel;      /* Σ unit buffer lengths (padding to 16 floats, and to world slices) */
    int64_t param_bytes, grad_bytes, optim_bytes, master_bytes;   /* the formula */
    int64_t held_param_bytes, held_grad_bytes, held_optim_bytes;  /* resident in this process */
    int64_t activation_peak_bytes;
} volt_memory_report;

#ifdef __cplusplus
}
#endif
#endif
