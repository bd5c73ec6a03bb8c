/* Checkpoint save/load (DESIGN §5): one safetensors file holding the weights under their
 * parameter names, optimizer states as "optimizer.<state>.<param>", module extras as
 * "module.<name>", and in the metadata the loop state, scheduler, RNG offset, callback
 * states (JSON) and the log directory. Loading validates everything before it changes
 * anything, so a bad file leaves the in-memory model untouched. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <time.h>
#include <zlib.h>
#include "trainer/trainer_internal.h"
#include "volt/safetensors.h"
#include "volt/precision.h"

/* 2: the metadata is sealed by "volt.meta_crc32"; 1 (older) loads without that check. */
#define CKPT_FORMAT_VERSION "2"
#define META_CRC_KEY "volt.meta_crc32"

struct volt_ckpt {
    volt_trainer *t;
    volt_st_writer *w;       /* saving */
    volt_st_file *f;         /* loading */
    const char *path;
};

volt_status volt_ckpt_put_meta(volt_ckpt *ck, const char *key, const char *value) {
    if (!ck->w) return VOLT_ERR_STATE;
    char k[256];
    snprintf(k, sizeof k, "module.%s", key);
    return volt_st_writer_meta(ck->w, k, value);
}

const char *volt_ckpt_get_meta(volt_ckpt *ck, const char *key) {
    if (!ck->f) return NULL;
    char k[256];
    snprintf(k, sizeof k, "module.%s", key);
    return volt_st_meta(ck->f, k);
}

volt_status volt_ckpt_put_tensor(volt_ckpt *ck, const char *name, volt_dtype dt, volt_shape shape, const void *data) {
    if (!ck->w) return VOLT_ERR_STATE;
    char k[256];
    snprintf(k, sizeof k, "module.%s", name);
    return volt_st_writer_add_copy(ck->w, k, dt, shape, data);
}

volt_status volt_ckpt_get_tensor(volt_ckpt *ck, const char *name, volt_dtype dt, volt_shape shape, void *dst) {
    if (!ck->f) return VOLT_ERR_STATE;
    char k[256];
    snprintf(k, sizeof k, "module.%s", name);
    volt_st_info info;
    VOLT_TRY(volt_st_find(ck->f, k, &info));
    if (info.dtype != dt || !volt_shape_eq(info.shape, shape))
        return volt__terr(ck->t, VOLT_ERR_SHAPE, "checkpoint '%s': tensor '%s' has another dtype or shape", ck->path, k);
    memcpy(dst, info.data, info.nbytes);
    return VOLT_OK;
}

/* ---- metadata checksum -------------------------------------------------------------------
 * The tensors carry crc32 entries (core/safetensors.c); the metadata (loop state, callback
 * state, shard layout, module extras) is covered by one crc32 over every key but "format",
 * "crc32:*" and the checksum itself, in key order: "key\0value\0" for each. */
typedef struct meta_kv { const char *k, *v; } meta_kv;

static int kv_cmp(const void *a, const void *b) { return strcmp(((const meta_kv *)a)->k, ((const meta_kv *)b)->k); }

static bool meta_covered(const char *k) {
    return strcmp(k, "format") != 0 && strncmp(k, "crc32:", 6) != 0 && strcmp(k, META_CRC_KEY) != 0;
}

/* kv[0..n) is sorted in place. */
static uint32_t meta_crc(meta_kv *kv, int n) {
    qsort(kv, (size_t)n, sizeof *kv, kv_cmp);
    uLong c = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++) {
        c = crc32(c, (const Bytef *)kv[i].k, (uInt)strlen(kv[i].k) + 1);
        for (const char *v = kv[i].v; ; v += 1u << 30) {   /* values can be long: chunked */
            size_t len = strlen(v), k = len < (1u << 30) ? len : (1u << 30);
            c = crc32(c, (const Bytef *)v, (uInt)k);
            if (k == len) break;
        }
        c = crc32(c, (const Bytef *)"", 1);
    }
    return (uint32_t)c;
}

/* Add the checksum of everything set on w so far (call it right before writing). */
static volt_status meta_seal(volt_st_writer *w) {
    const int n = volt_st_writer_meta_count(w);
    meta_kv *kv = malloc(sizeof *kv * (size_t)(n ? n : 1));
    if (!kv) return VOLT_ERR_NOMEM;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (volt_st_writer_meta_at(w, i, &kv[m].k, &kv[m].v) == VOLT_OK && meta_covered(kv[m].k)) m++;
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", (unsigned)meta_crc(kv, m));
    free(kv);
    return volt_st_writer_meta(w, META_CRC_KEY, hex);
}

/* Check the metadata checksum of an open file. required: a missing checksum is an error. */
static volt_status meta_check(volt_st_file *f, const char *file, bool required, char *err, size_t errlen) {
    const char *want = volt_st_meta(f, META_CRC_KEY);
    if (!want) {
        if (!required) return VOLT_OK;
        snprintf(err, errlen, "file '%s': the metadata checksum '%s' is missing (file damaged or edited?)", file, META_CRC_KEY);
        return VOLT_ERR_CORRUPT;
    }
    const int n = volt_st_meta_count(f);
    meta_kv *kv = malloc(sizeof *kv * (size_t)(n ? n : 1));
    if (!kv) { snprintf(err, errlen, "file '%s': out of memory", file); return VOLT_ERR_NOMEM; }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (volt_st_meta_at(f, i, &kv[m].k, &kv[m].v) == VOLT_OK && meta_covered(kv[m].k)) m++;
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", (unsigned)meta_crc(kv, m));
    free(kv);
    if (strcmp(hex, want) != 0) {
        snprintf(err, errlen, "file '%s': metadata checksum mismatch (file damaged or edited?): stored %.16s, computed %s",
                 file, want, hex);
        return VOLT_ERR_CORRUPT;
    }
    return VOLT_OK;
}

/* ---- save ------------------------------------------------------------------------------ */
static volt_status meta_i64(volt_st_writer *w, const char *k, int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    return volt_st_writer_meta(w, k, b);
}

static void cb_key(volt_trainer *t, int i, char *buf, size_t n) {
    int ord = 0;
    for (int j = 0; j < i; j++)
        if (!strcmp(t->cbs[j].ops->name ? t->cbs[j].ops->name : "", t->cbs[i].ops->name ? t->cbs[i].ops->name : "")) ord++;
    if (ord) snprintf(buf, n, "%s#%d", t->cbs[i].ops->name, ord);
    else snprintf(buf, n, "%s", t->cbs[i].ops->name ? t->cbs[i].ops->name : "callback");
}

