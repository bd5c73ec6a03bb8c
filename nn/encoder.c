/* Transformer encoder layers: post-LN (BERT / DistilBERT) and pre-LN (GPT-2). x (B, T, D). */
#include <math.h>
#include <string.h>
#include "nn/util.h"

void volt_nn_encoder_config_init(volt_nn_encoder_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = VOLT_NN_ENCODER_CONFIG_VERSION;
    cfg->n_heads = 1;
    cfg->dropout = 0.1f;
    cfg->attention_dropout = 0.1f;
    cfg->attn_out_dropout = false;
    cfg->activation = VOLT_NN_GELU;
    cfg->ln_eps = 1e-5f;
    cfg->unit = VOLT_NN_UNIT_OWN;
    cfg->init = VOLT_NN_INIT_TORCH;
    cfg->std = 0.02f;
    cfg->attn_name = "attention";
    cfg->q_name = "q_lin";
    cfg->k_name = "k_lin";
    cfg->v_name = "v_lin";
    cfg->out_name = "out_lin";
    cfg->norm1_name = "sa_layer_norm";
    cfg->ffn1_name = "ffn.lin1";
    cfg->ffn2_name = "ffn.lin2";
    cfg->norm2_name = "output_layer_norm";
}

void volt_nn_encoder_config_init_gpt(volt_nn_encoder_config *cfg) {
    volt_nn_encoder_config_init(cfg);
    cfg->norm_first = true;
    cfg->causal = true;
    cfg->attn_out_dropout = true;
    cfg->activation = VOLT_NN_GELU_TANH;
    cfg->attn_name = "attn";
    cfg->q_name = "q_proj";
    cfg->k_name = "k_proj";
    cfg->v_name = "v_proj";
    cfg->out_name = "c_proj";
    cfg->norm1_name = "ln_1";
    cfg->ffn1_name = "mlp.c_fc";
    cfg->ffn2_name = "mlp.c_proj";
    cfg->norm2_name = "ln_2";
}

