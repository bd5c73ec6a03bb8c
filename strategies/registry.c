/* The strategy registry: one row per strategy (Lightning's StrategyRegistry, SQLite's
 * sqlite3_vfs_find). Everything that lists, validates or describes strategies reads these
 * rows: volt__strategy_create's errors, the CLI's --help (cli/trainer_keys.c), the launcher
 * (cli/launch.c: does the choice need ranks?), and the table in docs/ARCHITECTURE.md.
 * Multi-process rows exist in every build (so --help and errors can name them); their ops
 * are present only when built with MPI or NCCL (strategies/parallel/; NCCL alone: a world of
 * one process on a GPU, or ranks over MPI when that is built in too). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "strategies/strategy.h"
#include "strategies/comm/comm.h"

#if defined(VOLT_HAVE_MPI) || defined(VOLT_HAVE_NCCL)
#include "strategies/parallel/parallel.h"
#define PAR(x) x
#else
#define PAR(x) NULL
#endif

static const volt_strategy_ops single_ops = { .version = VOLT_STRATEGY_OPS_VERSION };   /* every op: the default */

#define F_ZERO (VOLT_STRAT_MULTI_PROCESS | VOLT_STRAT_SHARDS_OPTIM)
static const volt_strategy_row k_rows[] = {
    { "single", { NULL }, "one process holds everything (no communication)", 0, &single_ops, NULL },
    { "ddp", { NULL }, "replicas on every rank; grads all-reduced per unit during backward",
      VOLT_STRAT_MULTI_PROCESS | VOLT_STRAT_OVERLAP_REDUCE, PAR(&volt__ddp_ops), PAR(volt__parallel_create) },
    { "deepspeed_stage_1", { "zero1", NULL }, "ZeRO-1: optimizer states sharded; grads reduce-scattered after backward",
      F_ZERO, PAR(&volt__zero_ops), PAR(volt__parallel_create) },
    { "deepspeed_stage_2", { "zero2", NULL }, "ZeRO-2: + grads reduce-scattered during backward, non-owned grads freed",
      F_ZERO | VOLT_STRAT_SHARDS_GRADS | VOLT_STRAT_OVERLAP_REDUCE, PAR(&volt__zero_ops), PAR(volt__parallel_create) },
    { "fsdp", { NULL }, "FULL_SHARD (ZeRO-3): + params sharded, gathered per unit, freed after its forward",
      F_ZERO | VOLT_STRAT_SHARDS_GRADS | VOLT_STRAT_OVERLAP_REDUCE | VOLT_STRAT_SHARDS_PARAMS | VOLT_STRAT_FREES_AFTER_FORWARD,
      PAR(&volt__fsdp_ops), PAR(volt__parallel_create) },
    { "fsdp_shard_grad_op", { NULL }, "SHARD_GRAD_OP: as fsdp, params stay gathered from forward to the step",
      F_ZERO | VOLT_STRAT_SHARDS_GRADS | VOLT_STRAT_OVERLAP_REDUCE | VOLT_STRAT_SHARDS_PARAMS,
      PAR(&volt__fsdp_ops), PAR(volt__parallel_create) },
};
#define N_ROWS ((int)(sizeof k_rows / sizeof k_rows[0]))

int volt__strategy_count(void) { return N_ROWS; }
const volt_strategy_row *volt__strategy_at(int i) { return i >= 0 && i < N_ROWS ? &k_rows[i] : NULL; }

const volt_strategy_row *volt__strategy_find(const char *name) {
    if (!name) name = "single";
    for (int i = 0; i < N_ROWS; i++) {
        if (!strcmp(name, k_rows[i].name)) return &k_rows[i];
        for (int a = 0; k_rows[i].aliases[a]; a++)
            if (!strcmp(name, k_rows[i].aliases[a])) return &k_rows[i];
    }
    return NULL;
}

/* Lightning's strategy="auto": ddp when the job has several processes (devices or num_nodes
 * above 1, or a launcher started several), else single. */
const char *volt__strategy_resolve(const char *name, int devices, int num_nodes) {
    if (!name || strcmp(name, "auto")) return name;
    return devices > 1 || num_nodes > 1 || volt__comm_launched_size() > 1 ? "ddp" : "single";
}

/* "auto", then every row's name and aliases into buf, split by sep, each alias as alias_fmt. */
static void list_rows(char *buf, size_t len, const char *sep, const char *alias_fmt) {
    size_t n = (size_t)snprintf(buf, len, "auto");
    for (int i = 0; i < N_ROWS && n < len; i++) {
        n += (size_t)snprintf(buf + n, len - n, "%s%s", sep, k_rows[i].name);
        for (int a = 0; k_rows[i].aliases[a] && n < len; a++)
            n += (size_t)snprintf(buf + n, len - n, alias_fmt, k_rows[i].aliases[a]);
    }
}

