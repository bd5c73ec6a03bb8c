/* ModelCheckpoint's state and its "best" / "last" (the resolver behind ckpt_path="best" and
 * "last"): what a checkpoint records of the callback and how a resumed run takes it back,
 * and the search for the newest last*.safetensors. The save points are in model_checkpoint.c. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "volt/trainer.h"
#include "callbacks/model_checkpoint_internal.h"

/* ---- state -------------------------------------------------------------------------------------------- */

static cJSON *json_num(double v) {
    if (isfinite(v)) return cJSON_CreateNumber(v);
    return cJSON_CreateString(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

static double json_get_num(const cJSON *j) {
    if (cJSON_IsNumber(j)) return j->valuedouble;
    if (cJSON_IsString(j)) return strtod(j->valuestring, NULL);
    return NAN;
}

static cJSON *json_str(const char *s) { return s ? cJSON_CreateString(s) : cJSON_CreateNull(); }

static const char *json_get_str(const cJSON *o, const char *k) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

char *volt__mc_state_dict(void *self) {
    mc *m = self;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "monitor", json_str(m->monitor));
    cJSON_AddStringToObject(o, "mode", volt__mc_mode_str(m->mode));
    cJSON_AddItemToObject(o, "dirpath", json_str(m->dirpath));
    cJSON_AddNumberToObject(o, "save_top_k", m->save_top_k);
    cJSON_AddNumberToObject(o, "last_global_step_saved", (double)m->last_step_saved);
    cJSON_AddItemToObject(o, "best_model_path", json_str(m->best_path));
    cJSON_AddItemToObject(o, "best_model_score", m->best_path ? json_num(m->best_score) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "last_model_path", json_str(m->last_path));
    cJSON *arr = cJSON_AddArrayToObject(o, "best_k_models");
    for (int i = 0; arr && i < m->topk.n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", m->topk.e[i].path);
        cJSON_AddItemToObject(e, "score", json_num(m->topk.e[i].score));
        cJSON_AddItemToArray(arr, e);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

volt_status volt__mc_load_state_dict(void *self, volt_trainer *t, const char *json) {
    mc *m = self;
    volt__mc_wait(m);   /* a background write of an earlier fit settles before its bookkeeping is replaced */
    cJSON *o = cJSON_Parse(json);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return volt_trainer_fail(t, VOLT_ERR_CORRUPT, "ModelCheckpoint: checkpoint state is not a JSON object");
    }
    const char *dir = json_get_str(o, "dirpath");
    const char *best = json_get_str(o, "best_model_path");
    /* Nothing here is trusted yet: the paths are checked against this run's dirpath when it
     * is resolved (mc_reconcile); the folder itself is never taken from the checkpoint. */
    volt__mc_set_str(&m->best_path, best);
    volt__mc_set_str(&m->ckpt_dir, dir);
    m->restored = m->pending = true;
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(o, "last_global_step_saved");
    if (cJSON_IsNumber(ls)) m->last_step_saved = (int64_t)ls->valuedouble;
    m->best_score = best ? json_get_num(cJSON_GetObjectItemCaseSensitive(o, "best_model_score")) : NAN;
    volt__mc_set_str(&m->last_path, json_get_str(o, "last_model_path"));
    volt__cb_topk_clear(&m->topk);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "best_k_models"), *e;
    volt_status st = VOLT_OK;
    cJSON_ArrayForEach(e, arr) {
        const char *p = json_get_str(e, "path");
        if (!p) { st = volt_trainer_fail(t, VOLT_ERR_CORRUPT, "ModelCheckpoint: bad best_k_models entry in checkpoint state"); break; }
        if ((st = volt__cb_topk_push(&m->topk, p, json_get_num(cJSON_GetObjectItemCaseSensitive(e, "score")))) != VOLT_OK) break;
    }
    cJSON_Delete(o);
    /* a sharded commit still pending changes none of it; until then "best" is the loaded one */
    m->undo.topk = m->undo.last_set = false;
    volt__mc_set_str(&m->undo.best, m->best_path);
    m->undo.best_score = m->best_score;
    return st;
}

/* ---- "best" / "last" ------------------------------------------------------------------------------------ */

/* While sharded shards wait for their commit, the best committed checkpoint. */
const char *volt__mc_best(void *self) {
    mc *m = self;
    volt__mc_wait(m);
    return m->job.commit ? m->undo.best : m->best_path;
}
double volt__mc_best_score(void *self) {
    mc *m = self;
    if (m->job.commit) return m->undo.best ? m->undo.best_score : NAN;
    return m->best_path ? m->best_score : NAN;
}

/* The newest last*.safetensors in dir (by mtime, then name: volt_checkpoint_find_last's rule)
 * into m->found_last, when newer than what an earlier folder gave. */
static void scan_last(mc *m, const char *dir, struct timespec *best) {
    char p[VOLT_CB_PATH_MAX];
    struct stat sb;
    if (!volt_checkpoint_find_last(dir, false, p, sizeof p) || stat(p, &sb) != 0) return;
    if (m->found_last[0] && !volt__file_newer(&sb.st_mtim, p, best, m->found_last)) return;
    *best = sb.st_mtim;
    snprintf(m->found_last, sizeof m->found_last, "%s", p);
}

/* Lightning's ckpt_path="last": the newest last checkpoint in dirpath. Before a fit has
 * fixed the default dirpath, every version folder of the logger (and <root>/checkpoints)
 * is searched, so an app started again resumes its newest run. */
const char *volt__mc_last(void *self) {
    mc *m = self;
    volt__mc_wait(m);
    if (m->last_path && volt__mc_file_exists(m->last_path)) return m->last_path;
    m->found_last[0] = 0;
    struct timespec best = { 0, 0 };
    char p[VOLT_CB_PATH_MAX];
    const char *ld = volt_trainer_log_dir(m->t);
    if (m->dirpath_user) scan_last(m, m->dirpath_user, &best);
    else if (m->dirpath) scan_last(m, m->dirpath, &best);
    else if (ld) { snprintf(p, sizeof p, "%s/checkpoints", ld); scan_last(m, p, &best); }
    else {
        const volt_trainer_config *cfg = volt_trainer_get_config(m->t);
        const char *root = cfg && cfg->default_root_dir ? cfg->default_root_dir : ".";
        const char *name = cfg && cfg->logger_name ? cfg->logger_name : "lightning_logs";
        char lroot[VOLT_CB_PATH_MAX];
        snprintf(lroot, sizeof lroot, "%s/%s", root, name);
        DIR *d = opendir(lroot);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (strncmp(de->d_name, "version_", 8) != 0) continue;
            if (snprintf(p, sizeof p, "%s/%s/checkpoints", lroot, de->d_name) >= (int)sizeof p) continue;
            scan_last(m, p, &best);
        }
        if (d) closedir(d);
        snprintf(p, sizeof p, "%s/checkpoints", root);
        scan_last(m, p, &best);
    }
    return m->found_last[0] ? m->found_last : NULL;
}

const char *volt_trainer_best_model_path(const volt_trainer *t) {
    const volt_ckpt_resolver *r = t ? volt_trainer_ckpt_resolver(t) : NULL;
    return r && r->best ? r->best(r->self) : NULL;
}

double volt_trainer_best_model_score(const volt_trainer *t) {
    const volt_ckpt_resolver *r = t ? volt_trainer_ckpt_resolver(t) : NULL;
    return r && r->best_score ? r->best_score(r->self) : NAN;
}
