/* volt/trainer.h — the Lightning part: a user fills a volt_module_ops table, the trainer
 * runs fit / validate / test / predict, logging, callbacks and checkpoints (DESIGN §1, §4).
 *
 * Hook order follows Lightning: for a hook that both callbacks and the module have, the
 * callbacks' run first (in the order added), then the module's. */
#ifndef VOLT_TRAINER_H
#define VOLT_TRAINER_H

#include "volt/export.h"

#include <stdio.h>
#include "volt/core.h"
#include "volt/params.h"
#include "volt/optim.h"
#include "volt/data.h"
#include "volt/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct volt_trainer volt_trainer;
typedef struct volt_ckpt volt_ckpt;     /* a checkpoint being written or read; see below */

/* ---- logging (called from inside steps) ------------------------------------------------ */
enum {
    VOLT_LOG_STEP = 1u << 0,      /* record the value of this step ("name" or "name_step") */
    VOLT_LOG_EPOCH = 1u << 1,     /* batch-size weighted mean over the epoch ("name" or "name_epoch") */
    VOLT_LOG_PROG_BAR = 1u << 2,  /* show in the progress bar */
    VOLT_LOG_SYNC = 1u << 3,      /* average across ranks (distributed strategies) */
    VOLT_LOG_NO_LOGGER = 1u << 4, /* keep out of loggers (callbacks still see it) */
    /* Lightning's reduce_fx (at most one; none: "mean", the batch-size weighted mean): how an
     * EPOCH value folds the epoch's step values, and ranks fold theirs, in rank order; with
     * SYNC, how a STEP value is reduced across ranks. Not for counts (volt_log_ratio). */
    VOLT_LOG_REDUCE_SUM = 1u << 5, /* reduce_fx="sum": the sum of the values (not weighted) */
    VOLT_LOG_REDUCE_MAX = 1u << 6, /* reduce_fx="max": the largest (a NaN wins, as torch.max) */
    VOLT_LOG_REDUCE_MIN = 1u << 7, /* reduce_fx="min": the smallest (a NaN wins) */
};
/* Neither STEP nor EPOCH given: Lightning's defaults — STEP in training_step, EPOCH in
 * validation/test steps. With both, two metrics "name_step" and "name_epoch" exist. */
VOLT_API volt_status volt_log(volt_step *s, const char *name, const volt_tensor *value, unsigned flags);
VOLT_API volt_status volt_log_value(volt_step *s, const char *name, double value, unsigned flags);
/* The usual classifier step: cross-entropy and accuracy of logits (N, C) against y (N),
 * logged as "<stage>_loss" / "<stage>_acc" with Lightning's defaults ("train": loss per step
 * on the progress bar, accuracy as an epoch mean; other stages: both epoch means on the
 * progress bar). For "train" the loss becomes the step's loss. stage is "train", "val",
 * "test" or "predict"; another (or NULL) fails the step with VOLT_ERR_INVALID_ARG. */
VOLT_API volt_status volt_classification_step(volt_step *s, volt_tensor *logits, volt_tensor *y, const char *stage);
/* A ratio of integer counts (e.g. hits / rows), like a torchmetrics state: the step value is
 * num/den, the epoch value Σnum/Σden over all batches and ranks, so equal counts give
 * bitwise-equal scores under every strategy and batch split. volt_classification_step
 * logs "<stage>_acc" this way. */
VOLT_API volt_status volt_log_ratio(volt_step *s, const char *name, int64_t num, int64_t den, unsigned flags);
/* Scores of a confusion matrix counts[true * C + pred]: accuracy, and macro precision,
 * recall and F1 over the classes that occur (as targets or predictions). */
typedef struct volt_class_scores {
    int64_t total, correct;
    double accuracy, precision, recall, f1;
} volt_class_scores;
VOLT_API void volt_confusion_scores(int n_classes, const int64_t *counts, volt_class_scores *out);
/* The training_step's loss: the trainer runs backward on it. */
VOLT_API volt_status volt_step_set_loss(volt_step *s, volt_tensor *loss);

/* ---- optimizer setup returned by configure_optimizers ------------------------------------ */
typedef struct volt_optim_setup {
    volt_optimizer_config optimizer;     /* initialised by the trainer with _init before the call */
    bool use_scheduler;                  /* false by default */
    volt_scheduler_config scheduler;     /* initialised with _init; interval: step or epoch */
    /* Set by the trainer before the call, for reading (Lightning's
     * trainer.estimated_stepping_batches): the optimizer steps fit takes — per epoch the train
     * batches of one rank after limit_train_batches, over accumulate_grad_batches (rounded up),
     * times max_epochs, capped by max_steps; -1 when unbounded (max_epochs and max_steps -1).
     * A linear or cosine schedule's total_steps is usually this. */
    int64_t estimated_stepping_batches;
} volt_optim_setup;

/* ---- the module vtable --------------------------------------------------------------------- */
typedef enum volt_stage { VOLT_STAGE_FIT, VOLT_STAGE_VALIDATE, VOLT_STAGE_TEST, VOLT_STAGE_PREDICT } volt_stage;

typedef struct volt_module_ops {
    uint32_t version;                    /* VOLT_MODULE_OPS_VERSION, first; the table is append-only */
    const char *name;
    /* Declare parameters (volt_params_unit / volt_param_new). Required. */
    volt_status (*setup)(void *self, volt_params *ps);
    /* Required for fit. `out` holds defaults (AdamW lr 1e-3, no scheduler). */
    volt_status (*configure_optimizers)(void *self, volt_optim_setup *out);
    /* Steps: build the forward on s; training_step must call volt_step_set_loss. */
    volt_status (*training_step)(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx);
    volt_status (*validation_step)(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx);
    volt_status (*test_step)(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx);
    /* Return the prediction for the batch in *out (a tensor of s); the trainer copies it. */
    volt_status (*predict_step)(void *self, volt_step *s, const volt_batch *b, int64_t batch_idx,
                                volt_tensor **out);
    /* Optional hooks (NULL = nothing). A hook returning VOLT_STOP asks for a graceful stop. */
    volt_status (*on_fit_start)(void *self, volt_trainer *t);
    volt_status (*on_fit_end)(void *self, volt_trainer *t);
    volt_status (*on_train_epoch_start)(void *self, volt_trainer *t);
    volt_status (*on_train_epoch_end)(void *self, volt_trainer *t);
    volt_status (*on_validation_epoch_start)(void *self, volt_trainer *t);
    volt_status (*on_validation_epoch_end)(void *self, volt_trainer *t);
    volt_status (*on_test_epoch_start)(void *self, volt_trainer *t);
    volt_status (*on_test_epoch_end)(void *self, volt_trainer *t);
    /* Returning VOLT_SKIP_EPOCH (Lightning's -1) skips this batch and the rest of the epoch's
     * training: the epoch then ends as any does (its epoch-interval scheduler step, validation,
     * on_train_epoch_end, checkpoints). A window of accumulate_grad_batches the skip cuts short
     * drops the grads its earlier batches left (Lightning would add them to the next epoch's
     * first step). With several ranks, one rank's skip is every rank's (a vote at each batch:
     * one small all-reduce, for modules that have this hook). */
    volt_status (*on_train_batch_start)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_train_batch_end)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_before_optimizer_step)(void *self, volt_trainer *t);
    /* Extra state in checkpoints (volt_ckpt_put_* / volt_ckpt_get_*). */
    volt_status (*on_save_checkpoint)(void *self, volt_trainer *t, volt_ckpt *ck);
    volt_status (*on_load_checkpoint)(void *self, volt_trainer *t, volt_ckpt *ck);
    /* Called once after the parameters are allocated and initialised from their inits, before
     * any checkpoint is restored: load pretrained weights here (optional). */
    volt_status (*init_weights)(void *self, volt_params *ps);
    /* version 2: the rest of LightningModule's hooks, each after the callbacks' hook of the
     * same name (optional; tables of version 1 get none). on_before_backward gets the step's
     * loss (before the accumulation's division and 16-mixed's scale); on_after_backward runs
     * once the grads are in the units (before the optimizer boundary); both run inside the
     * step, so compile refuses a module that has them. on_predict_batch_end gets the
     * prediction, valid for the call only. */
    volt_status (*on_train_start)(void *self, volt_trainer *t);
    volt_status (*on_train_end)(void *self, volt_trainer *t);
    volt_status (*on_validation_start)(void *self, volt_trainer *t);
    volt_status (*on_validation_end)(void *self, volt_trainer *t);
    volt_status (*on_validation_batch_start)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_validation_batch_end)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_test_start)(void *self, volt_trainer *t);
    volt_status (*on_test_end)(void *self, volt_trainer *t);
    volt_status (*on_test_batch_start)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_test_batch_end)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_predict_start)(void *self, volt_trainer *t);
    volt_status (*on_predict_end)(void *self, volt_trainer *t);
    volt_status (*on_predict_epoch_start)(void *self, volt_trainer *t);
    volt_status (*on_predict_epoch_end)(void *self, volt_trainer *t);
    volt_status (*on_predict_batch_start)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_predict_batch_end)(void *self, volt_trainer *t, const volt_tensor *pred, const volt_batch *b,
                                        int64_t batch_idx);
    volt_status (*on_before_backward)(void *self, volt_trainer *t, const volt_tensor *loss);
    volt_status (*on_after_backward)(void *self, volt_trainer *t);
    /* version 3: LightningModule.setup(stage) / teardown(stage), each after the callbacks' hook of
     * the same name (volt_callback_ops version 4 says when they run). volt's `setup` above declares
     * the parameters, as Lightning's configure_model; this one is the stage's (freeze parameters,
     * open files). A positive return counts as VOLT_OK. */
    volt_status (*setup_stage)(void *self, volt_trainer *t, volt_stage stage);
    volt_status (*teardown)(void *self, volt_trainer *t, volt_stage stage);
    /* version 4: LightningModule.configure_callbacks. Add the module's own callbacks to t here
     * (volt_add_model_checkpoint, volt_add_early_stopping, volt_trainer_add_callback, ...). It
     * runs at the start of every fit, validate, test, predict and tuner call, once the
     * parameters exist and before any setup(stage); a callback it adds replaces the callbacks
     * of the same table (the same kind: Lightning's same class) the trainer had, which stay
     * owned by the trainer, idle, until it is destroyed (handles to them stay valid), and
     * those the module added in an earlier call, which are destroyed. The replaced
     * ModelCheckpoint's "best"/"last" go with it: the module's first ModelCheckpoint takes
     * them. Adding nothing keeps what the trainer has. The callbacks are ordered as the
     * defaults are (ModelCheckpoint last). An error fails the call naming the hook, and the
     * callbacks it added are destroyed; with several ranks every rank must add the same
     * callbacks, and one rank's failure fails all. */
    volt_status (*configure_callbacks)(void *self, volt_trainer *t);
    /* version 5: LightningModule.on_before_zero_grad, after the callbacks' (callback table
     * version 6 says when it runs). */
    volt_status (*on_before_zero_grad)(void *self, volt_trainer *t);
    /* version 6: LightningModule.configure_gradient_clipping. When set, it replaces the trainer's
     * own clipping at every optimizer boundary (after on_before_optimizer_step, before the step;
     * under 16-mixed the grads are unscaled by then), given the config's gradient_clip_val and
     * gradient_clip_algorithm: clip with volt_trainer_clip_gradients, with those or other values,
     * or not at all (Lightning's default implementation clips with the arguments). It runs on
     * every rank, and every rank must make the same calls (under deepspeed and fsdp a clip by
     * norm is collective). VOLT_STOP asks for a stop. compile refuses it (it would run inside
     * the captured boundary). */
    volt_status (*configure_gradient_clipping)(void *self, volt_trainer *t, float gradient_clip_val,
                                               const char *gradient_clip_algorithm);
} volt_module_ops;
#define VOLT_MODULE_OPS_VERSION 6u

