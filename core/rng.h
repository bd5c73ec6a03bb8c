/* core/rng.h — the counter-based generator (Philox4x32-10) every layer draws from: dropout,
 * parameter init, loader shuffles, corpus splits. Internal, shared across layers; a pure
 * function of (key, counter), so the same stream on any backend or rank. */
#ifndef VOLT_CORE_RNG_H
#define VOLT_CORE_RNG_H

#include <stdint.h>

void volt__philox4x32(uint64_t key, uint32_t ctr[4], uint32_t out[4]);
/* Uniform float in [0,1) from the stream (seed, c0, c1, index): 24-bit mantissa. */
float volt__rng_uniform(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t index);
/* Elements 4*blk .. 4*blk+3 of the same stream in one Philox call (hot loops). */
void volt__rng_uniform4(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t blk, float out[4]);
/* out[4*i + l] = lane l of block blk + i, for i < nblk: volt__rng_uniform4 of nblk
 * consecutive blocks, 8 at a time in AVX2 lanes where available (dropout). */
void volt__rng_uniform_blocks(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t blk, int64_t nblk, float *out);
/* Standard normal via Box-Muller from the same stream (index picks a pair). */
float volt__rng_normal(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t index);

#endif
