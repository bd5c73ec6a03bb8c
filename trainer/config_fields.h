/* Every field of volt_trainer_config as one table (trainer/config_fields.c): the one list the
 * loggers write as the run's hyper-parameters (the CSV logger's config.json, the TensorBoard
 * hparams), and the one the CLI's trainer.* key table is checked against (tests/test_hparams.c).
 * A new trainer field is one row here (and one in cli/trainer_keys.c when it is a key). */
#ifndef VOLT_TRAINER_CONFIG_FIELDS_H
#define VOLT_TRAINER_CONFIG_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "volt/trainer.h"

typedef enum volt__cfg_type {
    VOLT__CFG_U32, VOLT__CFG_I64, VOLT__CFG_INT, VOLT__CFG_F32, VOLT__CFG_BOOL, VOLT__CFG_U64, VOLT__CFG_STR, VOLT__CFG_F64
} volt__cfg_type;

enum {
    VOLT__CFG_HPARAM = 1,   /* written as a hyper-parameter (all but version and run_config_json) */
    VOLT__CFG_KEY = 2,      /* a CLI trainer.* key (all but version and the program's
                               run_config_json, run_fingerprint) */
};

typedef struct volt__cfg_field {
    const char *name;       /* the field name */
    volt__cfg_type type;
    size_t offset, size;    /* offsetof / sizeof the field in volt_trainer_config */
    unsigned flags;         /* VOLT__CFG_* */
} volt__cfg_field;

/* In struct order; volt__n_trainer_config_fields rows. */
extern const volt__cfg_field volt__trainer_config_fields[];
extern const int volt__n_trainer_config_fields;

/* A field's value in c: a number (num; U32/U64 also exactly in u64; F32 as the shortest
 * decimal that reads back as the float, so 0.1f is 0.1), a bool (b) or a string (str; NULL =
 * unset, written as null). */
typedef struct volt__cfg_value { volt__cfg_type type; double num; uint64_t u64; bool b; const char *str; } volt__cfg_value;
volt__cfg_value volt__cfg_get(const volt__cfg_field *f, const volt_trainer_config *c);

/* The hyper-parameters of c (every VOLT__CFG_HPARAM field) as a pretty-printed JSON object
 * (caller frees); NULL when out of memory. U64 fields are strings (exact beyond 2^53). */
char *volt__trainer_config_json(const volt_trainer_config *c);

#endif
