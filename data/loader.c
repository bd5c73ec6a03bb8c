/* The DataLoader: per-epoch order, distributed sharding, batch slots and worker threads.
 * See volt/data.h and docs/DATA.md.
 *
 * Order. The epoch's global order g is the identity or a Fisher-Yates shuffle whose draws
 * come from Philox4x32 at counter (i, epoch) under a key derived from the seed, so it is a
 * pure function of (seed, epoch). As in torch's DistributedSampler the list is padded by
 * wrap-around to a multiple of world (cut instead with drop_last) and rank r takes
 * positions r, r+world, ...; the rank's list is then cut into batches.
 *
 * Slots. nslots batch slots (buffers for every field, sample ids) are allocated at create.
 * Batch b always lives in slot b % nslots. The caller holds at most one batch; workers may
 * fill batches in [base, base + nslots) where base is the held batch (or the next one when
 * none is held), so a worker never writes a slot the caller is reading. Batches come back
 * in order because the caller waits for slot (next % nslots) to hold batch `next`.
 *
 * Cancellation. Each volt_loader_start bumps a generation counter; workers check it
 * between samples, drop work from an old generation, and start waits until no worker is
 * busy before it rewrites the order and the slots. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/data.h"
#include "core/err.h"
#include "data/data_internal.h"
#include "core/rng.h"

typedef struct slot {
    volt_batch batch;
    void *buf[VOLT_MAX_FIELDS];
    int64_t *ids;
    int64_t filled;               /* batch index it holds (valid when ready), -1 = none */
    bool ready;
    volt_status status;           /* fill result */
    char errmsg[512];
} slot;

struct volt_loader {
    volt_loader_config cfg;
    volt_dataset *ds;
    int64_t n;                    /* dataset length, fixed at create */
    size_t sample_bytes[VOLT_MAX_FIELDS];

    /* epoch layout (depends on rank/world) */
    int64_t per_rank;             /* samples on this rank */
    int64_t n_batches;
    int64_t *order;               /* n: global order of the current epoch */
    int64_t *idx;                 /* per_rank: this rank's dataset indices */

    int nslots;
    slot *slots;

    /* consumer state (caller thread) */
    bool started;
    int64_t epoch;
    int64_t next;                 /* next batch to return */
    bool held;                    /* caller holds batch next-1 */
    volt_status status;           /* sticky error */
    char errmsg[512];

    /* worker pool */
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready, cv_idle;
    atomic_uint gen;
    bool running, shutdown;
    int64_t next_fill;            /* next batch a worker will take */
    int busy;                     /* workers filling a slot */
};

#define set_err(l, ...) ((void)VOLT__OBJ_ERRF(l, VOLT_OK, __VA_ARGS__))

void volt_loader_config_init(volt_loader_config *cfg) {
    if (!cfg) return;
    *cfg = (volt_loader_config){ .version = VOLT_LOADER_CONFIG_VERSION, .batch_size = 32,
                                 .prefetch = 2, .rank = 0, .world = 1 };
}

/* ---- order ---------------------------------------------------------------------------- */

#define SHUFFLE_KEY_TAG 0x5EED5A4D9E3779B9ull   /* separates shuffle draws from other streams */

/* A uniform draw in [0, bound) for Fisher-Yates position i of `epoch`. The modulo bias is
 * below bound / 2^64: invisible at any dataset size. */
static uint64_t shuffle_draw(uint64_t seed, int64_t epoch, int64_t i, uint64_t bound) {
    uint32_t ctr[4] = { (uint32_t)i, (uint32_t)((uint64_t)i >> 32),
                        (uint32_t)epoch, (uint32_t)((uint64_t)epoch >> 32) };
    uint32_t out[4];
    volt__philox4x32(seed ^ SHUFFLE_KEY_TAG, ctr, out);
    uint64_t r = (uint64_t)out[0] | ((uint64_t)out[1] << 32);
    return r % bound;
}

static void compute_order(volt_loader *l, int64_t epoch) {
    int64_t n = l->n;
    for (int64_t i = 0; i < n; i++) l->order[i] = i;
    if (l->cfg.shuffle)
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)shuffle_draw(l->cfg.seed, epoch, i, (uint64_t)i + 1);
            int64_t t = l->order[i]; l->order[i] = l->order[j]; l->order[j] = t;
        }
    /* padded[p] = order[p % n]; rank r takes p = r + k*world */
    for (int64_t k = 0; k < l->per_rank; k++)
        l->idx[k] = l->order[(l->cfg.rank + k * l->cfg.world) % n];
}

