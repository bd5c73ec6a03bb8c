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

/* <dir>/tokenizer_config.json's do_lower_case (true when the file or the key is absent) and,
 * when strip_accents is not NULL, its strip_accents (-1 when absent or null: Hugging Face's
 * BertTokenizer then follows do_lower_case). */
static volt_status read_tokenizer_config(const char *dir, bool *do_lower_case, int *strip_accents, char *err, size_t errlen) {
    char path[4096 + 32], terr[4096 + 64];
    bool missing = false;
    *do_lower_case = true;
    if (strip_accents) *strip_accents = -1;
    if (snprintf(path, sizeof path, "%s/tokenizer_config.json", dir) >= (int)sizeof path) {
        snprintf(err, errlen, "'%s': path too long", dir);
        return VOLT_ERR_INVALID_ARG;
    }
    char *tt = read_small(path, terr, sizeof terr, &missing);
    if (!tt) {
        if (missing) return VOLT_OK;
        snprintf(err, errlen, "%s", terr);
        return VOLT_ERR_IO;
    }
    cJSON *to = cJSON_Parse(tt);
    free(tt);
    const cJSON *lc = to ? cJSON_GetObjectItemCaseSensitive(to, "do_lower_case") : NULL;
    const cJSON *sa = to && strip_accents ? cJSON_GetObjectItemCaseSensitive(to, "strip_accents") : NULL;
    volt_status st = VOLT_OK;
    if (!to || !cJSON_IsObject(to)) {
        snprintf(err, errlen, "'%s': not a JSON object", path);
        st = VOLT_ERR_CORRUPT;
    } else if (lc && !cJSON_IsBool(lc)) {
        snprintf(err, errlen, "'%s': \"do_lower_case\" must be true or false", path);
        st = VOLT_ERR_CORRUPT;
    } else if (sa && !cJSON_IsBool(sa) && !cJSON_IsNull(sa)) {
        snprintf(err, errlen, "'%s': \"strip_accents\" must be true, false or null", path);
        st = VOLT_ERR_CORRUPT;
    } else {
        if (lc) *do_lower_case = cJSON_IsTrue(lc);
        if (sa && cJSON_IsBool(sa)) *strip_accents = cJSON_IsTrue(sa) ? 1 : 0;
    }
    cJSON_Delete(to);
    return st;
}

volt_status volt_distilbert_tokenizer_from_hf(const char *dir, bool *do_lower_case, int *strip_accents, char *err,
                                              size_t errlen) {
    char e[512];
    if (!err || !errlen) { err = e; errlen = sizeof e; }
    if (!dir || !do_lower_case || !strip_accents) {
        snprintf(err, errlen, "tokenizer_from_hf: NULL argument");
        return VOLT_ERR_INVALID_ARG;
    }
    return read_tokenizer_config(dir, do_lower_case, strip_accents, err, errlen);
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
    if (do_lower_case) st = read_tokenizer_config(dir, do_lower_case, NULL, err, errlen);
out:
    cJSON_Delete(o);
    return st;
}

/* ---- writing a folder ------------------------------------------------------------------------ */
static volt_status write_json(const char *dir, const char *name, cJSON *o, char *err, size_t errlen) {
    char path[4096 + 64];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        snprintf(err, errlen, "'%s': path too long", dir);
        return VOLT_ERR_INVALID_ARG;
    }
    char *text = cJSON_Print(o);
    if (!text) { snprintf(err, errlen, "'%s': out of memory", path); return VOLT_ERR_NOMEM; }
    const size_t n = strlen(text);
    char *nl = realloc(text, n + 2);   /* a final newline, as transformers writes */
    if (nl) { text = nl; text[n] = '\n'; text[n + 1] = 0; }
    volt_status st = volt__write_text_atomic(path, text, err, errlen);
    free(text);
    return st;
}

