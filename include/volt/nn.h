/* volt/nn.h — layers: small structs declared once in a module's setup under a name prefix,
 * then called in the step (DESIGN §1), like torch.nn modules:
 *
 *     typedef struct { volt_nn_linear fc1, fc2; } mlp;
 *     setup:  VOLT_TRY(volt_nn_linear_declare(ps, "fc1", 784, 256, &m->fc1));  // fc1.weight, fc1.bias
 *     step:   volt_tensor *h = volt_relu(s, volt_nn_linear_forward(s, &m->fc1, x));
 *
 * (The call is <layer>_forward: in C the struct volt_nn_linear and a function of that name
 * cannot coexist.) docs/LAYERS.md has each layer's shapes, inits and names.
 *
 * Parameter names are "<prefix>.<name>" with PyTorch's attribute names (weight, bias), so a
 * prefix like "distilbert.transformer.layer.0" gives Hugging Face names. Each declare either
 * opens a param-store unit named by the prefix (the bucket / FSDP unit; VOLT_NN_UNIT_OWN, the
 * default) or puts its parameters into the unit opened last (VOLT_NN_UNIT_JOIN). Parameters
 * are declared in a fixed order per layer (docs/LAYERS.md), which fixes their init streams.
 *
 * Declares return a status (message in volt_params_errmsg). Layer calls are ops: they return
 * NULL on error with the message in the step, so calls chain. A layer struct is plain data
 * owned by the caller (usually a field of the module); it holds borrowed pointers into the
 * param store, valid while the store lives. Activations are the ops volt_relu, volt_gelu,
 * volt_gelu_tanh, volt_tanh (volt/ops.h), or volt_nn_activation by kind. */
#ifndef VOLT_NN_H
#define VOLT_NN_H

#include "volt/export.h"

#include "volt/core.h"
#include "volt/params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- shared options ------------------------------------------------------------------------ */
typedef enum volt_nn_unit_mode {
    VOLT_NN_UNIT_OWN = 0,         /* open a unit named by the layer's prefix (default) */
    VOLT_NN_UNIT_JOIN = 1,        /* add to the unit opened last (e.g. one unit per block) */
} volt_nn_unit_mode;

typedef enum volt_nn_init_scheme {
    VOLT_NN_INIT_TORCH = 0,       /* PyTorch's defaults (default): Linear/Conv2d weight
                                     kaiming_uniform(a=sqrt(5)) = U(±1/sqrt(fan_in)), bias
                                     U(±1/sqrt(fan_in)); Embedding N(0, 1) */
    VOLT_NN_INIT_NORMAL = 1,      /* Hugging Face's _init_weights: weights and embeddings
                                     N(0, std), biases 0 */
    VOLT_NN_INIT_CUSTOM = 2,      /* weight_init / bias_init as given */
} volt_nn_init_scheme;

typedef enum volt_nn_act {
    VOLT_NN_RELU = 0, VOLT_NN_GELU, VOLT_NN_GELU_TANH, VOLT_NN_TANH, VOLT_NN_IDENTITY
} volt_nn_act;
/* x -> act(x); VOLT_NN_IDENTITY returns x. */
VOLT_API volt_tensor *volt_nn_activation(volt_step *s, volt_nn_act act, volt_tensor *x);

/* ---- Linear: x (..., in) -> (..., out) -------------------------------------------------------- *
 * <prefix>.weight (out, in), <prefix>.bias (out), declared in that order. */
typedef struct volt_nn_linear {
    volt_tensor *weight, *bias;   /* bias NULL when declared without */
    int64_t in, out;
} volt_nn_linear;

