/* libnccl.so.2, loaded at run time (strategies/comm/nccl/nccl_lib.c): the entry points the
 * NCCL comm backend calls, resolved by core/dynlib.h, like core/cuda/gemm.c's cuBLASLt. Private to
 * strategies/comm/nccl/. */
#ifndef VOLT_NCCL_LIB_H
#define VOLT_NCCL_LIB_H
#include <stddef.h>
#include <nccl.h>

#define VOLT_NCCL_FUNCS(X) X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommFinalize) \
    X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclGetLastError) \
    X(ncclAllReduce) X(ncclReduceScatter) X(ncclAllGather) X(ncclBroadcast)

typedef struct volt_nccl_lib {
#define VOLT_NCCL_MEMBER_(f) __typeof__(&f) f;
    VOLT_NCCL_FUNCS(VOLT_NCCL_MEMBER_)
#undef VOLT_NCCL_MEMBER_
    int version;                 /* ncclGetVersion's code (>= 21400) */
} volt_nccl_lib;

/* The library, loaded once per process: $VOLT_NCCL alone when set, else libnccl.so.2 from the
 * loader's path, then the toolkit's lib directory (VOLT_NCCL_LIBDIR). NULL with err naming what
 * was tried (and how to fix it) when it cannot be loaded or is too old. */
const volt_nccl_lib *volt__nccl_lib(char *err, size_t errlen);
#endif
