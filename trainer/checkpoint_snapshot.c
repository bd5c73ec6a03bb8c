/* Snapshots for asynchronous saving (ModelCheckpoint's async_save; Lightning's
 * AsyncCheckpointIO): everything volt_trainer_save_checkpoint would write, taken now into host
 * memory — the metadata and module extras in a volt_st_writer, the weights and optimizer
 * states copied out of device memory (ck_each_tensor, the walk the streamed save makes: one
 * D2H copy per unit and state, straight into one host buffer, ck_stage.into, which the
 * writer borrows from; unit buffers whole, padding included) — and written
 * later, on any thread, by volt_st_writer_write. The writer lays tensors out by element size,
 * stable in the order added (extras of 8 bytes, then the 4-byte extras, the weights and the
 * states, then the small extras), which is the order save_single streams, so the file
 * is byte for byte the one a synchronous save at the snapshot's moment writes
 * (tests/test_callbacks.c). The write touches nothing of the trainer. The host buffer is kept
 * and reused by the next snapshot.
 *
 * Sharded strategies (ZeRO, FSDP over several ranks): the snapshot is collective (the
 * 'checkpoint call' vote as a save's, rank 0's id, every rank's slices for the index) and
 * holds this rank's shard (shard_each's tensors) and, on rank 0, the index's state (put_state
 * now). A write puts this rank's shard file in the folder "<path>.shards-<id>", the id
 * derived from the snapshot's and the path, so every rank names the same folder without
 * talking; volt_trainer_snapshot_commit, back on the trainer's thread and collective, checks
 * that every rank wrote and has rank 0 write the index, which makes the checkpoint exist (the
 * save's atomic step, as in save_sharded). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/hostmem.h"
#include "trainer/checkpoint_internal.h"
#include "volt/safetensors.h"

struct volt_ckpt_snapshot {
    volt_st_writer *w;       /* metadata, module extras, and the tensors borrowed from buf;
                                sharded: this rank's shard tensors only */
    float *buf;
    size_t cap;              /* floats in buf */
    bool empty;              /* a rank other than 0 of a replicated strategy: nothing to write */
    /* sharded */
    bool sharded;
    uint64_t id;             /* rank 0's, for every rank */
    int rank, world;
    volt_st_writer *state;   /* rank 0: the index's metadata and module extras (unsealed) */
    double *ranges;          /* rank 0: every rank's slices */
    bool weights_only;       /* taken with VOLT_CKPT_WEIGHTS_ONLY: the index lists no optimizer state */
};

/* The floats ck_each_tensor fetches: every unit's values whole, every state range held. */
static size_t fetched_floats(volt_trainer *t) {
    const int U = volt_params_unit_count(t->ps), K = ck_saved_states(t);
    size_t n = 0;
    for (int u = 0; u < U; u++) n += (size_t)volt_unit_numel(volt_params_unit_at(t->ps, u));
    for (int k = 0; k < K; k++)
        for (int u = 0; u < U; u++) {
            int64_t lo = 0, hi = 0;
            if (volt_optimizer_state_raw(t->opt, u, k, &lo, &hi) && hi > lo) n += (size_t)(hi - lo);
        }
    return n;
}

/* Each tensor already lies in the snapshot's buffer (the fetch put it there): the writer
 * borrows it. */
static volt_status add_tensor(void *w, const char *name, volt_shape shape, const float *data) {
    return volt_st_writer_add(w, name, VOLT_F32, shape, data);
}
static volt_status add_shard_tensor(void *w, const char *name, int64_t n, const float *data) {
    return volt_st_writer_add(w, name, VOLT_F32, VOLT_SHAPE(n), data);
}
static volt_status count_shard(void *ctx, const char *name, int64_t n, const float *data) {
    (void)name; (void)data;
    *(size_t *)ctx += (size_t)n;
    return VOLT_OK;
}

static void snap_clear(volt_ckpt_snapshot *s) {
    volt_st_writer_destroy(s->w);
    volt_st_writer_destroy(s->state);
    free(s->ranges);
    s->w = s->state = NULL;
    s->ranges = NULL;
    s->sharded = false;
}

