/* volt_cli: keys, config files, overrides, --help, --print-config (include/volt/cli.h).
 * The merged config is one cJSON tree of sections; each key's value is checked against its
 * declared type, bounds and choices wherever it comes from (default, file, command line).
 * null is a value only of a nullable key: one whose declared default is null (Lightning's
 * Optional[...] = None; volt_cli_set_default may give it another default and it stays
 * nullable). Every other key refuses null, naming the key: the programs read those keys as
 * strings and numbers. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "cli/cli_internal.h"
#include "core/err.h"
#include "core/fsutil.h"

#define cli_fail(c, st, ...) VOLT__OBJ_ERRF(c, st, __VA_ARGS__)

void volt__cli_seterr(volt_cli *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    volt__set_err(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
}

const char *volt_cli_errmsg(const volt_cli *c) { return c ? c->errmsg : "no cli"; }

int volt_cli_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    int d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1] && !((a[i - 1] == '-' || a[i - 1] == '_') && (b[j - 1] == '-' || b[j - 1] == '_'));
            int m = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < m) m = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < m) m = d[i - 1][j - 1] + cost;
            d[i][j] = m;
        }
    return d[la][lb];
}

row *volt__cli_find_row(const volt_cli *c, const char *key) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->rows[i].k.key, key)) return (row *)&c->rows[i];
    return NULL;
}

/* The closest key or alias to name (NULL if none is close): "--trainer.max_epoch" and
 * "--max_epochs" both suggest trainer.max_epochs. */
static const char *suggest(const volt_cli *c, const char *name) {
    const char *best = NULL;
    int bd = 99;
    for (int i = 0; i < c->n; i++) {
        const row *r = &c->rows[i];
        const char *dot = strrchr(r->k.key, '.');
        const char *cands[3] = { r->k.key, dot ? dot + 1 : NULL, r->k.alias };
        for (int j = 0; j < 3; j++) {
            if (!cands[j]) continue;
            int d = volt_cli_edit_distance(name, cands[j]);
            if (d < bd) { bd = d; best = j == 2 ? r->k.alias : r->k.key; }
        }
    }
    size_t len = strlen(name);
    int limit = len <= 4 ? 1 : len <= 10 ? 2 : 3;
    return bd <= limit ? best : NULL;
}

/* ---- values ------------------------------------------------------------------------------------ */
static bool parse_bool(const char *s, bool *out) {
    static const char *const t[] = { "true", "1", "yes", "on", NULL }, *const f[] = { "false", "0", "no", "off", NULL };
    for (int i = 0; t[i]; i++) if (!strcmp(s, t[i])) { *out = true; return true; }
    for (int i = 0; f[i]; i++) if (!strcmp(s, f[i])) { *out = false; return true; }
    return false;
}

static bool in_choices(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *p = choices; p && *p;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !strncmp(p, v, n)) return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

const char *volt__cli_type_name(volt_cli_type t) {
    switch (t) {
    case VOLT_CLI_INT: return "INT";
    case VOLT_CLI_FLOAT: return "FLOAT";
    case VOLT_CLI_BOOL: return "BOOL";
    default: return "STR";
    }
}

/* A bound as the key's type prints it: integers as integers, every digit ("1048576", not
 * "1.04858e+06"; "9007199254740992", not "9.0072e+15"). */
static void fmt_bound(const row *r, double d, char *buf, size_t n) {
    const bool count = r->k.type == VOLT_CLI_INT || (r->tf && r->tf->ftype == VOLT__TF_LIMIT);
    if (count && d == floor(d) && fabs(d) < 1e19) snprintf(buf, n, "%.0f", d);
    else snprintf(buf, n, "%g", d);
}

/* What a key takes, for messages: "an integer in [1, 1048576]", "a number >= 0", "true or false",
 * "a string: one of mlp|cnn". */
static void want_desc(const row *r, char *buf, size_t n) {
    const volt_cli_key *k = &r->k;
    if (k->type == VOLT_CLI_BOOL) { snprintf(buf, n, "true or false"); return; }
    if (k->type == VOLT_CLI_STRING) {
        if (k->choices) snprintf(buf, n, "a string: one of %s", k->choices);
        else snprintf(buf, n, "a string");
        return;
    }
    const bool limit = r->tf && r->tf->ftype == VOLT__TF_LIMIT;
    const char *what = limit ? "a count" : k->type == VOLT_CLI_INT ? "an integer" : "a number";
    const char *frac = limit ? " or a fraction in (0, 1)" : "";
    char lo[40], hi[40];
    fmt_bound(r, k->min, lo, sizeof lo);
    fmt_bound(r, k->max, hi, sizeof hi);
    if (k->min == 0 && k->max == 0) snprintf(buf, n, "%s%s", what, frac);
    else if (k->max >= 1e300) snprintf(buf, n, "%s >= %s%s", what, lo, frac);   /* no upper bound to speak of */
    else snprintf(buf, n, "%s in [%s, %s]%s", what, lo, hi, frac);
}

