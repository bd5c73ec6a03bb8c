/* safetensors streaming writer: header first, then each tensor's data as it comes, into
 * <path>.tmp renamed into place by finish. See volt/safetensors.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "core/safetensors_internal.h"

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

#define stream_fail(s, st, ...) VOLT__OBJ_ERRF(s, st, __VA_ARGS__)   /* core/err.h */

volt_status volt_st_stream_declare(volt_st_stream *s, const char *name, volt_dtype dt, volt_shape shape) {
    if (s->fd >= 0) return stream_fail(s, VOLT_ERR_STATE, "file '%s': tensor '%s' declared after begin", s->path, name);
    volt_status st = st_writer_add(s->w, name, dt, shape, &st_stream_marker, false);
    if (st < 0) return stream_fail(s, st, "file '%s': %s", s->path, volt_st_writer_errmsg(s->w));
    return VOLT_OK;
}

volt_status volt_st_stream_meta(volt_st_stream *s, const char *key, const char *value) {
    if (s->fd >= 0) return stream_fail(s, VOLT_ERR_STATE, "file '%s': metadata set after begin", s->path);
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
    if (!meta || !cJSON_AddStringToObject(meta, "format", w->format ? w->format : "volt")) goto nomem;
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
    /* the placeholders, found in the header text by their whole entry: the reserved key
     * "crc32:<name>" as cJSON prints it, then the value "c" + the index (a user's metadata value
     * may look like a placeholder; no user key can be "crc32:...") */
    for (int k = 0; k < n; k++) {
        const size_t nl = strlen(w->t[k].name);
        char *key = malloc(nl + 7), *kj = NULL, *pat = NULL;
        cJSON *ks = NULL;
        if (key) { memcpy(key, "crc32:", 6); memcpy(key + 6, w->t[k].name, nl + 1); ks = cJSON_CreateString(key); }
        if (ks) kj = cJSON_PrintUnformatted(ks);
        const size_t pl = kj ? strlen(kj) + 12 : 0;
        if (kj) pat = malloc(pl);
        if (pat) snprintf(pat, pl, "%s:\"c%07x\"", kj, (unsigned)k);
        const char *hit = pat ? strstr(json, pat) : NULL;
        const size_t at = hit ? (size_t)(hit - json) + strlen(kj) + 2 : 0;   /* past the key, ':' and '"' */
        const bool oom = !pat;
        free(key); cJSON_Delete(ks); cJSON_free(kj); free(pat);
        if (oom) goto nomem;
        if (!hit) { st = stream_fail(s, VOLT_ERR_STATE, "file '%s': crc placeholder lost", s->path); goto done; }
        s->crc_pos[k] = 8 + at;
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
