/* Shared layer plumbing: parameter names from a prefix, units, PyTorch's default inits,
 * activations by kind. */
#include <math.h>
#include <string.h>
#include "nn/util.h"
#include "core/init.h"

volt_status volt__nn_name(volt_params *ps, char out[VOLT__NN_NAME], const char *prefix, const char *leaf) {
    if (!prefix) prefix = "";
    int n = *prefix ? snprintf(out, VOLT__NN_NAME, "%s.%s", prefix, leaf) : snprintf(out, VOLT__NN_NAME, "%s", leaf);
    if (n < 0 || n >= VOLT__NN_NAME)
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: name '%s.%s' longer than %d bytes", prefix, leaf,
                                VOLT__NN_NAME - 1);
    return VOLT_OK;
}

volt_status volt__nn_check_version(volt_params *ps, const char *kind, const char *cfg, const char *prefix, unsigned got,
                                   unsigned want) {
    if (VOLT_VERSION_OK(got, want)) return VOLT_OK;
    return volt_params_fail(ps, VOLT_ERR_VERSION, "nn: %s '%s': config version %u, expected 1..%u (use volt_nn_%s_config_init)",
                            kind, prefix ? prefix : "", got, want, cfg);
}

volt_status volt__nn_check_init(volt_params *ps, const char *kind, const char *prefix, volt_nn_init_scheme init, float std) {
    if ((int)init >= 0 && init <= VOLT_NN_INIT_CUSTOM && std >= 0.f && isfinite(std)) return VOLT_OK;
    return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: %s '%s': bad init scheme %d or std %g", kind, prefix ? prefix : "",
                            (int)init, std);
}

volt_status volt__nn_check_param(volt_params *ps, const char *kind, const char *prefix, const char *leaf, volt_shape shape,
                                 volt_init init) {
    char why[160], b[128];
    const int64_t n = volt_shape_numel(shape);
    if (n < 0 || n > INT64_MAX / 16 - VOLT_PARAM_ALIGN)   /* volt_param_new's bound */
        return volt_params_fail(ps, VOLT_ERR_SHAPE, "nn: %s '%s': %s %s has too many elements", kind, prefix ? prefix : "",
                                leaf, volt_shape_str(shape, b, sizeof b));
    if (volt__init_check(init, why, sizeof why) < 0)
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: %s '%s': %s init: %s", kind, prefix ? prefix : "", leaf, why);
    return VOLT_OK;
}

volt_status volt__nn_unit(volt_params *ps, volt_nn_unit_mode mode, const char *prefix) {
    if (mode == VOLT_NN_UNIT_JOIN) return VOLT_OK;
    if (mode != VOLT_NN_UNIT_OWN)
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: '%s': unit mode %d is not OWN or JOIN", prefix, (int)mode);
    if (!prefix || !*prefix)
        return volt_params_fail(ps, VOLT_ERR_INVALID_ARG, "nn: a layer with its own unit needs a non-empty prefix");
    return volt_params_unit(ps, prefix);
}

volt_status volt__nn_param(volt_params *ps, const char *prefix, const char *leaf, volt_shape shape,
                           volt_init init, volt_tensor **out) {
    char name[VOLT__NN_NAME];
    VOLT_TRY(volt__nn_name(ps, name, prefix, leaf));
    return volt_param_new(ps, name, shape, init, out);
}

void volt__nn_fc_inits(volt_nn_init_scheme scheme, float std, volt_init wcustom, volt_init bcustom,
                       int64_t fan_in, volt_init *w, volt_init *b) {
    if (scheme == VOLT_NN_INIT_NORMAL) {
        *w = VOLT_INIT_NORMAL(0.f, std);
        *b = VOLT_INIT_ZEROS;
    } else if (scheme == VOLT_NN_INIT_CUSTOM) {
        *w = wcustom;
        *b = bcustom;
    } else {                      /* nn.Linear.reset_parameters / nn.Conv2d: bound 1/sqrt(fan_in) */
        float bound = 1.f / sqrtf((float)fan_in);
        *w = VOLT_INIT_TORCH_LINEAR;
        *b = VOLT_INIT_UNIFORM(-bound, bound);
    }
}

volt_tensor *volt__nn_undeclared(volt_step *s, const char *what) {
    volt_step_fail(s, VOLT_ERR_STATE, "nn: %s layer is NULL or not declared (call its _declare in setup)", what);
    return NULL;
}

volt_tensor *volt_nn_activation(volt_step *s, volt_nn_act act, volt_tensor *x) {
    switch (act) {
    case VOLT_NN_RELU: return volt_relu(s, x);
    case VOLT_NN_GELU: return volt_gelu(s, x);
    case VOLT_NN_GELU_TANH: return volt_gelu_tanh(s, x);
    case VOLT_NN_TANH: return volt_tanh(s, x);
    case VOLT_NN_IDENTITY: return x;
    }
    volt_step_fail(s, VOLT_ERR_INVALID_ARG, "nn: unknown activation %d", (int)act);
    return NULL;
}

volt_tensor *volt_nn_dropout_forward(volt_step *s, const volt_nn_dropout *d, volt_tensor *x) {
    if (!d) return volt__nn_undeclared(s, "dropout");
    return volt_dropout(s, x, d->p);
}

volt_tensor *volt_nn_max_pool2d_forward(volt_step *s, const volt_nn_max_pool2d *p, volt_tensor *x) {
    if (!p) return volt__nn_undeclared(s, "max_pool2d");
    return volt_max_pool2d(s, x, p->kernel, p->stride);
}
