/* The cast op's front-end and the step's compute dtype (volt/ops.h); the kernel scratch is the
 * step's (core/step.c: device memory from its backend).
 *
 * How 16-bit tensors flow through ops: a tensor of any float dtype may be an op's input.
 * Kernels that take 16-bit inputs (volt__op_takes_16bit: GEMMs, layout copies, the cast
 * itself) read them directly; for every other op volt__op (core/step.c) first makes an
 * exact f32 copy with a recorded CAST node, so the op computes in f32 and its gradient
 * reaches the 16-bit tensor's f32 grad (for a parameter stored in 16 bits: the unit's f32
 * grad buffer). Gradients are f32 for every dtype. The step's compute dtype does not go
 * through casts: GEMM nodes record it and their kernels round the operands (core/cpu/basic.c). */
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
#include "volt/ops.h"
#include "volt/dtype.h"

volt_tensor *volt_cast(volt_step *s, volt_tensor *x, volt_dtype dt) {
    if (volt__any_null(s, "cast", 1, &x)) return NULL;
    if (!volt__is_float(x)) return volt__dtype_err(s, "cast", x, "a float input (f32, bf16, f16)");
    if (!volt_dtype_is_float(dt)) {
        volt_step_fail(s, VOLT_ERR_DTYPE, "cast: target dtype %s is not f32, bf16 or f16",
                       (unsigned)dt < VOLT_DTYPE_COUNT ? volt_dtype_name(dt) : "?");
        return NULL;
    }
    if (x->dtype == dt) return x;
    return volt__op(s, VOLT_OP_CAST, 1, &x, dt, x->shape, NULL);
}

volt_status volt_step_set_compute_dtype(volt_step *s, volt_dtype dt) {
    if (!s) return VOLT_ERR_INVALID_ARG;
    if (!volt_dtype_is_float(dt)) return VOLT_ERR_DTYPE;
    s->compute_dtype = dt;
    return VOLT_OK;
}

volt_dtype volt_step_compute_dtype(const volt_step *s) { return s ? s->compute_dtype : VOLT_F32; }

bool volt__op_takes_16bit(volt_op_id op) {
    switch (op) {
    case VOLT_OP_CAST: case VOLT_OP_LINEAR: case VOLT_OP_MATMUL:
    case VOLT_OP_RESHAPE: case VOLT_OP_PERMUTE: case VOLT_OP_SLICE: case VOLT_OP_CONCAT:
        return true;
    default:
        return false;
    }
}