typedef struct volt_nn_linear_config {
    uint32_t version;             /* VOLT_NN_LINEAR_CONFIG_VERSION, set by _init */
    bool bias;                    /* default true */
    volt_nn_unit_mode unit;       /* default VOLT_NN_UNIT_OWN */
    volt_nn_init_scheme init;     /* default VOLT_NN_INIT_TORCH */
    float std;                    /* VOLT_NN_INIT_NORMAL's std; default 0.02 */
    volt_init weight_init, bias_init; /* VOLT_NN_INIT_CUSTOM only */
} volt_nn_linear_config;
#define VOLT_NN_LINEAR_CONFIG_VERSION 1u

VOLT_API void volt_nn_linear_config_init(volt_nn_linear_config *cfg);
/* nn.Linear(in, out): bias, its own unit, PyTorch init. Errors: INVALID_ARG (sizes, name). */
VOLT_API volt_status volt_nn_linear_declare(volt_params *ps, const char *prefix, int64_t in, int64_t out,
                                   volt_nn_linear *l);
VOLT_API volt_status volt_nn_linear_declare_ex(volt_params *ps, const char *prefix, int64_t in, int64_t out,
                                      const volt_nn_linear_config *cfg, volt_nn_linear *l);
VOLT_API volt_tensor *volt_nn_linear_forward(volt_step *s, const volt_nn_linear *l, volt_tensor *x);

/* ---- LayerNorm over the last dim: x (..., dim) -> (..., dim) ---------------------------------- *
 * <prefix>.weight (dim) = 1, <prefix>.bias (dim) = 0 (when affine). */
typedef struct volt_nn_layernorm {
    volt_tensor *weight, *bias;   /* NULL without affine */
    int64_t dim;
    float eps;
} volt_nn_layernorm;

typedef struct volt_nn_layernorm_config {
    uint32_t version;             /* VOLT_NN_LAYERNORM_CONFIG_VERSION, set by _init */
    float eps;                    /* > 0; default 1e-5 (PyTorch's) */
    bool affine;                  /* elementwise_affine; default true */
    volt_nn_unit_mode unit;       /* default VOLT_NN_UNIT_OWN */
} volt_nn_layernorm_config;
#define VOLT_NN_LAYERNORM_CONFIG_VERSION 1u

VOLT_API void volt_nn_layernorm_config_init(volt_nn_layernorm_config *cfg);
VOLT_API volt_status volt_nn_layernorm_declare(volt_params *ps, const char *prefix, int64_t dim, volt_nn_layernorm *ln);
VOLT_API volt_status volt_nn_layernorm_declare_ex(volt_params *ps, const char *prefix, int64_t dim,
                                         const volt_nn_layernorm_config *cfg, volt_nn_layernorm *ln);
VOLT_API volt_tensor *volt_nn_layernorm_forward(volt_step *s, const volt_nn_layernorm *ln, volt_tensor *x);

/* ---- Embedding: ids (...) i32/i64 -> (..., dim) --------------------------------------------- *
 * <prefix>.weight (num, dim). With padding_idx >= 0, as nn.Embedding(padding_idx=...): the
 * row starts at zero, and positions holding padding_idx send it no gradient (in a training
 * step; the forward values are unchanged, so a pretrained non-zero pad row still reads). */
typedef struct volt_nn_embedding {
    volt_tensor *weight;
    int64_t num, dim, padding_idx; /* padding_idx -1 = none */
} volt_nn_embedding;

typedef struct volt_nn_embedding_config {
    uint32_t version;             /* VOLT_NN_EMBEDDING_CONFIG_VERSION, set by _init */
    int64_t padding_idx;          /* -1 (default) or in [0, num) */
    volt_nn_unit_mode unit;       /* default VOLT_NN_UNIT_OWN */
    volt_nn_init_scheme init;     /* TORCH: N(0, 1) (default); NORMAL: N(0, std); CUSTOM: weight_init */
    float std;                    /* default 0.02 */
    volt_init weight_init;
} volt_nn_embedding_config;
#define VOLT_NN_EMBEDDING_CONFIG_VERSION 1u

