/* Backend registry and device resolution (core/device.h). Built-in backends register on
 * first use; the devices opened are cached for the life of the process. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/device.h"
#include "core/internal.h"

#ifdef VOLT_HAVE_CUDA
const volt_backend *volt__backend_cuda(void);   /* core/cuda/backend.c */
#endif

#define MAX_BACKENDS 8
#define MAX_ORDINALS 16

static const volt_backend *g_backends[MAX_BACKENDS];
static int g_n_backends;
static volt_device *g_devices[MAX_BACKENDS][MAX_ORDINALS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static volt_status register_locked(const volt_backend *be, char *err, size_t errlen) {
    if (!be || !be->name) { snprintf(err, errlen, "backend: NULL table or name"); return VOLT_ERR_INVALID_ARG; }
    if (!VOLT_VERSION_OK(be->version, VOLT_BACKEND_VERSION)) {
        snprintf(err, errlen, "backend '%s': table version %u, this library knows 1..%u", be->name, be->version,
                 VOLT_BACKEND_VERSION);
        return VOLT_ERR_VERSION;
    }
    if (be->version < 2 || !be->device_count || !be->alloc || !be->free || !be->memset || !be->copy ||
        !be->give_back || !be->synchronize || !be->kernels || !be->pm || !be->pm->scale || !be->pm->sqnorm_acc ||
        !be->pm->clip_by_norm || !be->pm->clip_value || !be->pm->unscale || !be->pm->scaler_update || !be->pm->update ||
        !be->pm->convert) {
        snprintf(err, errlen, "backend '%s': a required entry is NULL (memory, copies, synchronize, kernels, "
                 "parameter math)", be->name);
        return VOLT_ERR_INVALID_ARG;
    }
    if (be->version >= 3) {   /* graph capture: all four entries or none */
        const int n = !!be->graph_begin + !!be->graph_end + !!be->graph_launch + !!be->graph_destroy;
        if (n != 0 && n != 4) {
            snprintf(err, errlen, "backend '%s': graph capture needs graph_begin, graph_end, graph_launch and "
                     "graph_destroy (some are NULL)", be->name);
            return VOLT_ERR_INVALID_ARG;
        }
    }
    for (int i = 0; i < g_n_backends; i++)
        if (!strcmp(g_backends[i]->name, be->name)) {
            snprintf(err, errlen, "backend '%s' is already registered", be->name);
            return VOLT_ERR_INVALID_ARG;
        }
    if (g_n_backends == MAX_BACKENDS) { snprintf(err, errlen, "backend registry is full"); return VOLT_ERR_NOMEM; }
    g_backends[g_n_backends++] = be;
    return VOLT_OK;
}

static void register_builtins(void) {
    char err[256];
    register_locked(volt__backend_cpu(), err, sizeof err);
    register_locked(volt__backend_cpu_strict(), err, sizeof err);
#ifdef VOLT_HAVE_CUDA
    register_locked(volt__backend_cuda(), err, sizeof err);
#endif
}

volt_status volt__backend_register(const volt_backend *be, char *err, size_t errlen) {
    pthread_once(&g_once, register_builtins);
    pthread_mutex_lock(&g_lock);
    volt_status st = register_locked(be, err, errlen);
    pthread_mutex_unlock(&g_lock);
    return st;
}

const volt_backend *volt__backend_find(const char *name) {
    pthread_once(&g_once, register_builtins);
    for (int i = 0; i < g_n_backends && name; i++)
        if (!strcmp(g_backends[i]->name, name)) return g_backends[i];
    return NULL;
}

int volt__backend_count(void) { pthread_once(&g_once, register_builtins); return g_n_backends; }
const volt_backend *volt__backend_at(int i) {
    pthread_once(&g_once, register_builtins);
    return i >= 0 && i < g_n_backends ? g_backends[i] : NULL;
}

static void known_list(char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "\"auto\"");
    for (int i = 0; i < g_n_backends && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, ", \"%s\" (%d device%s)", g_backends[i]->name,
                              g_backends[i]->device_count(), g_backends[i]->device_count() == 1 ? "" : "s");
}

const volt_backend *volt__device_resolve(const char *accelerator, char *err, size_t errlen) {
    pthread_once(&g_once, register_builtins);
    const char *name = accelerator;
    if (!name || !*name || !strcmp(name, "auto")) {
        const char *env = getenv("VOLT_ACCELERATOR");
        if (env && *env && strcmp(env, "auto")) name = env;
        else {
            const volt_backend *cuda = volt__backend_find("cuda");
            name = cuda && cuda->device_count() > 0 ? "cuda" : "cpu";
        }
    }
    if (!strcmp(name, "gpu")) name = "cuda";   /* Lightning's alias */
    const volt_backend *be = volt__backend_find(name);
    char known[256];
    if (!be) {
        known_list(known, sizeof known);
        snprintf(err, errlen, "accelerator '%s' is not available (known: %s)", name, known);
        return NULL;
    }
    if (be->device_count() == 0) {   /* compiled in, nothing present (cuda without a GPU): say what there is */
        known_list(known, sizeof known);
        snprintf(err, errlen, "accelerator '%s': no device present (known: %s)", name, known);
        return NULL;
    }
    return be;
}

volt_status volt__device_get(const char *accelerator, int ordinal, volt_device **out, char *err, size_t errlen) {
    *out = NULL;
    const volt_backend *be = volt__device_resolve(accelerator, err, errlen);
    if (!be) return VOLT_ERR_UNSUPPORTED;
    const char *name = be->name;
    int count = be->device_count();
    if (ordinal < 0 || ordinal >= count || ordinal >= MAX_ORDINALS) {
        snprintf(err, errlen, "accelerator '%s': device %d does not exist (%d present)", name, ordinal, count);
        return VOLT_ERR_UNSUPPORTED;
    }
    int bi = 0;
    while (g_backends[bi] != be) bi++;
    pthread_mutex_lock(&g_lock);
    volt_status st = VOLT_OK;
    if (!g_devices[bi][ordinal]) {
        volt_device *d = calloc(1, sizeof *d);
        if (!d) st = VOLT_ERR_NOMEM;
        else {
            d->be = be;
            d->ordinal = ordinal;
            if (be->open && (st = be->open(ordinal, &d->ctx, err, errlen)) < 0) free(d);
            else {
                d->caps = be->caps ? be->caps(d) : 0;
                g_devices[bi][ordinal] = d;
            }
        }
        if (st == VOLT_ERR_NOMEM) snprintf(err, errlen, "accelerator '%s': out of memory", name);
    }
    *out = g_devices[bi][ordinal];
    pthread_mutex_unlock(&g_lock);
    return st;
}

volt_device *volt__device_cpu(void) {
    volt_device *d = NULL;
    char err[64];
    volt__device_get("cpu", 0, &d, err, sizeof err);
    return d;
}
