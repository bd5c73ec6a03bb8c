/* volt/dtype.h — the floating-point dtypes: f32 <-> bf16 / f16 conversions, scalar and array,
 * and volt_convert between any two of them (core; see docs/PRECISION.md).
 *
 * Formats: bf16 is the top half of an IEEE f32 (8-bit exponent, 7-bit mantissa); f16 is
 * IEEE binary16 (5-bit exponent, 10-bit mantissa, subnormals down to 2^-24, max 65504).
 * Values are passed around as their bit patterns in uint16_t.
 *
 * Conversions to 16 bits round to nearest, ties to even; values too large become inf (a
 * finite f32 above the largest 16-bit value rounds to inf exactly as IEEE says: f16 from
 * 65520 up); NaN stays NaN with its sign, is quieted, and keeps the top payload bits.
 * Conversions to f32 are exact (f16 subnormals included); an f16 NaN comes back quiet, a
 * bf16 NaN keeps its bits (bf16 -> f32 is a shift). The array versions give the same bits
 * as the scalar ones, are vectorisable loops, and run on OpenMP threads for large n. */
#ifndef VOLT_DTYPE_H
#define VOLT_DTYPE_H

#include "volt/export.h"

#include "volt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- conversions ---------------------------------------------------------------- */
VOLT_API uint16_t volt_f32_to_bf16(float x);
VOLT_API float volt_bf16_to_f32(uint16_t h);
VOLT_API uint16_t volt_f32_to_f16(float x);
VOLT_API float volt_f16_to_f32(uint16_t h);

/* n elements; src and dst must not overlap. */
VOLT_API void volt_f32_to_bf16_array(const float *src, uint16_t *dst, int64_t n);
VOLT_API void volt_bf16_to_f32_array(const uint16_t *src, float *dst, int64_t n);
VOLT_API void volt_f32_to_f16_array(const float *src, uint16_t *dst, int64_t n);
VOLT_API void volt_f16_to_f32_array(const uint16_t *src, float *dst, int64_t n);
/* Between any two of f32, bf16, f16 (same dtype: a copy). n elements, no overlap.
 * Returns VOLT_ERR_DTYPE for other dtypes, VOLT_ERR_INVALID_ARG for a NULL dst or src with n > 0. */
VOLT_API volt_status volt_convert(void *dst, volt_dtype dst_dt, const void *src, volt_dtype src_dt, int64_t n);

/* True for f32, bf16, f16. */
VOLT_API bool volt_dtype_is_float(volt_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
