/* Sharded checkpoints: which slice of each unit this rank holds, the sharded save (an index
 * and a folder of per-rank shard files; layout below), and removing a checkpoint with its
 * shard folders. Loading them: checkpoint_source.c. See trainer/checkpoint_internal.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "trainer/checkpoint_internal.h"
#include "volt/safetensors.h"
#include "volt/precision.h"

/* ---- removal ------------------------------------------------------------------------------------ */
/* A file a sharded save writes: rankNNNNN-of-NNNNN.safetensors, or its .tmp. */
static bool is_shard_name(const char *n) {
    unsigned a, b;
    int end = 0;
    if (sscanf(n, "rank%5u-of-%5u.safetensors%n", &a, &b, &end) != 2 || end != 30) return false;
    return n[end] == 0 || !strcmp(n + end, ".tmp");
}

/* Remove a shard folder: only the shard files in it, then the folder if that left it empty
 * (anything else in it stays, and so does the folder). */
int remove_dir(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    char p[4096];
    int rc = 0;
    while ((e = readdir(dp))) {
        if (!is_shard_name(e->d_name)) continue;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p || (unlink(p) != 0 && errno != ENOENT)) rc = -1;
    }
    closedir(dp);
    if (rmdir(dir) != 0 && errno != ENOENT) rc = -1;
    return rc;
}

/* Remove every shard folder of the checkpoint at path ("<path>.shards-*": the current one,
 * one replaced by a later save, one left by a save that crashed) except `keep` (NULL: all).
 * Found by name, so a save never has to read the checkpoint it replaces. */
int remove_shard_dirs(const char *path, const char *keep) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    char parent[4096], prefix[1024], dir[8192];
    if (snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".") >= (int)sizeof parent ||
        snprintf(prefix, sizeof prefix, "%s.shards-", base) >= (int)sizeof prefix)
        return -1;
    if (slash == path) snprintf(parent, sizeof parent, "/");
    DIR *dp = opendir(parent);
    if (!dp) return errno == ENOENT ? 0 : -1;
    int rc = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        const char *kb = keep && strrchr(keep, '/') ? strrchr(keep, '/') + 1 : keep;
        if (kb && !strcmp(e->d_name, kb)) continue;
        snprintf(dir, sizeof dir, "%s/%s", parent, e->d_name);
        struct stat sb;   /* a real folder, never one reached through a symbolic link */
        if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (remove_dir(dir) != 0) rc = -1;
    }
    closedir(dp);
    return rc;
}

/* ---- which slice of a unit this rank holds ------------------------------------------------- */
void owned_range(volt_trainer *t, int u, int64_t *lo, int64_t *hi) {
    volt_strategy *sg = t->strategy;
    *lo = 0;
    *hi = volt_unit_numel(volt_params_unit_at(t->ps, u));
    if (t->world > 1) volt__strategy_owned_range(sg, u, lo, hi);
}

/* Does some rank hold only a slice of some unit (ZeRO, FSDP)? Then checkpoints are sharded. */
bool ckpt_sharded(volt_trainer *t) {
    if (t->world <= 1) return false;
    for (int u = 0; u < volt_params_unit_count(t->ps); u++) {
        int64_t lo, hi;
        owned_range(t, u, &lo, &hi);
        if (lo != 0 || hi != volt_unit_numel(volt_params_unit_at(t->ps, u))) return true;
    }
    return false;
}

/* Every rank gets the same verdict: ok is this rank's; false when any rank's was false. */
bool all_ok(volt_trainer *t, bool ok, const char *what) {
    bool all = false;
    return all_ok_st(t, ok, &all, what) >= 0 && all;
}

volt_status all_ok_st(volt_trainer *t, bool ok, bool *all, const char *what) {
    *all = ok;
    if (t->world <= 1) return VOLT_OK;
    double bad = ok ? 0.0 : 1.0;
    volt_status st = volt__strategy_all_reduce_mean(t->strategy, &bad, 1, what);
    if (st < 0) { *all = false; return st; }
    *all = bad == 0.0;
    return VOLT_OK;
}