volt_status volt_nn_encoder_declare(volt_params *ps, const char *prefix, int64_t dim, const volt_nn_encoder_config *cfg,
                                    volt_nn_encoder_layer *e) {
    if (!ps || !cfg || !e) return VOLT_ERR_INVALID_ARG;
    memset(e, 0, sizeof *e);
    if (!prefix) prefix = "";
    VOLT_TRY(volt__nn_check_version(ps, "encoder", "encoder", prefix, cfg->version, VOLT_NN_ENCODER_CONFIG_VERSION));
    int64_t F = cfg->ffn_dim ? cfg->ffn_dim : dim > 0 && dim <= INT64_MAX / 4 ? 4 * dim : -1;
    if (F <= 0 || !(cfg->dropout >= 0.f && cfg->dropout < 1.f) || (int)cfg->activation < 0 ||
        cfg->activation > VOLT_NN_IDENTITY || !cfg->norm1_name || !cfg->ffn1_name || !cfg->ffn2_name ||
        !cfg->norm2_name || !cfg->attn_name)
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG,
                                "nn: encoder '%s': needs ffn_dim > 0, dropout in [0, 1), a known activation and all "
                                "names (ffn_dim %lld, dropout %g, activation %d)", prefix, (long long)F, cfg->dropout,
                                (int)cfg->activation);
    volt_nn_mha_config ac;
    volt_nn_mha_config_init(&ac);
    ac.n_heads = cfg->n_heads;
    ac.dropout = cfg->attention_dropout;
    ac.causal = cfg->causal;
    ac.unit = VOLT_NN_UNIT_JOIN;
    ac.init = cfg->init;
    ac.std = cfg->std;
    ac.q_name = cfg->q_name;
    ac.k_name = cfg->k_name;
    ac.v_name = cfg->v_name;
    ac.out_name = cfg->out_name;
    volt_nn_layernorm_config nc;
    volt_nn_layernorm_config_init(&nc);
    nc.eps = cfg->ln_eps;
    nc.unit = VOLT_NN_UNIT_JOIN;
    volt_nn_linear_config lc;
    volt_nn_linear_config_init(&lc);
    lc.unit = VOLT_NN_UNIT_JOIN;
    lc.init = cfg->init;
    lc.std = cfg->std;
    char n[VOLT__NN_NAME];
    /* what the sub-layers' declares check, before the unit opens: a refused declare leaves no
     * unit behind, so a corrected retry does not meet "duplicate unit" */
    if (dim <= 0 || cfg->n_heads <= 0 || dim % cfg->n_heads != 0 ||
        !(cfg->attention_dropout >= 0.f && cfg->attention_dropout < 1.f) || !(cfg->ln_eps > 0.f && isfinite(cfg->ln_eps)))
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG,
                                "nn: encoder '%s': needs dim > 0 divisible by n_heads > 0, attention_dropout in [0, 1) and "
                                "ln_eps > 0, got dim %lld, %lld heads, attention_dropout %g, ln_eps %g", prefix,
                                (long long)dim, (long long)cfg->n_heads, cfg->attention_dropout, cfg->ln_eps);
    const char *leaves[4] = { cfg->norm1_name, cfg->norm2_name, cfg->ffn1_name, cfg->ffn2_name };
    for (int i = 0; i < 4; i++) {   /* "<prefix>.<layer>.weight" fits */
        char l[VOLT__NN_NAME];
        VOLT_TRY(volt__nn_name(ps, l, prefix, leaves[i]));
        VOLT_TRY(volt__nn_name(ps, n, l, "weight"));
    }
    const char *proj[4] = { cfg->q_name, cfg->k_name, cfg->v_name, cfg->out_name };
    for (int i = 0; i < 4; i++) {   /* "<prefix>.<attn>.<proj>.weight" fits */
        char a[VOLT__NN_NAME], l[VOLT__NN_NAME];
        if (!proj[i] || !*proj[i])
            return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: encoder '%s': attention projection name %d is empty", prefix, i);
        VOLT_TRY(volt__nn_name(ps, a, prefix, cfg->attn_name));
        VOLT_TRY(volt__nn_name(ps, l, a, proj[i]));
        VOLT_TRY(volt__nn_name(ps, n, l, "weight"));
    }
    VOLT_TRY(volt__nn_check_init(ps, "encoder", prefix, cfg->init, cfg->std));
    volt_init wi, bi;
    volt__nn_fc_inits(lc.init, lc.std, lc.weight_init, lc.bias_init, F > dim ? dim : F, &wi, &bi);
    VOLT_TRY(volt__nn_check_param(ps, "encoder", prefix, "ffn weight", VOLT_SHAPE(F, dim), wi));
    VOLT_TRY(volt__nn_unit(ps, cfg->unit, prefix));
    if (cfg->norm_first) {         /* GPT-2's order: ln_1, attn, ln_2, mlp */
        VOLT_TRY(volt__nn_name(ps, n, prefix, cfg->norm1_name));
        VOLT_TRY(volt_nn_layernorm_declare_ex(ps, n, dim, &nc, &e->norm1));
    }
    VOLT_TRY(volt__nn_name(ps, n, prefix, cfg->attn_name));
    VOLT_TRY(volt_nn_mha_declare(ps, n, dim, &ac, &e->attn));
    VOLT_TRY(volt__nn_name(ps, n, prefix, cfg->norm_first ? cfg->norm2_name : cfg->norm1_name));
    VOLT_TRY(volt_nn_layernorm_declare_ex(ps, n, dim, &nc, cfg->norm_first ? &e->norm2 : &e->norm1));
    VOLT_TRY(volt__nn_name(ps, n, prefix, cfg->ffn1_name));
    VOLT_TRY(volt_nn_linear_declare_ex(ps, n, dim, F, &lc, &e->ffn1));
    VOLT_TRY(volt__nn_name(ps, n, prefix, cfg->ffn2_name));
    VOLT_TRY(volt_nn_linear_declare_ex(ps, n, F, dim, &lc, &e->ffn2));
    if (!cfg->norm_first) {        /* DistilBERT's order: attention, sa_layer_norm, ffn, output_layer_norm */
        VOLT_TRY(volt__nn_name(ps, n, prefix, cfg->norm2_name));
        VOLT_TRY(volt_nn_layernorm_declare_ex(ps, n, dim, &nc, &e->norm2));
    }
    e->act = cfg->activation;
    e->dropout = cfg->dropout;
    e->norm_first = cfg->norm_first;
    e->attn_out_dropout = cfg->attn_out_dropout;
    return VOLT_OK;
}

