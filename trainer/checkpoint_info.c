/* What a checkpoint holds, from its header alone (include/volt/trainer.h,
 * volt_checkpoint_param_shape), and which file "last" is in a folder (volt_checkpoint_find_last): a single file's tensor header, or a sharded checkpoint's
 * layout in its index ("volt.shards", written by checkpoint_shards.c). */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "core/fsutil.h"
#include "trainer/checkpoint_internal.h"

bool ck_no_tensor(const char *name, void *ctx) {
    (void)name;
    (void)ctx;
    return false;
}

/* The parameter's shape in a shard index; VOLT_ERR_NOT_FOUND when it lists no such parameter. */
static volt_status index_shape(const char *path, const char *js, const char *name, volt_shape *out, char *err, size_t errlen) {
    cJSON *ix = cJSON_Parse(js);
    const cJSON *params = ix ? cJSON_GetObjectItemCaseSensitive(ix, "params") : NULL, *p;
    volt_status st = VOLT_ERR_NOT_FOUND;
    if (!cJSON_IsArray(params)) {
        snprintf(err, errlen, "checkpoint '%s': the shard index is malformed (no params)", path);
        st = VOLT_ERR_CORRUPT;
        params = NULL;
    }
    cJSON_ArrayForEach(p, params) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(p, "name");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0) continue;
        st = ck_json_shape(cJSON_GetObjectItemCaseSensitive(p, "shape"), out) ? VOLT_OK : VOLT_ERR_CORRUPT;
        if (st < 0) snprintf(err, errlen, "checkpoint '%s': the shard index has a bad shape for '%s'", path, name);
        break;
    }
    cJSON_Delete(ix);
    return st;
}

volt_status volt_checkpoint_param_shape(const char *path, const char *name, volt_shape *out, char *err, size_t errlen) {
    char e[768] = "";
    if (!err || !errlen) {
        err = e;
        errlen = sizeof e;
    }
    err[0] = 0;
    if (!path || !name || !out) {
        snprintf(err, errlen, "volt_checkpoint_param_shape: NULL path, name or out");
        return VOLT_ERR_INVALID_ARG;
    }
    volt_st_file *f = NULL;
    volt_status st = volt_st_open_some(path, ck_no_tensor, NULL, &f, err, errlen);
    if (st < 0) return st;
    volt_st_info info;
    const char *js = volt_st_meta(f, SHARD_INDEX_KEY);
    if (js) st = index_shape(path, js, name, out, err, errlen);
    else if ((st = volt_st_find(f, name, &info)) == VOLT_OK) *out = info.shape;
    if (st == VOLT_ERR_NOT_FOUND) snprintf(err, errlen, "checkpoint '%s' has no parameter '%s'", path, name);
    volt_st_close(f);
    return st;
}

/* ModelCheckpoint's last files: last.safetensors, last-vN.safetensors (N one or more digits);
 * with_exc, OnExceptionCheckpoint's on_exception.safetensors too. */
static bool is_last_name(const char *n, bool with_exc) {
    if (with_exc && !strcmp(n, "on_exception.safetensors")) return true;
    if (strncmp(n, "last", 4) != 0) return false;
    const char *p = n + 4;
    if (!strncmp(p, "-v", 2)) {
        const size_t d = strspn(p + 2, "0123456789");
        if (!d) return false;
        p += 2 + d;
    }
    return !strcmp(p, ".safetensors");
}

const char *volt_checkpoint_find_last(const char *dir, bool with_on_exception, char *buf, size_t n) {
    if (!dir || !buf || !n) return NULL;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    struct timespec best = { 0, 0 };
    bool have = false;
    const struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_last_name(de->d_name, with_on_exception)) continue;
        char p[4096];
        struct stat sb;
        const int len = snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (len < 0 || (size_t)len >= sizeof p || (size_t)len >= n) continue;   /* not a path it can give */
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (have && !volt__file_newer(&sb.st_mtim, p, &best, buf)) continue;
        best = sb.st_mtim;
        memcpy(buf, p, (size_t)len + 1);
        have = true;
    }
    closedir(d);
    return have ? buf : NULL;
}