/* ---- sharded checkpoints ----------------------------------------------------------------------
 * <path> is the index: an ordinary safetensors file with the loop state, callbacks, module
 * extras, and in "volt.shards" (JSON) the layout: the shard folder, the world that saved,
 * every unit's numel and each rank's slice [lo, hi), every parameter's unit, offset and
 * shape. The folder <path>.shards-<id>/ holds rank<r>-of-<N>.safetensors per rank with its
 * slice of each unit: "params.<unit>" and "optimizer.<state>.<unit>", f32. The folder name
 * is new for every save and the index is written last (atomically), so a crash leaves the
 * previous checkpoint whole; the previous folder is removed after the new index is in place. */

bool shard_file(char *buf, size_t n, const char *dir, int r, int world) {
    int k = snprintf(buf, n, "%s/rank%05d-of-%05d.safetensors", dir, r, world);
    return k >= 0 && (size_t)k < n;
}

uint64_t shard_fresh_id(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33;   /* mix */
    return x;
}

/* The owned ranges and the optimizer's agree (the optimizer holds exactly the slice the
 * strategy says), as the shard layout assumes. */
volt_status shard_check_states(volt_trainer *t, char *err, size_t errlen) {
    const int U = volt_params_unit_count(t->ps), K = ck_saved_states(t);
    for (int u = 0; u < U; u++)
        for (int k = 0; k < K; k++) {
            int64_t lo, hi, slo = 0, shi = 0;
            owned_range(t, u, &lo, &hi);
            if (!volt_optimizer_state_raw(t->opt, u, k, &slo, &shi) || slo != lo || shi != hi) {
                snprintf(err, errlen, "unit '%s': optimizer state %d holds [%lld, %lld), this rank owns [%lld, %lld)",
                         volt_unit_name(volt_params_unit_at(t->ps, u)), k, (long long)slo, (long long)shi, (long long)lo,
                         (long long)hi);
                return VOLT_ERR_STATE;
            }
        }
    return VOLT_OK;
}

volt_status shard_each(volt_trainer *t, ck_stage *sg, shard_tensor_fn fn, void *ctx) {
    const int U = volt_params_unit_count(t->ps), K = ck_saved_states(t);
    char name[512];
    volt_status st = VOLT_OK;
    for (int u = 0; u < U && st >= 0; u++) {
        const volt_unit *un = volt_params_unit_at(t->ps, u);
        int64_t lo, hi;
        owned_range(t, u, &lo, &hi);
        snprintf(name, sizeof name, "params.%s", volt_unit_name(un));
        const float *v = sg ? stage_values(t, sg, u, lo, hi) : NULL;
        if (sg && !v) return VOLT_ERR_STATE;
        st = fn(ctx, name, hi - lo, v);
        for (int k = 0; k < K && st >= 0; k++) {
            snprintf(name, sizeof name, "optimizer.%s.%s", volt_optimizer_state_name(t->opt, k), volt_unit_name(un));
            int64_t slo, shi;   /* = [lo, hi): shard_check_states */
            v = !sg ? NULL : hi > lo ? stage_state(t, sg, u, k, &slo, &shi) : sg->into ? sg->into + sg->into_used : sg->f32;
            if (sg && !v) return VOLT_ERR_STATE;
            st = fn(ctx, name, hi - lo, v);
        }
    }
    return st;
}

volt_status shard_meta(int rank, int world, const char *idhex, volt_st_writer **out, char *err, size_t errlen) {
    char b[32];
    *out = NULL;
    volt_st_writer *w;
    if (volt_st_writer_create(&w) < 0) { snprintf(err, errlen, "out of memory"); return VOLT_ERR_NOMEM; }
    volt_status st = volt_st_writer_meta(w, "volt.shard.id", idhex);
    snprintf(b, sizeof b, "%d", rank);
    if (st >= 0) st = volt_st_writer_meta(w, "volt.shard.rank", b);
    snprintf(b, sizeof b, "%d", world);
    if (st >= 0) st = volt_st_writer_meta(w, "volt.shard.world", b);
    if (st >= 0) st = meta_seal(w);
    if (st < 0) {
        snprintf(err, errlen, "%s", volt_st_writer_errmsg(w)[0] ? volt_st_writer_errmsg(w) : volt_status_str(st));
        volt_st_writer_destroy(w);
        return st;
    }
    *out = w;
    return VOLT_OK;
}