/* Built from the rows on first use; rows are constant, so the text is too. */
const char *volt__strategy_names(void) {
    static char buf[512];
    if (!buf[0]) list_rows(buf, sizeof buf, ", ", " (%s)");
    return buf;
}

const char *volt__strategy_choices(void) {
    static char buf[512];
    if (!buf[0]) list_rows(buf, sizeof buf, "|", "|%s");
    return buf;
}

static void multi_names(char *buf, size_t len) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < N_ROWS && n < len; i++)
        if (k_rows[i].flags & VOLT_STRAT_MULTI_PROCESS)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", k_rows[i].name);
}

/* The checks of the settings alone (no comm made): volt__strategy_create's first step, and
 * volt_trainer_config_check's. */
volt_status volt__strategy_config_check(const volt_strategy_config *cfg, char *err, size_t errlen) {
    const char *n = volt__strategy_resolve(cfg->name ? cfg->name : "single", cfg->devices, cfg->num_nodes);
    const volt_strategy_row *row = volt__strategy_find(n);
    if (!row) {
        snprintf(err, errlen, "unknown strategy '%s' (valid: %s)", n, volt__strategy_names());
        return VOLT_ERR_UNSUPPORTED;
    }
    if (!(row->flags & VOLT_STRAT_MULTI_PROCESS) && (cfg->devices > 1 || cfg->num_nodes > 1)) {
        char m[256];
        multi_names(m, sizeof m);
        snprintf(err, errlen, "strategy '%s' runs on one device; devices=%d num_nodes=%d needs one of: %s",
                 row->name, cfg->devices, cfg->num_nodes, m);
        return VOLT_ERR_INVALID_ARG;
    }
    if (!(row->flags & VOLT_STRAT_MULTI_PROCESS)) {   /* a setting that would do nothing is refused */
        const bool rd = cfg->reduce_dtype && strcmp(cfg->reduce_dtype, "fp32");
        const bool cm = cfg->comm && strcmp(cfg->comm, "auto");
        if (rd || cm) {
            char m[256];
            multi_names(m, sizeof m);
            snprintf(err, errlen, "strategy '%s' does not communicate: %s=\"%s\" needs one of: %s", row->name,
                     rd ? "strategy_reduce_dtype" : "strategy_comm", rd ? cfg->reduce_dtype : cfg->comm, m);
            return VOLT_ERR_INVALID_ARG;
        }
    }
    if (!row->ops) {
        snprintf(err, errlen, "strategy '%s' is not available in this build (multi-process strategies need MPI)", n);
        return VOLT_ERR_UNSUPPORTED;
    }
    if (!VOLT_VERSION_OK(row->ops->version, VOLT_STRATEGY_OPS_VERSION)) {
        snprintf(err, errlen, "volt_strategy_ops '%s': version %u, this library knows 1..%u", row->name,
                 row->ops->version, VOLT_STRATEGY_OPS_VERSION);
        return VOLT_ERR_VERSION;
    }
    const volt_strategy_ops *o = row->ops;
    if (o->version < 10u && (o->all_reduce_mean || o->broadcast || o->barrier)) {   /* the signatures before `what` */
        snprintf(err, errlen, "volt_strategy_ops '%s': version %u sets all_reduce_mean / broadcast / barrier, whose "
                 "signatures changed in version 10 (they take the call site's name)", row->name, o->version);
        return VOLT_ERR_VERSION;
    }
    return VOLT_OK;
}

volt_status volt__strategy_create(const volt_strategy_config *cfg, volt_strategy **out, char *err, size_t errlen) {
    *out = NULL;
    VOLT_TRY(volt__strategy_config_check(cfg, err, errlen));
    const volt_strategy_row *row = volt__strategy_find(volt__strategy_resolve(cfg->name ? cfg->name : "single",
                                                                              cfg->devices, cfg->num_nodes));
    volt_strategy *st = calloc(1, sizeof *st);
    if (!st) return VOLT_ERR_NOMEM;
    st->ops = row->ops;
    st->row = row;
    st->rank = 0;
    st->world = 1;
    if (row->create) {
        volt_status s = row->create(st, cfg, err, errlen);
        if (s < 0) { free(st); return s; }
    }
    *out = st;
    return VOLT_OK;
}

void volt__strategy_set_precision(volt_strategy *st, volt_precision *prec) {
    if (st->prec != prec) volt__precision_destroy(st->prec);
    st->prec = prec;
}

void volt__strategy_destroy(volt_strategy *st) {
    if (!st) return;
    if (st->ops->destroy) st->ops->destroy(st);
    volt__precision_destroy(st->prec);
    free(st);
}
