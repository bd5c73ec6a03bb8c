/* The built-in MLP classifier: [fc_i - relu - dropout] x n_hidden - fc_out, written only
 * against the public headers (the steps: models/classifier.h), as a stack of volt/nn.h layers.
 * Layer k (1-based) is nn.Linear "fc<k>": its own unit, "fc<k>.weight" (out, in), "fc<k>.bias"
 * (out). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "volt/models.h"
#include "volt/nn.h"
#include "volt/ops.h"
#include "volt/params.h"
#include "models/classifier.h"

#define MLP_LAYERS (VOLT_MLP_MAX_HIDDEN + 1)

typedef struct mlp {
    volt__clf clf;                             /* first: the shared steps' view (models/classifier.h) */
    volt_mlp_config cfg;
    int n_layers;                              /* n_hidden + 1 */
    int64_t width[MLP_LAYERS + 1];             /* width[0] = in, width[n_layers] = out */
    volt_nn_linear fc[MLP_LAYERS];
    volt_nn_dropout drop;
    volt_nn_seq body;                          /* fc1 relu [dropout] fc2 ... */
} mlp;

void volt_mlp_config_init(volt_mlp_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_MLP_CONFIG_VERSION;
    cfg->in_features = 784;
    cfg->n_hidden = 2;
    cfg->hidden[0] = 256;
    cfg->hidden[1] = 128;
    cfg->out_features = 10;
    cfg->dropout = 0.2f;
    cfg->optimizer = VOLT_OPTIM_ADAM;
    cfg->lr = 1e-3f;
    cfg->weight_decay = 0.f;
    cfg->x_field = "x";
    cfg->y_field = "y";
}

volt_status volt_mlp_create(const volt_mlp_config *cfg, void **self) {
    if (!self) return VOLT_ERR_INVALID_ARG;
    *self = NULL;
    if (!cfg) return VOLT_ERR_INVALID_ARG;
    if (!VOLT_VERSION_OK(cfg->version, VOLT_MLP_CONFIG_VERSION)) return VOLT_ERR_VERSION;
    if (cfg->in_features <= 0 || cfg->out_features <= 0 || cfg->n_hidden < 0 ||
        cfg->n_hidden > VOLT_MLP_MAX_HIDDEN ||
        !volt__clf_settings_ok(cfg->dropout, cfg->optimizer, cfg->lr, cfg->weight_decay, cfg->x_field, cfg->y_field))
        return VOLT_ERR_INVALID_ARG;
    for (int i = 0; i < cfg->n_hidden; i++)
        if (cfg->hidden[i] <= 0) return VOLT_ERR_INVALID_ARG;
    mlp *m = calloc(1, sizeof *m);
    if (!m) return VOLT_ERR_NOMEM;
    m->cfg = *cfg;
    volt__clf_init(&m->clf, "mlp", volt_mlp_forward, cfg->optimizer, cfg->lr, cfg->weight_decay, &m->cfg.x_field,
                   &m->cfg.y_field);
    m->n_layers = cfg->n_hidden + 1;
    m->width[0] = cfg->in_features;
    for (int i = 0; i < cfg->n_hidden; i++) m->width[i + 1] = cfg->hidden[i];
    m->width[m->n_layers] = cfg->out_features;
    *self = m;
    return VOLT_OK;
}

void volt_mlp_destroy(void *self) { free(self); }

static volt_status mlp_setup(void *self, volt_params *ps) {
    mlp *m = self;
    m->body.n = 0;
    m->drop.p = m->cfg.dropout;
    for (int l = 0; l < m->n_layers; l++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", l + 1);
        VOLT_TRY(volt_nn_linear_declare(ps, name, m->width[l], m->width[l + 1], &m->fc[l]));
        VOLT_TRY(volt_nn_seq_add(&m->body, VOLT_NN_LINEAR, &m->fc[l]));
        if (l + 1 == m->n_layers) break;
        VOLT_TRY(volt_nn_seq_add(&m->body, VOLT_NN_ACT_RELU, NULL));
        if (m->cfg.dropout > 0.f) VOLT_TRY(volt_nn_seq_add(&m->body, VOLT_NN_DROPOUT, &m->drop));
    }
    return VOLT_OK;
}

volt_tensor *volt_mlp_forward(void *self, volt_step *s, volt_tensor *x) {
    mlp *m = self;
    if (x && x->shape.ndim != 2) x = volt_reshape(s, x, VOLT_SHAPE(x->shape.d[0], -1));  /* (B, ...) -> (B, in) */
    return volt_nn_seq_forward(s, &m->body, x);                                          // (B, out)
}

const volt_module_ops volt_mlp_ops = {
    .version = VOLT_MODULE_OPS_VERSION,
    .name = "mlp",
    .setup = mlp_setup,
    .configure_optimizers = volt__clf_configure_optimizers,
    .training_step = volt__clf_training_step,
    .validation_step = volt__clf_validation_step,
    .test_step = volt__clf_test_step,
    .predict_step = volt__clf_predict_step,
};