static volt_status shard_declare(void *s, const char *name, int64_t n, const float *data) {
    (void)data;
    return volt_st_stream_declare(s, name, VOLT_F32, VOLT_SHAPE(n));
}
static volt_status shard_write(void *s, const char *name, int64_t n, const float *data) {
    (void)n;
    return volt_st_stream_write(s, name, data);
}

/* This rank's shard, streamed: shard_each's tensors, each brought to the host once through
 * the staging area. */
static volt_status write_shard(volt_trainer *t, const char *dir, const char *id, char *err, size_t errlen) {
    char file[4200];
    volt_status st = shard_check_states(t, err, errlen);
    if (st < 0) return st;
    if (!shard_file(file, sizeof file, dir, t->rank, t->world)) { snprintf(err, errlen, "path too long"); return VOLT_ERR_INVALID_ARG; }
    volt_st_writer *w;   /* the metadata, sealed */
    if ((st = shard_meta(t->rank, t->world, id, &w, err, errlen)) < 0) return st;
    ck_stage sg;
    volt_st_stream *s = NULL;
    if ((st = stage_open(t, &sg)) < 0) snprintf(err, errlen, "out of memory (staging)");
    if (st >= 0) st = ck_stream_open(file, w, &s, err, errlen);
    volt_st_writer_destroy(w);
    if (st >= 0) st = shard_each(t, NULL, shard_declare, s);
    if (st >= 0) st = volt_st_stream_begin(s);
    if (st >= 0) st = shard_each(t, &sg, shard_write, s);
    if (st < 0 && s && !err[0]) snprintf(err, errlen, "%s", volt_st_stream_errmsg(s));
    if (st >= 0) st = volt_st_stream_finish(s, err, errlen);   /* consumes s */
    else volt_st_stream_destroy(s);
    stage_close(&sg);
    return st;
}

/* The layout JSON of the index (ranges: world x units x 2, every rank's slices). */
char *index_json(volt_trainer *t, const char *dirbase, const char *id, const double *ranges) {
    const int U = volt_params_unit_count(t->ps);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "dir", dirbase);
    cJSON_AddNumberToObject(root, "world", t->world);
    cJSON *units = cJSON_AddArrayToObject(root, "units");
    for (int u = 0; u < U; u++) {
        volt_unit *un = volt_params_unit_at(t->ps, u);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", volt_unit_name(un));
        cJSON_AddNumberToObject(o, "numel", (double)volt_unit_numel(un));
        cJSON *rg = cJSON_AddArrayToObject(o, "ranges");
        for (int r = 0; r < t->world; r++) {
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(ranges[((size_t)r * U + u) * 2]));
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(ranges[((size_t)r * U + u) * 2 + 1]));
            cJSON_AddItemToArray(rg, pair);
        }
        cJSON_AddItemToArray(units, o);
    }
    cJSON *params = cJSON_AddArrayToObject(root, "params");
    for (int i = 0; i < volt_params_count(t->ps); i++) {
        volt_tensor *p = volt_params_at(t->ps, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", p->name);
        cJSON_AddNumberToObject(o, "unit", volt_unit_index(p->unit));
        cJSON_AddNumberToObject(o, "offset", (double)volt_param_offset(p));
        cJSON_AddNumberToObject(o, "numel", (double)volt_tensor_numel(p));
        cJSON_AddStringToObject(o, "dtype", "F32");
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < p->shape.ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)p->shape.d[d]));
        cJSON_AddItemToArray(params, o);
    }
    cJSON *states = cJSON_AddArrayToObject(root, "states");
    for (int k = 0; k < ck_saved_states(t); k++)
        cJSON_AddItemToArray(states, cJSON_CreateString(volt_optimizer_state_name(t->opt, k)));
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

/* Every rank's slices (world x units x 2) for the index: each fills its rows of a zeroed
 * table, summed over the ranks (a collective). */
volt_status shard_ranges(volt_trainer *t, double **out) {
    const int R = t->rank, W = t->world, U = volt_params_unit_count(t->ps);
    double *ranges = calloc((size_t)W * (size_t)(U ? U : 1) * 2, sizeof *ranges);
    for (int u = 0; ranges && u < U; u++) {
        int64_t lo, hi;
        owned_range(t, u, &lo, &hi);
        ranges[((size_t)R * U + u) * 2] = (double)lo;
        ranges[((size_t)R * U + u) * 2 + 1] = (double)hi;
    }
    *out = NULL;
    if (!all_ok(t, ranges != NULL, "shard ranges allocated")) { free(ranges); return VOLT_ERR_NOMEM; }
    volt_status st = volt__strategy_all_reduce_mean(t->strategy, ranges, W * U * 2, "shard ranges");
    if (st < 0) { free(ranges); return st; }
    for (int i = 0; i < W * U * 2; i++) ranges[i] = (double)llround(ranges[i] * W);
    *out = ranges;
    return VOLT_OK;
}