/* f as the shortest decimal that reads back as f (0.1f is written 0.1, not 0.100000001490116) */
static double short_float(float f) {
    char b[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, (double)f);
        const double d = strtod(b, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

static volt_status copy_vocab(const char *src, const char *dir, char *err, size_t errlen) {
    const int fd = volt__open_regular(src);
    if (fd < 0) {
        snprintf(err, errlen, "vocab '%s': %s", src, fd == -2 ? "not a regular file" : strerror(errno));
        return VOLT_ERR_IO;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); snprintf(err, errlen, "vocab '%s': %s", src, strerror(errno)); return VOLT_ERR_IO; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = cap < ((size_t)1 << 30) ? realloc(buf, cap * 2 + 1) : NULL;
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    const bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "vocab '%s': %s", src, bad ? "read failed" : "out of memory (or larger than 1 GiB)");
        return bad ? VOLT_ERR_IO : VOLT_ERR_NOMEM;
    }
    buf[n] = 0;
    if (strlen(buf) != n) {
        free(buf);
        snprintf(err, errlen, "vocab '%s': holds a NUL byte (not a vocab.txt)", src);
        return VOLT_ERR_CORRUPT;
    }
    char path[4096 + 64];
    volt_status st = VOLT_ERR_INVALID_ARG;
    if (snprintf(path, sizeof path, "%s/vocab.txt", dir) >= (int)sizeof path) snprintf(err, errlen, "'%s': path too long", dir);
    else st = volt__write_text_atomic(path, buf, err, errlen);
    free(buf);
    return st;
}

volt_status volt_distilbert_config_to_hf(const volt_distilbert_config *cfg, const char *dir, const char *vocab_txt,
                                         bool do_lower_case, char *err, size_t errlen) {
    return volt_distilbert_config_to_hf_ex(cfg, dir, vocab_txt, do_lower_case, -1, err, errlen);
}

