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

static cJSON *json_str(const char *s) { return s ? cJSON_CreateString(s) : cJSON_CreateNull(); }

char *volt__mc_state_dict(void *self) {
    mc *m = self;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "monitor", json_str(m->monitor));
    cJSON_AddStringToObject(o, "mode", volt__mc_mode_str(m->mode));
    cJSON_AddItemToObject(o, "dirpath", json_str(m->dirpath));
    cJSON_AddNumberToObject(o, "save_top_k", m->save_top_k);
    cJSON_AddNumberToObject(o, "every_n_epochs", (double)m->every_n_epochs);
    cJSON_AddNumberToObject(o, "every_n_train_steps", (double)m->every_n_train_steps);
    cJSON_AddNumberToObject(o, "train_time_interval", m->train_time_interval);
    cJSON_AddNumberToObject(o, "last_global_step_saved", (double)m->last_step_saved);
    cJSON_AddItemToObject(o, "best_model_path", json_str(m->best_path));
    cJSON_AddItemToObject(o, "best_model_score", m->best_path ? volt__cb_json_score(m->best_score) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "last_model_path", json_str(m->last_path));
    cJSON *arr = cJSON_AddArrayToObject(o, "best_k_models");
    for (int i = 0; arr && i < m->topk.n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", m->topk.e[i].path);
        cJSON_AddItemToObject(e, "score", volt__cb_json_score(m->topk.e[i].score));
        cJSON_AddItemToArray(arr, e);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* ---- load ------------------------------------------------------------------------------------------ */

/* A path field: absent or null (NULL), or a string. */
static bool get_path(const cJSON *o, const char *k, const char **out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    *out = cJSON_IsString(j) ? j->valuestring : NULL;
    return !j || cJSON_IsNull(j) || cJSON_IsString(j);
}

/* Every field of the state is of its kind (nothing is taken before): NULL, else the field that
 * is not, with what it should be. */
static const char *check_state(const cJSON *o, const char **want) {
    const cJSON *mon = cJSON_GetObjectItemCaseSensitive(o, "monitor"), *mode = cJSON_GetObjectItemCaseSensitive(o, "mode");
    const char *p;
    double v;
    if (!(cJSON_IsNull(mon) || (cJSON_IsString(mon) && *mon->valuestring))) return *want = "null or a metric name", "monitor";
    if (!cJSON_IsString(mode) || (strcmp(mode->valuestring, "min") && strcmp(mode->valuestring, "max")))
        return *want = "'min' or 'max'", "mode";
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(o, "last_global_step_saved");
    /* a step: a whole number a run reaches (up to 2^53, a double's integers) */
    if (ls && !(cJSON_IsNumber(ls) && ls->valuedouble >= 0 && ls->valuedouble <= 9007199254740992.0 &&
                ls->valuedouble == floor(ls->valuedouble)))
        return *want = "a whole number in [0, 2^53]", "last_global_step_saved";
    static const char *const trig[3] = { "every_n_epochs", "every_n_train_steps", "train_time_interval" };
    for (int i = 0; i < 3; i++) {   /* absent before they were written: not compared */
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, trig[i]);
        if (j && !(cJSON_IsNumber(j) && j->valuedouble >= 0 && isfinite(j->valuedouble))) return *want = "a number >= 0", trig[i];
    }
    if (!get_path(o, "dirpath", &p)) return *want = "null or a path", "dirpath";
    if (!get_path(o, "last_model_path", &p)) return *want = "null or a path", "last_model_path";
    if (!get_path(o, "best_model_path", &p)) return *want = "null or a path", "best_model_path";
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(o, "best_model_score");
    if (p && !volt__cb_json_get_score(bs, &v)) return *want = "a number, \"inf\", \"-inf\" or \"nan\"", "best_model_score";
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "best_k_models"), *e;
    if (arr && !cJSON_IsArray(arr)) return *want = "an array", "best_k_models";
    cJSON_ArrayForEach(e, arr) {
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "path")) ||
            !volt__cb_json_get_score(cJSON_GetObjectItemCaseSensitive(e, "score"), &v))
            return *want = "entries of a path and a score", "best_k_models";
    }
    return NULL;
}

/* Lightning keys a ModelCheckpoint's state by monitor, mode, every_n_train_steps, every_n_epochs
 * and train_time_interval: a state saved with others is another callback's. Into why (empty
 * when they are the same) the first that differs. The mode only counts with a monitor (without
 * one it decides nothing). */
