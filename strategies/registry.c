/* Strategy names -> constructors. Distributed strategies exist when built with MPI. */
#include <stdio.h>
#include <string.h>
#include "strategies/strategy.h"

#define VALID_SINGLE "single"
#define VALID_DIST "ddp, deepspeed_stage_1 (zero1), deepspeed_stage_2 (zero2), fsdp, fsdp_shard_grad_op"

#ifdef VOLT_HAVE_MPI
/* strategies/dist/ (built only with MPI) */
volt_status volt__strategy_create_distributed(const volt_strategy_config *cfg, volt_strategy **out, char *err, size_t errlen);
#endif

volt_status volt__strategy_create(const volt_strategy_config *cfg, volt_strategy **out, char *err, size_t errlen) {
    *out = NULL;
    const char *n = cfg->name ? cfg->name : "single";
    if (!strcmp(n, "single") || !strcmp(n, "auto")) {
        if (cfg->devices > 1 || cfg->num_nodes > 1) {
            snprintf(err, errlen, "strategy 'single' runs on one device; devices=%d num_nodes=%d needs one of: %s",
                     cfg->devices, cfg->num_nodes, VALID_DIST);
            return VOLT_ERR_INVALID_ARG;
        }
        return volt__strategy_single(out);
    }
    static const char *const dist[] = { "ddp", "deepspeed_stage_1", "zero1", "deepspeed_stage_2", "zero2",
                                        "fsdp", "fsdp_shard_grad_op", NULL };
    for (int i = 0; dist[i]; i++)
        if (!strcmp(n, dist[i])) {
#ifdef VOLT_HAVE_MPI
            return volt__strategy_create_distributed(cfg, out, err, errlen);
#endif
            snprintf(err, errlen, "strategy '%s' is not available in this build (distributed strategies need MPI)", n);
            return VOLT_ERR_UNSUPPORTED;
        }
    snprintf(err, errlen, "unknown strategy '%s' (valid: %s, %s)", n, VALID_SINGLE, VALID_DIST);
    return VOLT_ERR_UNSUPPORTED;
}