static void compute_layout(volt_loader *l) {
    int64_t n = l->n, w = l->cfg.world, b = l->cfg.batch_size;
    l->per_rank = l->cfg.drop_last ? n / w : (n + w - 1) / w;
    l->n_batches = l->per_rank / b + (!l->cfg.drop_last && l->per_rank % b != 0);   /* no overflow near INT64_MAX */
}

/* ---- filling a slot ---------------------------------------------------------------------- */

/* Fill slot s with batch b. With check_gen (workers), stop early once the generation is no
 * longer `gen`: the caller then discards the slot. */
static volt_status fill(volt_loader *l, slot *s, int64_t b, unsigned gen, bool check_gen) {
    int64_t first = b * l->cfg.batch_size;
    int64_t size = l->per_rank - first;
    if (size > l->cfg.batch_size) size = l->cfg.batch_size;
    const volt_dataset *ds = l->ds;
    void *dst[VOLT_MAX_FIELDS];
    for (int64_t r = 0; r < size; r++) {
        if (check_gen && atomic_load_explicit(&l->gen, memory_order_relaxed) != gen) return VOLT_ERR_STATE;
        int64_t i = l->idx[first + r];
        s->ids[r] = i;
        for (int f = 0; f < ds->n_fields; f++)
            dst[f] = (char *)s->buf[f] + (size_t)r * l->sample_bytes[f];
        volt_status st = ds->ops->get(ds->self, i, dst);
        if (st != VOLT_OK) {
            snprintf(s->errmsg, sizeof s->errmsg,
                     "dataset '%s': get(sample %lld) failed: %s (epoch %lld, batch %lld, rank %d/%d)",
                     ds->ops->name ? ds->ops->name : "?", (long long)i, volt_status_str(st),
                     (long long)l->epoch, (long long)b, l->cfg.rank, l->cfg.world);
            return st < 0 ? st : VOLT_ERR_STATE;
        }
    }
    s->batch.size = size;
    s->batch.index = b;
    for (int f = 0; f < ds->n_fields; f++) s->batch.fields[f].shape.d[0] = size;
    return VOLT_OK;
}

