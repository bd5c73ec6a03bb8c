/* volt/cli.h — LightningCLI for C programs: a subcommand (fit / validate / test / predict),
 * JSON config files (--config f.json, repeatable, later wins) and dotted overrides
 * (--trainer.max_epochs 3, --model.dropout=0.1), merged into one config tree that
 * --print-config prints (reusable as a file). Every volt_trainer_config field is a
 * "trainer.<field>" key (one row in cli/trainer_keys.c); the program declares its own keys
 * (model.*, data.*, ...). Unknown keys are rejected with a "did you mean"; every usage
 * error returns VOLT_CLI_USAGE (the program exits 2). docs/CLI.md lists the keys.
 *
 *   volt_cli *c; volt_cli_create(&(volt_cli_config){ .version = VOLT_CLI_CONFIG_VERSION,
 *       .prog = "my-app", .keys = my_keys, .n_keys = n }, &c);
 *   int r = volt_cli_parse(c, argc, argv);         // 0: run; VOLT_CLI_DONE: exit 0; else exit r
 *   volt_trainer_config tc; volt_trainer_config_init(&tc); volt_cli_trainer_config(c, &tc);
 *   int64_t bs = volt_cli_int(c, "data.batch_size");
 */
#ifndef VOLT_CLI_H
#define VOLT_CLI_H

#include "volt/export.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "volt/core.h"
#include "volt/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct volt_cli volt_cli;

typedef enum volt_cli_type {
    VOLT_CLI_INT,       /* int64 */
    VOLT_CLI_FLOAT,     /* double */
    VOLT_CLI_BOOL,      /* true/false (also 1/0, yes/no); "--key" alone means true */
    VOLT_CLI_STRING,    /* text; JSON null = unset (NULL) */
} volt_cli_type;

/* One key the program takes. */
typedef struct volt_cli_key {
    const char *key;        /* "section.name" (or "name" for a top-level key); [a-z0-9_.] */
    volt_cli_type type;
    const char *dflt;       /* default as text ("3", "0.1", "true", "adam"); NULL = null */
    const char *help;       /* one line for --help */
    const char *alias;      /* an older flag name without "--" ("epochs", "batch-size"); for a
                               BOOL key the alias is a switch: "resume" sets true, "no-X"
                               sets false; NULL = none */
    const char *choices;    /* "a|b|c": the only accepted values (STRING); NULL = any */
    double min, max;        /* INT/FLOAT bounds, inclusive; both 0 = unbounded */
} volt_cli_key;

enum {
    VOLT_CLI_RUN = 0,       /* volt_cli_parse: go on */
    VOLT_CLI_DONE = 1,      /* --help / --version / --print-config printed: exit 0 */
    VOLT_CLI_USAGE = 2,     /* usage error (message on stderr): exit 2 */
};

typedef struct volt_cli_config {
    uint32_t version;           /* VOLT_CLI_CONFIG_VERSION */
    const char *prog;           /* program name for messages and --help */
    const char *description;    /* first lines of --help (may be NULL) */
    const char *version_text;   /* what --version prints (NULL: "volt <VOLT_VERSION>") */
    const volt_cli_key *keys;   /* the program's keys (borrowed for the cli's life) */
    int n_keys;
    const char *subcommands;    /* "fit|validate|test|predict" (NULL = these four) */
    const char *default_subcommand;   /* when none is given; NULL = one is required */
    bool no_trainer_keys;       /* true: no "trainer.*" keys (e.g. a plotting tool) */
    FILE *out, *err;            /* NULL = stdout / stderr */
} volt_cli_config;
#define VOLT_CLI_CONFIG_VERSION 1u

/* keys is borrowed until volt_cli_destroy. Fails with VOLT_ERR_INVALID_ARG on a bad key
 * table (duplicate or malformed key, a default that does not parse: volt_cli_errmsg). */
VOLT_API volt_status volt_cli_create(const volt_cli_config *cfg, volt_cli **out);
VOLT_API void volt_cli_destroy(volt_cli *c);                      /* NULL-safe */
VOLT_API const char *volt_cli_errmsg(const volt_cli *c);
/* Change a default before parsing (e.g. "trainer.max_epochs" = "3"); the --help text shows it. */
VOLT_API volt_status volt_cli_set_default(volt_cli *c, const char *key, const char *value);
/* Parse argv: defaults < config files (in order) < command-line keys (in order). Returns
 * VOLT_CLI_RUN, VOLT_CLI_DONE or VOLT_CLI_USAGE (the message is on stderr). */
VOLT_API int volt_cli_parse(volt_cli *c, int argc, char **argv);

/* After a successful parse. Strings are valid until volt_cli_destroy. */
VOLT_API const char *volt_cli_subcommand(const volt_cli *c);
VOLT_API int64_t volt_cli_int(const volt_cli *c, const char *key);
VOLT_API double volt_cli_float(const volt_cli *c, const char *key);
VOLT_API bool volt_cli_bool(const volt_cli *c, const char *key);
VOLT_API const char *volt_cli_str(const volt_cli *c, const char *key);   /* NULL when null */
VOLT_API bool volt_cli_was_set(const volt_cli *c, const char *key);      /* by the command line, or by a file with a
                                                                            value other than the default */
VOLT_API bool volt_cli_is_null(const volt_cli *c, const char *key);      /* its value is null (unset) */
/* The merged config as pretty JSON (what --print-config prints; malloc'ed, caller frees). */
VOLT_API char *volt_cli_config_json(const volt_cli *c);
/* Fill every trainer.* key into cfg (after volt_trainer_config_init); strings borrowed
 * from c. run_config_json is set to the merged config, so loggers save it beside the logs. */
VOLT_API void volt_cli_trainer_config(const volt_cli *c, volt_trainer_config *cfg);
/* Print --help to f: usage, subcommands, then the keys grouped by section with defaults. */
VOLT_API void volt_cli_print_help(const volt_cli *c, FILE *f);

/* ---- launching (Lightning's launcher) ------------------------------------------------------- */
/* Whether this process runs inside an MPI job (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK set). */
VOLT_API bool volt_cli_in_mpi_job(void);
/* With a distributed trainer.strategy and trainer.devices = N > 1 outside an MPI job:
 * replace this process with `mpirun --oversubscribe -np N -x OMP_NUM_THREADS ... argv`
 * (the flags scripts/volt-run uses; $MPIRUN overrides mpirun). Returns only when nothing
 * is launched (VOLT_OK) or the exec failed (VOLT_ERR_IO; errmsg says why). A distributed
 * strategy on one process with devices <= 1 prints a note on stderr. */
VOLT_API volt_status volt_cli_launch(volt_cli *c, int argc, char **argv);

/* The edit distance the "did you mean" uses (exported for tests). */
VOLT_API int volt_cli_edit_distance(const char *a, const char *b);

#ifdef __cplusplus
}
#endif
#endif
