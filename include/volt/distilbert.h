/* volt/distilbert.h — DistilBERT for sequence classification (DESIGN §9), written only
 * against the public API. The layout, parameter names, init and math are Hugging Face
 * transformers' DistilBertForSequenceClassification (modeling_distilbert.py):
 *
 *   x = LayerNorm(word_embeddings[ids] + position_embeddings[0..T-1]); dropout   (B, T, D)
 *   n_layers post-LN blocks:
 *     a = out_lin(attention(q_lin(x), k_lin(x), v_lin(x), padding mask))   (H heads of D/H)
 *     x = sa_layer_norm(a + x)
 *     f = dropout(lin2(gelu_erf(lin1(x))))                                   (hidden_dim)
 *     x = output_layer_norm(f + x)
 *   logits = classifier(dropout(relu(pre_classifier(x[:, 0]))))            (B, n_classes)
 *
 * Every LayerNorm uses eps 1e-12. Parameter names are HF's, e.g.
 *   distilbert.embeddings.word_embeddings.weight          (vocab_size, dim)
 *   distilbert.embeddings.position_embeddings.weight      (max_position, dim)
 *   distilbert.embeddings.LayerNorm.{weight,bias}          (dim)
 *   distilbert.transformer.layer.{i}.attention.{q_lin,k_lin,v_lin,out_lin}.{weight,bias}
 *   distilbert.transformer.layer.{i}.{sa_layer_norm,output_layer_norm}.{weight,bias}
 *   distilbert.transformer.layer.{i}.ffn.lin1.weight (hidden_dim, dim), .ffn.lin2 (dim, hidden_dim)
 *   pre_classifier.{weight,bias} (dim, dim), classifier.{weight,bias} (n_classes, dim)
 * Units: "distilbert.embeddings", "distilbert.transformer.layer.{i}" (one per block), "head".
 * Init is HF's _init_weights: N(0, initializer_range) for linear weights and embeddings,
 * zero biases, LayerNorm 1/0, and the pad_token_id row of word_embeddings zeroed.
 *
 * Where volt differs from HF, or does more (docs/DISTILBERT.md has the details):
 *  - attention dropout: HF drops attention probabilities. volt does the same inside the
 *    fused kernel (volt_attention_dropout: the mask is drawn from the counter-based RNG
 *    and redrawn in backward; no (T, T) matrix is kept); identity in evaluation.
 *  - padding_idx: as nn.Embedding(padding_idx=pad_token_id), positions holding the pad id
 *    send no gradient to word_embeddings[pad_token_id] (done in the forward, so it holds
 *    with any trainer, clipping or accumulation).
 *  - dropout masks come from volt's counter-based RNG, not torch's.
 *
 * Batches: "input_ids" i32/i64 (B, T), "attention_mask" i32/i64/u8 (B, T) (nonzero =
 * attend; optional), "y" i32/i64 (B). T <= max_position.
 * Logged: training_step "train_loss" (step, prog bar) and "train_acc" (epoch);
 * validation_step "val_loss", "val_acc"; test_step "test_loss", "test_acc" (epoch means,
 * prog bar). predict_step returns the logits (B, n_classes). */
#ifndef VOLT_DISTILBERT_H
#define VOLT_DISTILBERT_H

#include "volt/export.h"

#include "volt/core.h"
#include "volt/params.h"
#include "volt/optim.h"
#include "volt/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct volt_distilbert_config {
    uint32_t version;            /* VOLT_DISTILBERT_CONFIG_VERSION, set by _init */
    /* architecture (defaults: distilbert-base-uncased) */
    int64_t vocab_size;          /* default 30522 */
    int64_t max_position;        /* max_position_embeddings; default 512 */
    int64_t dim;                 /* model width; a multiple of n_heads; default 768 */
    int n_layers;                /* default 6 */
    int n_heads;                 /* default 12 */
    int64_t hidden_dim;          /* FFN width; default 3072 */
    float dropout;               /* embeddings and FFN output, in [0, 1); default 0.1 */
    float attention_dropout;     /* on the attention probabilities, in [0, 1); default 0.1
                                    (0 selects the fused attention kernel in training too) */
    float seq_classif_dropout;   /* after pre_classifier + ReLU, in [0, 1); default 0.2 */
    int64_t n_classes;           /* num_labels, >= 1; default 2 */
    int64_t pad_token_id;        /* padding_idx of word_embeddings; -1 = none; default 0 */
    float initializer_range;     /* std of the normal init; default 0.02 */
    /* optimisation (configure_optimizers) */
    volt_optim_kind optimizer;   /* default VOLT_OPTIM_ADAM (torch.optim.Adam, the recipe) */
    float lr;                    /* default 5e-5 */
    float weight_decay;          /* default 0; applied to every parameter but no_decay's */
    int64_t warmup_steps;        /* >= 0; default 0 */
    int64_t total_steps;         /* > 0: linear warmup then linear decay to 0 at total_steps
                                    (HF get_linear_schedule_with_warmup); -1: the same over the
                                    fit's optimizer steps (volt_optim_setup.estimated_stepping_
                                    batches); 0 with warmup_steps > 0: warmup then constant;
                                    both 0: constant lr (default) */
    /* pretrained weights: init_weights loads <pretrained_dir>/model.safetensors when set
       (the string is copied by _create); default NULL */
    const char *pretrained_dir;
    /* batch field names (each < 64 bytes; copied); defaults as above */
    const char *ids_field, *mask_field, *y_field;
    /* ---- version 2 ---- */
    /* NULL (default): weight_decay applies to every parameter. Else the parameters whose names
       match these patterns (volt_optim_group.params: comma-separated fnmatch globs on the
       whole name) form a parameter group with weight decay 0 (copied; not empty). HF's recipe
       (no decay for biases and LayerNorm weights) with these names:
       "*.bias,*LayerNorm.weight,*layer_norm.weight" */
    const char *no_decay;
    /* ---- version 3 ---- */
    /* true: volt_distilbert_load prints no notes (newly initialised parameters, unused
       tensors); its errors are unchanged. For every process but one when several load the
       same file (ranks > 0 under a distributed strategy). Default false. */
    bool quiet;
    /* ---- version 4 ---- */
    /* true: ReduceLROnPlateau (torch's, VOLT_SCHED_PLATEAU) in place of the schedule above
       (warmup_steps and total_steps 0): after each epoch's validation, the lr times
       plateau_factor once val_loss has not improved (torch's relative threshold 1e-4) for more
       than plateau_patience epochs. Needs validation (a fit without val_loss fails naming it).
       Default false. */
    bool plateau;
    int64_t plateau_patience;    /* >= 0; default 10 (torch's) */
    double plateau_factor;       /* in [0, 1); default 0.1 (torch's) */
} volt_distilbert_config;
#define VOLT_DISTILBERT_CONFIG_VERSION 4u

