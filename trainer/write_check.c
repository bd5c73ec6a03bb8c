/* The folders a fit will write, checked at its start (docs/CALLBACKS.md, "Folders checked at fit
 * start"). A checkpoint folder that cannot be written used to fail the fit at its first save, an
 * epoch (hours) later; now every saving callback names its folder in on_fit_start
 * (volt_trainer_check_writable) and, once every on_fit_start has run and before the sanity check
 * and the first batch, fit checks them:
 *
 * - rank 0 creates each folder (mkdir -p, as the save would) and creates and removes a hidden,
 *   uniquely named file in it (O_EXCL: it never opens a file someone else made, nor follows a
 *   link; nothing is left behind, nothing outside the folder is touched). Rank 0 writes every
 *   unsharded checkpoint and every log.
 * - the ranks agree (volt__agree_status: every rank's flag, then the lowest failing rank's
 *   message), so every rank fails with the same words, a failed on_fit_start of any rank's
 *   included (a logger's folder rank 0 alone could not make no longer leaves the others waiting
 *   in their first collective until the comm's timeout).
 * - under a sharding strategy (ZeRO, FSDP: checkpoint_shards.c) every rank writes its own shard
 *   file into the checkpoint's shard folder, inside the callback's folder: each other rank then
 *   probes the checkpoint folders rank 0 made, and the ranks agree again. A rank that does not
 *   see the folder (ranks that do not share the file system) fails here, not at the first save.
 *
 * A folder that is fine at start and fails later (a full disk, permissions changed) still fails
 * at the save, as before (docs/RELIABILITY.md). validate / test / predict write no checkpoint and
 * check nothing: folders can be named only while fit's on_fit_start hooks run. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trainer/trainer_internal.h"
#include "trainer/checkpoint_internal.h"
#include "core/fsutil.h"

struct volt_dir_check {
    char *who, *what, *dir;
    unsigned flags;
};

static void checks_clear(volt_trainer *t) {
    for (int i = 0; i < t->n_dir_checks; i++) {
        free(t->dir_checks[i].who);
        free(t->dir_checks[i].what);
        free(t->dir_checks[i].dir);
    }
    t->n_dir_checks = 0;
}

void volt__write_check_free(volt_trainer *t) {
    checks_clear(t);
    free(t->dir_checks);
    t->dir_checks = NULL;
    t->cap_dir_checks = 0;
}

void volt__write_check_begin(volt_trainer *t) {
    checks_clear(t);
    t->dir_checks_open = true;
}

volt_status volt_trainer_check_writable(volt_trainer *t, const char *who, const char *what, const char *dir, unsigned flags) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (!who || !what || !dir || !*dir)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "volt_trainer_check_writable: who, what and a folder are required");
    if (!t->dir_checks_open)
        return volt__terr(t, VOLT_ERR_STATE, "volt_trainer_check_writable: %s's %s '%s': only from on_fit_start", who, what, dir);
    if (t->n_dir_checks == t->cap_dir_checks) {
        const int cap = t->cap_dir_checks ? 2 * t->cap_dir_checks : 4;
        struct volt_dir_check *n = realloc(t->dir_checks, sizeof *n * (size_t)cap);
        if (!n) return volt__terr(t, VOLT_ERR_NOMEM, "volt_trainer_check_writable: out of memory");
        t->dir_checks = n;
        t->cap_dir_checks = cap;
    }
    struct volt_dir_check c = { strdup(who), strdup(what), strdup(dir), flags };
    if (!c.who || !c.what || !c.dir) {
        free(c.who);
        free(c.what);
        free(c.dir);
        return volt__terr(t, VOLT_ERR_NOMEM, "volt_trainer_check_writable: out of memory");
    }
    t->dir_checks[t->n_dir_checks++] = c;
    return VOLT_OK;
}

/* Create (rank 0) and probe one folder: a hidden file made with O_EXCL, closed and removed. The
 * reason it cannot be written goes to why. */
static volt_status probe(const volt_trainer *t, const char *dir, bool create, char *why, size_t n) {
    if (create) {
        char err[VOLT__CKPT_PATH_CAP + 128];
        if (volt__mkdirs(dir, err, sizeof err) < 0) {   /* "cannot create directory '<dir>': Not a directory" */
            char own[VOLT__CKPT_PATH_CAP + 32];
            snprintf(own, sizeof own, "cannot create directory '%s': ", dir);
            snprintf(why, n, "%s", strncmp(err, own, strlen(own)) == 0 ? err + strlen(own) : err);
            return VOLT_ERR_IO;
        }
    } else {
        struct stat sb;
        if (stat(dir, &sb) != 0) {
            snprintf(why, n, "%s", strerror(errno));
            return VOLT_ERR_IO;
        }
        if (!S_ISDIR(sb.st_mode)) {
            snprintf(why, n, "not a directory");
            return VOLT_ERR_IO;
        }
    }
    static unsigned seq;   /* with the pid, rank and clock: a name no other run or rank is using */
    char path[VOLT__CKPT_PATH_CAP];
    for (int attempt = 0; attempt < 16; attempt++) {
        const unsigned long long tag = (unsigned long long)(volt__now() * 1e9) ^ ((unsigned long long)++seq << 40);
        if (snprintf(path, sizeof path, "%s/.volt-write-check-%d-%d-%llx.tmp", dir, (int)getpid(), t->rank, tag) >=
            (int)sizeof path) {
            snprintf(why, n, "path too long");
            return VOLT_ERR_INVALID_ARG;
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) {
            snprintf(why, n, "%s", strerror(errno));
            return VOLT_ERR_IO;
        }
        close(fd);
        if (unlink(path) != 0) {
            snprintf(why, n, "cannot remove the file it wrote, '%s': %s", path, strerror(errno));
            return VOLT_ERR_IO;
        }
        return VOLT_OK;
    }
    snprintf(why, n, "no free name for a test file");
    return VOLT_ERR_IO;
}