static char *callbacks_json(volt_trainer *t) {
    cJSON *root = cJSON_CreateObject();
    for (int i = 0; i < t->n_cbs; i++) {
        if (!t->cbs[i].ops->state_dict) continue;
        char *s = t->cbs[i].ops->state_dict(t->cbs[i].self);
        if (!s) continue;
        cJSON *st = cJSON_Parse(s);
        free(s);
        if (!st) continue;
        char key[128];
        cb_key(t, i, key, sizeof key);
        cJSON_AddItemToObject(root, key, st);
    }
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

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
static int remove_dir(const char *dir) {
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
static int remove_shard_dirs(const char *path, const char *keep) {
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
static void owned_range(volt_trainer *t, int u, int64_t *lo, int64_t *hi) {
    volt_strategy *sg = t->strategy;
    *lo = 0;
    *hi = volt_unit_numel(volt_params_unit_at(t->ps, u));
    if (t->world > 1 && sg->ops->version >= 3 && sg->ops->owned_range) sg->ops->owned_range(sg, u, lo, hi);
}

/* Does some rank hold only a slice of some unit (ZeRO, FSDP)? Then checkpoints are sharded. */
static bool ckpt_sharded(volt_trainer *t) {
    if (t->world <= 1) return false;
    for (int u = 0; u < volt_params_unit_count(t->ps); u++) {
        int64_t lo, hi;
        owned_range(t, u, &lo, &hi);
        if (lo != 0 || hi != volt_unit_numel(volt_params_unit_at(t->ps, u))) return true;
    }
    return false;
}

/* Every rank gets the same verdict: ok is this rank's; false when any rank's was false. */
static bool all_ok(volt_trainer *t, bool ok) {
    if (t->world <= 1) return ok;
    double bad = ok ? 0.0 : 1.0;
    if (t->strategy->ops->all_reduce_mean(t->strategy, &bad, 1) < 0) return false;
    return bad == 0.0;
}

/* Optimizer state k of unit u over [lo, hi) as f32: the buffer itself, or (16-bit states)
 * a converted copy in *tmp (caller frees). NULL when this rank holds no such slice. */
static const float *state_f32(volt_trainer *t, int u, int k, int64_t *lo, int64_t *hi, float **tmp) {
    *tmp = NULL;
    float *buf = volt_optimizer_state(t->opt, u, k, lo, hi);
    if (buf) return buf;
    const void *raw = volt_optimizer_state_raw(t->opt, u, k, lo, hi);
    if (!raw || *hi <= *lo) return NULL;
    if (!(*tmp = malloc(sizeof(float) * (size_t)(*hi - *lo)))) return NULL;
    volt_convert(*tmp, VOLT_F32, raw, volt_optimizer_state_dtype(t->opt), *hi - *lo);   /* exact */
    return *tmp;
}

/* Optimizer states as "optimizer.<state>.<param>" full tensors (unsharded: this rank holds
 * every unit whole). */
static volt_status save_optim_states(volt_trainer *t, volt_st_writer *w, const char *path) {
    volt_status st = VOLT_OK;
    char name[512];
    for (int k = 0; k < volt_optimizer_state_count(t->opt) && st >= 0; k++) {
        const char *sn = volt_optimizer_state_name(t->opt, k);
        for (int u = 0; u < volt_params_unit_count(t->ps) && st >= 0; u++) {
            volt_unit *un = volt_params_unit_at(t->ps, u);
            int64_t lo = 0, hi = 0;
            float *tmp;
            const float *buf = state_f32(t, u, k, &lo, &hi, &tmp);
            if (!buf) continue;
            const float *src = buf - lo;   /* indexed by unit offset */
            for (int i = 0; st >= 0 && i < volt_unit_param_count(un); i++) {
                volt_tensor *p = volt_unit_param(un, i);
                const int64_t off = volt_param_offset(p);
                if (lo > off || hi < off + volt_tensor_numel(p)) continue;
                snprintf(name, sizeof name, "optimizer.%s.%s", sn, p->name);
                st = tmp ? volt_st_writer_add_copy(w, name, VOLT_F32, p->shape, src + off)
                         : volt_st_writer_add(w, name, VOLT_F32, p->shape, src + off);
            }
            free(tmp);
        }
    }
    return st < 0 ? volt__terr(t, st, "checkpoint '%s': %s", path, volt_st_writer_errmsg(w)) : VOLT_OK;
}

/* Everything but the weights and optimizer states (rank 0): loop state, optimizer step,
 * scheduler, precision, callbacks, module extras. */
static volt_status put_state(volt_trainer *t, volt_st_writer *w, const char *path) {
    volt_strategy *sg = t->strategy;
    volt_status st = VOLT_OK;
    if (t->opt) {
        st = meta_i64(w, "volt.optimizer.step", volt_optimizer_step_count(t->opt));
        if (st >= 0) {
            char b[32];
            snprintf(b, sizeof b, "%d", (int)volt_optimizer_get_config(t->opt)->kind);
            st = volt_st_writer_meta(w, "volt.optimizer.kind", b);
        }
    }
    if (st >= 0) st = volt_st_writer_meta(w, "volt.strategy", sg->ops->name);
    if (st >= 0) st = meta_i64(w, "volt.world_size", t->world);
    if (t->sched && st >= 0) st = meta_i64(w, "volt.scheduler.last_step", volt_scheduler_last_step(t->sched));
    if (st >= 0) st = volt__prec_ckpt_save(t, w);   /* precision name, grad scaler */
    if (st >= 0) st = volt_st_writer_meta(w, "volt.format", CKPT_FORMAT_VERSION);
    if (st >= 0) st = volt_st_writer_meta(w, "volt.module", t->mops && t->mops->name ? t->mops->name : "");
    if (st >= 0) st = meta_i64(w, "volt.epoch", t->epoch);
    if (st >= 0) st = meta_i64(w, "volt.global_step", t->global_step);
    if (st >= 0) st = meta_i64(w, "volt.batch_in_epoch", t->batch_in_epoch);
    if (st >= 0) st = meta_i64(w, "volt.micro_step", t->micro_step);
    if (st >= 0) st = meta_i64(w, "volt.epoch_flags", (t->epoch_sched_done ? 1 : 0) | (t->epoch_val_done ? 2 : 0) | (t->epoch_done ? 4 : 0));
    if (st >= 0) st = meta_i64(w, "volt.seed", (int64_t)t->cfg.seed);
    if (st >= 0 && t->cfg.run_fingerprint) st = volt_st_writer_meta(w, "volt.run_fingerprint", t->cfg.run_fingerprint);
    if (st >= 0) {
        char *cbj = callbacks_json(t);
        st = volt_st_writer_meta(w, "volt.callbacks", cbj ? cbj : "{}");
        free(cbj);
    }
    if (st < 0) return volt__terr(t, st, "checkpoint '%s': %s", path, volt_st_writer_errmsg(w));
    if (t->mops && t->mops->on_save_checkpoint) {
        volt_ckpt ck = { t, w, NULL, path };
        st = t->mops->on_save_checkpoint(t->module, t, &ck);
        if (st < 0) return volt__terr(t, st, "module '%s': on_save_checkpoint failed", t->mops->name);
    }
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
#define SHARD_INDEX_KEY "volt.shards"

static bool shard_file(char *buf, size_t n, const char *dir, int r, int world) {
    int k = snprintf(buf, n, "%s/rank%05d-of-%05d.safetensors", dir, r, world);
    return k >= 0 && (size_t)k < n;
}

static uint64_t fresh_id(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33;   /* mix */
    return x;
}

static volt_status write_shard(volt_trainer *t, const char *dir, const char *id, char *err, size_t errlen) {
    volt_st_writer *w;
    if (volt_st_writer_create(&w) < 0) { snprintf(err, errlen, "out of memory"); return VOLT_ERR_NOMEM; }
    volt_status st = volt_st_writer_meta(w, "volt.shard.id", id);
    char b[32], name[512];
    snprintf(b, sizeof b, "%d", t->rank);
    if (st >= 0) st = volt_st_writer_meta(w, "volt.shard.rank", b);
    snprintf(b, sizeof b, "%d", t->world);
    if (st >= 0) st = volt_st_writer_meta(w, "volt.shard.world", b);
    float *conv = NULL;
    for (int u = 0; u < volt_params_unit_count(t->ps) && st >= 0; u++) {
        volt_unit *un = volt_params_unit_at(t->ps, u);
        int64_t lo, hi;
        owned_range(t, u, &lo, &hi);
        snprintf(name, sizeof name, "params.%s", volt_unit_name(un));
        if (volt_unit_data(un)) st = volt_st_writer_add(w, name, VOLT_F32, VOLT_SHAPE(hi - lo), volt_unit_data(un) + lo);
        else {   /* 16-bit storage: f32 in the file, exactly */
            float *c = realloc(conv, sizeof(float) * (size_t)(hi - lo + 1));
            if (!c) { st = VOLT_ERR_NOMEM; break; }
            conv = c;
            volt_convert(conv, VOLT_F32, (const char *)volt_unit_values(un) + (size_t)lo * volt_dtype_size(volt_params_dtype(t->ps)),
                         volt_params_dtype(t->ps), hi - lo);
            st = volt_st_writer_add_copy(w, name, VOLT_F32, VOLT_SHAPE(hi - lo), conv);
        }
        for (int k = 0; t->opt && k < volt_optimizer_state_count(t->opt) && st >= 0; k++) {
            int64_t slo = 0, shi = 0;
            float *tmp;
            const float *buf = state_f32(t, u, k, &slo, &shi, &tmp);
            if (!buf || slo != lo || shi != hi) {
                free(tmp);
                free(conv);
                volt_st_writer_destroy(w);
                snprintf(err, errlen, "unit '%s': optimizer state %d holds [%lld, %lld), this rank owns [%lld, %lld)",
                         volt_unit_name(un), k, (long long)slo, (long long)shi, (long long)lo, (long long)hi);
                return VOLT_ERR_STATE;
            }
            snprintf(name, sizeof name, "optimizer.%s.%s", volt_optimizer_state_name(t->opt, k), volt_unit_name(un));
            st = tmp ? volt_st_writer_add_copy(w, name, VOLT_F32, VOLT_SHAPE(hi - lo), buf)
                     : volt_st_writer_add(w, name, VOLT_F32, VOLT_SHAPE(hi - lo), buf);
            free(tmp);
        }
    }
    free(conv);
    if (st < 0) {
        snprintf(err, errlen, "%s", volt_st_writer_errmsg(w)[0] ? volt_st_writer_errmsg(w) : volt_status_str(st));
        volt_st_writer_destroy(w);
        return st;
    }
    char file[4200];
    if ((st = meta_seal(w)) < 0) {
        snprintf(err, errlen, "out of memory");
        volt_st_writer_destroy(w);
        return st;
    }
    st = shard_file(file, sizeof file, dir, t->rank, t->world) ? volt_st_writer_write(w, file, err, errlen) : VOLT_ERR_INVALID_ARG;
    volt_st_writer_destroy(w);
    return st;
}

/* The layout JSON of the index (ranges: world x units x 2, every rank's slices). */
static char *index_json(volt_trainer *t, const char *dirbase, const char *id, const double *ranges) {
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
    for (int k = 0; t->opt && k < volt_optimizer_state_count(t->opt); k++)
        cJSON_AddItemToArray(states, cJSON_CreateString(volt_optimizer_state_name(t->opt, k)));
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

static volt_status save_sharded(volt_trainer *t, const char *path) {
    volt_strategy *sg = t->strategy;
    const int R = t->rank, W = t->world, U = volt_params_unit_count(t->ps);
    char err[768] = "", dir[4096], idhex[24];
    volt_status st = VOLT_OK;
    /* rank 0's path and a fresh id: every rank writes into the folder rank 0's index names */
    struct { uint64_t id; char path[4096]; } hdr;
    memset(&hdr, 0, sizeof hdr);
    if (R == 0) {
        hdr.id = fresh_id();
        if (snprintf(hdr.path, sizeof hdr.path, "%s", path) >= (int)sizeof hdr.path) hdr.path[0] = 0;
    }
    if ((st = sg->ops->broadcast(sg, &hdr, sizeof hdr, 0)) < 0)
        return volt__terr(t, st, "checkpoint '%s': strategy '%s': %s", path, sg->ops->name, sg->ops->errmsg(sg));
    if (!hdr.path[0]) return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': path too long", path);
    path = hdr.path;
    const uint64_t id = hdr.id;
    snprintf(idhex, sizeof idhex, "%016llx", (unsigned long long)id);
    if (snprintf(dir, sizeof dir, "%s.shards-%s", path, idhex) >= (int)sizeof dir)
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': path too long", path);
    const char *dirbase = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    if (R == 0 && mkdir(dir, 0777) != 0) {
        snprintf(err, sizeof err, "cannot create the shard folder '%.600s': %s", dir, strerror(errno));
        st = VOLT_ERR_IO;
    }
    if (!all_ok(t, st >= 0))
        return volt__terr(t, st < 0 ? st : VOLT_ERR_IO, "checkpoint '%s': %s", path, st < 0 ? err : "rank 0 could not create the shard folder");
    st = write_shard(t, dir, idhex, err, sizeof err);
    if (!all_ok(t, st >= 0)) {
        if (R == 0) remove_dir(dir);
        if (st < 0) return volt__terr(t, st, "checkpoint '%s': rank %d shard: %s", path, R, err);
        return volt__terr(t, VOLT_ERR_IO, "checkpoint '%s': another rank could not write its shard (its log has the reason)", path);
    }
    /* every rank's slices, for the index: each fills its rows of a zeroed table, summed */
    double *ranges = calloc((size_t)W * (size_t)(U ? U : 1) * 2, sizeof *ranges);
    if (!ranges) st = VOLT_ERR_NOMEM;
    for (int u = 0; ranges && u < U; u++) {
        int64_t lo, hi;
        owned_range(t, u, &lo, &hi);
        ranges[((size_t)R * U + u) * 2] = (double)lo;
        ranges[((size_t)R * U + u) * 2 + 1] = (double)hi;
    }
    if (!all_ok(t, st >= 0)) { free(ranges); if (R == 0) remove_dir(dir); return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path); }
    if ((st = sg->ops->all_reduce_mean(sg, ranges, W * U * 2)) < 0) {
        free(ranges);
        if (R == 0) remove_dir(dir);
        return volt__terr(t, st, "checkpoint '%s': strategy '%s': %s", path, sg->ops->name, sg->ops->errmsg(sg));
    }
    for (int i = 0; i < W * U * 2; i++) ranges[i] = (double)llround(ranges[i] * W);
    if (R == 0) {
        volt_st_writer *w = NULL;
        char *js = index_json(t, dirbase, idhex, ranges);
        if (!js || volt_st_writer_create(&w) < 0) st = volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path);
        if (st >= 0 && (st = volt_st_writer_meta(w, SHARD_INDEX_KEY, js)) < 0)
            volt__terr(t, st, "checkpoint '%s': %s", path, volt_st_writer_errmsg(w));
        if (st >= 0) st = put_state(t, w, path);
        if (st >= 0 && (st = meta_seal(w)) < 0) volt__terr(t, st, "checkpoint '%s': out of memory", path);
        if (st >= 0 && (st = volt_st_writer_write(w, path, err, sizeof err)) < 0) volt__terr(t, st, "%s", err);
        volt_st_writer_destroy(w);
        cJSON_free(js);
        if (st >= 0) remove_shard_dirs(path, dir);   /* the replaced checkpoint's folder */
        else remove_dir(dir);
    }
    free(ranges);
    if (!all_ok(t, st >= 0)) {
        if (st < 0) return st;
        return volt__terr(t, VOLT_ERR_IO, "checkpoint '%s': rank 0 could not write the index (its log has the reason)", path);
    }
    return VOLT_OK;
}

volt_status volt_trainer_save_checkpoint(volt_trainer *t, const char *path) {
    if (!t->ps || !volt_params_finalized(t->ps)) return volt__terr(t, VOLT_ERR_STATE, "save_checkpoint: no model yet");
    if (!path || !*path) return volt__terr(t, VOLT_ERR_INVALID_ARG, "save_checkpoint: empty path");
    if (ckpt_sharded(t)) return save_sharded(t, path);
    if (t->rank != 0) return VOLT_OK;   /* replicated state: rank 0 writes it all */
    volt_st_writer *w;
    volt_status st;
    if ((st = volt_st_writer_create(&w)) < 0) return volt__terr(t, st, "checkpoint '%s': cannot create the writer", path);
    for (int i = 0; i < volt_params_count(t->ps) && st >= 0; i++) {
        volt_tensor *p = volt_params_at(t->ps, i);
        st = volt__ckpt_add_param(t, w, p);   /* f32 whatever the storage dtype */
    }
    if (st < 0) volt__terr(t, st, "checkpoint '%s': %s", path, volt_st_writer_errmsg(w));
    if (st >= 0 && t->opt) st = save_optim_states(t, w, path);
    if (st >= 0) st = put_state(t, w, path);
    if (st >= 0 && (st = meta_seal(w)) < 0) volt__terr(t, st, "checkpoint '%s': out of memory", path);
    if (st < 0) { volt_st_writer_destroy(w); return st; }
    char err[512];
    st = volt_st_writer_write(w, path, err, sizeof err);
    volt_st_writer_destroy(w);
    if (st < 0) return volt__terr(t, st, "%s", err);
    remove_shard_dirs(path, NULL);   /* it may replace a sharded checkpoint */
    return VOLT_OK;
}

/* ---- load ------------------------------------------------------------------------------ */
static volt_status meta_get_i64(volt_trainer *t, volt_st_file *f, const char *path, const char *k, int64_t *v, bool required) {
    const char *s = volt_st_meta(f, k);
    if (!s) {
        if (required) return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata '%s' is missing (not a volt training checkpoint?)", path, k);
        return VOLT_ERR_NOT_FOUND;
    }
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end) return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata '%s' = '%s' is not an integer", path, k, s);
    *v = x;
    return VOLT_OK;
}

const char *volt__resolve_ckpt(volt_trainer *t, const char *which) {
    const char *p = which;
    if (!strcmp(which, "last")) p = t->has_resolver && t->resolver.last ? t->resolver.last(t->resolver.self) : NULL;
    else if (!strcmp(which, "best")) p = t->has_resolver && t->resolver.best ? t->resolver.best(t->resolver.self) : NULL;
    if (t->world > 1) {   /* rank 0's file is the one every rank loads */
        static char buf[4096];
        snprintf(buf, sizeof buf, "%s", p ? p : "");
        if (t->strategy->ops->broadcast(t->strategy, buf, sizeof buf, 0) == VOLT_OK) p = buf[0] ? buf : NULL;
    }
    return p;
}

static volt_status hook_err_load(volt_trainer *t, volt_status st, const char *who, const char *path) {
    char prev[sizeof t->errmsg];
    snprintf(prev, sizeof prev, "%s", t->errmsg);
    return volt__terr(t, st, "checkpoint '%s': callback '%s' rejected its state%s%s", path, who ? who : "?",
                      prev[0] ? ": " : "", prev);
}

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* ---- where the saved values are: one file, or an index and its shards --------------------- */
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
} ck_src;

static void src_close(ck_src *c) {
    for (int r = 0; c->shards && r < c->world; r++) volt_st_close(c->shards[r]);
    free(c->shards);
    for (int u = 0; c->units && u < c->n_units; u++) { free(c->units[u].lo); free(c->units[u].hi); }
    free(c->units);
    free(c->params);
    cJSON_Delete(c->index);
    volt_st_close(c->f);
    memset(c, 0, sizeof *c);
}

static bool json_i64(const cJSON *o, const char *k, int64_t *v) {
    const cJSON *x = k ? cJSON_GetObjectItemCaseSensitive(o, k) : o;
    if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 9007199254740992.0 ||
        x->valuedouble != floor(x->valuedouble)) return false;
    *v = (int64_t)x->valuedouble;
    return true;
}