/* Defaults: distilbert-base-uncased, 2 classes, Adam lr 5e-5, no schedule. */
VOLT_API void volt_distilbert_config_init(volt_distilbert_config *cfg);
/* Set the architecture fields of a preset, leaving the others alone:
 *   "distilbert-base"  vocab 30522, max_pos 512, dim 768, 6 layers, 12 heads, hidden 3072
 *   "small"            vocab 30522, max_pos 512, dim 128, 2 layers,  2 heads, hidden 512
 *                      (the BERT vocabulary; a CPU-sized model)
 *   "tiny"             vocab 97,    max_pos 16,  dim 32,  2 layers,  4 heads, hidden 64
 *                      (tests; the parity fixture's dims)
 * Errors: NOT_FOUND for an unknown name, INVALID_ARG for NULL. */
VOLT_API volt_status volt_distilbert_preset(volt_distilbert_config *cfg, const char *name);

/* FLOPs of one batch of `batch` sequences of `seq` tokens (the GEMMs: linears and attention
 * over all seq keys; a training step counts forward + backward as 3 forwards): what the
 * ThroughputMonitor's flops_fn returns for MFU. distilbert-base, 12 x 512, training: 1.74e12.
 * 0 for a NULL cfg or a size <= 0. */
VOLT_API double volt_distilbert_flops(const volt_distilbert_config *cfg, int64_t batch, int64_t seq, bool training);

/* Check the config and make the module (the config and its strings are copied).
 * Errors: INVALID_ARG (sizes, dim % n_heads, dropouts, lr, schedule, names), VERSION, NOMEM. */
VOLT_API volt_status volt_distilbert_create(const volt_distilbert_config *cfg, void **self);
VOLT_API void volt_distilbert_destroy(void *self);                                /* NULL-safe */
/* The module's config (strings owned by the module); valid until destroy. */
VOLT_API const volt_distilbert_config *volt_distilbert_get_config(const void *self);
/* The learning rate configure_optimizers returns from now on (the next fit's optimizer): as
 * Lightning's lr_find sets model.lr to its suggestion. lr > 0; others are ignored. */
VOLT_API void volt_distilbert_set_lr(void *self, float lr);

/* The forward pass: input_ids (B, T) i32/i64, attention_mask (B, T) i32/i64/u8 or NULL
 * (all tokens attended) -> logits (B, n_classes) f32; NULL on error (message in the step).
 * Requires setup to have run on the step's param store (and the store to be finalized). */
VOLT_API volt_tensor *volt_distilbert_forward(void *self, volt_step *s, volt_tensor *input_ids,
                                     volt_tensor *attention_mask);

/* Load weights from a safetensors file with HF names into the store that setup filled:
 * body tensors are looked up as "distilbert.<name>" and, failing that, as "<name>" (a bare
 * DistilBertModel file); LayerNorm ".gamma"/".beta" are accepted for ".weight"/".bias".
 * F32/BF16/F16 are converted. The MLM head (vocab_transform, vocab_layer_norm,
 * vocab_projector) and an embeddings.position_ids buffer are ignored; other unused tensors
 * are listed on stderr. Missing head
 * parameters (pre_classifier, classifier) keep their values and are reported on stderr as
 * newly initialised. The notes are not printed when the module's config says quiet. Errors (message in volt_params_errmsg): IO / CORRUPT (the file),
 * NOT_FOUND (a missing body tensor, named), SHAPE (a tensor whose shape differs: both
 * shapes named), DTYPE. Requires a finalized store. */
VOLT_API volt_status volt_distilbert_load(void *self, volt_params *ps, const char *path);

VOLT_API extern const volt_module_ops volt_distilbert_ops;

#ifdef __cplusplus
}
#endif
#endif
