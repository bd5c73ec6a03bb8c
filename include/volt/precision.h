/* volt/precision.h — 16-bit floating point: conversions, the cast op, the step's compute
 * dtype, and what the trainer's precision plugin (cfg.precision) exposes. See
 * docs/PRECISION.md for what each mode does.
 *
 * Formats: bf16 is the top half of an IEEE f32 (8-bit exponent, 7-bit mantissa); f16 is
 * IEEE binary16 (5-bit exponent, 10-bit mantissa, subnormals down to 2^-24, max 65504).
 * Values are passed around as their bit patterns in uint16_t.
 *
 * Conversions to 16 bits round to nearest, ties to even; values too large become inf (a
 * finite f32 above the largest 16-bit value rounds to inf exactly as IEEE says: f16 from
 * 65520 up); NaN stays NaN with its sign, is quieted, and keeps the top payload bits.
 * Conversions to f32 are exact (f16 subnormals included); an f16 NaN comes back quiet, a
 * bf16 NaN keeps its bits (bf16 -> f32 is a shift). The array versions give the same bits
 * as the scalar ones, are vectorisable loops, and run on OpenMP threads for large n. */
#ifndef VOLT_PRECISION_H
#define VOLT_PRECISION_H

#include "volt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- conversions ---------------------------------------------------------------- */
uint16_t volt_f32_to_bf16(float x);
float volt_bf16_to_f32(uint16_t h);
uint16_t volt_f32_to_f16(float x);
float volt_f16_to_f32(uint16_t h);

/* n elements; src and dst must not overlap. */
void volt_f32_to_bf16_array(const float *src, uint16_t *dst, int64_t n);
void volt_bf16_to_f32_array(const uint16_t *src, float *dst, int64_t n);
void volt_f32_to_f16_array(const float *src, uint16_t *dst, int64_t n);
void volt_f16_to_f32_array(const uint16_t *src, float *dst, int64_t n);
/* Between any two of f32, bf16, f16 (same dtype: a copy). n elements, no overlap.
 * Returns VOLT_ERR_DTYPE for other dtypes. */
volt_status volt_convert(void *dst, volt_dtype dst_dt, const void *src, volt_dtype src_dt, int64_t n);

/* True for f32, bf16, f16. */
bool volt_dtype_is_float(volt_dtype dt);

/* ---- the cast op ------------------------------------------------------------------ */
/* x (float dtype) as dtype dt (f32, bf16 or f16), same shape. Returns x itself when it
 * already has dt. Differentiable: the f32 gradient of the result is added to x's f32
 * gradient unchanged (gradients are f32 for every dtype). */
volt_tensor *volt_cast(volt_step *s, volt_tensor *x, volt_dtype dt);

/* ---- the step's compute dtype ------------------------------------------------------- */
/* The dtype of the GEMM operands of volt_linear and volt_matmul: f32 (default) or bf16/f16
 * = "16-bit compute": both operands (and, in backward, the upstream gradient) are read as
 * their 16-bit roundings, products accumulate in f32, outputs and grads are f32 (the GEMM
 * node records the dtype; no cast node or 16-bit copy is stored). The trainer sets it from
 * the precision plugin; it stays until changed. Any op also accepts 16-bit inputs (a
 * parameter stored in 16 bits, a cast result): GEMMs and layout ops read them directly,
 * other ops compute on an exact f32 copy made by a recorded cast node. */
volt_status volt_step_set_compute_dtype(volt_step *s, volt_dtype dt);
volt_dtype volt_step_compute_dtype(const volt_step *s);

/* ---- precision plugins, as the trainer uses them ------------------------------------- */
/* Precision names as in Lightning: "32-true", "16-mixed", "bf16-mixed", "bf16-true",
 * "16-true"; aliases "32" (32-true), "16" (16-mixed), "bf16" (bf16-mixed). */
typedef struct volt_precision_info {
    const char *name;            /* canonical name ("bf16-mixed" for "bf16") */
    volt_dtype compute_dtype;    /* GEMM operands */
    volt_dtype param_dtype;      /* parameter storage */
    bool master_weights;         /* optimizer updates f32 params; 16-bit copies made per op */
    bool grad_scaling;           /* dynamic loss scaling (16-mixed) */
} volt_precision_info;

/* Describe a precision by name; VOLT_ERR_UNSUPPORTED for an unknown name. */
volt_status volt_precision_lookup(const char *name, volt_precision_info *out);
/* "32-true, 16-mixed, bf16-mixed, bf16-true, 16-true (aliases 32, 16, bf16)" */
const char *volt_precision_names(void);

typedef struct volt_trainer volt_trainer;

/* The grad scaler of a 16-mixed run (1 and 0 otherwise): current loss scale, good steps
 * since the last change, optimizer steps skipped for inf/NaN gradients (a skipped step
 * does not count in global_step and does not advance the LR scheduler). */
float volt_trainer_grad_scale(const volt_trainer *t);
int64_t volt_trainer_grad_scaler_growth_tracker(const volt_trainer *t);
int64_t volt_trainer_skipped_steps(const volt_trainer *t);

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
volt_status volt_trainer_param_memory(const volt_trainer *t, volt_param_memory *out);

#ifdef __cplusplus
}
#endif
#endif
