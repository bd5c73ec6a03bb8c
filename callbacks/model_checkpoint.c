/* ModelCheckpoint: Lightning's callback of that name, written against the public API only.
 *
 * Save points: after each validation (not the sanity check) when validation runs and
 * save_on_train_epoch_end is false; at train epoch end when it is true or no validation has
 * run in this fit; every_n_train_steps > 0: at train batch end when global_step % n == 0;
 * train_time_interval > 0: at the first train batch end that ends an optimizer step once
 * that much time (CLOCK_MONOTONIC) has passed since train start or the last save it
 * triggered, rank 0's clock deciding for every rank (volt_trainer_broadcast_bool: one
 * collective per optimizer step; Lightning's does the same at every batch). That time is not
 * checkpointed: a resumed run counts from its own train start, as Lightning's. With either
 * trigger the epoch-end and validation save points write only last (save_last). Never
 * twice at the same global step. At a save point the top-k file is saved (if the
 * score enters the top-k) and then last.safetensors (hard link to the file just saved when
 * possible, else a second save). The bookkeeping (top-k list, best, last) is updated
 * BEFORE the save so the checkpoint's own state includes it: resuming from it continues
 * exactly; a file that could not be written puts its part back (volt__mc_settle). Every
 * rank runs the same logic and calls volt_trainer_save_checkpoint (which is collective for
 * sharded strategies); only rank 0 creates folders, links and deletes. The folder is named in
 * on_fit_start and checked before the first batch (trainer/write_check.c), so a dirpath that
 * cannot be written fails the fit there, not at the first save.
 *
 * async_save: at a save point the state is snapshotted into host memory
 * (volt_trainer_snapshot_checkpoint) and one background thread writes it — the top-k file,
 * last (a link or a second write of the same snapshot), then the removals — while training
 * goes on. One write in flight: the next save point, fit start and end, test start, the
 * "best"/"last" resolver and destroy wait for it first. A failed write is reported by the
 * next of those that returns a status (fit end at the latest); the files it would have
 * replaced are removed only after it succeeded. Sharded strategies: every rank's thread writes
 * its shard files, and the next save point, fit start or end or test start (collective, as
 * the save points are) commits them (volt_trainer_snapshot_commit: rank 0 writes the index)
 * and only then removes what they replace; until then "best" resolves to the best committed
 * checkpoint, and destroy without a commit discards the shard files. The background writes,
 * the commit and the settling are in model_checkpoint_async.c; the state and "best"/"last" in
 * model_checkpoint_state.c. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "volt/trainer.h"
#include "callbacks/model_checkpoint_internal.h"

bool volt__mc_file_exists(const char *p) { return p && access(p, F_OK) == 0; }

void volt__mc_set_str(char **dst, const char *src) {
    char *c = src ? strdup(src) : NULL;
    free(*dst);
    *dst = c;
}

const char *volt__mc_mode_str(volt_mode m) { return m == VOLT_MAX ? "max" : "min"; }

/* ---- metrics --------------------------------------------------------------------------------- */

static bool mc_lookup(void *ctx, const char *name, double *v, bool *is_int) {
    const volt_trainer *t = ctx;
    if (volt_trainer_metric(t, name, v)) {
        *is_int = false;
        if (strcmp(name, "epoch") == 0 || strcmp(name, "step") == 0) *is_int = true;
        return true;
    }
    if (strcmp(name, "epoch") == 0) { *v = (double)volt_trainer_current_epoch(t); *is_int = true; return true; }
    if (strcmp(name, "step") == 0) { *v = (double)volt_trainer_global_step(t); *is_int = true; return true; }
    return false;
}

/* "['train_loss', 'val_acc', 'epoch', 'step']" — what the monitor could have been (the file
 * name template's epoch and step too). */
static void available_metrics(const volt_trainer *t, char *out, size_t n) {
    char names[1024];
    volt_trainer_metric_names(t, names, sizeof names);
    snprintf(out, n, "[%s%s'epoch', 'step']", names, names[0] ? ", " : "");
}

/* ---- paths ---------------------------------------------------------------------------------- */

static void mc_reconcile(mc *m);

/* The folder the next save point writes to: dirpath once resolved, else the user's dirpath or
 * <log_dir>/checkpoints (<default_root_dir>/checkpoints without a logger). */