static void *worker_main(void *arg) {
    volt_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->shutdown) {
        int64_t base = l->next - (l->held ? 1 : 0);
        if (l->running && l->next_fill < l->n_batches && l->next_fill < base + l->nslots) {
            int64_t b = l->next_fill++;
            slot *s = &l->slots[b % l->nslots];
            unsigned gen = atomic_load(&l->gen);
            s->ready = false;
            s->filled = b;
            l->busy++;
            pthread_mutex_unlock(&l->mu);
            volt_status st = fill(l, s, b, gen, true);
            pthread_mutex_lock(&l->mu);
            l->busy--;
            if (gen == atomic_load(&l->gen)) {
                s->status = st;
                s->ready = true;
                pthread_cond_broadcast(&l->cv_ready);
            }
            if (l->busy == 0) pthread_cond_broadcast(&l->cv_idle);
            continue;
        }
        pthread_cond_wait(&l->cv_work, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Cancel in-flight work and wait until no worker touches a slot. Called with mu held. */
static void quiesce(volt_loader *l) {
    atomic_fetch_add(&l->gen, 1u);
    l->running = false;
    while (l->busy > 0) pthread_cond_wait(&l->cv_idle, &l->mu);
    for (int k = 0; k < l->nslots; k++) { l->slots[k].ready = false; l->slots[k].filled = -1; }
}

/* ---- create / destroy --------------------------------------------------------------------- */

/* A slot's buffers for batches of `rows` rows (sample ids, one buffer per field), pointed to by
 * its batch; false when memory ran out (what was had stays in s for slot_free). Create and
 * set_batch_size share it. */
static bool slot_alloc(const volt_loader *l, slot *s, int64_t rows) {
    if (rows < 0 || (uint64_t)rows > SIZE_MAX / sizeof *s->ids || !(s->ids = malloc(sizeof *s->ids * (size_t)rows))) return false;
    s->batch.sample_ids = s->ids;
    for (int f = 0; f < l->ds->n_fields; f++) {
        const size_t bytes = (l->sample_bytes[f] * (size_t)rows + 63) / 64 * 64;   /* aligned_alloc wants a multiple */
        if (!(s->buf[f] = aligned_alloc(64, bytes ? bytes : 64))) return false;
        s->batch.fields[f].data = s->buf[f];
    }
    return true;
}
static void slot_free(slot *s) {
    for (int f = 0; f < VOLT_MAX_FIELDS; f++) free(s->buf[f]);
    free(s->ids);
}

volt_status volt_loader_create(const volt_loader_config *cfg, volt_dataset *ds, volt_loader **out) {
    if (out) *out = NULL;
    if (!cfg) return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_loader_create: config is NULL (volt_loader_config_init fills one)");
    if (!VOLT_VERSION_OK(cfg->version, VOLT_LOADER_CONFIG_VERSION))
        return volt__data_err(VOLT_ERR_VERSION, "volt_loader_create: config version %u unknown (this volt knows 1..%u; "
                              "volt_loader_config_init sets it)", (unsigned)cfg->version, VOLT_LOADER_CONFIG_VERSION);
    if (!ds || !out) return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_loader_create: %s is NULL", !ds ? "dataset" : "out");
    if (cfg->batch_size < 1)
        return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_loader_create: batch_size must be >= 1, got %lld", (long long)cfg->batch_size);
    if (cfg->num_workers < 0 || cfg->num_workers > 1024)
        return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_loader_create: num_workers must be 0..1024 (0: load in the caller's "
                              "thread), got %d", cfg->num_workers);
    if (cfg->prefetch < 0 || cfg->prefetch > 1024)
        return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_loader_create: prefetch must be 0..1024, got %d", cfg->prefetch);
    if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world)
        return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_loader_create: want 0 <= rank < world, got rank %d of world %d",
                              cfg->rank, cfg->world);
    volt_loader *l = calloc(1, sizeof *l);
    if (!l) return VOLT_ERR_NOMEM;
    l->cfg = *cfg;
    if (l->cfg.prefetch < 1) l->cfg.prefetch = 1;
    l->ds = ds;
    l->n = volt_dataset_len(ds);
    l->nslots = cfg->num_workers > 0 ? l->cfg.prefetch + 1 : 1;
    compute_layout(l);
    /* a rank never has more samples than the dataset (padding adds < world to n >= 1), so
     * slots of min(batch_size, n) rows fit every shard set_shard may choose later */
    int64_t rows = l->cfg.batch_size < l->n ? l->cfg.batch_size : l->n;
    if (rows < 1) rows = 1;
    if (pthread_mutex_init(&l->mu, NULL) != 0) { free(l); return VOLT_ERR_NOMEM; }
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    pthread_cond_init(&l->cv_idle, NULL);
    atomic_init(&l->gen, 0u);
    if ((uint64_t)l->n > SIZE_MAX / 2 / sizeof *l->order) {   /* the order and index arrays: 8 bytes a sample */
        const long long n = (long long)l->n;
        volt_loader_destroy(l);
        return volt__data_err(VOLT_ERR_NOMEM, "volt_loader_create: a dataset of %lld samples is too large to index", n);
    }
    l->order = malloc(sizeof *l->order * (size_t)(l->n > 0 ? l->n : 1));
    l->idx = malloc(sizeof *l->idx * (size_t)(l->n > 0 ? l->n : 1));
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    if (!l->order || !l->idx || !l->slots) goto nomem;
    for (int f = 0; f < ds->n_fields; f++) {
        const volt_field *fd = &ds->fields[f];
        l->sample_bytes[f] = (size_t)volt_shape_numel(fd->shape) * volt_dtype_size(fd->dtype);
        if (l->sample_bytes[f] && (uint64_t)rows > SIZE_MAX / 2 / l->sample_bytes[f]) goto nomem;
    }
    for (int k = 0; k < l->nslots; k++) {
        slot *s = &l->slots[k];
        s->filled = -1;
        s->batch.n_fields = ds->n_fields;
        s->batch.index = -1;
        for (int f = 0; f < ds->n_fields; f++) {
            const volt_field *fd = &ds->fields[f];
            s->batch.names[f] = fd->name;
            volt_tensor *t = &s->batch.fields[f];
            t->dtype = fd->dtype;
            t->shape.ndim = fd->shape.ndim + 1;
            t->shape.d[0] = 0;
            for (int d = 0; d < fd->shape.ndim; d++) t->shape.d[d + 1] = fd->shape.d[d];
            t->flags = 0;
            t->node = -1;
        }
        if (!slot_alloc(l, s, rows)) goto nomem;
    }
    if (cfg->num_workers > 0) {
        if (!(l->threads = calloc((size_t)cfg->num_workers, sizeof *l->threads))) goto nomem;
        for (int k = 0; k < cfg->num_workers; k++) {
            if (pthread_create(&l->threads[k], NULL, worker_main, l) != 0) {
                volt_loader_destroy(l);
                return VOLT_ERR_NOMEM;
            }
            l->n_threads++;
        }
    }
    *out = l;
    return VOLT_OK;
nomem:
    volt_loader_destroy(l);
    return volt__data_err(VOLT_ERR_NOMEM, "volt_loader_create: out of memory for the batch buffers (%lld rows a batch)",
                          (long long)rows);
}

