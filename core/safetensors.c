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

uint32_t st_crc32(const void *data, size_t n) {
    uLong c = crc32(0L, Z_NULL, 0);
    const Bytef *p = data;
    while (n) {                                   /* zlib lengths are uInt (32-bit) */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}
