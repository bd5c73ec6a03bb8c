/* A shared library loaded at run time (core/dynlib.c): open the first of a list of names,
 * resolve a table of symbols into function pointers, and say what was missing. What the
 * optional GPU libraries use (core/cuda/gemm.c: cuBLASLt; strategies/comm/nccl/nccl_lib.c:
 * NCCL), so a binary built with them starts on a machine without them. The handle is kept
 * for the life of the process (never closed: the pointers stay valid). */
#ifndef VOLT_DYNLIB_H
#define VOLT_DYNLIB_H

#include <stddef.h>

/* One entry point: its name and where its address goes (a function pointer's address, cast:
 * (void **)(void *)&table.fn). */
typedef struct volt__dynsym { const char *name; void **slot; } volt__dynsym;

/* dlopen (RTLD_NOW | RTLD_LOCAL) the first of names[0..n) that loads; NULL and "" entries are
 * skipped. NULL when none loads: tried gets the names tried, in order ("a, b, c"), and why the
 * loader's message for the last of them (either buffer may be NULL). */
void *volt__dynlib_open(const char *const *names, int n, char *tried, size_t triedlen, char *why, size_t whylen);

/* Each syms[i].name resolved in h into *syms[i].slot, i < n. NULL when all resolve, else the
 * name of the first that does not (the slots after it are left as they were). */
const char *volt__dynlib_resolve(void *h, const volt__dynsym *syms, int n);

#endif
