/* safetensors reader/writer and the atomic file write beneath it. See volt/safetensors.h.
 *
 * The reader trusts nothing in the file: every length and offset is range-checked before
 * use, numbers are checked to be exact non-negative integers, and products are
 * overflow-checked, so a damaged or hostile file yields VOLT_ERR_CORRUPT, never a crash. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include <zlib.h>
#include "volt/safetensors.h"
#include "core/err.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "volt safetensors I/O assumes a little-endian host"
#endif

#define ST_MAX_JSON_INT 9007199254740992.0     /* 2^53: larger doubles are not exact */

#define st_fail volt__errf   /* core/err.h */

/* ---- dtypes -------------------------------------------------------------------- */

static const char *const st_dtype_names[VOLT_DTYPE_COUNT] = {
    [VOLT_F32] = "F32", [VOLT_BF16] = "BF16", [VOLT_F16] = "F16",
    [VOLT_I32] = "I32", [VOLT_I64] = "I64", [VOLT_U8] = "U8",
};

/* Valid in the safetensors format but without a volt dtype: UNSUPPORTED, not CORRUPT. */
static const char *const st_foreign_dtypes[] = {
    "BOOL", "I8", "I16", "U16", "U32", "U64", "F64", "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "F6_E2M3", "F6_E3M2", "F4", "C64",
};

static int st_dtype_parse(const char *s) {
    for (int i = 0; i < VOLT_DTYPE_COUNT; i++)
        if (strcmp(s, st_dtype_names[i]) == 0) return i;
    for (size_t i = 0; i < sizeof st_foreign_dtypes / sizeof *st_foreign_dtypes; i++)
        if (strcmp(s, st_foreign_dtypes[i]) == 0) return -2;
    return -1;
}

/* numel and byte size of a shape, or false on overflow / negative dims. */
static bool st_shape_bytes(volt_shape s, volt_dtype dt, uint64_t *numel, uint64_t *nbytes) {
    uint64_t n = 1;
    if (s.ndim < 0 || s.ndim > VOLT_MAX_DIMS) return false;
    for (int i = 0; i < s.ndim; i++) {
        if (s.d[i] < 0 || __builtin_mul_overflow(n, (uint64_t)s.d[i], &n)) return false;
    }
    if (n > (uint64_t)INT64_MAX) return false;
    uint64_t b;
    if (__builtin_mul_overflow(n, (uint64_t)volt_dtype_size(dt), &b) || b > SIZE_MAX) return false;
    *numel = n;
    *nbytes = b;
    return true;
}

static uint32_t st_crc32(const void *data, size_t n) {
    uLong c = crc32(0L, Z_NULL, 0);
    const Bytef *p = data;
    while (n) {                                   /* zlib lengths are uInt (32-bit) */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

/* The format requires a UTF-8 header; check names and metadata before writing. */
static bool st_utf8_ok(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p++;
        int more;
        unsigned min;
        if (c < 0x80) continue;
        else if ((c & 0xE0) == 0xC0) { more = 1; min = 0x80; c &= 0x1F; }
        else if ((c & 0xF0) == 0xE0) { more = 2; min = 0x800; c &= 0x0F; }
        else if ((c & 0xF8) == 0xF0) { more = 3; min = 0x10000; c &= 0x07; }
        else return false;
        for (int i = 0; i < more; i++) {
            if ((*p & 0xC0) != 0x80) return false;
            c = (c << 6) | (*p++ & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    }
    return true;
}

/* ---- atomic write ---------------------------------------------------------------- */

typedef struct st_part { const void *data; size_t n; } st_part;

static int st_write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        size_t k = n > (1u << 30) ? (1u << 30) : n;
        ssize_t w = write(fd, p, k);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) { errno = EIO; return -1; }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsync the directory holding `path` so the rename itself is durable. */
static int st_fsync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash) dir = strdup(".");
    else if (slash == path) dir = strdup("/");
    else dir = strndup(path, (size_t)(slash - path));
    if (!dir) { errno = ENOMEM; return -1; }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    /* Some file systems cannot fsync a directory; the rename is then as durable as it gets. */
    if (rc < 0 && (e == EINVAL || e == ENOTSUP)) rc = 0;
    errno = e;
    return rc;
}

