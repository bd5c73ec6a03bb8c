/* The command line on arbitrary configs and arguments: the input up to its first NUL is a
 * JSON config file, the rest the arguments (one a line) before `--config FILE`. A parse
 * that says run gives every key's value, the merged config as JSON (which must parse again
 * to the same values) and a trainer config that volt_trainer_create takes or refuses with a
 * message (single process on the cpu, under the scratch folder: nothing is launched).
 * Arguments naming a path ('/' in them) are replaced by the scratch config, so no input
 * reads a device, a pipe or a file outside. */
#include "fuzz_util.h"
#include "volt/cli.h"
#include "volt/trainer.h"

static const volt_cli_key k_keys[] = {   /* volt-text-classification's, those seed.json sets */
    { "data.source", VOLT_CLI_STRING, "imdb:aclImdb", "where the texts are", "data", NULL, 0, 0 },
    { "data.split", VOLT_CLI_STRING, NULL, "train,val,test counts", NULL, NULL, 0, 0 },
    { "data.batch_size", VOLT_CLI_INT, "12", "batch size per rank", "batch-size", NULL, 1, 65536 },
    { "data.max_length", VOLT_CLI_INT, "512", "tokens per text", NULL, NULL, 8, 512 },
    { "model.preset", VOLT_CLI_STRING, "distilbert-base", "model size", "preset", "small|distilbert-base", 0, 0 },
    { "model.pretrained", VOLT_CLI_STRING, NULL, "weights", NULL, NULL, 0, 0 },
    { "optimizer.name", VOLT_CLI_STRING, "adam", "optimizer", NULL, "adam|adamw|sgd", 0, 0 },
    { "optimizer.lr", VOLT_CLI_FLOAT, "5e-5", "learning rate", "lr", NULL, 0, 10 },
    { "optimizer.weight_decay", VOLT_CLI_FLOAT, "0", "weight decay", NULL, NULL, 0, 1 },
    { "optimizer.lr_schedule", VOLT_CLI_STRING, "constant", "schedule", NULL, "constant|linear|cosine", 0, 0 },
    { "optimizer.warmup_steps", VOLT_CLI_INT, "0", "warmup", NULL, NULL, 0, 0 },
    { "checkpoint.monitor", VOLT_CLI_STRING, "val_acc", "metric", NULL, NULL, 0, 0 },
    { "checkpoint.mode", VOLT_CLI_STRING, "max", "mode", NULL, "max|min", 0, 0 },
    { "checkpoint.save_top_k", VOLT_CLI_INT, "1", "kept", NULL, NULL, -1, 1000 },
    { "checkpoint.save_last", VOLT_CLI_BOOL, "true", "last", NULL, NULL, 0, 0 },
    { "test_after_fit", VOLT_CLI_BOOL, "true", "test the best checkpoint after fit", "no-test", NULL, 0, 0 },
    { "resume", VOLT_CLI_BOOL, "false", "continue from last", "resume", NULL, 0, 0 },
    { "ckpt_path", VOLT_CLI_STRING, NULL, "checkpoint", NULL, NULL, 0, 0 },
};
enum { N_KEYS = sizeof k_keys / sizeof k_keys[0], MAX_ARGS = 48 };

/* Every key's value, as the program would read it. */
static void read_all(const volt_cli *c, double *num, const char **str) {
    for (int i = 0; i < N_KEYS; i++) {
        const char *k = k_keys[i].key;
        num[i] = k_keys[i].type == VOLT_CLI_INT ? (double)volt_cli_int(c, k)
               : k_keys[i].type == VOLT_CLI_FLOAT ? volt_cli_float(c, k)
               : k_keys[i].type == VOLT_CLI_BOOL ? (double)volt_cli_bool(c, k) : 0;
        str[i] = k_keys[i].type == VOLT_CLI_STRING ? volt_cli_str(c, k) : NULL;
        (void)volt_cli_was_set(c, k);
        (void)volt_cli_is_null(c, k);
    }
}

static volt_cli *make(FILE *sink) {
    volt_cli *c = NULL;
    volt_cli_config cc = { .version = VOLT_CLI_CONFIG_VERSION, .prog = "fuzz-cli", .keys = k_keys, .n_keys = N_KEYS,
                           .default_subcommand = "fit", .out = sink, .err = sink };
    if (volt_cli_create(&cc, &c) != VOLT_OK) abort();
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w"))) abort();
    const uint8_t *nul = memchr(data, 0, size);
    const size_t jn = nul ? (size_t)(nul - data) : size;
    char cfg[300], again[300], root[300];
    fuzz_path(cfg, sizeof cfg, "config.json");
    fuzz_path(again, sizeof again, "printed.json");
    fuzz_path(root, sizeof root, "root");
    fuzz_write(cfg, data, jn);
    char *rest = nul ? strndup((const char *)nul + 1, size - jn - 1) : strdup("");
    if (!rest) abort();
    char *argv[MAX_ARGS + 4];
    int argc = 0;
    argv[argc++] = "fuzz-cli";
    for (char *s = rest, *line; argc < MAX_ARGS && (line = strsep(&s, "\n"));)
        argv[argc++] = strchr(line, '/') ? cfg : line;
    argv[argc++] = "--config";
    argv[argc++] = cfg;
    argv[argc] = NULL;

    volt_cli *c = make(sink);
    if (volt_cli_parse(c, argc, argv) == VOLT_CLI_RUN) {
        double num[N_KEYS], num2[N_KEYS];
        const char *str[N_KEYS], *str2[N_KEYS];
        read_all(c, num, str);
        (void)volt_cli_subcommand(c);
        /* --print-config's JSON reads back to the same values */
        char *json = volt_cli_config_json(c);
        if (!json) abort();
        fuzz_write(again, (const uint8_t *)json, strlen(json));
        free(json);
        volt_cli *c2 = make(sink);
        char *argv2[] = { "fuzz-cli", "--config", again, NULL };
        if (volt_cli_parse(c2, 3, argv2) != VOLT_CLI_RUN) abort();
        read_all(c2, num2, str2);
        for (int i = 0; i < N_KEYS; i++) {
            if (memcmp(&num[i], &num2[i], sizeof num[i]) != 0 && !(num[i] != num[i] && num2[i] != num2[i])) abort();
            if (!str[i] != !str2[i] || (str[i] && strcmp(str[i], str2[i]) != 0)) abort();
        }
        volt_cli_destroy(c2);
        /* the trainer takes the config or refuses it with a message */
        volt_trainer_config tc;
        volt_trainer_config_init(&tc);
        volt_cli_trainer_config(c, &tc);
        tc.strategy = "single";
        tc.strategy_comm = NULL;
        tc.accelerator = "cpu";
        tc.devices = 1;
        tc.num_nodes = 1;
        tc.default_root_dir = root;
        tc.enable_progress_bar = false;
        volt_trainer *t = NULL;
        volt_status st = volt_trainer_create(&tc, &t);
        if (st != VOLT_OK && t && !volt_trainer_errmsg(t)[0]) abort();
        volt_trainer_destroy(t);
    }
    volt_cli_destroy(c);
    free(rest);
    return 0;
}
