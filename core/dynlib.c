/* Run-time library loading (core/dynlib.h). */
#include <dlfcn.h>
#include <stdio.h>
#include "core/dynlib.h"

void *volt__dynlib_open(const char *const *names, int n, char *tried, size_t triedlen, char *why, size_t whylen) {
    size_t k = 0;
    if (tried && triedlen) tried[0] = 0;
    if (why && whylen) why[0] = 0;
    for (int i = 0; i < n; i++) {
        if (!names[i] || !names[i][0]) continue;
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        const char *e = dlerror();
        if (why && whylen) snprintf(why, whylen, "%s", e ? e : "?");
        if (tried && k < triedlen) k += (size_t)snprintf(tried + k, triedlen - k, "%s%s", k ? ", " : "", names[i]);
    }
    return NULL;
}

const char *volt__dynlib_resolve(void *h, const volt__dynsym *syms, int n) {
    for (int i = 0; i < n; i++) {
        void *p = dlsym(h, syms[i].name);
        if (!p) return syms[i].name;
        *syms[i].slot = p;
    }
    return NULL;
}