VOLT_API void volt_nn_embedding_config_init(volt_nn_embedding_config *cfg);
VOLT_API volt_status volt_nn_embedding_declare(volt_params *ps, const char *prefix, int64_t num, int64_t dim,
                                      volt_nn_embedding *e);
VOLT_API volt_status volt_nn_embedding_declare_ex(volt_params *ps, const char *prefix, int64_t num, int64_t dim,
                                         const volt_nn_embedding_config *cfg, volt_nn_embedding *e);
VOLT_API volt_tensor *volt_nn_embedding_forward(volt_step *s, const volt_nn_embedding *e, volt_tensor *ids);

/* ---- Dropout (no parameters): inverted dropout with p in a training step ---------------------- */
typedef struct volt_nn_dropout { float p; } volt_nn_dropout;
/* Each call takes the step's next dropout index, even with p == 0 (volt_dropout). */
VOLT_API volt_tensor *volt_nn_dropout_forward(volt_step *s, const volt_nn_dropout *d, volt_tensor *x);

/* ---- Multi-head attention: x (B, T, dim) -> (B, T, dim) --------------------------------------- *
 * <prefix>.<q_name>, .<k_name>, .<v_name>, .<out_name> are Linear(dim, dim) layers (weight,
 * bias each), declared in that order. Per head h (dim / n_heads wide): softmax(q k^T /
 * sqrt(dh) + masks) v, heads concatenated, then the out projection. The padding mask is
 * key_mask (B, Tk) u8/i32/i64, nonzero = attend (or NULL); causal masks later keys. In
 * evaluation, or with dropout 0, the fused kernel (volt_attention) runs; in a training step
 * with dropout > 0 the probabilities are dropped, as torch does. */
typedef struct volt_nn_mha {
    volt_nn_linear q, k, v, out;
    int64_t dim, n_heads;
    float dropout;                /* on the attention probabilities */
    bool causal;
} volt_nn_mha;

typedef struct volt_nn_mha_config {
    uint32_t version;             /* VOLT_NN_MHA_CONFIG_VERSION, set by _init */
    int64_t n_heads;              /* > 0 and divides dim; default 1 */
    float dropout;                /* attention dropout in [0, 1); default 0 */
    bool causal;                  /* default false */
    bool bias;                    /* projection biases; default true */
    volt_nn_unit_mode unit;       /* default VOLT_NN_UNIT_OWN */
    volt_nn_init_scheme init;     /* projections' init; default VOLT_NN_INIT_TORCH */
    float std;                    /* VOLT_NN_INIT_NORMAL's std; default 0.02 */
    const char *q_name, *k_name, *v_name, *out_name; /* default "q_proj", "k_proj", "v_proj", "out_proj" */
} volt_nn_mha_config;
#define VOLT_NN_MHA_CONFIG_VERSION 1u

VOLT_API void volt_nn_mha_config_init(volt_nn_mha_config *cfg);
VOLT_API volt_status volt_nn_mha_declare(volt_params *ps, const char *prefix, int64_t dim,
                                const volt_nn_mha_config *cfg, volt_nn_mha *a);
/* Self-attention: query = key = value = x. */
VOLT_API volt_tensor *volt_nn_mha_forward(volt_step *s, const volt_nn_mha *a, volt_tensor *x, volt_tensor *key_mask);
/* Cross-attention: xq (B, Tq, dim) attends over xkv (B, Tk, dim) -> (B, Tq, dim). */
VOLT_API volt_tensor *volt_nn_mha_cross(volt_step *s, const volt_nn_mha *a, volt_tensor *xq, volt_tensor *xkv,
                               volt_tensor *key_mask);

