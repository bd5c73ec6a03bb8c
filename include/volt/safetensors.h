/* volt/safetensors.h — safetensors file I/O, the layer checkpoints are built on.
 *
 * Format (https://github.com/huggingface/safetensors): 8-byte little-endian u64 header
 * length N, N bytes of JSON header, then the raw little-endian tensor data:
 *   {"__metadata__": {"k": "v", ...},
 *    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
 * Offsets are relative to the first byte after the header. Files volt writes load in any
 * safetensors reader (Python `safetensors`, PyTorch via it), and volt reads theirs.
 *
 * What volt adds on top, in `__metadata__`: "format": "volt" ("pt" when the writer is told
 * so: volt_trainer_export_full's files, for other tools) and, per tensor,
 * "crc32:<name>": 8 lowercase hex digits (zlib crc32 of the tensor's bytes), checked by
 * volt_st_verify. Files without any crc entry and without "format": "volt" (e.g. from
 * Hugging Face) verify OK; in any other file a tensor without its crc entry is
 * VOLT_ERR_CORRUPT.
 *
 * Every error message names the file, and the tensor where there is one:
 *   "file 'ck.safetensors': tensor 'fc1.weight' crc mismatch (file corrupt?)".
 * A damaged file gives VOLT_ERR_CORRUPT with such a message, never a crash.
 * Hosts are assumed little-endian (x86-64, aarch64); data is stored as in memory. */
#ifndef VOLT_SAFETENSORS_H
#define VOLT_SAFETENSORS_H

#include "volt/export.h"

#include <stddef.h>
#include <stdint.h>
#include "volt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest header volt writes or accepts (the reference implementation's limit). */
#define VOLT_ST_MAX_HEADER 100000000u

typedef struct volt_st_writer volt_st_writer;
typedef struct volt_st_file volt_st_file;

/* One tensor of an open file. `data` points into the file object and stays valid until
 * volt_st_close; it is aligned to the element size when the file's offsets are (files
 * volt writes always are). Read it with memcpy or volt_st_read_f32 otherwise. */
typedef struct volt_st_info {
    volt_dtype dtype;
    volt_shape shape;              /* ndim 0 = scalar (one element) */
    const void *data;              /* nbytes bytes, little-endian */
    size_t nbytes;                 /* numel * dtype size; 0 for an empty tensor */
} volt_st_info;

/* ---- atomic file write ------------------------------------------------------- */

/* Write n bytes to `path` atomically: write "<path>.tmp", fsync, rename over `path`, fsync
 * the directory. On failure the .tmp is removed and a file already at `path` is left
 * untouched. Concurrent writers to the same path are not supported (they share the .tmp).
 * Errors: VOLT_ERR_IO (message with strerror), VOLT_ERR_INVALID_ARG. */
VOLT_API volt_status volt_file_write_atomic(const char *path, const void *data, size_t n,
                                   char *err, size_t errlen);

/* ---- writer -------------------------------------------------------------------- */

VOLT_API volt_status volt_st_writer_create(volt_st_writer **out);
VOLT_API void volt_st_writer_destroy(volt_st_writer *w);                      /* NULL-safe */

/* Add a tensor. `name` is copied; `data` (numel * dtype size bytes, may be NULL when that
 * is 0) is BORROWED and must stay valid and unchanged until the last volt_st_writer_write
 * or volt_st_writer_destroy. shape.ndim is 0..VOLT_MAX_DIMS, dims >= 0.
 * Errors: VOLT_ERR_INVALID_ARG (bad name/dtype/shape, duplicate name), VOLT_ERR_NOMEM;
 * the message is in volt_st_writer_errmsg. */
VOLT_API volt_status volt_st_writer_add(volt_st_writer *w, const char *name, volt_dtype dt,
                               volt_shape shape, const void *data);
/* As volt_st_writer_add, but copies the data now; the caller may free it on return. */
VOLT_API volt_status volt_st_writer_add_copy(volt_st_writer *w, const char *name, volt_dtype dt,
                                    volt_shape shape, const void *data);
/* Set a `__metadata__` string (both copied; setting a key again replaces its value).
 * Keys starting "crc32:" are reserved for volt -> VOLT_ERR_INVALID_ARG. "format" is "volt"
 * (the default) or "pt" (the value torch's and Hugging Face's loaders accept: transformers'
 * from_pretrained refuses a file whose format is not pt / tf / flax / mlx), else
 * VOLT_ERR_INVALID_ARG; the crc entries are written either way. */