static volt_status st_write_parts_atomic(const char *path, const st_part *parts, size_t nparts,
                                         char *err, size_t errlen) {
    if (!path || !*path)
        return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "atomic write: empty path");
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) return st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);

    volt_status st = VOLT_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = st_fail(err, errlen, VOLT_ERR_IO, "file '%s': cannot create '%s': %s",
                     path, tmp, strerror(errno));
        free(tmp);
        return st;                          /* nothing created, nothing to remove */
    }
    for (size_t i = 0; i < nparts && st == VOLT_OK; i++)
        if (parts[i].n && st_write_all(fd, parts[i].data, parts[i].n) < 0)
            st = st_fail(err, errlen, VOLT_ERR_IO, "file '%s': write to '%s' failed: %s",
                         path, tmp, strerror(errno));
    if (st == VOLT_OK && fsync(fd) < 0)
        st = st_fail(err, errlen, VOLT_ERR_IO, "file '%s': fsync of '%s' failed: %s",
                     path, tmp, strerror(errno));
    if (close(fd) < 0 && st == VOLT_OK)
        st = st_fail(err, errlen, VOLT_ERR_IO, "file '%s': close of '%s' failed: %s",
                     path, tmp, strerror(errno));
    if (st == VOLT_OK && rename(tmp, path) < 0)
        st = st_fail(err, errlen, VOLT_ERR_IO, "file '%s': rename from '%s' failed: %s",
                     path, tmp, strerror(errno));
    if (st != VOLT_OK) {
        unlink(tmp);
        free(tmp);
        return st;
    }
    free(tmp);
    if (st_fsync_dir(path) < 0)
        return st_fail(err, errlen, VOLT_ERR_IO,
                       "file '%s': written, but fsync of its directory failed: %s",
                       path, strerror(errno));
    return VOLT_OK;
}

volt_status volt_file_write_atomic(const char *path, const void *data, size_t n,
                                   char *err, size_t errlen) {
    if (n && !data)
        return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "file '%s': NULL data",
                       path ? path : "(null)");
    st_part part = { data, n };
    return st_write_parts_atomic(path, &part, 1, err, errlen);
}

/* ---- writer ---------------------------------------------------------------------- */

typedef struct st_wentry {
    char *name;
    volt_dtype dtype;
    volt_shape shape;
    const void *data;      /* borrowed, or == owned */
    void *owned;           /* add_copy's copy, else NULL */
    size_t nbytes;
} st_wentry;

struct volt_st_writer {
    st_wentry *t;
    int n, cap;
    char **mkey, **mval;
    int nmeta, capmeta;
    char errmsg[512];
};

volt_status volt_st_writer_create(volt_st_writer **out) {
    if (!out) return VOLT_ERR_INVALID_ARG;
    *out = calloc(1, sizeof **out);
    return *out ? VOLT_OK : VOLT_ERR_NOMEM;
}

void volt_st_writer_destroy(volt_st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].owned);
    }
    for (int i = 0; i < w->nmeta; i++) {
        free(w->mkey[i]);
        free(w->mval[i]);
    }
    free(w->t);
    free(w->mkey);
    free(w->mval);
    free(w);
}

/* The metadata set so far, in the order first set (for checksums over it). */
int volt_st_writer_meta_count(const volt_st_writer *w) { return w ? w->nmeta : 0; }

volt_status volt_st_writer_meta_at(const volt_st_writer *w, int i, const char **key, const char **value) {
    if (!w || i < 0 || i >= w->nmeta) return VOLT_ERR_INVALID_ARG;
    *key = w->mkey[i];
    *value = w->mval[i];
    return VOLT_OK;
}

const char *volt_st_writer_errmsg(const volt_st_writer *w) {
    return w ? w->errmsg : "";
}

static volt_status st_writer_add(volt_st_writer *w, const char *name, volt_dtype dt,
                                 volt_shape shape, const void *data, bool copy) {
    if (!w) return VOLT_ERR_INVALID_ARG;
    char *e = w->errmsg;
    size_t el = sizeof w->errmsg;
    e[0] = 0;
    if (!name || !*name)
        return st_fail(e, el, VOLT_ERR_INVALID_ARG, "safetensors writer: empty tensor name");
    if (strcmp(name, "__metadata__") == 0 || !st_utf8_ok(name))
        return st_fail(e, el, VOLT_ERR_INVALID_ARG,
                       "safetensors writer: invalid tensor name '%s'", name);
    if ((unsigned)dt >= VOLT_DTYPE_COUNT)
        return st_fail(e, el, VOLT_ERR_INVALID_ARG,
                       "safetensors writer: tensor '%s': invalid dtype %d", name, (int)dt);
    uint64_t numel, nbytes;
    if (!st_shape_bytes(shape, dt, &numel, &nbytes))
        return st_fail(e, el, VOLT_ERR_INVALID_ARG,
                       "safetensors writer: tensor '%s': invalid shape (ndim %d, at most %d, "
                       "dims >= 0)", name, (int)shape.ndim, VOLT_MAX_DIMS);
    if (nbytes && !data)
        return st_fail(e, el, VOLT_ERR_INVALID_ARG,
                       "safetensors writer: tensor '%s': NULL data", name);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return st_fail(e, el, VOLT_ERR_INVALID_ARG,
                           "safetensors writer: duplicate tensor name '%s'", name);
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        st_wentry *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return st_fail(e, el, VOLT_ERR_NOMEM, "safetensors writer: out of memory");
        w->t = t;
        w->cap = cap;
    }
    st_wentry ent = { .name = strdup(name), .dtype = dt, .shape = shape,
                      .data = data, .nbytes = (size_t)nbytes };
    for (int i = shape.ndim; i < VOLT_MAX_DIMS; i++) ent.shape.d[i] = 0;
    if (!ent.name) return st_fail(e, el, VOLT_ERR_NOMEM, "safetensors writer: out of memory");
    if (copy && nbytes) {
        ent.owned = malloc((size_t)nbytes);
        if (!ent.owned) {
            free(ent.name);
            return st_fail(e, el, VOLT_ERR_NOMEM,
                           "safetensors writer: tensor '%s': out of memory (%llu bytes)",
                           name, (unsigned long long)nbytes);
        }
        memcpy(ent.owned, data, (size_t)nbytes);
        ent.data = ent.owned;
    }
    w->t[w->n++] = ent;
    return VOLT_OK;
}