static const char *json_str(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* Do the non-empty ranges [lo[r], hi[r]) cover [0, numel) exactly once? (each lo <= hi <= numel) */
static bool ranges_tile(const int64_t *lo, const int64_t *hi, int world, int64_t numel) {
    int nonempty = 0, used = 0;
    for (int r = 0; r < world; r++) nonempty += lo[r] < hi[r];
    for (int64_t at = 0;;) {   /* [0, at) is covered; world is small, quadratic is fine */
        int next = -1;
        for (int r = 0; r < world; r++)
            if (lo[r] < hi[r] && lo[r] == at) {
                if (next >= 0) return false;   /* two ranges start here: overlap */
                next = r;
            }
        if (next < 0) return at == numel && used == nonempty;   /* an unused range overlaps */
        at = hi[next];
        used++;
    }
}

/* Parse and check the layout, open and verify every shard. */
static volt_status src_open_shards(volt_trainer *t, ck_src *c, const char *js) {
    const char *path = c->path;
    char err[768];
#define BAD(...) return volt__terr(t, VOLT_ERR_CORRUPT, __VA_ARGS__)
    if (!(c->index = cJSON_Parse(js))) BAD("checkpoint '%s': the shard index is not valid JSON", path);
    int64_t world = 0, ver = 0;
    const char *dirbase = json_str(c->index, "dir"), *id = json_str(c->index, "id");
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(c->index, "units");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(c->index, "params");
    c->states = cJSON_GetObjectItemCaseSensitive(c->index, "states");
    if (!json_i64(c->index, "version", &ver) || ver != 1 || !json_i64(c->index, "world", &world) || world < 1 ||
        world > (1 << 20) || !dirbase || !id || strchr(dirbase, '/') || !cJSON_IsArray(units) || !cJSON_IsArray(params) ||
        !cJSON_IsArray(c->states))
        BAD("checkpoint '%s': the shard index is malformed (version, world, dir, id, units, params, states)", path);
    c->world = (int)world;
    c->n_units = cJSON_GetArraySize(units);
    c->n_params = cJSON_GetArraySize(params);
    c->units = calloc((size_t)(c->n_units ? c->n_units : 1), sizeof *c->units);
    c->params = calloc((size_t)(c->n_params ? c->n_params : 1), sizeof *c->params);
    c->shards = calloc((size_t)world, sizeof *c->shards);
    if (!c->units || !c->params || !c->shards) return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path);
    for (int u = 0; u < c->n_units; u++) {
        const cJSON *o = cJSON_GetArrayItem(units, u), *rg = cJSON_GetObjectItemCaseSensitive(o, "ranges");
        ck_unit *cu = &c->units[u];
        cu->name = json_str(o, "name");
        if (!cu->name || !json_i64(o, "numel", &cu->numel) || !cJSON_IsArray(rg) || cJSON_GetArraySize(rg) != world)
            BAD("checkpoint '%s': shard index: unit %d is malformed", path, u);
        cu->lo = calloc((size_t)world, sizeof *cu->lo);
        cu->hi = calloc((size_t)world, sizeof *cu->hi);
        if (!cu->lo || !cu->hi) return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path);
        for (int r = 0; r < world; r++) {
            const cJSON *pr = cJSON_GetArrayItem(rg, r);
            if (!cJSON_IsArray(pr) || cJSON_GetArraySize(pr) != 2 || !json_i64(cJSON_GetArrayItem(pr, 0), NULL, &cu->lo[r]) ||
                !json_i64(cJSON_GetArrayItem(pr, 1), NULL, &cu->hi[r]) || cu->lo[r] > cu->hi[r] || cu->hi[r] > cu->numel)
                BAD("checkpoint '%s': shard index: unit '%s' has a bad range for rank %d", path, cu->name, r);
        }
        if (!ranges_tile(cu->lo, cu->hi, (int)world, cu->numel))
            BAD("checkpoint '%s': shard index: the ranks' ranges of unit '%s' do not cover its %lld values exactly once",
                path, cu->name, (long long)cu->numel);
    }
    for (int i = 0; i < c->n_params; i++) {
        const cJSON *o = cJSON_GetArrayItem(params, i), *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
        ck_param *cp = &c->params[i];
        int64_t unit = -1;
        cp->name = json_str(o, "name");
        if (!cp->name || !json_i64(o, "unit", &unit) || unit >= c->n_units || !json_i64(o, "offset", &cp->offset) ||
            !json_i64(o, "numel", &cp->numel) || !cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > VOLT_MAX_DIMS ||
            cp->offset + cp->numel > c->units[unit].numel)
            BAD("checkpoint '%s': shard index: parameter %d is malformed", path, i);
        cp->unit = (int)unit;
        cp->shape.ndim = cJSON_GetArraySize(sh);
        int64_t n = 1;
        for (int d = 0; d < cp->shape.ndim; d++) {
            if (!json_i64(cJSON_GetArrayItem(sh, d), NULL, &cp->shape.d[d]) ||
                (cp->shape.d[d] > 0 && n > INT64_MAX / cp->shape.d[d]))   /* json_i64: 0 <= d <= 2^53 */
                BAD("checkpoint '%s': parameter '%s' has a bad shape", path, cp->name);
            n *= cp->shape.d[d];
        }
        if (n != cp->numel) BAD("checkpoint '%s': parameter '%s': shape and numel disagree", path, cp->name);
    }
    /* the shards: present, intact, from this save, holding what the index says */
    const char *slash = strrchr(path, '/');
    char dir[4096], file[4200];
    if (slash) snprintf(dir, sizeof dir, "%.*s/%s", (int)(slash - path), path, dirbase);
    else snprintf(dir, sizeof dir, "%s", dirbase);
    for (int r = 0; r < world; r++) {
        shard_file(file, sizeof file, dir, r, (int)world);
        volt_status st = volt_st_open(file, &c->shards[r], err, sizeof err);
        if (st < 0) return volt__terr(t, st, "checkpoint '%s': shard %d of %d: %s", path, r, (int)world, err);
        if ((st = volt_st_verify_all(c->shards[r], err, sizeof err)) < 0 ||
            (st = meta_check(c->shards[r], file, !c->legacy, err, sizeof err)) < 0)
            return volt__terr(t, st, "checkpoint '%s': %s", path, err);
        const char *sid = volt_st_meta(c->shards[r], "volt.shard.id");
        if (!sid || strcmp(sid, id) != 0)
            BAD("checkpoint '%s': shard '%s' belongs to another save (id %s, the index says %s)", path, file, sid ? sid : "none", id);
        char name[512];
        for (int u = 0; u < c->n_units; u++)
            for (int k = -1; k < cJSON_GetArraySize(c->states); k++) {
                const cJSON *sn = k >= 0 ? cJSON_GetArrayItem(c->states, k) : NULL;
                if (k >= 0 && !cJSON_IsString(sn)) BAD("checkpoint '%s': shard index: bad state name", path);
                if (k < 0) snprintf(name, sizeof name, "params.%s", c->units[u].name);
                else snprintf(name, sizeof name, "optimizer.%s.%s", sn->valuestring, c->units[u].name);
                volt_st_info info;
                if (volt_st_find(c->shards[r], name, &info) != VOLT_OK || info.dtype != VOLT_F32 ||
                    info.nbytes != sizeof(float) * (size_t)(c->units[u].hi[r] - c->units[u].lo[r]))
                    BAD("checkpoint '%s': shard '%s': tensor '%s' is missing or has another length than the index says", path, file, name);
            }
    }
