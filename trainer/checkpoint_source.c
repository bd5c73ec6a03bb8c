/* Opening a checkpoint to load it: one safetensors file, or an index and its shards, every
 * header validated and every tensor this rank will read checked against its crc, then one
 * verdict agreed by all ranks, before anything is applied; and reading any slice of a saved
 * parameter or optimizer state as f32, across the shards of another world size (resharding).
 * See trainer/checkpoint_internal.h; the loader is volt__ckpt_load in checkpoint.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "trainer/checkpoint_internal.h"
#include "volt/safetensors.h"
#include "core/safetensors_internal.h"
#include "volt/precision.h"

/* ---- where the saved values are: one file, or an index and its shards --------------------- */
void src_close(ck_src *c) {
    for (int r = 0; c->shards && r < c->world; r++) volt_st_close(c->shards[r]);
    free(c->shards);
    for (int u = 0; c->units && u < c->n_units; u++) { free(c->units[u].lo); free(c->units[u].hi); }
    free(c->units);
    free(c->params);
    cJSON_Delete(c->index);
    volt_st_close(c->f);
    free(c->buf);
    memset(c, 0, sizeof *c);
}

static bool json_i64(const cJSON *o, const char *k, int64_t *v) {
    const cJSON *x = k ? cJSON_GetObjectItemCaseSensitive(o, k) : o;
    if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 9007199254740992.0 ||
        x->valuedouble != floor(x->valuedouble)) return false;
    *v = (int64_t)x->valuedouble;
    return true;
}

bool ck_json_shape(const cJSON *sh, volt_shape *out) {
    if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > VOLT_MAX_DIMS) return false;
    out->ndim = cJSON_GetArraySize(sh);
    for (int d = 0; d < out->ndim; d++)
        if (!json_i64(cJSON_GetArrayItem(sh, d), NULL, &out->d[d])) return false;
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

/* The non-empty ranges in rank order: each starts at or after where the earlier ranks' ended
 * (with ranges_tile: rank r's slice follows rank r-1's, as every strategy lays them out). */
static bool ranges_in_rank_order(const int64_t *lo, const int64_t *hi, int world) {
    int64_t end = 0;
    for (int r = 0; r < world; r++) {
        if (lo[r] >= hi[r]) continue;
        if (lo[r] < end) return false;
        end = hi[r];
    }
    return true;
}

