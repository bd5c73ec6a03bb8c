/* core/dynlib.h, the run-time loader cuBLASLt (core/cuda/gemm.c) and NCCL
 * (strategies/comm/nccl/nccl_lib.c) go through: the first name that loads wins (NULL / ""
 * skipped), a list where none loads names every file tried and the loader's reason, a table
 * of symbols resolves into callable pointers, and a missing symbol is named. */
#include <math.h>
#include "vtest.h"
#include "core/dynlib.h"

static struct { double (*cos)(double); double (*sqrt)(double); } g_m;

int main(void) {
    char tried[256], why[256];
    const char *none[] = { "libvolt-no-such-lib.so.1", NULL, "", "/nonexistent/libvolt-nope.so" };
    void *h = volt__dynlib_open(none, 4, tried, sizeof tried, why, sizeof why);
    CHECK(!h, "nothing to load");
    CHECK(!strcmp(tried, "libvolt-no-such-lib.so.1, /nonexistent/libvolt-nope.so"), "tried: %s", tried);
    CHECK(strstr(why, "libvolt-nope.so"), "why names the last file: %s", why);
    CHECK(!volt__dynlib_open(none, 4, NULL, 0, NULL, 0), "no buffers");

    const char *names[] = { NULL, "libvolt-no-such-lib.so.1", "libm.so.6" };
    h = volt__dynlib_open(names, 3, tried, sizeof tried, why, sizeof why);
    CHECK(h, "libm.so.6 loads after a missing name: %s", why);
    if (!h) return vtest_finish();
    volt__dynsym syms[] = { { "cos", (void **)(void *)&g_m.cos }, { "sqrt", (void **)(void *)&g_m.sqrt } };
    CHECK(volt__dynlib_resolve(h, syms, 2) == NULL, "cos and sqrt resolve");
    CHECK(g_m.cos && g_m.sqrt && g_m.cos(0.0) == 1.0 && g_m.sqrt(16.0) == 4.0, "the pointers call libm");
    volt__dynsym bad[] = { { "cos", (void **)(void *)&g_m.cos }, { "volt_no_such_symbol", (void **)(void *)&g_m.sqrt } };
    const char *missing = volt__dynlib_resolve(h, bad, 2);
    CHECK(missing && !strcmp(missing, "volt_no_such_symbol"), "the missing symbol is named: %s", missing ? missing : "(none)");
    return vtest_finish();
}