volt_tensor *volt_nn_encoder_forward(volt_step *s, const volt_nn_encoder_layer *e, volt_tensor *x, volt_tensor *key_mask) {
    if (!e || !e->ffn1.weight) return volt__nn_undeclared(s, "encoder");
    /* every temporary is released once its last op is recorded: the tape keeps what a
     * backward reads (a layernorm's input, the activation's input, ...), the rest of the
     * memory is reused by the next ops (volt_tensor_release) */
    if (e->norm_first) {
        volt_tensor *n1 = volt_nn_layernorm_forward(s, &e->norm1, x);
        volt_tensor *a = volt_nn_mha_forward(s, &e->attn, n1, key_mask), *ad = a;
        volt__nn_done(s, n1, NULL, x);
        if (e->attn_out_dropout) ad = volt_dropout(s, a, e->dropout);
        volt__nn_done(s, a, ad, x);
        volt_tensor *x2 = volt_add(s, x, ad);
        volt__nn_done(s, ad, NULL, x);
        volt_tensor *n2 = volt_nn_layernorm_forward(s, &e->norm2, x2);
        volt_tensor *h = volt_nn_linear_forward(s, &e->ffn1, n2);
        volt__nn_done(s, n2, NULL, x);
        volt_tensor *f = volt_nn_activation(s, e->act, h);
        volt__nn_done(s, h, f, x);
        volt_tensor *g = volt_nn_linear_forward(s, &e->ffn2, f);
        volt__nn_done(s, f, NULL, x);
        volt_tensor *gd = volt_dropout(s, g, e->dropout);                                   // (B, T, D)
        volt__nn_done(s, g, gd, x);
        volt_tensor *y = volt_add(s, x2, gd);
        volt__nn_done(s, x2, NULL, x);
        volt__nn_done(s, gd, NULL, x);
        return y;
    }
    volt_tensor *a = volt_nn_mha_forward(s, &e->attn, x, key_mask), *ad = a;           // (B, T, D)
    if (e->attn_out_dropout) ad = volt_dropout(s, a, e->dropout);
    volt__nn_done(s, a, ad, x);
    volt_tensor *s1 = volt_add(s, ad, x);
    volt__nn_done(s, ad, NULL, x);
    volt_tensor *x1 = volt_nn_layernorm_forward(s, &e->norm1, s1);
    volt__nn_done(s, s1, NULL, x);
    volt_tensor *h = volt_nn_linear_forward(s, &e->ffn1, x1);                            // (B, T, F)
    volt_tensor *f = volt_nn_activation(s, e->act, h);
    volt__nn_done(s, h, f, x);
    volt_tensor *g = volt_nn_linear_forward(s, &e->ffn2, f);                             // (B, T, D)
    volt__nn_done(s, f, NULL, x);
    volt_tensor *gd = volt_dropout(s, g, e->dropout);
    volt__nn_done(s, g, gd, x);
    volt_tensor *s2 = volt_add(s, gd, x1);
    volt__nn_done(s, gd, NULL, x);
    volt__nn_done(s, x1, NULL, x);
    volt_tensor *y = volt_nn_layernorm_forward(s, &e->norm2, s2);
    volt__nn_done(s, s2, NULL, x);
    return y;
}