#undef BAD
    return VOLT_OK;
}

static volt_status src_open(volt_trainer *t, const char *path, ck_src *c) {
    memset(c, 0, sizeof *c);
    c->path = path;
    char err[768];
    volt_status st = volt_st_open(path, &c->f, err, sizeof err);
    if (st < 0) return volt__terr(t, st, "%s", err);
    if ((st = volt_st_verify_all(c->f, err, sizeof err)) < 0) { src_close(c); return volt__terr(t, st, "%s", err); }
    /* a volt checkpoint's metadata is sealed since format 2; format 1 predates the seal */
    const char *fmt = volt_st_meta(c->f, "volt.format");
    c->legacy = fmt && !strcmp(fmt, "1");
    if ((st = meta_check(c->f, path, fmt && !c->legacy, err, sizeof err)) < 0) { src_close(c); return volt__terr(t, st, "%s", err); }
    if (c->legacy && t->rank == 0)
        fprintf(stderr, "volt: warning: checkpoint '%s' was written by an older volt (format 1): its metadata has no checksum\n", path);
    const char *js = volt_st_meta(c->f, SHARD_INDEX_KEY);
    if (js && (st = src_open_shards(t, c, js)) < 0) { src_close(c); return st; }
    return VOLT_OK;
}

static const ck_param *src_param(const ck_src *c, const char *name) {
    for (int i = 0; i < c->n_params; i++)
        if (!strcmp(c->params[i].name, name)) return &c->params[i];
    return NULL;
}