volt_status volt_st_writer_add(volt_st_writer *w, const char *name, volt_dtype dt,
                               volt_shape shape, const void *data) {
    return st_writer_add(w, name, dt, shape, data, false);
}

volt_status volt_st_writer_add_copy(volt_st_writer *w, const char *name, volt_dtype dt,
                                    volt_shape shape, const void *data) {
    return st_writer_add(w, name, dt, shape, data, true);
}

volt_status volt_st_writer_meta(volt_st_writer *w, const char *key, const char *value) {
    if (!w) return VOLT_ERR_INVALID_ARG;
    char *e = w->errmsg;
    size_t el = sizeof w->errmsg;
    e[0] = 0;
    if (!key || !value)
        return st_fail(e, el, VOLT_ERR_INVALID_ARG, "safetensors writer: NULL metadata");
    if (strcmp(key, "format") == 0 || strncmp(key, "crc32:", 6) == 0)
        return st_fail(e, el, VOLT_ERR_INVALID_ARG,
                       "safetensors writer: metadata key '%s' is reserved for volt", key);
    if (!st_utf8_ok(key) || !st_utf8_ok(value))
        return st_fail(e, el, VOLT_ERR_INVALID_ARG,
                       "safetensors writer: metadata '%s' is not valid UTF-8", key);
    char *v = strdup(value);
    if (!v) return st_fail(e, el, VOLT_ERR_NOMEM, "safetensors writer: out of memory");
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->mkey[i], key) == 0) {
            free(w->mval[i]);
            w->mval[i] = v;
            return VOLT_OK;
        }
    if (w->nmeta == w->capmeta) {
        int cap = w->capmeta ? 2 * w->capmeta : 8;
        char **k = realloc(w->mkey, (size_t)cap * sizeof *k);
        if (k) w->mkey = k;
        char **vv = k ? realloc(w->mval, (size_t)cap * sizeof *vv) : NULL;
        if (vv) w->mval = vv;
        if (!k || !vv) {
            free(v);
            return st_fail(e, el, VOLT_ERR_NOMEM, "safetensors writer: out of memory");
        }
        w->capmeta = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return st_fail(e, el, VOLT_ERR_NOMEM, "safetensors writer: out of memory");
    }
    w->mkey[w->nmeta] = k;
    w->mval[w->nmeta] = v;
    w->nmeta++;
    return VOLT_OK;
}

static bool st_add_u64(cJSON *arr, uint64_t v) {
    /* Raw text: cJSON would print integers above 1e15 in exponent form. */
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    cJSON *x = cJSON_CreateRaw(buf);
    return x && cJSON_AddItemToArray(arr, x);
}

/* One tensor's header entry: {"dtype", "shape", "data_offsets": [off, off + nbytes]}. */
static bool st_header_entry(cJSON *root, const st_wentry *t, uint64_t off) {
    cJSON *o = cJSON_AddObjectToObject(root, t->name);
    if (!o || !cJSON_AddStringToObject(o, "dtype", st_dtype_names[t->dtype])) return false;
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    if (!shape) return false;
    for (int d = 0; d < t->shape.ndim; d++)
        if (!st_add_u64(shape, (uint64_t)t->shape.d[d])) return false;
    cJSON *offs = cJSON_AddArrayToObject(o, "data_offsets");
    return offs && st_add_u64(offs, off) && st_add_u64(offs, off + t->nbytes);
}

/* The "crc32:<name>" metadata entry. */
static bool st_crc_entry(cJSON *meta, const char *name, const char *val) {
    size_t nl = strlen(name);
    char *kp = malloc(nl + 7);
    if (!kp) return false;
    memcpy(kp, "crc32:", 6);
    memcpy(kp + 6, name, nl + 1);
    bool ok = cJSON_AddStringToObject(meta, kp, val) != NULL;
    free(kp);
    return ok;
}