/* The callbacks that named dir for `what`, joined by " and " (an app's ModelCheckpoint and
 * OnExceptionCheckpoint share their folder). */
static void who_named(const volt_trainer *t, const char *dir, const char *what, char *out, size_t n) {
    out[0] = 0;
    for (int j = 0; j < t->n_dir_checks; j++) {
        const struct volt_dir_check *d = &t->dir_checks[j];
        if (strcmp(d->dir, dir) != 0 || strcmp(d->what, what) != 0 || strstr(out, d->who)) continue;
        const size_t k = strlen(out);
        snprintf(out + k, n - k, "%s%s", k ? " and " : "", d->who);
    }
}

static void (*g_hook)(const char *dir, int rank, void *ctx);
static void *g_hook_ctx;
void volt__write_check_set_hook(void (*fn)(const char *dir, int rank, void *ctx), void *ctx) {
    g_hook = fn;
    g_hook_ctx = ctx;
}

/* Probe dir (rank 0 creates it first); a failure on t, naming who and what. */
static volt_status probe_one(volt_trainer *t, const char *who, const char *what, const char *dir, bool create,
                             const char *note) {
    char why[VOLT__CKPT_PATH_CAP + 256];
    if (g_hook) g_hook(dir, t->rank, g_hook_ctx);
    volt_status st = probe(t, dir, create, why, sizeof why);
    if (st >= 0) return VOLT_OK;
    char names[256];
    who_named(t, dir, what, names, sizeof names);
    return volt__terr(t, st, "%s: cannot write to %s '%s': %s (checked at fit start%s)", names[0] ? names : who, what, dir, why,
                      note);
}

/* Sharded checkpoints: every rank writes its shard file into a folder rank 0 makes in its own
 * dirpath (save_sharded names it from rank 0's path), so each other rank probes rank 0's checkpoint
 * folders, spelled as rank 0 has them, without creating them. Collective: rank 0's count, then each
 * folder, broadcast. */
static volt_status probe_shard_dirs(volt_trainer *t) {
    int32_t n = 0;
    for (int i = 0; t->rank == 0 && i < t->n_dir_checks; i++) n += (t->dir_checks[i].flags & VOLT_WRITES_CHECKPOINTS) != 0;
    volt_status cs = volt__strategy_broadcast(t->strategy, &n, sizeof n, 0, "shard folder count"), st = VOLT_OK;
    char note[96], dir[VOLT__CKPT_PATH_CAP];
    snprintf(note, sizeof note, ": rank %d writes its shard files there; do the ranks share this file system?", t->rank);
    for (int k = 0, i = -1; cs >= 0 && k < n; k++) {
        while (++i < t->n_dir_checks && !(t->dir_checks[i].flags & VOLT_WRITES_CHECKPOINTS)) {}
        const struct volt_dir_check *c = i < t->n_dir_checks ? &t->dir_checks[i] : NULL;   /* this rank's k-th */
        memset(dir, 0, sizeof dir);
        if (t->rank == 0 && c) snprintf(dir, sizeof dir, "%s", c->dir);
        if ((cs = volt__strategy_broadcast(t->strategy, dir, sizeof dir, 0, "shard folder")) < 0) break;
        dir[sizeof dir - 1] = 0;
        if (t->rank != 0 && st >= 0)
            st = probe_one(t, c ? c->who : "checkpoints", c ? c->what : "folder", dir, false, note);
    }
    if (cs < 0 && st >= 0)
        st = volt__terr(t, cs, "fit start: rank 0's checkpoint folders did not arrive (strategy '%s'): %s",
                        volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    return st;
}

volt_status volt__write_check_run(volt_trainer *t, volt_status st) {
    t->dir_checks_open = false;
    for (int i = 0; st >= 0 && t->rank == 0 && i < t->n_dir_checks; i++)   /* rank 0 writes every log and checkpoint */
        st = probe_one(t, t->dir_checks[i].who, t->dir_checks[i].what, t->dir_checks[i].dir, true, "");
    st = volt__agree_status(t, st, "fit start", "no rank trained");
    /* ckpt_sharded reads the strategy's layout: alike on every rank, as st is now */
    if (st >= 0 && t->world > 1 && t->strategy && t->ps && ckpt_sharded(t))
        st = volt__agree_status(t, probe_shard_dirs(t), "fit start", "no rank trained");
    checks_clear(t);
    return st;
}
