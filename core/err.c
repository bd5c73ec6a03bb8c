/* The error-message formatter every layer uses (core/err.h). */
#include <stdio.h>
#include "core/err.h"

void volt__set_err(char *buf, size_t n, const char *fmt, va_list ap) {
    if (buf && n) vsnprintf(buf, n, fmt, ap);
}

volt_status volt__errf(char *buf, size_t n, volt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    volt__set_err(buf, n, fmt, ap);
    va_end(ap);
    return st;
}