static void mc_dir_name(const mc *m, char *buf, size_t n) {
    if (m->dirpath) {
        snprintf(buf, n, "%s", m->dirpath);
        return;
    }
    if (m->dirpath_user) {
        snprintf(buf, n, "%s", m->dirpath_user);
    } else {
        const char *ld = volt_trainer_log_dir(m->t);
        const volt_trainer_config *cfg = volt_trainer_get_config(m->t);
        const char *root = cfg && cfg->default_root_dir ? cfg->default_root_dir : ".";
        snprintf(buf, n, "%s/checkpoints", ld ? ld : root);
    }
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/') buf[--len] = 0;
}

static volt_status mc_resolve_dir(mc *m) {
    if (m->dirpath) {
        if (m->pending) mc_reconcile(m);
        return VOLT_OK;
    }
    char buf[VOLT_CB_PATH_MAX];
    mc_dir_name(m, buf, sizeof buf);
    m->dirpath = strdup(buf);
    if (!m->dirpath) return VOLT_ERR_NOMEM;
    if (m->pending) mc_reconcile(m);
    return VOLT_OK;
}

/* dirpath/<name>[-vN].safetensors, the version counter skipping files that exist unless
 * the file is `reuse` (the one being replaced); without the counter, <name> is overwritten. */
static volt_status mc_unique_path(mc *m, const char *tmpl, const char *reuse, char *out, size_t n) {
    char name[VOLT_CB_PATH_MAX], err[512];
    for (int ver = 0; ver < 100000; ver++) {
        volt_status st;
        if (tmpl) {
            st = volt__cb_format_name(tmpl, mc_lookup, m->t, ver, m->insert_names, name, sizeof name, err, sizeof err);
        } else {                     /* "last" */
            if (ver) snprintf(name, sizeof name, "last-v%d", ver);
            else snprintf(name, sizeof name, "last");
            st = VOLT_OK;
        }
        if (st != VOLT_OK) return volt_trainer_fail(m->t, st, "ModelCheckpoint: %s", err);
        if (snprintf(out, n, "%s/%s" MC_EXT, m->dirpath, name) >= (int)n)
            return volt_trainer_fail(m->t, VOLT_ERR_INVALID_ARG, "ModelCheckpoint: path too long in '%s'", m->dirpath);
        if (!m->version_counter || !volt__mc_file_exists(out) || (reuse && strcmp(out, reuse) == 0)) return VOLT_OK;
    }
    return volt_trainer_fail(m->t, VOLT_ERR_IO, "ModelCheckpoint: no free file name for '%s'", out);
}

/* Is p a checkpoint of this callback's: a file "<name>.safetensors" (no hidden name, not a
 * symbolic link) in dirpath or a folder under it (a filename template may name a subfolder),
 * the folders compared after realpath (so "..", links out of dirpath and other spellings of
 * another folder never pass)? Paths in a checkpoint's state are only ever used after this test. */
static bool mc_owned(const mc *m, const char *p) {
    if (!p || !m->dirpath) return false;
    const char *slash = strrchr(p, '/'), *base = slash ? slash + 1 : p;
    const size_t bl = strlen(base), el = strlen(MC_EXT);
    if (bl <= el || base[0] == '.' || strcmp(base + bl - el, MC_EXT) != 0) return false;
    char parent[VOLT_CB_PATH_MAX], rp[PATH_MAX], rd[PATH_MAX];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == p) snprintf(parent, sizeof parent, "/");
    else if (snprintf(parent, sizeof parent, "%.*s", (int)(slash - p), p) >= (int)sizeof parent) return false;
    if (!realpath(parent, rp) || !realpath(m->dirpath, rd)) return false;
    const size_t dl = strlen(rd);
    const bool under = strncmp(rp, rd, dl) == 0 && (rp[dl] == 0 || rp[dl] == '/' || (dl == 1 && rd[0] == '/'));
    if (!under) return false;
    struct stat sb;
    if (lstat(p, &sb) == 0 && !S_ISREG(sb.st_mode)) return false;
    return true;
}

/* Check bookkeeping restored from a checkpoint against this run's dirpath: from another
 * folder only best_model_path is kept (as Lightning; it is never deleted), from this one
 * only entries that pass mc_owned. */
