/* volt/data.h — datasets, batches and the DataLoader (DESIGN §8).
 *
 * A dataset is a vtable + self pointer describing fixed-shape per-sample fields (e.g.
 * "x" f32 (784) and "y" i64 ()). The loader draws indices (seeded per-epoch shuffle,
 * optional distributed sharding), fills batches with worker threads that prefetch, and
 * can be positioned at (epoch, batch) for exact mid-epoch resume. */
#ifndef VOLT_DATA_H
#define VOLT_DATA_H

#include "volt/export.h"

#include "volt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VOLT_MAX_FIELDS 8

typedef struct volt_field {
    const char *name;      /* "x", "y", "input_ids", ... (< 64 bytes, unique; copied at create) */
    volt_dtype dtype;
    volt_shape shape;      /* per-sample shape (ndim <= 3, at most 2^40 elements; the batch adds a leading dim) */
} volt_field;

typedef struct volt_dataset_ops {
    uint32_t version;                      /* VOLT_DATASET_OPS_VERSION */
    const char *name;                      /* shown in error messages */
    int64_t (*len)(void *self);            /* constant while a loader uses the dataset */
    /* Write sample `index` (0 <= index < len) into dst[f] (one per field, each sized for
     * one sample). Returns VOLT_OK or a negative status; the loader reports a failure
     * naming the dataset and index. Called concurrently from worker threads: must be
     * thread-safe. */
    volt_status (*get)(void *self, int64_t index, void *const *dst);
    void (*destroy)(void *self);           /* optional; called once by volt_dataset_destroy */
} volt_dataset_ops;
#define VOLT_DATASET_OPS_VERSION 1u

typedef struct volt_dataset {
    const volt_dataset_ops *ops;
    void *self;
    int n_fields;
    volt_field fields[VOLT_MAX_FIELDS];
} volt_dataset;

/* Takes ownership of self (ops->destroy(self) is called even if this fails). ops must
 * outlive the dataset; fields are copied (n_fields 1..VOLT_MAX_FIELDS, ndim <= 3). */
VOLT_API volt_status volt_dataset_create(const volt_dataset_ops *ops, void *self, int n_fields,
                                const volt_field *fields, volt_dataset **out);
VOLT_API void volt_dataset_destroy(volt_dataset *ds);                  /* NULL-safe */
VOLT_API int64_t volt_dataset_len(const volt_dataset *ds);
/* A view of ds restricted to indices [start, start+count) (the parent must outlive it).
 * Its name is "<parent>[start:end]"; index i of the view is index start+i of ds. */
VOLT_API volt_status volt_dataset_subset(volt_dataset *ds, int64_t start, int64_t count, volt_dataset **out);
/* In-memory dataset from caller arrays (copied): data[f] holds n samples of fields[f]
 * back to back (n * numel * dtype size bytes). Named "arrays". */
VOLT_API volt_status volt_dataset_from_arrays(int n_fields, const volt_field *fields, const void *const *data,
                                     int64_t n, volt_dataset **out);

/* ---- errors --------------------------------------------------------------------------- */
/* The message of the last data call on this thread that failed with no object to hold it:
 * volt_loader_create, volt_dataset_create, volt_dataset_subset, volt_dataset_from_arrays (a
 * bad argument, named with its value), or a volt_batch_field that found no such field. Set
 * only on failure, like errno; "" when none failed yet. Valid until the next failing call on
 * this thread. A loader's own errors are in volt_loader_errmsg. */
VOLT_API const char *volt_data_errmsg(void);

/* ---- batches ------------------------------------------------------------------------ */
typedef struct volt_batch {
    int64_t size;                          /* rows in this batch (last batch may be smaller) */
    int64_t index;                         /* batch index within the epoch */
    int n_fields;
    const char *names[VOLT_MAX_FIELDS];    /* field names (the dataset's), fields[f] is names[f] */
    /* Shape (size, ...field shape), node -1, flags 0, grad/unit/name NULL. From the loader:
     * data is host memory in its batch slot (allocated once at create; what a pinned-memory
     * allocator would hand out), device NULL. The trainer copies each batch to its device
     * before the batch hooks (transfer_batch_to_device, docs/TRAINER.md): the batch a step
     * or hook receives holds device tensors (fields[f].device set), read through ops or
     * volt_tensor_to_host; on "cpu" it is the loader's batch itself. */
    volt_tensor fields[VOLT_MAX_FIELDS];
    const int64_t *sample_ids;             /* dataset indices of the rows (size entries) */
} volt_batch;

/* A batch from volt_loader_next is valid until the next volt_loader_next, _start,
 * _set_shard or _destroy on the same loader. */
/* volt_batch_field: NULL if absent; volt_data_errmsg then names the field asked for and the
 * batch's fields, and an op given a NULL later in the same step adds it to its error. */