/* The buffer for need floats (kept when large enough): hundreds of MB, touched at once. */
static volt_status snap_reserve(volt_trainer *t, volt_ckpt_snapshot *s, size_t need, const char *path) {
    if (need <= s->cap) return VOLT_OK;
    free(s->buf);
    s->cap = 0;
    if (!(s->buf = volt__huge_alloc((need ? need : 1) * sizeof(float))))
        return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of host memory for the snapshot (%zu bytes)", path,
                          need * sizeof(float));
    s->cap = need;
    return VOLT_OK;
}

/* The folder a write of a sharded snapshot at path uses: "<path>.shards-<id>", the id mixed
 * from the snapshot's and the path's bytes (every rank computes the same). */
static bool snap_dir(const volt_ckpt_snapshot *s, const char *path, char *dir, size_t n, char *idhex) {
    uint64_t h = s->id ^ 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) h = (h ^ *c) * 0x100000001b3ull;
    h ^= h >> 33; h *= 0xff51afd7ed558ccdull; h ^= h >> 33;
    snprintf(idhex, 24, "%016llx", (unsigned long long)h);
    const int k = snprintf(dir, n, "%s.shards-%s", path, idhex);
    return k >= 0 && (size_t)k < n;
}

/* The tensors into the snapshot's buffer, straight from the device (ck_stage.into), added to
 * s->w as they land: the single-file walk or this rank's shard walk. Errors recorded on t. */
static volt_status fill(volt_trainer *t, volt_ckpt_snapshot *s, const char *path, bool shard) {
    ck_stage sg;
    if (stage_open(t, &sg) < 0) return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory (staging)", path);
    sg.into = s->buf;
    sg.into_cap = s->cap;
    volt_status st = shard ? shard_each(t, &sg, add_shard_tensor, s->w) : ck_each_tensor(t, &sg, add_tensor, s->w);
    stage_close(&sg);
    if (st < 0) volt__terr(t, st, "checkpoint '%s': %s", path, st == VOLT_ERR_STATE ? "a unit could not be staged" : volt_st_writer_errmsg(s->w));
    return st;
}

/* Collective: the shard snapshot of every rank (module extras and loop state on rank 0). */
static volt_status snapshot_sharded(volt_trainer *t, const char *path, volt_ckpt_snapshot *s) {
    char err[768] = "";
    volt_status st = shard_check_states(t, err, sizeof err);
    if (!all_ok(t, st >= 0, "snapshot optimizer slices"))
        return volt__terr(t, st < 0 ? st : VOLT_ERR_STATE, "checkpoint '%s': %s", path, st < 0 ? err : "another rank's optimizer "
                          "holds other slices than its strategy says");
    uint64_t id = t->rank == 0 ? shard_fresh_id() : 0;
    if ((st = volt__strategy_broadcast(t->strategy, &id, sizeof id, 0, "snapshot folder id")) < 0)
        return volt__terr(t, st, "checkpoint '%s': strategy '%s': %s", path, volt__strategy_name(t->strategy),
                          volt__strategy_errmsg(t->strategy));
    s->sharded = true;
    s->id = id;
    s->rank = t->rank;
    s->world = t->world;
    if ((st = shard_ranges(t, &s->ranges)) < 0)
        return volt__terr(t, st, "checkpoint '%s': %s", path, st == VOLT_ERR_NOMEM ? "out of memory" : volt__strategy_errmsg(t->strategy));
    size_t need = 0;
    (void)shard_each(t, NULL, count_shard, &need);
    st = snap_reserve(t, s, need, path);
    if (st >= 0 && (st = volt_st_writer_create(&s->w)) < 0) volt__terr(t, st, "checkpoint '%s': out of memory", path);
    if (st >= 0 && t->rank == 0) {
        if ((st = volt_st_writer_create(&s->state)) < 0) volt__terr(t, st, "checkpoint '%s': out of memory", path);
        else st = put_state(t, s->state, path);   /* records its own errors */
    }
    if (st >= 0) st = fill(t, s, path, true);
    if (!all_ok(t, st >= 0, "snapshot taken")) {   /* every rank holds a whole snapshot, or none does */
        snap_clear(s);
        return st < 0 ? st : volt__terr(t, VOLT_ERR_STATE, "checkpoint '%s': another rank could not take its snapshot", path);
    }
    return VOLT_OK;
}