/* ---- Transformer encoder layer: x (B, T, dim) -> (B, T, dim) ---------------------------------- *
 * post-LN (norm_first false; BERT / DistilBERT / nn.TransformerEncoderLayer's default):
 *     x = norm1(x + drop?(attn(x)));  x = norm2(x + drop(lin2(act(lin1(x)))))
 * pre-LN (norm_first true; GPT-2 style):
 *     x = x + drop?(attn(norm1(x)));   x = x + drop(lin2(act(lin1(norm2(x)))))
 * drop? is there only with attn_out_dropout (DistilBERT has none there; torch and GPT-2 do).
 * Parameters under <prefix>., in order — post-LN: <attn_name>.{q,k,v,out}, <norm1_name>,
 * <ffn1_name>, <ffn2_name>, <norm2_name>; pre-LN: <norm1_name>, <attn_name>.{q,k,v,out},
 * <norm2_name>, <ffn1_name>, <ffn2_name>. The layer is one unit (or joins one). */
typedef struct volt_nn_encoder_layer {
    volt_nn_mha attn;
    volt_nn_layernorm norm1, norm2;
    volt_nn_linear ffn1, ffn2;
    volt_nn_act act;
    float dropout;
    bool norm_first, attn_out_dropout;
} volt_nn_encoder_layer;

typedef struct volt_nn_encoder_config {
    uint32_t version;             /* VOLT_NN_ENCODER_CONFIG_VERSION, set by _init */
    int64_t n_heads;              /* default 1 */
    int64_t ffn_dim;              /* FFN width; default 4 * dim (0 = that) */
    float dropout;                /* FFN output (and attention output, see attn_out_dropout); default 0.1 */
    float attention_dropout;      /* on the attention probabilities; default 0.1 */
    bool attn_out_dropout;        /* dropout after the attention projection; default false
                                     (DistilBERT); true for torch's, BERT's and GPT-2's layers */
    volt_nn_act activation;       /* default VOLT_NN_GELU (erf) */
    bool norm_first;              /* false: post-LN (default); true: pre-LN */
    bool causal;                  /* default false (true for GPT-style decoders) */
    float ln_eps;                 /* default 1e-5 */
    volt_nn_unit_mode unit;       /* the layer is one unit by default (VOLT_NN_UNIT_OWN) */
    volt_nn_init_scheme init;     /* linears and attention; default VOLT_NN_INIT_TORCH */
    float std;                    /* VOLT_NN_INIT_NORMAL's std; default 0.02 */
    /* Names below the prefix. Defaults are DistilBERT's: "attention" (with "q_lin", "k_lin",
       "v_lin", "out_lin"), "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm". */
    const char *attn_name, *q_name, *k_name, *v_name, *out_name;
    const char *norm1_name, *ffn1_name, *ffn2_name, *norm2_name;
} volt_nn_encoder_config;
#define VOLT_NN_ENCODER_CONFIG_VERSION 1u

/* DistilBERT's post-LN block: its names, dropouts 0.1, GELU, no attention-output dropout;
 * ln_eps 1e-5 (DistilBERT and BERT use 1e-12). */
VOLT_API void volt_nn_encoder_config_init(volt_nn_encoder_config *cfg);
/* GPT-2's pre-LN block: norm_first, causal, GELU-tanh, ln_eps 1e-5, attn_out_dropout, and
 * names "ln_1", "attn" ("q_proj", "k_proj", "v_proj", "c_proj"), "mlp.c_fc", "mlp.c_proj",
 * "ln_2" (GPT-2 packs q/k/v into one c_attn; volt keeps them apart). */
VOLT_API void volt_nn_encoder_config_init_gpt(volt_nn_encoder_config *cfg);
VOLT_API volt_status volt_nn_encoder_declare(volt_params *ps, const char *prefix, int64_t dim,
                                    const volt_nn_encoder_config *cfg, volt_nn_encoder_layer *e);
VOLT_API volt_tensor *volt_nn_encoder_forward(volt_step *s, const volt_nn_encoder_layer *e, volt_tensor *x,
                             volt_tensor *key_mask);

/* ---- Conv2d: x (N, C, H, W) -> (N, O, OH, OW); MaxPool2d ---------------------------------------- *
 * <prefix>.weight (O, C, k, k), <prefix>.bias (O); init as Linear with fan_in = C * k * k. */