/* ---- callbacks ------------------------------------------------------------------------------ */
typedef struct volt_callback_ops {
    uint32_t version;                    /* VOLT_CALLBACK_OPS_VERSION, first; append-only */
    const char *name;                    /* the key of its checkpoint state; a second callback of the
                                            same name is keyed "name#1" (then #2...) in the order
                                            added: add them in the same order when resuming */
    volt_status (*on_fit_start)(void *self, volt_trainer *t);
    volt_status (*on_fit_end)(void *self, volt_trainer *t);
    volt_status (*on_sanity_check_start)(void *self, volt_trainer *t);
    volt_status (*on_sanity_check_end)(void *self, volt_trainer *t);
    volt_status (*on_train_start)(void *self, volt_trainer *t);
    volt_status (*on_train_end)(void *self, volt_trainer *t);
    volt_status (*on_train_epoch_start)(void *self, volt_trainer *t);
    volt_status (*on_train_epoch_end)(void *self, volt_trainer *t);
    /* VOLT_SKIP_EPOCH is refused here (an error naming the callback): only the module's skips */
    volt_status (*on_train_batch_start)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_train_batch_end)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_validation_start)(void *self, volt_trainer *t);
    volt_status (*on_validation_end)(void *self, volt_trainer *t);
    volt_status (*on_validation_epoch_start)(void *self, volt_trainer *t);
    volt_status (*on_validation_epoch_end)(void *self, volt_trainer *t);
    volt_status (*on_validation_batch_end)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_test_start)(void *self, volt_trainer *t);
    volt_status (*on_test_end)(void *self, volt_trainer *t);
    volt_status (*on_test_epoch_end)(void *self, volt_trainer *t);
    volt_status (*on_test_batch_end)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_before_backward)(void *self, volt_trainer *t, const volt_tensor *loss);
    volt_status (*on_after_backward)(void *self, volt_trainer *t);
    volt_status (*on_before_optimizer_step)(void *self, volt_trainer *t);
    /* Checkpoint state as a JSON object text: state_dict returns a malloc'ed string (or NULL
     * for none; anything but a JSON object fails the save, naming the callback);
     * load_state_dict gets what state_dict wrote. */
    char *(*state_dict)(void *self);
    volt_status (*load_state_dict)(void *self, volt_trainer *t, const char *json);
    void (*destroy)(void *self);         /* called exactly once by the trainer */
    /* version 2: fit / validate / test / predict is about to return the error st (Lightning's
     * on_exception), VOLT_ERR_INTERRUPTED included; the trainer's state is as the failure left
     * it (after an interruption: a batch end, consistent). volt_trainer_errmsg says what
     * failed; a callback's own failure here is reported on stderr and does not replace it. */
    void (*on_exception)(void *self, volt_trainer *t, volt_status st);
    /* version 3: the rest of Lightning's evaluation hooks. Batch hooks see the batch as the
     * step does (on the device); on_predict_batch_end also the step's prediction, valid for
     * the call only (as the volt_predict_fn sees it, which runs first). */
    volt_status (*on_validation_batch_start)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_test_epoch_start)(void *self, volt_trainer *t);
    volt_status (*on_test_batch_start)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_predict_start)(void *self, volt_trainer *t);
    volt_status (*on_predict_epoch_start)(void *self, volt_trainer *t);
    volt_status (*on_predict_batch_start)(void *self, volt_trainer *t, const volt_batch *b, int64_t batch_idx);
    volt_status (*on_predict_batch_end)(void *self, volt_trainer *t, const volt_tensor *pred, const volt_batch *b,
                                        int64_t batch_idx);
    volt_status (*on_predict_epoch_end)(void *self, volt_trainer *t);
    volt_status (*on_predict_end)(void *self, volt_trainer *t);
    /* version 4: Lightning's Callback.setup(stage) / teardown(stage). setup runs at the start of
     * fit, validate, test and predict (and of the tuner's lr_find and scale_batch_size, as stage
     * fit, as Lightning's Tuner runs a fit), once the model's parameters exist and before a
     * checkpoint is read, the optimizer made or any other hook runs: freeze parameters here, and
     * the tuner sweeps what fit will train. teardown runs when the call succeeded, after its last
     * hook (on_fit_end, on_test_end, ...; Lightning skips it after an exception too). A positive
     * return counts as VOLT_OK. */
    volt_status (*setup)(void *self, volt_trainer *t, volt_stage stage);
    volt_status (*teardown)(void *self, volt_trainer *t, volt_stage stage);
    /* version 5: Lightning's Callback.on_save_checkpoint / on_load_checkpoint: tensors and
     * metadata of the callback's own in the checkpoint (volt_ckpt_put_tensor / _put_meta,
     * _get_tensor / _get_meta), kept under "callback.<its state key>." so callbacks and the
     * module never meet. on_save_checkpoint runs at every save, after the module's (on the
     * rank that writes the file: rank 0; a sharded checkpoint's index); on_load_checkpoint on
     * a resumed fit and when the tuner loads back its own saved state (state_fn TUNE), on
     * every rank, before its load_state_dict and before any weight is applied. An error fails
     * the save / load, naming the callback. A table with these needs a name of 1 to 100 bytes
     * without '.' or '#' (volt_trainer_add_callback refuses another). */
    volt_status (*on_save_checkpoint)(void *self, volt_trainer *t, volt_ckpt *ck);
    volt_status (*on_load_checkpoint)(void *self, volt_trainer *t, volt_ckpt *ck);
    /* version 6: Lightning's Callback.on_before_zero_grad: at every optimizer boundary, after
     * the optimizer step (or the step 16-mixed skipped) and before the grads are cleared;
     * global_step is not counted up yet (a failing hook's step is counted, its error returned).
     * What there is to read is the strategy's: single and ddp hold every grad (averaged over
     * ranks) and every weight; deepspeed_stage_1 this rank's slice of the averaged grads (the
     * rest is the rank's own, unreduced); deepspeed_stage_2 and fsdp only that slice, and fsdp
     * gives the other units' weights back: a figure over the model is then a sum over ranks
     * (volt_trainer_all_reduce). The tuner's steps run it too (state_fn TUNE). compile refuses
     * it (it would run inside the captured boundary). */
    volt_status (*on_before_zero_grad)(void *self, volt_trainer *t);
} volt_callback_ops;
#define VOLT_CALLBACK_OPS_VERSION 6u

/* ---- trainer configuration ----------------------------------------------------------------- */
typedef struct volt_trainer_config {
    uint32_t version;                /* VOLT_TRAINER_CONFIG_VERSION, set by _init */
    int64_t max_epochs;              /* default 1000 when max_steps < 0, like Lightning; -1 = no limit */
    int64_t max_steps;               /* optimizer steps; -1 = no limit (default) */
    int64_t accumulate_grad_batches; /* default 1 */
    float gradient_clip_val;         /* 0 = off */
    const char *gradient_clip_algorithm;   /* "norm" (default) or "value" */
    int64_t val_check_interval;      /* validate every N train batches of an epoch (at most the epoch's
                                        batches); 0 = at epoch end (default) */
    int64_t check_val_every_n_epoch; /* default 1; 0: Lightning's None, validation every
                                        val_check_interval (> 0, a count) train batches counted
                                        across epochs (a resumed fit goes on counting; a count inside
                                        an accumulation window: at its end), and at an epoch's end
                                        only when its count falls there */
    int64_t limit_train_batches;     /* at most N batches per epoch; -1 = all (default) */
    int64_t limit_val_batches;
    int64_t limit_test_batches;
    int64_t limit_predict_batches;
    int64_t num_sanity_val_steps;    /* default 2; 0 disables the sanity check; -1: every val batch
                                        validation runs (never more than limit_val_batches allows) */
    int64_t log_every_n_steps;       /* default 50; >= 1 */
    int64_t fast_dev_run;            /* N > 0: N batches of train/val/test, no checkpoints or logs */
    bool deterministic;              /* default true: every backend reduces in a fixed order, so a run
                                        repeats bit for bit; false (faster nondeterministic kernels,
                                        as Lightning's) is refused: volt has none */
    uint64_t seed;                   /* params init, shuffles, dropout; default 42 */
    const char *default_root_dir;    /* logs and checkpoints; default (NULL or "") "." */
    bool enable_progress_bar;        /* default true */
    bool enable_checkpointing;       /* default true: adds a ModelCheckpoint if none was added */
    bool enable_logger;              /* default true: CSV logger under default_root_dir */
    const char *logger_name;         /* default "lightning_logs"; under default_root_dir (an absolute path or
                                        a ".." is refused) */
    const char *precision;           /* "32-true" (default), "16-mixed", "bf16-mixed", "bf16-true",
                                        "16-true" (aliases "32", "16", "bf16"); docs/PRECISION.md */
    const char *strategy;            /* "auto" (default: ddp when several devices, nodes or launched
                                        processes, else "single"); see docs/STRATEGIES.md */
    int devices;                     /* default 1: processes (ranks) per node; with "cuda" one GPU each */
    int num_nodes;                   /* default 1 */
    const char *run_config_json;     /* optional: the app's own settings, stored beside the logs */
    /* ---- precision (appended; docs/PRECISION.md) ---- */
    float grad_scaler_init_scale;    /* 16-mixed: initial loss scale; default 65536 (2^16) */
    float grad_scaler_growth_factor; /* 16-mixed: scale *= this after growth_interval good steps; default 2 */
    float grad_scaler_backoff_factor;/* 16-mixed: scale *= this on inf/NaN grads; default 0.5 */
    int64_t grad_scaler_growth_interval; /* 16-mixed: consecutive good steps; default 2000 */
    const char *optimizer_dtype;     /* optimizer state storage: "auto" (default: the parameters'
                                        dtype, i.e. 16-bit for bf16-true/16-true, else f32),
                                        "f32", "bf16" or "f16"; the math is f32 either way */
    /* ---- runs (appended; docs/RELIABILITY.md) ---- */
    const char *run_fingerprint;     /* NULL = none: the data and model settings of this run, set by
                                        the app (a JSON object names what differs); recorded in
                                        checkpoints; resuming a fit from a checkpoint with another
                                        fingerprint is an error */
    bool resume_anyway;              /* resume despite another fingerprint (a warning names what differs) */
    /* ---- console and loggers (appended; issue 14) ---- */
    bool enable_model_summary;       /* default true: ModelSummary table at fit start and the
                                        results table after validate / test (stdout, rank 0) */
    bool enable_tensorboard;         /* default true (with enable_logger): TensorBoard event file
                                        beside metrics.csv */
    bool enable_plots;               /* default true (with enable_logger): SVG plots of metrics.csv
                                        at the end of fit */
    /* ---- device (appended; issue 10, docs/TRAINER.md) ---- */
    const char *accelerator;         /* where parameters, the step and batches live, as Lightning:
                                        "auto" (default: $VOLT_ACCELERATOR, else "cuda" when a GPU is
                                        present, else "cpu"), "cpu", "cpu-strict" (tests: device memory
                                        unreadable from host code), "cuda" (alias "gpu"). `devices`
                                        ranks each use device local_rank of it */
    /* ---- compile and GEMM precision (appended; issue 11, docs/CUDA.md) ---- */
    bool compile;                    /* default false: capture the training step (forward, backward,
                                        optimizer boundary) as a device graph after one eager step
                                        per batch shape and replay it; with accumulate_grad_batches
                                        > 1 a graph per kind of micro-step too (inside a window: no
                                        boundary, no collective; its first: grads start cleared;
                                        its last: the boundary); needs a backend with graph capture
                                        (cuda), and with several processes ddp or deepspeed_stage_1
                                        over nccl; docs/CUDA.md "compile", docs/NCCL.md */
    const char *matmul_precision;    /* f32 GEMMs, as torch.set_float32_matmul_precision: "highest"
                                        (default: full f32), "high" or "medium" (TF32 allowed; on
                                        a backend without TF32 GEMMs, e.g. cpu, an error) */
    /* ---- communication (appended; issue 12, docs/NCCL.md) ---- */
    const char *strategy_reduce_dtype;   /* gradient reduction of ddp / deepspeed / fsdp: "fp32"
                                        (default, NULL) or "bf16" (grads rounded to bf16, reduced,
                                        widened back: half the bytes on the wire) */
    const char *strategy_comm;       /* comm backend: "auto" (default, NULL: nccl on cuda, mpi
                                        otherwise), "mpi" (host buffers; on cuda staged through
                                        host copies), "nccl" */
    /* ---- profiling (appended) ---- */
    const char *profiler;            /* NULL (default) or "": none; "simple": Lightning's
                                        SimpleProfiler — each action (training batch, fetching a
                                        batch, validation/test/predict step, every callback and
                                        module hook, setup, checkpoint load) timed and summed; after
                                        fit, validate, test and predict rank 0 prints a table to
                                        stdout ("FIT Profiler Report"); volt_trainer_profiler_action */
    /* ---- stopping and overfitting (appended; Lightning's Trainer flags, docs/TRAINER.md) ---- */
    const char *max_time;            /* NULL or "" (default): none; "DD:HH:MM:SS" (Lightning's form;
                                        the seconds may have a fraction): fit stops at the first
                                        optimizer step boundary after this much training time
                                        (counted from the training loop's start, validation
                                        included; a resumed fit goes on from the checkpoint's) */
    int64_t min_epochs;              /* -1 (default): none; a stop asked for earlier (EarlyStopping,
                                        a hook, max_time) is put off until this many epochs ran */
    int64_t min_steps;               /* -1 (default): none; the same in optimizer steps */
    int64_t overfit_batches;         /* 0 (default): off; N > 0: train on the same first N batches
                                        every epoch (the train loader's shuffling is off during fit)
                                        and validate on N val batches, as Lightning's int form */
    bool detect_anomaly;             /* default false: as Lightning's (torch's anomaly mode): in
                                        training steps every op's output and every gradient its
                                        backward writes is read back and the first NaN fails the
                                        step (VOLT_ERR_NUMERIC) naming the op, forward or backward,
                                        and its parameters; slow (a copy per op); not with compile */
    /* ---- fractions (appended; Lightning's float forms of the limits and val_check_interval) ---- */
    double limit_train_fraction;     /* 0 (default): limit_train_batches rules; 0 < f <= 1: int(f x
                                        the loader's batches) per epoch (an error when that is 0);
                                        not together with a limit_train_batches count */
    double limit_val_fraction;       /* the same for validation, ... */
    double limit_test_fraction;      /* ... test ... */
    double limit_predict_fraction;   /* ... and predict */
    double val_check_fraction;       /* 0 (default): val_check_interval rules; 0 < f < 1: validate
                                        every int(f x the epoch's train batches) batches, rounded
                                        down to a multiple of accumulate_grad_batches (at least one
                                        optimizer step); 1 = at epoch end */
    double overfit_fraction;         /* 0 (default): overfit_batches rules; 0 < f <= 1: as
                                        overfit_batches with that fraction of the train and val
                                        batches (Lightning's float form); not with a count */
    /* ---- interruption (appended; docs/TRAINER.md "Interrupting a run") ---- */
    bool handle_signals;             /* default true: during fit / validate / test / predict the
                                        first SIGINT or SIGTERM (when the program has no handler of
                                        its own for it) stops the run at the next batch end — in
                                        fit at an optimizer step boundary, on every rank alike —
                                        and the call returns VOLT_ERR_INTERRUPTED after the
                                        callbacks' on_exception; a second signal ends the process
                                        at once. false: the signals keep their default action */
    /* ---- data (appended; Lightning's Trainer flag, docs/TRAINER.md) ---- */
    int64_t reload_dataloaders_every_n_epochs;   /* 0 (default): the loaders a fit starts with serve
                                        it; N > 0: fit_dm asks the datamodule for its train and val
                                        loaders again every N epochs of the fit (a resumed fit
                                        counts from the epoch it resumes at), before that epoch's
                                        on_train_epoch_start. Needs a datamodule: a fit given
                                        loaders refuses it; not with overfit_batches */
    bool use_distributed_sampler;    /* default true: each loader given to fit / validate / test /
                                        predict (and the tuner's) is set to the rank's shard
                                        (Lightning's DistributedSampler; one process: the whole
                                        loader); false: the loaders are used as given, every rank
                                        reads all of its loader (one sharded by hand, or the same
                                        data on each); fit then needs the same number of train
                                        batches on every rank (else every rank fails, naming the
                                        counts; evaluation takes uneven counts as always) */
} volt_trainer_config;
#define VOLT_TRAINER_CONFIG_VERSION 1u

