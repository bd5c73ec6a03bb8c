/* Multi-head attention: q/k/v/out projections around scaled dot-product attention.
 * Shapes: B batch, Tq/Tk query/key tokens, D dim, H heads, dh = D / H. */
#include <math.h>
#include <string.h>
#include "nn/util.h"


void volt_nn_mha_config_init(volt_nn_mha_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_NN_MHA_CONFIG_VERSION;
    cfg->n_heads = 1;
    cfg->bias = true;
    cfg->unit = VOLT_NN_UNIT_OWN;
    cfg->init = VOLT_NN_INIT_TORCH;
    cfg->std = 0.02f;
    cfg->q_name = "q_proj";
    cfg->k_name = "k_proj";
    cfg->v_name = "v_proj";
    cfg->out_name = "out_proj";
}

volt_status volt_nn_mha_declare(volt_params *ps, const char *prefix, int64_t dim, const volt_nn_mha_config *cfg,
                                volt_nn_mha *a) {
    if (!ps || !cfg || !a) return VOLT_ERR_INVALID_ARG;
    memset(a, 0, sizeof *a);
    if (!prefix) prefix = "";
    VOLT_TRY(volt__nn_check_version(ps, "attention", "mha", prefix, cfg->version, VOLT_NN_MHA_CONFIG_VERSION));
    if (dim <= 0 || cfg->n_heads <= 0 || dim % cfg->n_heads != 0 || !(cfg->dropout >= 0.f && cfg->dropout < 1.f))
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG,
                                "nn: attention '%s': needs dim > 0 divisible by n_heads > 0 and dropout in [0, 1), "
                                "got dim %lld, %lld heads, dropout %g", prefix, (long long)dim,
                                (long long)cfg->n_heads, cfg->dropout);
    const char *names[4] = { cfg->q_name, cfg->k_name, cfg->v_name, cfg->out_name };
    volt_nn_linear *lins[4] = { &a->q, &a->k, &a->v, &a->out };
    volt_nn_linear_config lc;
    volt_nn_linear_config_init(&lc);
    lc.bias = cfg->bias;
    lc.unit = VOLT_NN_UNIT_JOIN;
    lc.init = cfg->init;
    lc.std = cfg->std;
    /* everything the projections' declares check, before the unit opens (a refused declare
     * leaves no unit behind) */
    char name[VOLT__NN_NAME];
    for (int i = 0; i < 4; i++) {
        if (!names[i] || !*names[i])
            return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: attention '%s': projection name %d is empty", prefix, i);
        VOLT_TRY(volt__nn_name(ps, name, prefix, names[i]));
    }
    VOLT_TRY(volt__nn_check_init(ps, "attention", prefix, cfg->init, cfg->std));
    volt_init wi, bi;
    volt__nn_fc_inits(lc.init, lc.std, lc.weight_init, lc.bias_init, dim, &wi, &bi);
    VOLT_TRY(volt__nn_check_param(ps, "attention", prefix, "projection weight", VOLT_SHAPE(dim, dim), wi));
    VOLT_TRY(volt__nn_unit(ps, cfg->unit, prefix));
    for (int i = 0; i < 4; i++) {
        VOLT_TRY(volt__nn_name(ps, name, prefix, names[i]));
        VOLT_TRY(volt_nn_linear_declare_ex(ps, name, dim, dim, &lc, lins[i]));
    }
    a->dim = dim;
    a->n_heads = cfg->n_heads;
    a->dropout = cfg->dropout;
    a->causal = cfg->causal;
    return VOLT_OK;
}

volt_tensor *volt_nn_mha_cross(volt_step *s, const volt_nn_mha *a, volt_tensor *xq, volt_tensor *xkv,
                               volt_tensor *key_mask) {
    if (!a || !a->q.weight) return volt__nn_undeclared(s, "attention");
    if (!xq || !xkv) return volt_linear(s, xq ? xkv : xq, a->q.weight, NULL);   /* records the NULL input */
    int64_t D = a->dim, H = a->n_heads;
    if (xq->shape.ndim != 3 || xkv->shape.ndim != 3 || xq->shape.d[2] != D || xkv->shape.d[2] != D ||
        xq->shape.d[0] != xkv->shape.d[0]) {
        char sa[64], sb[64];
        volt_step_fail(s, VOLT_ERR_SHAPE, "nn: attention: inputs must be (B, T, %lld), got %s and %s", (long long)D,
                       volt_shape_str(xq->shape, sa, sizeof sa), volt_shape_str(xkv->shape, sb, sizeof sb));
        return NULL;
    }
    int64_t B = xq->shape.d[0], Tk = xkv->shape.d[1];
    if (key_mask && (key_mask->shape.ndim != 2 || key_mask->shape.d[0] != B || key_mask->shape.d[1] != Tk ||
                     (key_mask->dtype != VOLT_U8 && key_mask->dtype != VOLT_I32 && key_mask->dtype != VOLT_I64))) {
        char sm[64];
        volt_step_fail(s, VOLT_ERR_SHAPE, "nn: attention: key_mask must be u8/i32/i64 (%lld, %lld), got %s %s",
                       (long long)B, (long long)Tk, volt_dtype_name(key_mask->dtype),
                       volt_shape_str(key_mask->shape, sm, sizeof sm));
        return NULL;
    }
    /* q (B, Tq, D), k and v (B, Tk, D): the heads side by side in each row, read in place by
     * the attention (no split/merge copies) */
    volt_tensor *q = volt_nn_linear_forward(s, &a->q, xq), *k = volt_nn_linear_forward(s, &a->k, xkv);
    volt_tensor *v = volt_nn_linear_forward(s, &a->v, xkv);
    volt_tensor *ctx = volt_attention_heads(s, q, k, v, H, key_mask, a->causal, a->dropout);   // (B, Tq, D)
    /* the tape keeps q, k, v for the attention's backward; the layer is done with them */
    volt__nn_done(s, q, NULL, xq);
    volt__nn_done(s, k, NULL, xkv);
    volt__nn_done(s, v, NULL, xkv);
    volt_tensor *y = volt_nn_linear_forward(s, &a->out, ctx);
    volt__nn_done(s, ctx, NULL, xq);
    return y;
}

volt_tensor *volt_nn_mha_forward(volt_step *s, const volt_nn_mha *a, volt_tensor *x, volt_tensor *key_mask) {
    return volt_nn_mha_cross(s, a, x, x, key_mask);
}