static volt_status snapshot_checkpoint(volt_trainer *t, const char *path, volt_ckpt_snapshot **io);
volt_status volt_trainer_snapshot_checkpoint(volt_trainer *t, const char *path, volt_ckpt_snapshot **io) {
    return volt_trainer_snapshot_checkpoint_ex(t, path, 0, io);
}

volt_status volt_trainer_snapshot_checkpoint_ex(volt_trainer *t, const char *path, unsigned flags, volt_ckpt_snapshot **io) {
    if (!t || !io) return VOLT_ERR_INVALID_ARG;
    if (flags & ~VOLT_CKPT_WEIGHTS_ONLY) return volt__terr(t, VOLT_ERR_INVALID_ARG, "snapshot_checkpoint: unknown flags 0x%x", flags);
    t->ck_weights_only = flags & VOLT_CKPT_WEIGHTS_ONLY;
    bool swapped = false;   /* weight averaging: the file's weights are the average */
    volt_status st = t->ps ? volt__avg_save_enter(t, &swapped) : VOLT_OK;
    if (st >= 0) st = snapshot_checkpoint(t, path, io);
    volt__avg_save_leave(t, swapped);
    t->ck_weights_only = false;
    return st;
}

static volt_status snapshot_checkpoint(volt_trainer *t, const char *path, volt_ckpt_snapshot **io) {
    if (!t->ps || !volt_params_finalized(t->ps)) return volt__terr(t, VOLT_ERR_STATE, "snapshot_checkpoint: no model yet");
    if (!path || !*path) return volt__terr(t, VOLT_ERR_INVALID_ARG, "snapshot_checkpoint: empty path");
    VOLT_TRY(volt__loop_wait_params(t, "snapshot_checkpoint"));
    volt_ckpt_snapshot *s = *io;
    const bool sharded = ckpt_sharded(t);
    /* sharded: collective, and every rank must be here (a snapshot on rank 0 alone would meet
     * the others' next collective: a vote of another size, which MPI turns into an abort) */
    if (sharded) VOLT_TRY(ck_entry_vote(t, CK_ENTRY_SNAPSHOT, "snapshot_checkpoint", path));
    const bool have = s || (s = *io = calloc(1, sizeof *s));
    if (sharded ? !all_ok(t, have, "snapshot allocated") : !have)   /* sharded: every rank goes on, or none */
        return volt__terr(t, VOLT_ERR_NOMEM, "snapshot_checkpoint: out of memory");
    snap_clear(s);
    s->weights_only = t->ck_weights_only;
    s->empty = !sharded && t->rank != 0;   /* replicated state: rank 0 writes it all */
    if (sharded) return snapshot_sharded(t, path, s);
    if (s->empty) return VOLT_OK;
    VOLT_TRY(snap_reserve(t, s, fetched_floats(t), path));
    volt_status st = volt_st_writer_create(&s->w);
    if (st < 0) return volt__terr(t, st, "checkpoint '%s': cannot create the writer", path);
    st = put_state(t, s->w, path);   /* records its own errors */
    if (st >= 0 && (st = meta_seal(s->w)) < 0) volt__terr(t, st, "checkpoint '%s': out of memory", path);
    if (st < 0) {
        volt_st_writer_destroy(s->w);
        s->w = NULL;
        return st;
    }
    st = fill(t, s, path, false);
    if (st < 0) {
        volt_st_writer_destroy(s->w);
        s->w = NULL;
    }
    return st;
}

/* This rank's shard file in the snapshot's folder for path (created by whichever rank comes
 * first), sealed metadata as save_sharded writes it. */