VOLT_API void volt_trainer_config_init(volt_trainer_config *cfg);
VOLT_API volt_status volt_trainer_create(const volt_trainer_config *cfg, volt_trainer **out);
/* The checks volt_trainer_create makes of the settings alone (ranges, combinations, max_time,
 * precision, strategy name and its devices, an accelerator with a device present), making
 * nothing: no device opened, no MPI, no files. The status volt_trainer_create would return
 * for them, and its message in err (a program calls it before reading its data;
 * volt_cli_parse does). What needs an open device (its count against devices, TF32,
 * compile's graphs) is checked by volt_trainer_create only. */
VOLT_API volt_status volt_trainer_config_check(const volt_trainer_config *cfg, char *err, size_t errlen);
VOLT_API void volt_trainer_destroy(volt_trainer *t);               /* NULL-safe; destroys callbacks */
VOLT_API const char *volt_trainer_errmsg(const volt_trainer *t);      /* NULL-safe: "no trainer (NULL)" */
/* The signal (SIGINT, SIGTERM) that stopped the last fit / validate / test / predict /
 * lr_find, which then returned VOLT_ERR_INTERRUPTED; 0 when none came (Lightning's
 * trainer.interrupted). A call that failed for another reason keeps its own error, and this
 * still names a signal that arrived while it failed. */
VOLT_API int volt_trainer_interrupted(const volt_trainer *t);
/* compile = true: training steps run eagerly (the first of each batch shape, and shapes past
 * the graph bound), captured (each capture also runs the step once) and replayed, since
 * create. Any pointer may be NULL. */
VOLT_API void volt_trainer_compile_stats(const volt_trainer *t, int64_t *eager, int64_t *captured, int64_t *replayed);
/* profiler = "simple": an action of the last (or current) fit / validate / test / predict —
 * "run_training_batch", "run_training_epoch", "train_dataloader_next", "validation_step",
 * "test_step", "predict_step", "setup", "load_checkpoint", "[Callback]<name>.<hook>",
 * "[LightningModule]<name>.<hook>" — its calls and total seconds; false when not recorded. */
VOLT_API bool volt_trainer_profiler_action(const volt_trainer *t, const char *name, int64_t *calls, double *total_s);
/* The device this trainer runs on: the accelerator name as resolved ("cpu", "cpu-strict",
 * "cuda"; "auto" already replaced) and its ordinal. */
VOLT_API const char *volt_trainer_accelerator(const volt_trainer *t);
VOLT_API int volt_trainer_device_index(const volt_trainer *t);
/* The device's product name as its driver reports it ("NVIDIA H200" on cuda: what nvidia-smi
 * prints), or NULL when the backend names none (cpu). ThroughputMonitor looks its peak FLOP/s
 * up by it (volt_available_flops). */
VOLT_API const char *volt_trainer_device_name(const volt_trainer *t);

/* Takes ownership of self (ops->destroy runs on trainer destroy, or now if this fails). */
VOLT_API volt_status volt_trainer_add_callback(volt_trainer *t, const volt_callback_ops *ops, void *self);

/* ---- weight averaging (the WeightAveraging callback's part; callbacks/weight_averaging.c) ---- */
/* Ask for an average of the weights (volt_optimizer_enable_average) on the optimizer of the
 * next fits; before the optimizer exists, once per trainer (INVALID_ARG the second time). Inside
 * a module's configure_callbacks the request replaces the one there (the WeightAveraging it
 * adds replaces the trainer's); once the optimizer exists, only with the same mode and decay.
 * Under a sharded strategy each rank averages its slice (and the swaps below are collective).
 * While it is on, a checkpoint holds the average as the model's weights and the current weights as
 * "optimizer.weight_average.<param>" (Lightning's current_model_state), and a resume
 * restores both. */
VOLT_API volt_status volt_trainer_request_weight_averaging(volt_trainer *t, volt_optim_average mode, float decay);
/* Exchange the model's values and the average (twice: bit for bit where it was); STATE when
 * the fit's optimizer has no average. */
VOLT_API volt_status volt_trainer_swap_average(volt_trainer *t);
/* The average into the model's values (Lightning's on_train_end). */
VOLT_API volt_status volt_trainer_copy_average(volt_trainer *t);
/* Whether the values hold the average now (an odd number of swaps). */
VOLT_API bool volt_trainer_average_swapped(const volt_trainer *t);
/* When the average is swapped in, the current weights back into the model with no collective
 * (a call that failed inside a validation, whose peers may have failed elsewhere or died): each
 * rank swaps its own slice back; under a sharded strategy the rest of its parameters is gathered
 * from the owners' slices at its next use (next fit's forward, validate, checkpoint save, the
 * end of fit). Every rank of the run is to call it (they agreed on the failure), or none uses the
 * model again. Nothing when the average is not swapped in. */
VOLT_API volt_status volt_trainer_swap_back_average(volt_trainer *t);

/* ---- running ----------------------------------------------------------------------------- */
/* module: the ops' self, handed to every hook of ops as given; volt never reads through it
 * (the model's state volt needs is in the parameter store), so NULL is valid for a table that
 * keeps no state of its own (its steps find their parameters with
 * volt_params_find(volt_step_params(s), name)). */
/* ckpt_path: NULL (fresh), a file path, "last" or "best" (from the ModelCheckpoint). Resuming
 * from "last" when none exists starts fresh. val may be NULL. Returns VOLT_OK also when a
 * callback stopped training early. */
VOLT_API volt_status volt_trainer_fit(volt_trainer *t, const volt_module_ops *ops, void *module,
                             volt_loader *train, volt_loader *val, const char *ckpt_path);
/* ckpt_path: NULL (current weights), a path, or "best"/"last". */
VOLT_API volt_status volt_trainer_validate(volt_trainer *t, const volt_module_ops *ops, void *module,
                                  volt_loader *val, const char *ckpt_path);
VOLT_API volt_status volt_trainer_test(volt_trainer *t, const volt_module_ops *ops, void *module,
                              volt_loader *test, const char *ckpt_path);
/* Calls out(ctx, batch, prediction) for each batch; the prediction lives for the call only. */
typedef volt_status (*volt_predict_fn)(void *ctx, const volt_batch *b, const volt_tensor *pred);
VOLT_API volt_status volt_trainer_predict(volt_trainer *t, const volt_module_ops *ops, void *module,
                                 volt_loader *loader, const char *ckpt_path, volt_predict_fn out, void *ctx);

/* Lightning's LightningModule.clip_gradients: clip the grads now, by global norm ("norm") or by
 * value ("value"; NULL: the config's gradient_clip_algorithm); clip_val 0 does nothing. Only
 * inside configure_gradient_clipping (VOLT_ERR_STATE elsewhere); a negative or non-finite
 * clip_val, or another algorithm, is VOLT_ERR_INVALID_ARG. As Lightning, when the config clips
 * (gradient_clip_val > 0) the call must agree with it: another clip_val or algorithm is
 * VOLT_ERR_INVALID_ARG ("use only one of them"); passing the hook's arguments on always agrees.
 * May be called more than once (each clips what the last left). */
VOLT_API volt_status volt_trainer_clip_gradients(volt_trainer *t, float clip_val, const char *algorithm);

/* ---- several evaluation loaders (Lightning's lists of val / test / predict dataloaders) -------- */
/* The same calls over n loaders, run one after the other within one stage: the stage's start and
 * epoch-start hooks once, then each loader's batches (batch_idx from 0 for each; its batch hooks
 * and steps see volt_trainer_dataloader_idx / volt_step_dataloader_idx = its index), then the
 * epoch end and end hooks once. With n > 1 every metric logged from a step of loader k is
 * named "<name>/dataloader_idx_<k>" (after "_step" / "_epoch"; Lightning's add_dataloader_idx), so
 * each loader has its own epoch means: a ModelCheckpoint / EarlyStopping monitors e.g.
 * "val_loss/dataloader_idx_0"; volt_classification_step's confusion matrix is
 * "val/dataloader_idx_<k>" (its scores "val_f1/dataloader_idx_<k>", ...). The limits
 * (limit_val_batches, ...) and fit's sanity check (num_sanity_val_steps) apply to each loader;
 * with several ranks every rank runs the same number of loaders (each agreed as one is). n = 1 is
 * the single-loader call exactly; fit's n = 0 (val NULL) validates nothing. A BatchSizeFinder in
 * validate / test / predict refuses n > 1 (in fit it sets every val loader to the size it found).
 * NULL entries, n < 0 or n > VOLT_MAX_EVAL_DATALOADERS: VOLT_ERR_INVALID_ARG. */
