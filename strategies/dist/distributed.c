/* Distributed strategies over MPI: placeholder until ddp/zero/fsdp land. */
#include <stdio.h>
#include "strategies/strategy.h"

volt_status volt_strategy_create_distributed(const volt_strategy_config *cfg, volt_strategy **out, char *err, size_t errlen) {
    *out = NULL;
    snprintf(err, errlen, "strategy '%s' is not implemented yet", cfg->name);
    return VOLT_ERR_UNSUPPORTED;
}
