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
#include "trainer/trainer_internal.h"
#include "volt/safetensors.h"
#include "volt/precision.h"

#define CKPT_FORMAT_VERSION "1"

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

/* Optimizer states sharded over ranks (ZeRO/FSDP: some unit's range is a slice)? */
static bool optim_sharded(volt_trainer *t) {
    for (int u = 0; t->opt && u < volt_params_unit_count(t->ps); u++) {
        int64_t lo = 0, hi = 0;
        volt_optimizer_range(t->opt, u, &lo, &hi);
        if (lo != 0 || hi != volt_unit_numel(volt_params_unit_at(t->ps, u))) return true;
    }
    return false;
}

/* Optimizer states as "optimizer.<state>.<param>" full tensors. Sharded states are gathered
 * unit by unit (one unit's scratch at a time, on every rank: the gather is collective, so
 * every rank runs this loop in the same order); rank 0 (w != NULL) adds copies. */
static volt_status save_optim_states(volt_trainer *t, volt_st_writer *w, const char *path) {
    volt_strategy *sg = t->strategy;
    const bool can_gather = sg->ops->version >= 3 && sg->ops->gather_unit;
    float *full = NULL;
    int64_t full_cap = 0;
    volt_status st = VOLT_OK;
    char name[512];
    for (int k = 0; k < volt_optimizer_state_count(t->opt); k++) {
        const char *sn = volt_optimizer_state_name(t->opt, k);
        for (int u = 0; u < volt_params_unit_count(t->ps); u++) {
            volt_unit *un = volt_params_unit_at(t->ps, u);
            const int64_t numel = volt_unit_numel(un);
            int64_t lo = 0, hi = 0;
            float *buf = volt_optimizer_state(t->opt, u, k, &lo, &hi);
            const float *src = buf ? buf - lo : NULL;     /* indexed by unit offset */
            const void *raw16 = buf ? NULL : volt_optimizer_state_raw(t->opt, u, k, &lo, &hi);
            if (raw16 && hi > lo) {   /* 16-bit states (precision): saved as f32, exactly */
                if (numel > full_cap) {
                    float *nf = realloc(full, sizeof(float) * (size_t)numel);
                    if (!nf) { free(full); return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path); }
                    full = nf;
                    full_cap = numel;
                }
                volt_convert(full + lo, VOLT_F32, raw16, volt_optimizer_state_dtype(t->opt), hi - lo);
                src = full;
            }
            if ((lo != 0 || hi != numel) && can_gather && sg->world > 1) {
                if (numel > full_cap) {
                    float *nf = realloc(full, sizeof(float) * (size_t)numel);
                    if (!nf) { free(full); return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path); }
                    full = nf;
                    full_cap = numel;
                }
                volt_status gs = buf ? sg->ops->gather_unit(sg, u, buf - lo, full) : VOLT_ERR_STATE;
                if (gs < 0) {
                    free(full);
                    return volt__terr(t, gs, "checkpoint '%s': strategy '%s': %s", path, sg->ops->name, sg->ops->errmsg(sg));
                }
                src = full;
                lo = 0;
                hi = numel;
            }
            for (int i = 0; w && st >= 0 && i < volt_unit_param_count(un); i++) {
                volt_tensor *p = volt_unit_param(un, i);
                const int64_t off = volt_param_offset(p);
                if (!src || lo > off || hi < off + volt_tensor_numel(p)) continue;   /* not held here */
                snprintf(name, sizeof name, "optimizer.%s.%s", sn, p->name);
                st = src == full ? volt_st_writer_add_copy(w, name, VOLT_F32, p->shape, src + off)
                                 : volt_st_writer_add(w, name, VOLT_F32, p->shape, src + off);
            }
        }
    }
    free(full);
    return st;
}

