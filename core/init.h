/* core/init.h — the check of a parameter init (core/params.c), private to the library: nn/
 * layers run it on a custom init before they open their unit, so that a refused init leaves
 * no half-declared layer behind. */
#ifndef VOLT_CORE_INIT_H
#define VOLT_CORE_INIT_H
#include <stddef.h>
#include "volt/params.h"

/* VOLT_OK for a known kind with finite arguments (NORMAL: std >= 0; UNIFORM: lo <= hi;
 * XAVIER: gain >= 0); else VOLT_ERR_INVALID_ARG and why (n bytes) says what is wrong. */
volt_status volt__init_check(volt_init in, char *why, size_t n);
#endif