volt_status volt_st_writer_write(volt_st_writer *w, const char *path, char *err, size_t errlen) {
    if (!w || !path || !*path)
        return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "safetensors writer: NULL argument");
    volt_status st = VOLT_OK;
    int n = w->n;
    int *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    st_part *parts = malloc((size_t)(n + 2) * sizeof *parts);
    cJSON *root = cJSON_CreateObject();
    char *json = NULL, *header = NULL;
    if (!order || !parts || !root) goto nomem;

    /* Layout: element size descending, stable in add order (insertion sort on indices). */
    for (int i = 0; i < n; i++) {
        int j = i;
        size_t sz = volt_dtype_size(w->t[i].dtype);
        while (j > 0 && volt_dtype_size(w->t[order[j - 1]].dtype) < sz) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }

    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    if (!meta || !cJSON_AddStringToObject(meta, "format", "volt")) goto nomem;
    for (int i = 0; i < w->nmeta; i++)
        if (!cJSON_AddStringToObject(meta, w->mkey[i], w->mval[i])) goto nomem;
    for (int k = 0; k < n; k++) {
        const st_wentry *t = &w->t[order[k]];
        char val[16];
        snprintf(val, sizeof val, "%08x", (unsigned)st_crc32(t->data, t->nbytes));
        if (!st_crc_entry(meta, t->name, val)) goto nomem;
    }
    uint64_t off = 0;
    for (int k = 0; k < n; k++) {
        const st_wentry *t = &w->t[order[k]];
        if (!st_header_entry(root, t, off)) goto nomem;
        off += t->nbytes;
        parts[k + 2] = (st_part){ t->data, t->nbytes };
    }

    json = cJSON_PrintUnformatted(root);
    if (!json) goto nomem;
    size_t jl = strlen(json);
    size_t hl = (jl + 7) & ~(size_t)7;            /* pad with spaces: data starts 8-aligned */
    if (hl > VOLT_ST_MAX_HEADER) {
        st = st_fail(err, errlen, VOLT_ERR_INVALID_ARG,
                     "file '%s': header of %zu bytes exceeds the %u byte limit", path, hl,
                     VOLT_ST_MAX_HEADER);
        goto done;
    }
    header = malloc(hl ? hl : 1);
    if (!header) goto nomem;
    memcpy(header, json, jl);
    memset(header + jl, ' ', hl - jl);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    parts[0] = (st_part){ len8, 8 };
    parts[1] = (st_part){ header, hl };
    st = st_write_parts_atomic(path, parts, (size_t)n + 2, err, errlen);
    goto done;

nomem:
    st = st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory building the header",
                 path);
done:
    if (st < 0 && err && errlen) snprintf(w->errmsg, sizeof w->errmsg, "%s", err);
    free(header);
    cJSON_free(json);
    cJSON_Delete(root);
    free(parts);
    free(order);
    return st;
}

/* ---- reader ---------------------------------------------------------------------- */

typedef struct st_rentry {
    const char *name;      /* points into the parsed header */
    volt_dtype dtype;
    volt_shape shape;
    uint64_t begin, end;   /* within the data section */
} st_rentry;

struct volt_st_file {
    char *path;
    cJSON *root;
    st_rentry *t;          /* in data-offset order */
    int *by_name;          /* indices into t, sorted by name */
    int n;
    const char **mkey, **mval;
    int nmeta;
    unsigned char *data;   /* the data section, malloc-aligned */
    uint64_t data_size;
};

static bool st_json_u64(const cJSON *x, uint64_t *out) {
    if (!cJSON_IsNumber(x)) return false;
    double v = x->valuedouble;
    if (!(v >= 0 && v <= ST_MAX_JSON_INT) || v != (double)(uint64_t)v) return false;
    *out = (uint64_t)v;
    return true;
}

static int st_read_full(int fd, void *buf, size_t n) {
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        size_t k = n - got > (1u << 30) ? (1u << 30) : n - got;
        ssize_t r = read(fd, p + got, k);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return got == n ? 1 : 0;        /* 1 full, 0 short (EOF), -1 error */
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
    if (d == -2)
        return st_fail(err, errlen, VOLT_ERR_UNSUPPORTED,
                       "file '%s': tensor '%s': dtype %s is not supported by volt", path, name,
                       dt->valuestring);
    if (d < 0)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s': unknown dtype '%.32s'", path, name,
                       dt->valuestring);
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
    if (!st_shape_bytes(e->shape, e->dtype, &numel, &nbytes))
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s': shape too large", path, name);
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
                       st_dtype_names[e->dtype], volt_shape_str(e->shape, sb, sizeof sb),
                       (unsigned long long)nbytes);
    }
    return VOLT_OK;
}

