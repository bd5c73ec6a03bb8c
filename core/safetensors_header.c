/* safetensors header parser: the JSON header of a file being opened (core/safetensors_read.c),
 * checked entry by entry. See volt/safetensors.h.
 *
 * Nothing in the header is trusted: every length and offset is range-checked before
 * use, numbers are checked to be exact non-negative integers, and products are
 * overflow-checked, so a damaged or hostile header yields VOLT_ERR_CORRUPT, never a crash. */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "core/safetensors_internal.h"

#define ST_MAX_JSON_INT 9007199254740992.0     /* 2^53: larger doubles are not exact */

/* Valid in the safetensors format but without a volt dtype, with their bits per element: such a
 * tensor is listed and sized (its offsets checked as any), and UNSUPPORTED only where it would
 * be read (st_open) or looked up (volt_st_find), not CORRUPT. */
static const struct { const char *name; unsigned bits; } st_foreign_dtypes[] = {
    { "BOOL", 8 }, { "I8", 8 }, { "I16", 16 }, { "U16", 16 }, { "U32", 32 }, { "U64", 64 }, { "F64", 64 },
    { "F8_E5M2", 8 }, { "F8_E4M3", 8 }, { "F8_E8M0", 8 }, { "F6_E2M3", 6 }, { "F6_E3M2", 6 }, { "F4", 4 }, { "C64", 64 },
};

/* volt's dtype index; -2 - i for foreign dtype i; -1 for no dtype of the format */
static int st_dtype_parse(const char *s) {
    for (int i = 0; i < VOLT_DTYPE_COUNT; i++)
        if (strcmp(s, st_dtype_names[i]) == 0) return i;
    for (size_t i = 0; i < sizeof st_foreign_dtypes / sizeof *st_foreign_dtypes; i++)
        if (strcmp(s, st_foreign_dtypes[i].name) == 0) return -2 - (int)i;
    return -1;
}

static bool st_json_u64(const cJSON *x, uint64_t *out) {
    if (!cJSON_IsNumber(x)) return false;
    double v = x->valuedouble;
    if (!(v >= 0 && v <= ST_MAX_JSON_INT) || v != (double)(uint64_t)v) return false;
    *out = (uint64_t)v;
    return true;
}

static int st_cmp_offset(const void *a, const void *b) {
    const st_rentry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Merge sort of indices by name (qsort has no context argument, and a global would make
 * open thread-unsafe). tmp holds n ints. */
static void st_sort_by_name(const st_rentry *t, int *idx, int *tmp, int n) {
    if (n < 2) return;
    int h = n / 2;
    st_sort_by_name(t, idx, tmp, h);
    st_sort_by_name(t, idx + h, tmp, n - h);
    int i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = strcmp(t[idx[j]].name, t[idx[i]].name) < 0 ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

static volt_status st_parse_entry(const char *path, const cJSON *item, st_rentry *e,
                                  uint64_t data_size, char *err, size_t errlen) {
    const char *name = item->string;
    e->name = name;
    if (!cJSON_IsObject(item))
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s': header entry is not an object", path, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs))
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s': header entry lacks dtype, shape or data_offsets",
                       path, name);
    int d = st_dtype_parse(dt->valuestring);
    if (d == -1)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s': unknown dtype '%.32s'", path, name,
                       dt->valuestring);
    unsigned fbits = 0;
    e->foreign = NULL;
    if (d <= -2) {   /* sized by its bits below; U8 only as a placeholder, never given out */
        e->foreign = st_foreign_dtypes[-2 - d].name;
        fbits = st_foreign_dtypes[-2 - d].bits;
        d = VOLT_U8;
    }
    e->dtype = (volt_dtype)d;
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > VOLT_MAX_DIMS)
        return st_fail(err, errlen, VOLT_ERR_UNSUPPORTED,
                       "file '%s': tensor '%s': %d dims (volt supports at most %d)", path, name,
                       ndim, VOLT_MAX_DIMS);
    memset(&e->shape, 0, sizeof e->shape);
    e->shape.ndim = ndim;
    int i = 0;
    for (const cJSON *x = shape->child; x; x = x->next, i++) {
        uint64_t v;
        if (!st_json_u64(x, &v))
            return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                           "file '%s': tensor '%s': shape entry %d is not a non-negative integer",
                           path, name, i);
        e->shape.d[i] = (int64_t)v;
    }
    uint64_t numel, nbytes;
    if (!st_shape_bytes(e->shape, e->dtype, &numel, &nbytes) || (fbits && __builtin_mul_overflow(numel, fbits, &nbytes)))
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s': shape too large", path, name);
    if (fbits) nbytes = (nbytes + 7) / 8;   /* whole bytes, as the format stores sub-byte dtypes */
    if (cJSON_GetArraySize(offs) != 2 || !st_json_u64(offs->child, &e->begin) ||
        !st_json_u64(offs->child->next, &e->end) || e->end < e->begin)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s': data_offsets must be [begin, end] with "
                       "0 <= begin <= end", path, name);
    if (e->end > data_size)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s': data_offsets [%llu, %llu] exceed the data "
                       "section (%llu bytes): file truncated?", path, name,
                       (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)data_size);
    if (e->end - e->begin != nbytes) {
        char sb[96];
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but "
                       "%s %s needs %llu", path, name, (unsigned long long)e->begin,
                       (unsigned long long)e->end, (unsigned long long)(e->end - e->begin),
                       e->foreign ? e->foreign : st_dtype_names[e->dtype], volt_shape_str(e->shape, sb, sizeof sb),
                       (unsigned long long)nbytes);
    }
    return VOLT_OK;
}

