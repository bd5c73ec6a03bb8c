/* Datasets, the DataLoader (shuffle, drop_last, distributed sharding, resume, workers,
 * errors) and the IDX reader (round trips, corrupt files, Fashion-MNIST when present). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "volt/data.h"
#include "vtest.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* ---- helpers --------------------------------------------------------------------------- */

/* n samples: "x" f32 (3) = {i, i + 0.5, -i}, "y" i64 () = 10 i. */
static volt_dataset *make_ds(int64_t n) {
    float *x = malloc(sizeof *x * (size_t)(3 * n + 1));
    int64_t *y = malloc(sizeof *y * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) {
        x[3 * i] = (float)i; x[3 * i + 1] = (float)i + 0.5f; x[3 * i + 2] = -(float)i;
        y[i] = 10 * i;
    }
    char xname[8] = "x", yname[8] = "y";         /* not static: the dataset must copy them */
    volt_field f[2] = { { xname, VOLT_F32, VOLT_SHAPE(3) }, { yname, VOLT_I64, VOLT_SCALAR } };
    const void *data[2] = { x, y };
    volt_dataset *ds = NULL;
    volt_status st = volt_dataset_from_arrays(2, f, data, n, &ds);
    CHECK(st == VOLT_OK, "from_arrays: %s", volt_status_str(st));
    memset(xname, '?', sizeof xname - 1);
    free(x);
    free(y);
    return ds;
}

static volt_loader *make_loader(volt_dataset *ds, int64_t bs, bool shuffle, bool drop_last, uint64_t seed,
                                int workers, int prefetch, int rank, int world) {
    volt_loader_config c;
    volt_loader_config_init(&c);
    c.batch_size = bs; c.shuffle = shuffle; c.drop_last = drop_last; c.seed = seed;
    c.num_workers = workers; c.prefetch = prefetch; c.rank = rank; c.world = world;
    volt_loader *l = NULL;
    volt_status st = volt_loader_create(&c, ds, &l);
    CHECK(st == VOLT_OK, "loader_create: %s", volt_status_str(st));
    return l;
}

typedef struct run {
    int64_t ids[4096];
    int64_t n_ids;
    int64_t sizes[512];
    int64_t n_batches;
    int bad_rows;        /* rows whose data does not match their sample id */
} run;

/* Drain the current epoch from the loader, checking every batch's layout and contents. */
static volt_status drain(volt_loader *l, run *r) {
    memset(r, 0, sizeof *r);
    int64_t epoch, next;
    volt_loader_position(l, &epoch, &next);
    const volt_batch *b;
    volt_status st;
    while ((st = volt_loader_next(l, &b)) == VOLT_OK) {
        volt_tensor *x = volt_batch_x(b), *y = volt_batch_y(b);
        CHECK(b->index == next + r->n_batches, "batch index %lld, expected %lld", (long long)b->index,
              (long long)(next + r->n_batches));
        CHECK(x && y && x->dtype == VOLT_F32 && y->dtype == VOLT_I64, "field dtypes");
        CHECK(x->shape.ndim == 2 && x->shape.d[0] == b->size && x->shape.d[1] == 3, "x shape");
        CHECK(y->shape.ndim == 1 && y->shape.d[0] == b->size, "y shape");
        CHECK(x->node == -1 && x->flags == 0 && y->node == -1 && y->flags == 0, "leaf tensors");
        CHECK(volt_batch_field(b, "y") == y && volt_batch_field(b, "x") == x &&
              volt_batch_field(b, "z") == NULL, "batch_field lookup");
        const float *xd = x->data;
        const int64_t *yd = y->data;
        for (int64_t k = 0; k < b->size; k++) {
            int64_t i = b->sample_ids[k];
            if (xd[3 * k] != (float)i || xd[3 * k + 1] != (float)i + 0.5f || xd[3 * k + 2] != -(float)i ||
                yd[k] != 10 * i)
                r->bad_rows++;
            if (r->n_ids < 4096) r->ids[r->n_ids++] = i;
        }
        if (r->n_batches < 512) r->sizes[r->n_batches] = b->size;
        r->n_batches++;
    }
    return st;
}

static bool same_run(const run *a, const run *b) {
    return a->n_ids == b->n_ids && a->n_batches == b->n_batches &&
           memcmp(a->ids, b->ids, sizeof *a->ids * (size_t)a->n_ids) == 0 &&
           memcmp(a->sizes, b->sizes, sizeof *a->sizes * (size_t)(a->n_batches < 512 ? a->n_batches : 512)) == 0;
}

/* ---- datasets ------------------------------------------------------------------------------ */

static int destroyed;
static int64_t dummy_len(void *self) { return 5; }
static volt_status dummy_get(void *self, int64_t i, void *const *dst) { *(float *)dst[0] = (float)i; return VOLT_OK; }
static void dummy_destroy(void *self) { destroyed++; }
static int64_t big_len(void *self) { return ((int64_t)1 << 61) + 1; }

