/* A Hugging Face DistilBERT folder's config.json / tokenizer_config.json
 * (include/volt/distilbert_hf.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "core/fsutil.h"
#include "volt/distilbert_hf.h"

static char *read_small(const char *path, char *err, size_t errlen, bool *missing) {
    const int fd = volt__open_regular(path);   /* a FIFO in the file's place is refused, not waited on */
    *missing = fd == -1 && errno == ENOENT;
    if (fd == -2) { snprintf(err, errlen, "'%s': not a regular file", path); return NULL; }
    if (fd < 0) { snprintf(err, errlen, "'%s': %s", path, strerror(errno)); return NULL; }
    FILE *f = fdopen(fd, "rb");
    if (!f) { snprintf(err, errlen, "'%s': %s", path, strerror(errno)); close(fd); return NULL; }
    char *buf = malloc((1 << 20) + 1);
    size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
    bool big = buf && n == (1 << 20) && fgetc(f) != EOF;
    fclose(f);
    if (!buf || big) { free(buf); snprintf(err, errlen, "'%s': larger than 1 MiB", path); return NULL; }
    buf[n] = 0;
    return buf;
}

/* An integer key in [lo, hi] into *out (absent: untouched). false + err on a bad value. */
static bool get_int(const cJSON *o, const char *path, const char *key, int64_t lo, int64_t hi, int64_t *out,
                    char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo || v->valuedouble > (double)hi) {
        snprintf(err, errlen, "'%s': \"%s\" must be an integer in [%lld, %lld]", path, key, (long long)lo, (long long)hi);
        return false;
    }
    *out = (int64_t)v->valuedouble;
    return true;
}

static bool get_prob(const cJSON *o, const char *path, const char *key, float *out, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    /* as a float too: 0.99999999 rounds to 1.0f, which the model refuses */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0.0 && v->valuedouble < 1.0 && (float)v->valuedouble < 1.0f)) {
        snprintf(err, errlen, "'%s': \"%s\" must be a number in [0, 1)", path, key);
        return false;
    }
    *out = (float)v->valuedouble;
    return true;
}

volt_status volt_distilbert_config_from_hf(volt_distilbert_config *cfg, const char *dir, bool *do_lower_case,
                                           char *err, size_t errlen) {
    if (!cfg || !dir) { snprintf(err, errlen, "config_from_hf: NULL argument"); return VOLT_ERR_INVALID_ARG; }
    char path[4096 + 32];
    bool missing = false;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = read_small(path, err, errlen, &missing);
    if (!text) return VOLT_ERR_IO;
    cJSON *o = cJSON_Parse(text);
    free(text);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        snprintf(err, errlen, "'%s': not a JSON object", path);
        return VOLT_ERR_CORRUPT;
    }
    volt_status st = VOLT_ERR_CORRUPT;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "activation");
    int64_t layers = cfg->n_layers, heads = cfg->n_heads;
    float init = cfg->initializer_range;
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, "distilbert"))) {
        snprintf(err, errlen, "'%s': model_type is %s, want \"distilbert\"", path, cJSON_IsString(mt) ? mt->valuestring : "not a string");
        st = VOLT_ERR_UNSUPPORTED;
        goto out;
    }
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "gelu"))) {
        snprintf(err, errlen, "'%s': activation %s%s%s is not supported (want \"gelu\")", path, cJSON_IsString(act) ? "\"" : "",
                 cJSON_IsString(act) ? act->valuestring : "(not a string)", cJSON_IsString(act) ? "\"" : "");
        st = VOLT_ERR_UNSUPPORTED;
        goto out;
    }
    /* HF fills fixed sinusoids into position_embeddings and never trains them; volt trains them */
    const cJSON *sin = cJSON_GetObjectItemCaseSensitive(o, "sinusoidal_pos_embds");
    if (sin && !cJSON_IsNull(sin) && !cJSON_IsFalse(sin)) {
        snprintf(err, errlen, "'%s': sinusoidal_pos_embds %s is not supported (want false: learned position embeddings)", path,
                 cJSON_IsTrue(sin) ? "true" : "(not a boolean)");
        st = VOLT_ERR_UNSUPPORTED;
        goto out;
    }
    const cJSON *ir = cJSON_GetObjectItemCaseSensitive(o, "initializer_range");
    if (ir && !cJSON_IsNull(ir)) {
        if (!cJSON_IsNumber(ir) || !(ir->valuedouble > 0 && ir->valuedouble < 10)) {
            snprintf(err, errlen, "'%s': \"initializer_range\" must be a number in (0, 10)", path);
            goto out;
        }
        init = (float)ir->valuedouble;
    }
    if (!get_int(o, path, "vocab_size", 1, INT32_MAX, &cfg->vocab_size, err, errlen) ||
        !get_int(o, path, "max_position_embeddings", 1, 1 << 20, &cfg->max_position, err, errlen) ||
        !get_int(o, path, "dim", 1, 1 << 16, &cfg->dim, err, errlen) ||
        !get_int(o, path, "n_layers", 1, 256, &layers, err, errlen) ||
        !get_int(o, path, "n_heads", 1, 1024, &heads, err, errlen) ||
        !get_int(o, path, "hidden_dim", 1, 1 << 20, &cfg->hidden_dim, err, errlen) ||
        !get_int(o, path, "pad_token_id", -1, INT32_MAX, &cfg->pad_token_id, err, errlen) ||
        !get_prob(o, path, "dropout", &cfg->dropout, err, errlen) ||
        !get_prob(o, path, "attention_dropout", &cfg->attention_dropout, err, errlen) ||
        !get_prob(o, path, "seq_classif_dropout", &cfg->seq_classif_dropout, err, errlen))
        goto out;
    if (cfg->pad_token_id >= cfg->vocab_size) {
        snprintf(err, errlen, "'%s': pad_token_id %lld is not an id of the vocabulary (vocab_size %lld)", path,
                 (long long)cfg->pad_token_id, (long long)cfg->vocab_size);
        goto out;
    }
    if (cfg->dim % heads) {
        snprintf(err, errlen, "'%s': dim %lld is not a multiple of n_heads %lld", path, (long long)cfg->dim, (long long)heads);
        goto out;
    }
    cfg->n_layers = (int)layers;
    cfg->n_heads = (int)heads;
    cfg->initializer_range = init;
    st = VOLT_OK;
    if (do_lower_case) {
        *do_lower_case = true;
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
        char terr[256];
        char *tt = read_small(path, terr, sizeof terr, &missing);
        if (!tt && !missing) { snprintf(err, errlen, "%s", terr); st = VOLT_ERR_IO; goto out; }
        if (tt) {
            cJSON *to = cJSON_Parse(tt);
            free(tt);
            const cJSON *lc = to ? cJSON_GetObjectItemCaseSensitive(to, "do_lower_case") : NULL;
            if (!to || !cJSON_IsObject(to) || (lc && !cJSON_IsBool(lc))) {
                snprintf(err, errlen, "'%s': %s", path, !to || !cJSON_IsObject(to) ? "not a JSON object" : "\"do_lower_case\" must be true or false");
                st = VOLT_ERR_CORRUPT;
            } else if (lc) {
                *do_lower_case = cJSON_IsTrue(lc);
            }
            cJSON_Delete(to);
        }
    }
out:
    cJSON_Delete(o);
    return st;
}
