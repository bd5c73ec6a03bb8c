/* nn.Conv2d: x (N, C, H, W) * weight (O, C, k, k) + bias (O) -> (N, O, OH, OW). */
#include <math.h>
#include <string.h>
#include "nn/util.h"

void volt_nn_conv2d_config_init(volt_nn_conv2d_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_NN_CONV2D_CONFIG_VERSION;
    cfg->stride = 1;
    cfg->padding = 0;
    cfg->bias = true;
    cfg->unit = VOLT_NN_UNIT_OWN;
    cfg->init = VOLT_NN_INIT_TORCH;
    cfg->std = 0.02f;
}

volt_status volt_nn_conv2d_declare(volt_params *ps, const char *prefix, int64_t in_channels, int64_t out_channels,
                                   int kernel, volt_nn_conv2d *c) {
    volt_nn_conv2d_config cfg;
    volt_nn_conv2d_config_init(&cfg);
    return volt_nn_conv2d_declare_ex(ps, prefix, in_channels, out_channels, kernel, &cfg, c);
}

volt_status volt_nn_conv2d_declare_ex(volt_params *ps, const char *prefix, int64_t in_channels, int64_t out_channels,
                                      int kernel, const volt_nn_conv2d_config *cfg, volt_nn_conv2d *c) {
    if (!ps || !cfg || !c) return VOLT_ERR_INVALID_ARG;
    memset(c, 0, sizeof *c);
    if (!prefix) prefix = "";
    VOLT_TRY(volt__nn_check_version(ps, "conv2d", "conv2d", prefix, cfg->version, VOLT_NN_CONV2D_CONFIG_VERSION));
    if (in_channels <= 0 || out_channels <= 0 || kernel <= 0 || cfg->stride <= 0 || cfg->padding < 0 ||
        (int)cfg->init < 0 || cfg->init > VOLT_NN_INIT_CUSTOM || !(cfg->std >= 0.f && isfinite(cfg->std)))
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG,
                                "nn: conv2d '%s': needs channels > 0, kernel > 0, stride > 0, padding >= 0 and a known "
                                "init (got %lld -> %lld, kernel %d, stride %d, padding %d)", prefix,
                                (long long)in_channels, (long long)out_channels, kernel, cfg->stride, cfg->padding);
    volt_init wi, bi;
    volt__nn_fc_inits(cfg->init, cfg->std, cfg->weight_init, cfg->bias_init, in_channels * kernel * kernel, &wi, &bi);
    VOLT_TRY(volt__nn_check_param(ps, "conv2d", prefix, "weight", VOLT_SHAPE(out_channels, in_channels, kernel, kernel), wi));
    if (cfg->bias) VOLT_TRY(volt__nn_check_param(ps, "conv2d", prefix, "bias", VOLT_SHAPE(out_channels), bi));
    VOLT_TRY(volt__nn_unit(ps, cfg->unit, prefix));
    VOLT_TRY(volt__nn_param(ps, prefix, "weight", VOLT_SHAPE(out_channels, in_channels, kernel, kernel), wi, &c->weight));
    if (cfg->bias) VOLT_TRY(volt__nn_param(ps, prefix, "bias", VOLT_SHAPE(out_channels), bi, &c->bias));
    c->in_channels = in_channels;
    c->out_channels = out_channels;
    c->kernel = kernel;
    c->stride = cfg->stride;
    c->padding = cfg->padding;
    return VOLT_OK;
}

volt_tensor *volt_nn_conv2d_forward(volt_step *s, const volt_nn_conv2d *c, volt_tensor *x) {
    if (!c || !c->weight) return volt__nn_undeclared(s, "conv2d");
    return volt_conv2d(s, x, c->weight, c->bias, c->stride, c->padding);
}
