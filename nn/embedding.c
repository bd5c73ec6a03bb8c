/* nn.Embedding: ids (...) -> weight[ids] (..., dim), with padding_idx. */
#include <math.h>
#include <string.h>
#include "nn/util.h"

void volt_nn_embedding_config_init(volt_nn_embedding_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_NN_EMBEDDING_CONFIG_VERSION;
    cfg->padding_idx = -1;
    cfg->unit = VOLT_NN_UNIT_OWN;
    cfg->init = VOLT_NN_INIT_TORCH;
    cfg->std = 0.02f;
}

volt_status volt_nn_embedding_declare(volt_params *ps, const char *prefix, int64_t num, int64_t dim,
                                      volt_nn_embedding *e) {
    volt_nn_embedding_config cfg;
    volt_nn_embedding_config_init(&cfg);
    return volt_nn_embedding_declare_ex(ps, prefix, num, dim, &cfg, e);
}

volt_status volt_nn_embedding_declare_ex(volt_params *ps, const char *prefix, int64_t num, int64_t dim,
                                         const volt_nn_embedding_config *cfg, volt_nn_embedding *e) {
    if (!ps || !cfg || !e) return VOLT_ERR_INVALID_ARG;
    memset(e, 0, sizeof *e);
    if (!prefix) prefix = "";
    VOLT_TRY(volt__nn_check_version(ps, "embedding", "embedding", prefix, cfg->version, VOLT_NN_EMBEDDING_CONFIG_VERSION));
    if (num <= 0 || dim <= 0 || cfg->padding_idx < -1 || cfg->padding_idx >= num)
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG,
                                "nn: embedding '%s': needs num > 0, dim > 0 and padding_idx in -1..num-1, got %lld, %lld, %lld",
                                prefix, (long long)num, (long long)dim, (long long)cfg->padding_idx);
    VOLT_TRY(volt__nn_check_init(ps, "embedding", prefix, cfg->init, cfg->std));
    volt_init wi = cfg->init == VOLT_NN_INIT_NORMAL ? VOLT_INIT_NORMAL(0.f, cfg->std)
                 : cfg->init == VOLT_NN_INIT_CUSTOM ? cfg->weight_init : VOLT_INIT_NORMAL(0.f, 1.f);
    VOLT_TRY(volt__nn_check_param(ps, "embedding", prefix, "weight", VOLT_SHAPE(num, dim), wi));
    VOLT_TRY(volt__nn_unit(ps, cfg->unit, prefix));
    VOLT_TRY(volt__nn_param(ps, prefix, "weight", VOLT_SHAPE(num, dim), wi, &e->weight));
    if (cfg->padding_idx >= 0) VOLT_TRY(volt_param_set_init_zero_row(ps, e->weight, cfg->padding_idx));
    e->num = num;
    e->dim = dim;
    e->padding_idx = cfg->padding_idx;
    return VOLT_OK;
}

volt_tensor *volt_nn_embedding_forward(volt_step *s, const volt_nn_embedding *e, volt_tensor *ids) {
    if (!e || !e->weight) return volt__nn_undeclared(s, "embedding");
    /* padding_idx: positions holding it send no gradient to the pad row (the op skips them) */
    return volt_embedding_padded(s, ids, e->weight, e->padding_idx);
}
