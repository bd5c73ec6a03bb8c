/* IDX reader for MNIST / Fashion-MNIST (http://yann.lecun.com/exdb/mnist/), plain or gzip.
 *
 * Layout: a big-endian u32 magic 0x000008NN (0x08 = unsigned byte, NN = number of dims),
 * NN big-endian u32 dims, then the bytes row-major. zlib's gzread reads gzip and plain
 * files alike. The reader trusts nothing: the magic, every dim, the product of the dims and
 * the number of bytes actually present are checked, and each error names the file.
 *
 * Pixels stay u8 in memory (47 MB for the 60000 training images); get() maps them through
 * a 256-entry table holding (p/255 - mean)/std, so the dataset is read-only and thread-safe. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "volt/data.h"
#include "core/err.h"
#include "core/fsutil.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_BYTES ((uint64_t)1 << 36)      /* 64 GiB: larger is a damaged header */
#define IDX_CHUNK ((unsigned)1 << 30)          /* gzread takes an unsigned length */

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read up to n bytes; *got is how many arrived before EOF. A read or decompression error
 * (other than a gzip stream that simply ends early, which is a truncation) fails. */
static volt_status idx_read(gzFile f, const char *path, void *buf, uint64_t n, uint64_t *got,
                            char *err, size_t errlen) {
    *got = 0;
    while (*got < n) {
        uint64_t want = n - *got;
        int r = gzread(f, (char *)buf + *got, want > IDX_CHUNK ? IDX_CHUNK : (unsigned)want);
        if (r < 0) {
            int zerr = 0;
            const char *msg = gzerror(f, &zerr);
            if (zerr == Z_BUF_ERROR) return VOLT_OK;   /* gzip stream ends early: truncated */
            if (zerr == Z_ERRNO)
                return volt__errf(err, errlen, VOLT_ERR_IO, "idx '%s': read error: %s", path, strerror(errno));
            return volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx '%s': gzip data is corrupt: %s", path, msg);
        }
        if (r == 0) break;
        *got += (uint64_t)r;
    }
    return VOLT_OK;
}

/* How a short read is worded: plain files have bytes, gzip files decompress to them. */
static const char *have(gzFile f) { return gzdirect(f) ? "file has" : "gzip data decompresses to"; }

/* Open and read a whole IDX u8 file with the given magic. dims gets the ndim dims; *data
 * (malloc'ed) the payload. */
