/* core/cuda/kernels.h — how the "cuda" backend's kernel table is assembled.
 *
 * The .cu files hold the device kernels behind extern "C" launchers (plain pointers and
 * sizes, a cudaStream_t passed as void *); the .c files next to them are the op glue that
 * reads a volt_node (core/internal.h) and calls the launchers. Each part of the op list
 * fills its own rows of the table; core/cuda/backend.c calls every filler once when the
 * table is built. An op whose row stays empty reports "not implemented on backend 'cuda'"
 * from the step (core/step.c), never runs a stand-in. */
#ifndef VOLT_CUDA_KERNELS_H
#define VOLT_CUDA_KERNELS_H
#include "core/internal.h"

/* core/cuda/attention_op.c: VOLT_OP_ATTENTION (fused, FlashAttention-2 style, with
 * attention dropout redrawn from the Philox counters in backward). */
void volt__cuda_kernels_attention(volt_kernel *table);
/* core/cuda/dropout_op.c: VOLT_OP_DROPOUT (masks bit-identical to the CPU backend's). */
void volt__cuda_kernels_dropout(volt_kernel *table);

#endif