/* Check a value (from a file or made from text) against the key; NULL on success, else why.
 * null passes only for a nullable key (row.nullable). */
static const char *check_value(const row *r, const cJSON *v, char *why, size_t n) {
    const volt_cli_key *k = &r->k;
    char want[320];
    if (cJSON_IsNull(v)) {
        if (r->nullable) return NULL;
        if (k->type == VOLT_CLI_STRING) {    /* "(a string is required: one of mlp|cnn)" */
            snprintf(why, n, "null is not allowed (a string is required%s%s)", k->choices ? ": one of " : "",
                     k->choices ? k->choices : "");
        } else {
            want_desc(r, want, sizeof want);
            snprintf(why, n, "null is not allowed (%s is required)", want);
        }
        return why;
    }
    switch (k->type) {
    case VOLT_CLI_BOOL:
        if (!cJSON_IsBool(v)) { snprintf(why, n, "want true or false"); return why; }
        return NULL;
    case VOLT_CLI_STRING:
        if (!cJSON_IsString(v)) { snprintf(why, n, "want a string"); return why; }
        if (k->choices && !in_choices(k->choices, v->valuestring)) {
            snprintf(why, n, "want one of %s", k->choices);
            return why;
        }
        return NULL;
    case VOLT_CLI_INT:
    case VOLT_CLI_FLOAT: {
        if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {   /* a file's 1e400 */
            want_desc(r, want, sizeof want);
            snprintf(why, n, "out of range (want %s)", want);
            return why;
        }
        if (!cJSON_IsNumber(v)) { snprintf(why, n, "want %s", k->type == VOLT_CLI_INT ? "an integer" : "a number"); return why; }
        double d = v->valuedouble;
        if (k->type == VOLT_CLI_INT && d != floor(d)) { snprintf(why, n, "want an integer"); return why; }
        if (r->tf && r->tf->ftype == VOLT__TF_LIMIT && d != floor(d) && !(d > 0 && d < 1)) {
            snprintf(why, n, "want a count or a fraction in (0, 1)");
            return why;
        }
        if ((k->min != 0 || k->max != 0) && (d < k->min || d > k->max)) {
            want_desc(r, want, sizeof want);
            snprintf(why, n, "want %s", want);
            return why;
        }
        return NULL;
    }
    }
    return NULL;
}

/* A number too large (or too small) for a double: "1e400", "1e-400". */
static bool out_of_range_number(const char *s) {
    char *end;
    errno = 0;
    (void)strtod(s, &end);
    return end != s && !*end && errno == ERANGE;
}

/* Text (command line, defaults) to a value of the key's type; NULL + why on a bad value. */
static cJSON *value_from_text(const row *r, const char *s, char *why, size_t n) {
    cJSON *v = NULL;
    char want[320];
    if (!s || !strcmp(s, "null")) v = cJSON_CreateNull();
    else switch (r->k.type) {
    case VOLT_CLI_BOOL: {
        bool b;
        if (!parse_bool(s, &b)) { snprintf(why, n, "want true or false"); return NULL; }
        v = cJSON_CreateBool(b);
        break;
    }
    case VOLT_CLI_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        const int e = errno;
        if ((e == ERANGE && end != s && !*end) || (end != s && *end && out_of_range_number(s))) {
            want_desc(r, want, sizeof want);
            snprintf(why, n, "out of range (want %s)", want);
            return NULL;
        }
        if (e || end == s || *end) { snprintf(why, n, "want an integer"); return NULL; }
        v = cJSON_CreateNumber((double)x);
        break;
    }
    case VOLT_CLI_FLOAT: {
        char *end;
        errno = 0;
        double x = strtod(s, &end);
        if (end != s && !*end && errno == ERANGE) {
            want_desc(r, want, sizeof want);
            snprintf(why, n, "out of range (want %s)", want);
            return NULL;
        }
        if (errno || end == s || *end || !isfinite(x)) { snprintf(why, n, "want a number"); return NULL; }
        v = cJSON_CreateNumber(x);
        break;
    }
    case VOLT_CLI_STRING:
        v = cJSON_CreateString(s);
        break;
    }
    if (!v) { snprintf(why, n, "out of memory"); return NULL; }
    if (check_value(r, v, why, n)) { cJSON_Delete(v); return NULL; }
    return v;
}

