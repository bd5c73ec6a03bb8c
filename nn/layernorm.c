/* nn.LayerNorm over the last dim: weight 1, bias 0. */
#include <math.h>
#include <string.h>
#include "nn/util.h"

void volt_nn_layernorm_config_init(volt_nn_layernorm_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_NN_LAYERNORM_CONFIG_VERSION;
    cfg->eps = 1e-5f;
    cfg->affine = true;
    cfg->unit = VOLT_NN_UNIT_OWN;
}

volt_status volt_nn_layernorm_declare(volt_params *ps, const char *prefix, int64_t dim, volt_nn_layernorm *ln) {
    volt_nn_layernorm_config cfg;
    volt_nn_layernorm_config_init(&cfg);
    return volt_nn_layernorm_declare_ex(ps, prefix, dim, &cfg, ln);
}

volt_status volt_nn_layernorm_declare_ex(volt_params *ps, const char *prefix, int64_t dim,
                                         const volt_nn_layernorm_config *cfg, volt_nn_layernorm *ln) {
    if (!ps || !cfg || !ln) return VOLT_ERR_INVALID_ARG;
    memset(ln, 0, sizeof *ln);
    if (!prefix) prefix = "";
    VOLT_TRY(volt__nn_check_version(ps, "layernorm", "layernorm", prefix, cfg->version, VOLT_NN_LAYERNORM_CONFIG_VERSION));
    if (dim <= 0 || !(cfg->eps > 0.f && isfinite(cfg->eps)))
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: layernorm '%s': dim must be > 0 and eps > 0, got %lld, %g",
                                prefix, (long long)dim, cfg->eps);
    VOLT_TRY(volt__nn_unit(ps, cfg->unit, prefix));
    if (cfg->affine) {
        VOLT_TRY(volt__nn_param(ps, prefix, "weight", VOLT_SHAPE(dim), VOLT_INIT_ONES, &ln->weight));
        VOLT_TRY(volt__nn_param(ps, prefix, "bias", VOLT_SHAPE(dim), VOLT_INIT_ZEROS, &ln->bias));
    }
    ln->dim = dim;
    ln->eps = cfg->eps;
    return VOLT_OK;
}

volt_tensor *volt_nn_layernorm_forward(volt_step *s, const volt_nn_layernorm *ln, volt_tensor *x) {
    if (!ln || ln->dim <= 0) return volt__nn_undeclared(s, "layernorm");
    return volt_layernorm(s, x, ln->weight, ln->bias, ln->eps);
}
