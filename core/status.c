/* Status strings, dtype and shape helpers. */
#include <stdio.h>
#include <string.h>
#include "volt/core.h"

const char *volt_status_str(volt_status s) {
    switch (s) {
    case VOLT_OK: return "ok";
    case VOLT_STOP: return "stop requested";
    case VOLT_SKIP_EPOCH: return "rest of the epoch skipped";
    case VOLT_ERR_NOMEM: return "out of memory";
    case VOLT_ERR_INVALID_ARG: return "invalid argument";
    case VOLT_ERR_SHAPE: return "shape mismatch";
    case VOLT_ERR_DTYPE: return "dtype mismatch";
    case VOLT_ERR_IO: return "I/O error";
    case VOLT_ERR_CORRUPT: return "corrupt data";
    case VOLT_ERR_UNSUPPORTED: return "unsupported";
    case VOLT_ERR_BACKEND: return "backend error";
    case VOLT_ERR_COMM: return "communication error";
    case VOLT_ERR_VERSION: return "version mismatch";
    case VOLT_ERR_STATE: return "invalid state";
    case VOLT_ERR_NOT_FOUND: return "not found";
    case VOLT_ERR_TIMEOUT: return "timeout";
    case VOLT_ERR_NUMERIC: return "numeric error";
    case VOLT_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

size_t volt_dtype_size(volt_dtype dt) {
    switch (dt) {
    case VOLT_F32: case VOLT_I32: return 4;
    case VOLT_BF16: case VOLT_F16: return 2;
    case VOLT_I64: return 8;
    case VOLT_U8: return 1;
    default: return 0;
    }
}

const char *volt_dtype_name(volt_dtype dt) {
    static const char *names[] = { "f32", "bf16", "f16", "i32", "i64", "u8" };
    return (unsigned)dt < VOLT_DTYPE_COUNT ? names[dt] : "?";
}

/* -1 for a rank outside 0..VOLT_MAX_DIMS (d[] has no more dims to read) or a product that
 * overflows int64: no allocation is sized from a wrapped count. */
int64_t volt_shape_numel(volt_shape s) {
    if (s.ndim < 0 || s.ndim > VOLT_MAX_DIMS) return -1;
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++)
        if (__builtin_mul_overflow(n, s.d[i], &n)) return -1;
    return n;
}

bool volt_shape_eq(volt_shape a, volt_shape b) {
    if (a.ndim != b.ndim || a.ndim < 0 || a.ndim > VOLT_MAX_DIMS) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.d[i] != b.d[i]) return false;
    return true;
}

char *volt_shape_str(volt_shape s, char *buf, size_t n) {
    size_t k = 0;
    if (!n) return buf;
    buf[0] = 0;
    k += (size_t)snprintf(buf + k, n - k, "(");
    const int nd = s.ndim < 0 ? 0 : s.ndim > VOLT_MAX_DIMS ? VOLT_MAX_DIMS : s.ndim;
    for (int i = 0; i < nd && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)s.d[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}