void volt_loader_destroy(volt_loader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    atomic_fetch_add(&l->gen, 1u);
    l->running = false;
    l->shutdown = true;
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    for (int k = 0; k < l->n_threads; k++) pthread_join(l->threads[k], NULL);
    free(l->threads);
    if (l->slots)
        for (int k = 0; k < l->nslots; k++) slot_free(&l->slots[k]);
    free(l->slots);
    free(l->order);
    free(l->idx);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_ready);
    pthread_cond_destroy(&l->cv_idle);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int64_t volt_loader_num_batches(const volt_loader *l) { return l ? l->n_batches : 0; }
int64_t volt_loader_batch_size(const volt_loader *l) { return l ? l->cfg.batch_size : 0; }
volt_dataset *volt_loader_dataset(const volt_loader *l) { return l ? l->ds : NULL; }
const char *volt_loader_errmsg(const volt_loader *l) { return l ? l->errmsg : ""; }

void volt_loader_position(const volt_loader *l, int64_t *epoch, int64_t *next_batch) {
    if (epoch) *epoch = l ? l->epoch : 0;
    if (next_batch) *next_batch = l ? l->next : 0;
}

/* ---- epochs ------------------------------------------------------------------------------ */

volt_status volt_loader_start(volt_loader *l, int64_t epoch, int64_t start_batch) {
    if (!l) return VOLT_ERR_INVALID_ARG;
    if (epoch < 0 || start_batch < 0 || start_batch > l->n_batches) {
        set_err(l, "loader: start(epoch %lld, batch %lld) out of range (%lld batches per epoch)",
                (long long)epoch, (long long)start_batch, (long long)l->n_batches);
        return VOLT_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&l->mu);
    quiesce(l);
    compute_order(l, epoch);
    l->epoch = epoch;
    l->next = start_batch;
    l->next_fill = start_batch;
    l->held = false;
    l->status = VOLT_OK;
    l->errmsg[0] = 0;
    l->started = true;
    l->running = true;
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    return VOLT_OK;
}

volt_status volt_loader_next(volt_loader *l, const volt_batch **out) {
    if (out) *out = NULL;
    if (!l || !out) return VOLT_ERR_INVALID_ARG;
    if (!l->started) {
        set_err(l, "loader: volt_loader_next before volt_loader_start");
        return VOLT_ERR_STATE;
    }
    if (l->status < 0) return l->status;
    if (l->n_threads == 0) {
        l->held = false;
        if (l->next >= l->n_batches) return VOLT_STOP;
        slot *s = &l->slots[0];
        volt_status st = fill(l, s, l->next, 0, false);
        if (st < 0) {
            memcpy(l->errmsg, s->errmsg, sizeof l->errmsg);
            return l->status = st;
        }
        l->next++;
        l->held = true;
        *out = &s->batch;
        return VOLT_OK;
    }
    pthread_mutex_lock(&l->mu);
    if (l->held) {                                /* release the caller's slot to the workers */
        l->held = false;
        pthread_cond_broadcast(&l->cv_work);
    }
    if (l->next >= l->n_batches) { pthread_mutex_unlock(&l->mu); return VOLT_STOP; }
    slot *s = &l->slots[l->next % l->nslots];
    while (!(s->ready && s->filled == l->next)) pthread_cond_wait(&l->cv_ready, &l->mu);
    volt_status st = s->status;
    if (st < 0) {
        memcpy(l->errmsg, s->errmsg, sizeof l->errmsg);
        l->status = st;
        pthread_mutex_unlock(&l->mu);
        return st;
    }
    l->next++;
    l->held = true;
    pthread_mutex_unlock(&l->mu);
    *out = &s->batch;
    return VOLT_OK;
}

volt_status volt_loader_set_shard(volt_loader *l, int rank, int world) {
    if (!l) return VOLT_ERR_INVALID_ARG;
    if (world < 1 || rank < 0 || rank >= world) {
        set_err(l, "loader: invalid shard rank %d of world %d", rank, world);
        return VOLT_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&l->mu);
    quiesce(l);
    l->cfg.rank = rank;
    l->cfg.world = world;
    compute_layout(l);
    l->started = false;
    l->held = false;
    l->next = 0;
    pthread_mutex_unlock(&l->mu);
    return VOLT_OK;
}