#define VOLT_MAX_EVAL_DATALOADERS 16
VOLT_API volt_status volt_trainer_fit_loaders(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                                              volt_loader *const *val, int n_val, const char *ckpt_path);
VOLT_API volt_status volt_trainer_validate_loaders(volt_trainer *t, const volt_module_ops *ops, void *module,
                                                   volt_loader *const *val, int n, const char *ckpt_path);
VOLT_API volt_status volt_trainer_test_loaders(volt_trainer *t, const volt_module_ops *ops, void *module,
                                               volt_loader *const *test, int n, const char *ckpt_path);
/* out is called for every batch of every loader; volt_trainer_dataloader_idx says whose. */
VOLT_API volt_status volt_trainer_predict_loaders(volt_trainer *t, const volt_module_ops *ops, void *module,
                                                  volt_loader *const *loaders, int n, const char *ckpt_path,
                                                  volt_predict_fn out, void *ctx);
/* The index of the loader the running validation / test / predict loop runs (0 with one loader;
 * during the stage's start hooks the first loader's, during its end hooks the last one's), -1
 * outside such a loop; how many loaders it runs (0 outside). volt_step_dataloader_idx: the same,
 * from inside a step (Lightning's dataloader_idx argument); 0 for a step outside a loop. A call
 * made from a hook of a loop leaves these as they were when it returns. */
VOLT_API int volt_trainer_dataloader_idx(const volt_trainer *t);
VOLT_API int volt_trainer_num_eval_dataloaders(const volt_trainer *t);
VOLT_API int volt_step_dataloader_idx(const volt_step *s);

/* ---- the learning-rate range test (Lightning's Tuner.lr_find) ------------------------------- */
/* num_training optimizer steps from the module's fresh optimizer, the learning rate set before
 * each from min_lr to max_lr (exponential: evenly in log space, as Lightning's default; linear),
 * recording the loss smoothed as Lightning does (beta 0.98, bias-corrected; with several ranks
 * the mean over ranks). It stops early when the smoothed loss passes early_stop_threshold
 * times the best (<= 0: never) or is not finite. Then the weights, the grad scaler and the loop
 * state are restored from a checkpoint written before the test (a hidden file under
 * default_root_dir, removed after), and the optimizer and scheduler are dropped, so the next
 * fit builds them again from configure_optimizers: set the module's learning rate to the
 * suggestion before it. suggestion: volt_lr_find_suggestion(result, 10, 1), Lightning's
 * defaults. With accumulate_grad_batches k a point is an optimizer
 * step (k micro-batches, fewer at the end of a pass), its loss their mean; steps run eagerly
 * (not captured) whatever `compile` says. SIGINT / SIGTERM stop it after the running step, as
 * they stop fit (cfg.handle_signals): the state is restored, the hidden file removed and
 * VOLT_ERR_INTERRUPTED returned with an empty result. */
typedef struct volt_lr_find_config {
    uint32_t version;                /* VOLT_LR_FIND_CONFIG_VERSION, set by _init */
    double min_lr;                   /* default 1e-8 */
    double max_lr;                   /* default 1 */
    int64_t num_training;            /* default 100 (>= 2) */
    bool linear;                     /* default false: exponential */
    double early_stop_threshold;     /* default 4 */
} volt_lr_find_config;
#define VOLT_LR_FIND_CONFIG_VERSION 1u
typedef struct volt_lr_find_result {
    int64_t n;                       /* steps run */
    double *lrs, *losses;            /* n each: the learning rate and the smoothed loss of each step */
    double suggestion;
} volt_lr_find_result;
VOLT_API void volt_lr_find_config_init(volt_lr_find_config *cfg);
VOLT_API volt_status volt_trainer_lr_find(volt_trainer *t, const volt_module_ops *ops, void *module, volt_loader *train,
                                          const volt_lr_find_config *cfg, volt_lr_find_result *out);
VOLT_API void volt_lr_find_result_free(volt_lr_find_result *r);   /* NULL-safe; the arrays */
/* Lightning's lr_finder.suggestion(skip_begin, skip_end) (2.6): the learning rate where the
 * smoothed loss falls fastest. Of the points after the first skip_begin and before the last
 * skip_end, those with a finite loss; the gradient of the loss with respect to the learning
 * rate at each (torch.gradient with the rates as coordinates: the second-order formula for
 * uneven spacing between neighbours, one-sided at the two ends); the rate of the least (the
 * first of equals). NAN when fewer than 2 finite points are left (Lightning's "not enough
 * points"), or for a NULL result or a negative skip. Two differences from Lightning: skip_end 0
 * skips none (Lightning's slice [skip_begin:-0] is empty), and a NaN gradient (two points at one
 * rate) is passed over (torch.argmin would pick it). */
VOLT_API double volt_lr_find_suggestion(const volt_lr_find_result *r, int64_t skip_begin, int64_t skip_end);

/* ---- the batch size finder (Lightning's Tuner.scale_batch_size / BatchSizeFinder) ------------ */
/* The largest batch size that trains without running out of memory: trials of steps_per_trial
 * optimizer steps (eager, whatever `compile` says; accumulate_grad_batches micro-batches each)
 * on the train loader at a batch size, from init_val. POWER doubles it after each trial that
 * ran until one runs out of memory (VOLT_ERR_NOMEM anywhere in the step: an allocation of the
 * device, the step's arena, the batch's copy) or max_trials ran; BINSEARCH then bisects between
 * the largest that ran and the smallest that did not. The size never passes the samples the
 * loader holds (that stops the doubling); when the first sizes run out of memory it halves
 * until one runs. Between trials the step's memory is made anew (what a failed size grew is
 * given back). Afterwards the weights, the grad scaler and the loop state are restored from a
 * checkpoint written before the search (a hidden file under default_root_dir, removed after),
 * the optimizer and scheduler are dropped (the next fit builds them from configure_optimizers),
 * and the loader is set to the size found (volt_loader_set_batch_size), as Lightning sets the
 * datamodule's batch_size. One process only: refused under distributed strategies, as
 * Lightning refuses them. SIGINT / SIGTERM stop it after the running step (state restored,
 * VOLT_ERR_INTERRUPTED, the loader's size as before). NOMEM when no size tried ran (the
 * loader's size as before); a failure to make the step anew after a trial ends the search
 * with the size found so far (none found: that error). */
typedef enum { VOLT_BATCH_SCALE_POWER = 0, VOLT_BATCH_SCALE_BINSEARCH = 1 } volt_batch_scale_mode;
typedef struct volt_batch_size_config {
    uint32_t version;                /* VOLT_BATCH_SIZE_CONFIG_VERSION, set by _init */
    volt_batch_scale_mode mode;      /* default POWER */
    int64_t steps_per_trial;         /* default 3 (>= 1) */
    int64_t init_val;                /* default 2 (>= 1) */
    int64_t max_trials;              /* default 25 (>= 1): POWER's trials; BINSEARCH's trials that ran */
} volt_batch_size_config;
#define VOLT_BATCH_SIZE_CONFIG_VERSION 1u
#define VOLT_BATCH_SIZE_TRIALS_MAX 64
typedef struct volt_batch_size_result {
    int64_t batch_size;              /* the largest size that ran: now the loader's */
    int n_trials;                    /* trials run */
    int64_t sizes[VOLT_BATCH_SIZE_TRIALS_MAX];   /* the first trials' batch sizes, in order */
    bool ran[VOLT_BATCH_SIZE_TRIALS_MAX];        /* ... and whether each ran (false: out of memory) */
} volt_batch_size_result;
VOLT_API void volt_batch_size_config_init(volt_batch_size_config *cfg);
VOLT_API volt_status volt_trainer_scale_batch_size(volt_trainer *t, const volt_module_ops *ops, void *module,
                                                   volt_loader *train, const volt_batch_size_config *cfg,
                                                   volt_batch_size_result *out);

/* ---- LearningRateFinder / BatchSizeFinder: the tuner as callbacks (Lightning's) ----------------- */
/* Added to a trainer, each runs inside fit (trainer/tuner_callbacks.c): after setup("fit") and
 * the loaders' sharding, before the optimizer is made and before any on_fit_start, in the order
 * added. LearningRateFinder runs lr_find (cfg.find) and, when it has a suggestion, calls
 * set_lr(module, suggestion) (Lightning's update_attr: the module's learning rate, which
 * configure_optimizers then reads; NULL: the suggestion is reported only). BatchSizeFinder runs
 * scale_batch_size (cfg.find; one process only, as the call) on fit's train loader and sets
 * fit's train and val loaders to the size found (Lightning sets the batch_size they are made
 * with); in validate, test and predict it scales the call's loader the same way with
 * evaluation steps before the call's loop (Lightning's on_validation_start, ...). Rank 0
 * prints a line each; fast_dev_run skips both (said), as Lightning does.
 * What they found is their checkpoint state: a fit resumed from a checkpoint does not search
 * again but applies it (set_lr; the loaders' size) before its optimizer is made; a checkpoint
 * saved without them leaves the module and the loaders as they are (said). A failed search
 * fails the fit, as any hook's error. One of each per trainer. */
typedef struct volt_lr_finder_config {
    uint32_t version;                         /* VOLT_LR_FINDER_CONFIG_VERSION, set by _init */
    void (*set_lr)(void *module, float lr);   /* e.g. volt_distilbert_set_lr; NULL: report only */
    volt_lr_find_config find;                 /* the test: volt_lr_find_config_init's defaults (last:
                                                 this version moves with volt_lr_find_config's) */
} volt_lr_finder_config;
#define VOLT_LR_FINDER_CONFIG_VERSION 1u
typedef struct volt_batch_size_finder_config {
    uint32_t version;                         /* VOLT_BATCH_SIZE_FINDER_CONFIG_VERSION, set by _init */
    volt_batch_size_config find;              /* the search: volt_batch_size_config_init's defaults (last:
                                                 this version moves with volt_batch_size_config's) */
} volt_batch_size_finder_config;
#define VOLT_BATCH_SIZE_FINDER_CONFIG_VERSION 1u
VOLT_API void volt_lr_finder_config_init(volt_lr_finder_config *cfg);
VOLT_API void volt_batch_size_finder_config_init(volt_batch_size_finder_config *cfg);
VOLT_API volt_status volt_add_lr_finder(volt_trainer *t, const volt_lr_finder_config *cfg);                 /* NULL: defaults */
VOLT_API volt_status volt_add_batch_size_finder(volt_trainer *t, const volt_batch_size_finder_config *cfg); /* NULL: defaults */
/* What the last fit's finder found (Lightning's callback.optimal_lr / the batch size), owned by
 * the callback, valid until the next fit; NULL before any or without the callback. After a
 * resumed fit: the checkpoint's value alone (n = 0 points, n_trials = 0). The batch size one is
 * the last search's: fit's, or a later validate / test / predict call's (until the next call);
 * the checkpoint state stays fit's. */
VOLT_API const volt_lr_find_result *volt_lr_finder_result(const volt_trainer *t);
VOLT_API const volt_batch_size_result *volt_batch_size_finder_result(const volt_trainer *t);