VOLT_API volt_tensor *volt_batch_field(const volt_batch *b, const char *name);
VOLT_API volt_tensor *volt_batch_x(const volt_batch *b);                         /* field 0 */
VOLT_API volt_tensor *volt_batch_y(const volt_batch *b);                         /* field "y", else the last */

/* ---- loader --------------------------------------------------------------------------- */
typedef struct volt_loader_config {
    uint32_t version;          /* VOLT_LOADER_CONFIG_VERSION */
    int64_t batch_size;        /* default 32 */
    bool shuffle;              /* seeded per-epoch permutation (default false) */
    bool drop_last;            /* drop the last incomplete batch (default false) */
    uint64_t seed;             /* shuffle seed (default 0) */
    int num_workers;           /* loader threads, one batch each at a time; 0 = load in the
                                  caller's thread inside volt_loader_next */
    int prefetch;              /* with workers: batches filled ahead of the one the caller
                                  holds (default 2; >= num_workers keeps all workers busy);
                                  the loader allocates prefetch + 1 batch slots at create */
    int rank, world;           /* distributed sampling: rank's shard of world (default 0/1); the
                                  index list is padded by wrap-around (or cut with drop_last) so
                                  every rank gets the same number of samples */
} volt_loader_config;
#define VOLT_LOADER_CONFIG_VERSION 1u

typedef struct volt_loader volt_loader;

VOLT_API void volt_loader_config_init(volt_loader_config *cfg);
/* The dataset is borrowed and must outlive the loader. */
VOLT_API volt_status volt_loader_create(const volt_loader_config *cfg, volt_dataset *ds, volt_loader **out);
VOLT_API void volt_loader_destroy(volt_loader *l);                     /* NULL-safe; joins workers */
VOLT_API int64_t volt_loader_num_batches(const volt_loader *l);        /* per epoch, this rank */
VOLT_API int64_t volt_loader_batch_size(const volt_loader *l);
VOLT_API volt_dataset *volt_loader_dataset(const volt_loader *l);
/* Start (or restart) an epoch at batch `start_batch` (0 normally; >0 to resume mid-epoch;
 * 0 <= start_batch <= num_batches). The order is a pure function of (seed, epoch, rank,
 * world), so resuming at (epoch, k) yields the batches an uninterrupted run would. Work
 * in flight for the previous epoch is cancelled and discarded first. */
VOLT_API volt_status volt_loader_start(volt_loader *l, int64_t epoch, int64_t start_batch);
/* Next batch of the current epoch: VOLT_OK with *out set, VOLT_STOP at the end of the epoch,
 * or an error (a dataset get failed: message in volt_loader_errmsg, naming the dataset and
 * sample index). An error sticks until the next volt_loader_start; VOLT_ERR_STATE before
 * the first volt_loader_start. */
VOLT_API volt_status volt_loader_next(volt_loader *l, const volt_batch **out);
VOLT_API const char *volt_loader_errmsg(const volt_loader *l);
/* Where the loader is: epoch and the index of the next batch it will return. */
VOLT_API void volt_loader_position(const volt_loader *l, int64_t *epoch, int64_t *next_batch);
/* Change the distributed shard after creation (strategies call this). Cancels the current
 * epoch: call volt_loader_start before the next volt_loader_next. */
VOLT_API volt_status volt_loader_set_shard(volt_loader *l, int rank, int world);
/* Turn the per-epoch shuffle on or off after creation (the trainer's overfit_batches turns it
 * off for a fit, as Lightning does). Cancels the current epoch, as set_shard. */
VOLT_API volt_status volt_loader_set_shuffle(volt_loader *l, bool shuffle);
VOLT_API bool volt_loader_shuffles(const volt_loader *l);
/* Batches of batch_size rows from now on (the batch size finder sets the size it found, as
 * Lightning's scale_batch_size sets the datamodule's batch_size): the batch slots are made
 * anew, so a batch held from this loader is invalid. Cancels the current epoch, as set_shard.
 * INVALID_ARG for batch_size < 1 (nothing changed); NOMEM when the slots cannot be had (the
 * batch size stays, the epoch is cancelled all the same). */
VOLT_API volt_status volt_loader_set_batch_size(volt_loader *l, int64_t batch_size);

/* ---- file formats ---------------------------------------------------------------------- */
/* IDX images + labels (MNIST / Fashion-MNIST), plain or gzip. Fields: "x" f32 (H*W) scaled
 * to [0,1] then normalised (x - mean) / std when std > 0; "y" i64 (). Headers are validated
 * (magic, dims, counts match, file long enough) with errors naming the file: VOLT_ERR_IO
 * for a file that cannot be opened or read, VOLT_ERR_CORRUPT for bad contents. The message
 * goes to err (errlen bytes, may be NULL). The dataset is named after the images file. */
VOLT_API volt_status volt_idx_dataset(const char *images_path, const char *labels_path, float mean, float std,
                             volt_dataset **out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