static bool src_has_state(const ck_src *c, const char *state) {
    for (int k = 0; k < cJSON_GetArraySize(c->states); k++)
        if (!strcmp(cJSON_GetArrayItem(c->states, k)->valuestring, state)) return true;
    return false;
}

/* Elements [a, b) of a saved parameter (state == NULL) or of its optimizer state, as f32. */
static void src_read(const ck_src *c, const char *state, const char *pname, int64_t a, int64_t b, float *dst) {
    char name[512];
    if (!c->index) {   /* validated: present, the parameter's shape; values may be 16-bit */
        if (state) snprintf(name, sizeof name, "optimizer.%s.%s", state, pname);
        volt_st_info info;
        if (volt_st_find(c->f, state ? name : pname, &info) != VOLT_OK) return;
        const size_t es = volt_dtype_size(info.dtype);
        volt_convert(dst, VOLT_F32, (const char *)info.data + (size_t)a * es, info.dtype, b - a);
        return;
    }
    const ck_param *p = src_param(c, pname);
    const ck_unit *u = &c->units[p->unit];
    if (state) snprintf(name, sizeof name, "optimizer.%s.%s", state, u->name);
    else snprintf(name, sizeof name, "params.%s", u->name);
    const int64_t ga = p->offset + a, gb = p->offset + b;   /* in the saved unit */
    for (int r = 0; r < c->world; r++) {
        const int64_t x = ga > u->lo[r] ? ga : u->lo[r], y = gb < u->hi[r] ? gb : u->hi[r];
        if (x >= y) continue;
        volt_st_info info;
        if (volt_st_find(c->shards[r], name, &info) != VOLT_OK) continue;   /* validated at open */
        memcpy(dst + (x - ga), (const float *)info.data + (x - u->lo[r]), sizeof(float) * (size_t)(y - x));
    }
}

