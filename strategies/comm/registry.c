/* The comm registry: one row per comm backend, chosen by the device whose memory the
 * strategies communicate (DESIGN §7). "mpi" takes host buffers: on a device whose memory the
 * process can read (cpu) it works in place; on any other (cpu-strict, cuda) the caller stages
 * through host buffers (comm->staged). "nccl" comes first and serves cuda devices with device
 * buffers (docs/NCCL.md); volt_comm_config.backend forces a row ("mpi" on cuda: staged). */
#include <stdio.h>
#include <string.h>
#include "strategies/comm/comm.h"
#include "core/device.h"

#ifdef VOLT_HAVE_MPI
#define MPI_CREATE volt__comm_mpi_create
#else
#define MPI_CREATE NULL
#endif
#ifdef VOLT_HAVE_NCCL
#define NCCL_CREATE volt__comm_nccl_create
#define NCCL_SERVES volt__comm_nccl_serves
#define NCCL_MISSING NULL
#else
static bool nccl_serves_name(const volt_device *dev) { return dev && !strcmp(dev->be->name, "cuda"); }
#define NCCL_CREATE NULL
#define NCCL_SERVES nccl_serves_name
#ifndef VOLT_HAVE_CUDA
#define NCCL_MISSING "built without CUDA"
#else
#define NCCL_MISSING "built without nccl.h"
#endif
#endif

static const volt_comm_row k_rows[] = {
    { "nccl", "NCCL collectives over GPU buffers on a comm stream (one GPU per rank; libnccl.so.2 loaded at run time)",
      false, NCCL_SERVES, NCCL_CREATE, NCCL_MISSING },
    { "mpi", "Open MPI collectives over host buffers (multi-process, multi-node)", true, NULL, MPI_CREATE,
      "built without MPI" },
};
#define N_ROWS ((int)(sizeof k_rows / sizeof k_rows[0]))

int volt__comm_backend_count(void) { return N_ROWS; }
const volt_comm_row *volt__comm_backend_at(int i) { return i >= 0 && i < N_ROWS ? &k_rows[i] : NULL; }

const volt_comm_row *volt__comm_backend_find(const char *name) {
    for (int i = 0; name && i < N_ROWS; i++)
        if (!strcmp(name, k_rows[i].name)) return &k_rows[i];
    return NULL;
}

static const char *row_names(void) {
    static char buf[128];
    size_t n = 0;
    for (int i = 0; i < N_ROWS; i++)
        n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, "%s%s", i ? ", " : "", k_rows[i].name);
    return buf;
}

static char g_broken_msg[512];
static volatile bool g_broken;

void volt__comm_note_broken(const char *msg) {
    if (g_broken) return;
    snprintf(g_broken_msg, sizeof g_broken_msg, "%s", msg && *msg ? msg : "a collective failed");
    g_broken = true;
}

bool volt__comm_broken(void) { return g_broken; }

static char g_failure_msg[400];

void volt__comm_note_failure(const char *msg) {
    if (!msg) { g_failure_msg[0] = 0; return; }
    snprintf(g_failure_msg, sizeof g_failure_msg, "%s", *msg ? msg : "an error");
}

const char *volt__comm_failure(void) { return g_failure_msg; }

volt_status volt__comm_refuse_if_broken(char *err, size_t errlen) {
    if (!g_broken) return VOLT_OK;
    snprintf(err, errlen, "no new communicator in this process: an earlier collective broke (%s); the ranks' "
             "collectives no longer match, so end the job (every rank) and relaunch it, resuming from the last "
             "checkpoint", g_broken_msg);
    return VOLT_ERR_STATE;
}

volt_status volt__comm_create_for(volt_device *dev, const volt_comm_config *cfg_in, volt_comm **out,
                                  char *err, size_t errlen) {
    *out = NULL;
    VOLT_TRY(volt__comm_config_check(cfg_in, err, errlen));
    VOLT_TRY(volt__comm_refuse_if_broken(err, errlen));
    volt_comm_config cfg = *cfg_in;
    const char *want = cfg.version >= 2 && cfg.backend && *cfg.backend && strcmp(cfg.backend, "auto") ? cfg.backend : NULL;
    if (cfg.version < 3) cfg.mpi_comm = NULL;   /* not a field of the caller's version */
    cfg.version = VOLT_COMM_CONFIG_VERSION;
    cfg.dev = dev;
    if (want && !volt__comm_backend_find(want)) {
        snprintf(err, errlen, "unknown comm backend '%s' (known: auto, %s)", want, row_names());
        return VOLT_ERR_INVALID_ARG;
    }
    char tried[256] = "";
    size_t n = 0;
    for (int i = 0; i < N_ROWS; i++) {
        const volt_comm_row *r = &k_rows[i];
        if (want && strcmp(want, r->name)) continue;
        if (r->serves && !r->serves(dev)) {
            if (want) {
                snprintf(err, errlen, "comm backend '%s' cannot serve device '%s' (it takes %s)", want, dev->be->name,
                         !strcmp(r->name, "nccl") ? "cuda devices" : "other devices");
                return VOLT_ERR_UNSUPPORTED;
            }
            continue;
        }
        if (!r->create) {
            n += (size_t)snprintf(tried + n, n < sizeof tried ? sizeof tried - n : 0, "%s%s (not built in: %s)", n ? ", " : "",
                                  r->name, r->missing ? r->missing : "?");
            continue;
        }
        volt_status s = r->create(&cfg, out, err, errlen);
        if (s < 0) return s;
        if (!VOLT_VERSION_OK((*out)->ops->version, VOLT_COMM_OPS_VERSION)) {
            snprintf(err, errlen, "volt_comm_ops '%s': version %u, this library knows 1..%u", (*out)->ops->name,
                     (*out)->ops->version, VOLT_COMM_OPS_VERSION);
            volt__comm_destroy(*out);
            *out = NULL;
            return VOLT_ERR_VERSION;
        }
        (*out)->dev = dev;
        (*out)->staged = r->host_buffers && !volt__dev_host_addressable(dev);
        return VOLT_OK;
    }
    snprintf(err, errlen, "no comm backend serves device '%s' (%s)", dev->be->name,
             tried[0] ? tried : "none registered");
    return VOLT_ERR_UNSUPPORTED;
}
