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

/* The memory of a device that has its own (cuda), as torch.cuda.memory_stats reports it for
 * PyTorch's allocator (volt_trainer_device_memory, DeviceStatsMonitor; docs/CALLBACKS.md):
 * allocated = what volt's buffers hold now (the stream-ordered pool's blocks in use, the
 * physical memory mapped into the unit buffers, the cuBLASLt workspace), reserved = that plus
 * the freed blocks and unmapped granules kept for reuse; the peaks are their high-waters since the device was
 * opened (the pool's and the unit buffers' taken apart, so a peak may exceed the true joint
 * one, never fall short of it); free and total are the device's, as the driver says
 * (cudaMemGetInfo: other processes' use shows in free). The CUDA context and the kernels'
 * images are not counted, as torch does not count them. */
typedef struct volt_device_memory {
    int64_t allocated_bytes, allocated_peak_bytes;
    int64_t reserved_bytes, reserved_peak_bytes;
    int64_t free_bytes, total_bytes;
} volt_device_memory;

#ifdef __cplusplus
}
#endif
#endif
