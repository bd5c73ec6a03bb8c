/* volt/models.h — built-in modules (DESIGN §9), written only against the public API.
 *
 * Each model is a volt_module_ops table plus a `self` made by _create from a config:
 *
 *     volt_mlp_config mc; volt_mlp_config_init(&mc);
 *     void *m; VOLT_TRY(volt_mlp_create(&mc, &m));
 *     volt_trainer_fit(t, &volt_mlp_ops, m, train, val, NULL);
 *     volt_mlp_destroy(m);
 *
 * Batches carry a float field (default "x") and an i32/i64 class field (default "y").
 * Every layer is one param-store unit named like its PyTorch attribute ("fc1", "conv1")
 * with parameters "fc1.weight", "fc1.bias", ...; init is nn.Linear / nn.Conv2d's default
 * (weights kaiming_uniform(a=sqrt(5)) = U(±1/sqrt(fan_in)), biases U(±1/sqrt(fan_in))),
 * so state dicts line up with the equivalent torch module.
 *
 * Logged metrics: training_step "train_loss" (step, prog bar) and "train_acc" (epoch mean);
 * validation_step "val_loss", "val_acc"; test_step "test_loss", "test_acc" (epoch means,
 * prog bar). predict_step returns the logits (B, out_features). */
#ifndef VOLT_MODELS_H
#define VOLT_MODELS_H

#include "volt/export.h"

#include "volt/core.h"
#include "volt/optim.h"
#include "volt/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- MLP: [linear - relu - dropout] x n_hidden - linear -------------------------------- */
#define VOLT_MLP_MAX_HIDDEN 4

typedef struct volt_mlp_config {
    uint32_t version;             /* VOLT_MLP_CONFIG_VERSION, set by _init */
    int64_t in_features;          /* > 0; default 784 (a flattened 28x28 image) */
    int n_hidden;                 /* hidden layers, 0..VOLT_MLP_MAX_HIDDEN; default 2 */
    int64_t hidden[VOLT_MLP_MAX_HIDDEN]; /* widths of the hidden layers; default 256, 128 */
    int64_t out_features;         /* classes, > 0; default 10 */
    float dropout;                /* after each hidden ReLU, in [0, 1); default 0.2 */
    volt_optim_kind optimizer;    /* default VOLT_OPTIM_ADAM */
    float lr;                     /* default 1e-3 */
    float weight_decay;           /* default 0 */
    const char *x_field;          /* batch field with the inputs (B, in_features); default "x" */
    const char *y_field;          /* batch field with the targets (B); default "y" */
} volt_mlp_config;
#define VOLT_MLP_CONFIG_VERSION 1u

VOLT_API void volt_mlp_config_init(volt_mlp_config *cfg);
/* Checks the config and makes the module (the config is copied; field names too).
 * Errors: INVALID_ARG (bad sizes, dropout, lr), VERSION, NOMEM. */
VOLT_API volt_status volt_mlp_create(const volt_mlp_config *cfg, void **self);
VOLT_API void volt_mlp_destroy(void *self);                                  /* NULL-safe */
/* The forward pass: x (B, in_features) f32 -> logits (B, out_features); NULL on error
 * (message in the step). Requires setup to have run on the step's param store. */
VOLT_API volt_tensor *volt_mlp_forward(void *self, volt_step *s, volt_tensor *x);
VOLT_API extern const volt_module_ops volt_mlp_ops;

/* ---- CNN: conv-relu-pool x 2, flatten, linear-relu-dropout-linear ---------------------- *
 * conv1 (in_channels -> conv1_channels, 3x3, padding 1) - relu - maxpool 2
 * conv2 (conv1_channels -> conv2_channels, 3x3, padding 1) - relu - maxpool 2
 * flatten - fc1 (conv2_channels * (H/4) * (W/4) -> hidden) - relu - dropout - fc2 (-> out) */
typedef struct volt_cnn_config {
    uint32_t version;             /* VOLT_CNN_CONFIG_VERSION, set by _init */
    int64_t in_channels;          /* > 0; default 1 */
    int64_t height, width;        /* input image size, each >= 4; default 28 x 28 */
    int64_t conv1_channels;       /* default 32 */
    int64_t conv2_channels;       /* default 64 */
    int64_t hidden;               /* fc1 width; default 128 */
    int64_t out_features;         /* classes; default 10 */
    float dropout;                /* before fc2, in [0, 1); default 0.25 */
    volt_optim_kind optimizer;    /* default VOLT_OPTIM_ADAM */
    float lr;                     /* default 1e-3 */
    float weight_decay;           /* default 0 */
    const char *x_field;          /* (B, C*H*W) flattened or (B, C, H, W); default "x" */
    const char *y_field;          /* default "y" */
} volt_cnn_config;
#define VOLT_CNN_CONFIG_VERSION 1u

VOLT_API void volt_cnn_config_init(volt_cnn_config *cfg);
VOLT_API volt_status volt_cnn_create(const volt_cnn_config *cfg, void **self);
VOLT_API void volt_cnn_destroy(void *self);                                  /* NULL-safe */
/* x (B, C*H*W) or (B, C, H, W) f32 -> logits (B, out_features); NULL on error. */
VOLT_API volt_tensor *volt_cnn_forward(void *self, volt_step *s, volt_tensor *x);
VOLT_API extern const volt_module_ops volt_cnn_ops;

#ifdef __cplusplus
}
#endif
#endif