static void mc_reconcile(mc *m) {
    m->pending = false;
    const bool g0 = volt_trainer_is_global_zero(m->t);
    char rd[PATH_MAX], rc[PATH_MAX];
    const bool same = m->ckpt_dir && realpath(m->dirpath, rd) && realpath(m->ckpt_dir, rc) && strcmp(rd, rc) == 0;
    if (!same) {
        if (m->dirpath_user && m->ckpt_dir && g0)
            fprintf(stderr, "volt: warning: ModelCheckpoint: the dirpath has changed from '%s' to '%s', "
                    "so the best score, the top-k and the last path are not restored; only "
                    "best_model_path is\n", m->ckpt_dir, m->dirpath);
        volt__cb_topk_clear(&m->topk);
        volt__mc_set_str(&m->last_path, NULL);
        m->best_score = NAN;
        return;
    }
    for (int i = 0; i < m->topk.n;) {
        if (mc_owned(m, m->topk.e[i].path)) { i++; continue; }
        if (g0) fprintf(stderr, "volt: warning: ModelCheckpoint: the checkpoint's top-k entry '%s' is not a checkpoint "
                        "file in '%s'; dropped (it will not be touched)\n", m->topk.e[i].path, m->dirpath);
        free(volt__cb_topk_take(&m->topk, i));
    }
    if (m->last_path && !mc_owned(m, m->last_path)) {
        if (g0) fprintf(stderr, "volt: warning: ModelCheckpoint: the checkpoint's last_model_path '%s' is not a checkpoint "
                        "file in '%s'; dropped (it will not be touched)\n", m->last_path, m->dirpath);
        volt__mc_set_str(&m->last_path, NULL);
    }
}

/* Remove a file that fell out of the bookkeeping (rank 0; only a checkpoint file of this
 * callback's in dirpath, never a file still referenced). */
bool volt__mc_may_remove(mc *m, const char *p) {
    if (!p || !volt_trainer_is_global_zero(m->t) || !mc_owned(m, p)) return false;
    if (volt__cb_topk_find(&m->topk, p) >= 0) return false;
    if (m->last_path && strcmp(m->last_path, p) == 0) return false;
    if (m->best_path && strcmp(m->best_path, p) == 0) return false;
    return true;
}

void volt__mc_remove_file(const char *p) {
    if (volt_checkpoint_remove(p) != VOLT_OK)   /* with its shard folder under sharded strategies */
        fprintf(stderr, "volt: ModelCheckpoint: cannot remove '%s': %s\n", p, strerror(errno));
}

static void mc_remove(mc *m, const char *p) {
    if (volt__mc_may_remove(m, p)) volt__mc_remove_file(p);
}

/* Several ranks: every rank reaches each save point, but rank 0 alone creates the folders and
 * writes unsharded checkpoints (a sharded save agrees by itself, once it started on every rank).
 * A boolean all-reduce (Lightning's reduce_boolean_decision) tells the others whether what could
 * fail on rank 0 alone went through, so a save that fails (a full disk) ends every rank at once
 * instead of leaving the others in their next collective until the comm's timeout: two per save
 * point (mc_save_point: before the writes, after them), one at fit's end. st: this rank's
 * result. */
static volt_status mc_agree(mc *m, volt_status st, const char *what) {
    volt_trainer *t = m->t;
    if (volt_trainer_world_size(t) <= 1) return st;
    bool all_ok = st >= 0;
    volt_status cs = volt_trainer_reduce_boolean_decision(t, st >= 0, true, &all_ok);
    if (st < 0) return st;   /* this rank's own error stays the one reported */
    if (cs < 0) return cs;
    if (!all_ok)
        return volt_trainer_fail(t, VOLT_ERR_IO, "ModelCheckpoint: %s at step %lld failed on another rank (its log has the "
                                 "reason)", what, (long long)volt_trainer_global_step(t));
    return VOLT_OK;
}

/* The file's folder, made by rank 0 (with its parents); the other ranks learn whether it
 * could at the save point's agreement before the writes (a sharded save is collective, and
 * would wait for rank 0 until the timeout). */
static volt_status mc_make_dir(mc *m, const char *path) {
    volt_status st = VOLT_OK;
    char dir[VOLT_CB_PATH_MAX], err[VOLT_CB_PATH_MAX + 128];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    if (volt_trainer_is_global_zero(m->t) && slash && *dir && (st = volt__mkdirs(dir, err, sizeof err)) != VOLT_OK)
        st = volt_trainer_fail(m->t, st, "ModelCheckpoint: %s", err);
    return st;
}

static volt_status mc_save(mc *m, const char *path) { return volt_trainer_save_checkpoint_ex(m->t, path, m->save_flags); }

/* last.safetensors as a hard link to the file just written (same bytes, same state), made
 * atomically; false when the file system refuses (then the caller saves again). */