/* "key: saved -> now" for each key that differs, when both fingerprints are JSON objects;
 * else both texts. */
static void fingerprint_diff(const char *saved, const char *now, char *out, size_t n) {
    cJSON *a = cJSON_Parse(saved), *b = cJSON_Parse(now);
    size_t k = 0;
    out[0] = 0;
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, a) {   /* changed or dropped */
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(b, e->string);
            if (o && cJSON_Compare(e, o, true)) continue;
            char *x = cJSON_PrintUnformatted(e), *y = o ? cJSON_PrintUnformatted(o) : NULL;
            if (k < n) k += (size_t)snprintf(out + k, n - k, "%s%s: %.120s -> %.120s", k ? "; " : "", e->string, x ? x : "?", y ? y : "(absent)");
            free(x);
            free(y);
        }
        cJSON_ArrayForEach(e, b) {   /* new */
            if (cJSON_GetObjectItemCaseSensitive(a, e->string)) continue;
            char *y = cJSON_PrintUnformatted(e);
            if (k < n) k += (size_t)snprintf(out + k, n - k, "%s%s: (absent) -> %.120s", k ? "; " : "", e->string, y ? y : "?");
            free(y);
        }
    }
    if (!out[0]) snprintf(out, n, "saved '%.300s', this run '%.300s'", saved, now);
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* Resuming a fit: the checkpoint's run fingerprint (data and model settings, set by the
 * app) must be this run's, unless resume_anyway (then a warning). A checkpoint without one
 * (older, or a run that set none) gives a warning. */
static volt_status check_fingerprint(volt_trainer *t, volt_st_file *f, const char *path) {
    const char *now = t->cfg.run_fingerprint, *saved = volt_st_meta(f, "volt.run_fingerprint");
    if (!now || (saved && !strcmp(saved, now))) return VOLT_OK;
    if (!saved) {
        if (t->rank == 0)
            fprintf(stderr, "volt: warning: checkpoint '%s' records no run fingerprint; cannot check that it comes from a run "
                    "with this run's data and model settings\n", path);
        return VOLT_OK;
    }
    char diff[1024];
    fingerprint_diff(saved, now, diff, sizeof diff);
    if (t->cfg.resume_anyway) {
        if (t->rank == 0)
            fprintf(stderr, "volt: warning: resuming '%s' from a run with other settings (resume_anyway): %s\n", path, diff);
        return VOLT_OK;
    }
    return volt__terr(t, VOLT_ERR_INVALID_ARG,
                      "checkpoint '%s' comes from a run with other data or model settings: %s (set resume_anyway to resume it anyway)",
                      path, diff);
}