/* Put v (taken) at key in the tree, creating the section objects. */
static bool tree_put(cJSON *tree, const char *key, cJSON *v) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", key);
    cJSON *obj = tree;
    char *p = buf;
    for (char *dot; (dot = strchr(p, '.')); p = dot + 1) {
        *dot = 0;
        cJSON *sub = cJSON_GetObjectItemCaseSensitive(obj, p);
        if (!sub) { sub = cJSON_AddObjectToObject(obj, p); if (!sub) { cJSON_Delete(v); return false; } }
        obj = sub;
    }
    if (cJSON_GetObjectItemCaseSensitive(obj, p)) return cJSON_ReplaceItemInObjectCaseSensitive(obj, p, v);
    return cJSON_AddItemToObject(obj, p, v);
}

const cJSON *volt__cli_tree_get(const cJSON *tree, const char *key) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", key);
    const cJSON *obj = tree;
    char *p = buf;
    for (char *dot; obj && (dot = strchr(p, '.')); p = dot + 1) {
        *dot = 0;
        obj = cJSON_GetObjectItemCaseSensitive(obj, p);
    }
    return obj ? cJSON_GetObjectItemCaseSensitive(obj, p) : NULL;
}

/* ---- create ------------------------------------------------------------------------------------- */
static bool key_ok(const char *k) {
    if (!k || !*k || strlen(k) > 120 || *k == '.' || k[strlen(k) - 1] == '.') return false;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-')) return false;
    return true;
}

static void tf_default(const volt__trainer_field *f, const volt_trainer_config *tc, char *buf, size_t n, const char **out) {
    const char *base = (const char *)tc + f->offset;
    *out = buf;
    if (f->dflt) { *out = !strcmp(f->dflt, "null") ? NULL : f->dflt; return; }
    switch (f->ftype) {
    case VOLT__TF_I64: case VOLT__TF_LIMIT: { int64_t v; memcpy(&v, base, sizeof v); snprintf(buf, n, "%lld", (long long)v); break; }
    case VOLT__TF_INT: { int v; memcpy(&v, base, sizeof v); snprintf(buf, n, "%d", v); break; }
    case VOLT__TF_F32: { float v; memcpy(&v, base, sizeof v); snprintf(buf, n, "%.9g", (double)v); break; }
    case VOLT__TF_BOOL: { bool v; memcpy(&v, base, sizeof v); snprintf(buf, n, "%s", v ? "true" : "false"); break; }
    case VOLT__TF_U64: { uint64_t v; memcpy(&v, base, sizeof v); snprintf(buf, n, "%llu", (unsigned long long)v); break; }
    case VOLT__TF_STR: { const char *v; memcpy(&v, base, sizeof v); *out = v; break; }
    }
}

static volt_status add_row(volt_cli *c, const volt_cli_key *k, const char *dflt, const volt__trainer_field *tf) {
    if (c->n == MAX_KEYS) return cli_fail(c, VOLT_ERR_INVALID_ARG, "volt_cli: more than %d keys", MAX_KEYS);
    if (!key_ok(k->key)) return cli_fail(c, VOLT_ERR_INVALID_ARG, "volt_cli: bad key name '%s'", k->key ? k->key : "(null)");
    for (int i = 0; i < c->n; i++) {
        const row *o = &c->rows[i];
        if (!strcmp(o->k.key, k->key) || (k->alias && o->k.alias && !strcmp(o->k.alias, k->alias)))
            return cli_fail(c, VOLT_ERR_INVALID_ARG, "volt_cli: key '%s' (alias '%s') given twice", k->key, k->alias ? k->alias : "");
    }
    row *r = &c->rows[c->n];
    *r = (row){ .k = *k, .tf = tf };
    r->k.dflt = NULL;
    r->nullable = dflt == NULL;      /* Optional[...] = None; a key with a value default refuses null */
    if (dflt && !(r->dflt = strdup(dflt))) return VOLT_ERR_NOMEM;
    c->n++;
    return VOLT_OK;
}

