/* transfer_batch_to_device (Lightning's hook of that name): the loader fills batches in host
 * memory (its slots are what a pinned-memory allocator would hand out); before the step
 * hooks see a batch, the loop copies it into device tensors here. On a host-addressable
 * device (cpu) the host batch is the device batch: no copy, as torch's .to("cpu") is a no-op
 * (except with compile = true: a graph reads its inputs at the addresses it captured).
 * Elsewhere each field goes host->device into a buffer the trainer owns, grown on the first
 * batches to the largest seen and reused after (no allocation in the steady state). */
#include <string.h>
#include "trainer/trainer_internal.h"

volt_status volt__transfer_batch(volt_trainer *t, const volt_batch *host, const volt_batch **out) {
    *out = host;
    /* compile: a captured step reads its batch at fixed addresses, so it is copied there even
     * on a host-addressable device */
    if (!t->dev || (volt__dev_host_addressable(t->dev) && !t->cfg.compile)) return VOLT_OK;
    volt_batch *db = &t->dev_batch;
    *db = *host;   /* size, index, names, sample ids (host metadata) and the field headers */
    for (int f = 0; f < host->n_fields; f++) {
        size_t bytes = volt_tensor_bytes(&host->fields[f]);
        if (bytes > t->dev_cap[f]) {
            volt__dev_free(t->dev, t->dev_buf[f]);
            t->dev_cap[f] = 0;
            if (!(t->dev_buf[f] = volt__dev_alloc(t->dev, bytes)))
                return volt__terr(t, VOLT_ERR_NOMEM, "transfer_batch_to_device: %zu bytes for field '%s' on %s:%d", bytes,
                                  host->names[f], t->dev->be->name, t->dev->ordinal);
            t->dev_cap[f] = bytes;
        }
        volt__dev_h2d(t->dev, t->dev_buf[f], host->fields[f].data, bytes);
        db->fields[f].data = t->dev_buf[f];
        db->fields[f].device = t->dev;
    }
    *out = db;
    return VOLT_OK;
}

void volt__transfer_free(volt_trainer *t) {
    for (int f = 0; f < VOLT_MAX_FIELDS; f++) {
        if (t->dev) volt__dev_free(t->dev, t->dev_buf[f]);
        t->dev_buf[f] = NULL;
        t->dev_cap[f] = 0;
    }
}
