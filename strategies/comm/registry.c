/* The comm registry: one row per comm backend, chosen by the device whose memory the
 * strategies communicate (DESIGN §7). "mpi" takes host buffers: on a device whose memory the
 * process can read (cpu) it works in place; on any other (cpu-strict, cuda) the caller stages
 * through host buffers (comm->staged). "nccl" (the NCCL issue) adds a row before it that
 * serves cuda devices with device buffers. */
#include <stdio.h>
#include <string.h>
#include "strategies/comm/comm.h"
#include "core/device.h"

#ifdef VOLT_HAVE_MPI
#define MPI_CREATE volt__comm_mpi_create
#else
#define MPI_CREATE NULL
#endif

static const volt_comm_row k_rows[] = {
    { "mpi", "Open MPI collectives over host buffers (multi-process, multi-node)", true, NULL, MPI_CREATE },
};
#define N_ROWS ((int)(sizeof k_rows / sizeof k_rows[0]))

int volt__comm_backend_count(void) { return N_ROWS; }
const volt_comm_row *volt__comm_backend_at(int i) { return i >= 0 && i < N_ROWS ? &k_rows[i] : NULL; }

const volt_comm_row *volt__comm_backend_find(const char *name) {
    for (int i = 0; name && i < N_ROWS; i++)
        if (!strcmp(name, k_rows[i].name)) return &k_rows[i];
    return NULL;
}

volt_status volt__comm_create_for(volt_device *dev, const volt_comm_config *cfg, volt_comm **out,
                                  char *err, size_t errlen) {
    *out = NULL;
    char tried[256] = "";
    size_t n = 0;
    for (int i = 0; i < N_ROWS; i++) {
        const volt_comm_row *r = &k_rows[i];
        if (r->serves && !r->serves(dev)) continue;
        if (!r->create) {
            n += (size_t)snprintf(tried + n, n < sizeof tried ? sizeof tried - n : 0, "%s%s (not built in)", n ? ", " : "", r->name);
            continue;
        }
        volt_status s = r->create(cfg, out, err, errlen);
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