static void test_dataset(void) {
    static const volt_dataset_ops ops = { VOLT_DATASET_OPS_VERSION, "dummy", dummy_len, dummy_get, dummy_destroy };
    volt_field f = { "v", VOLT_F32, VOLT_SCALAR };
    volt_dataset *ds = NULL;
    destroyed = 0;
    CHECK_OK(volt_dataset_create(&ops, NULL, 1, &f, &ds));
    CHECK(volt_dataset_len(ds) == 5, "len");
    volt_dataset_destroy(ds);
    CHECK(destroyed == 1, "destroy called once: %d", destroyed);
    volt_dataset_destroy(NULL);

    /* ownership is taken even on failure */
    destroyed = 0;
    volt_field bad = { "v", VOLT_F32, VOLT_SHAPE(1, 2, 3, 4) };             /* ndim 4 > 3 */
    CHECK(volt_dataset_create(&ops, NULL, 1, &bad, &ds) == VOLT_ERR_INVALID_ARG && ds == NULL, "ndim 4");
    volt_field dup[2] = { f, f };
    CHECK(volt_dataset_create(&ops, NULL, 2, dup, &ds) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_data_errmsg(), "field name 'v' given twice"), "duplicate names: '%s'", volt_data_errmsg());
    CHECK(volt_dataset_create(&ops, NULL, 0, &f, &ds) == VOLT_ERR_INVALID_ARG, "no fields");
    volt_dataset_ops v2 = ops;
    v2.version = 99;
    CHECK(volt_dataset_create(&v2, NULL, 1, &f, &ds) == VOLT_ERR_VERSION, "ops version");
    CHECK(destroyed == 4, "destroy called on every failure: %d", destroyed);
    /* each dim within 2^40 but a sample of 2^64 elements (the product overflowed: a batch of
     * shape (4, 2^40, 2^24) with a 64-byte buffer) */
    volt_field huge = { "x", VOLT_F32, VOLT_SHAPE((int64_t)1 << 40, (int64_t)1 << 24) };
    CHECK(volt_dataset_create(&ops, NULL, 1, &huge, &ds) == VOLT_ERR_INVALID_ARG && ds == NULL &&
          strstr(volt_data_errmsg(), "field 'x': a sample of more than 2^40 elements"), "dims' product: '%s'",
          volt_data_errmsg());
    volt_field edge = { "x", VOLT_U8, VOLT_SHAPE((int64_t)1 << 20, (int64_t)1 << 20) };   /* 2^40 exactly: allowed */
    CHECK_OK(volt_dataset_create(&ops, NULL, 1, &edge, &ds));
    volt_dataset_destroy(ds);
    /* a dataset too long to index (2^61 + 1 samples: 8 bytes each wrapped the order array's size) */
    static const volt_dataset_ops big_ops = { VOLT_DATASET_OPS_VERSION, "big", big_len, dummy_get, dummy_destroy };
    CHECK_OK(volt_dataset_create(&big_ops, NULL, 1, &f, &ds));
    volt_loader_config lc;
    volt_loader_config_init(&lc);
    volt_loader *bl = NULL;
    CHECK(volt_loader_create(&lc, ds, &bl) == VOLT_ERR_NOMEM && bl == NULL &&
          strstr(volt_data_errmsg(), "a dataset of 2305843009213693953 samples is too large"), "2^61 + 1 samples: '%s'",
          volt_data_errmsg());
    volt_dataset_destroy(ds);

    /* arrays + subset */
    volt_dataset *a = make_ds(10);
    CHECK(volt_dataset_len(a) == 10, "arrays len");
    CHECK(strcmp(a->fields[0].name, "x") == 0 && strcmp(a->fields[1].name, "y") == 0, "names copied");
    volt_dataset *s = NULL;
    CHECK_OK(volt_dataset_subset(a, 3, 5, &s));
    CHECK(volt_dataset_len(s) == 5, "subset len");
    CHECK(s->ops->name && strcmp(s->ops->name, "arrays[3:8]") == 0, "subset name %s", s->ops->name);
    float x[3];
    int64_t y;
    void *dst[2] = { x, &y };
    CHECK_OK(s->ops->get(s->self, 2, dst));
    CHECK(x[0] == 5.0f && y == 50, "subset index 2 is parent 5: %g %lld", x[0], (long long)y);
    CHECK(s->ops->get(s->self, 5, dst) == VOLT_ERR_INVALID_ARG, "subset index out of range");
    volt_dataset *bad_sub = NULL;
    CHECK(volt_dataset_subset(a, 8, 3, &bad_sub) == VOLT_ERR_INVALID_ARG && !bad_sub, "subset past end");
    /* no object to hold the message: volt_data_errmsg names the arguments and the dataset */
    CHECK(strstr(volt_data_errmsg(), "volt_dataset_subset: start 8, count 3 is outside dataset 'arrays' of 10 samples"),
          "subset past end: '%s'", volt_data_errmsg());
    CHECK(volt_dataset_subset(a, -1, 2, &bad_sub) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_data_errmsg(), "start -1, count 2 is outside"), "negative start: '%s'", volt_data_errmsg());
    CHECK_OK(volt_dataset_subset(a, 10, 0, &bad_sub));
    CHECK(volt_dataset_len(bad_sub) == 0, "empty subset");
    volt_dataset_destroy(bad_sub);
    /* a loader over a subset: ids are the view's, data the parent's start+id */
    volt_loader *l = make_loader(s, 2, false, false, 0, 0, 2, 0, 1);
    const volt_batch *b;
    CHECK_OK(volt_loader_start(l, 0, 1));
    CHECK_OK(volt_loader_next(l, &b));
    CHECK(b->size == 2 && b->sample_ids[0] == 2 && b->sample_ids[1] == 3 &&
          ((float *)b->fields[0].data)[3] == 6.0f, "subset loader batch 1");
    volt_loader_destroy(l);
    volt_dataset_destroy(s);
    volt_dataset_destroy(a);
}

/* ---- loader: order ---------------------------------------------------------------------- */

