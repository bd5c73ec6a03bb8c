/* libnccl.so.2 at run time (nccl_lib.h). Not linked: a binary built with NCCL starts on a
 * machine without it, and only asking for the nccl comm there is an error. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "core/dynlib.h"
#include "strategies/comm/nccl/nccl_lib.h"

static volt_nccl_lib g_nc;
static pthread_once_t g_nc_once = PTHREAD_ONCE_INIT;
static char g_nc_err[512];
#define NCCL_MIN_VERSION 21400   /* non-blocking communicators (ncclConfig_t.blocking) */

#ifndef VOLT_NCCL_LIBDIR
#define VOLT_NCCL_LIBDIR "/usr/local/cuda/lib64"
#endif
static void nc_load(void) {
    const char *env = getenv("VOLT_NCCL");
    char why[256];
    void *h;
    if (env && *env) {   /* an explicit choice: only that file */
        if (!(h = volt__dynlib_open(&env, 1, NULL, 0, why, sizeof why))) {
            snprintf(g_nc_err, sizeof g_nc_err, "nccl: cannot load VOLT_NCCL='%s' (%s); unset it to search libnccl.so.2, "
                     "or use strategy_comm=mpi", env, why);
            return;
        }
    } else {
        static const char *const names[] = { "libnccl.so.2", VOLT_NCCL_LIBDIR "/libnccl.so.2" };
        char tried[256];
        if (!(h = volt__dynlib_open(names, 2, tried, sizeof tried, NULL, 0))) {
            snprintf(g_nc_err, sizeof g_nc_err, "nccl: libnccl.so.2 not found (tried %s); install NCCL (apt-get install "
                     "libnccl2) or set VOLT_NCCL to its path, or use strategy_comm=mpi", tried);
            return;
        }
    }
#define NCCL_SYM_(f) { #f, (void **)(void *)&g_nc.f },
    static const volt__dynsym syms[] = { VOLT_NCCL_FUNCS(NCCL_SYM_) };
#undef NCCL_SYM_
    const char *missing = volt__dynlib_resolve(h, syms, (int)(sizeof syms / sizeof syms[0]));
    if (missing) {
        snprintf(g_nc_err, sizeof g_nc_err, "nccl: libnccl.so.2 has no %s (too old?)", missing);
        return;
    }
    if (g_nc.ncclGetVersion(&g_nc.version) != ncclSuccess || g_nc.version < NCCL_MIN_VERSION)
        snprintf(g_nc_err, sizeof g_nc_err, "nccl: libnccl.so.2 is version %d, volt needs %d or newer (non-blocking init)",
                 g_nc.version, NCCL_MIN_VERSION);
}

const volt_nccl_lib *volt__nccl_lib(char *err, size_t errlen) {
    pthread_once(&g_nc_once, nc_load);
    if (g_nc_err[0]) {
        snprintf(err, errlen, "%s", g_nc_err);
        return NULL;
    }
    return &g_nc;
}
