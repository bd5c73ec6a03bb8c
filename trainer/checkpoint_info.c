/* What a checkpoint holds, from its header alone (include/volt/trainer.h,
 * volt_checkpoint_param_shape): a single file's tensor header, or a sharded checkpoint's
 * layout in its index ("volt.shards", written by checkpoint_shards.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "trainer/checkpoint_internal.h"

static bool no_tensor(const char *name, void *ctx) {
    (void)name;
    (void)ctx;
    return false;
}

/* The parameter's shape in a shard index; VOLT_ERR_NOT_FOUND when it lists no such parameter. */
static volt_status index_shape(const char *path, const char *js, const char *name, volt_shape *out, char *err, size_t errlen) {
    cJSON *ix = cJSON_Parse(js);
    const cJSON *params = ix ? cJSON_GetObjectItemCaseSensitive(ix, "params") : NULL;
    volt_status st = VOLT_ERR_NOT_FOUND;
    if (!cJSON_IsArray(params)) {
        snprintf(err, errlen, "checkpoint '%s': the shard index is malformed (no params)", path);
        st = VOLT_ERR_CORRUPT;
    }
    const cJSON *p;
    if (st == VOLT_ERR_CORRUPT) params = NULL;
    cJSON_ArrayForEach(p, params) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(p, "name"), *sh = cJSON_GetObjectItemCaseSensitive(p, "shape");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0) continue;
        const int nd = cJSON_IsArray(sh) ? cJSON_GetArraySize(sh) : -1;
        volt_shape s = { .ndim = nd };
        for (int d = 0; d < nd && nd <= VOLT_MAX_DIMS; d++) {
            const cJSON *x = cJSON_GetArrayItem(sh, d);
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 9007199254740992.0 ||
                x->valuedouble != floor(x->valuedouble)) break;
            s.d[d] = (int64_t)x->valuedouble;
            if (d == nd - 1) st = VOLT_OK;
        }
        if (nd == 0) st = VOLT_OK;
        if (st == VOLT_OK) *out = s;
        else {
            snprintf(err, errlen, "checkpoint '%s': the shard index has a bad shape for '%s'", path, name);
            st = VOLT_ERR_CORRUPT;
        }
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
    volt_status st = volt_st_open_some(path, no_tensor, NULL, &f, err, errlen);
    if (st < 0) return st;
    volt_st_info info;
    const char *js = volt_st_meta(f, SHARD_INDEX_KEY);
    if (js) st = index_shape(path, js, name, out, err, errlen);
    else if ((st = volt_st_find(f, name, &info)) == VOLT_OK) *out = info.shape;
    if (st == VOLT_ERR_NOT_FOUND) snprintf(err, errlen, "checkpoint '%s' has no parameter '%s'", path, name);
    volt_st_close(f);
    return st;
}