static void test_shuffle(void) {
    volt_dataset *ds = make_ds(103);
    volt_loader *l = make_loader(ds, 10, true, false, 1234, 0, 2, 0, 1);
    CHECK(volt_loader_num_batches(l) == 11, "num_batches %lld", (long long)volt_loader_num_batches(l));
    const volt_batch *b;
    CHECK(volt_loader_next(l, &b) == VOLT_ERR_STATE, "next before start");
    static run e0, e1, e0b, other;
    CHECK_OK(volt_loader_start(l, 0, 0));
    CHECK(drain(l, &e0) == VOLT_STOP, "epoch 0 ends with STOP");
    CHECK(volt_loader_next(l, &b) == VOLT_STOP, "STOP again after the end");
    CHECK(e0.n_ids == 103 && e0.n_batches == 11 && e0.sizes[10] == 3 && e0.bad_rows == 0, "epoch 0 layout");
    int seen[103] = { 0 };
    for (int64_t k = 0; k < e0.n_ids; k++) seen[e0.ids[k]]++;
    int once = 0, identity = 1;
    for (int i = 0; i < 103; i++) { once += seen[i] == 1; identity &= e0.ids[i] == i; }
    CHECK(once == 103, "every sample exactly once per epoch (%d)", once);
    CHECK(!identity, "shuffled order is not the identity");
    CHECK_OK(volt_loader_start(l, 1, 0));
    drain(l, &e1);
    CHECK(e1.n_ids == 103 && !same_run(&e0, &e1), "epoch 1 order differs from epoch 0");
    memset(seen, 0, sizeof seen);
    for (int64_t k = 0; k < e1.n_ids; k++) seen[e1.ids[k]]++;
    once = 0;
    for (int i = 0; i < 103; i++) once += seen[i] == 1;
    CHECK(once == 103, "epoch 1 is a permutation");
    volt_loader_destroy(l);

    /* same seed + epoch in a fresh loader (another "process"): same order */
    l = make_loader(ds, 10, true, false, 1234, 0, 2, 0, 1);
    CHECK_OK(volt_loader_start(l, 0, 0));
    drain(l, &e0b);
    CHECK(same_run(&e0, &e0b), "same (seed, epoch) gives the same order");
    volt_loader_destroy(l);
    l = make_loader(ds, 10, true, false, 1235, 0, 2, 0, 1);
    CHECK_OK(volt_loader_start(l, 0, 0));
    drain(l, &other);
    CHECK(!same_run(&e0, &other), "another seed gives another order");
    volt_loader_destroy(l);

    /* no shuffle: identity */
    l = make_loader(ds, 10, false, false, 1234, 0, 2, 0, 1);
    CHECK_OK(volt_loader_start(l, 5, 0));
    drain(l, &other);
    identity = other.n_ids == 103;
    for (int i = 0; i < 103 && identity; i++) identity = other.ids[i] == i;
    CHECK(identity, "shuffle=false keeps dataset order");
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

static void test_drop_last(void) {
    volt_dataset *ds = make_ds(103);
    static run r;
    volt_loader *l = make_loader(ds, 10, true, true, 9, 0, 2, 0, 1);
    CHECK(volt_loader_num_batches(l) == 10, "drop_last: 10 batches");
    CHECK_OK(volt_loader_start(l, 0, 0));
    drain(l, &r);
    CHECK(r.n_batches == 10 && r.n_ids == 100 && r.sizes[9] == 10, "drop_last drains 10 full batches");
    volt_loader_destroy(l);
    l = make_loader(ds, 10, false, false, 9, 0, 2, 0, 1);
    CHECK(volt_loader_num_batches(l) == 11, "no drop_last: 11 batches");
    CHECK_OK(volt_loader_start(l, 0, 0));
    drain(l, &r);
    CHECK(r.n_batches == 11 && r.n_ids == 103 && r.sizes[10] == 3, "last batch has 3 rows");
    volt_loader_destroy(l);
    /* batch larger than the dataset */
    l = make_loader(ds, 1000, false, true, 9, 0, 2, 0, 1);
    CHECK(volt_loader_num_batches(l) == 0, "drop_last with batch > n: 0 batches");
    volt_loader_destroy(l);
    l = make_loader(ds, 1000, false, false, 9, 2, 2, 0, 1);
    CHECK_OK(volt_loader_start(l, 0, 0));
    drain(l, &r);
    CHECK(r.n_batches == 1 && r.sizes[0] == 103, "one batch of 103");
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
    /* empty dataset */
    ds = make_ds(0);
    l = make_loader(ds, 4, true, false, 9, 2, 2, 0, 1);
    const volt_batch *b;
    CHECK(volt_loader_num_batches(l) == 0, "empty: 0 batches");
    CHECK_OK(volt_loader_start(l, 0, 0));
    CHECK(volt_loader_next(l, &b) == VOLT_STOP, "empty: STOP");
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

static void test_distributed(void) {
    volt_dataset *ds = make_ds(10);
    static run r[3];
    /* no shuffle: padded list 0..9,0,1; rank k takes k, k+3, ... (torch DistributedSampler) */
    static const int64_t want[3][4] = { { 0, 3, 6, 9 }, { 1, 4, 7, 0 }, { 2, 5, 8, 1 } };
    for (int k = 0; k < 3; k++) {
        volt_loader *l = make_loader(ds, 3, false, false, 0, k == 1 ? 2 : 0, 2, k, 3);
        CHECK(volt_loader_num_batches(l) == 2, "rank %d: 2 batches", k);
        CHECK_OK(volt_loader_start(l, 0, 0));
        drain(l, &r[k]);
        CHECK(r[k].n_ids == 4 && memcmp(r[k].ids, want[k], sizeof want[k]) == 0,
              "rank %d ids %lld %lld %lld %lld", k, (long long)r[k].ids[0], (long long)r[k].ids[1],
              (long long)r[k].ids[2], (long long)r[k].ids[3]);
        CHECK(r[k].sizes[0] == 3 && r[k].sizes[1] == 1, "rank %d batch sizes", k);
        volt_loader_destroy(l);
    }
    /* shuffled: each rank 4, union covers all 10, exactly 2 padded repeats */
    for (uint64_t epoch = 0; epoch < 3; epoch++) {
        int seen[10] = { 0 };
        for (int k = 0; k < 3; k++) {
            volt_loader *l = make_loader(ds, 4, true, false, 77, 0, 2, 0, 1);
            CHECK_OK(volt_loader_set_shard(l, k, 3));
            CHECK(volt_loader_num_batches(l) == 1, "rank %d: 1 batch of 4", k);
            CHECK_OK(volt_loader_start(l, (int64_t)epoch, 0));
            drain(l, &r[k]);
            CHECK(r[k].n_ids == 4, "rank %d has 4 samples (%lld)", k, (long long)r[k].n_ids);
            for (int64_t j = 0; j < r[k].n_ids; j++) seen[r[k].ids[j]]++;
            volt_loader_destroy(l);
        }
        int covered = 0, total = 0;
        for (int i = 0; i < 10; i++) { covered += seen[i] > 0; total += seen[i]; }
        CHECK(covered == 10 && total == 12, "epoch %d: union covers all (%d), 12 drawn (%d)", (int)epoch,
              covered, total);
    }
    /* drop_last: truncated to 9, 3 per rank, disjoint */
    int seen[10] = { 0 };
    for (int k = 0; k < 3; k++) {
        volt_loader *l = make_loader(ds, 2, true, true, 5, 0, 2, k, 3);
        CHECK(volt_loader_num_batches(l) == 1, "drop_last rank %d: 1 batch of 2 (3 samples)", k);
        CHECK_OK(volt_loader_start(l, 0, 0));
        drain(l, &r[k]);
        CHECK(r[k].n_ids == 2, "drop_last rank %d: 2 rows", k);
        volt_loader_destroy(l);
        l = make_loader(ds, 3, true, true, 5, 0, 2, k, 3);
        CHECK_OK(volt_loader_start(l, 0, 0));
        drain(l, &r[k]);
        CHECK(r[k].n_ids == 3, "drop_last rank %d: 3 samples", k);
        for (int64_t j = 0; j < r[k].n_ids; j++) seen[r[k].ids[j]]++;
        volt_loader_destroy(l);
    }
    int distinct = 0, dups = 0;
    for (int i = 0; i < 10; i++) { distinct += seen[i] == 1; dups += seen[i] > 1; }
    CHECK(distinct == 9 && dups == 0, "drop_last: 9 distinct samples, none repeated");
    /* world larger than the dataset: wrap-around more than once */
    volt_dataset *tiny = make_ds(2);
    for (int k = 0; k < 5; k++) {
        volt_loader *l = make_loader(tiny, 8, false, false, 0, 0, 2, k, 5);
        CHECK_OK(volt_loader_start(l, 0, 0));
        drain(l, &r[0]);
        CHECK(r[0].n_ids == 1 && r[0].ids[0] == k % 2, "world 5 over 2 samples, rank %d", k);
        volt_loader_destroy(l);
    }
    volt_dataset_destroy(tiny);
    volt_loader *l = make_loader(ds, 2, false, false, 0, 0, 2, 0, 1);
    CHECK(volt_loader_set_shard(l, 3, 3) == VOLT_ERR_INVALID_ARG, "rank >= world rejected");
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

/* ---- loader: resume and workers ------------------------------------------------------------ */

static void test_resume_and_workers(void) {
    volt_dataset *ds = make_ds(203);
    static run full, tail, w, ref1;
    volt_loader *ref = make_loader(ds, 16, true, false, 42, 0, 2, 0, 1);
    CHECK_OK(volt_loader_start(ref, 2, 0));
    drain(ref, &full);
    CHECK(full.n_batches == 13 && full.bad_rows == 0, "epoch 2 has 13 batches");
    CHECK_OK(volt_loader_start(ref, 1, 0));
    drain(ref, &ref1);

    for (int workers = 0; workers <= 3; workers++) {
        volt_loader *l = make_loader(ds, 16, true, false, 42, workers, workers == 3 ? 1 : 3, 0, 1);
        /* resume at (2, 3) in a fresh loader */
        CHECK_OK(volt_loader_start(l, 2, 3));
        int64_t e, nb;
        volt_loader_position(l, &e, &nb);
        CHECK(e == 2 && nb == 3, "position after start(2,3): (%lld,%lld)", (long long)e, (long long)nb);
        drain(l, &tail);
        CHECK(tail.n_batches == 10 && tail.n_ids == full.n_ids - 48 &&
              memcmp(tail.ids, full.ids + 48, sizeof *tail.ids * (size_t)tail.n_ids) == 0,
              "workers %d: resume at batch 3 gives the uninterrupted batches", workers);
        volt_loader_position(l, &e, &nb);
        CHECK(e == 2 && nb == 13, "position at the end: (%lld,%lld)", (long long)e, (long long)nb);
        /* whole epoch with workers == without */
        CHECK_OK(volt_loader_start(l, 2, 0));
        drain(l, &w);
        CHECK(same_run(&w, &full) && w.bad_rows == 0, "workers %d: same batches as workers 0", workers);
        /* restart mid-epoch: in-flight work of epoch 2 is discarded */
        CHECK_OK(volt_loader_start(l, 2, 0));
        const volt_batch *b;
        CHECK_OK(volt_loader_next(l, &b));
        CHECK_OK(volt_loader_next(l, &b));
        volt_loader_position(l, &e, &nb);
        CHECK(nb == 2, "position after 2 batches: %lld", (long long)nb);
        CHECK_OK(volt_loader_start(l, 1, 0));
        drain(l, &w);
        CHECK(same_run(&w, &ref1) && w.bad_rows == 0, "workers %d: restart gives a clean epoch 1", workers);
        /* start at the very end */
        CHECK_OK(volt_loader_start(l, 3, 13));
        CHECK(volt_loader_next(l, &b) == VOLT_STOP, "start at num_batches: STOP");
        CHECK(volt_loader_start(l, 3, 14) == VOLT_ERR_INVALID_ARG, "start past the end rejected");
        CHECK(volt_loader_start(l, -1, 0) == VOLT_ERR_INVALID_ARG, "negative epoch rejected");
        /* destroy with batches in flight */
        CHECK_OK(volt_loader_start(l, 4, 0));
        CHECK_OK(volt_loader_next(l, &b));
        volt_loader_destroy(l);
    }
    volt_loader_destroy(ref);
    volt_dataset_destroy(ds);
}

/* volt_loader_set_batch_size: a loader made at 16 and set to 50 (then 7) gives what a loader
 * made at that size gives, with and without workers, with a batch in flight when it is set;
 * sizes past the dataset are whole-dataset batches; 0 is refused with the loader unchanged. */
static void test_set_batch_size(void) {
    volt_dataset *ds = make_ds(203);
    static run want, got;
    for (int workers = 0; workers <= 2; workers++) {
        volt_loader *l = make_loader(ds, 16, true, false, 42, workers, 2, 0, 1);
        CHECK_OK(volt_loader_start(l, 1, 0));
        const volt_batch *b;
        CHECK_OK(volt_loader_next(l, &b));   /* held, and more in flight with workers */
        const int64_t sizes[3] = { 50, 7, 500 };
        for (int k = 0; k < 3; k++) {
            CHECK_OK(volt_loader_set_batch_size(l, sizes[k]));
            CHECK(volt_loader_batch_size(l) == sizes[k] && volt_loader_num_batches(l) == (203 + sizes[k] - 1) / sizes[k],
                  "workers %d: batch size %lld, %lld batches after setting %lld", workers, (long long)volt_loader_batch_size(l),
                  (long long)volt_loader_num_batches(l), (long long)sizes[k]);
            CHECK(volt_loader_next(l, &b) == VOLT_ERR_STATE, "workers %d: next after set_batch_size without a start", workers);
            volt_loader *ref = make_loader(ds, sizes[k], true, false, 42, 0, 2, 0, 1);
            CHECK_OK(volt_loader_start(ref, 3, 0));
            drain(ref, &want);
            CHECK_OK(volt_loader_start(l, 3, 0));
            drain(l, &got);
            CHECK(same_run(&got, &want) && got.bad_rows == 0 && got.sizes[0] == (sizes[k] < 203 ? sizes[k] : 203),
                  "workers %d: batch size %lld: not the batches of a loader made at that size", workers, (long long)sizes[k]);
            volt_loader_destroy(ref);
        }
        CHECK(volt_loader_set_batch_size(l, 0) == VOLT_ERR_INVALID_ARG && strstr(volt_loader_errmsg(l), "batch_size must be >= 1") &&
                  volt_loader_batch_size(l) == 500, "workers %d: batch size 0: %s", workers, volt_loader_errmsg(l));
        CHECK(volt_loader_set_batch_size(NULL, 4) == VOLT_ERR_INVALID_ARG, "NULL loader accepted");
        /* the largest size there is: one batch of every sample (the batch count's rounding must not overflow) */
        CHECK_OK(volt_loader_set_batch_size(l, INT64_MAX));
        CHECK(volt_loader_num_batches(l) == 1, "workers %d: batch size INT64_MAX: %lld batches, want 1", workers,
              (long long)volt_loader_num_batches(l));
        volt_loader_destroy(l);
    }
    volt_dataset_destroy(ds);
}

/* A dataset whose get is slow (workers really overlap) and fails at one index. */
typedef struct flaky { int64_t n, fail_at; int sleep_us; } flaky;
static int64_t flaky_len(void *self) { return ((flaky *)self)->n; }
static volt_status flaky_get(void *self, int64_t i, void *const *dst) {
    flaky *f = self;
    if (f->sleep_us) {
        struct timespec ts = { 0, f->sleep_us * 1000L };
        nanosleep(&ts, NULL);
    }
    if (i == f->fail_at) return VOLT_ERR_IO;
    *(float *)dst[0] = (float)i;
    *(int64_t *)dst[1] = i % 3;
    return VOLT_OK;
}
static void flaky_destroy(void *self) { free(self); }

static void test_errors(void) {
    static const volt_dataset_ops ops = { VOLT_DATASET_OPS_VERSION, "flaky", flaky_len, flaky_get, flaky_destroy };
    volt_field f[2] = { { "feat", VOLT_F32, VOLT_SCALAR }, { "y", VOLT_I64, VOLT_SCALAR } };
    for (int workers = 0; workers <= 2; workers += 2) {
        flaky *fl = malloc(sizeof *fl);
        *fl = (flaky){ 20, 7, workers ? 200 : 0 };
        volt_dataset *ds = NULL;
        CHECK_OK(volt_dataset_create(&ops, fl, 2, f, &ds));
        volt_loader *l = make_loader(ds, 4, false, false, 0, workers, 4, 0, 1);
        const volt_batch *b = NULL;
        CHECK_OK(volt_loader_start(l, 0, 0));
        CHECK_OK(volt_loader_next(l, &b));
        CHECK(b && volt_batch_y(b) == &b->fields[1] && volt_batch_x(b) == &b->fields[0], "batch_y by name");
        volt_status st = volt_loader_next(l, &b);
        const char *msg = volt_loader_errmsg(l);
        CHECK(st == VOLT_ERR_IO && b == NULL, "workers %d: get failure surfaces (%s)", workers, volt_status_str(st));
        CHECK(strstr(msg, "flaky") && strstr(msg, "sample 7"), "message names dataset and index: %s", msg);
        if (workers == 0) printf("get error message: %s\n", msg);
        CHECK(volt_loader_next(l, &b) == VOLT_ERR_IO, "error sticks");
        int64_t e, nb;
        volt_loader_position(l, &e, &nb);
        CHECK(nb == 1, "position stays at the failing batch (%lld)", (long long)nb);
        /* restart past the bad batch */
        CHECK_OK(volt_loader_start(l, 0, 2));
        int n = 0;
        while ((st = volt_loader_next(l, &b)) == VOLT_OK) n++;
        CHECK(st == VOLT_STOP && n == 3, "after restart: 3 batches then STOP (%d, %s)", n, volt_status_str(st));
        /* fail again, then destroy with workers parked or busy: must not hang */
        CHECK_OK(volt_loader_start(l, 1, 0));
        volt_loader_next(l, &b);
        volt_loader_destroy(l);
        volt_dataset_destroy(ds);
    }
    /* a dataset without "y": volt_batch_y is the last field */
    flaky *fl = malloc(sizeof *fl);
    *fl = (flaky){ 4, -1, 0 };
    volt_dataset *ds = NULL;
    volt_field h[2] = { { "a", VOLT_F32, VOLT_SCALAR }, { "b", VOLT_I64, VOLT_SCALAR } };
    CHECK_OK(volt_dataset_create(&ops, fl, 2, h, &ds));
    volt_loader *l = make_loader(ds, 4, false, false, 0, 0, 2, 0, 1);
    const volt_batch *b;
    CHECK_OK(volt_loader_start(l, 0, 0));
    CHECK_OK(volt_loader_next(l, &b));
    CHECK(volt_batch_y(b) == &b->fields[1], "no y: last field");
    CHECK(!strstr(volt_data_errmsg(), "'y'"), "volt_batch_y's fallback is no error: '%s'", volt_data_errmsg());
    CHECK(volt_batch_field(b, "y") == NULL && !strcmp(volt_data_errmsg(), "batch has no field 'y' (fields: a, b)"),
          "a missing field is named with the batch's: '%s'", volt_data_errmsg());
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);

    /* bad configs */
    volt_loader_config c;
    volt_loader_config_init(&c);
    ds = make_ds(4);
    l = NULL;
    c.batch_size = 0;
    CHECK(volt_loader_create(&c, ds, &l) == VOLT_ERR_INVALID_ARG && !l, "batch_size 0");
    /* no loader to ask: volt_data_errmsg names the field and its value */
    CHECK(strstr(volt_data_errmsg(), "volt_loader_create: batch_size must be >= 1, got 0"), "batch_size 0: '%s'", volt_data_errmsg());
    c.batch_size = -5;
    CHECK(volt_loader_create(&c, ds, &l) == VOLT_ERR_INVALID_ARG && strstr(volt_data_errmsg(), "batch_size must be >= 1, got -5"),
          "batch_size -5: '%s'", volt_data_errmsg());
    volt_loader_config_init(&c);
    c.num_workers = -1;
    CHECK(volt_loader_create(&c, ds, &l) == VOLT_ERR_INVALID_ARG && strstr(volt_data_errmsg(), "num_workers must be 0..1024") &&
          strstr(volt_data_errmsg(), "got -1"), "num_workers -1: '%s'", volt_data_errmsg());
    CHECK(volt_loader_create(NULL, ds, &l) == VOLT_ERR_INVALID_ARG && strstr(volt_data_errmsg(), "config is NULL"),
          "NULL config: '%s'", volt_data_errmsg());
    volt_loader_config_init(&c);
    c.version = 0;
    CHECK(volt_loader_create(&c, ds, &l) == VOLT_ERR_VERSION && strstr(volt_data_errmsg(), "config version 0 unknown"),
          "config version: '%s'", volt_data_errmsg());
    volt_loader_config_init(&c);
    c.rank = 2; c.world = 2;
    CHECK(volt_loader_create(&c, ds, &l) == VOLT_ERR_INVALID_ARG && strstr(volt_data_errmsg(), "got rank 2 of world 2"),
          "rank >= world: '%s'", volt_data_errmsg());
    volt_dataset_destroy(ds);
    volt_loader_destroy(NULL);
}

/* ---- IDX -------------------------------------------------------------------------------- */

static void put32(unsigned char *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = (unsigned char)v; }

/* Write an IDX file: header (magic, dims) + data, minus `cut` bytes from the end. */
static void write_idx(const char *path, bool gz, uint32_t magic, const uint32_t *dims, int ndim,
                      const unsigned char *data, size_t n, size_t cut) {
    unsigned char buf[4096];
    size_t k = 0;
    put32(buf, magic); k += 4;
    for (int i = 0; i < ndim; i++) { put32(buf + k, dims[i]); k += 4; }
    memcpy(buf + k, data, n); k += n;
    k -= cut;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        CHECK(f != NULL, "gzopen %s", path);
        if (f) { gzwrite(f, buf, (unsigned)k); gzclose(f); }
    } else {
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL, "fopen %s", path);
        if (f) { fwrite(buf, 1, k, f); fclose(f); }
    }
}