typedef struct volt_nn_conv2d {
    volt_tensor *weight, *bias;
    int64_t in_channels, out_channels;
    int kernel, stride, padding;
} volt_nn_conv2d;

typedef struct volt_nn_conv2d_config {
    uint32_t version;             /* VOLT_NN_CONV2D_CONFIG_VERSION, set by _init */
    int stride;                   /* >= 1; default 1 */
    int padding;                  /* >= 0; default 0 */
    bool bias;                    /* default true */
    volt_nn_unit_mode unit;       /* default VOLT_NN_UNIT_OWN */
    volt_nn_init_scheme init;     /* default VOLT_NN_INIT_TORCH */
    float std;
    volt_init weight_init, bias_init;
} volt_nn_conv2d_config;
#define VOLT_NN_CONV2D_CONFIG_VERSION 1u

VOLT_API void volt_nn_conv2d_config_init(volt_nn_conv2d_config *cfg);
/* nn.Conv2d(in, out, kernel, stride=1, padding=0). */
VOLT_API volt_status volt_nn_conv2d_declare(volt_params *ps, const char *prefix, int64_t in_channels,
                                   int64_t out_channels, int kernel, volt_nn_conv2d *c);
VOLT_API volt_status volt_nn_conv2d_declare_ex(volt_params *ps, const char *prefix, int64_t in_channels,
                                      int64_t out_channels, int kernel, const volt_nn_conv2d_config *cfg,
                                      volt_nn_conv2d *c);
VOLT_API volt_tensor *volt_nn_conv2d_forward(volt_step *s, const volt_nn_conv2d *c, volt_tensor *x);

typedef struct volt_nn_max_pool2d { int kernel, stride; } volt_nn_max_pool2d;   /* stride 0 = kernel */
VOLT_API volt_tensor *volt_nn_max_pool2d_forward(volt_step *s, const volt_nn_max_pool2d *p, volt_tensor *x);

/* ---- Sequential: layers applied in order ------------------------------------------------------- *
 * A list of borrowed layer pointers (they live in the module next to it); the user still
 * writes the step and calls volt_nn_seq where a stack helps:
 *     volt_nn_seq_add(&m->body, VOLT_NN_LINEAR, &m->fc1);
 *     volt_nn_seq_add(&m->body, VOLT_NN_ACT_RELU, NULL);
 *     logits = volt_nn_seq_forward(s, &m->body, x);
 * FLATTEN reshapes (B, ...) to (B, -1). */
#define VOLT_NN_SEQ_MAX 32
typedef enum volt_nn_kind {
    VOLT_NN_LINEAR = 0, VOLT_NN_LAYERNORM, VOLT_NN_DROPOUT, VOLT_NN_CONV2D, VOLT_NN_MAX_POOL2D,
    VOLT_NN_ENCODER, VOLT_NN_ACT_RELU, VOLT_NN_ACT_GELU, VOLT_NN_ACT_GELU_TANH, VOLT_NN_ACT_TANH,
    VOLT_NN_FLATTEN, VOLT_NN_KIND_COUNT
} volt_nn_kind;

typedef struct volt_nn_seq {
    int n;
    struct { volt_nn_kind kind; const void *layer; } item[VOLT_NN_SEQ_MAX];
} volt_nn_seq;

/* Append a layer (NULL for the parameterless kinds ACT_*, FLATTEN). Errors: INVALID_ARG
 * (unknown kind, missing layer), NOMEM (more than VOLT_NN_SEQ_MAX). */
VOLT_API volt_status volt_nn_seq_add(volt_nn_seq *q, volt_nn_kind kind, const void *layer);
/* Apply the items in order (an encoder layer gets no key mask). */
VOLT_API volt_tensor *volt_nn_seq_forward(volt_step *s, const volt_nn_seq *q, volt_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
