/* trainer/checkpoint_internal.h — what the checkpoint files of the trainer share (not
 * installed): checkpoint.c (module extras, single-file save, load), checkpoint_meta.c
 * (metadata checksum), checkpoint_shards.c (which slice a rank holds, sharded save, removal),
 * checkpoint_source.c (opening one file or an index and its shards, reading with resharding),
 * checkpoint_export.c (export_full), checkpoint_stage.c (the host staging area every transfer
 * goes through, and streamed files). */
#ifndef VOLT_TRAINER_CHECKPOINT_INTERNAL_H
#define VOLT_TRAINER_CHECKPOINT_INTERNAL_H

#include <cjson/cJSON.h>
#include "trainer/trainer_internal.h"
#include "volt/safetensors.h"

/* Shared between a few files only: never exported from libvolt.so. */
#pragma GCC visibility push(hidden)

/* The metadata key of a sharded checkpoint's layout (checkpoint_shards.c). */
#define SHARD_INDEX_KEY "volt.shards"

/* ---- staging (checkpoint_stage.c) ----
 * Unit buffers and optimizer states are device memory: the checkpoint code moves them by
 * explicit copies through one host staging area per save/load/export, sized for the largest
 * unit and allocated once (never per tensor). f32 holds the elements as f32 (what files
 * hold); raw holds them as stored when the store or the states are 16-bit. */
typedef struct ck_stage {
    volt_device *dev;          /* the param store's device */
    float *f32;                /* cap floats */
    void *raw;                 /* cap 16-bit elements, or NULL when everything is f32 */
    int64_t cap;               /* the largest unit's numel */
    /* When set (a snapshot), each fetch lands in the next into_cap - into_used floats of
     * `into` instead of f32, and stays there: one copy from the device, none on the host. */
    float *into;
    size_t into_cap, into_used;
} ck_stage;

volt_status stage_open(volt_trainer *t, ck_stage *s);   /* VOLT_ERR_NOMEM */
void stage_close(ck_stage *s);
/* Unit u's values [lo, hi) as f32 in s->f32[0, hi - lo) (or the next floats of s->into):
 * one D2H copy. */
const float *stage_values(volt_trainer *t, ck_stage *s, int u, int64_t lo, int64_t hi);
/* Optimizer state k of unit u as f32 over the range [*lo, *hi) the optimizer holds: one D2H
 * copy. NULL when this rank holds none. */
const float *stage_state(volt_trainer *t, ck_stage *s, int u, int k, int64_t *lo, int64_t *hi);
/* n f32 values at src (s->f32, or a file's bytes) to device memory dst holding dt elements:
 * rounded on the host into s->raw when 16-bit, one H2D copy. */
void stage_put(ck_stage *s, void *dst, volt_dtype dt, const float *src, int64_t n);
/* Make unit u's value buffer writable again (a sharding strategy may have given part back). */
/* Staging areas allocated so far in this process (tests: one per save, load or export). */
uint64_t volt__ckpt_stagings(void);

/* A streamed safetensors file at path carrying w's metadata (w sealed already). */
volt_status ck_stream_open(const char *path, const volt_st_writer *w, volt_st_stream **out, char *err, size_t errlen);
/* Declare (write = false) or write w's tensors (module extras) whose element size is >= 4
 * (big) or < 4, element size descending: big ones go before the f32 weights, small ones
 * after, so every tensor stays aligned to its element size. */
volt_status ck_stream_extras(volt_st_stream *s, const volt_st_writer *w, bool big, bool write);

/* ---- metadata checksum (checkpoint_meta.c) ---- */
/* Add the checksum of everything set on w so far (call it right before writing). */
volt_status meta_seal(volt_st_writer *w);
/* Check the metadata checksum of an open file. required: a missing checksum is an error. */
volt_status meta_check(volt_st_file *f, const char *file, bool required, char *err, size_t errlen);

