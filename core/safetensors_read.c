/* safetensors reader: open (header parsed by core/safetensors_header.c, data read whole),
 * lookups, crc verification, reading as f32. See volt/safetensors.h.
 *
 * The reader trusts nothing in the file: every length and offset is range-checked before
 * use, so a damaged or hostile file yields VOLT_ERR_CORRUPT, never a crash. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include <zlib.h>
#include "core/fsutil.h"
#include "core/hostmem.h"
#include "core/safetensors_internal.h"
#include "volt/dtype.h"

/* ---- reader ---------------------------------------------------------------------- */

/* The file's data: a checkpoint's hundreds of MB on huge pages (core/hostmem.h). */
static unsigned char *st_data_alloc(size_t n) {
    return n < 4 * VOLT_HUGE_PAGE ? malloc(n ? n : 1) : volt__huge_alloc(n);
}

/* n bytes at file offset off: 1 full, 0 short (EOF), -1 error */
int st_pread_full(int fd, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        size_t k = n - got > (1u << 30) ? (1u << 30) : n - got;
        ssize_t r = pread(fd, p + got, k, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return got == n ? 1 : 0;
}

/* The data section (at file offset base) into f->data: all of it, or, with a selection, each
 * run of consecutive wanted tensors in one read (the pages of the others are never touched). */
static int st_read_data(volt_st_file *f, int fd, uint64_t base, bool some) {
    if (!some) {
        volt__st_note_read((size_t)f->data_size);
        return st_pread_full(fd, f->data, (size_t)f->data_size, base);
    }
    for (int i = 0; i < f->n;) {
        if (f->t[i].unread || f->t[i].deferred) { i++; continue; }
        int j = i;
        while (j + 1 < f->n && !f->t[j + 1].unread && !f->t[j + 1].deferred) j++;
        const uint64_t a = f->t[i].begin, b = f->t[j].end;
        if (b > a) {
            volt__st_note_read((size_t)(b - a));
            int r = st_pread_full(fd, f->data + a, (size_t)(b - a), base + a);
            if (r <= 0) return r;
        }
        i = j + 1;
    }
    return 1;
}

volt_status volt_st_open(const char *path, volt_st_file **out, char *err, size_t errlen) {
    return volt_st_open_some(path, NULL, NULL, out, err, errlen);
}

static volt_status st_open(const char *path, volt_st_want_fn want, volt_st_want_fn defer, void *ctx, volt_st_file **out,
                           char *err, size_t errlen);

volt_status volt_st_open_some(const char *path, volt_st_want_fn want, void *ctx, volt_st_file **out, char *err,
                              size_t errlen) {
    return st_open(path, want, NULL, ctx, out, err, errlen);
}

volt_status volt_st_open_deferred(const char *path, volt_st_want_fn want, volt_st_want_fn defer, void *ctx,
                                  volt_st_file **out, char *err, size_t errlen) {
    return st_open(path, want, defer, ctx, out, err, errlen);
}

static volt_status st_open(const char *path, volt_st_want_fn want, volt_st_want_fn defer, void *ctx, volt_st_file **out,
                           char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_open: NULL out");
    *out = NULL;
    if (!path || !*path) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_open: empty path");

    const int fd = volt__open_regular(path);   /* a FIFO in the file's place is refused, not waited on */
    if (fd == -2) return st_fail(err, errlen, VOLT_ERR_IO, "file '%s': not a regular file", path);
    if (fd < 0)
        return st_fail(err, errlen, VOLT_ERR_IO, "file '%s': cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = errno;
        close(fd);
        return st_fail(err, errlen, VOLT_ERR_IO, "file '%s': cannot stat: %s", path, strerror(e));
    }
    uint64_t size = (uint64_t)sb.st_size;

    volt_status st = VOLT_OK;
    char *hdr = NULL;
    volt_st_file *f = calloc(1, sizeof *f);
    if (f) f->fd = -1;
    if (!f || !(f->path = strdup(path))) {
        st = st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory", path);
        goto fail;
    }
    unsigned char len8[8];
    int r = size >= 8 ? st_pread_full(fd, len8, 8, 0) : 0;
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
    r = st_pread_full(fd, hdr, (size_t)hl, 8);
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

    bool some = false, deferred = false;
    for (int i = 0; want && i < f->n; i++) some |= f->t[i].unread = !want(f->t[i].name, ctx);
    for (int i = 0; defer && i < f->n; i++)
        if (!f->t[i].unread && f->t[i].end > f->t[i].begin && defer(f->t[i].name, ctx)) {
            some = deferred = f->t[i].deferred = true;
            f->t[i].kb = f->t[i].end - f->t[i].begin;   /* kept: all of it, unless volt__st_keep_range says less */
        }
    for (int i = 0; i < f->n; i++)   /* a dtype volt lacks: fine while nothing reads the tensor */
        if (f->t[i].foreign && !f->t[i].unread) {
            st = st_fail(err, errlen, VOLT_ERR_UNSUPPORTED, "file '%s': tensor '%s': dtype %s is not supported by volt", path,
                         f->t[i].name, f->t[i].foreign);
            goto fail;
        }
    /* memory for the bytes read now: up to the end of the last tensor read into it (bytes past
     * every tensor, and the tail of tensors left in the file, are never allocated) */
    uint64_t need = 0;
    for (int i = 0; i < f->n; i++)
        if (!f->t[i].unread && !f->t[i].deferred && f->t[i].end > need) need = f->t[i].end;
    f->data_size = need;
    f->data = st_data_alloc((size_t)(need ? need : 1));
    if (!f->data) {
        st = st_fail(err, errlen, VOLT_ERR_NOMEM, "file '%s': out of memory (%llu bytes of data)",
                     path, (unsigned long long)need);
        goto fail;
    }
    f->base = 8 + hl;
    r = st_read_data(f, fd, 8 + hl, some);
    if (r <= 0) {
        st = r < 0 ? st_fail(err, errlen, VOLT_ERR_IO, "file '%s': read failed: %s", path,
                             strerror(errno))
                   : st_fail(err, errlen, VOLT_ERR_CORRUPT,
                             "file '%s': truncated (shrank while reading the data)", path);
        goto fail;
    }
    free(hdr);
    if (deferred) f->fd = fd;   /* the deferred tensors are read from it later */
    else close(fd);
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
    if (f->fd >= 0) close(f->fd);
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

const st_rentry *st_lookup(const volt_st_file *f, const char *name) {
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
    info->data = e->unread || e->deferred ? NULL : f->data + e->begin;
    info->nbytes = (size_t)(e->end - e->begin);
}

volt_status volt_st_find(const volt_st_file *f, const char *name, volt_st_info *info) {
    if (!f || !name || !info) return VOLT_ERR_INVALID_ARG;
    const st_rentry *e = st_lookup(f, name);
    if (!e) return VOLT_ERR_NOT_FOUND;
    if (e->foreign) return VOLT_ERR_UNSUPPORTED;   /* listed, never described as a volt dtype */
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
    if (e->unread) return VOLT_OK;   /* volt_st_open_some: not in memory, nothing to check */
    uint32_t w = 0;
    int has = st_expected_crc(f, e, &w, err, errlen);
    if (has <= 0) return has;
    uint32_t got = 0;
    if (e->deferred) {
        uint32_t kept;
        int r = st_file_crc(f, e, &got, &kept);
        if (r < 0)
            return st_fail(err, errlen, VOLT_ERR_IO, "file '%s': tensor '%s': read failed: %s", f->path, e->name,
                           errno ? strerror(errno) : "out of memory");
        if (r == 0)
            return st_fail(err, errlen, VOLT_ERR_CORRUPT, "file '%s': truncated (shrank while reading tensor '%s')",
                           f->path, e->name);
    } else {
        got = st_crc32(f->data + e->begin, (size_t)(e->end - e->begin));
    }
    if (got != w)
        return st_fail(err, errlen, VOLT_ERR_CORRUPT,
                       "file '%s': tensor '%s' crc mismatch (file corrupt?): stored %08x, "
                       "computed %08x", f->path, e->name, (unsigned)w, (unsigned)got);
    return VOLT_OK;
}

int st_expected_crc(const volt_st_file *f, const st_rentry *e, uint32_t *w_out, char *err, size_t errlen) {
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
        if (!has_crcs) return 0;
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
    *w_out = w;
    return 1;
}

volt_status volt_st_verify(const volt_st_file *f, const char *name, char *err, size_t errlen) {
    if (!f || !name) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_verify: NULL argument");
    const st_rentry *e = st_lookup(f, name);
    if (!e)
        return st_fail(err, errlen, VOLT_ERR_NOT_FOUND, "file '%s': no tensor '%s'", f->path, name);
    return st_verify_entry(f, e, err, errlen);
}

int volt__st_first_bad(int n, bool (*bad)(void *ctx, int i), void *ctx) {
    int first_bad = -1;
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        if (bad(ctx, i)) {
#pragma omp critical(st_first_bad)
            if (first_bad < 0 || i < first_bad) first_bad = i;
        }
    }
    return first_bad;
}

static bool verify_bad(void *ctx, int i) {
    const volt_st_file *f = ctx;
    char e[8];
    return st_verify_entry(f, &f->t[i], e, sizeof e) < 0;
}

/* A checkpoint has hundreds of tensors: checked on the OpenMP threads (volt__st_first_bad). */
volt_status volt_st_verify_all(const volt_st_file *f, char *err, size_t errlen) {
    if (!f) return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_verify_all: NULL file");
    const int first_bad = volt__st_first_bad(f->n, verify_bad, (void *)f);   /* only read */
    return first_bad < 0 ? VOLT_OK : st_verify_entry(f, &f->t[first_bad], err, errlen);
}

volt_status volt_st_read_f32(const volt_st_file *f, const char *name, float *dst,
                             int64_t numel, char *err, size_t errlen) {
    if (!f || !name || (!dst && numel > 0))
        return st_fail(err, errlen, VOLT_ERR_INVALID_ARG, "volt_st_read_f32: NULL argument");
    const st_rentry *e = st_lookup(f, name);
    if (!e)
        return st_fail(err, errlen, VOLT_ERR_NOT_FOUND, "file '%s': no tensor '%s'", f->path, name);
    if (e->unread || e->deferred)
        return st_fail(err, errlen, VOLT_ERR_STATE, "file '%s': tensor '%s' was not read (opened without it)", f->path,
                       name);
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
    case VOLT_F16:   /* core's conversions (volt/precision.h); a foreign file's offsets may be odd */
        if (((uintptr_t)src & 1) == 0) return volt_convert(dst, VOLT_F32, src, e->dtype, n);
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = e->dtype == VOLT_BF16 ? volt_bf16_to_f32(h) : volt_f16_to_f32(h);
        }
        return VOLT_OK;
    default:
        return st_fail(err, errlen, VOLT_ERR_DTYPE,
                       "file '%s': tensor '%s' is %s; volt_st_read_f32 reads F32, BF16 or F16",
                       f->path, name, st_dtype_names[e->dtype]);
    }
}