volt_status st_parse_header(volt_st_file *f, char *hdr, size_t hl, char *err,
                            size_t errlen) {
    const char *path = f->path;
    if (hl == 0 || hdr[0] != '{')
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': not a safetensors file (header is not a JSON object)", path);
    const char *end = NULL;
    f->root = cJSON_ParseWithLengthOpts(hdr, hl, &end, 0);
    if (!f->root)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': header is not valid JSON (near byte %lld of %zu)", path,
                       end ? (long long)(end - hdr) : -1LL, hl);
    for (const char *p = end; p < hdr + hl; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                           "file '%s': header has trailing bytes after the JSON (at byte %lld)",
                           path, (long long)(p - hdr));
    if (!cJSON_IsObject(f->root))
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': not a safetensors file (header is not a JSON object)", path);

    int nitems = cJSON_GetArraySize(f->root);
    const cJSON *meta = NULL;
    for (const cJSON *x = f->root->child; x; x = x->next)
        if (x->string && strcmp(x->string, "__metadata__") == 0) {
            if (meta)
                return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                               "file '%s': header has two __metadata__ entries", path);
            meta = x;
        }
    if (meta) {
        if (!cJSON_IsObject(meta))
            return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                           "file '%s': __metadata__ is not an object", path);
        int nm = cJSON_GetArraySize(meta);
        f->mkey = calloc((size_t)(nm ? nm : 1), sizeof *f->mkey);
        f->mval = calloc((size_t)(nm ? nm : 1), sizeof *f->mval);
        if (!f->mkey || !f->mval)
            return st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory", path);
        for (const cJSON *x = meta->child; x; x = x->next) {
            if (!cJSON_IsString(x) || !x->string)
                return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                               "file '%s': __metadata__ entry '%s' is not a string", path,
                               x->string ? x->string : "?");
            f->mkey[f->nmeta] = x->string;
            f->mval[f->nmeta] = x->valuestring;
            f->nmeta++;
        }
    }

    int nt = nitems - (meta ? 1 : 0);
    f->t = calloc((size_t)(nt ? nt : 1), sizeof *f->t);
    f->by_name = malloc((size_t)(nt ? nt : 1) * sizeof *f->by_name);
    if (!f->t || !f->by_name)
        return st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory", path);
    for (const cJSON *x = f->root->child; x; x = x->next) {
        if (x == meta) continue;
        if (!x->string)
            return st_fail(err, errlen, VOLT_ERR_CORRUPT, "file '%s': unnamed header entry", path);
        VOLT_TRY(st_parse_entry(path, x, &f->t[f->n], f->data_size, err, errlen));
        f->n++;
    }

    qsort(f->t, (size_t)f->n, sizeof *f->t, st_cmp_offset);
    for (int i = 1; i < f->n; i++)
        if (f->t[i].begin < f->t[i - 1].end)
            return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                           "file '%s': tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
                           path, f->t[i - 1].name, (unsigned long long)f->t[i - 1].begin,
                           (unsigned long long)f->t[i - 1].end, f->t[i].name,
                           (unsigned long long)f->t[i].begin, (unsigned long long)f->t[i].end);

    int *tmp = malloc((size_t)(f->n ? f->n : 1) * sizeof *tmp);
    if (!tmp) return st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory", path);
    for (int i = 0; i < f->n; i++) f->by_name[i] = i;
    st_sort_by_name(f->t, f->by_name, tmp, f->n);
    free(tmp);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->t[f->by_name[i]].name, f->t[f->by_name[i - 1]].name) == 0)
            return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                           "file '%s': tensor '%s' appears twice in the header", path,
                           f->t[f->by_name[i]].name);
    return VOLT_OK;
}