static volt_status st_parse_header(volt_st_file *f, char *hdr, size_t hl, char *err,
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

volt_status volt_st_open(const char *path, volt_st_file **out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_open: NULL out");
    *out = NULL;
    if (!path || !*path) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_open: empty path");

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return st_fail(err, errlen, VOLT_ERR_IO, "file '%s': cannot open: %s", path,
                       strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = errno;
        close(fd);
        return st_fail(err, errlen, VOLT_ERR_IO, "file '%s': cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return st_fail(err, errlen, VOLT_ERR_IO, "file '%s': not a regular file", path);
    }
    uint64_t size = (uint64_t)sb.st_size;

    volt_status st = VOLT_OK;
    char *hdr = NULL;
    volt_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        st = st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory", path);
        goto fail;
    }
    unsigned char len8[8];
    int r = size >= 8 ? st_read_full(fd, len8, 8) : 0;
    if (r < 0) {
        st = st_fail(err, errlen, VOLT_ERR_IO, "file '%s': read failed: %s", path, strerror(errno));
        goto fail;
    }
    if (r == 0) {
        st = st_fail(err, errlen, VOLT_ERR_CORRUPT,
                     "file '%s': truncated or not a safetensors file (%llu bytes, need at "
                     "least 8)", path, (unsigned long long)size);
        goto fail;
    }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)len8[i] << (8 * i);
    if (hl > VOLT_ST_MAX_HEADER) {
        st = st_fail(err, errlen, VOLT_ERR_CORRUPT,
                     "file '%s': not a safetensors file (header length %llu exceeds the %u "
                     "byte limit)", path, (unsigned long long)hl, VOLT_ST_MAX_HEADER);
        goto fail;
    }
    if (hl < 2) {
        st = st_fail(err, errlen, VOLT_ERR_CORRUPT,
                     "file '%s': not a safetensors file (header length %llu)", path,
                     (unsigned long long)hl);
        goto fail;
    }
    if (hl > size - 8) {
        st = st_fail(err, errlen, VOLT_ERR_CORRUPT,
                     "file '%s': truncated (header length %llu but only %llu bytes follow)",
                     path, (unsigned long long)hl, (unsigned long long)(size - 8));
        goto fail;
    }
    f->data_size = size - 8 - hl;
    if (f->data_size > SIZE_MAX - 1) {
        st = st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': too large", path);
        goto fail;
    }
    hdr = malloc((size_t)hl + 1);
    if (!hdr) {
        st = st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory", path);
        goto fail;
    }
    r = st_read_full(fd, hdr, (size_t)hl);
    if (r <= 0) {
        st = r < 0 ? st_fail(err, errlen, VOLT_ERR_IO, "file '%s': read failed: %s", path,
                             strerror(errno))
                   : st_fail(err, errlen, VOLT_ERR_CORRUPT,
                             "file '%s': truncated (shrank while reading the header)", path);
        goto fail;
    }
    hdr[hl] = 0;
    st = st_parse_header(f, hdr, (size_t)hl, err, errlen);
    if (st < 0) goto fail;

    f->data = malloc(f->data_size ? (size_t)f->data_size : 1);
    if (!f->data) {
        st = st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory (%llu bytes of data)",
                     path, (unsigned long long)f->data_size);
        goto fail;
    }
    r = st_read_full(fd, f->data, (size_t)f->data_size);
    if (r <= 0) {
        st = r < 0 ? st_fail(err, errlen, VOLT_ERR_IO, "file '%s': read failed: %s", path,
                             strerror(errno))
                   : st_fail(err, errlen, VOLT_ERR_CORRUPT,
                             "file '%s': truncated (shrank while reading the data)", path);
        goto fail;
    }
    free(hdr);
    close(fd);
    *out = f;
    return VOLT_OK;

fail:
    free(hdr);
    close(fd);
    volt_st_close(f);
    return st;
}

void volt_st_close(volt_st_file *f) {
    if (!f) return;
    cJSON_Delete(f->root);
    free(f->t);
    free(f->by_name);
    free(f->mkey);
    free(f->mval);
    free(f->data);
    free(f->path);
    free(f);
}

int volt_st_count(const volt_st_file *f) { return f ? f->n : 0; }

const char *volt_st_name(const volt_st_file *f, int i) {
    return f && i >= 0 && i < f->n ? f->t[i].name : NULL;
}