volt_status volt__ckpt_load(volt_trainer *t, const char *path, bool full) {
    ck_src src;
    volt_status st = src_open(t, path, &src);
    if (st < 0) return st;
    volt_st_file *f = src.f;   /* metadata, module extras */
    float *tmp = NULL;

    /* 1. validate: every parameter present with its shape; nothing unexpected */
    for (int i = 0; i < volt_params_count(t->ps); i++) {
        volt_tensor *p = volt_params_at(t->ps, i);
        volt_st_info info = { 0 };
        bool found;
        if (src.index) {
            const ck_param *cp = src_param(&src, p->name);
            found = cp != NULL;
            if (cp) { info.shape = cp->shape; info.dtype = VOLT_F32; }
        } else found = volt_st_find(f, p->name, &info) == VOLT_OK;
        if (!found) {
            src_close(&src);
            return volt__terr(t, VOLT_ERR_NOT_FOUND, "checkpoint '%s': missing parameter '%s'", path, p->name);
        }
        if (!volt_shape_eq(info.shape, p->shape) || (info.dtype != VOLT_F32 && info.dtype != VOLT_BF16 && info.dtype != VOLT_F16)) {
            char a[64], b[64];
            src_close(&src);
            return volt__terr(t, VOLT_ERR_SHAPE, "checkpoint '%s': tensor '%s' is %s %s, the model has f32 %s", path, p->name,
                              volt_dtype_name(info.dtype), volt_shape_str(info.shape, a, sizeof a), volt_shape_str(p->shape, b, sizeof b));
        }
    }
    for (int i = 0; i < (src.index ? src.n_params : volt_st_count(f)); i++) {
        const char *n = src.index ? src.params[i].name : volt_st_name(f, i);
        if (has_prefix(n, "optimizer.") || has_prefix(n, "module.") || volt_params_find(t->ps, n)) continue;
        /* the message first: n lives in the source, which src_close frees */
        volt__terr(t, VOLT_ERR_SHAPE, "checkpoint '%s': unexpected tensor '%s' (the model has no such parameter)", path, n);
        src_close(&src);
        return VOLT_ERR_SHAPE;
    }
    int64_t epoch = 0, gstep = 0, bie = 0, micro = 0, flags = 0, opt_step = 0, opt_kind = -1, sched_step = 0;
    bool have_opt = false, have_sched = false;
    cJSON *cbs = NULL;
    if (full && (st = check_fingerprint(t, f, path)) < 0) { src_close(&src); return st; }
    if (full) {
        if ((st = meta_get_i64(t, f, path, "volt.epoch", &epoch, true)) < 0 ||
            (st = meta_get_i64(t, f, path, "volt.global_step", &gstep, true)) < 0 ||
            (st = meta_get_i64(t, f, path, "volt.batch_in_epoch", &bie, true)) < 0 ||
            (st = meta_get_i64(t, f, path, "volt.micro_step", &micro, true)) < 0 ||
            (st = meta_get_i64(t, f, path, "volt.epoch_flags", &flags, true)) < 0) {
            src_close(&src);
            return st;
        }
        have_opt = meta_get_i64(t, f, path, "volt.optimizer.step", &opt_step, false) == VOLT_OK;
        meta_get_i64(t, f, path, "volt.optimizer.kind", &opt_kind, false);
        have_sched = meta_get_i64(t, f, path, "volt.scheduler.last_step", &sched_step, false) == VOLT_OK;
        if (have_opt && opt_kind != (int64_t)volt_optimizer_get_config(t->opt)->kind) {
            src_close(&src);
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': saved with another optimizer kind (%lld)", path, (long long)opt_kind);
        }
        for (int k = 0; have_opt && k < volt_optimizer_state_count(t->opt); k++) {
            const char *sn = volt_optimizer_state_name(t->opt, k);
            if (src.index) {
                if (src_has_state(&src, sn)) continue;
                src_close(&src);
                return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': optimizer state '%s' is missing from the shards", path, sn);
            }
            for (int i = 0; i < volt_params_count(t->ps); i++) {
                char name[512];
                volt_tensor *p = volt_params_at(t->ps, i);
                volt_st_info info;
                snprintf(name, sizeof name, "optimizer.%s.%s", sn, p->name);
                if (volt_st_find(f, name, &info) != VOLT_OK || info.dtype != VOLT_F32 || !volt_shape_eq(info.shape, p->shape)) {
                    src_close(&src);
                    return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': optimizer state '%s' is missing or has another shape", path, name);
                }
            }
        }
        if ((st = volt__prec_ckpt_load(t, f, path, false)) < 0) { src_close(&src); return st; }   /* validate */
        const char *cj = volt_st_meta(f, "volt.callbacks");
        if (cj && !(cbs = cJSON_Parse(cj))) {
            src_close(&src);
            return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': callback state is not valid JSON", path);
        }
        /* callbacks restore before the model is touched: a rejected state changes nothing */
        for (int i = 0; i < t->n_cbs; i++) {
            if (!t->cbs[i].ops->load_state_dict || !cbs) continue;
            char key[128];
            cb_key(t, i, key, sizeof key);
            cJSON *item = cJSON_GetObjectItemCaseSensitive(cbs, key);
            if (!item) continue;
            char *js = cJSON_PrintUnformatted(item);
            st = t->cbs[i].ops->load_state_dict(t->cbs[i].self, t, js);
            free(js);
            if (st < 0) {
                cJSON_Delete(cbs);
                src_close(&src);
                return hook_err_load(t, st, t->cbs[i].ops->name, path);
            }
        }
        cJSON_Delete(cbs);
    }
    int64_t biggest = 1;
    for (int i = 0; i < volt_params_count(t->ps); i++)
        if (volt_tensor_numel(volt_params_at(t->ps, i)) > biggest) biggest = volt_tensor_numel(volt_params_at(t->ps, i));
    if (!(tmp = malloc(sizeof(float) * (size_t)biggest))) {
        src_close(&src);
        return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path);
    }
    /* 2. apply: full values on every rank (a sharding strategy drops what it does not own
     * at its next step); optimizer states for the range this rank holds */
    for (int i = 0; i < volt_params_count(t->ps); i++) {
        volt_tensor *p = volt_params_at(t->ps, i);
        const int64_t n = volt_tensor_numel(p);
        src_read(&src, NULL, p->name, 0, n, tmp);
        volt_convert(p->data, p->dtype, tmp, VOLT_F32, n);   /* rounded to a 16-bit storage dtype */
    }
    for (int u = 0; u < volt_params_unit_count(t->ps); u++) volt_unit_set_stale(volt_params_unit_at(t->ps, u), false);
    if (full) {
        for (int k = 0; have_opt && k < volt_optimizer_state_count(t->opt); k++)
            for (int i = 0; i < volt_params_count(t->ps); i++) {
                volt_tensor *p = volt_params_at(t->ps, i);
                int64_t lo, hi, off = volt_param_offset(p), n = volt_tensor_numel(p);
                char *buf = volt_optimizer_state_raw(t->opt, volt_unit_index(p->unit), k, &lo, &hi);
                const volt_dtype sdt = volt_optimizer_state_dtype(t->opt);   /* f32, or 16-bit (precision) */
                /* resharding: this rank's range may hold any part of the parameter */
                const int64_t a = off > lo ? off : lo, b = off + n < hi ? off + n : hi;
                if (!buf || a >= b) continue;
                src_read(&src, volt_optimizer_state_name(t->opt, k), p->name, a - off, b - off, tmp);
                volt_convert(buf + (size_t)(a - lo) * volt_dtype_size(sdt), sdt, tmp, VOLT_F32, b - a);
            }
        if (have_opt) volt_optimizer_set_step_count(t->opt, opt_step);
        if (have_sched && t->sched) volt_scheduler_set_last_step(t->sched, sched_step);
        volt__prec_ckpt_load(t, f, path, true);   /* grad scaler; validated above */
        t->epoch = epoch;
        t->global_step = gstep;
        t->batch_in_epoch = bie;
        t->micro_step = micro;
        t->epoch_sched_done = flags & 1;
        t->epoch_val_done = flags & 2;
        t->epoch_done = flags & 4;
        if (t->epoch_done) {   /* saved during on_train_epoch_end: continue with the next epoch */
            t->epoch++;
            t->batch_in_epoch = 0;
            t->epoch_done = t->epoch_sched_done = t->epoch_val_done = false;
        }
    }
    free(tmp);
    if (t->mops->on_load_checkpoint) {
        volt_ckpt ck = { t, NULL, f, path };
        st = t->mops->on_load_checkpoint(t->module, t, &ck);
        if (st < 0) { src_close(&src); return volt__terr(t, st, "module '%s': on_load_checkpoint failed", t->mops->name); }
    }
    src_close(&src);
    return VOLT_OK;
}

