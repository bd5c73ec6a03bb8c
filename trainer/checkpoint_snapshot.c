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
 * and reused by the next snapshot. Sharded strategies (ZeRO, FSDP) are not snapshotted: their
 * save is collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/hostmem.h"
#include "trainer/checkpoint_internal.h"
#include "volt/safetensors.h"

struct volt_ckpt_snapshot {
    volt_st_writer *w;       /* metadata, module extras, and the tensors borrowed from buf */
    float *buf;
    size_t cap;              /* floats in buf */
    bool empty;              /* a rank other than 0 of a replicated strategy: nothing to write */
};

/* The floats ck_each_tensor fetches: every unit's values whole, every state range held. */
static size_t fetched_floats(volt_trainer *t) {
    const int U = volt_params_unit_count(t->ps), K = t->opt ? volt_optimizer_state_count(t->opt) : 0;
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

volt_status volt_trainer_snapshot_checkpoint(volt_trainer *t, const char *path, volt_ckpt_snapshot **io) {
    if (!t || !io) return VOLT_ERR_INVALID_ARG;
    if (!t->ps || !volt_params_finalized(t->ps)) return volt__terr(t, VOLT_ERR_STATE, "snapshot_checkpoint: no model yet");
    if (!path || !*path) return volt__terr(t, VOLT_ERR_INVALID_ARG, "snapshot_checkpoint: empty path");
    VOLT_TRY(volt__loop_wait_params(t, "snapshot_checkpoint"));
    if (ckpt_sharded(t)) return VOLT_ERR_UNSUPPORTED;   /* the caller saves synchronously (no error recorded) */
    volt_ckpt_snapshot *s = *io;
    if (!s && !(s = *io = calloc(1, sizeof *s))) return volt__terr(t, VOLT_ERR_NOMEM, "snapshot_checkpoint: out of memory");
    volt_st_writer_destroy(s->w);
    s->w = NULL;
    s->empty = t->rank != 0;   /* replicated state: rank 0 writes it all */
    if (s->empty) return VOLT_OK;
    const size_t need = fetched_floats(t);
    if (need > s->cap) {
        free(s->buf);
        s->cap = 0;
        if (!(s->buf = volt__huge_alloc((need ? need : 1) * sizeof(float))))   /* hundreds of MB, touched at once */
            return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of host memory for the snapshot (%zu bytes)", path,
                              need * sizeof(float));
        s->cap = need;
    }
    volt_status st = volt_st_writer_create(&s->w);
    if (st < 0) return volt__terr(t, st, "checkpoint '%s': cannot create the writer", path);
    st = put_state(t, s->w, path);   /* records its own errors */
    if (st >= 0 && (st = meta_seal(s->w)) < 0) volt__terr(t, st, "checkpoint '%s': out of memory", path);
    if (st < 0) {
        volt_st_writer_destroy(s->w);
        s->w = NULL;
        return st;
    }
    ck_stage sg;
    if (stage_open(t, &sg) < 0) st = volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory (staging)", path);
    else {
        sg.into = s->buf;
        sg.into_cap = s->cap;
        st = ck_each_tensor(t, &sg, add_tensor, s->w);
        stage_close(&sg);
        if (st < 0) volt__terr(t, st, "checkpoint '%s': %s", path,
                               st == VOLT_ERR_STATE ? "a unit could not be staged" : volt_st_writer_errmsg(s->w));
    }
    if (st < 0) {
        volt_st_writer_destroy(s->w);
        s->w = NULL;
    }
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
    volt_status st = volt_st_writer_write(s->w, path, err, errlen);
    if (st >= 0) remove_shard_dirs(path, NULL);   /* it may replace a sharded checkpoint */
    return st;
}

size_t volt_ckpt_snapshot_bytes(const volt_ckpt_snapshot *s) { return s ? s->cap * sizeof(float) : 0; }

void volt_ckpt_snapshot_destroy(volt_ckpt_snapshot *s) {
    if (!s) return;
    volt_st_writer_destroy(s->w);
    free(s->buf);
    free(s);
}