static volt_status write_shard_file(volt_ckpt_snapshot *s, const char *path, char *err, size_t errlen) {
    char dir[4096], idhex[24], file[4200], e[512] = "";
    if (!snap_dir(s, path, dir, sizeof dir, idhex) || !shard_file(file, sizeof file, dir, s->rank, s->world)) {
        snprintf(err, errlen, "checkpoint '%s': path too long", path);
        return VOLT_ERR_INVALID_ARG;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "checkpoint '%s': cannot create the shard folder '%s': %s", path, dir, strerror(errno));
        return VOLT_ERR_IO;
    }
    volt_st_writer *w;
    volt_status st = shard_meta(s->rank, s->world, idhex, &w, e, sizeof e);
    for (int i = 0; st >= 0 && i < volt_st_writer_count(s->w); i++) {
        const char *n;
        volt_dtype dt;
        volt_shape sh;
        const void *d;
        if ((st = volt_st_writer_tensor_at(s->w, i, &n, &dt, &sh, &d)) >= 0) st = volt_st_writer_add(w, n, dt, sh, d);
        if (st < 0) snprintf(e, sizeof e, "%s", volt_st_writer_errmsg(w));
    }
    if (st >= 0) st = volt_st_writer_write(w, file, e, sizeof e);
    if (st < 0) snprintf(err, errlen, "checkpoint '%s': %s", path, e[0] ? e : volt_status_str(st));
    volt_st_writer_destroy(w);
    return st;
}

volt_status volt_ckpt_snapshot_write(volt_ckpt_snapshot *s, const char *path, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!s || !path || !*path) {
        if (err && errlen) snprintf(err, errlen, "volt_ckpt_snapshot_write: NULL snapshot or empty path");
        return VOLT_ERR_INVALID_ARG;
    }
    if (s->empty) return VOLT_OK;
    if (!s->w) {
        if (err && errlen) snprintf(err, errlen, "checkpoint '%s': no snapshot taken (or the last one failed)", path);
        return VOLT_ERR_STATE;
    }
    if (s->sharded) return write_shard_file(s, path, err, errlen);
    volt_status st = volt_st_writer_write(s->w, path, err, errlen);
    if (st >= 0) remove_shard_dirs(path, NULL);   /* it may replace a sharded checkpoint */
    return st;
}

volt_status volt_trainer_snapshot_commit(volt_trainer *t, volt_ckpt_snapshot *s, const char *path, volt_status written,
                                         const char *why) {
    if (!t || !s || !path || !*path) return t ? volt__terr(t, VOLT_ERR_INVALID_ARG, "snapshot_commit: NULL snapshot or empty path")
                                              : VOLT_ERR_INVALID_ARG;
    if (!s->sharded) return VOLT_OK;   /* the write was the whole save */
    char dir[4096], idhex[24];
    const bool named = snap_dir(s, path, dir, sizeof dir, idhex);
    if (!all_ok(t, written >= 0 && named, "snapshot shards written")) {
        if (t->rank == 0 && named) remove_dir(dir);
        if (written < 0 || !named)
            return volt__terr(t, written < 0 ? written : VOLT_ERR_INVALID_ARG, "checkpoint '%s': rank %d shard: %s", path, t->rank,
                              !named ? "path too long" : why && why[0] ? why : volt_status_str(written));
        return volt__terr(t, VOLT_ERR_IO, "checkpoint '%s': another rank could not write its shard (its log has the reason)", path);
    }
    t->ck_weights_only = s->weights_only;   /* the index describes the shards as they were taken */
    volt_status st = t->rank == 0 ? shard_index_write(t, path, dir, idhex, s->ranges, s->state) : VOLT_OK;
    t->ck_weights_only = false;
    if (!all_ok(t, st >= 0, "snapshot index written")) {
        if (st < 0) return st;
        return volt__terr(t, VOLT_ERR_IO, "checkpoint '%s': rank 0 could not write the index (its log has the reason)", path);
    }
    return VOLT_OK;
}

void volt_ckpt_snapshot_discard(volt_ckpt_snapshot *s, const char *path) {
    char dir[4096], idhex[24], file[4200];
    if (!s || !s->sharded || !path || !*path || !snap_dir(s, path, dir, sizeof dir, idhex)) return;
    if (shard_file(file, sizeof file, dir, s->rank, s->world)) unlink(file);
    rmdir(dir);   /* the last rank to leave it removes it */
}

bool volt_ckpt_snapshot_sharded(const volt_ckpt_snapshot *s) { return s && s->sharded; }

size_t volt_ckpt_snapshot_bytes(const volt_ckpt_snapshot *s) { return s ? s->cap * sizeof(float) : 0; }

void volt_ckpt_snapshot_destroy(volt_ckpt_snapshot *s) {
    if (!s) return;
    snap_clear(s);
    free(s->buf);
    free(s);
}
