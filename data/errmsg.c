/* volt_data_errmsg: the message of a data call that failed before any object existed to hold
 * it (volt_loader_create, volt_dataset_create / _subset / _from_arrays), or of a
 * volt_batch_field that found no such field. Per thread, as errno: a loader's own errors
 * stay on the loader (volt_loader_errmsg). */
#include <stdarg.h>
#include "data/data_internal.h"
#include "core/err.h"

static _Thread_local char data_err[256];

volt_status volt__data_err(volt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    volt__set_err(data_err, sizeof data_err, fmt, ap);
    va_end(ap);
    return st;
}

const char *volt_data_errmsg(void) { return data_err; }
