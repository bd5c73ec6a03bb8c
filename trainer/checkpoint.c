/* Checkpoint save/load (DESIGN §5): one safetensors file holding the weights under their
 * parameter names, optimizer states as "optimizer.<state>.<param>", module extras as
 * "module.<name>", and in the metadata the loop state, scheduler, RNG offset, callback
 * states (JSON) and the log directory. Loading validates everything before it changes
 * anything, so a bad file leaves the in-memory model untouched. This file: the module
 * extras API, the single-file save and the loader; the others: trainer/checkpoint_internal.h. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "core/fsutil.h"
#include "trainer/checkpoint_internal.h"
#include "volt/safetensors.h"
#include "volt/precision.h"
#include "strategies/comm/comm.h"

/* 2: the metadata is sealed by "volt.meta_crc32"; 1 (older) loads without that check. */
#define CKPT_FORMAT_VERSION "2"

struct volt_ckpt {
    volt_trainer *t;
    volt_st_writer *w;       /* saving */
    volt_st_file *f;         /* loading */
    const char *path;
    const char *prefix;      /* the keys' namespace: NULL "module." (the module's hooks), or a
                                callback's "callback.<its state key>." */
};

/* "module.<name>" (or the callback's prefix) into k (CKPT_EXTRA_KEY bytes), or an error naming
 * the call: a name that does not fit is refused, never cut (two long names would meet in one
 * key). Getters pass quiet: an absent optional extra is no error to record. */
enum { CKPT_EXTRA_KEY = 256 };
static const char *extra_prefix(const volt_ckpt *ck) { return ck->prefix ? ck->prefix : "module."; }
static volt_status extra_key(volt_ckpt *ck, const char *name, char *k, const char *fn, bool saving) {
    if (!ck || !ck->t) return VOLT_ERR_INVALID_ARG;
    if (saving ? !ck->w : !ck->f)
        return volt__terr(ck->t, VOLT_ERR_STATE, "%s: only in on_%s_checkpoint", fn, saving ? "save" : "load");
    if (!name || !*name) return volt__terr(ck->t, VOLT_ERR_INVALID_ARG, "%s: the name is NULL or empty", fn);
    const char *pre = extra_prefix(ck);
    if (snprintf(k, CKPT_EXTRA_KEY, "%s%s", pre, name) >= CKPT_EXTRA_KEY)
        return volt__terr(ck->t, VOLT_ERR_INVALID_ARG, "%s: the name '%.40s...' is too long (at most %d bytes)", fn, name,
                          CKPT_EXTRA_KEY - 1 - (int)strlen(pre));
    return VOLT_OK;
}

volt_status volt_ckpt_put_meta(volt_ckpt *ck, const char *key, const char *value) {
    char k[CKPT_EXTRA_KEY];
    VOLT_TRY(extra_key(ck, key, k, "volt_ckpt_put_meta", true));
    if (!value) return volt__terr(ck->t, VOLT_ERR_INVALID_ARG, "volt_ckpt_put_meta: '%s': the value is NULL", key);
    volt_status st = volt_st_writer_meta(ck->w, k, value);
    return st < 0 ? volt__terr(ck->t, st, "volt_ckpt_put_meta: '%s': %s", key, volt_st_writer_errmsg(ck->w)) : VOLT_OK;
}

const char *volt_ckpt_get_meta(volt_ckpt *ck, const char *key) {
    char k[CKPT_EXTRA_KEY];
    if (!ck || !ck->f || !key || !*key || snprintf(k, sizeof k, "%s%s", extra_prefix(ck), key) >= (int)sizeof k) return NULL;
    return volt_st_meta(ck->f, k);
}

volt_status volt_ckpt_put_tensor(volt_ckpt *ck, const char *name, volt_dtype dt, volt_shape shape, const void *data) {
    char k[CKPT_EXTRA_KEY];
    VOLT_TRY(extra_key(ck, name, k, "volt_ckpt_put_tensor", true));
    if (!data && volt_shape_numel(shape) > 0)
        return volt__terr(ck->t, VOLT_ERR_INVALID_ARG, "volt_ckpt_put_tensor: '%s': the data is NULL", name);
    volt_status st = volt_st_writer_add_copy(ck->w, k, dt, shape, data);
    return st < 0 ? volt__terr(ck->t, st, "volt_ckpt_put_tensor: '%s': %s", name, volt_st_writer_errmsg(ck->w)) : VOLT_OK;
}