static int by_unit_offset(const void *a, const void *b) {
    const ck_param *x = *(const ck_param *const *)a, *y = *(const ck_param *const *)b;
    if (x->unit != y->unit) return x->unit < y->unit ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Two parameters of one unit whose extents [offset, offset + numel) overlap (a load would
 * apply one's values to both): the index of one, else -1 (-2: out of memory). */
static int params_overlap(ck_param *ps, int n) {
    if (n < 2) return -1;
    ck_param **o = malloc((size_t)n * sizeof *o);
    if (!o) return -2;
    for (int i = 0; i < n; i++) o[i] = &ps[i];
    qsort(o, (size_t)n, sizeof *o, by_unit_offset);
    int bad = -1;
    int64_t end = 0;   /* of the unit's parameters so far */
    for (int i = 0; i < n && bad < 0; i++) {
        if (i == 0 || o[i]->unit != o[i - 1]->unit) end = 0;
        if (o[i]->numel <= 0) continue;
        if (o[i]->offset < end) bad = (int)(o[i] - ps);
        if (o[i]->offset + o[i]->numel > end) end = o[i]->offset + o[i]->numel;
    }
    free(o);
    return bad;
}

/* volt_st_open_some's selection for a load without the optimizer (validate, test, predict):
 * the states' bytes (two thirds of an Adam checkpoint) stay in the file, unread, unchecked */
static bool not_state(const char *name, void *ctx) {
    (void)ctx;
    return strncmp(name, "optimizer.", 10) != 0;
}

/* What an unsharded load reads one tensor at a time (volt_st_open_deferred): the model's
 * parameters and their optimizer states ("optimizer.<state>.<name>"), the bulk of the file. */
static bool deferred_tensor(const char *name, void *ctx) {
    const volt_trainer *t = ctx;
    if (!strncmp(name, "optimizer.", 10)) {
        const char *dot = strchr(name + 10, '.');
        if (!dot) return false;
        name = dot + 1;
    }
    return t->ps && volt_params_find(t->ps, name) != NULL;
}

static bool all_tensors(const char *name, void *ctx) { (void)name; (void)ctx; return true; }

/* What this rank reads of each shard, and so all it checks: of "params.<unit>" the part its
 * parameters cover (every rank applies every parameter whole: every shard's values, padding
 * aside), of each optimizer state the slice its own range covers (the hull over its
 * parameters; none at all from a shard it holds nothing of). Everything else in a shard is left
 * in the file (volt__st_leave): neither read nor checked, here or by the reads that apply. A
 * kept slice is still checked by reading its whole tensor against the stored crc. The ranks
 * then agree on one verdict (src_agree) before any of them applies anything. */
static volt_status keep_read_slices(volt_trainer *t, ck_src *c) {
    const int K = c->states_read && t->opt ? volt_optimizer_state_count(t->opt) : 0, S = K + 1;   /* 0: values; 1 + k: state k */
    const size_t cells = (size_t)c->world * (size_t)(c->n_units ? c->n_units : 1) * (size_t)S;
    int64_t *lo = malloc(cells * sizeof *lo), *hi = malloc(cells * sizeof *hi);
    if (!lo || !hi) { free(lo); free(hi); return VOLT_ERR_NOMEM; }
    for (size_t i = 0; i < cells; i++) { lo[i] = INT64_MAX; hi[i] = -1; }
    for (int k = -1; k < K; k++)
        for (int i = 0; t->ps && i < volt_params_count(t->ps); i++) {
            volt_tensor *p = volt_params_at(t->ps, i);
            const ck_param *cp = src_param(c, p->name);
            int64_t slo = 0, shi = 0, off = volt_param_offset(p), n = volt_tensor_numel(p);
            if (!cp || (k >= 0 && !volt_optimizer_state_raw(t->opt, volt_unit_index(p->unit), k, &slo, &shi))) continue;
            if (k < 0) { slo = off; shi = off + n; }   /* the values: whole */
            const int64_t a = off > slo ? off : slo, b = off + n < shi ? off + n : shi;   /* as volt__ckpt_load applies */
            if (a >= b) continue;
            const int64_t ga = cp->offset + (a - off), gb = cp->offset + (b - off);   /* in the saved unit */
            const ck_unit *u = &c->units[cp->unit];
            for (int r = 0; r < c->world; r++) {
                const int64_t x = ga > u->lo[r] ? ga : u->lo[r], y = gb < u->hi[r] ? gb : u->hi[r];
                const size_t at = ((size_t)r * (size_t)c->n_units + (size_t)cp->unit) * (size_t)S + (size_t)(k + 1);
                if (x >= y) continue;
                if (x - u->lo[r] < lo[at]) lo[at] = x - u->lo[r];
                if (y - u->lo[r] > hi[at]) hi[at] = y - u->lo[r];
            }
        }
    char name[512];
    for (int r = 0; r < c->world; r++) {
        (void)volt__st_leave(c->shards[r], NULL);   /* what is kept below is taken back */
        for (int u = 0; u < c->n_units; u++)
            for (int k = -1; k < K; k++) {
                const size_t at = ((size_t)r * (size_t)c->n_units + (size_t)u) * (size_t)S + (size_t)(k + 1);
                if (hi[at] < 0) continue;
                if (k < 0) snprintf(name, sizeof name, "params.%s", c->units[u].name);
                else if (!src_has_state(c, volt_optimizer_state_name(t->opt, k))) continue;
                else snprintf(name, sizeof name, "optimizer.%s.%s", volt_optimizer_state_name(t->opt, k), c->units[u].name);
                (void)volt__st_keep_range(c->shards[r], name, (uint64_t)lo[at] * sizeof(float), (uint64_t)hi[at] * sizeof(float));
            }
    }
    free(lo);
    free(hi);
    return VOLT_OK;
}

/* An unsharded file loaded under a sharding strategy: of each optimizer state this rank reads
 * only the states of the parameters its range covers, and of those the slice it holds; the
 * rest is left in the file (the parameters are applied whole on every rank). */
static void keep_state_ranges(volt_trainer *t, ck_src *c) {
    const int K = c->states_read && t->opt && t->ps ? volt_optimizer_state_count(t->opt) : 0;
    char name[512];
    for (int k = 0; k < K; k++)
        for (int i = 0; i < volt_params_count(t->ps); i++) {
            volt_tensor *p = volt_params_at(t->ps, i);
            int64_t lo = 0, hi = 0, off = volt_param_offset(p), n = volt_tensor_numel(p);
            volt_st_info info;
            snprintf(name, sizeof name, "optimizer.%s.%s", volt_optimizer_state_name(t->opt, k), p->name);
            if (volt_st_find(c->f, name, &info) != VOLT_OK || info.data) continue;   /* not deferred */
            const bool held = volt_optimizer_state_raw(t->opt, volt_unit_index(p->unit), k, &lo, &hi) != NULL;
            const int64_t a = off > lo ? off : lo, b = off + n < hi ? off + n : hi;   /* as volt__ckpt_load applies */
            const uint64_t es = volt_dtype_size(info.dtype);
            if (!held || a >= b) (void)volt__st_leave(c->f, name);
            else (void)volt__st_keep_range(c->f, name, (uint64_t)(a - off) * es, (uint64_t)(b - off) * es);
        }
}

/* One verdict for every rank. Each rank checked only what it applies, so a bad tensor may be
 * seen by one rank alone; before anything is applied the ranks agree (and again after the
 * apply, volt__ckpt_load, in case a file changed in between): an all-reduce of one flag
 * per rank (rank r's slot is nonzero when its open failed), then the lowest failing rank
 * broadcasts its status and message and every rank fails with the same words. A rank that died
 * or stalls makes the all-reduce time out on the others (VOLT_COMM_TIMEOUT): an error naming the
 * checkpoint, never a hang. st: this rank's result so far (its message on t). */
volt_status src_agree(volt_trainer *t, const char *path, volt_status st, const char *outcome) {
    char what[700];
    snprintf(what, sizeof what, "checkpoint '%.600s': whether every rank read it intact", path);
    return volt__agree_status(t, st, what, outcome);
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
        if (!ranges_in_rank_order(cu->lo, cu->hi, (int)world))   /* every strategy's slices are: a swap is damage */
            BAD("checkpoint '%s': shard index: the ranks' ranges of unit '%s' are not in rank order (rank r's slice follows "
                "rank r-1's in every save)", path, cu->name);
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
        int64_t n = 1;
        if (!ck_json_shape(sh, &cp->shape)) BAD("checkpoint '%s': parameter '%s' has a bad shape", path, cp->name);
        for (int d = 0; d < cp->shape.ndim; d++) {
            if (cp->shape.d[d] > 0 && n > INT64_MAX / cp->shape.d[d])   /* ck_json_shape: 0 <= d <= 2^53 */
                BAD("checkpoint '%s': parameter '%s' has a bad shape", path, cp->name);
            n *= cp->shape.d[d];
        }
        if (n != cp->numel) BAD("checkpoint '%s': parameter '%s': shape and numel disagree", path, cp->name);
    }
    const int ov = params_overlap(c->params, c->n_params);
    if (ov == -2) return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path);
    if (ov >= 0)
        BAD("checkpoint '%s': shard index: parameter '%s' overlaps another parameter of unit '%s'", path, c->params[ov].name,
            c->units[c->params[ov].unit].name);
    /* the shards: present, intact, from this save, holding what the index says */
    const char *slash = strrchr(path, '/');
    char dir[4096], file[4200];
    if (slash) snprintf(dir, sizeof dir, "%.*s/%s", (int)(slash - path), path, dirbase);
    else snprintf(dir, sizeof dir, "%s", dirbase);
    for (int r = 0; r < world; r++) {
        shard_file(file, sizeof file, dir, r, (int)world);
        /* every tensor stays in the file (all_tensors): checked through in pieces below, then
         * read one at a time, only the slice this rank applies (src_get) */
        volt_status st = volt_st_open_deferred(file, c->states_read ? NULL : not_state, all_tensors, NULL, &c->shards[r], err,
                                               sizeof err);
        if (st < 0) return volt__terr(t, st, "checkpoint '%s': shard %d of %d: %s", path, r, (int)world, err);
        if ((st = meta_check(c->shards[r], file, !c->legacy, err, sizeof err)) < 0) return volt__terr(t, st, "checkpoint '%s': %s", path, err);
        const char *sid = volt_st_meta(c->shards[r], "volt.shard.id");
        if (!sid || strcmp(sid, id) != 0)
            BAD("checkpoint '%s': shard '%s' belongs to another save (id %s, the index says %s)", path, file, sid ? sid : "none", id);
        /* the file at rank r's place holds rank r's slices: a moved or renamed shard of the same save
         * has the right id and lengths but another rank's values */
        const char *srank = volt_st_meta(c->shards[r], "volt.shard.rank"), *sworld = volt_st_meta(c->shards[r], "volt.shard.world");
        char want_r[24], want_w[24];
        snprintf(want_r, sizeof want_r, "%d", r);
        snprintf(want_w, sizeof want_w, "%d", (int)world);
        if (!srank || !sworld || strcmp(srank, want_r) != 0 || strcmp(sworld, want_w) != 0)
            BAD("checkpoint '%s': shard '%s' was written by rank %s of %s, not rank %d of %d as its place in the folder "
                "says (shard files moved or renamed?)", path, file, srank ? srank : "?", sworld ? sworld : "?", r, (int)world);
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
    volt_status st = keep_read_slices(t, c);
    if (st < 0) return volt__terr(t, st, "checkpoint '%s': out of memory", path);
    /* each rank checks what it will read (the headers above: every one it opened), before
     * anything is applied; src_open's caller agrees on the verdict with the other ranks */
    size_t cap = c->buf_cap;   /* the index's own deferred tensors, if any */
    for (int r = 0; r < world; r++) {
        if ((st = volt_st_check(c->shards[r], err, sizeof err)) < 0) return volt__terr(t, st, "checkpoint '%s': %s", path, err);
        const size_t m = volt__st_deferred_max_bytes(c->shards[r]);
        if (m > cap) cap = m;
    }
    if (cap > c->buf_cap) {
        free(c->buf);
        c->buf_cap = 0;
        if (!(c->buf = malloc(cap)))
            return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory (%zu bytes to read a shard tensor)", path, cap);
        c->buf_cap = cap;
    }
#undef BAD
    return VOLT_OK;
}

static volt_status src_open_local(volt_trainer *t, const char *path, bool states, ck_src *c) {
    memset(c, 0, sizeof *c);
    c->path = path;
    c->states_read = states;
    char err[768];
    volt_status st = volt_st_open_deferred(path, states ? NULL : not_state, deferred_tensor, t, &c->f, err, sizeof err);
    if (st < 0) return volt__terr(t, st, "%s", err);
    /* every tensor this rank will read is checked now, the deferred ones read through in pieces,
     * before anything is applied; src_get checks each again as it reads it */
    if (!volt_st_meta(c->f, SHARD_INDEX_KEY)) keep_state_ranges(t, c);
    if ((st = volt_st_check(c->f, err, sizeof err)) < 0) { src_close(c); return volt__terr(t, st, "%s", err); }
    if ((c->buf_cap = volt__st_deferred_max_bytes(c->f)) && !(c->buf = malloc(c->buf_cap))) {
        src_close(c);
        return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory (%zu bytes to read a tensor)", path, c->buf_cap);
    }
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

/* What this rank opened, as 64 bits: FNV-1a over every metadata entry of the file (or of a
 * sharded checkpoint's index): the sealed loop state, the shard layout with its save's id, and
 * the "crc32:<tensor>" entries, so the same bytes give the same value on every node. */
static uint64_t opened_fingerprint(const ck_src *c) {
    uint64_t h = VOLT__FNV_START;
    for (int i = 0; c->f && i < volt_st_meta_count(c->f); i++) {
        const char *k = NULL, *v = NULL;
        if (volt_st_meta_at(c->f, i, &k, &v) < 0) continue;
        h = volt__fnv_str(volt__fnv_str(h, k), v);
    }
    return h;
}

/* Every rank opened the same checkpoint: rank 0's fingerprint (one small broadcast, made by
 * every rank whatever its open gave) against this rank's. A relative path under another
 * working directory, or a node-local copy that is stale, would otherwise load other weights
 * on some ranks without a word (ddp) or mix two runs (sharded). st: this rank's open so far. */
static volt_status same_checkpoint(volt_trainer *t, const char *path, volt_status st, const ck_src *c) {
    if (t->world <= 1 || !t->strategy) return st;
    uint64_t fp[2] = { st >= 0 ? 1u : 0u, st >= 0 ? opened_fingerprint(c) : 0 }, r0[2];
    memcpy(r0, fp, sizeof fp);
    volt_status cs = volt__strategy_broadcast(t->strategy, r0, sizeof r0, 0, "checkpoint fingerprint");
    if (st < 0) return st;
    if (cs < 0)
        return volt__terr(t, cs, "checkpoint '%s': the ranks could not compare what they opened (strategy '%s'): %s", path,
                          volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
    if (r0[0] && r0[1] != fp[1])
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': rank %d opened a different checkpoint at '%s' than rank 0 "
                          "(another file under that path on this rank: a relative path with another working directory, "
                          "or a stale node-local copy?)", path, t->rank, path);
    return VOLT_OK;
}

volt_status src_open(volt_trainer *t, const char *path, bool states, ck_src *c) {
    memset(c, 0, sizeof *c);
    VOLT_TRY(ck_entry_vote(t, CK_ENTRY_LOAD, "load", path));
    volt_status st = src_open_local(t, path, states, c);
    st = same_checkpoint(t, path, st, c);
    if ((st = src_agree(t, path, st, "no rank applied anything")) < 0 && c->path) src_close(c);   /* another rank's verdict */
    return st;
}

const ck_param *src_param(const ck_src *c, const char *name) {
    for (int i = 0; i < c->n_params; i++)
        if (!strcmp(c->params[i].name, name)) return &c->params[i];
    return NULL;
}

bool src_has_state(const ck_src *c, const char *state) {
    for (int k = 0; k < cJSON_GetArraySize(c->states); k++)
        if (!strcmp(cJSON_GetArrayItem(c->states, k)->valuestring, state)) return true;
    return false;
}

/* The deferred tensor `name` of file f, its kept bytes in c->buf: read unless it is the one
 * already there (the key is the file's own entry: no name is copied). NULL with c->err. */
static const char *src_read(ck_src *c, const volt_st_file *f, const char *name) {
    const void *key = st_lookup(f, name);
    if (key && key == c->buf_key) return (const char *)c->buf;
    c->buf_key = NULL;
    if ((c->err_st = volt_st_read_deferred(f, name, c->buf, c->buf_cap, c->err, sizeof c->err)) < 0) return NULL;
    c->buf_key = key;
    return (const char *)c->buf;
}

/* Elements [a, b) of a saved parameter (state == NULL) or of its optimizer state, as f32:
 * the tensor just read where it is f32 in one piece (a volt checkpoint's weights and states; a
 * slice inside one shard), else converted or joined into scratch. */
const float *src_get(ck_src *c, const char *state, const char *pname, int64_t a, int64_t b, float *scratch) {
    char name[512];
    if (!c->index) {   /* validated: present, the parameter's shape; values may be 16-bit */
        if (state) snprintf(name, sizeof name, "optimizer.%s.%s", state, pname);
        const char *nm = state ? name : pname;
        volt_st_info info;
        if (volt_st_find(c->f, nm, &info) != VOLT_OK) return scratch;
        const char *data = info.data;
        uint64_t ka = 0;   /* deferred: the buffer holds the kept bytes [ka, kb) (keep_state_ranges) */
        if (!data && info.nbytes) {
            if (!(data = src_read(c, c->f, nm))) return NULL;   /* deferred: once for all its slices */
            ka = st_lookup(c->f, nm)->ka;
        }
        if (!data) return scratch;
        const size_t es = volt_dtype_size(info.dtype);
        const char *at = data + ((size_t)a * es - (size_t)ka);
        if (info.dtype == VOLT_F32 && ((uintptr_t)at & 3) == 0) return (const float *)at;
        volt_convert(scratch, VOLT_F32, at, info.dtype, b - a);
        return scratch;
    }
    const ck_param *p = src_param(c, pname);
    const ck_unit *u = &c->units[p->unit];
    if (state) snprintf(name, sizeof name, "optimizer.%s.%s", state, u->name);
    else snprintf(name, sizeof name, "params.%s", u->name);
    const int64_t ga = p->offset + a, gb = p->offset + b;   /* in the saved unit */
    for (int r = 0; r < c->world; r++) {
        const int64_t x = ga > u->lo[r] ? ga : u->lo[r], y = gb < u->hi[r] ? gb : u->hi[r];
        if (x >= y) continue;
        const st_rentry *e = st_lookup(c->shards[r], name);   /* validated at open: present, f32, deferred */
        const char *data = e ? src_read(c, c->shards[r], name) : NULL;
        if (!data) return NULL;
        /* the buffer holds the kept bytes [ka, kb) of the shard's slice (keep_state_slices) */
        const uint64_t from = (uint64_t)(x - u->lo[r]) * sizeof(float), to = (uint64_t)(y - u->lo[r]) * sizeof(float);
        if (from < e->ka || to > e->kb) {
            c->err_st = VOLT_ERR_STATE;
            snprintf(c->err, sizeof c->err, "checkpoint '%s': shard %d: tensor '%s': elements [%lld, %lld) were not kept to be read",
                     c->path, r, name, (long long)(x - u->lo[r]), (long long)(y - u->lo[r]));
            return NULL;
        }
        const float *at = (const float *)(data + (from - e->ka));
        if (x == ga && y == gb) return at;   /* all in this shard */
        memcpy(scratch + (x - ga), at, sizeof(float) * (size_t)(y - x));
    }
    return scratch;
}
