/* core/cuda/dropout.h — the launcher of core/cuda/dropout.cu (extern "C", plain pointers). */
#ifndef VOLT_CUDA_DROPOUT_H
#define VOLT_CUDA_DROPOUT_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* y[k] = (acc ? y[k] : 0) + (u_k >= p ? x[k] / (1 - p) : 0) for k < n, u_k the uniform of
 * element k of the Philox stream (key derived from seed and c0, c0 = the step's RNG offset
 * read on the device from *c0_dev (core/internal.h's rng_dev, so a captured step replays
 * with each step's offset), c1 = call index): the CPU backend's dropout (core/cpu/act.c)
 * element for element. Forward: x = input, y = output; backward: x = dy, y = dx (acc = grad
 * mode ADD). x and y device memory, may not overlap unless equal. Enqueued on `stream` (a
 * cudaStream_t); returns the launch's cudaError_t (0 = success), as the launchers of
 * core/cuda/launch.h. */
int volt__cuda_dropout_dev(void *stream, const float *x, float *y, int64_t n, float p,
                           uint64_t seed, const uint64_t *c0_dev, uint64_t c1, int acc);

#ifdef __cplusplus
}
#endif
#endif