volt_status volt_ckpt_get_tensor(volt_ckpt *ck, const char *name, volt_dtype dt, volt_shape shape, void *dst) {
    char k[CKPT_EXTRA_KEY];
    VOLT_TRY(extra_key(ck, name, k, "volt_ckpt_get_tensor", false));
    volt_st_info info;
    if (volt_st_find(ck->f, k, &info) != VOLT_OK) return VOLT_ERR_NOT_FOUND;   /* absent: an optional extra (quiet) */
    if (info.dtype != dt || !volt_shape_eq(info.shape, shape)) {
        char a[64], b[64];
        return volt__terr(ck->t, VOLT_ERR_SHAPE, "checkpoint '%s': tensor '%s' is %s %s, asked for %s %s", ck->path, k,
                          volt_dtype_name(info.dtype), volt_shape_str(info.shape, a, sizeof a), volt_dtype_name(dt),
                          volt_shape_str(shape, b, sizeof b));
    }
    if (!dst && info.nbytes) return volt__terr(ck->t, VOLT_ERR_INVALID_ARG, "volt_ckpt_get_tensor: '%s': dst is NULL", name);
    if (info.nbytes) memcpy(dst, info.data, info.nbytes);
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

/* The checkpoint holds state of callbacks this trainer lacks: resuming without them changes
 * the run unsaid, so say which (Lightning warns: "callbacks used to create the checkpoint need
 * to be provided during Trainer instantiation"). */
static void warn_foreign_states(volt_trainer *t, const cJSON *cbs, const char *path) {
    char missing[512] = "";
    size_t mk = 0;
    for (const cJSON *it = cbs ? cbs->child : NULL; it && mk < sizeof missing; it = it->next) {
        bool have = false;
        for (int i = 0; !have && i < t->n_cbs; i++) {
            char key[128];
            cb_key(t, i, key, sizeof key);
            have = it->string && !strcmp(it->string, key);
        }
        if (!have && it->string) mk += (size_t)snprintf(missing + mk, sizeof missing - mk, "%s%s", mk ? ", " : "", it->string);
    }
    if (missing[0])
        fprintf(stderr, "volt: warning: the checkpoint at %s holds the state of callbacks this fit does not have: %s. Add them "
                "(in the same order) to resume them; without them the fit goes on as configured now\n", path, missing);
}

/* Callback cb_index's state in the checkpoint at path, from its header alone, before the load
 * (LearningRateFinder / BatchSizeFinder apply what a resumed fit found before its optimizer is
 * made). Unsealed reading: the load that follows checks the seal; the caller checks the values. */
volt_status volt__ckpt_callback_state(volt_trainer *t, const char *path, int cb_index, char **json) {
    *json = NULL;
    volt_st_file *f = NULL;
    char err[768];
    volt_status st = volt_st_open_some(path, ck_no_tensor, NULL, &f, err, sizeof err);
    if (st < 0) return volt__terr(t, st, "%s", err);
    const char *cj = volt_st_meta(f, "volt.callbacks");
    cJSON *cbs = cj ? cJSON_Parse(cj) : NULL;
    if (cj && !cbs) st = volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': callback state is not valid JSON", path);
    char key[128];
    cb_key(t, cb_index, key, sizeof key);
    const cJSON *item = cbs ? cJSON_GetObjectItemCaseSensitive(cbs, key) : NULL;
    if (item && !(*json = cJSON_PrintUnformatted(item))) st = volt__terr(t, VOLT_ERR_NOMEM, "callbacks' state: out of memory");
    cJSON_Delete(cbs);
    volt_st_close(f);
    return st;
}

/* The callbacks' on_save_checkpoint (w) / on_load_checkpoint (f) (table version 5; Lightning's
 * Callback.on_save_checkpoint / on_load_checkpoint), each with its keys under
 * "callback.<its state key>.", in the order added; the first error stops it, naming the callback. */
static volt_status callbacks_ckpt_hook(volt_trainer *t, volt_st_writer *w, volt_st_file *f, const char *path) {
    for (int i = 0; i < t->n_cbs; i++) {
        const volt_callback_ops *o = t->cbs[i].ops;
        volt_status (*fn)(void *, volt_trainer *, volt_ckpt *) = o->version < 5u ? NULL : w ? o->on_save_checkpoint : o->on_load_checkpoint;
        if (!fn) continue;
        char key[128], pre[160];
        cb_key(t, i, key, sizeof key);
        snprintf(pre, sizeof pre, "callback.%s.", key);
        volt_ckpt ck = { t, w, f, path, pre };
        t->errmsg[0] = 0;
        const volt_status st = fn(t->cbs[i].self, t, &ck);
        if (st < 0) {
            char prev[sizeof t->errmsg];
            snprintf(prev, sizeof prev, "%s", t->errmsg);
            return volt__terr(t, st, "checkpoint '%s': callback '%s': on_%s_checkpoint failed%s%s", path, key,
                              w ? "save" : "load", prev[0] ? ": " : "", prev);
        }
    }
    return VOLT_OK;
}

/* Every callback's state_dict, keyed; NULL with the trainer's error set when one is not a JSON
 * object (dropping it would resume that callback from scratch without a word). */
static char *callbacks_json(volt_trainer *t) {
    cJSON *root = cJSON_CreateObject();
    if (!root) { volt__terr(t, VOLT_ERR_NOMEM, "callbacks' state: out of memory"); return NULL; }
    for (int i = 0; i < t->n_cbs; i++) {
        if (!t->cbs[i].ops->state_dict) continue;
        char *s = t->cbs[i].ops->state_dict(t->cbs[i].self);
        if (!s) continue;
        cJSON *st = cJSON_Parse(s);
        if (!cJSON_IsObject(st)) {
            volt__terr(t, VOLT_ERR_INVALID_ARG, "callback '%s': state_dict returned %s, not a JSON object: '%.60s%s'",
                       t->cbs[i].ops->name ? t->cbs[i].ops->name : "?", st ? "JSON" : "text that is not JSON", s,
                       strlen(s) > 60 ? "..." : "");
            cJSON_Delete(st);
            free(s);
            cJSON_Delete(root);
            return NULL;
        }
        free(s);
        char key[128];
        cb_key(t, i, key, sizeof key);
        cJSON_AddItemToObject(root, key, st);
    }
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!out) volt__terr(t, VOLT_ERR_NOMEM, "callbacks' state: out of memory");
    return out;
}

/* The shortest decimal that reads back as v, as a double (JSON shows 0.001, not the float's
 * 0.0010000000474974513). */
static double short_decimal(float v) {
    char b[32];
    for (int p = 6; p <= 9; p++) {   /* 9 digits always read back */
        snprintf(b, sizeof b, "%.*g", p, (double)v);
        if ((float)strtod(b, NULL) == v) return strtod(b, NULL);
    }
    return (double)v;
}

/* The optimizer's parameter groups, when it has more than one (a file without them is one
 * group): "volt.optimizer.groups" = [{"params": null for the default group, else the
 * patterns, "lr": base lr, "weight_decay", "n_params": members}, ...] in group order. A group
 * added during the fit (volt_optimizer_add_param_group: BackboneFinetuning) also has
 * "added": true, "lr_now" (its lr, which no scheduler restores) and "first_step" (the step
 * count it was added at: its own Adam step count starts there). */
static volt_status put_groups(volt_trainer *t, volt_st_writer *w) {
    cJSON *arr = cJSON_CreateArray();
    const int ncfg = volt_optimizer_config_group_count(t->opt);
    for (int g = 0; arr && g < volt_optimizer_group_count(t->opt); g++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(arr, o);
        if (g == 0) cJSON_AddNullToObject(o, "params");
        else cJSON_AddStringToObject(o, "params", volt_optimizer_group_params(t->opt, g));
        cJSON_AddNumberToObject(o, "lr", short_decimal(volt_optimizer_group_base_lr(t->opt, g)));
        cJSON_AddNumberToObject(o, "weight_decay", short_decimal(volt_optimizer_group_weight_decay(t->opt, g)));
        cJSON_AddNumberToObject(o, "n_params", volt_optimizer_group_param_count(t->opt, g));
        if (g >= ncfg) {
            cJSON_AddTrueToObject(o, "added");
            cJSON_AddNumberToObject(o, "lr_now", short_decimal(volt_optimizer_group_lr(t->opt, g)));
            cJSON_AddNumberToObject(o, "first_step", (double)volt_optimizer_group_first_step(t->opt, g));
        }
    }
    char *js = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    volt_status st = js ? volt_st_writer_meta(w, "volt.optimizer.groups", js) : VOLT_ERR_NOMEM;
    free(js);
    return st;
}

/* A saved group that was added during its fit, back into this run's optimizer. */
static volt_status readd_group(volt_trainer *t, const cJSON *o, int g, const char *path, int64_t opt_step) {
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(o, "params"), *lr = cJSON_GetObjectItemCaseSensitive(o, "lr"),
                *wd = cJSON_GetObjectItemCaseSensitive(o, "weight_decay"), *now = cJSON_GetObjectItemCaseSensitive(o, "lr_now"),
                *fs = cJSON_GetObjectItemCaseSensitive(o, "first_step");
    /* first_step: a whole step count no later than the optimizer's (a later one would restart
     * Adam's bias correction and SGD's momentum at every step until then) */
    if (!cJSON_IsString(pp) || !cJSON_IsNumber(lr) || !cJSON_IsNumber(wd) || !cJSON_IsNumber(now) || !cJSON_IsNumber(fs) ||
        !(fs->valuedouble >= 0 && fs->valuedouble <= (double)opt_step) || fs->valuedouble != floor(fs->valuedouble) ||
        !(isfinite(lr->valuedouble) && lr->valuedouble >= 0 && isfinite(now->valuedouble) && now->valuedouble >= 0 &&
          isfinite(wd->valuedouble) && wd->valuedouble >= 0 && lr->valuedouble < 1e30 && now->valuedouble < 1e30 &&
          wd->valuedouble < 1e30))
        return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata 'volt.optimizer.groups': added group %d is damaged "
                          "(its params, lr, weight_decay, lr_now or first_step <= the optimizer's step %lld)", path, g,
                          (long long)opt_step);
    const volt_optim_group gr = { .params = pp->valuestring, .lr = (float)lr->valuedouble, .weight_decay = (float)wd->valuedouble };
    volt_status st = volt__optimizer_add_group_at(t->opt, &gr, (int64_t)fs->valuedouble, (float)now->valuedouble);
    if (st < 0)
        return volt__terr(t, st == VOLT_ERR_NOMEM ? st : VOLT_ERR_INVALID_ARG, "checkpoint '%s': optimizer parameter group %d "
                          "('%s', added during its fit) cannot be added back: %s", path, g, pp->valuestring,
                          st == VOLT_ERR_NOMEM ? "out of memory" : volt_optimizer_errmsg(t->opt));
    return VOLT_OK;
}