volt_status volt_cli_create(const volt_cli_config *cfg, volt_cli **out) {
    *out = NULL;
    if (!cfg || !VOLT_VERSION_OK(cfg->version, VOLT_CLI_CONFIG_VERSION)) return VOLT_ERR_VERSION;
    volt_cli *c = calloc(1, sizeof *c);
    if (!c) return VOLT_ERR_NOMEM;
    *out = c;
    c->cfg = *cfg;
    if (!c->cfg.subcommands) c->cfg.subcommands = "fit|validate|test|predict";
    c->out = cfg->out ? cfg->out : stdout;
    c->err = cfg->err ? cfg->err : stderr;
    if (!cfg->no_trainer_keys) {
        volt_trainer_config tc;
        volt_trainer_config_init(&tc);
        for (int i = 0; i < volt__n_trainer_fields; i++) {
            const volt__trainer_field *f = &volt__trainer_fields[i];
            char key[128], buf[64];
            snprintf(key, sizeof key, "trainer.%s", f->name);
            const char *d;
            tf_default(f, &tc, buf, sizeof buf, &d);
            static const volt_cli_type map[] = { VOLT_CLI_INT, VOLT_CLI_INT, VOLT_CLI_FLOAT, VOLT_CLI_BOOL, VOLT_CLI_INT,
                                                 VOLT_CLI_STRING, VOLT_CLI_FLOAT };
            volt_cli_key k = { .key = NULL, .type = map[f->ftype], .help = f->help, .alias = f->alias,
                               .choices = f->choices_fn ? f->choices_fn() : f->choices, .min = f->min, .max = f->max };
            k.key = key;
            VOLT_TRY(add_row(c, &k, d, f));
            row *r = &c->rows[c->n - 1];      /* rows never move: the key lives in the row */
            snprintf(r->keybuf, sizeof r->keybuf, "%s", key);
            r->k.key = r->keybuf;
        }
    }
    for (int i = 0; i < cfg->n_keys; i++) {
        if (cfg->keys[i].key && !strncmp(cfg->keys[i].key, "trainer.", 8) && !cfg->no_trainer_keys)
            return cli_fail(c, VOLT_ERR_INVALID_ARG, "volt_cli: '%s': trainer.* keys are the trainer's", cfg->keys[i].key);
        VOLT_TRY(add_row(c, &cfg->keys[i], cfg->keys[i].dflt, NULL));
    }
    for (int i = 0; i < c->n; i++) {     /* every default must be a valid value */
        char why[512];
        cJSON *v = value_from_text(&c->rows[i], c->rows[i].dflt, why, sizeof why);
        if (!v) return cli_fail(c, VOLT_ERR_INVALID_ARG, "volt_cli: default '%s' of '%s': %s", c->rows[i].dflt, c->rows[i].k.key, why);
        cJSON_Delete(v);
    }
    return VOLT_OK;
}

void volt_cli_destroy(volt_cli *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->rows[i].dflt);
    cJSON_Delete(c->tree);
    free(c->sub);
    free(c->merged_json);
    free(c);
}

volt_status volt_cli_set_default(volt_cli *c, const char *key, const char *value) {
    row *r = volt__cli_find_row(c, key);
    if (!r) return cli_fail(c, VOLT_ERR_INVALID_ARG, "volt_cli_set_default: no key '%s'", key);
    char why[512];
    cJSON *v = value_from_text(r, value, why, sizeof why);
    if (!v) return cli_fail(c, VOLT_ERR_INVALID_ARG, "volt_cli_set_default('%s', %s%s%s): %s", key, value ? "'" : "",
                            value ? value : "NULL", value ? "'" : "", why);
    cJSON_Delete(v);
    char *d = value ? strdup(value) : NULL;
    if (value && !d) return VOLT_ERR_NOMEM;
    free(r->dflt);
    r->dflt = d;
    return VOLT_OK;
}

