/* Datasets: the generic wrapper around a (ops, self) pair, subset views and in-memory
 * arrays. See volt/data.h. The wrapper copies field names so callers may pass
 * stack or temporary strings; views and array datasets carry their own ops copy so that
 * error messages can name them ("mnist[0:1000]"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/data.h"

#define DS_NAME_MAX 64

typedef struct ds_impl {
    volt_dataset pub;                       /* first: a volt_dataset * is a ds_impl * */
    char names[VOLT_MAX_FIELDS][DS_NAME_MAX];
} ds_impl;

static bool field_valid(const volt_field *f) {
    if (!f->name || !f->name[0] || strlen(f->name) >= DS_NAME_MAX) return false;
    if ((unsigned)f->dtype >= VOLT_DTYPE_COUNT) return false;
    if (f->shape.ndim < 0 || f->shape.ndim > VOLT_MAX_DIMS - 1) return false;
    for (int i = 0; i < f->shape.ndim; i++)
        if (f->shape.d[i] < 0 || f->shape.d[i] > ((int64_t)1 << 40)) return false;
    return true;
}

volt_status volt_dataset_create(const volt_dataset_ops *ops, void *self, int n_fields,
                                const volt_field *fields, volt_dataset **out) {
    volt_status st = VOLT_OK;
    ds_impl *d = NULL;
    if (out) *out = NULL;
    if (!ops) return VOLT_ERR_INVALID_ARG;          /* nothing to call destroy through */
    if (!VOLT_VERSION_OK(ops->version, VOLT_DATASET_OPS_VERSION)) { st = VOLT_ERR_VERSION; goto fail; }
    if (!out || !ops->len || !ops->get || n_fields < 1 || n_fields > VOLT_MAX_FIELDS || !fields) {
        st = VOLT_ERR_INVALID_ARG;
        goto fail;
    }
    for (int f = 0; f < n_fields; f++) {
        if (!field_valid(&fields[f])) { st = VOLT_ERR_INVALID_ARG; goto fail; }
        for (int g = 0; g < f; g++)
            if (strcmp(fields[f].name, fields[g].name) == 0) { st = VOLT_ERR_INVALID_ARG; goto fail; }
    }
    if (!(d = calloc(1, sizeof *d))) { st = VOLT_ERR_NOMEM; goto fail; }
    d->pub.ops = ops;
    d->pub.self = self;
    d->pub.n_fields = n_fields;
    for (int f = 0; f < n_fields; f++) {
        d->pub.fields[f] = fields[f];
        strcpy(d->names[f], fields[f].name);
        d->pub.fields[f].name = d->names[f];
    }
    *out = &d->pub;
    return VOLT_OK;
fail:
    if (ops->destroy) ops->destroy(self);
    return st;
}

void volt_dataset_destroy(volt_dataset *ds) {
    if (!ds) return;
    /* Read the destructor first: ops may live inside self (views, arrays). */
    void (*destroy)(void *) = ds->ops->destroy;
    if (destroy) destroy(ds->self);
    free((ds_impl *)ds);
}

int64_t volt_dataset_len(const volt_dataset *ds) {
    if (!ds) return 0;
    int64_t n = ds->ops->len(ds->self);
    return n < 0 ? 0 : n;
}

/* ---- subset views ----------------------------------------------------------------- */

typedef struct subset {
    volt_dataset_ops ops;                   /* per-view copy, for the name */
    char name[DS_NAME_MAX + 48];
    volt_dataset *parent;
    int64_t start, count;
} subset;

static int64_t subset_len(void *self) { return ((subset *)self)->count; }

static volt_status subset_get(void *self, int64_t index, void *const *dst) {
    subset *s = self;
    if (index < 0 || index >= s->count) return VOLT_ERR_INVALID_ARG;
    return s->parent->ops->get(s->parent->self, s->start + index, dst);
}

static void subset_destroy(void *self) { free(self); }

volt_status volt_dataset_subset(volt_dataset *ds, int64_t start, int64_t count, volt_dataset **out) {
    if (out) *out = NULL;
    if (!ds || !out || start < 0 || count < 0) return VOLT_ERR_INVALID_ARG;
    int64_t n = volt_dataset_len(ds);
    if (start > n || count > n - start) return VOLT_ERR_INVALID_ARG;
    subset *s = calloc(1, sizeof *s);
    if (!s) return VOLT_ERR_NOMEM;
    s->ops = (volt_dataset_ops){ .version = VOLT_DATASET_OPS_VERSION, .name = s->name,
                                 .len = subset_len, .get = subset_get, .destroy = subset_destroy };
    const char *pn = ds->ops->name ? ds->ops->name : "dataset";
    snprintf(s->name, sizeof s->name, "%.*s[%lld:%lld]", DS_NAME_MAX - 1, pn,
             (long long)start, (long long)(start + count));
    s->parent = ds;
    s->start = start;
    s->count = count;
    return volt_dataset_create(&s->ops, s, ds->n_fields, ds->fields, out);
}

/* ---- in-memory arrays --------------------------------------------------------------- */

typedef struct arrays {
    volt_dataset_ops ops;
    int n_fields;
    int64_t n;
    size_t sample_bytes[VOLT_MAX_FIELDS];
    unsigned char *data[VOLT_MAX_FIELDS];
} arrays;

static int64_t arrays_len(void *self) { return ((arrays *)self)->n; }

static volt_status arrays_get(void *self, int64_t index, void *const *dst) {
    arrays *a = self;
    if (index < 0 || index >= a->n) return VOLT_ERR_INVALID_ARG;
    for (int f = 0; f < a->n_fields; f++)
        memcpy(dst[f], a->data[f] + (size_t)index * a->sample_bytes[f], a->sample_bytes[f]);
    return VOLT_OK;
}

static void arrays_destroy(void *self) {
    arrays *a = self;
    for (int f = 0; f < VOLT_MAX_FIELDS; f++) free(a->data[f]);
    free(a);
}

volt_status volt_dataset_from_arrays(int n_fields, const volt_field *fields, const void *const *data,
                                     int64_t n, volt_dataset **out) {
    if (out) *out = NULL;
    if (!out || !fields || n < 0 || n_fields < 1 || n_fields > VOLT_MAX_FIELDS || (n > 0 && !data))
        return VOLT_ERR_INVALID_ARG;
    arrays *a = calloc(1, sizeof *a);
    if (!a) return VOLT_ERR_NOMEM;
    a->ops = (volt_dataset_ops){ .version = VOLT_DATASET_OPS_VERSION, .name = "arrays",
                                 .len = arrays_len, .get = arrays_get, .destroy = arrays_destroy };
    a->n_fields = n_fields;
    a->n = n;
    for (int f = 0; f < n_fields; f++) {
        if (!field_valid(&fields[f]) || (n > 0 && !data[f])) { arrays_destroy(a); return VOLT_ERR_INVALID_ARG; }
        size_t sb = (size_t)volt_shape_numel(fields[f].shape) * volt_dtype_size(fields[f].dtype);
        if (sb && (uint64_t)n > SIZE_MAX / sb) { arrays_destroy(a); return VOLT_ERR_NOMEM; }
        a->sample_bytes[f] = sb;
        size_t total = sb * (size_t)n;
        if (!(a->data[f] = malloc(total ? total : 1))) { arrays_destroy(a); return VOLT_ERR_NOMEM; }
        if (total) memcpy(a->data[f], data[f], total);
    }
    return volt_dataset_create(&a->ops, a, n_fields, fields, out);
}
