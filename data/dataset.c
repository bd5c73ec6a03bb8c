/* Datasets: the generic wrapper around a (ops, self) pair, subset views and in-memory
 * arrays. See volt/data.h. The wrapper copies field names so callers may pass
 * stack or temporary strings; views and array datasets carry their own ops copy so that
 * error messages can name them ("mnist[0:1000]"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/data.h"
#include "data/data_internal.h"

#define DS_NAME_MAX 64

typedef struct ds_impl {
    volt_dataset pub;                       /* first: a volt_dataset * is a ds_impl * */
    char names[VOLT_MAX_FIELDS][DS_NAME_MAX];
} ds_impl;

/* false with volt_data_errmsg naming the field and what is wrong (what: the caller) */
static bool field_valid(const char *what, int i, const volt_field *f) {
    if (!f->name || !f->name[0] || strlen(f->name) >= DS_NAME_MAX)
        return volt__data_err(VOLT_ERR_INVALID_ARG, "%s: field %d: name must be 1..%d bytes, got %s", what, i, DS_NAME_MAX - 1,
                              f->name ? (f->name[0] ? "a longer one" : "\"\"") : "NULL"), false;
    if ((unsigned)f->dtype >= VOLT_DTYPE_COUNT)
        return volt__data_err(VOLT_ERR_INVALID_ARG, "%s: field '%s': unknown dtype %d", what, f->name, (int)f->dtype), false;
    if (f->shape.ndim < 0 || f->shape.ndim > VOLT_MAX_DIMS - 1)
        return volt__data_err(VOLT_ERR_INVALID_ARG, "%s: field '%s': ndim must be 0..%d, got %d", what, f->name,
                              VOLT_MAX_DIMS - 1, f->shape.ndim), false;
    uint64_t numel = 1;   /* a sample's elements: each dim and their product <= 2^40 (no overflow below) */
    for (int k = 0; k < f->shape.ndim; k++) {
        if (f->shape.d[k] < 0 || f->shape.d[k] > ((int64_t)1 << 40))
            return volt__data_err(VOLT_ERR_INVALID_ARG, "%s: field '%s': dim %d is %lld (want 0..2^40)", what, f->name, k,
                                  (long long)f->shape.d[k]), false;
        const uint64_t d = (uint64_t)f->shape.d[k];
        if (d && numel > ((uint64_t)1 << 40) / d)
            return volt__data_err(VOLT_ERR_INVALID_ARG, "%s: field '%s': a sample of more than 2^40 elements (its dims' "
                                  "product)", what, f->name), false;
        numel = d ? numel * d : 0;
    }
    return true;
}

volt_status volt_dataset_create(const volt_dataset_ops *ops, void *self, int n_fields,
                                const volt_field *fields, volt_dataset **out) {
    volt_status st = VOLT_OK;
    ds_impl *d = NULL;
    if (out) *out = NULL;
    /* nothing to call destroy through */
    if (!ops) return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_dataset_create: ops is NULL");
    if (!VOLT_VERSION_OK(ops->version, VOLT_DATASET_OPS_VERSION)) {
        st = volt__data_err(VOLT_ERR_VERSION, "volt_dataset_create: ops version %u unknown (this volt knows 1..%u)",
                            (unsigned)ops->version, VOLT_DATASET_OPS_VERSION);
        goto fail;
    }
    if (!out || !ops->len || !ops->get || !fields) {
        st = volt__data_err(VOLT_ERR_INVALID_ARG, "volt_dataset_create: %s is NULL",
                            !out ? "out" : !ops->len ? "ops->len" : !ops->get ? "ops->get" : "fields");
        goto fail;
    }
    if (n_fields < 1 || n_fields > VOLT_MAX_FIELDS) {
        st = volt__data_err(VOLT_ERR_INVALID_ARG, "volt_dataset_create: n_fields must be 1..%d, got %d", VOLT_MAX_FIELDS, n_fields);
        goto fail;
    }
    for (int f = 0; f < n_fields; f++) {
        if (!field_valid("volt_dataset_create", f, &fields[f])) { st = VOLT_ERR_INVALID_ARG; goto fail; }
        for (int g = 0; g < f; g++)
            if (strcmp(fields[f].name, fields[g].name) == 0) {
                st = volt__data_err(VOLT_ERR_INVALID_ARG, "volt_dataset_create: field name '%s' given twice", fields[f].name);
                goto fail;
            }
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
    if (!ds || !out) return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_dataset_subset: %s is NULL", !ds ? "dataset" : "out");
    int64_t n = volt_dataset_len(ds);
    if (start < 0 || count < 0 || start > n || count > n - start)
        return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_dataset_subset: start %lld, count %lld is outside dataset '%s' of %lld "
                              "samples (want 0 <= start, 0 <= count, start + count <= %lld)", (long long)start, (long long)count,
                              ds->ops->name ? ds->ops->name : "dataset", (long long)n, (long long)n);
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
    if (!out || !fields || (n > 0 && !data))
        return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_dataset_from_arrays: %s is NULL", !out ? "out" : !fields ? "fields" : "data");
    if (n < 0 || n_fields < 1 || n_fields > VOLT_MAX_FIELDS)
        return volt__data_err(VOLT_ERR_INVALID_ARG, "volt_dataset_from_arrays: want n >= 0 and n_fields 1..%d, got n %lld, "
                              "n_fields %d", VOLT_MAX_FIELDS, (long long)n, n_fields);
    arrays *a = calloc(1, sizeof *a);
    if (!a) return VOLT_ERR_NOMEM;
    a->ops = (volt_dataset_ops){ .version = VOLT_DATASET_OPS_VERSION, .name = "arrays",
                                 .len = arrays_len, .get = arrays_get, .destroy = arrays_destroy };
    a->n_fields = n_fields;
    a->n = n;
    for (int f = 0; f < n_fields; f++) {
        if (!field_valid("volt_dataset_from_arrays", f, &fields[f]) ||
            (n > 0 && !data[f] && volt__data_err(VOLT_ERR_INVALID_ARG, "volt_dataset_from_arrays: data[%d] is NULL", f))) {
            arrays_destroy(a);
            return VOLT_ERR_INVALID_ARG;
        }
        size_t sb = (size_t)volt_shape_numel(fields[f].shape) * volt_dtype_size(fields[f].dtype);
        if (sb && (uint64_t)n > SIZE_MAX / sb) { arrays_destroy(a); return VOLT_ERR_NOMEM; }
        a->sample_bytes[f] = sb;
        size_t total = sb * (size_t)n;
        if (!(a->data[f] = malloc(total ? total : 1))) { arrays_destroy(a); return VOLT_ERR_NOMEM; }
        if (total) memcpy(a->data[f], data[f], total);
    }
    return volt_dataset_create(&a->ops, a, n_fields, fields, out);
}
