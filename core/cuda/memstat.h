/* core/cuda/memstat.h — the "cuda" backend's device memory high-water (core/cuda/memstat.c).
 * C only; callers outside core/cuda (bench/) include it under VOLT_HAVE_CUDA. */
#ifndef VOLT_CUDA_MEMSTAT_H
#define VOLT_CUDA_MEMSTAT_H
#include <stdbool.h>
#include <stdint.h>
#include "core/internal.h"

/* *bytes = the device bytes volt allocated at most on d since it was opened (or since the
 * last reset): pool high-water + VMM physical high-water + the cuBLASLt workspace.
 * reset: the high-waters restart from the current use. VOLT_ERR_INVALID_ARG when d is not
 * a cuda device, VOLT_ERR_BACKEND when the runtime cannot say. */
volt_status volt__cuda_mem_peak(volt_device *d, uint64_t *bytes, bool reset);

/* The backend's memory_stats (core/device.h version 8): volt_device_memory from the pool's
 * used and reserved bytes (current, high), VMM's physical bytes and the workspace. */
volt_status volt__cuda_memory_stats(volt_device *d, volt_device_memory *out, char *err, size_t errlen);
#endif