VOLT_API volt_status volt_st_writer_meta(volt_st_writer *w, const char *key, const char *value);

/* The metadata set so far (not "format" / "crc32:*", which write adds), in the order first
 * set; key and value are valid until the key is set again or the writer is destroyed. */
VOLT_API int volt_st_writer_meta_count(const volt_st_writer *w);
VOLT_API volt_status volt_st_writer_meta_at(const volt_st_writer *w, int i, const char **key, const char **value);

/* The tensors added so far, in the order added (module extras a checkpoint streams out
 * after its weights): name, dtype, shape and host data, valid until the writer is destroyed.
 * Any output pointer may be NULL. VOLT_ERR_INVALID_ARG when i is out of range. */
VOLT_API int volt_st_writer_count(const volt_st_writer *w);
VOLT_API volt_status volt_st_writer_tensor_at(const volt_st_writer *w, int i, const char **name, volt_dtype *dt,
                                              volt_shape *shape, const void **data);

/* Write the file atomically (see volt_file_write_atomic). Tensors are laid out
 * contiguously, larger element sizes first (stable in the order added), so each tensor is
 * aligned to its element size, as the reference implementation does. May be called more
 * than once. Errors: VOLT_ERR_IO, VOLT_ERR_NOMEM, VOLT_ERR_INVALID_ARG. */
VOLT_API volt_status volt_st_writer_write(volt_st_writer *w, const char *path, char *err, size_t errlen);

/* The last error message of this writer ("" if none). Valid until the next call. */
VOLT_API const char *volt_st_writer_errmsg(const volt_st_writer *w);

/* ---- streaming writer ------------------------------------------------------------- */
/* For files larger than memory should hold: declare every tensor (name, dtype, shape) and
 * the metadata, begin (writes the header to "<path>.tmp"), write each tensor's data in
 * declaration order, finish (crc32 of each tensor patched into the header, fsync, rename:
 * atomic like volt_file_write_atomic). finish consumes the stream; destroy abandons one
 * (the .tmp is removed, a file already at path is untouched). Tensors are laid out in
 * declaration order. _meta's keys are volt_st_writer_meta's ("format": "volt" or "pt", any
 * other value VOLT_ERR_INVALID_ARG; volt 0.2.0 before 2026-12-06 ignored "format"). Messages in
 * volt_st_stream_errmsg (and err for create/finish). */
typedef struct volt_st_stream volt_st_stream;
VOLT_API volt_status volt_st_stream_create(const char *path, volt_st_stream **out, char *err, size_t errlen);
VOLT_API volt_status volt_st_stream_declare(volt_st_stream *s, const char *name, volt_dtype dt, volt_shape shape);
VOLT_API volt_status volt_st_stream_meta(volt_st_stream *s, const char *key, const char *value);
VOLT_API volt_status volt_st_stream_begin(volt_st_stream *s);
VOLT_API volt_status volt_st_stream_write(volt_st_stream *s, const char *name, const void *data);
VOLT_API volt_status volt_st_stream_finish(volt_st_stream *s, char *err, size_t errlen);
VOLT_API void volt_st_stream_destroy(volt_st_stream *s);                       /* NULL-safe */
VOLT_API const char *volt_st_stream_errmsg(const volt_st_stream *s);

/* ---- reader -------------------------------------------------------------------- */

/* Read and validate a whole file. Errors: VOLT_ERR_IO (missing/unreadable; names the file
 * and strerror), VOLT_ERR_CORRUPT (not a safetensors file, truncated, bad header, offsets
 * out of range or overlapping, size/shape mismatch; names the file and tensor),
 * VOLT_ERR_UNSUPPORTED (a valid safetensors dtype volt lacks, e.g. F64, or more than
 * VOLT_MAX_DIMS dims), VOLT_ERR_NOMEM. On error *out is NULL. */