/* A resume keeps the grouping: as many groups, the same patterns, as many parameters in each
 * (torch's load_state_dict: "loaded state dict contains a parameter group that doesn't match
 * the size of optimizer's group"). lr and weight_decay may change, as the config's may.
 * Groups the saved fit added after the config's (BackboneFinetuning's backbone) are added back
 * first, with their lr and step. */
static volt_status check_groups(volt_trainer *t, volt_st_file *f, const char *path, int64_t opt_step) {
    const char *js = volt_st_meta(f, "volt.optimizer.groups");
    const int now = volt_optimizer_group_count(t->opt), ncfg = volt_optimizer_config_group_count(t->opt);
    cJSON *arr = js ? cJSON_Parse(js) : NULL;
    if (js && (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1)) {
        cJSON_Delete(arr);
        return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata 'volt.optimizer.groups' is not a list of groups", path);
    }
    const int saved = arr ? cJSON_GetArraySize(arr) : 1;
    volt_status st = VOLT_OK;
    for (int g = now; arr && st >= 0 && g < saved; g++) {
        const cJSON *o = cJSON_GetArrayItem(arr, g);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "added"))) st = readd_group(t, o, g, path, opt_step);
        else break;   /* the count below says it */
    }
    const int have = volt_optimizer_group_count(t->opt);
    if (st >= 0 && saved != have)
        st = volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': saved with %d optimizer parameter group%s, this run has %d: "
                        "a fit resumes with the grouping it was saved with", path, saved, saved == 1 ? "" : "s", have);
    for (int g = 0; arr && st >= 0 && g < have; g++) {
        const cJSON *o = cJSON_GetArrayItem(arr, g);
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(o, "params"), *np = cJSON_GetObjectItemCaseSensitive(o, "n_params");
        const char *want = volt_optimizer_group_params(t->opt, g);
        const char *had = cJSON_IsString(pp) ? pp->valuestring : NULL;
        const bool added = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "added"));
        if (!cJSON_IsNumber(np) || (g == 0) != cJSON_IsNull(pp) || (g && !had))
            st = volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata 'volt.optimizer.groups': group %d is damaged", path, g);
        else if ((g && strcmp(had, want)) || added != (g >= ncfg))
            st = volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': optimizer parameter group %d is '%s'%s there, '%s'%s in this "
                            "run: a fit resumes with the grouping it was saved with", path, g, had ? had : "(default)",
                            added ? " (added during the fit)" : "", want ? want : "(default)", g >= ncfg ? " (added)" : "");
        else if (np->valueint != volt_optimizer_group_param_count(t->opt, g))
            st = volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': optimizer parameter group %d%s%s%s holds %d parameters there, "
                            "%d in this run (the model's parameters differ)", path, g, g ? " ('" : " (the default group)",
                            g ? want : "", g ? "')" : "", np->valueint, volt_optimizer_group_param_count(t->opt, g));
    }
    cJSON_Delete(arr);
    return st;   /* on failure volt__ckpt_load drops the groups added here */
}

/* Everything but the weights and optimizer states (rank 0): loop state, optimizer step,
 * scheduler, precision, callbacks, module extras. */
int ck_saved_states(const volt_trainer *t) { return t->opt && !t->ck_weights_only ? volt_optimizer_state_count(t->opt) : 0; }

/* The running *_dm call's datamodule state (LightningDataModule.state_dict):
 * "volt.datamodule" = {"name": its name, "state": the JSON object it gave}. */
static volt_status put_dm_state(volt_trainer *t, volt_st_writer *w, const char *path) {
    const char *name = t->dm->name ? t->dm->name : "datamodule";
    char *s = t->dm->state_dict(t->dm_self);
    if (!s) return VOLT_OK;
    cJSON *st = cJSON_Parse(s), *o = cJSON_IsObject(st) ? cJSON_CreateObject() : NULL;
    if (!cJSON_IsObject(st)) {
        volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': datamodule '%s': state_dict returned %s, not a JSON object: "
                   "'%.60s%s'", path, name, st ? "JSON" : "text that is not JSON", s, strlen(s) > 60 ? "..." : "");
        cJSON_Delete(st);
        free(s);
        return VOLT_ERR_INVALID_ARG;
    }
    free(s);
    char *js = NULL;
    if (o && cJSON_AddStringToObject(o, "name", name)) {
        cJSON_AddItemToObject(o, "state", st);
        st = NULL;
        js = cJSON_PrintUnformatted(o);
    }
    cJSON_Delete(st);
    cJSON_Delete(o);
    volt_status r = js ? volt_st_writer_meta(w, "volt.datamodule", js) : VOLT_ERR_NOMEM;
    free(js);
    if (r < 0) return volt__terr(t, r, "checkpoint '%s': %s", path, r == VOLT_ERR_NOMEM ? "datamodule state: out of memory" :
                                 volt_st_writer_errmsg(w));
    return VOLT_OK;
}

/* ... and back, before any weight is applied: one whose name matches gets its state (called
 * when the file has one and the datamodule the hook). */
static volt_status load_dm_state(volt_trainer *t, volt_st_file *f, const char *path) {
    const char *js = volt_st_meta(f, "volt.datamodule");   /* the caller made sure of it and of the hook */
    const char *name = t->dm->name ? t->dm->name : "datamodule";
    cJSON *o = cJSON_Parse(js);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "name"), *sv = cJSON_GetObjectItemCaseSensitive(o, "state");
    if (!cJSON_IsString(n) || !cJSON_IsObject(sv)) {
        cJSON_Delete(o);
        return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata 'volt.datamodule' is not {\"name\", \"state\"}", path);
    }
    if (strcmp(n->valuestring, name) != 0) {
        if (t->rank == 0)
            fprintf(stderr, "volt: warning: the checkpoint at %s holds the state of datamodule '%s'; this run's is '%s': "
                    "its state is not loaded\n", path, n->valuestring, name);
        cJSON_Delete(o);
        return VOLT_OK;
    }
    char *s = cJSON_PrintUnformatted(sv);
    cJSON_Delete(o);
    if (!s) return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': datamodule state: out of memory", path);
    t->errmsg[0] = 0;
    volt_status st = t->dm->load_state_dict(t->dm_self, s);
    free(s);
    if (st < 0) {
        char prev[sizeof t->errmsg];
        snprintf(prev, sizeof prev, "%s", t->errmsg);
        return volt__terr(t, st, "checkpoint '%s': datamodule '%s' rejected its state%s%s", path, name, prev[0] ? ": " : "", prev);
    }
    return VOLT_OK;
}