/* ---- parse ----------------------------------------------------------------------------------- */
static int usage_err(volt_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_err(volt_cli *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    volt__set_err(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
    fprintf(c->err, "%s: %s (try --help)\n", c->cfg.prog, c->errmsg);
    return VOLT_CLI_USAGE;
}

static int unknown_key(volt_cli *c, const char *where, const char *name) {
    const char *s = suggest(c, name);
    const char *what = *where ? "unknown key '" : "unknown option '--";
    if (s) return usage_err(c, "%s%s%s'; did you mean '--%s'?", where, what, name, s);
    return usage_err(c, "%s%s%s'", where, what, name);
}

/* A file's object that is no section ("traner": {...}): the closest section at its depth
 * (the keys' first components for a top-level name), else as unknown_key. */
static int unknown_section(volt_cli *c, const char *where, const char *name) {
    int depth = 0, bd = 99;
    for (const char *p = name; *p; p++) depth += *p == '.';
    char best[128] = "";
    for (int i = 0; i < c->n; i++) {
        const char *k = c->rows[i].k.key, *e = k;
        for (int d = 0; e && d <= depth; d++) e = strchr(e + (d > 0), '.');
        if (!e || (size_t)(e - k) >= sizeof best) continue;        /* no section that deep */
        char sec[128];
        snprintf(sec, sizeof sec, "%.*s", (int)(e - k), k);
        int dist = volt_cli_edit_distance(name, sec);
        if (dist < bd) { bd = dist; snprintf(best, sizeof best, "%s", sec); }
    }
    size_t len = strlen(name);
    if (*best && bd <= (len <= 4 ? 1 : len <= 10 ? 2 : 3))
        return usage_err(c, "%sunknown section '%s'; did you mean '%s'?", where, name, best);
    return unknown_key(c, where, name);
}

/* v equals the key's current default (volt_cli_set_default's included). */
static bool is_default(const row *r, const cJSON *v) {
    char why[512];
    cJSON *d = value_from_text(r, r->dflt, why, sizeof why);
    bool same = d && (cJSON_IsNumber(d) && cJSON_IsNumber(v) ? d->valuedouble == v->valuedouble : cJSON_Compare(d, v, true));
    cJSON_Delete(d);
    return same;
}

/* Merge object o (a file's section at prefix) into the tree, checking every key. */
static int merge_obj(volt_cli *c, const char *file, const char *prefix, const cJSON *o) {
    for (const cJSON *it = o->child; it; it = it->next) {
        char key[256], where[512];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", it->string ? it->string : "");
        snprintf(where, sizeof where, "config '%s': ", file);
        row *r = volt__cli_find_row(c, key);
        if (!r) {
            size_t kl = strlen(key);
            const char *member = NULL;      /* a key of the section named key */
            for (int i = 0; i < c->n && !member; i++)
                if (!strncmp(c->rows[i].k.key, key, kl) && c->rows[i].k.key[kl] == '.') member = c->rows[i].k.key;
            if (member && cJSON_IsObject(it)) {
                int rc = merge_obj(c, file, key, it);
                if (rc) return rc;
                continue;
            }
            if (member)      /* {"trainer": 5}: a section given a value */
                return usage_err(c, "%s'%s' must be an object (a section of keys, e.g. {\"%s\": ...})", where, key,
                                 member + kl + 1);
            char tk[300];
            snprintf(tk, sizeof tk, "trainer.%s", key);
            if (!*prefix && !cJSON_IsObject(it) && volt__cli_find_row(c, tk))   /* a flat trainer config */
                return usage_err(c, "%sunknown key '%s'; did you mean '--%s'? (the file looks like a trainer's config, "
                                 "as the logs' config.json: a run's whole config is the hparams.json beside it, or put "
                                 "these keys under \"trainer\")", where, key, tk);
            return cJSON_IsObject(it) ? unknown_section(c, where, key) : unknown_key(c, where, key);
        }
        char why[512];
        if (check_value(r, it, why, sizeof why)) {
            if (cJSON_IsNull(it)) return usage_err(c, "%s%s: %s", where, key, why);
            if (cJSON_IsNumber(it) && !isfinite(it->valuedouble))   /* cJSON prints it as null */
                return usage_err(c, "%sbad value for '%s': %s", where, key, why);
            char *txt = cJSON_PrintUnformatted(it);
            int rc = usage_err(c, "%sbad value %s for '%s': %s", where, txt ? txt : "?", key, why);
            free(txt);
            return rc;
        }
        cJSON *dup = cJSON_Duplicate(it, true);
        if (!dup || !tree_put(c->tree, key, dup)) return usage_err(c, "out of memory");
        /* A file's key at its default is not "set": --print-config and hparams.json list every
         * key, and the programs' "X given without Y" checks must pass them back as they were
         * printed. A later file may set it back to the default, so this is assigned, not or-ed. */
        r->set = !is_default(r, it);
    }
    return 0;
}

/* Lightning's configs are YAML; volt's are JSON (what --print-config writes). */
static bool yaml_name(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot && (!strcmp(dot, ".yaml") || !strcmp(dot, ".yml"));
}

/* cJSON decodes "\u0000" into a NUL, which ends the C string: the key "trainer\u0000junk"
 * would read as "trainer" and the value "cnn\u0000..." as "cnn". So the raw text is scanned
 * for the escape (a "\\u0000" is an escaped backslash, not one): the index, in document
 * order, of the first string (keys and values alike) that holds it, or -1; *tok and *tl are
 * its text as written, between the quotes. */
static long nul_string(const char *s, const char **tok, size_t *tl) {
    long idx = -1;
    for (const char *p = s; *p; p++) {
        if (*p != '"') continue;
        const char *start = ++p;
        bool nul = false;
        idx++;
        for (; *p && *p != '"'; p++) {
            if (*p != '\\') continue;
            if (!*++p) break;
            if (*p == 'u' && !strncmp(p + 1, "0000", 4)) nul = true;
        }
        if (nul) { *tok = start; *tl = (size_t)(p - start); return idx; }
        if (!*p) break;
    }
    return -1;
}

/* The path of the string with document-order index *want under o (at prefix): keys as
 * "a.b", array items as "a[2]". Returns 1 when found (path set, *is_key whether it is a key),
 * else 0 with *want counted down by the strings passed. */
static int string_path(const cJSON *o, const char *prefix, long *want, char *path, size_t n, bool *is_key) {
    int i = 0;
    for (const cJSON *it = o->child; it; it = it->next, i++) {
        char key[512];
        if (cJSON_IsObject(o)) {
            if ((*want)-- == 0) { snprintf(path, n, "%s", prefix); *is_key = true; return 1; }
            snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", it->string ? it->string : "");
        } else {
            snprintf(key, sizeof key, "%s[%d]", prefix, i);
        }
        if (cJSON_IsString(it) && (*want)-- == 0) { snprintf(path, n, "%s", key); *is_key = false; return 1; }
        if ((cJSON_IsObject(it) || cJSON_IsArray(it)) && string_path(it, key, want, path, n, is_key)) return 1;
    }
    return 0;
}

static int load_file(volt_cli *c, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return usage_err(c, "--config '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {   /* fopen opens a folder; reading it fails */
        fclose(f);
        return usage_err(c, "--config '%s': is a directory (want a JSON file)", path);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            if (cap >= (1u << 26)) { free(buf); buf = NULL; break; }
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    const int rerr = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf) return usage_err(c, "--config '%s': too large or out of memory", path);
    if (rerr) {
        free(buf);
        return usage_err(c, "--config '%s': %s", path, strerror(rerr));
    }
    buf[n] = 0;
    if (strlen(buf) != n) {   /* the parse would stop at it, and what follows would be dropped unread */
        int line = 1;
        for (const char *p = buf; *p; p++) line += *p == '\n';
        free(buf);
        return usage_err(c, "--config '%s': holds a NUL byte (line %d): not a JSON text", path, line);
    }
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithOpts(buf, &end, true);
    if (!o) {
        int line = 1;
        for (const char *p = buf; end && p < end; p++) line += *p == '\n';
        free(buf);
        return usage_err(c, "--config '%s': not valid JSON (near line %d)%s", path, line,
                         yaml_name(path) ? "; volt reads JSON configs, not YAML (--print-config writes one)" : "");
    }
    const char *tok = NULL;
    size_t tl = 0;
    long want = nul_string(buf, &tok, &tl);
    if (want >= 0) {
        char where[600] = "";
        bool is_key = false;
        if (!string_path(o, "", &want, where, sizeof where, &is_key)) snprintf(where, sizeof where, "?");
        const int show = tl > 200 ? 200 : (int)tl;
        int rc = is_key ? usage_err(c, "config '%s': the key \"%.*s\"%s%s%s holds a NUL character (\\u0000), which would cut it "
                                    "short", path, show, tok, *where ? " (under '" : "", where, *where ? "')" : "")
                        : usage_err(c, "config '%s': '%s': the value \"%.*s\" holds a NUL character (\\u0000), which would "
                                    "cut it short", path, where, show, tok);
        cJSON_Delete(o);
        free(buf);
        return rc;
    }
    free(buf);
    int rc = cJSON_IsObject(o) ? merge_obj(c, path, "", o) : usage_err(c, "--config '%s': want a JSON object", path);
    cJSON_Delete(o);
    return rc;
}

static bool in_subcommands(const volt_cli *c, const char *s) { return in_choices(c->cfg.subcommands, s); }

/* The trainer's keys that name one folder or file under default_root_dir: a '/' or a ".."
 * would put the logs outside it (--trainer.logger_name ../../x). */
static int check_names(volt_cli *c) {
    static const char *const names[] = { "trainer.logger_name" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const cJSON *v = volt__cli_tree_get(c->tree, names[i]);
        const char *s = v && cJSON_IsString(v) ? v->valuestring : NULL;
        if (s && !volt__path_stays_under(s))   /* the trainer's own rule, said before any data is read */
            return usage_err(c, "bad value '%s' for --%s: a folder under trainer.default_root_dir (not an absolute path, "
                             "no '..')", s, names[i]);
    }
    return 0;
}

/* A boolean alias is a switch: "--no-progress" sets enable_progress_bar false, but
 * "--no-cache" sets data.no_cache true (the key says "no" itself). */
static bool switch_value(const row *r) {
    const char *dot = strrchr(r->k.key, '.'), *leaf = dot ? dot + 1 : r->k.key;
    return strncmp(r->k.alias, "no-", 3) != 0 || strncmp(leaf, "no_", 3) == 0;
}

enum { OPT_CONFIG = 1000, OPT_PRINT, OPT_VERSION, OPT_HELP, OPT_KEY = 2000, OPT_ALIAS = 4000 };

typedef struct pending { int row; bool alias; const char *val; } pending;

int volt_cli_parse(volt_cli *c, int argc, char **argv) {
    cJSON_Delete(c->tree);
    c->tree = cJSON_CreateObject();
    free(c->sub);
    c->sub = NULL;
    if (!c->tree) return usage_err(c, "out of memory");
    for (int i = 0; i < c->n; i++) {
        char why[512];
        c->rows[i].set = false;
        cJSON *v = value_from_text(&c->rows[i], c->rows[i].dflt, why, sizeof why);
        if (!v || !tree_put(c->tree, c->rows[i].k.key, v)) return usage_err(c, "out of memory");
    }
    struct option *lo = calloc((size_t)(2 * c->n + 8), sizeof *lo);
    pending *pend = calloc((size_t)argc + 1, sizeof *pend);
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    int nl = 0, np = 0, nf = 0, rc = 0;
    bool print = false;
    if (!lo || !pend || !files) { rc = usage_err(c, "out of memory"); goto done; }
    lo[nl++] = (struct option){ "config", required_argument, NULL, OPT_CONFIG };
    lo[nl++] = (struct option){ "print-config", no_argument, NULL, OPT_PRINT };
    lo[nl++] = (struct option){ "print_config", no_argument, NULL, OPT_PRINT };
    lo[nl++] = (struct option){ "version", no_argument, NULL, OPT_VERSION };
    lo[nl++] = (struct option){ "help", no_argument, NULL, OPT_HELP };
    for (int i = 0; i < c->n; i++) {
        const row *r = &c->rows[i];
        lo[nl++] = (struct option){ r->k.key, r->k.type == VOLT_CLI_BOOL ? optional_argument : required_argument, NULL, OPT_KEY + i };
        if (r->k.alias)
            lo[nl++] = (struct option){ r->k.alias, r->k.type == VOLT_CLI_BOOL ? no_argument : required_argument, NULL, OPT_ALIAS + i };
    }
    opterr = 0;
    optind = 0;     /* GNU: full re-initialisation */
    for (;;) {
        int li = -1;
        const int cur = optind > 0 ? optind : 1;   /* the argument getopt reads now (no permuting: "-") */
        int o = getopt_long(argc, argv, "-:h", lo, &li);
        if (o == -1) {
            /* "--" ends the options; nothing after it is read, so nothing may follow */
            if (optind < argc) { rc = usage_err(c, "unexpected argument '%s'", argv[optind]); goto done; }
            break;
        }
        if (o == 1) {                       /* a positional argument */
            if (!c->sub && in_subcommands(c, optarg)) {
                if (!(c->sub = strdup(optarg))) { rc = usage_err(c, "out of memory"); goto done; }
            } else if (!c->sub && np == 0 && nf == 0) {
                rc = usage_err(c, "unknown subcommand '%s' (want %s)", optarg, c->cfg.subcommands);
                goto done;
            } else {
                rc = usage_err(c, "unexpected argument '%s'", optarg);
                goto done;
            }
        } else if (o == 'h' || o == OPT_HELP) {
            volt_cli_print_help(c, c->out);
            rc = VOLT_CLI_DONE;
            goto done;
        } else if (o == OPT_VERSION) {
            if (c->cfg.version_text) fprintf(c->out, "%s\n", c->cfg.version_text);
            else fprintf(c->out, "%s (volt %d.%d.%d)\n", c->cfg.prog, VOLT_VERSION_MAJOR, VOLT_VERSION_MINOR, VOLT_VERSION_PATCH);
            rc = VOLT_CLI_DONE;
            goto done;
        } else if (o == OPT_CONFIG) {
            if (optarg == argv[optind - 1] && !strncmp(optarg, "--", 2) && optarg[2]) {   /* as a key's missing value */
                rc = usage_err(c, "--config needs a value (the next argument '%s' is an option)", optarg);
                goto done;
            }
            files[nf++] = optarg;
        } else if (o == OPT_PRINT) {
            print = true;
        } else if (o >= OPT_KEY && o < OPT_ALIAS + c->n) {
            bool alias = o >= OPT_ALIAS;
            int ri = o - (alias ? OPT_ALIAS : OPT_KEY);
            /* getopt_long takes unambiguous prefixes ("--trainer.max_epoch"): keys must be
             * spelled out, or a typo silently sets another key */
            const char *a = argv[optind - 1 - (optarg && optarg == argv[optind - 1] ? 1 : 0)];
            const char *nm = alias ? c->rows[ri].k.alias : c->rows[ri].k.key;
            size_t nl_ = strlen(nm);
            if (strncmp(a, "--", 2) || strncmp(a + 2, nm, nl_) || (a[2 + nl_] && a[2 + nl_] != '=')) {
                char name[256];
                snprintf(name, sizeof name, "%s", a + 2);
                char *eq = strchr(name, '=');
                if (eq) *eq = 0;
                rc = unknown_key(c, "", name);
                goto done;
            }
            const char *val = optarg;
            /* "--trainer.max_epochs --no-progress": the value is missing, not '--no-progress'
             * (a value starting with "--" can still be given as --key=--value) */
            if (optarg && optarg == argv[optind - 1] && !strncmp(optarg, "--", 2) && optarg[2]) {
                rc = usage_err(c, "--%s needs a value (the next argument '%s' is an option)", nm, optarg);
                goto done;
            }
            /* "--flag true" with a space: take the next word when it is a boolean (or null) */
            if (!alias && c->rows[ri].k.type == VOLT_CLI_BOOL && !val && optind < argc) {
                bool b;
                if (parse_bool(argv[optind], &b) || !strcmp(argv[optind], "null")) val = argv[optind++];
            }
            pend[np++] = (pending){ ri, alias, val };
        } else if (o == ':') {
            const char *a = argv[optind - 1];
            rc = usage_err(c, "%s needs a value", a ? a : "an option");
            goto done;
        } else {                            /* '?': unknown, ambiguous, or a value given to a switch */
            /* argv[optind - 1] is the previous argument while getopt is inside "-epochs" */
            const char *a = cur < argc ? argv[cur] : NULL;
            if (!a || strncmp(a, "--", 2)) {
                char name[256];
                snprintf(name, sizeof name, "%s", a && a[0] == '-' ? a + 1 : "");
                char *eq = strchr(name, '=');
                if (eq) *eq = 0;
                const char *s = *name ? suggest(c, name) : NULL;   /* "-epochs": one dash short */
                if (s) rc = usage_err(c, "unknown option '%s'; did you mean '--%s'? (options start with two dashes)", a, s);
                else rc = usage_err(c, "unknown option '%s'", a ? a : "?");
                goto done;
            }
            char name[256];
            snprintf(name, sizeof name, "%s", a + 2);
            char *eq = strchr(name, '=');
            if (eq) *eq = 0;
            row *r = NULL;
            for (int i = 0; i < c->n && !r; i++)
                if (c->rows[i].k.alias && !strcmp(c->rows[i].k.alias, name)) r = &c->rows[i];
            if (r && eq) { rc = usage_err(c, "--%s is a switch and takes no value (use --%s=%s)", name, r->k.key, eq + 1); goto done; }
            int matches = 0;
            for (int i = 0; i < nl; i++) matches += !strncmp(lo[i].name, name, strlen(name));
            if (matches > 1) { rc = usage_err(c, "option '--%s' is ambiguous (a prefix of %d keys)", name, matches); goto done; }
            rc = unknown_key(c, "", name);
            goto done;
        }
    }
    for (int i = 0; i < nf; i++)
        if ((rc = load_file(c, files[i]))) goto done;
    for (int i = 0; i < np; i++) {
        row *r = &c->rows[pend[i].row];
        char why[512];
        cJSON *v;
        if (pend[i].alias && r->k.type == VOLT_CLI_BOOL) v = cJSON_CreateBool(switch_value(r));
        else v = value_from_text(r, r->k.type == VOLT_CLI_BOOL && !pend[i].val ? "true" : pend[i].val, why, sizeof why);
        if (!v) {
            if (pend[i].val && !strcmp(pend[i].val, "null") && !r->nullable) {   /* "--model.name: null is not allowed (...)" */
                if (pend[i].alias) rc = usage_err(c, "--%s (%s): %s", r->k.alias, r->k.key, why);
                else rc = usage_err(c, "--%s: %s", r->k.key, why);
            } else {
                rc = usage_err(c, "bad value '%s' for --%s: %s", pend[i].val ? pend[i].val : "", pend[i].alias ? r->k.alias : r->k.key, why);
            }
            goto done;
        }
        if (!tree_put(c->tree, r->k.key, v)) { rc = usage_err(c, "out of memory"); goto done; }
        r->set = true;
    }
    if (!c->sub) {
        if (!c->cfg.default_subcommand && !print) { rc = usage_err(c, "a subcommand is required (%s)", c->cfg.subcommands); goto done; }
        if (c->cfg.default_subcommand && !(c->sub = strdup(c->cfg.default_subcommand))) { rc = usage_err(c, "out of memory"); goto done; }
    }
    if (!c->cfg.no_trainer_keys && (rc = check_names(c))) goto done;
    free(c->merged_json);
    c->merged_json = volt__cli_print(c->tree, false);
    if (!c->cfg.no_trainer_keys) {   /* the trainer's own checks now, before the program reads its data */
        volt_trainer_config tc;
        volt_trainer_config_init(&tc);
        volt_cli_trainer_config(c, &tc);
        char e[640];
        if (volt_trainer_config_check(&tc, e, sizeof e) < 0) {
            if (!print) { rc = usage_err(c, "%s", e); goto done; }
            /* --print-config still prints it (LightningCLI's does, to be edited), and says it
             * would be refused: run with it as it is and the trainer fails with this */
            fprintf(stderr, "%s: warning: the trainer refuses this config: %s\n", c->cfg.prog, e);
        }
    }
    if (print) {
        char *s = volt_cli_config_json(c);
        if (s) fprintf(c->out, "%s\n", s);
        free(s);
        rc = VOLT_CLI_DONE;
    }
done:
    free(lo);
    free(pend);
    free(files);
    return rc;
}