VOLT_API volt_status volt_st_open(const char *path, volt_st_file **out, char *err, size_t errlen);
/* As volt_st_open, but only the bytes of the tensors `want` accepts are read (want(name, ctx)
 * is called once per tensor; NULL = all). The others stay listed, with their dtype, shape and
 * nbytes (the whole header is parsed and checked as by volt_st_open), but info.data is NULL,
 * volt_st_verify skips them and volt_st_read_f32 gives VOLT_ERR_STATE. A tensor of a dtype volt
 * lacks (F64, BOOL, ...) fails the open only when want keeps it; left out, it stays listed
 * (volt_st_count / volt_st_name) and volt_st_find gives VOLT_ERR_UNSUPPORTED for it. A training checkpoint's
 * weights without its optimizer states are a third of its bytes. */
typedef bool (*volt_st_want_fn)(const char *name, void *ctx);
VOLT_API volt_status volt_st_open_some(const char *path, volt_st_want_fn want, void *ctx, volt_st_file **out,
                                       char *err, size_t errlen);
VOLT_API void volt_st_close(volt_st_file *f);                                  /* NULL-safe */

/* Tensors, in the order of their data in the file. name: NULL if i is out of range;
 * valid until volt_st_close. */
VOLT_API int volt_st_count(const volt_st_file *f);
VOLT_API const char *volt_st_name(const volt_st_file *f, int i);
/* Look up a tensor by name. Errors: VOLT_ERR_NOT_FOUND, VOLT_ERR_INVALID_ARG, VOLT_ERR_UNSUPPORTED
 * (a dtype volt lacks, listed by volt_st_open_some / _deferred). */
VOLT_API volt_status volt_st_find(const volt_st_file *f, const char *name, volt_st_info *info);

/* `__metadata__`, including volt's own "format" and "crc32:*" keys. Strings are valid
 * until volt_st_close. volt_st_meta: NULL if absent. */
VOLT_API const char *volt_st_meta(const volt_st_file *f, const char *key);
VOLT_API int volt_st_meta_count(const volt_st_file *f);
VOLT_API volt_status volt_st_meta_at(const volt_st_file *f, int i, const char **key, const char **value);

/* Check a tensor's bytes against its "crc32:<name>" metadata; OK when there is none (and for
 * a tensor volt_st_open_some did not read).
 * Errors: VOLT_ERR_CORRUPT ("... tensor 'x' crc mismatch (file corrupt?)", or a malformed
 * crc entry), VOLT_ERR_NOT_FOUND. _all checks every tensor and stops at the first error. */
VOLT_API volt_status volt_st_verify(const volt_st_file *f, const char *name, char *err, size_t errlen);
VOLT_API volt_status volt_st_verify_all(const volt_st_file *f, char *err, size_t errlen);

/* ---- one tensor at a time (a load that should hold one tensor of the file, not all) ----
 * volt_st_open_deferred: as volt_st_open_some, but the tensors defer(name, ctx) picks (among
 * those want keeps; defer NULL = none) stay in the file, taking no memory: info.data is NULL,
 * volt_st_read_f32 gives VOLT_ERR_STATE. The file stays open until volt_st_close.
 * volt_st_check: volt_st_verify_all for the tensors in memory; each deferred one is read through
 * in pieces of at most 8 MiB, checked against its crc when the file keeps crcs (a file from
 * elsewhere has none: then only that all its bytes are there), and the crc of what was read is
 * remembered. Call it once, before the first read: everything is checked before anything is used.
 * volt_st_read_deferred: a checked deferred tensor's bytes as they lie in the file (its dtype)
 * into dst (cap bytes, at least nbytes), compared with what the check saw: a file changed or
 * shortened since is VOLT_ERR_CORRUPT ("tensor 'x' changed after it was checked"). Not deferred,
 * or not checked yet: VOLT_ERR_STATE. */
VOLT_API volt_status volt_st_open_deferred(const char *path, volt_st_want_fn want, volt_st_want_fn defer, void *ctx,
                                           volt_st_file **out, char *err, size_t errlen);
VOLT_API volt_status volt_st_check(volt_st_file *f, char *err, size_t errlen);
VOLT_API volt_status volt_st_read_deferred(const volt_st_file *f, const char *name, void *dst, size_t cap, char *err,
                                           size_t errlen);

/* Copy a F32/BF16/F16 tensor into dst as f32 (numel floats). requires: numel equals the
 * tensor's element count, else VOLT_ERR_SHAPE naming both. Other dtypes: VOLT_ERR_DTYPE.
 * Missing tensor: VOLT_ERR_NOT_FOUND. */
VOLT_API volt_status volt_st_read_f32(const volt_st_file *f, const char *name, float *dst,
                             int64_t numel, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
