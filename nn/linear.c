/* nn.Linear: x (..., in) · weight(out, in)^T + bias(out). */
#include <math.h>
#include <string.h>
#include "nn/util.h"

void volt_nn_linear_config_init(volt_nn_linear_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_NN_LINEAR_CONFIG_VERSION;
    cfg->bias = true;
    cfg->unit = VOLT_NN_UNIT_OWN;
    cfg->init = VOLT_NN_INIT_TORCH;
    cfg->std = 0.02f;
}

volt_status volt_nn_linear_declare(volt_params *ps, const char *prefix, int64_t in, int64_t out,
                                   volt_nn_linear *l) {
    volt_nn_linear_config cfg;
    volt_nn_linear_config_init(&cfg);
    return volt_nn_linear_declare_ex(ps, prefix, in, out, &cfg, l);
}

volt_status volt_nn_linear_declare_ex(volt_params *ps, const char *prefix, int64_t in, int64_t out,
                                      const volt_nn_linear_config *cfg, volt_nn_linear *l) {
    if (!ps || !cfg || !l) return VOLT_ERR_INVALID_ARG;
    memset(l, 0, sizeof *l);
    if (!prefix) prefix = "";
    VOLT_TRY(volt__nn_check_version(ps, "linear", "linear", prefix, cfg->version, VOLT_NN_LINEAR_CONFIG_VERSION));
    if (in <= 0 || out <= 0)
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: linear '%s': in and out features must be > 0, got %lld, %lld",
                                prefix, (long long)in, (long long)out);
    VOLT_TRY(volt__nn_check_init(ps, "linear", prefix, cfg->init, cfg->std));
    volt_init wi, bi;
    volt__nn_fc_inits(cfg->init, cfg->std, cfg->weight_init, cfg->bias_init, in, &wi, &bi);
    VOLT_TRY(volt__nn_check_param(ps, "linear", prefix, "weight", VOLT_SHAPE(out, in), wi));
    if (cfg->bias) VOLT_TRY(volt__nn_check_param(ps, "linear", prefix, "bias", VOLT_SHAPE(out), bi));
    VOLT_TRY(volt__nn_unit(ps, cfg->unit, prefix));
    VOLT_TRY(volt__nn_param(ps, prefix, "weight", VOLT_SHAPE(out, in), wi, &l->weight));
    if (cfg->bias) VOLT_TRY(volt__nn_param(ps, prefix, "bias", VOLT_SHAPE(out), bi, &l->bias));
    l->in = in;
    l->out = out;
    return VOLT_OK;
}

volt_tensor *volt_nn_linear_forward(volt_step *s, const volt_nn_linear *l, volt_tensor *x) {
    if (!l || !l->weight) return volt__nn_undeclared(s, "linear");
    return volt_linear(s, x, l->weight, l->bias);
}