static volt_status idx_load(const char *path, uint32_t magic, const char *what, uint32_t *dims,
                            unsigned char **data, uint64_t *nbytes, char *err, size_t errlen) {
    *data = NULL;
    int ndim = (int)(magic & 0xff);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return volt__errf(err, errlen, VOLT_ERR_IO, "idx %s '%s': is a directory, not a file", what, path);
    const int fd = volt__open_regular(path);   /* a FIFO or a device: refused, not waited on */
    if (fd == -2) return volt__errf(err, errlen, VOLT_ERR_IO, "idx %s '%s': not a regular file", what, path);
    if (fd < 0)
        return volt__errf(err, errlen, VOLT_ERR_IO, "idx %s '%s': cannot open: %s", what, path, strerror(errno));
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return volt__errf(err, errlen, VOLT_ERR_NOMEM, "idx %s '%s': cannot open: out of memory", what, path);
    }
    gzbuffer(f, 1u << 17);
    volt_status st;
    unsigned char hdr[4 + 4 * 3];
    uint64_t hdr_bytes = 4 + 4 * (uint64_t)ndim, got;
    if ((st = idx_read(f, path, hdr, 4, &got, err, errlen)) < 0) goto done;
    if (got < 4) {
        st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx %s '%s': file has %llu bytes, too short for "
                      "an IDX header", what, path, (unsigned long long)got);
        goto done;
    }
    uint32_t m = be32(hdr);
    if (m != magic) {
        const char *hint = m == IDX_MAGIC_IMAGES ? " (this is an IDX images file)"
                         : m == IDX_MAGIC_LABELS ? " (this is an IDX labels file)" : " (not an IDX file?)";
        st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx %s '%s': bad magic 0x%08x, expected 0x%08x%s",
                      what, path, m, magic, hint);
        goto done;
    }
    if ((st = idx_read(f, path, hdr + 4, hdr_bytes - 4, &got, err, errlen)) < 0) goto done;
    if (got < hdr_bytes - 4) {
        st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx %s '%s': truncated header: expected %llu bytes, "
                      "%s %llu", what, path, (unsigned long long)hdr_bytes, have(f),
                      (unsigned long long)(4 + got));
        goto done;
    }
    /* the size of one item (dims 1..) and of all, each checked before multiplying, so a
     * header with 0 items cannot hide an item size that overflows */
    uint64_t item = 1, n;
    for (int i = 0; i < ndim; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        if (i > 0 && dims[i] == 0) {
            st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx %s '%s': dim %d is 0", what, path, i);
            goto done;
        }
        if (i > 0 && item > IDX_MAX_BYTES / dims[i]) {
            st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx %s '%s': implausible dims in header "
                          "(more than %llu bytes per item)", what, path, (unsigned long long)IDX_MAX_BYTES);
            goto done;
        }
        if (i > 0) item *= dims[i];
    }
    if (dims[0] && item > IDX_MAX_BYTES / dims[0]) {
        st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx %s '%s': implausible dims in header "
                      "(more than %llu bytes of data)", what, path, (unsigned long long)IDX_MAX_BYTES);
        goto done;
    }
    n = item * dims[0];
    /* Never allocate what the file does not hold: a plain file's size is known; gzip data
     * is read into a buffer that grows (doubling) as the bytes arrive. */
    uint64_t cap = n;
    if (gzdirect(f)) {
        const uint64_t fsz = sb.st_size > 0 ? (uint64_t)sb.st_size : 0, avail = fsz > hdr_bytes ? fsz - hdr_bytes : 0;
        if (avail < n) {
            got = avail;
            goto truncated;
        }
        if (avail > n) {   /* what the header declares is all there is (a stride read from it would be wrong) */
            st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx %s '%s': %llu bytes after the %llu the header declares "
                            "(%llu-byte header + %llu data bytes): the dims do not describe this file", what, path,
                            (unsigned long long)(avail - n), (unsigned long long)(hdr_bytes + n),
                            (unsigned long long)hdr_bytes, (unsigned long long)n);
            goto done;
        }
    } else if (cap > ((uint64_t)1 << 20)) cap = (uint64_t)1 << 20;
    if (!(*data = malloc(cap ? cap : 1))) {
        st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "idx %s '%s': cannot allocate %llu bytes", what, path,
                      (unsigned long long)cap);
        goto done;
    }
    got = 0;
    for (;;) {
        uint64_t g = 0;
        if ((st = idx_read(f, path, *data + got, cap - got, &g, err, errlen)) < 0) goto done;
        got += g;
        if (got < cap || cap == n) break;   /* short read, or all of it */
        uint64_t ncap = cap * 2 < n ? cap * 2 : n;
        unsigned char *nb = realloc(*data, ncap);
        if (!nb) {
            st = volt__errf(err, errlen, VOLT_ERR_NOMEM, "idx %s '%s': cannot allocate %llu bytes", what, path,
                          (unsigned long long)ncap);
            goto done;
        }
        *data = nb;
        cap = ncap;
    }
    if (got < n) {
    truncated:
        st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx %s '%s': truncated: expected %llu bytes "
                      "(%llu-byte header + %llu data bytes), %s %llu", what, path,
                      (unsigned long long)(hdr_bytes + n), (unsigned long long)hdr_bytes,
                      (unsigned long long)n, have(f), (unsigned long long)(hdr_bytes + got));
        goto done;
    }
    if (!gzdirect(f)) {   /* gzip: nothing may follow the declared data either */
        unsigned char extra;
        uint64_t g = 0;
        if ((st = idx_read(f, path, &extra, 1, &g, err, errlen)) < 0) goto done;
        if (g) {
            st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx %s '%s': data after the %llu bytes the header declares "
                            "(%llu-byte header + %llu data bytes, uncompressed): the dims do not describe this file", what,
                            path, (unsigned long long)(hdr_bytes + n), (unsigned long long)hdr_bytes, (unsigned long long)n);
            goto done;
        }
    }
    *nbytes = n;
    st = VOLT_OK;
