/* tests/cudasim/include/cudasim_ext.h — what the simulator's runtime (libvolt_cudasim.so)
 * offers beyond cudart's API, for the other simulated libraries (nccl.cc). Not part of CUDA. */
#pragma once
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif
/* cudaLaunchHostFunc(s, fn, user), and release(user) once the last copy of that work is gone:
 * after it ran; or, when s was being captured, when the graph and every executable graph made
 * from it are destroyed (each launch runs fn(user) again). Also called when the launch fails.
 * A real runtime ties such lifetimes to a graph with cudaUserObjectCreate +
 * cudaGraphRetainUserObject. */
cudaError_t cudasim_launch_host_func_owned(cudaStream_t s, cudaHostFn_t fn, void *user, void (*release)(void *));
#ifdef __cplusplus
}
#endif