/* ---- save (checkpoint.c) ---- */
/* Everything but the weights and optimizer states (rank 0): loop state, optimizer step,
 * scheduler, precision, callbacks, module extras. */
volt_status put_state(volt_trainer *t, volt_st_writer *w, const char *path);
/* Does optimizer state range [lo, hi) of a unit hold all of parameter p? (unsharded: always) */
bool state_holds(const volt_tensor *p, int64_t lo, int64_t hi);
/* A tensor of a single-file save: data is the parameter's slice of the staged unit or state
 * (f32, valid during the call), NULL when walked without a staging area. */
typedef volt_status (*ck_tensor_fn)(void *ctx, const char *name, volt_shape shape, const float *data);
/* The weights, then the optimizer states, in file order (checkpoint.c). */
volt_status ck_each_tensor(volt_trainer *t, ck_stage *sg, ck_tensor_fn fn, void *ctx);
/* The optimizer states a save writes: none for a weights-only save (or without an optimizer). */
int ck_saved_states(const volt_trainer *t);

/* Collective (world > 1): rank 0's NUL-terminated string in buf (cap bytes; *has false: none)
 * into every rank's buf and *has, the first broadcast at most 1 KiB (checkpoint.c). what: the
 * call site's name for the comm, the same on every rank. */
volt_status ck_bcast_str(volt_trainer *t, char *buf, size_t cap, bool *has, const char *what);

/* Collective (world > 1): the first of a checkpoint save (code CK_ENTRY_SAVE), load
 * (CK_ENTRY_LOAD) or sharded snapshot (CK_ENTRY_SNAPSHOT): an error naming the mismatch when
 * some rank is in another collective or call; `what` names the call in it. */
enum { CK_ENTRY_SAVE = 1, CK_ENTRY_LOAD = 2, CK_ENTRY_SNAPSHOT = 3 };
volt_status ck_entry_vote(volt_trainer *t, int code, const char *what, const char *path);

/* ---- shards (checkpoint_shards.c) ---- */
/* The slice [lo, hi) of unit u this rank holds: all of it unless a sharding strategy says less. */
void owned_range(volt_trainer *t, int u, int64_t *lo, int64_t *hi);
/* Does some rank hold only a slice of some unit (ZeRO, FSDP)? Then checkpoints are sharded. */
bool ckpt_sharded(volt_trainer *t);
/* Every rank gets the same verdict: ok is this rank's; false when any rank's was false. what:
 * the vote's name for the comm, the same on every rank. */
bool all_ok(volt_trainer *t, bool ok, const char *what);
/* The same, telling a comm failure (returned, *all false) from a rank's "no" (*all false). */
volt_status all_ok_st(volt_trainer *t, bool ok, bool *all, const char *what);
/* Remove a shard folder, or every shard folder of a checkpoint but `keep`. */
int remove_dir(const char *dir);
int remove_shard_dirs(const char *path, const char *keep);
bool shard_file(char *buf, size_t n, const char *dir, int r, int world);
volt_status save_sharded(volt_trainer *t, const char *path);
/* This rank's shard tensors in file order: per unit "params.<unit>" then each optimizer
 * state's "optimizer.<state>.<unit>", this rank's slice, n floats (data NULL without sg). */
typedef volt_status (*shard_tensor_fn)(void *ctx, const char *name, int64_t n, const float *data);
volt_status shard_each(volt_trainer *t, ck_stage *sg, shard_tensor_fn fn, void *ctx);
/* A shard file's metadata (id, rank, world), sealed, in a new writer. */
volt_status shard_meta(int rank, int world, const char *idhex, volt_st_writer **out, char *err, size_t errlen);
/* The optimizer holds exactly the slices the strategy says this rank owns (err says where not). */
volt_status shard_check_states(volt_trainer *t, char *err, size_t errlen);
/* Collective: every rank's slices, world x units x 2 (malloc'd). */
volt_status shard_ranges(volt_trainer *t, double **out);
/* The index's layout JSON (cJSON_free it). */
char *index_json(volt_trainer *t, const char *dirbase, const char *id, const double *ranges);
/* Rank 0: write the index at path for the complete shard folder dir (every rank's file
 * present), with a snapshot's state (NULL: put_state now); then remove the replaced folders,
 * or dir on failure. Errors recorded on t. */