volt_status put_state(volt_trainer *t, volt_st_writer *w, const char *path) {
    volt_strategy *sg = t->strategy;
    volt_status st = VOLT_OK;
    if (t->ck_weights_only) st = volt_st_writer_meta(w, "volt.weights_only", "true");   /* no optimizer, no scheduler */
    else if (t->opt) {
        st = meta_i64(w, "volt.optimizer.step", volt_optimizer_step_count(t->opt));
        if (st >= 0) {
            char b[32];
            snprintf(b, sizeof b, "%d", (int)volt_optimizer_get_config(t->opt)->kind);
            st = volt_st_writer_meta(w, "volt.optimizer.kind", b);
        }
        if (st >= 0 && volt_optimizer_group_count(t->opt) > 1) st = put_groups(t, w);
    }
    if (st >= 0) st = volt_st_writer_meta(w, "volt.strategy", volt__strategy_name(sg));
    if (st >= 0) st = meta_i64(w, "volt.world_size", t->world);
    if (t->sched && !t->ck_weights_only && st >= 0) st = meta_i64(w, "volt.scheduler.last_step", volt_scheduler_last_step(t->sched));
    volt_plateau_state ps;
    if (t->sched && !t->ck_weights_only && st >= 0 && volt_scheduler_plateau_state(t->sched, &ps) == VOLT_OK) {
        char b[128];   /* best (inf until a metric), bad steps, cooldown left, reductions */
        snprintf(b, sizeof b, "%.17g %lld %lld %lld", ps.best, (long long)ps.num_bad, (long long)ps.cooldown_left,
                 (long long)ps.reductions);
        st = volt_st_writer_meta(w, "volt.scheduler.plateau", b);
    }
    if (st >= 0) st = volt__prec_ckpt_save(t, w);   /* precision name, grad scaler */
    if (st >= 0) st = volt_st_writer_meta(w, "volt.format", CKPT_FORMAT_VERSION);
    if (st >= 0) st = volt_st_writer_meta(w, "volt.module", t->mops && t->mops->name ? t->mops->name : "");
    if (st >= 0) st = meta_i64(w, "volt.epoch", t->epoch);
    if (st >= 0) st = meta_i64(w, "volt.global_step", t->global_step);
    if (st >= 0) st = meta_i64(w, "volt.batch_in_epoch", t->batch_in_epoch);
    if (st >= 0) st = meta_i64(w, "volt.micro_step", t->micro_step);
    if (st >= 0) st = meta_i64(w, "volt.total_batches", t->total_batches);
    if (st >= 0 && t->max_time_s > 0) {   /* max_time (only then: a time makes files differ run to run): a resumed fit goes on from here */
        char b[64];
        snprintf(b, sizeof b, "%.6f", volt__loop_fit_time(t));
        st = volt_st_writer_meta(w, "volt.fit_time_s", b);
    }
    /* 8: the validation due after the batch has not reached its end hooks; 16:
     * check_val_every_n_epoch = 0's count fell due inside the window running; 32: the batch's
     * optimizer step not yet seen by a step-interval ReduceLROnPlateau (its monitor's value then in
     * volt.tail_plateau: the resumed call starts without metrics); 64: saved in the batch's end
     * hooks or what follows them (loop.c batch_tail): resumed, what was left runs first; 128: a
     * stop was asked for there (the tail's vote takes it); 256: the validation due after the batch
     * reached its end hooks (a stop there does not validate again at the epoch's end) */
    const bool tail = t->fitting && t->tail_pending;
    if (st >= 0) st = meta_i64(w, "volt.epoch_flags", (t->epoch_sched_done ? 1 : 0) | (t->epoch_val_done ? 2 : 0) | (t->epoch_done ? 4 : 0) |
                               (tail && t->val_due && !t->val_due_ran ? 8 : 0) | (t->fitting && t->val_pending ? 16 : 0) |
                               (tail && t->batch_stepped ? 32 : 0) | (tail ? 64 : 0) | (tail && t->should_stop ? 128 : 0) |
                               (tail && t->val_due && t->val_due_ran ? 256 : 0));
    const volt_scheduler_config *tsc = t->sched ? volt_scheduler_get_config(t->sched) : NULL;
    if (st >= 0 && tail && t->batch_stepped && tsc && tsc->kind == VOLT_SCHED_PLATEAU && tsc->monitor) {
        double mv;
        char b[64] = "none";   /* not logged: the resumed step finds it missing, as this one would */
        if (volt_trainer_metric(t, tsc->monitor, &mv)) snprintf(b, sizeof b, "%.17g", mv);
        st = volt_st_writer_meta(w, "volt.tail_plateau", b);
    }
    if (st >= 0) st = meta_i64(w, "volt.seed", (int64_t)t->cfg.seed);
    if (st >= 0 && t->fitting && !t->ck_weights_only && t->batch_in_epoch > 0 && t->batch_in_epoch < t->num_train_batches) {
        /* mid-epoch: what batch_in_epoch indexes (a resume there compares) */
        char b[96];
        snprintf(b, sizeof b, "%lld %lld %lld %lld", (long long)t->train_desc[0], (long long)t->train_desc[1],
                 (long long)t->train_desc[2], (long long)t->train_desc[3]);
        st = volt_st_writer_meta(w, "volt.train_loader", b);
    }
    if (st >= 0 && t->cfg.run_fingerprint) st = volt_st_writer_meta(w, "volt.run_fingerprint", t->cfg.run_fingerprint);
    if (st >= 0) {
        char *cbj = callbacks_json(t);
        if (!cbj) {
            char why[sizeof t->errmsg];
            snprintf(why, sizeof why, "%s", t->errmsg);
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': %s", path, why);
        }
        st = volt_st_writer_meta(w, "volt.callbacks", cbj);
        free(cbj);
    }
    if (st >= 0 && t->dm && t->dm->version >= 2u && t->dm->state_dict) VOLT_TRY(put_dm_state(t, w, path));
    if (st < 0) return volt__terr(t, st, "checkpoint '%s': %s", path, volt_st_writer_errmsg(w));
    if (t->mops && t->mops->on_save_checkpoint) {
        volt_ckpt ck = { t, w, NULL, path, NULL };
        t->errmsg[0] = 0;
        st = t->mops->on_save_checkpoint(t->module, t, &ck);
        if (st < 0) {
            char prev[sizeof t->errmsg];
            snprintf(prev, sizeof prev, "%s", t->errmsg);
            return volt__terr(t, st, "checkpoint '%s': module '%s': on_save_checkpoint failed%s%s", path, t->mops->name,
                              prev[0] ? ": " : "", prev);
        }
    }
    VOLT_TRY(callbacks_ckpt_hook(t, w, NULL, path));
    return VOLT_OK;
}

bool state_holds(const volt_tensor *p, int64_t lo, int64_t hi) {
    const int64_t off = volt_param_offset(p);
    return lo <= off && off + volt_tensor_numel(p) <= hi;
}

/* Every tensor of a single-file save but the module extras, in file order: the weights as
 * f32 unit by unit, then "optimizer.<state>.<param>" state by state and unit by unit. With a
 * staging area each unit's values and each state come to the host once (one D2H copy) and
 * fn gets the parameter's slice of it; without, data is NULL (declaring, counting). The
 * streamed save and the snapshot (checkpoint_snapshot.c) both walk this, so their files
 * hold the same tensors in the same order. */