volt_status volt_trainer_save_checkpoint(volt_trainer *t, const char *path) {
    if (!t->ps || !volt_params_finalized(t->ps)) return volt__terr(t, VOLT_ERR_STATE, "save_checkpoint: no model yet");
    volt_strategy *sg = t->strategy;
    volt_status st = VOLT_OK;
    /* collective parts first (every rank calls save): full params, sharded optimizer states */
    if (sg->ops->version >= 2 && sg->ops->materialize_params && (st = sg->ops->materialize_params(sg)) < 0)
        return volt__terr(t, st, "checkpoint '%s': strategy '%s': %s", path, sg->ops->name, sg->ops->errmsg(sg));
    const bool gather = t->opt && t->world > 1 && optim_sharded(t);
    if (t->rank != 0) {
        if (!gather) return VOLT_OK;
        st = save_optim_states(t, NULL, path);
        return st < 0 ? st : VOLT_OK;
    }
    volt_st_writer *w;
    if ((st = volt_st_writer_create(&w)) < 0) {
        if (gather) save_optim_states(t, NULL, path);   /* the other ranks wait in its gathers */
        return volt__terr(t, st, "checkpoint '%s': cannot create the writer", path);
    }
    for (int i = 0; i < volt_params_count(t->ps) && st >= 0; i++) {
        volt_tensor *p = volt_params_at(t->ps, i);
        st = volt__ckpt_add_param(t, w, p);   /* f32 whatever the storage dtype */
    }
    if (t->opt) {
        /* runs even after an error above when other ranks wait in its gathers */
        if (st >= 0 || gather) {
            volt_status s2 = save_optim_states(t, st >= 0 ? w : NULL, path);
            if (st >= 0) st = s2;
        }
        if (st >= 0) st = meta_i64(w, "volt.optimizer.step", volt_optimizer_step_count(t->opt));
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
    if (st >= 0 && t->log_dir) st = volt_st_writer_meta(w, "volt.log_dir", t->log_dir);
    if (st >= 0) {
        char *cbj = callbacks_json(t);
        st = volt_st_writer_meta(w, "volt.callbacks", cbj ? cbj : "{}");
        free(cbj);
    }
    if (st >= 0 && t->mops && t->mops->on_save_checkpoint) {
        volt_ckpt ck = { t, w, NULL, path };
        st = t->mops->on_save_checkpoint(t->module, t, &ck);
        if (st < 0) { volt_st_writer_destroy(w); return volt__terr(t, st, "module '%s': on_save_checkpoint failed", t->mops->name); }
    }
    if (st < 0) {
        volt__terr(t, st, "checkpoint '%s': %s", path, volt_st_writer_errmsg(w));
        volt_st_writer_destroy(w);
        return st;
    }
    char err[512];
    st = volt_st_writer_write(w, path, err, sizeof err);
    volt_st_writer_destroy(w);
    if (st < 0) return volt__terr(t, st, "%s", err);
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

volt_status volt__ckpt_load(volt_trainer *t, const char *path, bool full) {
    char err[768];
    volt_st_file *f = NULL;
    volt_status st = volt_st_open(path, &f, err, sizeof err);
    if (st < 0) return volt__terr(t, st, "%s", err);
    st = volt_st_verify_all(f, err, sizeof err);
    if (st < 0) { volt_st_close(f); return volt__terr(t, st, "%s", err); }

    /* 1. validate: every parameter present with its shape; nothing unexpected */
    for (int i = 0; i < volt_params_count(t->ps); i++) {
        volt_tensor *p = volt_params_at(t->ps, i);
        volt_st_info info;
        if (volt_st_find(f, p->name, &info) != VOLT_OK) {
            volt_st_close(f);
            return volt__terr(t, VOLT_ERR_NOT_FOUND, "checkpoint '%s': missing parameter '%s'", path, p->name);
        }
        if (!volt_shape_eq(info.shape, p->shape) || (info.dtype != VOLT_F32 && info.dtype != VOLT_BF16 && info.dtype != VOLT_F16)) {
            char a[64], b[64];
            volt_st_close(f);
            return volt__terr(t, VOLT_ERR_SHAPE, "checkpoint '%s': tensor '%s' is %s %s, the model has f32 %s", path, p->name,
                              volt_dtype_name(info.dtype), volt_shape_str(info.shape, a, sizeof a), volt_shape_str(p->shape, b, sizeof b));
        }
    }
    for (int i = 0; i < volt_st_count(f); i++) {
        const char *n = volt_st_name(f, i);
        if (has_prefix(n, "optimizer.") || has_prefix(n, "module.") || volt_params_find(t->ps, n)) continue;
        volt_st_close(f);
        return volt__terr(t, VOLT_ERR_SHAPE, "checkpoint '%s': unexpected tensor '%s' (the model has no such parameter)", path, n);
    }
    int64_t epoch = 0, gstep = 0, bie = 0, micro = 0, flags = 0, opt_step = 0, opt_kind = -1, sched_step = 0;
    bool have_opt = false, have_sched = false;
    cJSON *cbs = NULL;
    if (full) {
        if ((st = meta_get_i64(t, f, path, "volt.epoch", &epoch, true)) < 0 ||
            (st = meta_get_i64(t, f, path, "volt.global_step", &gstep, true)) < 0 ||
            (st = meta_get_i64(t, f, path, "volt.batch_in_epoch", &bie, true)) < 0 ||
            (st = meta_get_i64(t, f, path, "volt.micro_step", &micro, true)) < 0 ||
            (st = meta_get_i64(t, f, path, "volt.epoch_flags", &flags, true)) < 0) {
            volt_st_close(f);
            return st;
        }
        have_opt = meta_get_i64(t, f, path, "volt.optimizer.step", &opt_step, false) == VOLT_OK;
        meta_get_i64(t, f, path, "volt.optimizer.kind", &opt_kind, false);
        have_sched = meta_get_i64(t, f, path, "volt.scheduler.last_step", &sched_step, false) == VOLT_OK;
        if (have_opt && opt_kind != (int64_t)volt_optimizer_get_config(t->opt)->kind) {
            volt_st_close(f);
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': saved with another optimizer kind (%lld)", path, (long long)opt_kind);
        }
        for (int k = 0; have_opt && k < volt_optimizer_state_count(t->opt); k++)
            for (int i = 0; i < volt_params_count(t->ps); i++) {
                char name[512];
                volt_tensor *p = volt_params_at(t->ps, i);
                volt_st_info info;
                snprintf(name, sizeof name, "optimizer.%s.%s", volt_optimizer_state_name(t->opt, k), p->name);
                if (volt_st_find(f, name, &info) != VOLT_OK || info.dtype != VOLT_F32 || !volt_shape_eq(info.shape, p->shape)) {
                    volt_st_close(f);
                    return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': optimizer state '%s' is missing or has another shape", path, name);
                }
            }
        if ((st = volt__prec_ckpt_load(t, f, path, false)) < 0) { volt_st_close(f); return st; }   /* validate */
        const char *cj = volt_st_meta(f, "volt.callbacks");
        if (cj && !(cbs = cJSON_Parse(cj))) {
            volt_st_close(f);
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
                volt_st_close(f);
                return hook_err_load(t, st, t->cbs[i].ops->name, path);
            }
        }
        cJSON_Delete(cbs);
    }
    /* 2. apply */
    for (int i = 0; i < volt_params_count(t->ps); i++) {
        volt_tensor *p = volt_params_at(t->ps, i);
        st = volt__ckpt_read_param(t, f, p, err, sizeof err);   /* rounded to a 16-bit storage dtype */
        if (st < 0) { volt_st_close(f); return volt__terr(t, st, "%s", err); }
    }
    if (full) {
        for (int k = 0; have_opt && k < volt_optimizer_state_count(t->opt); k++)
            for (int i = 0; i < volt_params_count(t->ps); i++) {
                char name[512];
                volt_tensor *p = volt_params_at(t->ps, i);
                int64_t lo, hi, off = volt_param_offset(p), n = volt_tensor_numel(p);
                char *buf = volt_optimizer_state_raw(t->opt, volt_unit_index(p->unit), k, &lo, &hi);
                const volt_dtype sdt = volt_optimizer_state_dtype(t->opt);   /* f32, or 16-bit (precision) */
                /* resharding: this rank's range may hold any part of the parameter */
                const int64_t a = off > lo ? off : lo, b = off + n < hi ? off + n : hi;
                if (!buf || a >= b) continue;
                snprintf(name, sizeof name, "optimizer.%s.%s", volt_optimizer_state_name(t->opt, k), p->name);
                volt_st_info info;
                if (volt_st_find(f, name, &info) == VOLT_OK)   /* validated above: f32, p's shape */
                    volt_convert(buf + (size_t)(a - lo) * volt_dtype_size(sdt), sdt,
                                 (const char *)info.data + (size_t)(a - off) * sizeof(float), VOLT_F32, b - a);
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
        const char *ld = volt_st_meta(f, "volt.log_dir");
        if (ld) volt_trainer_set_log_dir(t, ld);
    }
    if (t->mops->on_load_checkpoint) {
        volt_ckpt ck = { t, NULL, f, path };
        st = t->mops->on_load_checkpoint(t->module, t, &ck);
        if (st < 0) { volt_st_close(f); return volt__terr(t, st, "module '%s': on_load_checkpoint failed", t->mops->name); }
    }
    volt_st_close(f);
    return VOLT_OK;
}

/* ---- which slice of a unit this rank holds ------------------------------------------------- */
static void owned_range(volt_trainer *t, int u, int64_t *lo, int64_t *hi) {
    volt_strategy *sg = t->strategy;
    *lo = 0;
    *hi = volt_unit_numel(volt_params_unit_at(t->ps, u));
    if (t->world > 1 && sg->ops->version >= 3 && sg->ops->owned_range) sg->ops->owned_range(sg, u, lo, hi);
}

/* Every rank gets the same verdict: ok is this rank's, the result is false when any rank's was. */
static bool all_ok(volt_trainer *t, bool ok) {
    if (t->world <= 1) return ok;
    double bad = ok ? 0.0 : 1.0;
    if (t->strategy->ops->all_reduce_mean(t->strategy, &bad, 1) < 0) return false;
    return bad == 0.0;
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
        if (!vals || sharded) {   /* 16-bit storage (exact in f32), or one unit gathered from the shards */
            if (numel > cap) {
                float *nb = realloc(scratch, sizeof(float) * (size_t)numel);
                if (!nb) { free(scratch); volt_st_stream_destroy(ws); return volt__terr(t, VOLT_ERR_NOMEM, "export_full: out of memory"); }
                scratch = nb;
                cap = numel;
            }
            if (!vals) volt_convert(scratch, VOLT_F32, volt_unit_values(un), volt_params_dtype(t->ps), numel);
            else {
                volt_status gs = sg->ops->gather_unit(sg, u, vals, scratch);   /* collective: every rank */
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

/* ---- removal ------------------------------------------------------------------------------------ */
/* The shard folder an index file names ("volt.shards" JSON, key "dir", relative to the
 * index's folder) into buf; false when path is not a sharded checkpoint. */
static bool shard_dir_of(const char *path, char *buf, size_t n) {
    volt_st_file *f = NULL;
    char err[256];
    if (volt_st_open(path, &f, err, sizeof err) < 0) return false;
    const char *js = volt_st_meta(f, "volt.shards");
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    const cJSON *d = root ? cJSON_GetObjectItemCaseSensitive(root, "dir") : NULL;
    bool ok = cJSON_IsString(d) && d->valuestring[0] && !strchr(d->valuestring, '/') && strcmp(d->valuestring, "..") != 0;
    if (ok) {
        const char *slash = strrchr(path, '/');
        if (slash) ok = snprintf(buf, n, "%.*s/%s", (int)(slash - path), path, d->valuestring) < (int)n;
        else ok = snprintf(buf, n, "%s", d->valuestring) < (int)n;
    }
    cJSON_Delete(root);
    volt_st_close(f);
    return ok;
}

static int remove_dir(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    char p[4096];
    int rc = 0;
    while ((e = readdir(dp))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p || (unlink(p) != 0 && errno != ENOENT)) rc = -1;
    }
    closedir(dp);
    if (rmdir(dir) != 0 && errno != ENOENT) rc = -1;
    return rc;
}

volt_status volt_checkpoint_remove(const char *path) {
    if (!path || !*path) return VOLT_ERR_INVALID_ARG;
    char dir[4096];
    const bool sharded = shard_dir_of(path, dir, sizeof dir);
    if (unlink(path) != 0 && errno != ENOENT) return VOLT_ERR_IO;   /* the index first: no half checkpoint */
    if (sharded && remove_dir(dir) != 0) return VOLT_ERR_IO;
    return VOLT_OK;
}
