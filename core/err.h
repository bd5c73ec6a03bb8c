/* core/err.h — the one way volt formats an error message onto its object (STYLE: "one
 * helper formats an error message onto its object"). Internal, but shared by every layer:
 * unlike core/internal.h it exposes nothing of tensors or the tape. */
#ifndef VOLT_CORE_ERR_H
#define VOLT_CORE_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "volt/core.h"

/* Formats into buf (n bytes, always NUL-terminated; nothing when buf is NULL or n is 0). */
void volt__set_err(char *buf, size_t n, const char *fmt, va_list ap);
/* The same from variadic arguments; returns st, so a failure path is one line:
 *     return volt__errf(obj->errmsg, sizeof obj->errmsg, VOLT_ERR_IO, "x '%s': %s", ...); */
volt_status volt__errf(char *buf, size_t n, volt_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same into an object's own `char errmsg[N]` field: a file's failure helper is then
 *     #define opt_fail(o, st, ...) VOLT__OBJ_ERRF(o, st, __VA_ARGS__)                   */
#define VOLT__OBJ_ERRF(obj, st, ...) volt__errf((obj)->errmsg, sizeof (obj)->errmsg, (st), __VA_ARGS__)

/* Why a call returned NULL where a tensor was wanted, said by the layer that returned it (data:
 * volt_batch_field found no such field). An op given a NULL (volt__any_null) adds the last note
 * said during its step to its "input N is NULL", as "earlier in this step: ..." (the NULL may
 * come from elsewhere: a field probed and found absent on purpose). Per thread: the call that
 * returns the NULL and the op that reads it run on the step's thread. */
void volt__null_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The note and how many were said on this thread so far (a step keeps the count at its begin). */
const char *volt__null_note_text(void);
uint64_t volt__null_note_count(void);

#endif