volt_status ck_each_tensor(volt_trainer *t, ck_stage *sg, ck_tensor_fn fn, void *ctx) {
    const int U = volt_params_unit_count(t->ps), K = ck_saved_states(t);
    char name[512];
    volt_status st = VOLT_OK;
    for (int u = 0; st >= 0 && u < U; u++) {
        const volt_unit *un = volt_params_unit_at(t->ps, u);
        const float *v = sg ? stage_values(t, sg, u, 0, volt_unit_numel(un)) : NULL;
        if (sg && !v) return VOLT_ERR_STATE;
        for (int i = 0; st >= 0 && i < volt_unit_param_count(un); i++) {
            const volt_tensor *p = volt_unit_param(un, i);
            st = fn(ctx, p->name, p->shape, v ? v + volt_param_offset(p) : NULL);
        }
    }
    for (int k = 0; st >= 0 && k < K; k++)
        for (int u = 0; st >= 0 && u < U; u++) {
            const volt_unit *un = volt_params_unit_at(t->ps, u);
            int64_t lo = 0, hi = 0;
            const float *v = sg ? stage_state(t, sg, u, k, &lo, &hi) : NULL;
            if (sg ? !v : !volt_optimizer_state_raw(t->opt, u, k, &lo, &hi)) continue;
            for (int i = 0; st >= 0 && i < volt_unit_param_count(un); i++) {
                const volt_tensor *p = volt_unit_param(un, i);
                if (!state_holds(p, lo, hi)) continue;
                snprintf(name, sizeof name, "optimizer.%s.%s", volt_optimizer_state_name(t->opt, k), p->name);
                st = fn(ctx, name, p->shape, v ? v + (volt_param_offset(p) - lo) : NULL);
            }
        }
    return st;
}

static volt_status stream_declare(void *s, const char *name, volt_shape shape, const float *data) {
    (void)data;
    return volt_st_stream_declare(s, name, VOLT_F32, shape);
}
static volt_status stream_write(void *s, const char *name, volt_shape shape, const float *data) {
    (void)shape;
    return volt_st_stream_write(s, name, data);
}

/* The file, streamed: module extras of 8/4-byte elements, ck_each_tensor's tensors, the other
 * extras; w's metadata. */
static volt_status save_single(volt_trainer *t, const volt_st_writer *w, const char *path) {
    char err[768] = "";
    ck_stage sg;
    if (stage_open(t, &sg) < 0) return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory (staging)", path);
    volt_st_stream *s = NULL;
    volt_status st = ck_stream_open(path, w, &s, err, sizeof err);
    if (st >= 0) st = ck_stream_extras(s, w, true, false);
    if (st >= 0) st = ck_each_tensor(t, NULL, stream_declare, s);
    if (st >= 0) st = ck_stream_extras(s, w, false, false);
    if (st >= 0) st = volt_st_stream_begin(s);
    if (st >= 0) st = ck_stream_extras(s, w, true, true);
    if (st >= 0) st = ck_each_tensor(t, &sg, stream_write, s);
    if (st >= 0) st = ck_stream_extras(s, w, false, true);
    if (st < 0 && s && !err[0]) snprintf(err, sizeof err, "%s", volt_st_stream_errmsg(s));
    if (st >= 0) st = volt_st_stream_finish(s, err, sizeof err);   /* consumes s */
    else volt_st_stream_destroy(s);   /* the .tmp goes; a file already at path stays */
    stage_close(&sg);
    if (st < 0) return volt__terr(t, st, "checkpoint '%s': %s", path, err[0] ? err : volt_status_str(st));
    return VOLT_OK;
}

volt_status volt_trainer_save_checkpoint(volt_trainer *t, const char *path) { return volt_trainer_save_checkpoint_ex(t, path, 0); }

static volt_status save_checkpoint(volt_trainer *t, const char *path);
volt_status volt_trainer_save_checkpoint_ex(volt_trainer *t, const char *path, unsigned flags) {
    if (!t) return VOLT_ERR_INVALID_ARG;
    if (flags & ~VOLT_CKPT_WEIGHTS_ONLY) return volt__terr(t, VOLT_ERR_INVALID_ARG, "save_checkpoint: unknown flags 0x%x", flags);
    t->ck_weights_only = flags & VOLT_CKPT_WEIGHTS_ONLY;
    bool swapped = false;   /* weight averaging: the file's weights are the average */
    volt_status st = t->ps ? volt__avg_save_enter(t, &swapped) : VOLT_OK;
    if (st >= 0) st = save_checkpoint(t, path);
    volt__avg_save_leave(t, swapped);
    t->ck_weights_only = false;
    return st;
}