static const st_rentry *st_lookup(const volt_st_file *f, const char *name) {
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const st_rentry *e = &f->t[f->by_name[mid]];
        int c = strcmp(name, e->name);
        if (c == 0) return e;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

static void st_fill_info(const volt_st_file *f, const st_rentry *e, volt_st_info *info) {
    info->dtype = e->dtype;
    info->shape = e->shape;
    info->data = f->data + e->begin;
    info->nbytes = (size_t)(e->end - e->begin);
}

volt_status volt_st_find(const volt_st_file *f, const char *name, volt_st_info *info) {
    if (!f || !name || !info) return VOLT_ERR_INVALID_ARG;
    const st_rentry *e = st_lookup(f, name);
    if (!e) return VOLT_ERR_NOT_FOUND;
    st_fill_info(f, e, info);
    return VOLT_OK;
}

const char *volt_st_meta(const volt_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->mkey[i], key) == 0) return f->mval[i];
    return NULL;
}

int volt_st_meta_count(const volt_st_file *f) { return f ? f->nmeta : 0; }

volt_status volt_st_meta_at(const volt_st_file *f, int i, const char **key, const char **value) {
    if (!f || i < 0 || i >= f->nmeta) return VOLT_ERR_INVALID_ARG;
    if (key) *key = f->mkey[i];
    if (value) *value = f->mval[i];
    return VOLT_OK;
}

static volt_status st_verify_entry(const volt_st_file *f, const st_rentry *e, char *err,
                                   size_t errlen) {
    size_t nl = strlen(e->name);
    char *key = malloc(nl + 7);
    if (!key) return st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory", f->path);
    memcpy(key, "crc32:", 6);
    memcpy(key + 6, e->name, nl + 1);
    const char *want = volt_st_meta(f, key);
    free(key);
    if (!want) {
        /* volt writes a crc for every tensor: in its files (or any file with crcs) a missing
         * one is damage, not a file from elsewhere */
        const char *fmt = volt_st_meta(f, "format");
        bool has_crcs = fmt && strcmp(fmt, "volt") == 0;
        for (int i = 0; !has_crcs && i < f->nmeta; i++) has_crcs = strncmp(f->mkey[i], "crc32:", 6) == 0;
        if (!has_crcs) return VOLT_OK;
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s' has no crc32 entry (file corrupt?)", f->path, e->name);
    }
    uint32_t w = 0;
    bool ok = strlen(want) == 8;
    for (int i = 0; ok && i < 8; i++) {
        char c = want[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        ok = v >= 0;
        w = (w << 4) | (uint32_t)(v & 15);
    }
    if (!ok)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s' has a malformed crc32 entry '%.16s'", f->path,
                       e->name, want);
    uint32_t got = st_crc32(f->data + e->begin, (size_t)(e->end - e->begin));
    if (got != w)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s' crc mismatch (file corrupt?): stored %08x, "
                       "computed %08x", f->path, e->name, (unsigned)w, (unsigned)got);
    return VOLT_OK;
}

volt_status volt_st_verify(const volt_st_file *f, const char *name, char *err, size_t errlen) {
    if (!f || !name) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_verify: NULL argument");
    const st_rentry *e = st_lookup(f, name);
    if (!e)
        return st_fail(err, errlen, VOLT_ERR_NOT_FOUND, "file '%s': no tensor '%s'", f->path, name);
    return st_verify_entry(f, e, err, errlen);
}

volt_status volt_st_verify_all(const volt_st_file *f, char *err, size_t errlen) {
    if (!f) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_verify_all: NULL file");
    for (int i = 0; i < f->n; i++)
        VOLT_TRY(st_verify_entry(f, &f->t[i], err, errlen));
    return VOLT_OK;
}

/* IEEE 754 half -> single, exact for every input (subnormals, inf, NaN payloads). */
static float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {                                  /* subnormal: normalise the mantissa */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3FFu) << 13);
    }
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

volt_status volt_st_read_f32(const volt_st_file *f, const char *name, float *dst,
                             int64_t numel, char *err, size_t errlen) {
    if (!f || !name || (!dst && numel > 0))
        return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_read_f32: NULL argument");
    const st_rentry *e = st_lookup(f, name);
    if (!e)
        return st_fail(err, errlen, VOLT_ERR_NOT_FOUND, "file '%s': no tensor '%s'", f->path, name);
    int64_t n = volt_shape_numel(e->shape);
    if (n != numel) {
        char sb[96];
        return st_fail(err, errlen, VOLT_ERR_SHAPE,
                       "file '%s': tensor '%s' has shape %s (%lld elements), expected %lld "
                       "elements", f->path, name, volt_shape_str(e->shape, sb, sizeof sb),
                       (long long)n, (long long)numel);
    }
    const unsigned char *src = f->data + e->begin;
    switch (e->dtype) {
    case VOLT_F32:
        if (n) memcpy(dst, src, (size_t)n * 4);
        return VOLT_OK;
    case VOLT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&dst[i], &bits, 4);
        }
        return VOLT_OK;
    case VOLT_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = st_f16_to_f32(h);
        }
        return VOLT_OK;
    default:
        return st_fail(err, errlen, VOLT_ERR_DTYPE,
                       "file '%s': tensor '%s' is %s; volt_st_read_f32 reads F32, BF16 or F16",
                       f->path, name, st_dtype_names[e->dtype]);
    }
}