static volt_status load(const char *img, const char *lab, float mean, float std, volt_dataset **ds,
                        char *err, size_t n) {
    *ds = NULL;
    return volt_idx_dataset(img, lab, mean, std, ds, err, n);
}

static void test_idx(void) {
    const char *d = vtest_tmpdir();
    char img[512], lab[512], imgz[512], labz[512], other[512];
    snprintf(img, sizeof img, "%s/img.idx", d);
    snprintf(lab, sizeof lab, "%s/lab.idx", d);
    snprintf(imgz, sizeof imgz, "%s/img.idx.gz", d);
    snprintf(labz, sizeof labz, "%s/lab.idx.gz", d);
    unsigned char px[5 * 2 * 3], lb[5] = { 3, 0, 9, 255, 1 };
    for (int i = 0; i < 30; i++) px[i] = (unsigned char)(i * 37 % 256);
    uint32_t idims[3] = { 5, 2, 3 }, ldims[1] = { 5 };
    write_idx(img, false, 0x803, idims, 3, px, sizeof px, 0);
    write_idx(lab, false, 0x801, ldims, 1, lb, sizeof lb, 0);
    write_idx(imgz, true, 0x803, idims, 3, px, sizeof px, 0);
    write_idx(labz, true, 0x801, ldims, 1, lb, sizeof lb, 0);

    char err[512];
    volt_dataset *ds;
    struct { const char *i, *l; float mean, std; } cases[] = {
        { img, lab, 0.5f, 0.25f }, { imgz, labz, 0.0f, 0.0f }, { imgz, lab, 0.1307f, 0.3081f },
    };
    for (int c = 0; c < 3; c++) {
        volt_status st = load(cases[c].i, cases[c].l, cases[c].mean, cases[c].std, &ds, err, sizeof err);
        CHECK(st == VOLT_OK, "idx case %d: %s: %s", c, volt_status_str(st), err);
        if (st != VOLT_OK) continue;
        CHECK(volt_dataset_len(ds) == 5 && ds->n_fields == 2, "idx len");
        CHECK(strcmp(ds->fields[0].name, "x") == 0 && ds->fields[0].dtype == VOLT_F32 &&
              volt_shape_eq(ds->fields[0].shape, VOLT_SHAPE(6)), "x field");
        CHECK(strcmp(ds->fields[1].name, "y") == 0 && ds->fields[1].dtype == VOLT_I64 &&
              ds->fields[1].shape.ndim == 0, "y field");
        int bad = 0;
        for (int64_t i = 0; i < 5; i++) {
            float x[6];
            int64_t y;
            void *dst[2] = { x, &y };
            CHECK_OK(ds->ops->get(ds->self, i, dst));
            for (int k = 0; k < 6; k++) {
                float p = (float)px[i * 6 + k] / 255.0f;
                float want = cases[c].std > 0 ? (p - cases[c].mean) / cases[c].std : p;
                bad += fabsf(x[k] - want) > 1e-6f;
            }
            bad += y != lb[i];
        }
        CHECK(bad == 0, "idx case %d: %d values differ", c, bad);
        volt_dataset_destroy(ds);
    }

    /* missing file */
    snprintf(other, sizeof other, "%s/nope.idx", d);
    volt_status st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && !ds && strstr(err, other) && strstr(err, strerror(ENOENT)), "missing: %s", err);
    st = load(img, other, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, other), "missing labels: %s", err);
    /* not a file */
    st = load(d, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_IO && strstr(err, d) && strstr(err, "directory"), "directory: %s", err);
    /* bad magic: arguments swapped, and a text file */
    st = load(lab, img, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, lab) && strstr(err, "magic"), "swapped: %s", err);
    snprintf(other, sizeof other, "%s/text.idx", d);
    FILE *tf = fopen(other, "w");
    if (tf) { fputs("hello, this is not an IDX file\n", tf); fclose(tf); }
    st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, other) && strstr(err, "magic"), "text file: %s", err);
    /* empty file */
    tf = fopen(other, "w");
    if (tf) fclose(tf);
    st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, other), "empty file: %s", err);
    /* truncated data, plain and gzip: 16-byte header + 30 bytes expected */
    snprintf(other, sizeof other, "%s/trunc.idx", d);
    write_idx(other, false, 0x803, idims, 3, px, sizeof px, 3);
    st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, other) && strstr(err, "expected 46 bytes") &&
          strstr(err, "file has 43"), "truncated: %s", err);
    snprintf(other, sizeof other, "%s/trunc.idx.gz", d);
    write_idx(other, true, 0x803, idims, 3, px, sizeof px, 3);
    st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, other) && strstr(err, "expected 46 bytes") &&
          strstr(err, "decompresses to 43"), "truncated gz: %s", err);
    /* more data than the header declares, plain and gzip: 4 images of 2 x 3 declared, 5 there (a
     * wrong stride was read from it) */
    uint32_t i4[3] = { 4, 2, 3 };
    snprintf(other, sizeof other, "%s/long.idx", d);
    write_idx(other, false, 0x803, i4, 3, px, sizeof px, 0);
    st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && !ds && strstr(err, other) && strstr(err, "6 bytes after the 40 the header declares"),
          "trailing data: %s", err);
    snprintf(other, sizeof other, "%s/long.idx.gz", d);
    write_idx(other, true, 0x803, i4, 3, px, sizeof px, 0);
    st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && !ds && strstr(err, other) && strstr(err, "data after the 40 bytes the header declares"),
          "trailing gzip data: %s", err);
    /* std must be a number: inf made every pixel -0, NaN skipped the normalisation */
    const float bad_std[2] = { INFINITY, NAN };
    for (int k = 0; k < 2; k++) {
        st = load(img, lab, 0.5f, bad_std[k], &ds, err, sizeof err);
        CHECK(st == VOLT_ERR_INVALID_ARG && !ds && strstr(err, "is not finite"), "std %g: %s", (double)bad_std[k], err);
    }
    /* a gzip file cut in the middle of the compressed stream */
    FILE *zf = fopen(imgz, "rb");
    unsigned char zbuf[4096];
    size_t zn = zf ? fread(zbuf, 1, sizeof zbuf, zf) : 0;
    if (zf) fclose(zf);
    snprintf(other, sizeof other, "%s/cut.idx.gz", d);
    zf = fopen(other, "wb");
    if (zf) { fwrite(zbuf, 1, zn / 2, zf); fclose(zf); }
    st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, other), "cut gzip stream: %s", err);
    /* truncated header */
    snprintf(other, sizeof other, "%s/hdr.idx", d);
    write_idx(other, false, 0x803, idims, 3, px, 0, 6);
    st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, other) && strstr(err, "header"), "short header: %s", err);
    /* implausible dims */
    uint32_t huge[3] = { 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu };
    write_idx(other, false, 0x803, huge, 3, px, 0, 0);
    st = load(other, lab, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, other), "huge dims: %s", err);
    /* count mismatch */
    snprintf(other, sizeof other, "%s/lab4.idx", d);
    uint32_t l4[1] = { 4 };
    write_idx(other, false, 0x801, l4, 1, lb, 4, 0);
    st = load(img, other, 0, 0, &ds, err, sizeof err);
    CHECK(st == VOLT_ERR_CORRUPT && strstr(err, img) && strstr(err, other) && strstr(err, "5 images") &&
          strstr(err, "4 labels"), "count mismatch: %s", err);
    /* NULL err buffer is fine */
    CHECK(volt_idx_dataset(img, other, 0, 0, &ds, NULL, 0) == VOLT_ERR_CORRUPT, "NULL err");
}

