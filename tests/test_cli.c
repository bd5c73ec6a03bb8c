/* volt_cli (issue 14): keys from defaults, config files (later wins) and the command line
 * (wins over files), --k=v and --k v, boolean switches and aliases, every trainer field in
 * the trainer table reaching volt_trainer_config, --print-config output reusable as a file,
 * unknown keys rejected with a "did you mean", prefixes not taken for keys, bounds/choices,
 * exit code 2 for usage errors, subcommands. */
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include "vtest.h"
#include "volt/cli.h"
#include "cli/cli_internal.h"

static const volt_cli_key keys[] = {
    { "model.dropout", VOLT_CLI_FLOAT, "0.1", "dropout", "dropout", NULL, 0, 0.999 },
    { "model.name", VOLT_CLI_STRING, "mlp", "model", "model", "mlp|cnn", 0, 0 },
    { "data.batch_size", VOLT_CLI_INT, "64", "batch", "batch-size", NULL, 1, 1 << 20 },
    { "data.path", VOLT_CLI_STRING, NULL, "path", NULL, NULL, 0, 0 },
    { "resume", VOLT_CLI_BOOL, "false", "resume", NULL, NULL, 0, 0 },
    { "data.no_cache", VOLT_CLI_BOOL, "false", "no cache", "no-cache", NULL, 0, 0 },   /* a key that says "no" itself */
};

static FILE *g_err, *g_out;
static char g_errbuf[8192], g_outbuf[1 << 16];

static volt_cli *mk(void) {
    volt_cli *c = NULL;
    memset(g_errbuf, 0, sizeof g_errbuf);
    memset(g_outbuf, 0, sizeof g_outbuf);
    if (g_err) fclose(g_err);
    if (g_out) fclose(g_out);
    g_err = fmemopen(g_errbuf, sizeof g_errbuf - 1, "w");
    g_out = fmemopen(g_outbuf, sizeof g_outbuf - 1, "w");
    setvbuf(g_err, NULL, _IONBF, 0);
    setvbuf(g_out, NULL, _IONBF, 0);
    volt_cli_config cc = { .version = VOLT_CLI_CONFIG_VERSION, .prog = "t", .keys = keys, .n_keys = 6,
                           .default_subcommand = "fit", .out = g_out, .err = g_err };
    CHECK_OK(volt_cli_create(&cc, &c));
    return c;
}

static int parse(volt_cli *c, int n, const char **args) {
    char *argv[32];
    argv[0] = "t";
    for (int i = 0; i < n; i++) argv[i + 1] = (char *)args[i];
    return volt_cli_parse(c, n + 1, argv);
}
#define PARSE(c, ...) parse(c, (int)(sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(const char *)), (const char *[]){ __VA_ARGS__ })

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "write %s", path);
    if (f) { fputs(text, f); fclose(f); }
}