static volt_status save_checkpoint(volt_trainer *t, const char *path) {
    if (!t->ps || !volt_params_finalized(t->ps)) return volt__terr(t, VOLT_ERR_STATE, "save_checkpoint: no model yet");
    if (!path || !*path) return volt__terr(t, VOLT_ERR_INVALID_ARG, "save_checkpoint: empty path");
    VOLT_TRY(volt__loop_wait_params(t, "save_checkpoint"));   /* ModelCheckpoint runs right after a step */
    if (ckpt_sharded(t)) return save_sharded(t, path);
    if (t->rank != 0) return VOLT_OK;   /* replicated state: rank 0 writes it all */
    volt_st_writer *w;   /* metadata and module extras (host); the weights stream past it */
    volt_status st;
    if ((st = volt_st_writer_create(&w)) < 0) return volt__terr(t, st, "checkpoint '%s': cannot create the writer", path);
    st = put_state(t, w, path);
    if (st >= 0 && (st = meta_seal(w)) < 0) volt__terr(t, st, "checkpoint '%s': out of memory", path);
    if (st >= 0) st = save_single(t, w, path);
    volt_st_writer_destroy(w);
    if (st < 0) return st;
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

/* Lightning's ckpt_path="last": the newest (mtime, a tie to the greater name, as
 * volt_checkpoint_find_last) of ModelCheckpoint's last file p and the files added with
 * volt_trainer_add_last_candidate (every OnExceptionCheckpoint's), so a run stopped mid-epoch
 * (Ctrl-C) resumes from where it stopped, not from the epoch's start. */
static const char *newest_last(volt_trainer *t, const char *p) {
    struct stat sb;
    struct timespec best = { 0, 0 };
    bool have = p && stat(p, &sb) == 0;
    if (have) best = sb.st_mtim;
    for (int i = 0; i < t->n_last_cands; i++) {
        const char *e = t->last_cands[i];
        if (stat(e, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (have && !volt__file_newer(&sb.st_mtim, e, &best, p)) continue;
        snprintf(t->last_pick, sizeof t->last_pick, "%s", e);
        p = t->last_pick;
        best = sb.st_mtim;
        have = true;
    }
    return p;
}

/* Rank 0's string (or none: *has false there) into every rank's buf (cap bytes): collective,
 * every rank calls it. The first broadcast is at most 1 KiB (a rank that is in another
 * collective meanwhile gets an error naming the mismatch, not a message too large for its
 * buffer: strategies/comm/mpi/comm_mpi.c); the rest of a longer string follows in a second
 * one, which every rank makes or not by the length in the first. One process: buf as is. */
volt_status ck_bcast_str(volt_trainer *t, char *buf, size_t cap, bool *has, const char *what) {
    if (t->world <= 1 || !t->strategy) return VOLT_OK;
    struct { int32_t has, len; char s[1016]; } m;
    memset(&m, 0, sizeof m);
    if (t->rank == 0) {
        const size_t n = *has ? strnlen(buf, cap - 1) : 0;
        m.has = *has;
        m.len = (int32_t)n;
        memcpy(m.s, buf, n < sizeof m.s ? n : sizeof m.s - 1);
    }
    volt_status st = volt__strategy_broadcast(t->strategy, &m, sizeof m, 0, what);
    if (st < 0) return st;
    *has = m.has != 0;
    if (m.len < 0 || (size_t)m.len >= cap) m.len = 0;   /* a cap every rank shares: never */
    if ((size_t)m.len < sizeof m.s) {
        memcpy(buf, m.s, (size_t)m.len);
        buf[m.len] = 0;
        return VOLT_OK;
    }
    st = volt__strategy_broadcast(t->strategy, buf, (size_t)m.len + 1, 0, what);
    buf[m.len] = 0;
    return st;
}

/* The first collective of a checkpoint save, load or sharded snapshot: every rank says which
 * call it is in, in an all-reduce named "checkpoint call" of 3 doubles, the size of the loops'
 * votes (the stop flag after each training batch). A rank that is in another collective
 * meanwhile (save_checkpoint called on rank 0 only under a sharding strategy, the classic
 * `if rank == 0: save`, meets the others' stop vote) fails there, as they do: the comm's
 * envelope of a control collective carries the call site's name (strategies/comm/comm.h), so
 * both sides get an error naming the mismatch at once, not a timeout or a large message in a
 * small buffer. A rank in another checkpoint call sees another code. One process: nothing. */
volt_status ck_entry_vote(volt_trainer *t, int code, const char *what, const char *path) {
    struct volt_comm *c = t->world > 1 && t->strategy ? volt__strategy_comm(t->strategy) : NULL;
    if (!c) return VOLT_OK;
    double v[3] = { (double)code, 0, 0 };
    volt_status st = volt__comm_all_reduce(c, v, v, 3, VOLT_COMM_F64, VOLT_COMM_SUM, "checkpoint call");
    if (st < 0)
        return volt__terr(t, st, "checkpoint '%s': %s: the ranks are not all in this call: %s", path, what, volt__comm_errmsg(c));
    if (v[0] != (double)code * t->world)
        return volt__terr(t, VOLT_ERR_STATE, "checkpoint '%s': %s: the ranks called different collectives (some rank is in "
                          "another checkpoint call: every rank must make the same calls)", path, what);
    return VOLT_OK;
}

const char *volt__resolve_ckpt(volt_trainer *t, const char *which) {
    const char *p = which;
    if (!strcmp(which, "last")) p = newest_last(t, t->has_resolver && t->resolver.last ? t->resolver.last(t->resolver.self) : NULL);
    else if (!strcmp(which, "best")) p = t->has_resolver && t->resolver.best ? t->resolver.best(t->resolver.self) : NULL;
    if (t->world > 1) {   /* rank 0's file is the one every rank loads */
        char *buf = t->resolved_path;
        if (p != buf) snprintf(buf, sizeof t->resolved_path, "%s", p ? p : "");
        bool has = p != NULL;
        if (ck_bcast_str(t, buf, sizeof t->resolved_path, &has, "resolved ckpt_path") == VOLT_OK) p = has && buf[0] ? buf : NULL;
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

/* Whether the file holds the weight average of every parameter (f32, the parameter's shape). */
static bool avg_in_file(volt_trainer *t, volt_st_file *f, const ck_src *src) {
    if (src->index) return src_has_state(src, VOLT_OPTIM_AVERAGE_STATE);
    for (int i = 0; i < volt_params_count(t->ps); i++) {
        char name[512];
        volt_tensor *p = volt_params_at(t->ps, i);
        volt_st_info info;
        snprintf(name, sizeof name, "optimizer.%s.%s", VOLT_OPTIM_AVERAGE_STATE, p->name);
        if (volt_st_find(f, name, &info) != VOLT_OK || info.dtype != VOLT_F32 || !volt_shape_eq(info.shape, p->shape)) return false;
    }
    return true;
}

/* A tensor read while applying failed its crc or the read (the file changed after src_open
 * checked it), on this rank or another: the values are partly replaced, so the model goes on
 * every rank (loop.c's load drops a model whose weights are pending) and the error says so. The
 * ranks agree first (src_agree), so one rank's failure is every rank's, and none goes on alone
 * into a collective the others never reach. */
static volt_status apply_agree(volt_trainer *t, ck_stage *sg, ck_src *src, const char *path, bool failed) {
    volt_status st = VOLT_OK;
    if (failed)
        st = volt__terr(t, src->err_st < 0 ? src->err_st : VOLT_ERR_CORRUPT,
                        "%s; the model's values were partly replaced, so it is dropped (the next run sets it up afresh)", src->err);
    if ((st = src_agree(t, path, st, "every rank drops its model")) >= 0) return VOLT_OK;
    t->weights_pending = true;
    stage_close(sg);
    src_close(src);
    return st;
}

static volt_status ckpt_load(volt_trainer *t, const char *path, bool full) {
    VOLT_TRY(volt__loop_wait_params(t, "load_checkpoint"));   /* a gather landing later would overwrite the loaded values */
    ck_src src;
    volt_status st = src_open(t, path, full, &src);   /* without full, the optimizer states stay unread */
    if (st < 0) return st;
    volt_st_file *f = src.f;   /* metadata, module extras */

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
        if (has_prefix(n, "optimizer.") || has_prefix(n, "module.") || has_prefix(n, "callback.") || volt_params_find(t->ps, n))
            continue;
        /* the message first: n lives in the source, which src_close frees */
        volt__terr(t, VOLT_ERR_SHAPE, "checkpoint '%s': unexpected tensor '%s' (the model has no such parameter)", path, n);
        src_close(&src);
        return VOLT_ERR_SHAPE;
    }
    int64_t epoch = 0, gstep = 0, bie = 0, micro = 0, flags = 0, opt_step = 0, opt_kind = -1, sched_step = 0, total = -1;
    double fit_time = 0;
    bool have_opt = false, have_sched = false, avg_present = false, have_plateau = false;
    volt_plateau_state plateau = { 0 };
    double tail_plateau = 0;   /* volt.tail_plateau: the plateau monitor's value when saved in a batch's tail */
    bool tail_plateau_have = false;
    cJSON *cbs = NULL;
    if (full && volt_st_meta(f, "volt.weights_only")) {
        src_close(&src);
        return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s' holds the weights only (saved with save_weights_only): a fit "
                          "cannot resume from it, it has no optimizer state; validate, test and predict load it", path);
    }
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
        if ((st = meta_get_i64(t, f, path, "volt.total_batches", &total, false)) < 0 && st != VOLT_ERR_NOT_FOUND) {
            src_close(&src);   /* optional (older checkpoints have none: counted from epoch and batch) */
            return st;
        }
        if (total < -1 || total > ((int64_t)1 << 53)) {
            src_close(&src);
            return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata 'volt.total_batches' = %lld is not a count of "
                              "batches", path, (long long)total);
        }
        const char *ft = volt_st_meta(f, "volt.fit_time_s");   /* optional: older checkpoints have none */
        char *fend = NULL;
        fit_time = ft ? strtod(ft, &fend) : 0;
        if (ft && (fend == ft || *fend || !(fit_time >= 0) || fit_time > 1e12)) {
            src_close(&src);
            return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata 'volt.fit_time_s' = '%s' is not a time", path, ft);
        }
        const char *tpl = volt_st_meta(f, "volt.tail_plateau");   /* a number, or "none" */
        if (tpl && strcmp(tpl, "none")) {
            char *e;
            tail_plateau = strtod(tpl, &e);
            if (e == tpl || *e) {
                src_close(&src);
                return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata 'volt.tail_plateau' = '%s' is not a number",
                                  path, tpl);
            }
            tail_plateau_have = true;
        }
        const char *tl = volt_st_meta(f, "volt.train_loader");   /* optional; only a warning reads it: */
        t->ck_train_have = tl != NULL;                             /* four integers, else ignored */
        for (int k = 0; k < 4 && t->ck_train_have; k++) {
            char *e;
            errno = 0;
            t->ck_train[k] = strtoll(tl, &e, 10);
            t->ck_train_have = e != tl && !errno && (k < 3 ? *e == ' ' : !*e);
            tl = e;
        }
        have_opt = meta_get_i64(t, f, path, "volt.optimizer.step", &opt_step, false) == VOLT_OK;
        meta_get_i64(t, f, path, "volt.optimizer.kind", &opt_kind, false);
        have_sched = meta_get_i64(t, f, path, "volt.scheduler.last_step", &sched_step, false) == VOLT_OK;
        const char *pl = volt_st_meta(f, "volt.scheduler.plateau");   /* ReduceLROnPlateau's state */
        if (pl && t->sched && volt_scheduler_get_config(t->sched)->kind == VOLT_SCHED_PLATEAU) {
            /* "best bad cooldown reductions"; the counts within what this config allows */
            const volt_scheduler_config *pc = volt_scheduler_get_config(t->sched);
            char *e = NULL;
            const char *q = pl;
            int64_t v[3];
            bool ok = true;
            errno = 0;
            plateau.best = strtod(q, &e);
            ok = e != q && !isnan(plateau.best) && !errno;
            for (int k = 0; k < 3 && ok; k++) {
                q = e;
                errno = 0;
                v[k] = strtoll(q, &e, 10);
                ok = e != q && *q == ' ' && !errno && v[k] >= 0;
            }
            ok = ok && !*e && v[0] <= pc->patience && v[1] <= pc->cooldown && v[2] <= 100000;
            if (!ok) {
                src_close(&src);
                return volt__terr(t, VOLT_ERR_CORRUPT, "checkpoint '%s': metadata 'volt.scheduler.plateau' is not a "
                                  "ReduceLROnPlateau state of this scheduler (best, bad steps <= patience %lld, cooldown <= "
                                  "%lld, reductions)", path, (long long)pc->patience, (long long)pc->cooldown);
            }
            plateau.num_bad = v[0];
            plateau.cooldown_left = v[1];
            plateau.reductions = v[2];
            have_plateau = true;
        }
        if (have_opt && opt_kind != (int64_t)volt_optimizer_get_config(t->opt)->kind) {
            src_close(&src);
            return volt__terr(t, VOLT_ERR_INVALID_ARG, "checkpoint '%s': saved with another optimizer kind (%lld)", path, (long long)opt_kind);
        }
        if (have_opt && (st = check_groups(t, f, path, opt_step)) < 0) { src_close(&src); return st; }
        for (int k = 0; have_opt && k < volt_optimizer_state_count(t->opt); k++) {
            const char *sn = volt_optimizer_state_name(t->opt, k);
            if (volt_optimizer_average_mode(t->opt) && !strcmp(sn, VOLT_OPTIM_AVERAGE_STATE)) {
                /* weight averaging: a file without it starts the average from its weights */
                avg_present = avg_in_file(t, f, &src);
                continue;
            }
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
        /* callbacks restore before the model is touched: a rejected state changes nothing;
         * on_load_checkpoint first, then load_state_dict (Lightning's order), then one verdict:
         * a rank whose callback rejected its state stops every rank here (the same callbacks
         * read the same state on every rank: the check is alike, the failure need not be) */
        st = callbacks_ckpt_hook(t, NULL, f, path);
        for (int i = 0; st >= 0 && i < t->n_cbs; i++) {
            if (!t->cbs[i].ops->load_state_dict || !cbs) continue;
            char key[128];
            cb_key(t, i, key, sizeof key);
            cJSON *item = cJSON_GetObjectItemCaseSensitive(cbs, key);
            if (!item) continue;
            char *js = cJSON_PrintUnformatted(item);
            t->errmsg[0] = 0;
            if (!js) st = volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': callback '%s': out of memory", path, key);
            else if ((st = t->cbs[i].ops->load_state_dict(t->cbs[i].self, t, js)) < 0) hook_err_load(t, st, t->cbs[i].ops->name, path);
            free(js);
        }
        if ((st = src_agree(t, path, st < 0 ? st : VOLT_OK, "no rank changed its model")) < 0) {
            cJSON_Delete(cbs);
            src_close(&src);
            return st;
        }
        if (t->rank == 0) warn_foreign_states(t, cbs, path);
        cJSON_Delete(cbs);
    }
    /* the datamodule's state (a resumed fit, and validate / test / predict from a checkpoint, as
     * Lightning restores it for every call): before any value is applied, as the callbacks' */
    if (t->dm && t->dm->version >= 2u && t->dm->load_state_dict && volt_st_meta(f, "volt.datamodule") &&
        (st = src_agree(t, path, load_dm_state(t, f, path), "no rank changed its model")) < 0) {   /* alike on every rank */
        src_close(&src);
        return st;
    }
    /* The module's extras (on_load_checkpoint) before any value is applied, as Lightning calls
     * the hook before the weights: a rejected state changes nothing, on any rank (one verdict;
     * every rank has the hook, so every rank takes part) */
    if (t->mops->on_load_checkpoint) {
        volt_ckpt ck = { t, NULL, f, path, NULL };
        t->errmsg[0] = 0;
        st = t->mops->on_load_checkpoint(t->module, t, &ck);
        if (st < 0) {
            char prev[sizeof t->errmsg];
            snprintf(prev, sizeof prev, "%s", t->errmsg);
            volt__terr(t, st, "checkpoint '%s': module '%s': on_load_checkpoint failed%s%s", path, t->mops->name,
                       prev[0] ? ": " : "", prev);
        }
        if ((st = src_agree(t, path, st < 0 ? st : VOLT_OK, "no rank changed its model")) < 0) {
            src_close(&src);
            return st;
        }
    }
    ck_stage sg;   /* f32 file data goes to the device as it lies in the file; other dtypes through sg */
    if (stage_open(t, &sg) < 0) {
        src_close(&src);
        return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory (staging)", path);
    }
    /* 2. apply: full values on every rank, unit by unit; a strategy that shards parameters
     * (fsdp) gives back the part of each unit this rank does not own as soon as it is written
     * (volt__strategy_release_unit: stale, gathered from the owners' slices on its next use),
     * so the load peaks at the shards + one unit and leaves each rank its shard; optimizer
     * states for the range this rank holds. A read that fails stops this rank's apply; the
     * ranks then agree (apply_agree) before going on. */
    bool failed = false;
    for (int u = 0; u < volt_params_unit_count(t->ps) && !failed; u++) {
        volt_unit *un = volt_params_unit_at(t->ps, u);
        if ((st = volt__unit_commit(un, VOLT_UNIT_VALUES)) < 0) {   /* pages a sharding strategy gave back */
            src.err_st = st;
            snprintf(src.err, sizeof src.err, "checkpoint '%s': unit '%s': the device cannot take its values back", path,
                     volt_unit_name(un));
            failed = true;
        }
        for (int i = 0; i < volt_unit_param_count(un) && !failed; i++) {
            volt_tensor *p = volt_unit_param(un, i);
            const int64_t n = volt_tensor_numel(p);
            const float *v = src_get(&src, NULL, p->name, 0, n, sg.f32);
            if (!(failed = !v)) stage_put(&sg, p->data, p->dtype, v, n);   /* rounded to 16-bit storage */
        }
        if (failed) break;
        volt__unit_set_stale(un, false);   /* whole here; the owned slice holds the file's values on every rank */
        if ((st = volt__strategy_release_unit(t->strategy, u)) < 0) {
            src.err_st = st;
            snprintf(src.err, sizeof src.err, "checkpoint '%s': unit '%s': strategy '%s': %s", path, volt_unit_name(un),
                     volt__strategy_name(t->strategy), volt__strategy_errmsg(t->strategy));
            failed = true;
        }
    }
    const volt_dtype sdt = have_opt ? volt_optimizer_state_dtype(t->opt) : VOLT_F32;   /* f32, or 16-bit (precision) */
    for (int k = 0; full && have_opt && k < volt_optimizer_state_count(t->opt) && !failed; k++) {
        /* a file without the average: volt__avg_after_load starts it from the weights */
        if (!avg_present && volt_optimizer_average_mode(t->opt) && !strcmp(volt_optimizer_state_name(t->opt, k), VOLT_OPTIM_AVERAGE_STATE))
            continue;
        for (int i = 0; i < volt_params_count(t->ps) && !failed; i++) {
            volt_tensor *p = volt_params_at(t->ps, i);
            int64_t lo, hi, off = volt_param_offset(p), n = volt_tensor_numel(p);
            char *buf = volt_optimizer_state_raw(t->opt, volt_unit_index(p->unit), k, &lo, &hi);   /* device memory */
            /* resharding: this rank's range may hold any part of the parameter */
            const int64_t a = off > lo ? off : lo, b = off + n < hi ? off + n : hi;
            if (!buf || a >= b) continue;
            const float *v = src_get(&src, volt_optimizer_state_name(t->opt, k), p->name, a - off, b - off, sg.f32);
            if (!(failed = !v)) stage_put(&sg, buf + (size_t)(a - lo) * volt_dtype_size(sdt), sdt, v, b - a);
        }
    }
    if ((st = apply_agree(t, &sg, &src, path, failed)) < 0) return st;
    if (full) {
        if (have_opt) volt_optimizer_set_step_count(t->opt, opt_step);
        if ((st = volt__avg_after_load(t, have_opt && avg_present, path)) < 0) { stage_close(&sg); src_close(&src); return st; }
        if (have_sched && t->sched) volt_scheduler_set_last_step(t->sched, sched_step);
        if (have_plateau) volt_scheduler_set_plateau_state(t->sched, &plateau);   /* validated above: sets the lrs */
        volt__prec_ckpt_load(t, f, path, true);   /* grad scaler; validated above */
        t->epoch = epoch;
        t->global_step = gstep;
        t->fit_time_loaded = fit_time;
        t->batch_in_epoch = bie;
        t->total_batches = total;
        t->micro_step = micro;
        t->epoch_sched_done = flags & 1;
        t->epoch_val_done = flags & 2;
        t->epoch_done = flags & 4;
        t->val_due = flags & 8;
        t->val_pending = flags & 16;
        t->batch_stepped = flags & 32;
        t->tail_pending = flags & 64;
        t->val_due_ran = false;
        t->tail_validated = t->tail_pending && (flags & 256);
        if (t->tail_pending) t->should_stop = flags & 128;
        const volt_scheduler_config *tsc = t->sched ? volt_scheduler_get_config(t->sched) : NULL;
        if (tail_plateau_have && tsc && tsc->kind == VOLT_SCHED_PLATEAU && tsc->monitor)
            volt__metric_restore(t, tsc->monitor, tail_plateau);   /* what the resumed tail's plateau step reads */
        if (t->epoch_done) {   /* saved during on_train_epoch_end: continue with the next epoch */
            t->epoch++;
            t->batch_in_epoch = 0;
            t->epoch_done = t->epoch_sched_done = t->epoch_val_done = false;
            t->val_due = t->val_pending = t->batch_stepped = t->tail_pending = t->tail_validated = false;
        }
    }
    stage_close(&sg);
    src_close(&src);
    return VOLT_OK;
}

/* A fit's resume takes the grouping the file has: groups this trainer's optimizer added in an
 * earlier fit (it lives on between fits) go first, check_groups adds the file's back, and a
 * failed load leaves the groups as they were. */
volt_status volt__ckpt_load(volt_trainer *t, const char *path, bool full) {
    if (!full || !t->opt) return ckpt_load(t, path, full);
    struct { char *params; float lr, lr_now, wd; int64_t step0; } kept[VOLT_OPTIM_MAX_GROUPS];
    const int ncfg = volt_optimizer_config_group_count(t->opt);
    int nkept = 0;
    for (int g = ncfg; g < volt_optimizer_group_count(t->opt) && nkept < VOLT_OPTIM_MAX_GROUPS; g++, nkept++) {
        kept[nkept].params = strdup(volt_optimizer_group_params(t->opt, g));
        kept[nkept].lr = volt_optimizer_group_base_lr(t->opt, g);
        kept[nkept].lr_now = volt_optimizer_group_lr(t->opt, g);
        kept[nkept].wd = volt_optimizer_group_weight_decay(t->opt, g);
        kept[nkept].step0 = volt_optimizer_group_first_step(t->opt, g);
        if (!kept[nkept].params) {
            for (int k = 0; k < nkept; k++) free(kept[k].params);
            return volt__terr(t, VOLT_ERR_NOMEM, "checkpoint '%s': out of memory", path);
        }
    }
    volt__optimizer_truncate_groups(t->opt, ncfg);
    const volt_status st = ckpt_load(t, path, full);
    if (st < 0 && t->opt) {   /* (a failed load may have dropped the model, and the optimizer with it) */
        volt__optimizer_truncate_groups(t->opt, ncfg);
        for (int k = 0; k < nkept; k++) {
            const volt_optim_group g = { .params = kept[k].params, .lr = kept[k].lr, .weight_decay = kept[k].wd };
            (void)volt__optimizer_add_group_at(t->opt, &g, kept[k].step0, kept[k].lr_now);
        }
    }
    for (int k = 0; k < nkept; k++) free(kept[k].params);
    return st;
}
