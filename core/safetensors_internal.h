/* core/safetensors_internal.h — what the safetensors files of core share (not installed):
 * core/safetensors.c (format basics), safetensors_write.c (atomic write, writer),
 * safetensors_stream.c (streaming writer), safetensors_header.c (header parser),
 * safetensors_read.c (reader). The public API is volt/safetensors.h. */
#ifndef VOLT_CORE_SAFETENSORS_INTERNAL_H
#define VOLT_CORE_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "volt/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "volt safetensors I/O assumes a little-endian host"
#endif

/* Shared between a few files only: never exported from libvolt.so. */
#include "core/err.h"

#pragma GCC visibility push(hidden)

/* ---- format basics (core/safetensors.c) ---- */
#define st_fail volt__errf   /* core/err.h: the one error formatter */
extern const char *const st_dtype_names[VOLT_DTYPE_COUNT];
/* numel and byte size of a shape, or false on overflow / negative dims. */
bool st_shape_bytes(volt_shape s, volt_dtype dt, uint64_t *numel, uint64_t *nbytes);
uint32_t st_crc32(const void *data, size_t n);

/* ---- writing (core/safetensors_write.c), shared with the streaming writer ---- */
int st_write_all(int fd, const void *buf, size_t n);
/* fsync the directory holding `path` so the rename itself is durable. */
int st_fsync_dir(const char *path);

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

volt_status st_writer_add(volt_st_writer *w, const char *name, volt_dtype dt,
                          volt_shape shape, const void *data, bool copy);
/* One tensor's header entry: {"dtype", "shape", "data_offsets": [off, off + nbytes]}. */
bool st_header_entry(cJSON *root, const st_wentry *t, uint64_t off);
/* The "crc32:<name>" metadata entry. */
bool st_crc_entry(cJSON *meta, const char *name, const char *val);

/* ---- reading (core/safetensors_read.c; the header: core/safetensors_header.c) ---- */

typedef struct st_rentry {
    const char *name;      /* points into the parsed header */
    volt_dtype dtype;
    volt_shape shape;
    uint64_t begin, end;   /* within the data section */
    bool unread;           /* volt_st_open_some left its bytes in the file */
    bool deferred;         /* volt__st_open_deferred left them in the file, to be read one by one */
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
    int fd;                /* open while tensors are deferred, else -1 */
    uint64_t base;         /* file offset of the data section */
};

/* volt_st_open_some where the tensors defer(name, ctx) picks (among those want keeps) stay in
 * the file, taking no memory: volt_st_verify_all checks their crcs reading them in pieces,
 * volt_st_find gives them data NULL, and volt__st_read_deferred reads one whole, checking its
 * crc again (a file changed since the verify is caught). The file stays open until close. */
volt_status volt__st_open_deferred(const char *path, volt_st_want_fn want, volt_st_want_fn defer, void *ctx,
                                   volt_st_file **out, char *err, size_t errlen);
/* Deferred tensor `name` whole into dst (cap bytes): VOLT_ERR_STATE when it is not deferred,
 * VOLT_ERR_CORRUPT when the file is short or the bytes fail their crc. */
volt_status volt__st_read_deferred(const volt_st_file *f, const char *name, void *dst, size_t cap, char *err, size_t errlen);
/* The largest deferred tensor's bytes (0 when none). */
size_t volt__st_deferred_max_bytes(const volt_st_file *f);

/* Parse and check the header text hdr[0..hl) of f (f->path, f->data_size set): fills
 * f->root, the metadata and the tensor table (sorted by offset, by_name by name). */
volt_status st_parse_header(volt_st_file *f, char *hdr, size_t hl, char *err, size_t errlen);

#pragma GCC visibility pop

#endif