/* ---- export ------------------------------------------------------------------------------------ */
volt_status volt_trainer_export_full(volt_trainer *t, const char *path) {
    if (!t->ps || !volt_params_finalized(t->ps)) return volt__terr(t, VOLT_ERR_STATE, "export_full: no model yet");
    if (!path || !*path) return volt__terr(t, VOLT_ERR_INVALID_ARG, "export_full: empty path");
    volt_strategy *sg = t->strategy;
    const bool gather = t->world > 1 && sg->ops->version >= 3 && sg->ops->gather_unit && sg->ops->owned_range;
    volt_status st = VOLT_OK;
    char err[768] = "";
    volt_st_stream *ws = NULL;
    if (t->rank == 0) {   /* header first (names, shapes), then the data unit by unit */
        st = volt_st_stream_create(path, &ws, err, sizeof err);
        for (int i = 0; i < volt_params_count(t->ps) && st >= 0; i++) {
            volt_tensor *p = volt_params_at(t->ps, i);
            st = volt_st_stream_declare(ws, p->name, VOLT_F32, p->shape);
        }
        if (st >= 0) st = volt_st_stream_meta(ws, "volt.module", t->mops && t->mops->name ? t->mops->name : "");
        if (st >= 0) st = volt_st_stream_begin(ws);
        if (st < 0 && ws) snprintf(err, sizeof err, "%s", volt_st_stream_errmsg(ws));
    }
    float *scratch = NULL;
    int64_t cap = 0;
    for (int u = 0; u < volt_params_unit_count(t->ps); u++) {
        volt_unit *un = volt_params_unit_at(t->ps, u);
        const int64_t numel = volt_unit_numel(un);
        int64_t lo, hi;
        owned_range(t, u, &lo, &hi);
        const bool sharded = gather && (lo != 0 || hi != numel);
        const float *vals = volt_unit_data(un);
        if (!vals || sharded) {   /* one unit gathered from the shards, or 16-bit storage (exact in f32) */
            if (numel > cap) {
                float *nb = realloc(scratch, sizeof(float) * (size_t)numel);
                if (!nb) { free(scratch); volt_st_stream_destroy(ws); return volt__terr(t, VOLT_ERR_NOMEM, "export_full: out of memory"); }
                scratch = nb;
                cap = numel;
            }
            if (!sharded) volt_convert(scratch, VOLT_F32, volt_unit_values(un), volt_params_dtype(t->ps), numel);
            else {
                volt_status gs = sg->ops->gather_unit(sg, u, scratch);   /* collective: every rank */
                if (gs < 0) {
                    free(scratch);
                    volt_st_stream_destroy(ws);
                    return volt__terr(t, gs, "export_full '%s': strategy '%s': %s", path, sg->ops->name, sg->ops->errmsg(sg));
                }
            }
            vals = scratch;
        }
        for (int i = 0; ws && st >= 0 && i < volt_unit_param_count(un); i++) {
            volt_tensor *p = volt_unit_param(un, i);
            st = volt_st_stream_write(ws, p->name, vals + volt_param_offset(p));
            if (st < 0) snprintf(err, sizeof err, "%s", volt_st_stream_errmsg(ws));
        }
    }
    free(scratch);
    if (ws && st >= 0) {
        st = volt_st_stream_finish(ws, err, sizeof err);
        ws = NULL;
    }
    volt_st_stream_destroy(ws);
    const bool ok = all_ok(t, st >= 0);
    if (st < 0) return volt__terr(t, st, "export_full '%s': %s", path, err);
    if (!ok) return volt__terr(t, VOLT_ERR_IO, "export_full '%s': rank 0 could not write the file (its log has the reason)", path);
    return VOLT_OK;
}

volt_status volt_checkpoint_remove(const char *path) {
    if (!path || !*path) return VOLT_ERR_INVALID_ARG;
    if (unlink(path) != 0 && errno != ENOENT) return VOLT_ERR_IO;   /* the index first: no half checkpoint */
    return remove_shard_dirs(path, NULL) == 0 ? VOLT_OK : VOLT_ERR_IO;
}