/* ---- datamodules: the data side as a table, like LightningDataModule ------------------------ */
typedef struct volt_datamodule_ops {
    uint32_t version;                                /* VOLT_DATAMODULE_OPS_VERSION, first */
    const char *name;
    volt_status (*prepare_data)(void *self);         /* optional; once, on rank 0 (downloads) */
    volt_status (*setup)(void *self, volt_stage stage);   /* optional; every rank */
    /* The loaders (owned by the datamodule, valid until teardown); NULL = none. */
    volt_loader *(*train_loader)(void *self);
    volt_loader *(*val_loader)(void *self);
    volt_loader *(*test_loader)(void *self);
    volt_loader *(*predict_loader)(void *self);
    void (*teardown)(void *self, volt_stage stage);  /* optional */
    /* ---- version 2: LightningDataModule.state_dict / load_state_dict ---- */
    /* Optional. A checkpoint written during a *_dm call holds the JSON object state_dict
     * returns (malloc'ed; NULL: none), under the datamodule's name. A *_dm call given a
     * ckpt_path (a resumed fit, validate / test / predict) hands it back to load_state_dict
     * before any weight is applied, after setup(stage): the loaders were asked for already,
     * so it changes them in place. A state saved under another name is not given (said). */
    char *(*state_dict)(void *self);
    volt_status (*load_state_dict)(void *self, const char *json);
    /* ---- version 3: several evaluation loaders (Lightning's list of dataloaders) ---- */
    /* Optional; when set, used in place of val_loader / test_loader / predict_loader: write up to
     * cap (VOLT_MAX_EVAL_DATALOADERS) loaders to out and return how many (0: none), or a negative
     * volt_status. They run as volt_trainer_validate_loaders etc. run them. */
    int (*val_loaders)(void *self, volt_loader **out, int cap);
    int (*test_loaders)(void *self, volt_loader **out, int cap);
    int (*predict_loaders)(void *self, volt_loader **out, int cap);
} volt_datamodule_ops;
#define VOLT_DATAMODULE_OPS_VERSION 3u

/* fit / validate / test / predict with the datamodule's loaders: prepare_data (rank 0, then
 * all ranks wait), setup(stage), the run, teardown(stage). */
VOLT_API volt_status volt_trainer_fit_dm(volt_trainer *t, const volt_module_ops *ops, void *module,
                                const volt_datamodule_ops *dm, void *dm_self, const char *ckpt_path);
VOLT_API volt_status volt_trainer_validate_dm(volt_trainer *t, const volt_module_ops *ops, void *module,
                                     const volt_datamodule_ops *dm, void *dm_self, const char *ckpt_path);
VOLT_API volt_status volt_trainer_test_dm(volt_trainer *t, const volt_module_ops *ops, void *module,
                                 const volt_datamodule_ops *dm, void *dm_self, const char *ckpt_path);
VOLT_API volt_status volt_trainer_predict_dm(volt_trainer *t, const volt_module_ops *ops, void *module,
                                    const volt_datamodule_ops *dm, void *dm_self, const char *ckpt_path,
                                    volt_predict_fn out, void *ctx);

/* ---- state visible to callbacks and modules ------------------------------------------------- */
VOLT_API int64_t volt_trainer_current_epoch(const volt_trainer *t);
VOLT_API int64_t volt_trainer_global_step(const volt_trainer *t);     /* optimizer steps taken */
VOLT_API int64_t volt_trainer_num_train_batches(const volt_trainer *t); /* this epoch, after limits */
/* volt_optim_setup.estimated_stepping_batches of the current (or last) fit; -1 before a fit. */
VOLT_API int64_t volt_trainer_estimated_stepping_batches(const volt_trainer *t);
VOLT_API int64_t volt_trainer_batch_in_epoch(const volt_trainer *t);   /* next train batch index */
/* The running loop's stage, set at the call's start and kept after it (Lightning's
 * trainer.state.stage): VALIDATE while fit validates (its sanity check too, with
 * volt_trainer_sanity_checking true, from on_sanity_check_start to on_sanity_check_end). Which
 * call runs is volt_trainer_state_fn. */
VOLT_API volt_stage volt_trainer_stage(const volt_trainer *t);
VOLT_API bool volt_trainer_sanity_checking(const volt_trainer *t);
/* The last training batch's loss as training_step set it (volt_step_set_loss: before the
 * accumulation's division and 16-mixed's scale), from its on_train_batch_end on (Lightning's
 * outputs["loss"] there, times accumulate_grad_batches). It is read with the step's logged
 * values, by the same one device->host copy (compiled steps too), once tracking is on:
 * volt_trainer_track_step_loss, from a callback's setup or earlier, stays on for the trainer's
 * life (SpikeDetection turns it on). false: not tracked, or no training step since the batch
 * started (a step that failed). */
VOLT_API volt_status volt_trainer_track_step_loss(volt_trainer *t);
VOLT_API bool volt_trainer_step_loss(const volt_trainer *t, double *out);
VOLT_API bool volt_trainer_is_global_zero(const volt_trainer *t);     /* rank 0: loggers, files */
VOLT_API int volt_trainer_rank(const volt_trainer *t);
VOLT_API int volt_trainer_world_size(const volt_trainer *t);
VOLT_API const volt_trainer_config *volt_trainer_get_config(const volt_trainer *t);
/* Lightning's `trainer.accumulate_grad_batches = n` (what GradientAccumulationScheduler does at
 * each epoch start): batches per optimizer step from the next batch on; the config reads n
 * after. Between accumulation windows only: INVALID_ARG for n < 1 or a val_check_interval that
 * is not a multiple of n; STATE inside a step or with part of a window's grads held (a batch
 * index of the running epoch that is not a multiple of the current factor). With compile,
 * a changed factor drops the captured graphs (the next step of each shape is eager again).
 * A factor set during a fit / validate / test / predict / tuner call lasts until the call ends:
 * then the trainer's factor is again what it was when the call began. */
VOLT_API volt_status volt_trainer_set_accumulate_grad_batches(volt_trainer *t, int64_t n);
/* The store; under ZeRO every value is whole when it returns (the all-gathers a step leaves
 * running into the next forward are waited for first), so a callback may read it. Under fsdp
 * (between a unit's uses) and under ZeRO after a failed fit's swap back, a unit not gathered
 * holds only this rank's slice: volt_tensor_to_host of its parameters is VOLT_ERR_STATE until
 * its next use (volt_trainer_export_full reads every rank's slice). */
VOLT_API volt_params *volt_trainer_params(const volt_trainer *t);
VOLT_API volt_optimizer *volt_trainer_optimizer(const volt_trainer *t);
VOLT_API volt_scheduler *volt_trainer_scheduler(const volt_trainer *t);   /* NULL if none */
/* Ask the loop to stop at the next optimizer-step boundary (EarlyStopping). */
VOLT_API void volt_trainer_request_stop(volt_trainer *t);
VOLT_API bool volt_trainer_should_stop(const volt_trainer *t);
/* The log directory of this run (<root>/<logger_name>/version_N), NULL before fit/test. */
VOLT_API const char *volt_trainer_log_dir(const volt_trainer *t);

/* Metrics logged so far in this call (Lightning's callback_metrics: the latest value of each,
 * step values and epoch means). Every fit, validate, test, predict and tuner call starts with
 * none, as Lightning resets them at each run's start; after a call they stay readable until the
 * next one starts (a call made from another call's hook keeps the running one's). */
VOLT_API bool volt_trainer_metric(const volt_trainer *t, const char *name, double *value);
VOLT_API int volt_trainer_metric_count(const volt_trainer *t);
VOLT_API const char *volt_trainer_metric_name(const volt_trainer *t, int i, double *value, unsigned *flags);
/* The metrics' names for a message naming what was logged: "'train_loss', 'val_acc'" (empty when
 * none), ending "..." where out (n bytes, n >= 4 for the mark) runs out. */
VOLT_API void volt_trainer_metric_names(const volt_trainer *t, char *out, size_t n);
/* Metrics logged during the last completed step, for loggers (name, value, step). */
typedef void (*volt_metric_visit_fn)(void *ctx, const char *name, double value, unsigned flags);
VOLT_API void volt_trainer_visit_fresh_metrics(const volt_trainer *t, volt_metric_visit_fn fn, void *ctx);

/* The confusion matrix volt_classification_step counted for a non-train stage ("val",
 * "test"; of one of several evaluation loaders "val/dataloader_idx_1"), summed over ranks at
 * the stage's epoch end (its scores are logged as "<stage>_precision", "_recall", "_f1", with the
 * loader's suffix after them). counts[true * C + pred], valid until the next run of that stage
 * starts (which drops the stage's matrices) or the next public call starts (as the metrics).
 * false when none was counted. */
VOLT_API bool volt_trainer_confusion_matrix(const volt_trainer *t, const char *stage, int *n_classes, const int64_t **counts);

/* ---- memory report (the struct: volt/memory.h) ----------------------------------------------- */
/* This rank's report (after the model exists: fit/validate/test has set it up). */
VOLT_API volt_status volt_trainer_memory_report(volt_trainer *t, volt_memory_report *out);
/* Collective (every rank calls it): rank 0 prints one table row per rank to f. */
VOLT_API volt_status volt_trainer_print_memory_report(volt_trainer *t, FILE *f);
/* The trainer's device's own memory now (volt_device_memory, volt/memory.h): cuda's bytes
 * allocated and reserved, their peaks, the device's free and total. No host synchronization;
 * callable any time after create. VOLT_ERR_UNSUPPORTED on cpu and cpu-strict (device memory
 * is the host's), VOLT_ERR_BACKEND when the runtime cannot say; the message names why. */
VOLT_API volt_status volt_trainer_device_memory(volt_trainer *t, volt_device_memory *out);

/* ---- checkpoints -------------------------------------------------------------------------- */
/* Write a full checkpoint now (rank 0 writes; atomic). */
VOLT_API volt_status volt_trainer_save_checkpoint(volt_trainer *t, const char *path);
/* Flags of the _ex saves. WEIGHTS_ONLY (Lightning's save_checkpoint(weights_only=True)): the
 * weights and the loop, callback and module state, without the optimizer states and the
 * scheduler (a third of an Adam checkpoint's size); validate/test/predict and pretrained
 * weights load it, a fit refuses to resume from it. */
enum { VOLT_CKPT_WEIGHTS_ONLY = 1u };
VOLT_API volt_status volt_trainer_save_checkpoint_ex(volt_trainer *t, const char *path, unsigned flags);
/* Collective: write the model weights alone as one ordinary safetensors file (f32, the
 * parameter names), on rank 0, whatever the strategy; sharded parameters are gathered one
 * unit at a time and the file is streamed to disk unit by unit. Loadable as pretrained
 * weights (and by any safetensors reader); not a resumable checkpoint. */
VOLT_API volt_status volt_trainer_export_full(volt_trainer *t, const char *path);
/* Asynchronous saving (ModelCheckpoint's async_save, as Lightning's AsyncCheckpointIO): a
 * snapshot is everything volt_trainer_save_checkpoint would write now, copied into host memory
 * (metadata, module extras, the weights and optimizer states: one device->host copy per unit
 * and state); volt_ckpt_snapshot_write then writes it on any thread while training goes on,
 * touching nothing of the trainer: the file is byte for byte the one a save at the snapshot's
 * moment writes (atomic the same way). path: where it will be written (for messages and the
 * module's on_save_checkpoint). *io: NULL, or a snapshot of an earlier call, whose host
 * memory is reused (not while a write of it runs). On ranks other than 0 of a replicated
 * strategy the snapshot is empty and writing it does nothing.
 * Sharded strategies (deepspeed_stage_1/2, fsdp over several ranks): the snapshot is
 * collective (every rank calls it, in the same order) and holds this rank's shard; a write
 * puts this rank's shard file in place, and the checkpoint exists only once
 * volt_trainer_snapshot_commit (collective, on the trainer's thread) has checked that every
 * rank wrote and rank 0 has written the index. written: this rank's write's status (why: its
 * message). A failed write on any rank fails the commit on every rank and removes the new
 * shard folder; the checkpoint the index would replace stays. Not sharded: commit does
 * nothing (the write was the save). volt_ckpt_snapshot_discard: a write that will never be
 * committed (teardown after a failure): this rank's shard file goes, and the folder with
 * the last rank's. */
typedef struct volt_ckpt_snapshot volt_ckpt_snapshot;
VOLT_API volt_status volt_trainer_snapshot_checkpoint(volt_trainer *t, const char *path, volt_ckpt_snapshot **io);
/* As volt_trainer_snapshot_checkpoint, with volt_trainer_save_checkpoint_ex's flags. */
VOLT_API volt_status volt_trainer_snapshot_checkpoint_ex(volt_trainer *t, const char *path, unsigned flags, volt_ckpt_snapshot **io);
VOLT_API volt_status volt_ckpt_snapshot_write(volt_ckpt_snapshot *s, const char *path, char *err, size_t errlen);
VOLT_API volt_status volt_trainer_snapshot_commit(volt_trainer *t, volt_ckpt_snapshot *s, const char *path,
                                                  volt_status written, const char *why);
