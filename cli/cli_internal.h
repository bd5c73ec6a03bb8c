/* cli/ internals: the table of volt_trainer_config fields the CLI exposes as trainer.* keys. */
#ifndef VOLT_CLI_INTERNAL_H
#define VOLT_CLI_INTERNAL_H

#include <stddef.h>
#include "volt/cli.h"

/* LIMIT: an int64 count at offset, or (a value with a fraction part, in (0, 1)) a double
 * fraction at frac_offset: Lightning's int-or-float limit_*_batches and val_check_interval. */
typedef enum volt__tf_type { VOLT__TF_I64, VOLT__TF_INT, VOLT__TF_F32, VOLT__TF_BOOL, VOLT__TF_U64, VOLT__TF_STR,
                             VOLT__TF_LIMIT } volt__tf_type;

/* One volt_trainer_config field: a new field is one row in cli/trainer_keys.c. */
typedef struct volt__trainer_field {
    const char *name;          /* the field name; the key is "trainer.<name>" */
    volt__tf_type ftype;
    size_t offset;             /* offsetof(volt_trainer_config, name) */
    const char *help;
    const char *alias;         /* an older app flag (without "--"), or NULL */
    const char *choices;       /* "a|b" or NULL */
    double min, max;           /* both 0 = unbounded */
    const char *dflt;          /* NULL: the value volt_trainer_config_init sets; "null": leave it */
    size_t frac_offset;        /* LIMIT: offsetof the fraction field */
    const char *(*choices_fn)(void);   /* choices read from a registry (strategy), else NULL: choices */
} volt__trainer_field;

extern const volt__trainer_field volt__trainer_fields[];
extern const int volt__n_trainer_fields;

#include <stdbool.h>
#include <stdio.h>
#include <cjson/cJSON.h>

#define MAX_KEYS 256

typedef struct row {
    volt_cli_key k;          /* strings borrowed (program table / trainer table) */
    char *dflt;              /* owned copy of the current default text (NULL = null) */
    const volt__trainer_field *tf;   /* trainer field, or NULL */
    char keybuf[128];        /* "trainer.<field>" for trainer rows (k.key points here) */
    bool set;                /* given by a file or the command line */
    bool nullable;           /* null is a value of this key: its declared default (the key table's, or for
                                a trainer row volt_trainer_config_init's) is null, as Lightning's
                                Optional[...] = None. Every other key refuses null: the programs read it
                                as a string or a number. Fixed at create (volt_cli_set_default keeps it). */
} row;

struct volt_cli {
    volt_cli_config cfg;
    row rows[MAX_KEYS];
    int n;
    cJSON *tree;
    char *sub;
    char *merged_json;       /* kept for run_config_json */
    FILE *out, *err;
    char errmsg[512];
};

/* The row of a key (NULL when unknown), a type's name for --help, a value in the tree. */
row *volt__cli_find_row(const volt_cli *c, const char *key);
const char *volt__cli_type_name(volt_cli_type t);
const cJSON *volt__cli_tree_get(const cJSON *tree, const char *key);

/* tree as JSON text (cJSON_Print when formatted), every number exactly; NULL when out of memory. */
char *volt__cli_print(const cJSON *tree, bool formatted);

/* Store a message on c (volt_cli_errmsg), printf-style. */
void volt__cli_seterr(volt_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
