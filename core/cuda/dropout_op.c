/* VOLT_OP_DROPOUT on the cuda backend: not written yet (the row stays empty, so the step
 * reports the op as not implemented on 'cuda'). */
#include "core/cuda/kernels.h"

void volt__cuda_kernels_dropout(volt_kernel *table) { (void)table; }
