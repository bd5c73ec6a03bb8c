/* volt_cli: --help, and reading the merged config back (values, was-set, the trainer
 * config). The parsing and merging are cli/cli.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "callbacks/util.h"   /* volt__cb_json_print */
#include "cli/cli_internal.h"

/* ---- help ------------------------------------------------------------------------------------ */
static void section_of(const char *key, char *buf, size_t n) {
    const char *dot = strchr(key, '.');
    if (!dot) snprintf(buf, n, "%s", "");
    else snprintf(buf, n, "%.*s", (int)(dot - key), key);
}

void volt_cli_print_help(const volt_cli *c, FILE *f) {
    fprintf(f, "usage: %s [%s] [--config FILE.json]... [--SECTION.KEY VALUE | --SECTION.KEY=VALUE]...\n",
            c->cfg.prog, c->cfg.subcommands);
    if (c->cfg.description) fprintf(f, "%s\n", c->cfg.description);
    fprintf(f, "\nsubcommands: %s", c->cfg.subcommands);
    if (c->cfg.default_subcommand) fprintf(f, " (default %s)", c->cfg.default_subcommand);
    fputs("\n\n"
          "  --config FILE              a JSON config ({\"trainer\": {\"max_epochs\": 3}, ...});\n"
          "                             repeatable, later files win; command-line keys win over files\n"
          "  --print-config             print the merged config as JSON (reusable with --config) and exit\n"
          "  --version                  print the version and exit\n"
          "  -h, --help                 this text\n", f);
    /* sections in order of first appearance */
    char seen[32][64];
    int ns = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < c->n; i++) {
            char sec[64];
            section_of(c->rows[i].k.key, sec, sizeof sec);
            bool trainer = !strcmp(sec, "trainer");
            if (trainer != (pass == 1)) continue;   /* the program's sections first, trainer last */
            bool have = false;
            for (int j = 0; j < ns; j++) have = have || !strcmp(seen[j], sec);
            if (!have && ns < 32) snprintf(seen[ns++], sizeof seen[0], "%s", sec);
        }
    for (int s = 0; s < ns; s++) {
        fprintf(f, "\n%s:\n", *seen[s] ? seen[s] : "run");
        for (int i = 0; i < c->n; i++) {
            const row *r = &c->rows[i];
            char sec[64];
            section_of(r->k.key, sec, sizeof sec);
            if (strcmp(sec, seen[s])) continue;
            char lhs[160];
            snprintf(lhs, sizeof lhs, "--%s %s", r->k.key, r->k.type == VOLT_CLI_BOOL ? "[BOOL]"
                     : r->tf && r->tf->ftype == VOLT__TF_LIMIT ? "INT|FRAC" : volt__cli_type_name(r->k.type));
            fprintf(f, "  %-40s %s", lhs, r->k.help ? r->k.help : "");
            if (r->k.choices) fprintf(f, " {%s}", r->k.choices);
            fprintf(f, " (default: %s%s)", r->dflt ? r->dflt : "null", r->dflt && r->nullable ? "; or null" : "");
            if (r->k.alias) fprintf(f, " [--%s%s]", r->k.alias, r->k.type == VOLT_CLI_BOOL ? "" : " V");
            fputc('\n', f);
        }
    }
}

/* ---- results --------------------------------------------------------------------------------- */
const char *volt_cli_subcommand(const volt_cli *c) { return c->sub; }

static const cJSON *get(const volt_cli *c, const char *key) {
    const cJSON *v = c->tree ? volt__cli_tree_get(c->tree, key) : NULL;
    if (!v) fprintf(c->err, "volt_cli: program bug: no key '%s'\n", key);
    return v;
}

int64_t volt_cli_int(const volt_cli *c, const char *key) {
    const cJSON *v = get(c, key);
    return v && cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

double volt_cli_float(const volt_cli *c, const char *key) {
    const cJSON *v = get(c, key);
    return v && cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

bool volt_cli_bool(const volt_cli *c, const char *key) {
    const cJSON *v = get(c, key);
    return v && cJSON_IsTrue(v);
}

const char *volt_cli_str(const volt_cli *c, const char *key) {
    const cJSON *v = get(c, key);
    return v && cJSON_IsString(v) ? v->valuestring : NULL;
}

bool volt_cli_was_set(const volt_cli *c, const char *key) {
    const row *r = volt__cli_find_row(c, key);
    return r && r->set;
}

bool volt_cli_is_null(const volt_cli *c, const char *key) {
    const cJSON *v = get(c, key);
    return !v || cJSON_IsNull(v);
}

char *volt__cli_print(const cJSON *tree, bool formatted) { return volt__cb_json_print(tree, formatted); }

char *volt_cli_config_json(const volt_cli *c) { return volt__cli_print(c->tree, true); }

void volt_cli_trainer_config(const volt_cli *c, volt_trainer_config *tc) {
    for (int i = 0; i < c->n; i++) {
        const row *r = &c->rows[i];
        const volt__trainer_field *f = r->tf;
        if (!f) continue;
        const cJSON *v = volt__cli_tree_get(c->tree, r->k.key);
        if (!v || cJSON_IsNull(v)) {
            if (f->ftype == VOLT__TF_STR && !(f->dflt && !strcmp(f->dflt, "null"))) {
                const char *nul = NULL;
                memcpy((char *)tc + f->offset, &nul, sizeof nul);
            }
            continue;          /* null numbers keep volt_trainer_config_init's value */
        }
        char *dst = (char *)tc + f->offset;
        switch (f->ftype) {
        case VOLT__TF_I64: { int64_t x = (int64_t)v->valuedouble; memcpy(dst, &x, sizeof x); break; }
        case VOLT__TF_INT: { int x = (int)v->valuedouble; memcpy(dst, &x, sizeof x); break; }
        case VOLT__TF_F32: { float x = (float)v->valuedouble; memcpy(dst, &x, sizeof x); break; }
        case VOLT__TF_BOOL: { bool x = cJSON_IsTrue(v); memcpy(dst, &x, sizeof x); break; }
        case VOLT__TF_U64: { uint64_t x = (uint64_t)v->valuedouble; memcpy(dst, &x, sizeof x); break; }
        case VOLT__TF_STR: { const char *x = v->valuestring; memcpy(dst, &x, sizeof x); break; }
        case VOLT__TF_LIMIT: {   /* a count, or a fraction (then the count keeps its default) */
            const double d = v->valuedouble;
            if (d == floor(d)) { int64_t x = (int64_t)d; memcpy(dst, &x, sizeof x); }
            else memcpy((char *)tc + f->frac_offset, &d, sizeof d);
            break;
        }
        }
    }
    tc->run_config_json = c->merged_json;
}