static void test_fashion(void) {
    const char *imgs = FASHION_DIR "/train-images-idx3-ubyte.gz", *labs = FASHION_DIR "/train-labels-idx1-ubyte.gz";
    if (access(imgs, R_OK) != 0 || access(labs, R_OK) != 0) {
        char why[1200];
        snprintf(why, sizeof why, "Fashion-MNIST %s not found (scripts/setup.sh installs dataset-fashion-mnist); "
                 "its checks did not run", imgs);
        vtest_missing(why);
        return;
    }
    char err[512];
    volt_dataset *ds = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volt_status st = volt_idx_dataset(imgs, labs, 0.2860f, 0.3530f, &ds, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(st == VOLT_OK, "fashion train: %s", err);
    if (st != VOLT_OK) return;
    CHECK(volt_dataset_len(ds) == 60000, "60000 samples (%lld)", (long long)volt_dataset_len(ds));
    CHECK(volt_shape_eq(ds->fields[0].shape, VOLT_SHAPE(784)), "x is (784)");
    volt_loader *l = make_loader(ds, 1000, true, false, 1, 2, 2, 0, 1);
    int64_t count[10] = { 0 }, out_of_range = 0, rows = 0;
    double sum = 0;
    const volt_batch *b;
    CHECK_OK(volt_loader_start(l, 0, 0));
    while ((st = volt_loader_next(l, &b)) == VOLT_OK) {
        const int64_t *y = volt_batch_y(b)->data;
        const float *x = volt_batch_x(b)->data;
        for (int64_t k = 0; k < b->size; k++) {
            if (y[k] < 0 || y[k] > 9) out_of_range++; else count[y[k]]++;
        }
        for (int64_t k = 0; k < b->size * 784; k++) sum += x[k];
        rows += b->size;
    }
    CHECK(st == VOLT_STOP && rows == 60000, "drained 60000 rows");
    CHECK(out_of_range == 0, "labels in 0..9");
    int balanced = 1;
    for (int c = 0; c < 10; c++) balanced &= count[c] == 6000;
    CHECK(balanced, "6000 per class (class 0: %lld)", (long long)count[0]);
    /* normalised with the dataset's own mean/std: the mean pixel is ~0 */
    CHECK(fabs(sum / (60000.0 * 784)) < 1e-3, "normalised mean %g", sum / (60000.0 * 784));
    printf("fashion-mnist train: loaded in %.2f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    volt_loader_destroy(l);
    volt_dataset_destroy(ds);
}

int main(void) {
    test_dataset();
    test_shuffle();
    test_drop_last();
    test_distributed();
    test_resume_and_workers();
    test_set_batch_size();
    test_errors();
    test_idx();
    test_fashion();
    return vtest_finish();
}
