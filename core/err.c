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

static _Thread_local char null_note[256];
static _Thread_local uint64_t null_notes;

void volt__null_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    volt__set_err(null_note, sizeof null_note, fmt, ap);
    va_end(ap);
    null_notes++;
}

const char *volt__null_note_text(void) { return null_note; }
uint64_t volt__null_note_count(void) { return null_notes; }