VOLT_API void volt_ckpt_snapshot_discard(volt_ckpt_snapshot *s, const char *path);
VOLT_API bool volt_ckpt_snapshot_sharded(const volt_ckpt_snapshot *s);   /* writes need a commit */
VOLT_API size_t volt_ckpt_snapshot_bytes(const volt_ckpt_snapshot *s);   /* host memory it holds */
VOLT_API void volt_ckpt_snapshot_destroy(volt_ckpt_snapshot *s);
/* Remove a checkpoint written by volt_trainer_save_checkpoint: the file, and the folders of
 * per-rank shard files next to it ("<path>.shards-*"). ENOENT is not an error. */
VOLT_API volt_status volt_checkpoint_remove(const char *path);
/* The shape of parameter `name` in a checkpoint, from its header alone (no tensor bytes are
 * read): a single file's tensor, or what a sharded checkpoint's index records. What an app
 * needs before it builds the model (the classifier's class count for predict). Errors:
 * VOLT_ERR_NOT_FOUND when the checkpoint has no such parameter; the file's own errors (IO,
 * CORRUPT) otherwise; err (may be NULL) says which. */
VOLT_API volt_status volt_checkpoint_param_shape(const char *path, const char *name, volt_shape *out, char *err, size_t errlen);
/* Lightning's ckpt_path="last" in one folder, for a process that wants the file before (or
 * without) a trainer: an app's predict reads its class count from it. The newest, by
 * modification time, of the regular files ModelCheckpoint names last.safetensors and
 * last-vN.safetensors, and, with_on_exception, OnExceptionCheckpoint's on_exception.safetensors;
 * a tie goes to the greater name (the trainer's "last" decides the same way). "dir/name" goes
 * into buf (n bytes) and buf is returned; NULL when the folder holds none or cannot be read. A
 * file whose path does not fit in n is passed over (as ModelCheckpoint's scan passes it). */
VOLT_API const char *volt_checkpoint_find_last(const char *dir, bool with_on_exception, char *buf, size_t n);
/* How "best"/"last" resolve: the first ModelCheckpoint registers itself (borrowed); while a
 * module's configure_callbacks runs, the slot is the module's (the first ModelCheckpoint it adds
 * takes it when the trainer's is replaced or there was none). */
typedef struct volt_ckpt_resolver {
    uint32_t version;                     /* VOLT_CKPT_RESOLVER_VERSION, first */
    const char *(*best)(void *self);      /* path of the best checkpoint, NULL if none */
    double (*best_score)(void *self);     /* its monitored score, NAN if none */
    const char *(*last)(void *self);      /* path of the last checkpoint, NULL if none */
    void *self;
} volt_ckpt_resolver;
#define VOLT_CKPT_RESOLVER_VERSION 1u
/* A resolver whose version fails VOLT_VERSION_OK is not registered: the trainer records
 * the error (volt_trainer_errmsg) and keeps the one it had. */
VOLT_API void volt_trainer_set_ckpt_resolver(volt_trainer *t, const volt_ckpt_resolver *r);
/* A file ckpt_path="last" also weighs: the newest (mtime) of these and the resolver's last
 * wins, as Lightning's "last" weighs OnExceptionCheckpoint's file (which adds its own). Copied;
 * at most 16 per trainer (VOLT_ERR_INVALID_ARG past that, or for NULL / ""); a path given again is
 * not added twice. */
VOLT_API volt_status volt_trainer_add_last_candidate(volt_trainer *t, const char *path);

/* Extra entries in a checkpoint being saved / loaded (the module's and the callbacks'
 * on_save/on_load_checkpoint; each in its own namespace). */
VOLT_API volt_status volt_ckpt_put_meta(volt_ckpt *ck, const char *key, const char *value);
VOLT_API const char *volt_ckpt_get_meta(volt_ckpt *ck, const char *key);     /* NULL if absent */
VOLT_API volt_status volt_ckpt_put_tensor(volt_ckpt *ck, const char *name, volt_dtype dt, volt_shape shape,
                                 const void *data);                 /* copied */
VOLT_API volt_status volt_ckpt_get_tensor(volt_ckpt *ck, const char *name, volt_dtype dt, volt_shape shape,
                                 void *dst);

/* ---- built-in callbacks (callbacks/) -------------------------------------------------------- */
typedef enum volt_mode { VOLT_MIN = 0, VOLT_MAX = 1 } volt_mode;

typedef struct volt_checkpoint_config {
    uint32_t version;            /* VOLT_CHECKPOINT_CONFIG_VERSION, set by _init */
    const char *dirpath;         /* default <log_dir>/checkpoints; "" = the current folder */
    const char *filename;        /* template, default (NULL or "") "{epoch}-{step}"; e.g. "{epoch}-{val_acc:.4f}";
                                    under dirpath (an absolute path or a ".." is refused) */
    const char *monitor;         /* metric name; NULL = save the latest (top-k by recency);
                                    "" is refused at add */
    volt_mode mode;              /* VOLT_MIN default */
    int save_top_k;              /* default 1; -1 = all; 0 = none (last still saved if save_last) */
    bool save_last;              /* also keep "last.safetensors", updated at every save point */
    int64_t every_n_epochs;      /* default 1 (when every_n_train_steps and train_time_interval are 0;
                                    > 1 with either of them is refused: Lightning's rule) */
    int64_t every_n_train_steps; /* 0 = off */
    bool save_on_train_epoch_end;/* default false: evaluate after validation when val runs */
    /* version 2: */
    bool async_save;             /* default false: write in a background thread from a host
                                    snapshot (volt_trainer_snapshot_checkpoint) while training
                                    goes on; one write in flight; errors surface at the next save
                                    point or at fit end; sharded strategies: every rank writes its
                                    shard, the next save point (or fit end) commits the index */
    bool save_weights_only;      /* version 3; default false: as Lightning's, the files hold the
                                    weights and the loop and callback state but no optimizer or
                                    scheduler state (VOLT_CKPT_WEIGHTS_ONLY): a third of an Adam
                                    checkpoint; "best" loads for test, a fit cannot resume */
    bool auto_insert_metric_name;/* version 3; default true (_init): "{epoch}-{val_acc:.2f}" names
                                    "epoch=2-val_acc=0.88"; false: "2-0.88" (Lightning's flag); an
                                    inserted name's '/' is written '_' ("{val_loss/dataloader_idx_0}"
                                    names "val_loss_dataloader_idx_0=0.12", a file in dirpath, where
                                    Lightning would make a folder) */
    bool enable_version_counter; /* version 3; default true (_init): a name taken by a file this
                                    callback does not track gets "-v1", "-v2"...; false: the file
                                    is overwritten (Lightning's flag) */
    double train_time_interval;  /* version 4; seconds, 0 = off (default): Lightning's flag, a
                                    save point at the first train batch end that ends an
                                    optimizer step once this much wall time (monotonic) has
                                    passed since the last one it triggered, or since train
                                    start (also of a resumed run); rank 0's clock decides for
                                    every rank. Excludes every_n_train_steps > 0 and
                                    every_n_epochs > 1 (every_n_epochs = 1, the default, counts
                                    as unset; top-k is then saved only by time) */
    bool verbose;                /* version 5; default false: rank 0 prints each save point's
                                    decision, in Lightning's words ("Epoch 2, global step 72:
                                    'val_acc' reached 0.87500 (best 0.87500), saving model to
                                    '...' as top 1" / "... was not in top 1") */
} volt_checkpoint_config;
#define VOLT_CHECKPOINT_CONFIG_VERSION 5u

typedef struct volt_early_stopping_config {
    uint32_t version;            /* VOLT_EARLY_STOPPING_CONFIG_VERSION, set by _init */
    const char *monitor;         /* required */
    volt_mode mode;
    float min_delta;             /* default 0 */
    int64_t patience;            /* default 3 */
    bool has_stopping_threshold; float stopping_threshold;
    bool has_divergence_threshold; float divergence_threshold;
    bool check_finite;           /* default true: stop on NaN/inf */
    bool verbose;                /* version 2; default false: rank 0 also prints each improvement
                                    ("Metric val_loss improved by 0.012 >= min_delta = 0.0. New
                                    best score: 0.345"); the reason for a stop is printed always */
    int check_on_train_epoch_end;/* version 3; Lightning's: -1 (default, None): resolved at fit
                                    start as Lightning's setup(): 1 when validation runs at every
                                    epoch's end (check_val_every_n_epoch 1, val_check_interval 0),
                                    else 0 (docs/CALLBACKS.md); 1: at every train epoch's end only (after
                                    that epoch's validation: a train metric, or val's once per
                                    epoch); 0: at validation ends only */
} volt_early_stopping_config;
#define VOLT_EARLY_STOPPING_CONFIG_VERSION 3u

VOLT_API void volt_checkpoint_config_init(volt_checkpoint_config *cfg);
VOLT_API void volt_early_stopping_config_init(volt_early_stopping_config *cfg);
VOLT_API volt_status volt_add_model_checkpoint(volt_trainer *t, const volt_checkpoint_config *cfg);
VOLT_API volt_status volt_add_early_stopping(volt_trainer *t, const volt_early_stopping_config *cfg);

/* WeightAveraging / EMAWeightAveraging (Lightning 2.6; docs/CALLBACKS.md): an average of the
 * weights updated after optimizer steps, swapped in for validation, copied into the model at
 * train end, stored as the model's weights in checkpoints (the current weights beside it). */
typedef struct volt_weight_averaging_config {
    uint32_t version;                 /* VOLT_WEIGHT_AVERAGING_CONFIG_VERSION, set by _init */
    volt_optim_average mode;          /* EMA (default: EMAWeightAveraging) or SWA (WeightAveraging's
                                         default: the equal average of every update) */
    float decay;                      /* EMA: in [0, 1); default 0.999 */
    int64_t update_every_n_steps;     /* >= 1; default 1 */
    int64_t update_starting_at_step;  /* -1 (default): None; else steps with index >= it */
    int64_t update_starting_at_epoch; /* -1 (default): None; else also an update at the end of
                                         every epoch with index >= it */
} volt_weight_averaging_config;
#define VOLT_WEIGHT_AVERAGING_CONFIG_VERSION 1u
VOLT_API void volt_weight_averaging_config_init(volt_weight_averaging_config *cfg);
/* cfg NULL: the defaults. Before fit; one per trainer (INVALID_ARG for a second). */
VOLT_API volt_status volt_add_weight_averaging(volt_trainer *t, const volt_weight_averaging_config *cfg);
/* BackboneFinetuning (Lightning's; docs/CALLBACKS.md): the backbone's parameters are frozen
 * at fit start; at the start of epoch unfreeze_backbone_at_epoch they are thawed and added to
 * the optimizer as a new parameter group (volt_optimizer_add_param_group) with lr
 * backbone_initial_lr, or backbone_initial_ratio_lr x the current lr of group 0; at every later
 * epoch start the backbone's lr is multiplied by lambda_func(epoch + 1) (default: multiplier),
 * and with should_align held at group 0's current lr. No scheduler moves the backbone's group,
 * and it has the config's weight decay (torch's add_param_group defaults: backbone parameters
 * of a no-decay group move into it). Its state (and the added group, lr and step count) is in
 * checkpoints: a resumed fit goes on where it stopped. Lightning names the backbone
 * pl_module.backbone; volt names its parameters by pattern. */
