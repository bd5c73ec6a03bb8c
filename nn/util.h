/* nn/util.h — helpers shared by the layer files (private to nn/; not installed). */
#ifndef VOLT_NN_UTIL_H
#define VOLT_NN_UTIL_H
#include <stdio.h>
#include "volt/nn.h"
#include "volt/ops.h"

#define VOLT__NN_NAME 256

/* VOLT_ERR_VERSION naming the layer ("nn: linear 'fc1': config version 99, expected 1..2 (use
 * volt_nn_linear_config_init)", cfg "linear") unless got is a version this library knows. */
volt_status volt__nn_check_version(volt_params *ps, const char *kind, const char *cfg, const char *prefix, unsigned got,
                                   unsigned want);
/* VOLT_ERR_INVALID_ARG naming the layer unless the init scheme is known and std finite, >= 0. */
volt_status volt__nn_check_init(volt_params *ps, const char *kind, const char *prefix, volt_nn_init_scheme init, float std);
/* "<prefix>.<leaf>" (or "<leaf>" for an empty prefix) into out; INVALID_ARG on overflow. */
volt_status volt__nn_name(volt_params *ps, char out[VOLT__NN_NAME], const char *prefix, const char *leaf);
/* What volt_param_new would refuse of "<prefix>.<leaf>" (shape, init), checked before a layer
 * opens its unit: a refused declare must leave no unit behind, so that a corrected retry
 * does not meet "duplicate unit". INVALID_ARG / SHAPE naming the layer. */
volt_status volt__nn_check_param(volt_params *ps, const char *kind, const char *prefix, const char *leaf, volt_shape shape,
                                 volt_init init);
/* Open the unit named prefix for VOLT_NN_UNIT_OWN; nothing for JOIN. */
volt_status volt__nn_unit(volt_params *ps, volt_nn_unit_mode mode, const char *prefix);
/* Declare "<prefix>.<leaf>". */
volt_status volt__nn_param(volt_params *ps, const char *prefix, const char *leaf, volt_shape shape,
                           volt_init init, volt_tensor **out);
/* The weight and bias inits of a Linear/Conv2d under a scheme (fan_in = in * k * k). */
void volt__nn_fc_inits(volt_nn_init_scheme scheme, float std, volt_init wcustom, volt_init bcustom,
                       int64_t fan_in, volt_init *w, volt_init *b);
/* A layer called before its declare, or with NULL: fail the step, return NULL. */
volt_tensor *volt__nn_undeclared(volt_step *s, const char *what);
/* A layer's temporary t is done with (volt_tensor_release), unless an op handed it back
 * unchanged as `kept` (dropout in eval, the identity activation) or it is the layer's input. */
static inline void volt__nn_done(volt_step *s, volt_tensor *t, const volt_tensor *kept, const volt_tensor *input) {
    if (t && t != kept && t != input) volt_tensor_release(s, t);
}
#endif