done:
    gzclose(f);                                /* closes fd */
    if (st < 0) { free(*data); *data = NULL; }
    return st;
}

/* ---- the dataset ------------------------------------------------------------------------ */

typedef struct idx_ds {
    volt_dataset_ops ops;                      /* per-instance copy for the name */
    char name[80];
    int64_t n, pixels;
    unsigned char *images, *labels;
    float lut[256];
} idx_ds;

static int64_t idx_len(void *self) { return ((idx_ds *)self)->n; }

static volt_status idx_get(void *self, int64_t i, void *const *dst) {
    const idx_ds *d = self;
    if (i < 0 || i >= d->n) return VOLT_ERR_INVALID_ARG;
    float *x = dst[0];                         /* (H*W) */
    const unsigned char *p = d->images + i * d->pixels;
    for (int64_t k = 0; k < d->pixels; k++) x[k] = d->lut[p[k]];
    *(int64_t *)dst[1] = d->labels[i];
    return VOLT_OK;
}

static void idx_destroy(void *self) {
    idx_ds *d = self;
    free(d->images);
    free(d->labels);
    free(d);
}

volt_status volt_idx_dataset(const char *images_path, const char *labels_path, float mean, float std,
                             volt_dataset **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (err && errlen) err[0] = 0;
    if (!images_path || !labels_path || !out)
        return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "idx: NULL path or output");
    if (!isfinite(std))   /* inf made every pixel -0, NaN skipped the normalisation */
        return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "idx: std %g is not finite (> 0 normalises, <= 0 does not)", std);
    if (std > 0 && !isfinite(mean))
        return volt__errf(err, errlen, VOLT_ERR_INVALID_ARG, "idx: mean %g is not finite", mean);
    idx_ds *d = calloc(1, sizeof *d);
    if (!d) return volt__errf(err, errlen, VOLT_ERR_NOMEM, "idx: out of memory");
    uint32_t idims[3], ldims[1];
    uint64_t ibytes, lbytes;
    volt_status st = idx_load(images_path, IDX_MAGIC_IMAGES, "images", idims, &d->images, &ibytes, err, errlen);
    if (st == VOLT_OK)
        st = idx_load(labels_path, IDX_MAGIC_LABELS, "labels", ldims, &d->labels, &lbytes, err, errlen);
    if (st == VOLT_OK && idims[0] != ldims[0])
        st = volt__errf(err, errlen, VOLT_ERR_CORRUPT, "idx: '%s' has %u images but '%s' has %u labels",
                      images_path, idims[0], labels_path, ldims[0]);
    if (st < 0) { idx_destroy(d); return st; }
    d->n = idims[0];
    d->pixels = (int64_t)idims[1] * idims[2];   /* checked by idx_load: at most IDX_MAX_BYTES */
    for (int p = 0; p < 256; p++)
        d->lut[p] = std > 0 ? ((float)p / 255.0f - mean) / std : (float)p / 255.0f;
    const char *base = strrchr(images_path, '/');
    snprintf(d->name, sizeof d->name, "idx %s", base ? base + 1 : images_path);
    d->ops = (volt_dataset_ops){ .version = VOLT_DATASET_OPS_VERSION, .name = d->name,
                                 .len = idx_len, .get = idx_get, .destroy = idx_destroy };
    volt_field fields[2] = {
        { .name = "x", .dtype = VOLT_F32, .shape = VOLT_SHAPE(d->pixels) },
        { .name = "y", .dtype = VOLT_I64, .shape = VOLT_SCALAR },
    };
    st = volt_dataset_create(&d->ops, d, 2, fields, out);
    if (st < 0) return volt__errf(err, errlen, st, "idx '%s': cannot create the dataset: %s", images_path,
                                volt_status_str(st));
    return VOLT_OK;
}