typedef struct volt_backbone_finetuning_config {
    uint32_t version;                  /* VOLT_BACKBONE_FINETUNING_CONFIG_VERSION, set by _init */
    const char *backbone;              /* required: the backbone's parameters, as fnmatch globs on
                                          the whole name, comma-separated (as optimizer groups),
                                          e.g. "distilbert.*"; every element must match one */
    int64_t unfreeze_backbone_at_epoch;   /* >= 0; default 10 */
    double multiplier;                 /* > 0; default 1.5 (Lightning's multiplicative lambda_func) */
    double (*lambda_func)(int64_t epoch);   /* NULL (default): multiplier at every epoch */
    double backbone_initial_ratio_lr;  /* >= 0; default 0.1 (doubles, as Lightning's Python floats) */
    double backbone_initial_lr;        /* NAN (default): the ratio's; else >= 0 */
    bool should_align;                 /* default true: never above group 0's lr */
    bool verbose;                      /* default false: rank 0 prints the lrs at each change */
} volt_backbone_finetuning_config;
#define VOLT_BACKBONE_FINETUNING_CONFIG_VERSION 1u
VOLT_API void volt_backbone_finetuning_config_init(volt_backbone_finetuning_config *cfg);
/* Before fit; one per trainer (INVALID_ARG for a second, or a bad field, named). */
VOLT_API volt_status volt_add_backbone_finetuning(volt_trainer *t, const volt_backbone_finetuning_config *cfg);
/* LearningRateMonitor (Lightning's): "lr-<Optimizer>" ("lr-AdamW/pg1", "/pg2", ... with
 * parameter groups) at every optimizer step or once per epoch (logging_interval); _ex's flags
 * add "<name>-momentum" (Adam's beta1, SGD's momentum) and "<name>-weight_decay" (the group's),
 * Lightning's log_momentum and log_weight_decay. volt_add_lr_monitor = _ex with the defaults
 * (Lightning's: interval None, both flags off). Fit fails at its start without a logger
 * (enable_logger false and no *Logger callback; fast_dev_run counts as one), as Lightning's
 * "Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger." */
typedef enum volt_lr_logging_interval {
    VOLT_LR_LOG_AUTO = 0,             /* Lightning's None: the scheduler's own interval (every optimizer
                                         step for a step scheduler or none, once per epoch for an epoch one) */
    VOLT_LR_LOG_STEP,                 /* "step": at every optimizer step, the lr that step uses (a step metric) */
    VOLT_LR_LOG_EPOCH,                /* "epoch": once per epoch, the lr at the epoch's start (an epoch metric:
                                         loggers write it in the epoch's row) */
} volt_lr_logging_interval;
typedef struct volt_lr_monitor_config {
    uint32_t version;                 /* VOLT_LR_MONITOR_CONFIG_VERSION, set by _init */
    bool log_momentum;                /* default false */
    bool log_weight_decay;            /* default false */
    volt_lr_logging_interval logging_interval;   /* version 2; default AUTO (Lightning's None); a
                                         version-1 config logs every step (STEP), as it did */
} volt_lr_monitor_config;
#define VOLT_LR_MONITOR_CONFIG_VERSION 2u
VOLT_API void volt_lr_monitor_config_init(volt_lr_monitor_config *cfg);
VOLT_API volt_status volt_add_lr_monitor_ex(volt_trainer *t, const volt_lr_monitor_config *cfg);
VOLT_API volt_status volt_add_lr_monitor(volt_trainer *t);
/* DeviceStatsMonitor (Lightning's; docs/CALLBACKS.md): around the training batches the
 * loggers write a row for (every log_every_n_steps optimizer steps), the device's stats as
 * step metrics "DeviceStatsMonitor.on_train_batch_start/<stat>" and ".on_train_batch_end/<stat>":
 * on cuda torch.cuda.memory_stats' "allocated_bytes.all.current", ".peak",
 * "reserved_bytes.all.current", ".peak" (volt_trainer_device_memory); on the cpu, and with
 * cpu_stats = 1 on a GPU too, Lightning's host stats "cpu_percent", "cpu_vm_percent",
 * "cpu_swap_percent" (psutil's figures, from /proc). Fit fails at its start without a logger
 * (enable_logger false and no *Logger callback), as Lightning's does. */
typedef struct volt_device_stats_config {
    uint32_t version;                 /* VOLT_DEVICE_STATS_CONFIG_VERSION, set by _init */
    int cpu_stats;                    /* -1 (default, Lightning's None): the host's stats when the
                                         device is the cpu; 1: also beside a GPU's; 0: never (on
                                         the cpu: nothing is logged) */
} volt_device_stats_config;
#define VOLT_DEVICE_STATS_CONFIG_VERSION 1u
VOLT_API void volt_device_stats_config_init(volt_device_stats_config *cfg);
/* Before fit; one per trainer. cfg NULL = the defaults. INVALID_ARG for cpu_stats outside
 * -1..1 or a second one; VERSION for an unknown config version. */
VOLT_API volt_status volt_add_device_stats_monitor(volt_trainer *t, const volt_device_stats_config *cfg);
/* SpikeDetection (Lightning 2.x's): ends fit when a training batch's loss spikes, and writes the
 * batches to skip on a rerun (the spike's and the one before it: the weights it trained may have
 * caused it) to a JSON list, Lightning's TrainingSpikeException. After `warmup` batches of each
 * epoch (batch_idx >= warmup), a loss is a spike when it is not finite (finite_only), or when it
 * is worse than the previous tracked loss (higher with VOLT_MIN, lower with VOLT_MAX) and differs
 * from the running mean of the last `window` tracked losses by at least atol and by at least
 * rtol x that mean (each NAN: not checked). Tracked: every finite loss that was no spike and,
 * with finite_only false, whose batch was finite on every rank. The loss is Lightning's: the step's divided by
 * accumulate_grad_batches (volt_trainer_step_loss). With several ranks each rank checks its own
 * and a spike on any rank ends the fit on every rank, in the same words; rank 0 writes the file.
 * The error is VOLT_ERR_NUMERIC, "... Training spike detected in batch N of epoch E (...)"; the
 * running mean, the last loss and the batches found so far are in checkpoints. */
typedef struct volt_spike_detection_config {
    uint32_t version;                 /* VOLT_SPIKE_DETECTION_CONFIG_VERSION, set by _init */
    volt_mode mode;                   /* VOLT_MIN (default): a loss that rises may be a spike */
    int64_t window;                   /* 10: the running mean's length */
    int64_t warmup;                   /* 1: the first batches of each epoch not checked */
    double atol;                      /* NAN (default, Lightning's None): no absolute tolerance */
    double rtol;                      /* 2.0; NAN: no relative tolerance */
    const char *exclude_batches_path; /* a .json file, or a folder for skip_batches.json in it;
                                         NULL (default): <default_root_dir>/skip_batches.json */
    bool finite_only;                 /* true (default): a loss that is not finite is a spike */
} volt_spike_detection_config;
#define VOLT_SPIKE_DETECTION_CONFIG_VERSION 1u
VOLT_API void volt_spike_detection_config_init(volt_spike_detection_config *cfg);
/* Before fit; one per trainer. INVALID_ARG for a mode other than MIN / MAX, window < 1, warmup
 * < 0, a negative or infinite tolerance, an empty path, a second one; VERSION for an unknown
 * config version. */
VOLT_API volt_status volt_add_spike_detection(volt_trainer *t, const volt_spike_detection_config *cfg);
/* Timer (Lightning's callback): how long each stage took, and optionally a limit on the
 * training time, checked after every training batch (VOLT_TIMER_STEP, Lightning's default: a
 * collective per batch with several ranks) or at each train epoch end (VOLT_TIMER_EPOCH), and
 * when the training loop starts (a resumed fit whose checkpoint spent it trains no step). When the time is spent, rank 0's clock decides for every rank
 * (volt_trainer_broadcast_bool: a collective at each check), fit is asked to stop
 * (volt_trainer_request_stop: min_epochs / min_steps still apply) and, verbose, rank 0 prints
 * "Time limit reached. Elapsed time is H:MM:SS. Signaling Trainer to stop.". The train time is
 * kept in checkpoints ({"time_elapsed": {...}}): a resumed fit counts on from it. (The
 * trainer's own max_time is Lightning's Trainer(max_time): a step-interval limit without the
 * callback.) One per trainer. */
typedef enum { VOLT_TIMER_STEP = 0, VOLT_TIMER_EPOCH = 1 } volt_timer_interval;
typedef struct volt_timer_config {
    uint32_t version;                 /* VOLT_TIMER_CONFIG_VERSION, set by _init */
    const char *duration;             /* NULL or "" (default): no limit, times only; "DD:HH:MM:SS" */
    volt_timer_interval interval;     /* VOLT_TIMER_STEP (default) or VOLT_TIMER_EPOCH */
    bool verbose;                     /* true (default): the line above when the limit stops fit */
} volt_timer_config;
#define VOLT_TIMER_CONFIG_VERSION 1u
typedef struct volt_timer volt_timer;   /* owned by the trainer */
VOLT_API void volt_timer_config_init(volt_timer_config *cfg);
/* Before fit. *out (may be NULL): the handle for the queries, valid until the trainer is
 * destroyed. INVALID_ARG for a duration that is not "DD:HH:MM:SS" or no time, another interval
 * or a second one; VERSION for an unknown config version. */
VOLT_API volt_status volt_add_timer(volt_trainer *t, const volt_timer_config *cfg, volt_timer **out);
/* Lightning's time_elapsed(stage) / time_remaining(stage): seconds of the stage's last run
 * (VOLT_STAGE_FIT: the training loop, a resumed fit's counted time added; VALIDATE: the last
 * validation, the sanity check's or one inside fit included; TEST; PREDICT), up to now while it
 * runs; 0 before it ran. remaining: duration - elapsed (INFINITY without a duration). NAN for
 * a NULL timer or another stage. */
VOLT_API double volt_timer_time_elapsed(const volt_timer *tm, volt_stage stage);
VOLT_API double volt_timer_time_remaining(const volt_timer *tm, volt_stage stage);
/* "DD:HH:MM:SS" (Lightning's max_time string; the seconds may have a fraction) into seconds:
 * VOLT_OK, or VOLT_ERR_INVALID_ARG for anything else (a negative or fractional day, hour or
 * minute included). */
VOLT_API volt_status volt_parse_duration(const char *s, double *seconds);
/* GradientAccumulationScheduler (Lightning's): from epoch epochs[i] on, accumulate factors[i]
 * batches per optimizer step (epochs 0-based; before the first epoch given, 1). Sets the
 * factor at each train epoch start, and at train start for the epoch a resumed fit is in.
 * INVALID_ARG for n < 1, a negative or repeated epoch, a factor < 1, or a trainer whose
 * accumulate_grad_batches is not 1 (Lightning's "set one or the other"). */
VOLT_API volt_status volt_add_gradient_accumulation_scheduler(volt_trainer *t, const int64_t *epochs,
                                                              const int64_t *factors, int n);
/* ThroughputMonitor (Lightning's, with fabric's Throughput; docs/CALLBACKS.md): over a window
 * of the last window_size batches of a stage, batches, samples, items (length_fn) and FLOPs
 * (flops_fn) per second, per device ("device/samples_per_sec", ...) and, with several ranks,
 * globally (the device's times the world size), MFU (device FLOP/s over the device's peak),
 * and the running totals (time, batches, samples, lengths), logged with the stage as prefix:
 * "train/device/samples_per_sec" every log_every_n_steps optimizer steps, "validate/...",
 * "test/..." and "predict/..." at the end of those loops. The time is the trainer's clock (CLOCK_MONOTONIC) at
 * batch ends; validation inside fit is not counted in train's time. The fns get the trainer
 * (for volt_trainer_stage) and the batch as the hooks see it (on a device: read its host
 * metadata, size and sample_ids, not its data, or every batch waits for the device). */
typedef int64_t (*volt_batch_count_fn)(void *ctx, volt_trainer *t, const volt_batch *b);
typedef double (*volt_batch_flops_fn)(void *ctx, volt_trainer *t, const volt_batch *b);
typedef struct volt_throughput_config {
    uint32_t version;                 /* VOLT_THROUGHPUT_CONFIG_VERSION, set by _init */
    int64_t window_size;              /* batches in the rolling window, >= 2; default 100 */
    const char *separator;            /* between stage, "device" and the name; default "/" (copied) */
    volt_batch_count_fn batch_size_fn;/* samples in a batch; NULL (default): b->size */
    volt_batch_count_fn length_fn;    /* items (tokens) in a batch, >= its samples; NULL (default):
                                         no items_per_sec / lengths */
    volt_batch_flops_fn flops_fn;     /* FLOPs of a batch on this device (e.g. volt_distilbert_flops);
                                         NULL (default): no flops_per_sec / mfu */
    void *fn_ctx;                     /* the fns' ctx; borrowed for the trainer's life */
    double peak_tflops;               /* the device's peak TFLOP/s for the run's precision; 0
                                         (default): volt_available_flops(device_name, ...); no peak:
                                         no mfu */
    const char *device_name;          /* the device's name for the peak table (e.g. "NVIDIA H100
                                         80GB HBM3"); NULL (default): the trainer's device's own
                                         (volt_trainer_device_name; none on cpu) (copied) */
} volt_throughput_config;
#define VOLT_THROUGHPUT_CONFIG_VERSION 1u
VOLT_API void volt_throughput_config_init(volt_throughput_config *cfg);
/* Before fit / validate / test. INVALID_ARG for window_size < 2, an empty separator or a
 * negative peak_tflops. */
