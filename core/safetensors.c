/* safetensors format basics shared by the reader and the writers: the error formatter,
 * dtype names, shape byte sizes, crc32. See volt/safetensors.h; what the files share:
 * core/safetensors_internal.h. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <zlib.h>
#include "core/safetensors_internal.h"


/* ---- dtypes -------------------------------------------------------------------- */

const char *const st_dtype_names[VOLT_DTYPE_COUNT] = {
    [VOLT_F32] = "F32", [VOLT_BF16] = "BF16", [VOLT_F16] = "F16",
    [VOLT_I32] = "I32", [VOLT_I64] = "I64", [VOLT_U8] = "U8",
};

/* numel and byte size of a shape, or false on overflow / negative dims. */
bool st_shape_bytes(volt_shape s, volt_dtype dt, uint64_t *numel, uint64_t *nbytes) {
    uint64_t n = 1;
    if (s.ndim < 0 || s.ndim > VOLT_MAX_DIMS) return false;
    for (int i = 0; i < s.ndim; i++) {
        if (s.d[i] < 0 || __builtin_mul_overflow(n, (uint64_t)s.d[i], &n)) return false;
    }
    if (n > (uint64_t)INT64_MAX) return false;
    uint64_t b;
    if (__builtin_mul_overflow(n, (uint64_t)volt_dtype_size(dt), &b) || b > SIZE_MAX) return false;
    *numel = n;
    *nbytes = b;
    return true;
}

static uLong crc_span(uLong c, const Bytef *p, size_t n) {
    while (n) {                                   /* zlib lengths are uInt (32-bit) */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return c;
}

/* Large buffers (a checkpoint's embedding table: ~94 MB) in CRC_PARTS spans on the OpenMP
 * threads, joined by crc32_combine: the same value as one pass (tests/test_safetensors.c). */
#define CRC_PARTS 64
#define CRC_PARALLEL_MIN ((size_t)8 << 20)
uint32_t st_crc32(const void *data, size_t n) {
    const Bytef *p = data;
    if (n < CRC_PARALLEL_MIN) return (uint32_t)crc_span(crc32(0L, Z_NULL, 0), p, n);
    const size_t span = (n + CRC_PARTS - 1) / CRC_PARTS;
    uLong part[CRC_PARTS];
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < CRC_PARTS; i++) {
        const size_t lo = (size_t)i * span, hi = lo + span < n ? lo + span : n;
        part[i] = lo < hi ? crc_span(crc32(0L, Z_NULL, 0), p + lo, hi - lo) : 0;
    }
    uLong c = part[0];
    for (int i = 1; i < CRC_PARTS; i++) {
        const size_t lo = (size_t)i * span, hi = lo + span < n ? lo + span : n;
        if (lo < hi) c = crc32_combine(c, part[i], (z_off_t)(hi - lo));
    }
    return (uint32_t)c;
}