volt_status volt_loader_set_shuffle(volt_loader *l, bool shuffle) {
    if (!l) return VOLT_ERR_INVALID_ARG;
    pthread_mutex_lock(&l->mu);
    quiesce(l);
    l->cfg.shuffle = shuffle;
    l->started = false;
    l->held = false;
    l->next = 0;
    pthread_mutex_unlock(&l->mu);
    return VOLT_OK;
}

bool volt_loader_shuffles(const volt_loader *l) { return l && l->cfg.shuffle; }

volt_status volt_loader_set_batch_size(volt_loader *l, int64_t batch_size) {
    if (!l) return VOLT_ERR_INVALID_ARG;
    if (batch_size < 1) {
        set_err(l, "loader: batch_size must be >= 1, got %lld", (long long)batch_size);
        return VOLT_ERR_INVALID_ARG;
    }
    int64_t rows = batch_size < l->n ? batch_size : l->n;   /* as create sizes the slots */
    if (rows < 1) rows = 1;
    int too_big = -1;   /* the field whose batch would not fit in memory */
    for (int f = 0; too_big < 0 && f < l->ds->n_fields; f++)
        if (l->sample_bytes[f] && (uint64_t)rows > SIZE_MAX / 2 / l->sample_bytes[f]) too_big = f;
    pthread_mutex_lock(&l->mu);
    quiesce(l);   /* the epoch is cancelled, whatever comes of the new size */
    if (too_big >= 0) {
        l->started = false;
        l->held = false;
        l->next = 0;
        pthread_mutex_unlock(&l->mu);
        set_err(l, "loader: batch_size %lld: a batch of field '%s' would not fit in memory", (long long)batch_size,
                l->ds->fields[too_big].name);
        return VOLT_ERR_NOMEM;
    }
    /* the new buffers first: on failure the loader keeps its old batch size, whole */
    slot *ns = calloc((size_t)l->nslots, sizeof *ns);
    bool ok = ns != NULL;
    for (int k = 0; ok && k < l->nslots; k++) {
        ns[k] = l->slots[k];   /* the batch's names, dtypes, shapes; new buffers */
        ns[k].ids = NULL;
        memset(ns[k].buf, 0, sizeof ns[k].buf);
        ns[k].filled = -1;
        ns[k].ready = false;
        ok = slot_alloc(l, &ns[k], rows);
    }
    slot *drop = ok ? l->slots : ns;   /* the set freed: the old one, or the half-made new one */
    for (int k = 0; drop && k < l->nslots; k++) slot_free(&drop[k]);
    if (ok) {
        free(l->slots);
        l->slots = ns;
        l->cfg.batch_size = batch_size;
        compute_layout(l);
    } else {
        free(ns);
        set_err(l, "loader: out of memory for batches of %lld", (long long)batch_size);
    }
    l->started = false;
    l->held = false;
    l->next = 0;
    pthread_mutex_unlock(&l->mu);
    return ok ? VOLT_OK : VOLT_ERR_NOMEM;
}

/* ---- batch accessors ----------------------------------------------------------------------- */

static volt_tensor *field_of(const volt_batch *b, const char *name) {
    for (int f = 0; b && name && f < b->n_fields; f++)
        if (b->names[f] && strcmp(b->names[f], name) == 0) return (volt_tensor *)&b->fields[f];
    return NULL;
}

volt_tensor *volt_batch_field(const volt_batch *b, const char *name) {
    volt_tensor *t = field_of(b, name);
    if (t) return t;
    /* a misspelt name reached an op as a bare "input 1 is NULL": say which and what there is */
    char have[VOLT_MAX_FIELDS * 66] = "";
    for (int f = 0; b && f < b->n_fields && f < VOLT_MAX_FIELDS; f++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", f ? ", " : "", b->names[f] ? b->names[f] : "?");
    if (!b) volt__data_err(VOLT_ERR_INVALID_ARG, "volt_batch_field: batch is NULL");
    else if (!name) volt__data_err(VOLT_ERR_INVALID_ARG, "volt_batch_field: name is NULL (fields: %s)", have);
    else volt__data_err(VOLT_ERR_INVALID_ARG, "batch has no field '%s' (fields: %s)", name, have);
    volt__null_note("%s", volt_data_errmsg());
    return NULL;
}

volt_tensor *volt_batch_x(const volt_batch *b) {
    return b && b->n_fields > 0 ? (volt_tensor *)&b->fields[0] : NULL;
}

volt_tensor *volt_batch_y(const volt_batch *b) {
    volt_tensor *y = field_of(b, "y");   /* no "y" is no error here: the last field is */
    if (y || !b || b->n_fields < 1) return y;
    return (volt_tensor *)&b->fields[b->n_fields - 1];
}
