/* data/data_internal.h — the data API's message for calls that fail with no object to hold it
 * (volt_data_errmsg). */
#ifndef VOLT_DATA_INTERNAL_H
#define VOLT_DATA_INTERNAL_H

#include "volt/data.h"

/* Formats this thread's volt_data_errmsg; returns st (a failure path is one line). */
volt_status volt__data_err(volt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
