/* ModelCheckpoint's background writes (async_save) and the bookkeeping of a save point that
 * failed: see callbacks/model_checkpoint.c's head comment. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/trainer.h"
#include "callbacks/model_checkpoint_internal.h"

/* ---- the bookkeeping of a save point that failed ------------------------------------------------------- */

void volt__mc_undo_free(struct mc_undo *u) {
    free(u->best);
    free(u->pushed);
    free(u->evicted);
    free(u->replaced);
    free(u->last);
    memset(u, 0, sizeof *u);
}

/* The save point's files are written (or failed): a top-k file or a last that was not written
 * leaves the bookkeeping as it was before (the entry it would have evicted, "best" and "last"
 * name files that exist), so "best" after a failed fit is the previous best. */
void volt__mc_settle(mc *m, bool topk_failed, bool last_failed) {
    struct mc_undo *u = &m->undo;
    if (topk_failed && u->topk) {
        free(volt__cb_topk_take(&m->topk, u->pushed ? volt__cb_topk_find(&m->topk, u->pushed) : -1));
        /* in the reverse order of their taking: each goes back to its place */
        const char *back[2] = { u->replaced, u->evicted };
        const double score[2] = { u->replaced_score, u->evicted_score };
        const int at[2] = { u->replaced_at, u->evicted_at };
        for (int i = 0; i < 2; i++)
            if (back[i] && volt__cb_topk_insert(&m->topk, at[i], back[i], score[i]) != VOLT_OK)
                fprintf(stderr, "volt: ModelCheckpoint: out of memory: '%s' leaves the top-k bookkeeping (the file stays)\n",
                        back[i]);
        volt__mc_set_str(&m->best_path, u->best);
        m->best_score = u->best_score;
    }
    if (last_failed && u->last_set) volt__mc_set_str(&m->last_path, u->last);
    u->topk = u->last_set = false;
}

/* ---- asynchronous saving ------------------------------------------------------------------------- */

static void *mc_job_run(void *arg) {
    mc *m = arg;
    struct mc_job *j = &m->job;
    j->topk_st = j->last_st = VOLT_OK;
    if (j->topk[0]) j->topk_st = volt_ckpt_snapshot_write(m->snap, j->topk, j->err, sizeof j->err);
    if (j->last[0])   /* not after a failed top-k write: its message is the one reported */
        j->last_st = j->topk_st < 0 ? j->topk_st
                   : j->topk[0] && j->link_last && volt__mc_link_last(j->topk, j->last) ? VOLT_OK
                   : volt_ckpt_snapshot_write(m->snap, j->last, j->err, sizeof j->err);
    j->st = j->topk_st < 0 ? j->topk_st : j->last_st;
    if (j->commit) return NULL;   /* the removals wait for the commit */
    for (int i = 0; i < 2; i++) {
        if ((i ? j->last_st : j->topk_st) >= 0 && j->remove[i]) volt__mc_remove_file(j->remove[i]);
        free(j->remove[i]);
        j->remove[i] = NULL;
    }
    return NULL;
}

/* Wait for the write in flight, and settle the bookkeeping by what it wrote (the resolver: its
 * failure is reported by the next hook). Sharded writes settle at their commit. */
void volt__mc_wait(mc *m) {
    if (m->running) {
        pthread_join(m->th, NULL);
        m->running = false;
    }
    if (!m->job.commit) volt__mc_settle(m, m->job.topk_st < 0, m->job.last_st < 0);
}

void volt__mc_job_free(struct mc_job *j) {
    for (int i = 0; i < 2; i++) {
        free(j->remove[i]);
        j->remove[i] = NULL;
    }
    j->commit = false;
}

/* Sharded: the written shards become checkpoints (collective: every rank commits the same
 * paths in the same order), then the files they replace go. A failure on any rank is every
 * rank's, as the trainer's error. */
static volt_status mc_commit(mc *m) {
    struct mc_job *j = &m->job;
    if (!j->commit) return VOLT_OK;
    volt_status st = VOLT_OK;
    volt_status each[2] = { VOLT_OK, VOLT_OK };
    char first[VOLT_CB_PATH_MAX + 1024] = "";   /* the first failure's message is the one reported */
    for (int i = 0; i < 2; i++) {
        const char *p = i ? j->last : j->topk;
        if (!p[0]) continue;
        volt_status c = volt_trainer_snapshot_commit(m->t, m->snap, p, j->st, j->err);
        each[i] = c;
        if (c < 0 && st >= 0) {
            st = c;
            snprintf(first, sizeof first, "%s", volt_trainer_errmsg(m->t));
        }
    }
    if (st < 0) volt_trainer_fail(m->t, st, "%s", first);
    volt__mc_settle(m, each[0] < 0, each[1] < 0);
    for (int i = 0; i < 2; i++)
        if (each[i] >= 0 && j->remove[i]) volt__mc_remove_file(j->remove[i]);
    j->reported = true;   /* this rank's write error, if any, is in the commit's */
    volt__mc_job_free(j);
    return st;
}

/* Wait for the write in flight; its failure, once, as this hook's error. */
volt_status volt__mc_join(mc *m) {
    volt__mc_wait(m);
    if (m->job.commit) return mc_commit(m);
    if (m->job.st < 0 && !m->job.reported) {
        m->job.reported = true;
        return volt_trainer_fail(m->t, m->job.st, "ModelCheckpoint: the background save failed: %s",
                                 m->job.err[0] ? m->job.err : volt_status_str(m->job.st));
    }
    return VOLT_OK;
}

/* The save point's files from a snapshot, written by the background thread. Sharded: the
 * thread writes this rank's shards; the next join commits them (mc_commit) and removes what
 * they replace, and "best" stays undo.best until then. */
volt_status volt__mc_save_async(mc *m, const char *topk_path, const char *last_path, char **evicted, char **prev_last) {
    volt_status st = volt_trainer_snapshot_checkpoint_ex(m->t, topk_path[0] ? topk_path : last_path, m->save_flags, &m->snap);
    if (st < 0) return st;
    struct mc_job *j = &m->job;
    volt__mc_job_free(j);
    memset(j, 0, sizeof *j);
    snprintf(j->topk, sizeof j->topk, "%s", topk_path);
    snprintf(j->last, sizeof j->last, "%s", last_path);
    j->commit = volt_ckpt_snapshot_sharded(m->snap);
    j->link_last = volt__mc_can_link(m) && !j->commit;
    char **gone[2] = { evicted, prev_last };
    const char *now[2] = { topk_path, last_path };
    for (int i = 0; i < 2; i++)
        if (*gone[i] && strcmp(*gone[i], now[i]) != 0 && volt__mc_may_remove(m, *gone[i])) {
            j->remove[i] = *gone[i];
            *gone[i] = NULL;
        }
    if (pthread_create(&m->th, NULL, mc_job_run, m) == 0) m->running = true;
    else mc_job_run(m);   /* no thread: write now (settled by the next join) */
    return VOLT_OK;
}
