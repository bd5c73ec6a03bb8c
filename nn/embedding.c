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
    if (!VOLT_VERSION_OK(cfg->version, VOLT_NN_EMBEDDING_CONFIG_VERSION))
        return volt_params_fail(ps, VOLT_ERR_VERSION, "nn: embedding '%s': config version %u, expected %u", prefix,
                                cfg->version, VOLT_NN_EMBEDDING_CONFIG_VERSION);
    if (num <= 0 || dim <= 0 || cfg->padding_idx < -1 || cfg->padding_idx >= num)
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG,
                                "nn: embedding '%s': needs num > 0, dim > 0 and padding_idx in -1..num-1, got %lld, %lld, %lld",
                                prefix, (long long)num, (long long)dim, (long long)cfg->padding_idx);
    if ((int)cfg->init < 0 || cfg->init > VOLT_NN_INIT_CUSTOM || !(cfg->std >= 0.f && isfinite(cfg->std)))
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: embedding '%s': bad init scheme %d or std %g", prefix,
                                (int)cfg->init, cfg->std);
    volt_init wi = cfg->init == VOLT_NN_INIT_NORMAL ? VOLT_INIT_NORMAL(0.f, cfg->std)
                 : cfg->init == VOLT_NN_INIT_CUSTOM ? cfg->weight_init : VOLT_INIT_NORMAL(0.f, 1.f);
    VOLT_TRY(volt__nn_unit(ps, cfg->unit, prefix));
    VOLT_TRY(volt__nn_param(ps, prefix, "weight", VOLT_SHAPE(num, dim), wi, &e->weight));
    if (cfg->padding_idx >= 0) VOLT_TRY(volt_param_set_init_zero_row(ps, e->weight, cfg->padding_idx));
    e->num = num;
    e->dim = dim;
    e->padding_idx = cfg->padding_idx;
    return VOLT_OK;
}

static int64_t id_at(const volt_tensor *ids, int64_t i) {
    return ids->dtype == VOLT_I32 ? ((const int32_t *)ids->data)[i] : ((const int64_t *)ids->data)[i];
}

/* Row r of the table as f32 (the store may hold 16-bit values: bf16-true / 16-true). */
static void row_f32(const volt_tensor *w, int64_t r, float *out) {
    int64_t D = w->shape.d[1];
    if (w->dtype == VOLT_F32) {
        memcpy(out, volt_tensor_f32(w) + r * D, sizeof(float) * (size_t)D);
        return;
    }
    const uint16_t *h = (const uint16_t *)w->data + r * D;
    for (int64_t j = 0; j < D; j++) {
        uint32_t bits;
        if (w->dtype == VOLT_BF16) {
            bits = (uint32_t)h[j] << 16;
            memcpy(&out[j], &bits, sizeof bits);
        } else {                                  /* f16 */
            uint32_t sgn = (h[j] >> 15) & 1u, ex = (h[j] >> 10) & 31u, man = h[j] & 1023u;
            float v = ex == 0 ? ldexpf((float)man, -24) : ex == 31 ? (man ? NAN : INFINITY)
                              : ldexpf((float)(man | 1024u), (int)ex - 25);
            out[j] = sgn ? -v : v;
        }
    }
}

/* nn.Embedding(padding_idx=pad): positions holding the pad id send no gradient to the pad
 * row. Values are unchanged: we * keep + rows, keep = 0 and rows = W[pad] there. we
 * (..., D). Only in a training step, and only when a pad id occurs. */
static volt_tensor *block_pad_grad(volt_step *s, const volt_nn_embedding *e, volt_tensor *ids, volt_tensor *we) {
    int64_t pad = e->padding_idx, N = volt_tensor_numel(ids), D = e->dim;
    if (!we || pad < 0 || !volt_step_training(s) || !(e->weight->flags & VOLT_TENSOR_REQUIRES_GRAD)) return we;
    bool any = false;
    for (int64_t i = 0; i < N && !any; i++) any = id_at(ids, i) == pad;
    if (!any) return we;
    volt_tensor *keep = volt_tensor_new(s, VOLT_F32, we->shape);
    volt_tensor *rows = volt_tensor_new(s, VOLT_F32, we->shape);   /* zero-filled */
    if (!keep || !rows) return NULL;
    float *k = volt_tensor_f32(keep), *r = volt_tensor_f32(rows);
    int64_t first = -1;
    for (int64_t i = 0; i < N; i++) {
        if (id_at(ids, i) != pad) {
            for (int64_t j = 0; j < D; j++) k[i * D + j] = 1.f;
        } else if (first < 0) {
            row_f32(e->weight, pad, r + i * D);
            first = i;
        } else {
            memcpy(r + i * D, r + first * D, sizeof(float) * (size_t)D);
        }
    }
    return volt_add(s, volt_mul(s, we, keep), rows);
}

volt_tensor *volt_nn_embedding_forward(volt_step *s, const volt_nn_embedding *e, volt_tensor *ids) {
    if (!e || !e->weight) return volt__nn_undeclared(s, "embedding");
    return block_pad_grad(s, e, ids, volt_embedding(s, ids, e->weight));
}