/* Rank 0: the index at path for the shards in dir, with the state of `state` (put_state's
 * metadata and module extras, taken earlier by a snapshot) or, NULL, the trainer's now. Every
 * shard file must be in dir. Then the folders of the checkpoint it replaces go; on failure, dir. */
volt_status shard_index_write(volt_trainer *t, const char *path, const char *dir, const char *idhex, const double *ranges,
                              const volt_st_writer *state) {
    const char *dirbase = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    char err[768] = "", file[4200];
    volt_status st = VOLT_OK;
    for (int r = 0; r < t->world && st >= 0; r++) {
        struct stat sb;
        if (!shard_file(file, sizeof file, dir, r, t->world) || stat(file, &sb) != 0 || !S_ISREG(sb.st_mode))
            st = volt__terr(t, VOLT_ERR_IO, "checkpoint '%s': rank %d's shard '%s' is missing", path, r, file);
    }
    volt_st_writer *w = NULL;
    char *js = st >= 0 ? index_json(t, dirbase, idhex, ranges) : NULL;
    if (st >= 0 && (!js || volt_st_writer_create(&w) < 0)) st = volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path);
    if (st >= 0 && (st = volt_st_writer_meta(w, SHARD_INDEX_KEY, js)) < 0)
        volt__terr(t, st, "checkpoint '%s': %s", path, volt_st_writer_errmsg(w));
    if (st >= 0 && !state) st = put_state(t, w, path);
    for (int i = 0; st >= 0 && state && i < volt_st_writer_meta_count(state); i++) {
        const char *k, *v;
        if ((st = volt_st_writer_meta_at(state, i, &k, &v)) >= 0) st = volt_st_writer_meta(w, k, v);
        if (st < 0) volt__terr(t, st, "checkpoint '%s': out of memory", path);
    }
    for (int i = 0; st >= 0 && state && i < volt_st_writer_count(state); i++) {
        const char *n;
        volt_dtype dt;
        volt_shape sh;
        const void *d;
        if ((st = volt_st_writer_tensor_at(state, i, &n, &dt, &sh, &d)) >= 0) st = volt_st_writer_add(w, n, dt, sh, d);
        if (st < 0) volt__terr(t, st, "checkpoint '%s': %s", path, volt_st_writer_errmsg(w));
    }
    if (st >= 0 && (st = meta_seal(w)) < 0) volt__terr(t, st, "checkpoint '%s': out of memory", path);
    if (st >= 0 && (st = volt_st_writer_write(w, path, err, sizeof err)) < 0) volt__terr(t, st, "%s", err);
    volt_st_writer_destroy(w);
    cJSON_free(js);
    if (st >= 0) remove_shard_dirs(path, dir);   /* the replaced checkpoint's folder */
    else remove_dir(dir);
    return st;
}

/* A verdict of save_sharded that did not pass: rank 0 removes the folder it made (dir, "" when
 * none yet), and every rank reports why: the comm's failure (cs < 0: the ranks could not vote,
 * e.g. one of them is in another call), this rank's own error (st < 0, its words in err), or
 * another rank's (`others`). */
static volt_status save_failed(volt_trainer *t, const char *path, const char *dir, volt_status cs, volt_status st,
                               const char *err, const char *others) {
    volt_strategy *sg = t->strategy;
    if (t->rank == 0 && dir[0]) remove_dir(dir);
    if (cs < 0)
        return volt__terr(t, cs, "checkpoint '%s': the ranks could not agree on the save (strategy '%s'): %s%s%s", path,
                          volt__strategy_name(sg), volt__strategy_errmsg(sg),
                          st < 0 && err && err[0] ? "; this rank also failed: " : "", st < 0 && err ? err : "");
    if (st < 0) return err ? volt__terr(t, st, "checkpoint '%s': %s", path, err) : st;
    return volt__terr(t, VOLT_ERR_IO, "checkpoint '%s': %s", path, others);
}

