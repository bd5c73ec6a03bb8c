/* safetensors writer and the atomic file write beneath it. See volt/safetensors.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "core/fsutil.h"
#include "core/safetensors_internal.h"

/* ---- atomic write ---------------------------------------------------------------- */

typedef struct st_part { const void *data; size_t n; } st_part;

int st_write_all(int fd, const void *buf, size_t n) {
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
int st_fsync_dir(const char *path) {
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

int volt_st_writer_count(const volt_st_writer *w) { return w ? w->n : 0; }

volt_status volt_st_writer_tensor_at(const volt_st_writer *w, int i, const char **name, volt_dtype *dt,
                                     volt_shape *shape, const void **data) {
    if (!w || i < 0 || i >= w->n) return VOLT_ERR_INVALID_ARG;
    if (name) *name = w->t[i].name;
    if (dt) *dt = w->t[i].dtype;
    if (shape) *shape = w->t[i].shape;
    if (data) *data = w->t[i].data;
    return VOLT_OK;
}

const char *volt_st_writer_errmsg(const volt_st_writer *w) {
    return w ? w->errmsg : "";
}

volt_status st_writer_add(volt_st_writer *w, const char *name, volt_dtype dt,
                          volt_shape shape, const void *data, bool copy) {
    if (!w) return VOLT_ERR_INVALID_ARG;
    char *e = w->errmsg;
    size_t el = sizeof w->errmsg;
    e[0] = 0;
    if (!name || !*name)
        return st_fail(e, el, VOLT_ERR_INVALID_ARG, "safetensors writer: empty tensor name");
    if (strcmp(name, "__metadata__") == 0 || !volt__utf8_ok(name))
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
    if (strcmp(key, "format") == 0) {   /* "pt": what torch's and Hugging Face's loaders accept */
        if (strcmp(value, "volt") && strcmp(value, "pt"))
            return st_fail(e, el, VOLT_ERR_INVALID_ARG, "safetensors writer: format '%.32s': \"volt\" or \"pt\"", value);
        w->format = !strcmp(value, "pt") ? "pt" : "volt";
        return VOLT_OK;
    }
    if (strncmp(key, "crc32:", 6) == 0)
        return st_fail(e, el, VOLT_ERR_INVALID_ARG,
                       "safetensors writer: metadata key '%s' is reserved for volt", key);
    if (!volt__utf8_ok(key) || !volt__utf8_ok(value))
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
bool st_header_entry(cJSON *root, const st_wentry *t, uint64_t off) {
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
bool st_crc_entry(cJSON *meta, const char *name, const char *val) {
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
    if (!meta || !cJSON_AddStringToObject(meta, "format", w->format ? w->format : "volt")) goto nomem;
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