volt_status volt_distilbert_config_to_hf_ex(const volt_distilbert_config *cfg, const char *dir, const char *vocab_txt,
                                            bool do_lower_case, int strip_accents, char *err, size_t errlen) {
    char e[512];
    if (!err || !errlen) { err = e; errlen = sizeof e; }
    err[0] = 0;
    if (!cfg || !dir || !*dir) { snprintf(err, errlen, "config_to_hf: NULL config or folder"); return VOLT_ERR_INVALID_ARG; }
    if (strip_accents < -1 || strip_accents > 1) {
        snprintf(err, errlen, "config_to_hf: strip_accents %d (want -1 for null, 0 or 1)", strip_accents);
        return VOLT_ERR_INVALID_ARG;
    }
    void *probe = NULL;   /* only what the model takes is written */
    volt_status st = volt_distilbert_create(cfg, &probe);
    volt_distilbert_destroy(probe);
    if (st < 0) { snprintf(err, errlen, "config_to_hf: the config is not a valid DistilBERT (%s)", volt_status_str(st)); return st; }
    /* ... and only what config_from_hf reads back (its ranges are narrower than the model's) */
    if (cfg->vocab_size > INT32_MAX || cfg->max_position > (1 << 20) || cfg->dim > (1 << 16) || cfg->n_layers > 256 ||
        cfg->n_heads > 1024 || cfg->hidden_dim > (1 << 20) || !(cfg->initializer_range > 0 && cfg->initializer_range < 10)) {
        snprintf(err, errlen, "config_to_hf: the config is outside what a config.json is read with (vocab_size <= 2^31-1, "
                 "max_position <= 2^20, dim <= 2^16, n_layers <= 256, n_heads <= 1024, hidden_dim <= 2^20, "
                 "initializer_range in (0, 10))");
        return VOLT_ERR_INVALID_ARG;
    }
    cJSON *o = cJSON_CreateObject(), *arch = cJSON_CreateArray(), *id2 = cJSON_CreateObject(), *l2id = cJSON_CreateObject();
    bool ok = o && arch && id2 && l2id;
    if (ok) {
        cJSON_AddItemToObject(o, "architectures", arch);
        arch = NULL;
    }
    ok = ok && cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(o, "architectures"),
                                    cJSON_CreateString("DistilBertForSequenceClassification"));
    ok = ok && cJSON_AddStringToObject(o, "model_type", "distilbert") && cJSON_AddStringToObject(o, "activation", "gelu") &&
         cJSON_AddNumberToObject(o, "vocab_size", (double)cfg->vocab_size) &&
         cJSON_AddNumberToObject(o, "max_position_embeddings", (double)cfg->max_position) &&
         cJSON_AddFalseToObject(o, "sinusoidal_pos_embds") && cJSON_AddNumberToObject(o, "n_layers", cfg->n_layers) &&
         cJSON_AddNumberToObject(o, "n_heads", cfg->n_heads) && cJSON_AddNumberToObject(o, "dim", (double)cfg->dim) &&
         cJSON_AddNumberToObject(o, "hidden_dim", (double)cfg->hidden_dim) &&
         cJSON_AddNumberToObject(o, "dropout", short_float(cfg->dropout)) &&
         cJSON_AddNumberToObject(o, "attention_dropout", short_float(cfg->attention_dropout)) &&
         cJSON_AddNumberToObject(o, "seq_classif_dropout", short_float(cfg->seq_classif_dropout)) &&
         cJSON_AddNumberToObject(o, "qa_dropout", 0.1) &&
         cJSON_AddNumberToObject(o, "initializer_range", short_float(cfg->initializer_range)) &&
         (cfg->pad_token_id >= 0 ? cJSON_AddNumberToObject(o, "pad_token_id", (double)cfg->pad_token_id) != NULL
                                 : cJSON_AddNullToObject(o, "pad_token_id") != NULL) &&
         cJSON_AddTrueToObject(o, "tie_weights_") && cJSON_AddStringToObject(o, "torch_dtype", "float32");
    for (int64_t i = 0; ok && i < cfg->n_classes; i++) {
        char k[32], v[48];
        snprintf(k, sizeof k, "%lld", (long long)i);
        snprintf(v, sizeof v, "LABEL_%lld", (long long)i);
        ok = cJSON_AddStringToObject(id2, k, v) && cJSON_AddNumberToObject(l2id, v, (double)i);
    }
    if (ok) {
        cJSON_AddItemToObject(o, "id2label", id2);
        cJSON_AddItemToObject(o, "label2id", l2id);
        id2 = l2id = NULL;
    }
    cJSON_Delete(arch);
    cJSON_Delete(id2);
    cJSON_Delete(l2id);
    if (!ok) { cJSON_Delete(o); snprintf(err, errlen, "config_to_hf: out of memory"); return VOLT_ERR_NOMEM; }
    st = write_json(dir, "config.json", o, err, errlen);
    cJSON_Delete(o);
    if (st < 0 || !vocab_txt) return st;
    if ((st = copy_vocab(vocab_txt, dir, err, errlen)) < 0) return st;
    cJSON *t = cJSON_CreateObject();
    /* null: BertTokenizer strips accents exactly when it lowercases (HF's default) */
    if (!t || !cJSON_AddBoolToObject(t, "do_lower_case", do_lower_case) ||
        !(strip_accents < 0 ? cJSON_AddNullToObject(t, "strip_accents") : cJSON_AddBoolToObject(t, "strip_accents", strip_accents)) ||
        !cJSON_AddStringToObject(t, "tokenizer_class", "DistilBertTokenizer") ||
        !cJSON_AddNumberToObject(t, "model_max_length", (double)cfg->max_position)) {
        cJSON_Delete(t);
        snprintf(err, errlen, "config_to_hf: out of memory");
        return VOLT_ERR_NOMEM;
    }
    st = write_json(dir, "tokenizer_config.json", t, err, errlen);
    cJSON_Delete(t);
    return st;
}
