/* The trainer.* keys: one row per volt_trainer_config field (include/volt/trainer.h).
 * run_config_json and run_fingerprint are the program's to set, not keys. */
#include "cli/cli_internal.h"
#include "strategies/strategy.h"

#define ROW(f, ty, help, ...) { #f, VOLT__TF_##ty, offsetof(volt_trainer_config, f), help, __VA_ARGS__, 0, NULL }
/* The choices come from a registry: one list, not a copy of it. */
#define ROW_FN(f, ty, help, choices_fn, ...) \
    { #f, VOLT__TF_##ty, offsetof(volt_trainer_config, f), help, __VA_ARGS__, 0, choices_fn }
/* A count or a fraction (field frac): Lightning's int-or-float keys. */
#define ROW_LIMIT(f, frac, help, alias, min) \
    { #f, VOLT__TF_LIMIT, offsetof(volt_trainer_config, f), help, alias, NULL, min, 1e15, NULL, \
      offsetof(volt_trainer_config, frac), NULL }

const volt__trainer_field volt__trainer_fields[] = {
    ROW(max_epochs, I64, "epochs to run; -1 = no limit (unset: 1000 unless max_steps is set)", "epochs", NULL, -1, 1e15, "null"),
    ROW(max_steps, I64, "optimizer steps to run; -1 = no limit", "max-steps", NULL, -1, 1e15, NULL),
    ROW(accumulate_grad_batches, I64, "batches per optimizer step", "accumulate-grad-batches", NULL, 1, 1e9, NULL),
    ROW(gradient_clip_val, F32, "clip gradients at this norm/value; 0 = off", "gradient-clip-val", NULL, 0, 1e30, NULL),
    ROW(gradient_clip_algorithm, STR, "how gradient_clip_val clips", "gradient-clip-algorithm", "norm|value", 0, 0, NULL),
    ROW_LIMIT(val_check_interval, val_check_fraction, "validate every N train batches, or a fraction in (0, 1) of the epoch; 0 = at epoch end", "val-check-interval", 0),
    ROW(check_val_every_n_epoch, I64, "validate every N epochs; 0: every val_check_interval batches across epochs (Lightning's None)", "check-val-every-n-epoch", NULL, 0, 1e15, NULL),
    ROW_LIMIT(limit_train_batches, limit_train_fraction, "at most N train batches per epoch, or a fraction in (0, 1) of them; -1 = all", "limit-train-batches", -1),
    ROW_LIMIT(limit_val_batches, limit_val_fraction, "at most N val batches, or a fraction in (0, 1) of them; -1 = all, 0 = no validation", "limit-val-batches", -1),
    ROW_LIMIT(limit_test_batches, limit_test_fraction, "at most N test batches, or a fraction in (0, 1) of them; -1 = all", "limit-test-batches", -1),
    ROW_LIMIT(limit_predict_batches, limit_predict_fraction, "at most N predict batches, or a fraction in (0, 1) of them; -1 = all", "limit-predict-batches", -1),
    ROW(num_sanity_val_steps, I64, "val batches run before training; 0 = no sanity check, -1 = all", "num-sanity-val-steps", NULL, -1, 1e15, NULL),
    ROW(log_every_n_steps, I64, "logger row every N optimizer steps", "log-every-n-steps", NULL, 1, 1e15, NULL),
    ROW(fast_dev_run, I64, "N > 0: N batches of train/val/test, no checkpoints or logs", "fast-dev-run", NULL, 0, 1e15, NULL),
    ROW(deterministic, BOOL, "fixed-order reductions on every backend; false is refused (volt has no nondeterministic kernels)", NULL, NULL, 0, 0, NULL),
    ROW(seed, U64, "parameter init, shuffle, split and dropout seed", "seed", NULL, 0, 9007199254740992.0, NULL),
    ROW(default_root_dir, STR, "logs and checkpoints go under this folder", "root", NULL, 0, 0, NULL),
    ROW(enable_progress_bar, BOOL, "the progress bar on stderr", "no-progress", NULL, 0, 0, NULL),
    ROW(enable_checkpointing, BOOL, "ModelCheckpoint (added when none is)", NULL, NULL, 0, 0, NULL),
    ROW(enable_logger, BOOL, "CSV and TensorBoard loggers under default_root_dir/logger_name", NULL, NULL, 0, 0, NULL),
    ROW(logger_name, STR, "log folder name under default_root_dir", NULL, NULL, 0, 0, NULL),
    ROW(precision, STR, "32-true, 16-mixed, bf16-mixed, bf16-true, 16-true (or 32, 16, bf16)", "precision",
        "32-true|16-mixed|bf16-mixed|bf16-true|16-true|32|16|bf16", 0, 0, NULL),
    ROW_FN(strategy, STR, "how training is spread over devices and processes (docs/STRATEGIES.md); zero1 and zero2 "
           "name deepspeed_stage_1 and _2; auto: ddp when devices or num_nodes > 1 or a launcher started several processes, else single", volt__strategy_choices, "strategy", NULL, 0, 0, NULL),
    ROW(accelerator, STR, "where parameters, steps and batches live: auto ($VOLT_ACCELERATOR, else cuda when present, else cpu), "
        "cpu, cpu-strict (device memory unreadable from host code: tests), cuda (or gpu)", "accelerator",
        "auto|cpu|cpu-strict|cuda|gpu", 0, 0, NULL),
    ROW(devices, INT, "processes (ranks) per node, one device each; N > 1 with a distributed strategy launches N ranks with mpirun",
        "devices", NULL, 1, 4096, NULL),
    ROW(num_nodes, INT, "nodes of the MPI job", "num-nodes", NULL, 1, 4096, NULL),
    ROW(grad_scaler_init_scale, F32, "16-mixed: initial loss scale", NULL, NULL, 0, 0, NULL),
    ROW(grad_scaler_growth_factor, F32, "16-mixed: scale growth after growth_interval good steps", NULL, NULL, 0, 0, NULL),
    ROW(grad_scaler_backoff_factor, F32, "16-mixed: scale factor on inf/NaN grads", NULL, NULL, 0, 0, NULL),
    ROW(grad_scaler_growth_interval, I64, "16-mixed: consecutive good steps before growth", NULL, NULL, 1, 1e15, NULL),
    ROW(optimizer_dtype, STR, "optimizer state storage", "optimizer-dtype", "auto|f32|bf16|f16", 0, 0, NULL),
    ROW(enable_model_summary, BOOL, "ModelSummary at fit start, results table after validate/test", NULL, NULL, 0, 0, NULL),
    ROW(enable_tensorboard, BOOL, "TensorBoard event file beside metrics.csv (with enable_logger)", NULL, NULL, 0, 0, NULL),
    ROW(enable_plots, BOOL, "SVG plots of metrics.csv at the end of fit (with enable_logger)", NULL, NULL, 0, 0, NULL),
    ROW(compile, BOOL, "capture the training step as a device graph after one eager step per batch shape and replay it "
        "(needs graph capture: cuda; docs/CUDA.md)", "compile", NULL, 0, 0, NULL),
    ROW(matmul_precision, STR, "f32 GEMMs: highest (full f32), high or medium (TF32 allowed; cuda only)", "matmul-precision",
        "highest|high|medium", 0, 0, NULL),
    ROW(strategy_reduce_dtype, STR, "gradient reduction dtype of the distributed strategies (bf16: half the bytes)",
        NULL, "fp32|bf16", 0, 0, NULL),
    ROW(strategy_comm, STR, "comm backend: auto (nccl on cuda, else mpi), mpi (host buffers), nccl", NULL,
        "auto|mpi|nccl", 0, 0, NULL),
    ROW(profiler, STR, "simple: time each action (training batch, data, validation/test step, every hook, checkpoint load) "
        "and print Lightning's profiler table after fit and test (stdout)", "profiler", "simple", 0, 0, NULL),
    ROW(max_time, STR, "stop fit at the first optimizer step after this much training time, \"DD:HH:MM:SS\" (as Lightning)",
        "max-time", NULL, 0, 0, NULL),
    ROW(min_epochs, I64, "a stop asked for earlier (early stopping, max_time) waits until this many epochs ran; -1 = none",
        "min-epochs", NULL, -1, 1e15, NULL),
    ROW(min_steps, I64, "the same in optimizer steps; -1 = none", "min-steps", NULL, -1, 1e15, NULL),
    ROW_LIMIT(overfit_batches, overfit_fraction, "N > 0 (or a fraction in (0, 1) of them): train on the same first N batches every "
              "epoch (no shuffling) and validate on N val batches", "overfit-batches", 0),
    ROW(detect_anomaly, BOOL, "read back every op's output and gradient in training steps and fail at the first NaN, naming "
        "the op (slow; not with compile)", "detect-anomaly", NULL, 0, 0, NULL),
    ROW(handle_signals, BOOL, "the first Ctrl-C (SIGINT) or SIGTERM stops the run at the next batch end (fit: an optimizer "
        "step, on every rank alike; the apps then save --checkpoint.on_exception's file and exit 130 / 143); a second "
        "one ends the process at once; false: the signals' default action",
        NULL, NULL, 0, 0, NULL),
    ROW(resume_anyway, BOOL, "resume even when the checkpoint's data/model fingerprint differs", "resume-anyway", NULL, 0, 0, NULL),
    ROW(use_distributed_sampler, BOOL, "with several ranks, cut each loader into the rank's shard (Lightning's "
        "DistributedSampler); false: every rank reads all of its data", NULL, NULL, 0, 0, NULL),
};
const int volt__n_trainer_fields = (int)(sizeof volt__trainer_fields / sizeof volt__trainer_fields[0]);