volt_status save_sharded(volt_trainer *t, const char *path) {
    volt_strategy *sg = t->strategy;
    const int R = t->rank;
    char err[768] = "", dir[4096] = "", idhex[24], rpath[4096];
    volt_status st = VOLT_OK, cs;
    bool all;
    /* every rank is here (ck_entry_vote: save_checkpoint called on rank 0 only fails there, on
     * every rank, naming the mismatch); then rank 0's id and path: every rank writes into the
     * folder rank 0's index names. The path travels in a first piece of at most 1 KiB. */
    VOLT_TRY(ck_entry_vote(t, CK_ENTRY_SAVE, "save_checkpoint", path));
    uint64_t id = R == 0 ? shard_fresh_id() : 0;
    if ((st = volt__strategy_broadcast(sg, &id, sizeof id, 0, "shard folder id")) < 0)
        return save_failed(t, path, dir, st, VOLT_OK, NULL, NULL);
    bool has = true;
    if (snprintf(rpath, sizeof rpath, "%s", path) >= (int)sizeof rpath) has = false;
    if ((st = ck_bcast_str(t, rpath, sizeof rpath, &has, "checkpoint path")) < 0) return save_failed(t, path, dir, st, VOLT_OK, NULL, NULL);
    if (!has) return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': path too long", path);
    path = rpath;
    snprintf(idhex, sizeof idhex, "%016llx", (unsigned long long)id);
    if (snprintf(dir, sizeof dir, "%s.shards-%s", path, idhex) >= (int)sizeof dir)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': path too long", path);
    if (R == 0 && mkdir(dir, 0777) != 0) {
        snprintf(err, sizeof err, "cannot create the shard folder '%.600s': %s", dir, strerror(errno));
        st = VOLT_ERR_IO;
    }
    const bool made = st >= 0;
    if ((cs = all_ok_st(t, st >= 0, &all, "shard folder made")) < 0 || !all) {
        if (!made) dir[0] = 0;   /* not ours to remove */
        return save_failed(t, path, dir, cs, st, err, "rank 0 could not create the shard folder (its log has the reason)");
    }
    st = write_shard(t, dir, idhex, err, sizeof err);
    if ((cs = all_ok_st(t, st >= 0, &all, "shards written")) < 0 || !all) {
        char mine[900];
        snprintf(mine, sizeof mine, "rank %d shard: %s", R, err);
        return save_failed(t, path, dir, cs, st, mine, "another rank could not write its shard (its log has the reason)");
    }
    double *ranges = NULL;
    if ((st = shard_ranges(t, &ranges)) < 0) {
        if (st == VOLT_ERR_NOMEM) return save_failed(t, path, dir, VOLT_OK, st, "out of memory", NULL);
        return save_failed(t, path, dir, st, VOLT_OK, NULL, NULL);
    }
    if (R == 0) st = shard_index_write(t, path, dir, idhex, ranges, NULL);   /* removes dir when it fails */
    free(ranges);
    if ((cs = all_ok_st(t, st >= 0, &all, "index written")) < 0 || !all) {
        if (st < 0) return st;   /* rank 0: its message is set, dir removed */
        if (R == 0 && cs < 0) {   /* the index is written but a rank may not know: the save stands on disk */
            return volt__terr(t, cs, "checkpoint '%s': written, but the ranks could not agree on it (strategy '%s'): %s", path,
                              volt__strategy_name(sg), volt__strategy_errmsg(sg));
        }
        if (cs < 0)
            return volt__terr(t, cs, "checkpoint '%s': the ranks could not agree on the save (strategy '%s'): %s", path,
                              volt__strategy_name(sg), volt__strategy_errmsg(sg));
        return volt__terr(t, VOLT_ERR_IO, "checkpoint '%s': rank 0 could not write the index (its log has the reason)", path);
    }
    return VOLT_OK;
}

volt_status volt_checkpoint_remove(const char *path) {
    if (!path || !*path) return VOLT_ERR_INVALID_ARG;
    if (unlink(path) != 0 && errno != ENOENT) return VOLT_ERR_IO;   /* the index first: no half checkpoint */
    return remove_shard_dirs(path, NULL) == 0 ? VOLT_OK : VOLT_ERR_IO;
}