int main(void) {
    char f1[1024], f2[1024], f3[1024];
    const char *tmp = vtest_tmpdir();
    snprintf(f1, sizeof f1, "%s/a.json", tmp);
    snprintf(f2, sizeof f2, "%s/b.json", tmp);
    snprintf(f3, sizeof f3, "%s/printed.json", tmp);

    /* defaults */
    volt_cli *c = mk();
    CHECK(PARSE(c, "--data.path", "x") == VOLT_CLI_RUN, "plain parse: %s", g_errbuf);
    CHECK(!strcmp(volt_cli_subcommand(c), "fit"), "default subcommand");
    CHECK(volt_cli_int(c, "data.batch_size") == 64 && volt_cli_float(c, "model.dropout") == 0.1, "defaults");
    CHECK(!volt_cli_was_set(c, "data.batch_size") && volt_cli_was_set(c, "data.path"), "was_set");
    CHECK(!volt_cli_is_null(c, "data.path") && volt_cli_is_null(c, "trainer.max_epochs"), "is_null");
    volt_trainer_config tc, ref;
    volt_trainer_config_init(&tc);
    volt_trainer_config_init(&ref);
    volt_cli_trainer_config(c, &tc);
    CHECK(tc.max_epochs == ref.max_epochs && tc.log_every_n_steps == 50 && tc.seed == 42 && !strcmp(tc.precision, "32-true"),
          "untouched trainer keys keep volt_trainer_config_init's values");
    CHECK(tc.run_config_json && strstr(tc.run_config_json, "\"batch_size\":64"), "run_config_json is the merged config");
    volt_cli_destroy(c);

    /* files: later wins; command line wins over files; --k=v and --k v; aliases */
    write_file(f1, "{\"trainer\": {\"max_epochs\": 5, \"precision\": \"bf16-mixed\"}, \"data\": {\"batch_size\": 8}}");
    write_file(f2, "{\"trainer\": {\"max_epochs\": 7}, \"model\": {\"name\": \"cnn\"}}");
    c = mk();
    CHECK(PARSE(c, "test", "--config", f1, "--trainer.max_steps=11", "--config", f2, "--batch-size", "12",
                "--model.dropout=0.25", "--resume", "--trainer.enable_model_summary", "false", "--no-progress") == VOLT_CLI_RUN,
          "parse: %s", g_errbuf);
    CHECK(!strcmp(volt_cli_subcommand(c), "test"), "subcommand test");
    volt_trainer_config_init(&tc);
    volt_cli_trainer_config(c, &tc);
    CHECK(tc.max_epochs == 7, "the later file wins: %lld", (long long)tc.max_epochs);
    CHECK(tc.max_steps == 11 && !strcmp(tc.precision, "bf16-mixed"), "file + --k=v");
    CHECK(!tc.enable_model_summary && !tc.enable_progress_bar, "bool with a separate value; --no-progress switch");
    CHECK(volt_cli_int(c, "data.batch_size") == 12, "the command line wins over a file");
    CHECK(volt_cli_float(c, "model.dropout") == 0.25 && volt_cli_bool(c, "resume") && !strcmp(volt_cli_str(c, "model.name"), "cnn"), "values");
    char *printed = volt_cli_config_json(c);
    CHECK(printed != NULL, "config json");
    if (printed) write_file(f3, printed);
    free(printed);
    volt_cli_destroy(c);
    /* --print-config output, read back, gives the same config */
    c = mk();
    CHECK(PARSE(c, "--config", f3, "--print-config") == VOLT_CLI_DONE, "print-config: %s", g_errbuf);
    CHECK(strstr(g_outbuf, "\"max_epochs\":\t7") && strstr(g_outbuf, "\"batch_size\":\t12"), "printed: %.200s", g_outbuf);
    volt_cli_destroy(c);
    c = mk();
    CHECK(PARSE(c, "--config", f3) == VOLT_CLI_RUN, "reuse printed config: %s", g_errbuf);
    volt_trainer_config tc2;
    volt_trainer_config_init(&tc2);
    volt_cli_trainer_config(c, &tc2);
    CHECK(tc2.max_epochs == 7 && tc2.max_steps == 11 && !tc2.enable_model_summary && volt_cli_int(c, "data.batch_size") == 12, "round trip");
    volt_cli_destroy(c);

    /* every trainer table row reaches its field: set each to a non-default value */
    c = mk();
    char *argv[256];
    char vals[128][64], names[128][96];
    int n = 0;
    argv[n++] = "t";
    for (int i = 0; i < volt__n_trainer_fields && n < 250; i++) {
        const volt__trainer_field *f = &volt__trainer_fields[i];
        snprintf(names[i], sizeof names[i], "--trainer.%s", f->name);
        const char *v = f->ftype == VOLT__TF_BOOL ? "false" : f->ftype == VOLT__TF_STR ? (f->choices ? "value" : "xyz") : "3";
        const char *choices = f->choices_fn ? f->choices_fn() : f->choices;
        if (f->ftype == VOLT__TF_STR && choices) {        /* the last choice */
            const char *bar = strrchr(choices, '|');
            v = bar ? bar + 1 : choices;
        }
        if (f->ftype == VOLT__TF_BOOL) {   /* the opposite of the default */
            volt_trainer_config d;
            volt_trainer_config_init(&d);
            bool dv;
            memcpy(&dv, (char *)&d + f->offset, sizeof dv);
            v = dv ? "false" : "true";
        }
        /* values the trainer's own checks (volt_cli_parse runs them) take: a max_time of its form,
         * an accelerator with a device; deterministic's only other value is refused (below) */
        if (!strcmp(f->name, "max_time")) v = "00:00:03:00";
        if (!strcmp(f->name, "deterministic")) v = "true";
        if (!strcmp(f->name, "accelerator")) v = "cpu-strict";   /* present on every machine */
        snprintf(vals[i], sizeof vals[i], "%s", v);
        argv[n++] = names[i];
        argv[n++] = vals[i];
    }
    CHECK(volt_cli_parse(c, n, argv) == VOLT_CLI_RUN, "all trainer keys: %s", g_errbuf);
    volt_trainer_config_init(&tc);
    volt_cli_trainer_config(c, &tc);
    volt_trainer_config_init(&ref);
    for (int i = 0; i < volt__n_trainer_fields; i++) {
        const volt__trainer_field *f = &volt__trainer_fields[i];
        size_t sz = f->ftype == VOLT__TF_I64 || f->ftype == VOLT__TF_U64 ? 8 : f->ftype == VOLT__TF_INT || f->ftype == VOLT__TF_F32 ? 4
                  : f->ftype == VOLT__TF_BOOL ? sizeof(bool) : sizeof(char *);
        bool differs = memcmp((char *)&tc + f->offset, (char *)&ref + f->offset, sz) != 0;
        if (f->ftype == VOLT__TF_STR) {
            const char *a = *(const char **)((char *)&tc + f->offset), *b = *(const char **)((char *)&ref + f->offset);
            differs = a && (!b || strcmp(a, b));
        }
        if (!strcmp(f->name, "deterministic")) continue;
        CHECK(differs, "--trainer.%s %s did not reach volt_trainer_config", f->name, vals[i]);
    }
    volt_cli_destroy(c);

    /* Lightning's int-or-float keys: a fraction goes to the *_fraction field, a count stays a count */
    write_file(f1, "{\"trainer\": {\"val_check_interval\": 0.5, \"limit_test_batches\": 7}}");
    c = mk();
    CHECK(PARSE(c, "--config", f1, "--trainer.limit_val_batches", "0.25", "--limit-train-batches=3") == VOLT_CLI_RUN,
          "fractions: %s", g_errbuf);
    volt_trainer_config_init(&tc);
    volt_cli_trainer_config(c, &tc);
    CHECK(tc.limit_val_fraction == 0.25 && tc.limit_val_batches == -1, "limit_val_batches 0.25: fraction %g, count %lld",
          tc.limit_val_fraction, (long long)tc.limit_val_batches);
    CHECK(tc.limit_train_batches == 3 && tc.limit_train_fraction == 0, "limit_train_batches 3: count %lld, fraction %g",
          (long long)tc.limit_train_batches, tc.limit_train_fraction);
    CHECK(tc.val_check_fraction == 0.5 && tc.val_check_interval == 0 && tc.limit_test_batches == 7,
          "the file's val_check_interval 0.5: fraction %g, count %lld", tc.val_check_fraction, (long long)tc.val_check_interval);
    volt_trainer *tt = NULL;
    CHECK(volt_trainer_create(&tc, &tt) == VOLT_OK, "the trainer takes the fractions: %s", tt ? volt_trainer_errmsg(tt) : "");
    volt_trainer_destroy(tt);
    volt_cli_destroy(c);
    c = mk();
    CHECK(PARSE(c, "--trainer.limit_val_batches", "1.5") == VOLT_CLI_USAGE && strstr(g_errbuf, "want a count or a fraction in (0, 1)"),
          "1.5: %s", g_errbuf);
    volt_cli_destroy(c);
    c = mk();
    CHECK(PARSE(c, "--trainer.limit_val_batches", "-0.5") == VOLT_CLI_USAGE, "-0.5: %s", g_errbuf);
    volt_cli_destroy(c);
    /* the table names every field of the struct between version and the program-set strings */
    CHECK(volt__n_trainer_fields >= 33, "trainer table rows: %d", volt__n_trainer_fields);

    /* usage errors: exit 2 with a message */
    struct { const char *args[4]; int n; const char *want; } bad[] = {
        { { "--trainer.max_epoch", "3" }, 2, "did you mean '--trainer.max_epochs'" },  /* a prefix is not a key */
        { { "--max_epochs", "3" }, 2, "did you mean '--trainer.max_epochs'" },
        { { "--bogus" }, 1, "unknown option '--bogus'" },
        { { "--batch-size", "0" }, 2, "bad value '0' for --batch-size" },
        { { "--model.name", "rnn" }, 2, "want one of mlp|cnn" },
        { { "--model.dropout", "x" }, 2, "want a number" },
        { { "--trainer.precision", "64" }, 2, "want one of" },
        /* at parse time, before a program reads its data: the strategy registry's names and aliases */
        { { "--trainer.strategy", "fsdpp" }, 2, "want one of auto|single|ddp|deepspeed_stage_1|zero1|" },
        /* the trainer's own checks (volt_trainer_config_check) at parse time too */
        { { "--trainer.max_time", "1:30" }, 2, "trainer: max_time must be \"DD:HH:MM:SS\"" },
        { { "--trainer.deterministic", "false" }, 2, "trainer: deterministic=false" },
        { { "--trainer.strategy", "single", "--trainer.devices", "2" }, 4, "strategy 'single' runs on one device" },
        { { "--data.batch_size" }, 1, "needs a value" },
        { { "frobnicate" }, 1, "unknown subcommand 'frobnicate'" },
        { { "fit", "extra" }, 2, "unexpected argument 'extra'" },
        { { "--config", "/nonexistent/x.json" }, 2, "/nonexistent/x.json" },
        { { "--resume=maybe" }, 1, "want true or false" },
    };
    {   /* the default strategy is Lightning's "auto": devices 2 alone is ddp over 2 ranks, not refused */
        c = mk();
        char *av[] = { "t", "--trainer.devices", "2" };
        int r = volt_cli_parse(c, 3, av);
        volt_trainer_config tc;
        volt_trainer_config_init(&tc);
        if (r == VOLT_CLI_RUN) volt_cli_trainer_config(c, &tc);
#ifdef VOLT_HAVE_MPI
        CHECK(r == VOLT_CLI_RUN && tc.strategy && !strcmp(tc.strategy, "auto") && tc.devices == 2,
              "--trainer.devices 2 with the default strategy: %d (%s), strategy %s", r, g_errbuf, tc.strategy ? tc.strategy : "NULL");
#endif
        volt_cli_destroy(c);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = mk();
        char *av[8] = { "t" };
        for (int k = 0; k < bad[i].n; k++) av[k + 1] = (char *)bad[i].args[k];
        int r = volt_cli_parse(c, bad[i].n + 1, av);
        CHECK(r == VOLT_CLI_USAGE, "case %zu (%s): got %d", i, bad[i].args[0], r);
        CHECK(strstr(g_errbuf, bad[i].want) != NULL, "case %zu: message '%s' lacks '%s'", i, g_errbuf, bad[i].want);
        volt_cli_destroy(c);
    }
    /* null: a value only of the nullable keys (declared default null); every other key refuses
     * it at parse time, naming the key (the programs read those as strings and numbers) */
    struct { const char *args[4]; int n; const char *want; } nulls[] = {
        { { "--model.name", "null" }, 2, "--model.name: null is not allowed (a string is required: one of mlp|cnn)" },
        { { "--model.name=null" }, 1, "--model.name: null is not allowed" },
        { { "--model", "null" }, 2, "--model (model.name): null is not allowed" },
        { { "--data.batch_size", "null" }, 2, "--data.batch_size: null is not allowed (an integer in [1, 1048576] is required)" },
        { { "--model.dropout", "null" }, 2, "--model.dropout: null is not allowed (a number in [0, 0.999] is required)" },
        { { "--resume=null" }, 1, "--resume: null is not allowed (true or false is required)" },
        { { "--resume", "null" }, 2, "--resume: null is not allowed (true or false is required)" },
        { { "--trainer.seed", "null" }, 2, "--trainer.seed: null is not allowed (an integer in [0, 9007199254740992] is required)" },
        { { "--trainer.precision", "null" }, 2, "--trainer.precision: null is not allowed (a string is required: one of 32-true|" },
        { { "--trainer.default_root_dir", "null" }, 2, "--trainer.default_root_dir: null is not allowed" },
        { { "--trainer.limit_val_batches", "null" }, 2, "a count in [-1, 1000000000000000] or a fraction in (0, 1) is required" },
    };
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++) {
        c = mk();
        char *av[8] = { "t" };
        for (int k = 0; k < nulls[i].n; k++) av[k + 1] = (char *)nulls[i].args[k];
        int r = volt_cli_parse(c, nulls[i].n + 1, av);
        CHECK(r == VOLT_CLI_USAGE, "null case %zu (%s): got %d", i, nulls[i].args[0], r);
        CHECK(strstr(g_errbuf, nulls[i].want) != NULL, "null case %zu: message '%s' lacks '%s'", i, g_errbuf, nulls[i].want);
        volt_cli_destroy(c);
    }
    write_file(f1, "{\"model\": {\"name\": null}}");
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "model.name: null is not allowed (a string is required"),
          "null in a file: %s", g_errbuf);
    volt_cli_destroy(c);
    write_file(f1, "{\"trainer\": {\"seed\": null}}");
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "trainer.seed: null is not allowed"), "null seed in a file: %s", g_errbuf);
    volt_cli_destroy(c);
    /* the nullable keys take null: a program key declared with a NULL default, the trainer's
     * max_epochs, profiler and max_time (null by default); every trainer row with a value default refuses it */
    c = mk();
    CHECK(PARSE(c, "--data.path", "null", "--trainer.max_epochs", "null", "--trainer.profiler", "null", "--trainer.max_time=null") == VOLT_CLI_RUN,
          "nullable keys: %s", g_errbuf);
    CHECK(volt_cli_is_null(c, "data.path") && volt_cli_str(c, "data.path") == NULL && volt_cli_is_null(c, "trainer.max_epochs"), "null values");
    volt_cli_destroy(c);
    for (int i = 0; i < volt__n_trainer_fields; i++) {
        const volt__trainer_field *f = &volt__trainer_fields[i];
        char name[128];
        snprintf(name, sizeof name, "--trainer.%s", f->name);
        volt_trainer_config d;
        volt_trainer_config_init(&d);
        const char *sv = NULL;
        if (f->ftype == VOLT__TF_STR) memcpy(&sv, (char *)&d + f->offset, sizeof sv);
        const bool null_default = (f->dflt && !strcmp(f->dflt, "null")) || (f->ftype == VOLT__TF_STR && !f->dflt && !sv);
        c = mk();
        int r = PARSE(c, name, "null");
        CHECK(r == (null_default ? VOLT_CLI_RUN : VOLT_CLI_USAGE), "%s null: got %d (%s)", name, r, g_errbuf);
        CHECK(null_default || strstr(g_errbuf, "null is not allowed"), "%s null: %s", name, g_errbuf);
        volt_cli_destroy(c);
    }
    /* a nullable key with a value default: declared NULL, then volt_cli_set_default */
    {
        static const volt_cli_key nk[] = {
            { "ck.monitor", VOLT_CLI_STRING, NULL, "metric (null: none)", NULL, NULL, 0, 0 },
            { "ck.mode", VOLT_CLI_STRING, "max", "mode", NULL, "max|min", 0, 0 },
        };
        volt_cli_config ncc = { .version = VOLT_CLI_CONFIG_VERSION, .prog = "t", .keys = nk, .n_keys = 2, .no_trainer_keys = true,
                                .default_subcommand = "fit", .out = g_out, .err = g_err };
        volt_cli *nc = NULL;
        CHECK_OK(volt_cli_create(&ncc, &nc));
        CHECK_OK(volt_cli_set_default(nc, "ck.monitor", "val_acc"));
        CHECK(volt_cli_set_default(nc, "ck.mode", NULL) == VOLT_ERR_INVALID_ARG && strstr(volt_cli_errmsg(nc), "null is not allowed"),
              "set_default(NULL) on a key with a value default: %s", volt_cli_errmsg(nc));
        char *av[4] = { "t", "--help" };
        memset(g_outbuf, 0, sizeof g_outbuf);
        rewind(g_out);
        CHECK(volt_cli_parse(nc, 2, av) == VOLT_CLI_DONE && strstr(g_outbuf, "(default: val_acc; or null)") &&
              strstr(g_outbuf, "(default: max)") && !strstr(g_outbuf, "(default: max; or null)"), "help marks nullable: %s", g_outbuf);
        char *av2[4] = { "t" };
        CHECK(volt_cli_parse(nc, 1, av2) == VOLT_CLI_RUN && !strcmp(volt_cli_str(nc, "ck.monitor"), "val_acc"), "the set default");
        char *av3[4] = { "t", "--ck.monitor", "null" };
        CHECK(volt_cli_parse(nc, 3, av3) == VOLT_CLI_RUN && volt_cli_str(nc, "ck.monitor") == NULL, "still nullable: %s", g_errbuf);
        volt_cli_destroy(nc);
    }

    /* messages: a missing value (the next argument is an option), a section given a value, a
     * number out of a double's range, integer bounds printed as integers */
    struct { const char *args[4]; int n; const char *want; } msgs[] = {
        { { "--trainer.max_epochs", "--no-progress" }, 2, "--trainer.max_epochs needs a value (the next argument '--no-progress' is an option)" },
        { { "--epochs", "--trainer.max_steps", "3" }, 3, "--epochs needs a value" },
        { { "--model.name", "--resume" }, 2, "--model.name needs a value" },
        { { "--data.batch_size", "0" }, 2, "want an integer in [1, 1048576]" },
        { { "--trainer.max_epochs", "99999999999999999999" }, 2, "out of range (want an integer in [-1, 1000000000000000])" },
        { { "--trainer.max_epochs", "1e400" }, 2, "out of range (want an integer in [-1, 1000000000000000])" },
        { { "--model.dropout", "1e400" }, 2, "out of range (want a number in [0, 0.999])" },
    };
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        c = mk();
        char *av[8] = { "t" };
        for (int k = 0; k < msgs[i].n; k++) av[k + 1] = (char *)msgs[i].args[k];
        int r = volt_cli_parse(c, msgs[i].n + 1, av);
        CHECK(r == VOLT_CLI_USAGE, "message case %zu (%s): got %d", i, msgs[i].args[0], r);
        CHECK(strstr(g_errbuf, msgs[i].want) != NULL, "message case %zu: '%s' lacks '%s'", i, g_errbuf, msgs[i].want);
        volt_cli_destroy(c);
    }
    c = mk();
    CHECK(PARSE(c, "--model.name=--x") == VOLT_CLI_USAGE && strstr(g_errbuf, "bad value '--x' for --model.name"),
          "--key=--value is a value: %s", g_errbuf);
    volt_cli_destroy(c);
    write_file(f1, "{\"trainer\": 5}");
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "'trainer' must be an object") && !strstr(g_errbuf, "unknown key"),
          "a section given a number: %s", g_errbuf);
    volt_cli_destroy(c);
    write_file(f1, "{\"trainer\": {\"max_epochs\": 1e400}}");
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "'trainer.max_epochs': out of range (want an integer in [-1, 1000000000000000])") &&
          !strstr(g_errbuf, "null"), "1e400 in a file: %s", g_errbuf);
    volt_cli_destroy(c);
    write_file(f1, "{\"data\": {\"batch_size\": 2000000}}");
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "want an integer in [1, 1048576]"), "int bounds: %s", g_errbuf);
    volt_cli_destroy(c);

    /* config-file errors name the file and key */
    write_file(f1, "{\"trainer\": {\"max_epohcs\": 3}}");
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "unknown key 'trainer.max_epohcs'") &&
          strstr(g_errbuf, "did you mean '--trainer.max_epochs'"), "file typo: %s", g_errbuf);
    volt_cli_destroy(c);
    write_file(f1, "{\"trainer\": {\"strategy\": \"zero2\"}}");   /* an alias is a valid value */
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_RUN, "strategy alias from a file: %s", g_errbuf);
    volt_trainer_config_init(&tc);
    volt_cli_trainer_config(c, &tc);
    CHECK(tc.strategy && !strcmp(tc.strategy, "zero2"), "strategy alias from a file: %s", tc.strategy ? tc.strategy : "(null)");
    volt_cli_destroy(c);
    write_file(f1, "{\"data\": {\"batch_size\": 1.5}}");
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "want an integer"), "file type: %s", g_errbuf);
    volt_cli_destroy(c);
    write_file(f1, "{\"data\": {\"batch_size\": 3,}");
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "not valid JSON"), "bad JSON: %s", g_errbuf);
    volt_cli_destroy(c);
    /* what a Lightning user brings: a YAML config, a misspelt section, a folder for the file */
    char fy[1100];
    snprintf(fy, sizeof fy, "%s/config.yaml", tmp);
    write_file(fy, "trainer:\n  max_epochs: 3\n");
    c = mk();
    CHECK(PARSE(c, "--config", fy) == VOLT_CLI_USAGE && strstr(g_errbuf, "not valid JSON") && strstr(g_errbuf, "not YAML"),
          "YAML config: %s", g_errbuf);
    volt_cli_destroy(c);
    write_file(f1, "{\"traner\": {\"max_epochs\": 3}}");
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "unknown section 'traner'; did you mean 'trainer'?"),
          "misspelt section: %s", g_errbuf);
    volt_cli_destroy(c);
    c = mk();
    CHECK(PARSE(c, "--config", tmp) == VOLT_CLI_USAGE && strstr(g_errbuf, "is a directory"), "a folder as --config: %s", g_errbuf);
    volt_cli_destroy(c);
    /* "\u0000" decodes to a NUL, which would end the key or value short ("trainer\u0000junk"
     * read as the trainer section, "cnn\u0000; rm -rf" as "cnn"): refused, naming the file and
     * the key, the string as written; an escaped backslash before "u0000" is no NUL; a raw NUL
     * byte (the parse would stop there, dropping the rest unread) is refused too */
    static const struct { const char *json, *want; } nuls[] = {
        { "{\"trainer\\u0000junk\": {\"max_epochs\": 5}}", "the key \"trainer\\u0000junk\" holds a NUL character" },
        { "{\"model\": {\"name\": \"cnn\\u0000; rm -rf\"}}", "'model.name': the value \"cnn\\u0000; rm -rf\" holds a NUL" },
        { "{\"trainer\": {\"logger_name\": \"ok\\u0000/../../escape\"}}", "'trainer.logger_name': the value \"ok\\u0000/" },
        { "{\"trainer\": {\"max_epochs\\u0000x\": 5}}", "the key \"max_epochs\\u0000x\" (under 'trainer') holds a NUL" },
        { "{\"data\": {\"path\": \"q\\\"\\\\\", \"batch_size\": 3}, \"model\": {\"name\": \"m\\u0000\"}}",
          "'model.name': the value \"m\\u0000\"" },
    };
    for (size_t i = 0; i < sizeof nuls / sizeof nuls[0]; i++) {
        write_file(f1, nuls[i].json);
        c = mk();
        CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, nuls[i].want) && strstr(g_errbuf, f1),
              "\\u0000 in a config (%s): %s", nuls[i].json, g_errbuf);
        volt_cli_destroy(c);
    }
    write_file(f1, "{\"data\": {\"path\": \"a\\\\u0000b\"}}");   /* "a\\u0000b": a backslash, then "u0000b" */
    c = mk();
    CHECK(PARSE(c, "--config", f1) == VOLT_CLI_RUN && volt_cli_str(c, "data.path") && !strcmp(volt_cli_str(c, "data.path"), "a\\u0000b"),
          "an escaped backslash before u0000: %s", g_errbuf);
    volt_cli_destroy(c);
    {
        static const char raw[] = "{\"data\": {\"batch_size\": 3}}\n\0{\"model\": {\"name\": \"cnn\"}}";
        FILE *f = fopen(f1, "wb");
        CHECK(f && fwrite(raw, 1, sizeof raw - 1, f) == sizeof raw - 1, "write %s", f1);
        if (f) fclose(f);
        c = mk();
        CHECK(PARSE(c, "--config", f1) == VOLT_CLI_USAGE && strstr(g_errbuf, "holds a NUL byte (line 2)"), "a raw NUL byte: %s", g_errbuf);
        volt_cli_destroy(c);
    }

    /* --help: grouped by section, with defaults; --version */
    c = mk();
    CHECK(PARSE(c, "--help") == VOLT_CLI_DONE, "help");
    CHECK(strstr(g_outbuf, "\nmodel:\n") && strstr(g_outbuf, "\ntrainer:\n") && strstr(g_outbuf, "--trainer.log_every_n_steps INT") &&
          strstr(g_outbuf, "(default: 50)") && strstr(g_outbuf, "[--batch-size V]"), "help text: %.300s", g_outbuf);
    volt_cli_destroy(c);
    c = mk();
    CHECK(PARSE(c, "--version") == VOLT_CLI_DONE && strstr(g_outbuf, "volt 0."), "version: %s", g_outbuf);
    volt_cli_destroy(c);

    /* a bad key table is refused at create */
    static const volt_cli_key dup[] = { { "a.b", VOLT_CLI_INT, "1", "", NULL, NULL, 0, 0 }, { "a.b", VOLT_CLI_INT, "2", "", NULL, NULL, 0, 0 } };
    volt_cli_config cc = { .version = VOLT_CLI_CONFIG_VERSION, .prog = "t", .keys = dup, .n_keys = 2, .no_trainer_keys = true };
    c = NULL;
    CHECK(volt_cli_create(&cc, &c) == VOLT_ERR_INVALID_ARG && strstr(volt_cli_errmsg(c), "given twice"), "duplicate key");
    volt_cli_destroy(c);
    static const volt_cli_key baddef[] = { { "a.b", VOLT_CLI_INT, "x", "", NULL, NULL, 0, 0 } };
    cc.keys = baddef;
    cc.n_keys = 1;
    c = NULL;
    CHECK(volt_cli_create(&cc, &c) == VOLT_ERR_INVALID_ARG, "bad default");
    volt_cli_destroy(c);

    /* a file's key at its default value is not "set" (a printed config / hparams.json lists every
     * key: the programs' "X without Y" checks must take it back); the command line's is, and so
     * is a file's other value */
    write_file(f1, "{\"data\": {\"batch_size\": 64, \"no_cache\": false}, \"model\": {\"name\": \"cnn\"}, "
                   "\"trainer\": {\"seed\": 42, \"max_epochs\": null}}");
    c = mk();
    CHECK(PARSE(c, "--config", f1, "--resume", "false") == VOLT_CLI_RUN, "defaults in a file: %s", g_errbuf);
    CHECK(!volt_cli_was_set(c, "data.batch_size") && !volt_cli_was_set(c, "data.no_cache") && !volt_cli_was_set(c, "trainer.seed") &&
          !volt_cli_was_set(c, "trainer.max_epochs"), "a file's default values count as set");
    CHECK(volt_cli_was_set(c, "model.name") && volt_cli_was_set(c, "resume"), "a file's other value / the command line's default");
    volt_cli_destroy(c);
    write_file(f2, "{\"model\": {\"name\": \"mlp\"}}");   /* a later file back to the default */
    c = mk();
    CHECK(PARSE(c, "--config", f1, "--config", f2) == VOLT_CLI_RUN && !volt_cli_was_set(c, "model.name"), "later file at the default");
    volt_cli_destroy(c);
    /* --no-cache sets data.no_cache true (the key is negative itself); --no-progress still sets false */
    c = mk();
    CHECK(PARSE(c, "--no-cache", "--no-progress") == VOLT_CLI_RUN && volt_cli_bool(c, "data.no_cache") &&
          !volt_cli_bool(c, "trainer.enable_progress_bar"), "--no-cache: %d", volt_cli_bool(c, "data.no_cache"));
    volt_cli_destroy(c);
    /* nothing after "--" is read, so nothing may follow it */
    c = mk();
    CHECK(PARSE(c, "--batch-size", "3", "--", "--model", "cnn") == VOLT_CLI_USAGE && strstr(g_errbuf, "unexpected argument '--model'"),
          "after --: %s", g_errbuf);
    volt_cli_destroy(c);
    c = mk();
    CHECK(PARSE(c, "--batch-size", "3", "--") == VOLT_CLI_RUN, "a trailing -- alone: %s", g_errbuf);
    volt_cli_destroy(c);
    /* one dash: the argument itself is named, not the program */
    c = mk();
    CHECK(PARSE(c, "-epochs", "4") == VOLT_CLI_USAGE && strstr(g_errbuf, "unknown option '-epochs'; did you mean '--epochs'?"),
          "-epochs: %s", g_errbuf);
    volt_cli_destroy(c);
    c = mk();
    CHECK(PARSE(c, "--batch-size", "3", "-x") == VOLT_CLI_USAGE && strstr(g_errbuf, "unknown option '-x'"), "-x: %s", g_errbuf);
    volt_cli_destroy(c);
    /* bounds: the real range, however large */
    c = mk();
    CHECK(PARSE(c, "--seed", "10000000000000000") == VOLT_CLI_USAGE && strstr(g_errbuf, "want an integer in [0, 9007199254740992]"),
          "seed bounds: %s", g_errbuf);
    volt_cli_destroy(c);
    /* --config followed by an option: a missing value, not a file named "--print-config" */
    c = mk();
    CHECK(PARSE(c, "--config", "--print-config") == VOLT_CLI_USAGE && strstr(g_errbuf, "--config needs a value"), "--config: %s", g_errbuf);
    volt_cli_destroy(c);
    /* integers print with every digit (cJSON's %.15g gives 9007199254740990) */
    c = mk();
    CHECK(PARSE(c, "--seed", "9007199254740991", "--print-config") == VOLT_CLI_DONE && strstr(g_outbuf, "\"seed\":\t9007199254740991,"),
          "exact integer: %.200s", strstr(g_outbuf, "\"seed\"") ? strstr(g_outbuf, "\"seed\"") : g_outbuf);
    volt_cli_destroy(c);
    c = mk();
    CHECK(PARSE(c, "--seed", "9007199254740991", "--trainer.gradient_clip_val", "0.30000000000000004") == VOLT_CLI_RUN, "parse: %s", g_errbuf);
    volt_trainer_config_init(&tc);
    volt_cli_trainer_config(c, &tc);
    CHECK(tc.run_config_json && strstr(tc.run_config_json, "\"seed\":9007199254740991,") &&
          strstr(tc.run_config_json, "\"gradient_clip_val\":0.30000000000000004"), "run_config_json numbers: %s", tc.run_config_json);
    volt_cli_destroy(c);
    /* logger_name is a folder under the root (the trainer's rule): no path out of it */
    const char *bad_names[] = { "../../logesc", "..", "/abs/logs", "a/../../b" };
    for (int i = 0; i < 4; i++) {
        c = mk();
        CHECK(PARSE(c, "--trainer.logger_name", bad_names[i]) == VOLT_CLI_USAGE &&
              strstr(g_errbuf, "--trainer.logger_name: a folder under trainer.default_root_dir"),
              "logger_name '%s': %s", bad_names[i], g_errbuf);
        volt_cli_destroy(c);
    }
    const char *good_names[] = { "a/b", ".", "exp1" };   /* a subfolder, the root itself: as the library takes them */
    for (int i = 0; i < 3; i++) {
        c = mk();
        CHECK(PARSE(c, "--trainer.logger_name", good_names[i]) == VOLT_CLI_RUN, "logger_name '%s': %s", good_names[i], g_errbuf);
        volt_cli_destroy(c);
    }

    CHECK(volt_cli_edit_distance("max_epoch", "max_epochs") == 1 && volt_cli_edit_distance("batch-size", "batch_size") == 0,
          "edit distance");
    if (g_err) fclose(g_err);
    if (g_out) fclose(g_out);
    return vtest_finish();
}
