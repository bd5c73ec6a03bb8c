/* The run's hyper-parameters record every trainer setting (trainer/config_fields.h):
 * - the field table covers volt_trainer_config: each row sits where the one before it ends
 *   (plus only the padding its alignment needs) and the last row ends the struct, so a
 *   field missing from the table leaves a gap this test finds;
 * - the CLI's trainer.* keys (cli/trainer_keys.c) are exactly the table's key rows, at the
 *   same offsets with the same types, so the CLI's merged config (hparams.json) has them all;
 * - volt__trainer_config_json (the CSV logger's config.json; the TensorBoard hparams read
 *   the same table) writes every hparam row with its value, checked on a config where the
 *   issue-11/12 settings (compile, matmul_precision, strategy_comm, strategy_reduce_dtype)
 *   and others are not their defaults;
 * - the strings the loggers read are the trainer's copies, not the caller's. */
#include <stdalign.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "vtest.h"
#include "volt/trainer.h"
#include "trainer/config_fields.h"
#include "cli/cli_internal.h"

static size_t type_align(volt__cfg_type t) {
    switch (t) {
    case VOLT__CFG_U32: return alignof(uint32_t);
    case VOLT__CFG_I64: return alignof(int64_t);
    case VOLT__CFG_INT: return alignof(int);
    case VOLT__CFG_F32: return alignof(float);
    case VOLT__CFG_BOOL: return alignof(bool);
    case VOLT__CFG_U64: return alignof(uint64_t);
    case VOLT__CFG_STR: return alignof(const char *);
    case VOLT__CFG_F64: return alignof(double);
    }
    return 1;
}

static size_t type_size(volt__cfg_type t) {
    switch (t) {
    case VOLT__CFG_U32: return sizeof(uint32_t);
    case VOLT__CFG_I64: return sizeof(int64_t);
    case VOLT__CFG_INT: return sizeof(int);
    case VOLT__CFG_F32: return sizeof(float);
    case VOLT__CFG_BOOL: return sizeof(bool);
    case VOLT__CFG_U64: return sizeof(uint64_t);
    case VOLT__CFG_STR: return sizeof(const char *);
    case VOLT__CFG_F64: return sizeof(double);
    }
    return 0;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static void test_table_covers_struct(void) {
    size_t end = 0;
    for (int i = 0; i < volt__n_trainer_config_fields; i++) {
        const volt__cfg_field *f = &volt__trainer_config_fields[i];
        CHECK(f->size == type_size(f->type), "%s: size %zu, its type's %zu", f->name, f->size, type_size(f->type));
        CHECK(f->offset == round_up(end, type_align(f->type)),
              "%s at offset %zu, want %zu: a field between it and the row before is missing from trainer/config_fields.c",
              f->name, f->offset, round_up(end, type_align(f->type)));
        end = f->offset + f->size;
        for (int j = 0; j < i; j++)
            CHECK(strcmp(volt__trainer_config_fields[j].name, f->name), "%s twice", f->name);
    }
    CHECK(round_up(end, alignof(volt_trainer_config)) == sizeof(volt_trainer_config),
          "the table ends at %zu, volt_trainer_config is %zu bytes: a field after the last row is missing", end,
          sizeof(volt_trainer_config));
}

static volt__cfg_type cli_type(volt__tf_type t) {
    switch (t) {
    case VOLT__TF_I64: return VOLT__CFG_I64;
    case VOLT__TF_INT: return VOLT__CFG_INT;
    case VOLT__TF_F32: return VOLT__CFG_F32;
    case VOLT__TF_BOOL: return VOLT__CFG_BOOL;
    case VOLT__TF_U64: return VOLT__CFG_U64;
    case VOLT__TF_STR: return VOLT__CFG_STR;
    case VOLT__TF_LIMIT: return VOLT__CFG_I64;   /* the count; the fraction is the frac_offset field */
    }
    return VOLT__CFG_U32;
}

static void test_cli_keys_match_table(void) {
    int keys = 0;
    for (int i = 0; i < volt__n_trainer_config_fields; i++) {
        const volt__cfg_field *f = &volt__trainer_config_fields[i];
        const volt__trainer_field *k = NULL;
        for (int j = 0; j < volt__n_trainer_fields; j++)
            if (!strcmp(volt__trainer_fields[j].name, f->name)) k = &volt__trainer_fields[j];
        if (!(f->flags & VOLT__CFG_KEY)) {
            CHECK(!k, "trainer.%s is a CLI key but the program's field", f->name);
            continue;
        }
        keys++;
        CHECK(k, "trainer field %s has no trainer.%s key in cli/trainer_keys.c", f->name, f->name);
        if (!k) continue;
        CHECK(k->offset == f->offset && cli_type(k->ftype) == f->type, "trainer.%s: offset %zu type %d, table %zu %d", f->name,
              k->offset, (int)cli_type(k->ftype), f->offset, (int)f->type);
    }
    CHECK(keys == volt__n_trainer_fields, "%d key rows in the table, %d trainer.* keys in the CLI", keys, volt__n_trainer_fields);
    int limits = 0;   /* an int-or-fraction key's fraction is an f64 hparam field, not a key of its own */
    for (int j = 0; j < volt__n_trainer_fields; j++) {
        const volt__trainer_field *k = &volt__trainer_fields[j];
        if (k->ftype != VOLT__TF_LIMIT) continue;
        limits++;
        const volt__cfg_field *fr = NULL;
        for (int i = 0; i < volt__n_trainer_config_fields; i++)
            if (volt__trainer_config_fields[i].offset == k->frac_offset) fr = &volt__trainer_config_fields[i];
        CHECK(fr && fr->type == VOLT__CFG_F64 && fr->flags == VOLT__CFG_HPARAM, "trainer.%s: its fraction field (offset %zu) is %s",
              k->name, k->frac_offset, fr ? fr->name : "not in the table");
    }
    CHECK(limits == 6, "%d int-or-fraction keys, want 6 (limit_*_batches, val_check_interval, overfit_batches)", limits);
}

/* Every hparam row of c is a key of o with c's value. */
static void check_json_has_config(const cJSON *o, const volt_trainer_config *c, const char *what) {
    int n = 0;
    for (int i = 0; i < volt__n_trainer_config_fields; i++) {
        const volt__cfg_field *f = &volt__trainer_config_fields[i];
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, f->name);
        if (!(f->flags & VOLT__CFG_HPARAM)) { CHECK(!j, "%s: %s is not an hparam", what, f->name); continue; }
        n++;
        CHECK(j, "%s: no \"%s\"", what, f->name);
        if (!j) continue;
        volt__cfg_value v = volt__cfg_get(f, c);
        char want[64];
        switch (f->type) {
        case VOLT__CFG_BOOL: CHECK(cJSON_IsBool(j) && cJSON_IsTrue(j) == v.b, "%s: %s", what, f->name); break;
        case VOLT__CFG_STR:
            CHECK(v.str ? cJSON_IsString(j) && !strcmp(j->valuestring, v.str) : cJSON_IsNull(j), "%s: %s = %s, want %s", what,
                  f->name, cJSON_IsString(j) ? j->valuestring : "(not a string)", v.str ? v.str : "null");
            break;
        case VOLT__CFG_U64:
            snprintf(want, sizeof want, "%llu", (unsigned long long)v.u64);
            CHECK(cJSON_IsString(j) && !strcmp(j->valuestring, want), "%s: %s, want \"%s\"", what, f->name, want);
            break;
        default: CHECK(cJSON_IsNumber(j) && j->valuedouble == v.num, "%s: %s = %.17g, want %.17g", what, f->name, j->valuedouble, v.num);
        }
    }
    CHECK(cJSON_GetArraySize(o) == n, "%s: %d keys, %d hparams", what, cJSON_GetArraySize(o), n);
}