/* ---- streaming writer ------------------------------------------------------------------ */
/* Declarations go through a volt_st_writer (same checks); its data pointers are a marker,
 * never read. begin writes the header with a placeholder for each crc ("c" + 7 hex digits of
 * the tensor index: not a valid crc, so a crash before finish leaves a file that fails
 * verification, and it is still only the .tmp); finish patches the crcs in place. */
struct volt_st_stream {
    volt_st_writer *w;
    char *path, *tmp;
    int fd;
    int next;                  /* index of the next tensor to write */
    size_t *crc_pos;           /* byte offset of each crc placeholder in the file */
    uint32_t *crc;
    char errmsg[512];
};

static const char st_stream_marker;

volt_status volt_st_stream_create(const char *path, volt_st_stream **out, char *err, size_t errlen) {
    *out = NULL;
    if (!path || !*path) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "safetensors stream: empty path");
    volt_st_stream *s = calloc(1, sizeof *s);
    size_t pl = strlen(path);
    if (s) s->path = strdup(path);
    if (s && s->path) s->tmp = malloc(pl + 5);
    if (!s || !s->path || !s->tmp || volt_st_writer_create(&s->w) < 0) {
        if (s) { free(s->path); free(s->tmp); free(s); }
        return st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory", path);
    }
    memcpy(s->tmp, path, pl);
    memcpy(s->tmp + pl, ".tmp", 5);
    s->fd = -1;
    *out = s;
    return VOLT_OK;
}

const char *volt_st_stream_errmsg(const volt_st_stream *s) { return s ? s->errmsg : ""; }

#define stream_fail(s, st, ...) VOLT__OBJ_ERRF(s, st, __VA_ARGS__)

volt_status volt_st_stream_declare(volt_st_stream *s, const char *name, volt_dtype dt, volt_shape shape) {
    if (s->fd >= 0) return stream_fail(s, VOLT_ERR_STATE, "file '%s': tensor '%s' declared after begin", s->path, name);
    volt_status st = st_writer_add(s->w, name, dt, shape, &st_stream_marker, false);
    if (st < 0) return stream_fail(s, st, "file '%s': %s", s->path, volt_st_writer_errmsg(s->w));
    return VOLT_OK;
}

volt_status volt_st_stream_meta(volt_st_stream *s, const char *key, const char *value) {
    if (s->fd >= 0) return stream_fail(s, VOLT_ERR_STATE, "file '%s': metadata set after begin", s->path);
    if (key && !strcmp(key, "format")) return VOLT_OK;   /* volt's own value is written */
    volt_status st = volt_st_writer_meta(s->w, key, value);
    if (st < 0) return stream_fail(s, st, "file '%s': %s", s->path, volt_st_writer_errmsg(s->w));
    return VOLT_OK;
}

volt_status volt_st_stream_begin(volt_st_stream *s) {
    volt_st_writer *w = s->w;
    if (s->fd >= 0) return stream_fail(s, VOLT_ERR_STATE, "file '%s': begin called twice", s->path);
    const int n = w->n;
    s->crc_pos = calloc((size_t)(n ? n : 1), sizeof *s->crc_pos);
    s->crc = calloc((size_t)(n ? n : 1), sizeof *s->crc);
    cJSON *root = cJSON_CreateObject();
    char *json = NULL, *header = NULL;
    volt_status st = VOLT_OK;
    if (!s->crc_pos || !s->crc || !root) goto nomem;
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    if (!meta || !cJSON_AddStringToObject(meta, "format", "volt")) goto nomem;
    for (int i = 0; i < w->nmeta; i++)
        if (!cJSON_AddStringToObject(meta, w->mkey[i], w->mval[i])) goto nomem;
    for (int k = 0; k < n; k++) {
        char val[16];
        snprintf(val, sizeof val, "c%07x", (unsigned)k);
        if (!st_crc_entry(meta, w->t[k].name, val)) goto nomem;
    }
    uint64_t off = 0;
    for (int k = 0; k < n; k++) {   /* declaration order: the order of the writes */
        if (!st_header_entry(root, &w->t[k], off)) goto nomem;
        off += w->t[k].nbytes;
    }
    if (!(json = cJSON_PrintUnformatted(root))) goto nomem;
    size_t jl = strlen(json), hl = (jl + 7) & ~(size_t)7;
    if (hl > VOLT_ST_MAX_HEADER) {
        st = stream_fail(s, VOLT_ERR_INVALID_ARG, "file '%s': header of %zu bytes exceeds the limit", s->path, hl);
        goto done;
    }
    /* the placeholders, found in the header text (each is unique: "c" + the index) */
    for (int k = 0; k < n; k++) {
        char pat[16];
        snprintf(pat, sizeof pat, "\"c%07x\"", (unsigned)k);
        const char *hit = strstr(json, pat);
        if (!hit) { st = stream_fail(s, VOLT_ERR_STATE, "file '%s': crc placeholder lost", s->path); goto done; }
        s->crc_pos[k] = 8 + (size_t)(hit - json) + 1;
    }
    if (!(header = malloc(hl + 8))) goto nomem;
    for (int i = 0; i < 8; i++) header[i] = (char)((uint64_t)hl >> (8 * i));
    memcpy(header + 8, json, jl);
    memset(header + 8 + jl, ' ', hl - jl);
    s->fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s->fd < 0) {
        st = stream_fail(s, VOLT_ERR_IO, "file '%s': cannot create '%s': %s", s->path, s->tmp, strerror(errno));
        goto done;
    }
    if (st_write_all(s->fd, header, hl + 8) < 0)
        st = stream_fail(s, VOLT_ERR_IO, "file '%s': write to '%s' failed: %s", s->path, s->tmp, strerror(errno));
    goto done;
