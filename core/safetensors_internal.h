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
    const char *format;        /* the header's "format": "volt" (default) or "pt" (volt_st_writer_meta) */
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
    const char *foreign;   /* a format dtype volt lacks ("F64", ...; dtype is then a placeholder), else NULL */
    volt_shape shape;
    uint64_t begin, end;   /* within the data section */
    bool unread;           /* volt_st_open_some left its bytes in the file */
    bool deferred;         /* volt_st_open_deferred left them in the file, to be read one by one */
    bool checked;          /* deferred: volt_st_check read it through; kcrc is what it saw */
    bool left;             /* deferred: no read will use it (volt__st_leave): not checked, not readable */
    uint64_t ka, kb;       /* deferred: the bytes [ka, kb) of the tensor a read gives (volt__st_keep_range) */
    uint32_t kcrc;         /* crc32 of bytes [ka, kb) as volt_st_check read them */
} st_rentry;

struct volt_st_file {
    char *path;
    cJSON *root;
    st_rentry *t;          /* in data-offset order */
    int *by_name;          /* indices into t, sorted by name */
    int n;
    const char **mkey, **mval;
    int nmeta;
    unsigned char *data;   /* the data section from its start, malloc-aligned: up to the end of the last
                              tensor read at open (not the file's tail, nor tensors left in the file) */
    uint64_t data_size;    /* the file's data section while the header is parsed; then data's bytes */
    int fd;                /* open while tensors are deferred, else -1 */
    uint64_t base;         /* file offset of the data section */
};

/* ---- deferred tensors (core/safetensors_deferred.c; opened by volt_st_open_deferred) ---- */
int st_pread_full(int fd, void *buf, size_t n, uint64_t off);
const st_rentry *st_lookup(const volt_st_file *f, const char *name);
/* The crc e's bytes should have: 1 with *w set, 0 when the file keeps no crcs (a file from
 * elsewhere), < 0 (the status, message in err) for a missing or malformed entry. */
int st_expected_crc(const volt_st_file *f, const st_rentry *e, uint32_t *w, char *err, size_t errlen);
/* A deferred tensor read through from the file in pieces of at most 8 MiB: the crc32 of all its
 * bytes and of its kept bytes [ka, kb). 1, 0 when the file is short, -1 on a read error or no memory. */
int st_file_crc(const volt_st_file *f, const st_rentry *e, uint32_t *whole, uint32_t *kept);

/* Only bytes [a, b) of deferred tensor `name` are wanted (before volt_st_check): the check still
 * reads the whole tensor through against its crc and remembers the crc of [a, b);
 * volt_st_read_deferred then reads those bytes alone and checks them against it (a slice of a
 * shard when resharding). VOLT_ERR_STATE when not deferred or already checked, _INVALID_ARG out
 * of range or not on an element boundary. */
volt_status volt__st_keep_range(volt_st_file *f, const char *name, uint64_t a, uint64_t b);
/* No read of this file will use deferred tensor `name` (NULL: any deferred tensor): volt_st_check
 * leaves its bytes in the file unread and unchecked, and volt_st_read_deferred refuses it. A
 * later volt__st_keep_range takes it back. A load under a sharding strategy checks only what its
 * rank applies (trainer/checkpoint_source.c); the ranks then agree on one verdict.
 * VOLT_ERR_STATE when not deferred or already checked. */
volt_status volt__st_leave(volt_st_file *f, const char *name);
/* The most bytes a read of a deferred tensor gives (its kept range; 0 when none). */
size_t volt__st_deferred_max_bytes(const volt_st_file *f);
/* The largest single buffer the reader filled from a file in this process since the last reset
 * (a whole data section, a run of tensors, a deferred tensor or a piece of one): tests bound the
 * memory of a load with it. */
size_t volt__st_read_peak(bool reset);
void volt__st_note_read(size_t n);
/* The bytes volt_st_read_deferred gave in this process since the last reset (the reads that
 * apply, not the check's): a resharding rank reads only the slices it applies. */
uint64_t volt__st_deferred_read_bytes(bool reset);
/* The bytes volt_st_check read from files in this process since the last reset (each checked
 * tensor whole): a rank under a sharding strategy checks only what it applies. */
uint64_t volt__st_check_read_bytes(bool reset);
/* Tests: fn runs at the end of every successful volt_st_check (between the check and the
 * reads), e.g. to change the file. NULL clears it. Process-wide; not thread-safe. */
void volt__st_set_check_hook(void (*fn)(const char *path, void *ctx), void *ctx);

/* The first i in [0, n) (file order) for which bad(ctx, i), -1 when none: the calls run on the
 * OpenMP threads, the answer is the one a serial pass gives (the check and verify_all then
 * call that tensor again for its message). */
int volt__st_first_bad(int n, bool (*bad)(void *ctx, int i), void *ctx);

/* Parse and check the header text hdr[0..hl) of f (f->path, f->data_size set): fills
 * f->root, the metadata and the tensor table (sorted by offset, by_name by name). */
volt_status st_parse_header(volt_st_file *f, char *hdr, size_t hl, char *err, size_t errlen);

#pragma GCC visibility pop

#endif