static void test_config_json(void) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.compile = true;
    c.matmul_precision = "high";
    c.strategy_comm = "nccl";
    c.strategy_reduce_dtype = "bf16";
    c.strategy = "ddp";
    c.accelerator = "cuda";
    c.optimizer_dtype = "bf16";
    c.gradient_clip_val = 0.1f;
    c.grad_scaler_growth_interval = 77;
    c.seed = (1ull << 60) + 1;                  /* past 2^53: a string, exact */
    c.enable_plots = false;
    c.resume_anyway = true;
    c.run_fingerprint = "{\"data\":\"x\"}";
    c.run_config_json = "{\"model\":\"lin\"}";  /* hparams.json's, not config.json's */
    char *s = volt__trainer_config_json(&c);
    CHECK(s, "config json");
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    CHECK(o, "config json parses: %s", s ? s : "");
    if (o) {
        check_json_has_config(o, &c, "config.json");
        /* the settings the issue names, spelled out */
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "compile")), "compile: %s", s);
        CHECK(strstr(s, "\"matmul_precision\":\t\"high\"") && strstr(s, "\"strategy_comm\":\t\"nccl\"") &&
                  strstr(s, "\"strategy_reduce_dtype\":\t\"bf16\"") && strstr(s, "\"gradient_clip_val\":\t0.1,") &&
                  strstr(s, "\"seed\":\t\"1152921504606846977\""),
              "%s", s);
    }
    cJSON_Delete(o);
    free(s);
    /* unset strings are null, not left out */
    c.strategy_comm = NULL;
    c.run_fingerprint = NULL;
    s = volt__trainer_config_json(&c);
    o = s ? cJSON_Parse(s) : NULL;
    CHECK(o && cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "strategy_comm")), "%s", s ? s : "");
    if (o) check_json_has_config(o, &c, "config.json (NULL strings)");
    cJSON_Delete(o);
    free(s);
}

/* The config the loggers read at fit start is the trainer's own: strings the caller frees
 * after volt_trainer_create do not reach config.json. */
static void test_trainer_keeps_strings(void) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.enable_logger = false;
    c.enable_progress_bar = false;
    char *comm = strdup("auto"), *rd = strdup("fp32");
    c.strategy_comm = comm;
    c.strategy_reduce_dtype = rd;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "create: %s", t ? volt_trainer_errmsg(t) : volt_status_str(st));
    strcpy(comm, "zzzz");
    strcpy(rd, "zzzz");
    free(comm);
    free(rd);
    const volt_trainer_config *k = t ? volt_trainer_get_config(t) : NULL;
    CHECK(k && k->strategy_comm && !strcmp(k->strategy_comm, "auto"), "strategy_comm %s", k && k->strategy_comm ? k->strategy_comm : "(null)");
    CHECK(k && k->strategy_reduce_dtype && !strcmp(k->strategy_reduce_dtype, "fp32"), "strategy_reduce_dtype %s",
          k && k->strategy_reduce_dtype ? k->strategy_reduce_dtype : "(null)");
    volt_trainer_destroy(t);
}

int main(void) {
    test_table_covers_struct();
    test_cli_keys_match_table();
    test_config_json();
    test_trainer_keeps_strings();
    return vtest_finish();
}