nomem:
    st = stream_fail(s, VOLT_ERR_NOMEM, "file '%s': out of memory building the header", s->path);
done:
    free(header);
    cJSON_free(json);
    cJSON_Delete(root);
    return st;
}

volt_status volt_st_stream_write(volt_st_stream *s, const char *name, const void *data) {
    if (s->fd < 0) return stream_fail(s, VOLT_ERR_STATE, "file '%s': write before begin", s->path);
    if (s->next >= s->w->n || strcmp(s->w->t[s->next].name, name) != 0)
        return stream_fail(s, VOLT_ERR_INVALID_ARG, "file '%s': tensor '%s' written out of order (expected '%s')",
                           s->path, name, s->next < s->w->n ? s->w->t[s->next].name : "(none: all written)");
    const st_wentry *t = &s->w->t[s->next];
    if (t->nbytes && !data) return stream_fail(s, VOLT_ERR_INVALID_ARG, "file '%s': tensor '%s': NULL data", s->path, name);
    if (t->nbytes && st_write_all(s->fd, data, t->nbytes) < 0)
        return stream_fail(s, VOLT_ERR_IO, "file '%s': write to '%s' failed: %s", s->path, s->tmp, strerror(errno));
    s->crc[s->next++] = st_crc32(data, t->nbytes);
    return VOLT_OK;
}

volt_status volt_st_stream_finish(volt_st_stream *s, char *err, size_t errlen) {
    volt_status st = VOLT_OK;
    if (s->fd < 0) st = stream_fail(s, VOLT_ERR_STATE, "file '%s': finish before begin", s->path);
    else if (s->next != s->w->n)
        st = stream_fail(s, VOLT_ERR_STATE, "file '%s': %d of %d tensors written", s->path, s->next, s->w->n);
    for (int k = 0; st >= 0 && k < s->w->n; k++) {
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", (unsigned)s->crc[k]);
        if (pwrite(s->fd, hex, 8, (off_t)s->crc_pos[k]) != 8)
            st = stream_fail(s, VOLT_ERR_IO, "file '%s': patching '%s' failed: %s", s->path, s->tmp, strerror(errno));
    }
    if (st >= 0 && fsync(s->fd) < 0)
        st = stream_fail(s, VOLT_ERR_IO, "file '%s': fsync of '%s' failed: %s", s->path, s->tmp, strerror(errno));
    if (s->fd >= 0 && close(s->fd) < 0 && st >= 0)
        st = stream_fail(s, VOLT_ERR_IO, "file '%s': close of '%s' failed: %s", s->path, s->tmp, strerror(errno));
    s->fd = -1;
    if (st >= 0 && rename(s->tmp, s->path) < 0)
        st = stream_fail(s, VOLT_ERR_IO, "file '%s': rename from '%s' failed: %s", s->path, s->tmp, strerror(errno));
    if (st >= 0 && st_fsync_dir(s->path) < 0)
        st = stream_fail(s, VOLT_ERR_IO, "file '%s': written, but fsync of its directory failed: %s", s->path, strerror(errno));
    if (st < 0) unlink(s->tmp);
    if (st < 0 && err && errlen) snprintf(err, errlen, "%s", s->errmsg);
    volt_st_stream_destroy(s);
    return st;
}

void volt_st_stream_destroy(volt_st_stream *s) {
    if (!s) return;
    if (s->fd >= 0) {   /* abandoned: nothing under the real name */
        close(s->fd);
        unlink(s->tmp);
    }
    volt_st_writer_destroy(s->w);
    free(s->crc_pos);
    free(s->crc);
    free(s->path);
    free(s->tmp);
    free(s);
}