VOLT_API volt_status volt_add_throughput_monitor(volt_trainer *t, const volt_throughput_config *cfg);
/* Dense peak FLOP/s of a device by its name (case-insensitive; "H100 SXM", "NVIDIA H100 80GB
 * HBM3", "NVIDIA H200", "A100", ...) for a trainer precision ("32-true" is TF32 when
 * matmul_precision is "high" or "medium"); 0 when the table does not know the device or it
 * lacks that dtype (Lightning's get_available_flops, its figures). */
VOLT_API double volt_available_flops(const char *device_name, const char *precision, const char *matmul_precision);
/* Lightning's OnExceptionCheckpoint: when fit fails or is interrupted (SIGINT / SIGTERM,
 * cfg.handle_signals), save a full checkpoint to <dirpath>/<filename>.safetensors (filename
 * NULL: "on_exception") to resume from with ckpt_path. An interruption stops at an optimizer
 * step boundary, so that resume continues exactly (bitwise, as from any checkpoint). After
 * other errors it saves the weights as the failure left them, on one process only and not
 * after a comm failure (VOLT_ERR_TIMEOUT, VOLT_ERR_COMM: a rank may be gone); stderr says
 * when it did not save. An existing file at the path is replaced. */
VOLT_API volt_status volt_add_on_exception_checkpoint(volt_trainer *t, const char *dirpath, const char *filename);
VOLT_API volt_status volt_add_progress_bar(volt_trainer *t);
VOLT_API volt_status volt_add_csv_logger(volt_trainer *t);
/* ModelSummary (the parameter table at fit start) + the results table after validate/test. */
VOLT_API volt_status volt_add_model_summary(volt_trainer *t);
/* TensorBoard: events.out.tfevents.<time>.<host> in the log dir (scalars per step and epoch,
 * hparams, the run config as text), rank 0. */
VOLT_API volt_status volt_add_tensorboard_logger(volt_trainer *t);
/* At the end of fit, SVG plots of <log_dir>/metrics.csv: loss.svg and accuracy.svg (train
 * and val against step), rank 0. */
VOLT_API volt_status volt_add_metric_plots(volt_trainer *t);
/* Write SVG plots of a metrics.csv: for each group ("loss": *_loss*, "acc": *_acc*) with data,
 * <out_prefix><group>.svg. *n_written gets how many files were written. */
VOLT_API volt_status volt_plot_metrics_csv(const char *csv_path, const char *out_prefix, int *n_written, char *err, size_t errlen);
/* ModelCheckpoint's results (the first one added). NULL / NAN when none yet. */
VOLT_API const char *volt_trainer_best_model_path(const volt_trainer *t);
VOLT_API double volt_trainer_best_model_score(const volt_trainer *t);

/* ---- for callbacks (trainer/ implements these; callbacks/ uses them) ---------------------- */
/* The resolver registered with volt_trainer_set_ckpt_resolver, NULL if none (borrowed). */
VOLT_API const volt_ckpt_resolver *volt_trainer_ckpt_resolver(const volt_trainer *t);
/* Log a metric from a callback (LearningRateMonitor), like volt_log_value from a step:
 * same flags, the value becomes a metric and, for loggers, a fresh metric of this step. */
VOLT_API volt_status volt_trainer_log_metric(volt_trainer *t, const char *name, double value, unsigned flags);
/* The logger picks the run's log directory (<root>/<logger_name>/version_N) in on_fit_start /
 * on_test_start when volt_trainer_log_dir is still NULL (a resumed run too: it never takes
 * a folder from its checkpoint); the string is copied. Called on every rank: rank 0's dir
 * is the one kept (the trainer broadcasts it under distributed strategies). */
VOLT_API volt_status volt_trainer_set_log_dir(volt_trainer *t, const char *dir);
/* The last error (volt_trainer_errmsg) is a verdict of the ranks: every rank failed with these
 * same words ("... (rank R of N found it; ...)"), so one rank (rank 0) printing them says it
 * all; false for a rank's own error, and on one process. */
VOLT_API bool volt_trainer_error_agreed(const volt_trainer *t);
/* Record an error on the trainer (volt_trainer_errmsg) from a callback and return st; the
 * hook then returns st and the trainer keeps this message (it may prefix the hook name). */
VOLT_API volt_status volt_trainer_fail(volt_trainer *t, volt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, for a failure every rank reaches alike in the same words: a decision made from
 * values every rank holds the same (an all-reduced loss, a broadcast flag), so every rank fails
 * at the same hook. The error is then agreed (volt_trainer_error_agreed; not on one process):
 * one rank says it. Only for such decisions: a rank's own failure uses volt_trainer_fail. */
VOLT_API volt_status volt_trainer_fail_agreed(volt_trainer *t, volt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The callbacks added so far, in hook order: how many, and the i-th one's table name (NULL
 * for an index out of range). */
VOLT_API int volt_trainer_num_callbacks(const volt_trainer *t);
VOLT_API const char *volt_trainer_callback_name(const volt_trainer *t, int i);
/* Move the callback at index `from` to index `to`, the others keeping their order (how the
 * default callbacks are arranged: the logger first, checkpointing last). INVALID_ARG for an
 * index out of range. */
VOLT_API volt_status volt_trainer_move_callback(volt_trainer *t, int from, int to);
/* True while a module's configure_callbacks runs (module table version 4); *first (may be NULL)
 * gets the index of the first callback it added: those before it are the trainer's, and any of
 * them with the table of one it adds is replaced once the hook returns. A callback that allows
 * one per trainer looks for its twin from there on. */
VOLT_API bool volt_trainer_configuring_callbacks(const volt_trainer *t, int *first);
/* Batches the running validation / test / predict loop will run of its current loader (after
 * limits; the sanity check's count while sanity checking); -1 outside such a loop or when unknown. */
VOLT_API int64_t volt_trainer_num_eval_batches(const volt_trainer *t);
/* Decisions every rank must take alike (docs/CALLBACKS.md, "Callbacks that must agree across
 * ranks"). Collective: every rank calls them, in the same order, the same number of times
 * (one rank skipping a call leaves the others waiting until the comm's timeout). On one
 * process *out is the input. A failed exchange (a dead or late rank: VOLT_ERR_TIMEOUT, the
 * comm's error) returns its status with volt_trainer_errmsg set; *out is then unchanged.
 * reduce_boolean_decision (Lightning's strategy.reduce_boolean_decision): all = true: true
 * only if every rank's decision is true; all = false: true if any rank's is. */
VOLT_API volt_status volt_trainer_reduce_boolean_decision(volt_trainer *t, bool decision, bool all, bool *out);
/* Rank 0's value on every rank (Lightning's strategy.broadcast of a bool): e.g. a decision
 * taken from a clock, which differs from rank to rank. */
VOLT_API volt_status volt_trainer_broadcast_bool(volt_trainer *t, bool value, bool *out);
/* Rank root's bytes into every rank's buf (Lightning's strategy.broadcast(obj, src)): bytes
 * must be the same on every rank (send a count first when it is not known everywhere). On
 * one process nothing moves. A root outside the ranks or a NULL buf: VOLT_ERR_INVALID_ARG. */
VOLT_API volt_status volt_trainer_broadcast(volt_trainer *t, void *buf, size_t bytes, int root);
/* Every rank's bytes on every rank (Lightning's LightningModule.all_gather / strategy.all_gather):
 * recv holds world_size x bytes, rank r's at recv + r x bytes (send may be this rank's own
 * slot); bytes the same on every rank. One process: send copied into recv. NULL buffers or a
 * size that overflows: VOLT_ERR_INVALID_ARG. */
VOLT_API volt_status volt_trainer_all_gather(volt_trainer *t, const void *send, size_t bytes, void *recv);
/* values[0..n) reduced over the ranks in place (Lightning's strategy.reduce(tensor, reduce_op)):
 * the same n on every rank; SUM and MEAN add in rank order, so every rank gets the same bits;
 * MAX and MIN propagate a NaN, as torch's. One process: unchanged. */
typedef enum { VOLT_REDUCE_SUM = 0, VOLT_REDUCE_MEAN = 1, VOLT_REDUCE_MAX = 2, VOLT_REDUCE_MIN = 3 } volt_reduce_op;
VOLT_API volt_status volt_trainer_all_reduce(volt_trainer *t, double *values, int64_t n, volt_reduce_op op);
/* A folder this fit will write (docs/CALLBACKS.md, "Folders checked at fit start"); from
 * on_fit_start only, on every rank alike. Once every on_fit_start has run, before the sanity
 * check and the first batch, rank 0 creates the folder (with its parents, as a save would) and
 * creates and removes a uniquely named hidden file in it; with VOLT_WRITES_CHECKPOINTS under a
 * sharding strategy (every rank writes its shard files there) each other rank then does the same
 * without creating it. A failure fails the fit on every rank, nothing trained, with "<who>: cannot
 * write to <what> '<dir>': <reason> (checked at fit start)". who: the callback ("ModelCheckpoint"),
 * what: the setting naming the folder ("dirpath"); the strings are copied. VOLT_ERR_STATE outside
 * fit's on_fit_start (validate / test / predict check nothing). */
enum { VOLT_WRITES_CHECKPOINTS = 1u };
VOLT_API volt_status volt_trainer_check_writable(volt_trainer *t, const char *who, const char *what, const char *dir,
                                                 unsigned flags);

/* Which public call is running (Lightning's trainer.state.fn, TrainerFn): set by fit, validate,
 * test, predict (and their _dm forms) from their first line to their return, set-up, every hook
 * and on_exception included, whether they succeed or fail; VOLT_FN_NONE between calls. So a
 * callback asks "is this validation part of a fit?" with volt_trainer_state_fn(t) ==
 * VOLT_FN_FIT while volt_trainer_stage(t) is VALIDATE. lr_find runs VOLT_FN_TUNE (Lightning
 * 1.x's TrainerFn.TUNING; 2.x runs its tuner inside fit with the user's callbacks swapped out):
 * its train steps call on_before_backward / on_after_backward / on_before_optimizer_step and
 * the module's hooks, and those must not take it for a fit. Appended values may follow. */
typedef enum volt_trainer_fn {
    VOLT_FN_NONE, VOLT_FN_FIT, VOLT_FN_VALIDATE, VOLT_FN_TEST, VOLT_FN_PREDICT, VOLT_FN_TUNE
} volt_trainer_fn;
VOLT_API volt_trainer_fn volt_trainer_state_fn(const volt_trainer *t);

/* ---- precision (cfg.precision; the plugins are described in volt/precision.h) ---------------- */
/* The grad scaler of a 16-mixed run (1 and 0 otherwise): current loss scale, good steps
 * since the last change, optimizer steps skipped for inf/NaN gradients (a skipped step
 * does not count in global_step and does not advance the LR scheduler). */
VOLT_API float volt_trainer_grad_scale(const volt_trainer *t);
VOLT_API int64_t volt_trainer_grad_scaler_growth_tracker(const volt_trainer *t);
VOLT_API int64_t volt_trainer_skipped_steps(const volt_trainer *t);

/* Model-state bytes this process holds for the trainer's model (0 before fit/validate
 * sets it up). param_bytes: parameter storage (its dtype, padded unit buffers); grads are
 * always f32; master_bytes: f32 copies held besides the parameters (0: in the mixed modes
 * the f32 parameters are the masters and the 16-bit operands live in the step only). */
typedef struct volt_param_memory {
    int64_t numel;               /* parameters, unpadded */
    volt_dtype param_dtype;
    int64_t param_bytes, grad_bytes, master_bytes, optim_bytes;
    volt_dtype optim_dtype;      /* optimizer state dtype */
} volt_param_memory;
VOLT_API volt_status volt_trainer_param_memory(const volt_trainer *t, volt_param_memory *out);

#ifdef __cplusplus
}
#endif
#endif