static void state_differs(const mc *m, const cJSON *o, char *why, size_t n) {
    const cJSON *mon = cJSON_GetObjectItemCaseSensitive(o, "monitor");
    const char *smon = cJSON_IsString(mon) ? mon->valuestring : NULL;
    const char *smode = cJSON_GetObjectItemCaseSensitive(o, "mode")->valuestring;
    why[0] = 0;
    if ((smon == NULL) != (m->monitor == NULL) || (smon && strcmp(smon, m->monitor) != 0) ||
        (smon && strcmp(smode, volt__mc_mode_str(m->mode)) != 0)) {
        snprintf(why, n, "monitor %s%.200s%s (mode '%s'), this callback's %s%.200s%s (mode '%s')", smon ? "'" : "",
                 smon ? smon : "None", smon ? "'" : "", smode, m->monitor ? "'" : "", m->monitor ? m->monitor : "None",
                 m->monitor ? "'" : "", volt__mc_mode_str(m->mode));
        return;
    }
    static const char *const trig[3] = { "every_n_epochs", "every_n_train_steps", "train_time_interval" };
    const double mine[3] = { (double)m->every_n_epochs, (double)m->every_n_train_steps, m->train_time_interval };
    for (int i = 0; i < 3; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, trig[i]);
        if (j && j->valuedouble != mine[i]) {
            snprintf(why, n, "%s %g, this callback's %g", trig[i], j->valuedouble, mine[i]);
            return;
        }
    }
}

volt_status volt__mc_load_state_dict(void *self, volt_trainer *t, const char *json) {
    mc *m = self;
    volt__mc_wait(m);   /* a background write of an earlier fit settles before its bookkeeping is replaced */
    cJSON *o = cJSON_Parse(json);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return volt_trainer_fail(t, VOLT_ERR_CORRUPT, "ModelCheckpoint: checkpoint state is not a JSON object");
    }
    const char *want = NULL, *bad = check_state(o, &want);
    if (bad) {
        char *got = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(o, bad));
        volt_status st = volt_trainer_fail(t, VOLT_ERR_CORRUPT, "ModelCheckpoint: the checkpoint's %s is %.80s, not %s "
                                           "(damaged state)", bad, got ? got : "missing", want);
        free(got);
        cJSON_Delete(o);
        return st;
    }
    const char *dir, *best, *last;
    get_path(o, "dirpath", &dir);
    get_path(o, "best_model_path", &best);
    get_path(o, "last_model_path", &last);
    char why[640];
    state_differs(m, o, why, sizeof why);
    /* Nothing here is trusted yet: the paths are checked against this run's dirpath when it
     * is resolved (mc_reconcile); the folder itself is never taken from the checkpoint. The
     * step of the last save is the run's, whatever the callback's settings: the resumed run
     * does not save that step again. */
    volt_cb_topk topk = { 0 };
    volt_status st = VOLT_OK;
    if (!why[0]) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "best_k_models")) {
            const char *p = cJSON_GetObjectItemCaseSensitive(e, "path")->valuestring;
            double score = NAN;
            volt__cb_json_get_score(cJSON_GetObjectItemCaseSensitive(e, "score"), &score);
            /* one entry per path (Lightning's dict): a file written twice holds the later save */
            free(volt__cb_topk_take(&topk, volt__cb_topk_find(&topk, p)));
            if ((st = volt__cb_topk_push(&topk, p, score)) != VOLT_OK) break;
        }
    }
    if (st != VOLT_OK) {
        volt__cb_topk_clear(&topk);
        cJSON_Delete(o);
        return volt_trainer_fail(t, st, "ModelCheckpoint: out of memory restoring the checkpoint's state");
    }
    if (why[0] && volt_trainer_is_global_zero(t))
        fprintf(stderr, "volt: warning: ModelCheckpoint: the checkpoint's state was saved with %s, so it is another "
                "callback's (Lightning's state key): the best score, the top-k and the last path are not restored, and "
                "their files are never removed; only best_model_path is\n", why);
    volt__cb_topk_clear(&m->topk);
    m->topk = topk;
    volt__mc_set_str(&m->best_path, best);
    volt__mc_set_str(&m->ckpt_dir, why[0] ? NULL : dir);   /* none: mc_reconcile keeps best_model_path alone */
    volt__mc_set_str(&m->last_path, why[0] ? NULL : last);
    m->best_score = NAN;
    if (best && !why[0]) volt__cb_json_get_score(cJSON_GetObjectItemCaseSensitive(o, "best_model_score"), &m->best_score);
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(o, "last_global_step_saved");
    if (ls) m->last_step_saved = (int64_t)ls->valuedouble;
    m->restored = m->pending = true;
    cJSON_Delete(o);
    /* a sharded commit still pending changes none of it; until then "best" is the loaded one */
    m->undo.topk = m->undo.last_set = false;
    volt__mc_set_str(&m->undo.best, m->best_path);
    m->undo.best_score = m->best_score;
    return VOLT_OK;
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