volt_status shard_index_write(volt_trainer *t, const char *path, const char *dir, const char *idhex, const double *ranges,
                              const volt_st_writer *state);
/* A fresh 64-bit id for a shard folder. */
uint64_t shard_fresh_id(void);

/* ---- loading (checkpoint_source.c): where the saved values are: one file, or an index and its shards */
typedef struct ck_unit { const char *name; int64_t numel; int64_t *lo, *hi; } ck_unit;   /* lo/hi: per saved rank */
typedef struct ck_param { const char *name; int unit; int64_t offset, numel; volt_shape shape; } ck_param;

typedef struct ck_src {
    const char *path;
    volt_st_file *f;           /* the checkpoint (unsharded) or the index */
    cJSON *index;              /* sharded: the layout */
    int world;                 /* sharded: ranks that saved */
    volt_st_file **shards;
    int n_units, n_params;
    ck_unit *units;
    ck_param *params;
    cJSON *states;             /* sharded: names of the saved optimizer states */
    bool legacy;               /* format 1: no metadata checksums */
    bool states_read;          /* the optimizer states were read (else they stay in the file) */
    /* the parameters and states stay in the file (volt_st_open_deferred; the shards too) and
     * are read one tensor (or the slice of a shard tensor this rank applies) at a time into
     * buf, so a load holds one tensor of the file, not all */
    unsigned char *buf;
    size_t buf_cap;
    const void *buf_key;       /* the file's entry of the tensor buf holds (NULL: none) */
    char err[768];             /* why src_get returned NULL, and its status */
    volt_status err_st;
} ck_src;

/* states: read the optimizer states too (a resuming fit); without them their bytes are never
 * read nor checked (volt_st_open_some). Every header the rank opens is validated; of the
 * tensors, only those (or the slices) this rank applies are read and checked. Collective under
 * a distributed strategy (every rank calls it): the ranks agree on one verdict, and a bad
 * tensor any rank found fails the open on every rank with that rank's message. */
/* A shard index's "shape" array: at most VOLT_MAX_DIMS integers, each 0 <= d <= 2^53. */
bool ck_json_shape(const cJSON *sh, volt_shape *out);
volt_status src_open(volt_trainer *t, const char *path, bool states, ck_src *c);
void src_close(ck_src *c);
/* Collective (every rank, world > 1): st is this rank's result, its message on t. When any
 * rank's is an error, every rank returns the lowest failing rank's status and message, with
 * "(rank r of N found it; <outcome>)" added; VOLT_OK when none failed. A comm failure (a dead
 * or stalled rank) is an error naming the checkpoint. One process: st. */
volt_status src_agree(volt_trainer *t, const char *path, volt_status st, const char *outcome);
const ck_param *src_param(const ck_src *c, const char *name);
bool src_has_state(const ck_src *c, const char *state);
/* Elements [a, b) of a saved parameter (state == NULL) or of its optimizer state, as f32: a
 * pointer into the tensor just read into c->buf (or the file's data) where it holds them as
 * f32 in one piece, else scratch (b - a floats) filled. NULL, with c->err, when reading the
 * tensor failed (the file or a shard changed or shrank since src_open checked it). */
const float *src_get(ck_src *c, const char *state, const char *pname, int64_t a, int64_t b, float *scratch);

#pragma GCC visibility pop

/* volt_st_open_some's selection that reads no tensor: a checkpoint's header and metadata alone
 * (checkpoint_info.c). */
bool ck_no_tensor(const char *name, void *ctx);

#endif