bool volt__mc_link_last(const char *src, const char *last) {
    char tmp[VOLT_CB_PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.link.tmp", last) >= (int)sizeof tmp) return false;
    unlink(tmp);
    if (link(src, tmp) != 0) return false;
    if (rename(tmp, last) != 0) { unlink(tmp); return false; }
    return true;
}

bool volt__mc_can_link(mc *m) { return volt_trainer_world_size(m->t) == 1 && volt_trainer_is_global_zero(m->t); }

/* ---- the save point ------------------------------------------------------------------------------- */

/* No save point now (Lightning's _should_skip_saving_checkpoint): the same on every rank. */
static bool mc_skip(const mc *m) {
    const volt_trainer_config *cfg = volt_trainer_get_config(m->t);
    return (cfg && cfg->fast_dev_run > 0) || volt_trainer_state_fn(m->t) != VOLT_FN_FIT ||
           volt_trainer_sanity_checking(m->t) || m->last_step_saved == volt_trainer_global_step(m->t);
}

/* A save point's files: what it writes and what they replace (the bookkeeping already
 * points at them; volt__mc_settle puts it back). */
typedef struct mc_plan {
    char topk[VOLT_CB_PATH_MAX], last[VOLT_CB_PATH_MAX];
    char *evicted, *prev_last;
} mc_plan;

static volt_status mc_plan_save(mc *m, bool topk_allowed, mc_plan *p);
static volt_status mc_write(mc *m, mc_plan *p);

/* Two agreements, whatever the save point writes: one before the writes (the background save
 * joined, the bookkeeping, the folders rank 0 made for the top-k file and for last), one after
 * them (rank 0's writes, a background write's start). Every rank takes each, in this order, or
 * none: a failure agreed before the writes stops every rank there, nothing written. */
static volt_status mc_save_point(mc *m, bool topk_allowed) {
    if (mc_skip(m)) return VOLT_OK;
    mc_plan p = { 0 };
    volt_status st = volt__mc_join(m);   /* the previous save point settles first (its undo) */
    if (st >= 0) st = mc_plan_save(m, topk_allowed, &p);
    st = mc_agree(m, st, "the background save, the bookkeeping or the folders before the save point");
    if (st >= 0) st = mc_agree(m, mc_write(m, &p), "the save");
    else if (p.topk[0] || p.last[0]) volt__mc_settle(m, true, true);   /* nothing was written */
    free(p.evicted);
    free(p.prev_last);
    return st;
}

/* The files of this save point, the bookkeeping updated for them, their folders made (rank 0);
 * no collective. On an error nothing is left planned. */
static volt_status mc_plan_save(mc *m, bool topk_allowed, mc_plan *p) {
    volt_trainer *t = m->t;
    int64_t gs = volt_trainer_global_step(t);
    VOLT_TRY(mc_resolve_dir(m));
    const char *tmpl = m->filename ? m->filename : "{epoch}-{step}";
    struct mc_undo *u = &m->undo;   /* the previous save point's is settled (mc_join) */
    volt__mc_undo_free(u);
    u->best = m->best_path ? strdup(m->best_path) : NULL;
    u->best_score = m->best_score;

    char *topk_path = p->topk, *last_path = p->last;   /* "" until planned */
    char *evicted = NULL, *prev_last = NULL;
    volt_status st = VOLT_OK;
    if (topk_allowed && m->save_top_k != 0) {
        double cur = NAN;
        bool is_int, save = false;
        int out = -1;   /* the entry the new one replaces */
        if (m->monitor) {
            if (!mc_lookup(t, m->monitor, &cur, &is_int)) {
                char avail[2048];
                available_metrics(t, avail, sizeof avail);
                if (m->val_has_run)
                    return volt_trainer_fail(t, VOLT_ERR_NOT_FOUND,
                        "ModelCheckpoint(monitor='%s') could not find the monitored key in the returned "
                        "metrics: %s. HINT: did you call volt_log(s, \"%s\", value, ...) in the module?",
                        m->monitor, avail, m->monitor);
                if (!m->warned_missing && volt_trainer_is_global_zero(t))
                    fprintf(stderr, "volt: warning: ModelCheckpoint(monitor='%s') could not find the "
                            "monitored key in the metrics: %s (no validation has run yet); not saving a top-k "
                            "checkpoint at step %lld\n", m->monitor, avail, (long long)gs);
                m->warned_missing = true;
            } else if (volt__cb_topk_should_save(&m->topk, m->save_top_k, m->mode, cur)) {
                save = true;
                cur = volt__cb_topk_sanitize(cur, m->mode);
                if (m->save_top_k > 0 && m->topk.n >= m->save_top_k) out = volt__cb_topk_worst(&m->topk, m->mode);
            } else if (m->verbose && volt_trainer_is_global_zero(t)) {
                fprintf(stderr, "Epoch %lld, global step %lld: '%s' was not in top %d\n", (long long)volt_trainer_current_epoch(t),
                        (long long)gs, m->monitor, m->save_top_k);
            }
        } else {
            save = true;
            if (m->save_top_k > 0 && m->topk.n >= m->save_top_k) out = 0;   /* the oldest */
        }
        if (save) {
            if (out >= 0) {
                u->evicted_score = m->topk.e[out].score;
                u->evicted_at = out;
                evicted = volt__cb_topk_take(&m->topk, out);
                u->evicted = evicted ? strdup(evicted) : NULL;
            }
            u->topk = true;
            st = mc_unique_path(m, tmpl, evicted, topk_path, sizeof p->topk);
            /* the name of a kept file again (enable_version_counter false, a template that repeats):
             * the file is overwritten, so its entry goes and the new one holds its path (Lightning
             * keys the top-k by path); "best" is then recomputed without the old score */
            const int same = st == VOLT_OK ? volt__cb_topk_find(&m->topk, topk_path) : -1;
            if (same >= 0) {
                u->replaced_score = m->topk.e[same].score;
                u->replaced_at = same;
                u->replaced = volt__cb_topk_take(&m->topk, same);
            }
            if (st == VOLT_OK) st = volt__cb_topk_push(&m->topk, topk_path, cur);
            if (st == VOLT_OK) {
                u->pushed = strdup(topk_path);
                int b = m->monitor ? volt__cb_topk_best(&m->topk, m->mode) : m->topk.n - 1;
                volt__mc_set_str(&m->best_path, m->topk.e[b].path);
                m->best_score = m->topk.e[b].score;
                if (m->verbose && volt_trainer_is_global_zero(t)) {   /* Lightning's _update_best_and_save words */
                    const long long ep = (long long)volt_trainer_current_epoch(t);
                    if (m->monitor)
                        fprintf(stderr, "Epoch %lld, global step %lld: '%s' reached %.5f (best %.5f), saving model to '%s' as top %d\n",
                                ep, (long long)gs, m->monitor, cur, m->best_score, topk_path,
                                m->save_top_k < 0 ? m->topk.n : m->save_top_k);
                    else
                        fprintf(stderr, "Epoch %lld, global step %lld: saving model to '%s'\n", ep, (long long)gs, topk_path);
                }
            } else {
                topk_path[0] = 0;
            }
        }
    }
    if (st == VOLT_OK && m->save_last) {
        st = mc_unique_path(m, NULL, m->last_path, last_path, sizeof p->last);
        char *now = st == VOLT_OK ? strdup(last_path) : NULL;
        if (st == VOLT_OK && !now) st = VOLT_ERR_NOMEM;
        if (st == VOLT_OK) {
            u->last = m->last_path ? strdup(m->last_path) : NULL;
            u->last_set = true;
            prev_last = m->last_path;
            m->last_path = now;
        } else {
            last_path[0] = 0;
        }
    }

    p->evicted = evicted;
    p->prev_last = prev_last;
    if (st == VOLT_OK && topk_path[0]) st = mc_make_dir(m, topk_path);
    if (st == VOLT_OK && last_path[0]) st = mc_make_dir(m, last_path);
    if (st != VOLT_OK || !(topk_path[0] || last_path[0])) {
        volt__mc_settle(m, true, true);   /* nothing will be written */
        topk_path[0] = last_path[0] = 0;
    }
    return st;
}

/* The planned files written (sync), or their snapshot taken and handed to the background
 * thread (async_save); the bookkeeping settled by what was written. */
static volt_status mc_write(mc *m, mc_plan *p) {
    const char *topk_path = p->topk, *last_path = p->last;
    if (!topk_path[0] && !last_path[0]) return VOLT_OK;
    volt_status st;
    m->last_step_saved = volt_trainer_global_step(m->t);
    if (m->async_save) {
        st = volt__mc_save_async(m, topk_path, last_path, &p->evicted, &p->prev_last);
        if (st < 0) volt__mc_settle(m, true, true);   /* nothing was written */
    } else {
        volt_status tst = topk_path[0] ? mc_save(m, topk_path) : VOLT_OK, lst = VOLT_OK;
        if (last_path[0])
            lst = tst < 0 ? tst
                : topk_path[0] && volt__mc_can_link(m) && volt__mc_link_last(topk_path, last_path) ? VOLT_OK
                : mc_save(m, last_path);
        volt__mc_settle(m, tst < 0, lst < 0);
        if (tst >= 0 && p->evicted && strcmp(p->evicted, topk_path) != 0) mc_remove(m, p->evicted);
        if (lst >= 0 && p->prev_last && strcmp(p->prev_last, last_path) != 0) mc_remove(m, p->prev_last);
        st = tst < 0 ? tst : lst;
    }
    return st;
}

static bool mc_epoch_topk(const mc *m) {
    if (m->every_n_train_steps > 0 || m->train_time_interval > 0 || m->every_n_epochs < 1) return false;
    return (volt_trainer_current_epoch(m->t) + 1) % m->every_n_epochs == 0;
}

/* ---- hooks ------------------------------------------------------------------------------------------ */

/* Validation inside fit runs with stage VALIDATE; volt_trainer_state_fn says it is fit's. A fresh fit
 * (not a resume) starts counting steps from 0 again. The folder the saves will write is checked
 * before the first batch (volt_trainer_check_writable: rank 0 creates it and writes a test file
 * there, every rank too when the checkpoints are sharded), unless this fit can save nothing. The
 * folder is named, not fixed: dirpath is still resolved at the first save point. */
static volt_status mc_on_fit_start(void *self, volt_trainer *t) {
    mc *m = self;
    VOLT_TRY(volt__mc_join(m));
    if (!m->restored) m->last_step_saved = 0;
    m->restored = false;
    m->val_has_run = m->val_ran_epoch = m->warned_missing = false;
    const volt_trainer_config *cfg = volt_trainer_get_config(t);
    if ((cfg && cfg->fast_dev_run > 0) || (m->save_top_k == 0 && !m->save_last)) return VOLT_OK;
    char dir[VOLT_CB_PATH_MAX];
    mc_dir_name(m, dir, sizeof dir);
    return volt_trainer_check_writable(t, "ModelCheckpoint", "dirpath", dir, VOLT_WRITES_CHECKPOINTS);
}

static volt_status mc_on_fit_end(void *self, volt_trainer *t) {
    mc *m = self;
    volt_status st = mc_agree(m, volt__mc_join(m), "the last background save");   /* every rank learns it */
    volt_ckpt_snapshot_destroy(m->snap);   /* its host memory (the whole state) is not kept past fit */
    m->snap = NULL;
    return st;
}

/* An interruption stops every rank at the same step (docs/TRAINER.md, "Interrupting a run"):
 * the save in flight is finished and, when sharded, committed (collective) as at fit's end,
 * so it is not lost (one that came after on_fit_end finds nothing in flight: its join is a
 * no-op, on every rank alike). After other errors a rank may be gone: destroy discards it. */
static void mc_on_exception(void *self, volt_trainer *t, volt_status st) {
    if (st != VOLT_ERR_INTERRUPTED || volt_trainer_state_fn(t) != VOLT_FN_FIT) return;
    char why[1024];
    snprintf(why, sizeof why, "%s", volt_trainer_errmsg(t));
    if (mc_on_fit_end(self, t) < 0 && volt_trainer_is_global_zero(t))
        fprintf(stderr, "volt: ModelCheckpoint: %s\n", volt_trainer_errmsg(t));
    volt_trainer_fail(t, st, "%s", why);
}

static volt_status mc_on_test_start(void *self, volt_trainer *t) { return volt__mc_join(self); }

static double mc_now(const mc *m) {
    if (m->clock) return m->clock(m->clock_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* train_time_interval counts from here (Lightning's on_train_start; after the sanity check,
 * and again in a resumed run). */
static volt_status mc_on_train_start(void *self, volt_trainer *t) {
    mc *m = self;
    m->last_time_checked = mc_now(m);
    m->step_seen = volt_trainer_global_step(t);
    return VOLT_OK;
}

static volt_status mc_on_train_epoch_start(void *self, volt_trainer *t) {
    ((mc *)self)->val_ran_epoch = false;
    return VOLT_OK;
}

static volt_status mc_on_validation_end(void *self, volt_trainer *t) {
    mc *m = self;
    if (volt_trainer_sanity_checking(t) || volt_trainer_state_fn(t) != VOLT_FN_FIT) return VOLT_OK;
    m->val_ran_epoch = m->val_has_run = true;
    if (m->save_on_train_epoch_end) return VOLT_OK;
    return mc_save_point(m, mc_epoch_topk(m));
}

static volt_status mc_on_train_epoch_end(void *self, volt_trainer *t) {
    mc *m = self;
    if (!m->save_on_train_epoch_end && (m->val_ran_epoch || m->val_has_run)) return VOLT_OK;
    return mc_save_point(m, mc_epoch_topk(m));
}

/* Lightning's on_train_batch_end: the step trigger, or the time trigger with rank 0's clock
 * deciding for all (ranks' clocks differ; a rank that saved alone would leave the others
 * waiting in a sharded save). The time is looked at only where an optimizer step ended
 * (global_step moved), so no checkpoint holds half-accumulated grads (docs/TRAINER.md;
 * Lightning looks at every batch end); the broadcast runs there, on every rank alike. */
static volt_status mc_on_train_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    mc *m = self;
    const int64_t gs = volt_trainer_global_step(t);
    const bool stepped = gs != m->step_seen;
    m->step_seen = gs;
    if (mc_skip(m)) return VOLT_OK;
    const bool skip_batch = m->every_n_train_steps <= 0 || gs % m->every_n_train_steps != 0;
    bool skip_time = true;
    double now = 0;
    if (m->train_time_interval > 0 && stepped) {
        now = mc_now(m);
        const bool mine = isnan(m->last_time_checked) || now - m->last_time_checked < m->train_time_interval;
        VOLT_TRY(volt_trainer_broadcast_bool(t, mine, &skip_time));
    }
    if (skip_batch && skip_time) return VOLT_OK;
    if (!skip_time) m->last_time_checked = now;
    return mc_save_point(m, true);
}

static void mc_destroy(void *self) {
    mc *m = self;
    if (!m) return;
    volt__mc_wait(m);
    if (m->job.st < 0 && !m->job.reported)
        fprintf(stderr, "volt: ModelCheckpoint: the background save failed: %s\n", m->job.err);
    if (m->job.commit)   /* never committed (a fit that failed): no collective here, the shards go */
        for (int i = 0; i < 2; i++) volt_ckpt_snapshot_discard(m->snap, i ? m->job.last : m->job.topk);
    volt__mc_job_free(&m->job);
    volt__mc_undo_free(&m->undo);
    volt_ckpt_snapshot_destroy(m->snap);
    free(m->dirpath_user);
    free(m->filename);
    free(m->monitor);
    free(m->dirpath);
    free(m->ckpt_dir);
    free(m->best_path);
    free(m->last_path);
    volt__cb_topk_clear(&m->topk);
    free(m);
}

/* ---- creation -------------------------------------------------------------------------------------------- */

/* The name is the state key; several ModelCheckpoints are told apart by the trainer by the
 * order they were added in ("ModelCheckpoint#1"), as their states are. */
static const volt_callback_ops mc_ops = {
    .version = VOLT_CALLBACK_OPS_VERSION, .name = "ModelCheckpoint",
    .on_fit_start = mc_on_fit_start,
    .on_fit_end = mc_on_fit_end,
    .on_exception = mc_on_exception,
    .on_test_start = mc_on_test_start,
    .on_train_start = mc_on_train_start,
    .on_train_epoch_start = mc_on_train_epoch_start,
    .on_train_epoch_end = mc_on_train_epoch_end,
    .on_train_batch_end = mc_on_train_batch_end,
    .on_validation_end = mc_on_validation_end,
    .state_dict = volt__mc_state_dict,
    .load_state_dict = volt__mc_load_state_dict,
    .destroy = mc_destroy,
};

void volt_checkpoint_config_init(volt_checkpoint_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_CHECKPOINT_CONFIG_VERSION;
    cfg->mode = VOLT_MIN;
    cfg->save_top_k = 1;
    cfg->every_n_epochs = 1;
    cfg->auto_insert_metric_name = true;
    cfg->enable_version_counter = true;
}

volt_status volt_add_model_checkpoint(volt_trainer *t, const volt_checkpoint_config *cfg) {
    return volt__add_model_checkpoint_clock(t, cfg, NULL, NULL);
}

volt_status volt__add_model_checkpoint_clock(volt_trainer *t, const volt_checkpoint_config *cfg, volt_cb_clock_fn now,
                                             void *ctx) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    volt_checkpoint_config def;
    if (!cfg) { volt_checkpoint_config_init(&def); cfg = &def; }
    if (!VOLT_VERSION_OK(cfg->version, VOLT_CHECKPOINT_CONFIG_VERSION))
        return volt_trainer_fail(t, VOLT_ERR_VERSION, "volt_checkpoint_config: version %u, this library knows 1..%u "
                                 "(call volt_checkpoint_config_init)", cfg->version, VOLT_CHECKPOINT_CONFIG_VERSION);
    if (cfg->save_top_k < -1)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ModelCheckpoint: save_top_k must be >= -1, got %d", cfg->save_top_k);
    if (cfg->every_n_epochs < 0 || cfg->every_n_train_steps < 0)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ModelCheckpoint: every_n_epochs and every_n_train_steps must be >= 0");
    const double tti = cfg->version >= 4 ? cfg->train_time_interval : 0;
    if (!(tti >= 0) || isinf(tti))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ModelCheckpoint: train_time_interval must be a finite number "
                                 "of seconds >= 0 (0 = off), got %g", tti);
    /* Lightning's rule: the triggers are mutually exclusive. every_n_epochs = 1 is the default
     * (Lightning's "unset"), so only an every_n_epochs > 1 is a choice that conflicts. */
    if ((cfg->every_n_train_steps > 0) + (cfg->every_n_epochs > 1) + (tti > 0) > 1)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ModelCheckpoint: combination of parameters every_n_train_steps=%lld, "
                                 "every_n_epochs=%lld and train_time_interval=%g s should be mutually exclusive (give one "
                                 "trigger; every_n_epochs=1, the default, counts as unset)",
                                 (long long)cfg->every_n_train_steps, (long long)cfg->every_n_epochs, tti);
    if (cfg->mode != VOLT_MIN && cfg->mode != VOLT_MAX)
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ModelCheckpoint: mode must be VOLT_MIN or VOLT_MAX");
    if (cfg->monitor && !*cfg->monitor)   /* failed only after the first epoch, finding no metric "" */
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ModelCheckpoint: monitor is \"\": name a logged metric (e.g. "
                                 "\"val_loss\"), or leave it NULL to keep the latest checkpoints");
    if (cfg->filename && !volt__path_stays_under(cfg->filename))
        return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ModelCheckpoint: filename \"%s\" would put the checkpoints outside "
                                 "dirpath (an absolute path or a '..'): name a file under it", cfg->filename);
    if (cfg->filename) {             /* reject a bad template now rather than at the first save */
        char tmp[VOLT_CB_PATH_MAX], err[512];
        if (volt__cb_format_name(cfg->filename, NULL, NULL, 0, true, tmp, sizeof tmp, err, sizeof err) != VOLT_OK)
            return volt_trainer_fail(t, VOLT_ERR_INVALID_ARG, "ModelCheckpoint: %s", err);
    }
    mc *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->t = t;
    m->mode = cfg->mode;
    m->save_top_k = cfg->save_top_k;
    m->save_last = cfg->save_last;
    m->save_on_train_epoch_end = cfg->save_on_train_epoch_end;
    m->async_save = cfg->version >= 2 && cfg->async_save;
    m->save_flags = cfg->version >= 3 && cfg->save_weights_only ? VOLT_CKPT_WEIGHTS_ONLY : 0;
    m->insert_names = cfg->version < 3 || cfg->auto_insert_metric_name;
    m->version_counter = cfg->version < 3 || cfg->enable_version_counter;
    m->verbose = cfg->version >= 5 && cfg->verbose;
    m->every_n_epochs = cfg->every_n_epochs;
    m->every_n_train_steps = cfg->every_n_train_steps;
    m->train_time_interval = tti;
    m->last_time_checked = NAN;
    m->clock = now;
    m->clock_ctx = ctx;
    m->best_score = NAN;
    m->last_step_saved = 0;          /* as Lightning: nothing is saved at global step 0 */
    /* Lightning's readings of "": the current folder for dirpath (not "/"), the default name for
     * filename (not a hidden ".safetensors") */
    volt__mc_set_str(&m->dirpath_user, cfg->dirpath && !*cfg->dirpath ? "." : cfg->dirpath);
    volt__mc_set_str(&m->filename, cfg->filename && *cfg->filename ? cfg->filename : NULL);
    volt__mc_set_str(&m->monitor, cfg->monitor);
    if ((cfg->dirpath && !m->dirpath_user) || (cfg->filename && *cfg->filename && !m->filename) || (cfg->monitor && !m->monitor)) {
        mc_destroy(m);
        return VOLT_ERR_NOMEM;
    }
    if (m->dirpath_user) {
        size_t len = strlen(m->dirpath_user);
        while (len > 1 && m->dirpath_user[len - 1] == '/') m->dirpath_user[--len] = 0;
    }
    m->resolver = (volt_ckpt_resolver){ .version = VOLT_CKPT_RESOLVER_VERSION, .best = volt__mc_best, .best_score = volt__mc_best_score, .last = volt__mc_last, .self = m };
    VOLT_TRY(volt_trainer_add_callback(t, &mc_ops, m));
    if (!volt_trainer_ckpt_resolver(t)) volt_trainer_set_ckpt_resolver(t, &m->resolver);
    return VOLT_OK;
}
