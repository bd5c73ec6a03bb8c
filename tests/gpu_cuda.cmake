# The cuda backend's tests (docs/CUDA.md). test_cuda_ops compares every op the backend
# implements, the parameter math and the memory table with the cpu backend; without a CUDA
# device it checks the registration and exits 77 (skipped). Label gpu: `ctest -L gpu` is
# what a GPU machine runs first. test_cuda_ops_harness runs the same comparisons against
# cpu-strict, on every machine, so the test's own comparisons and messages are exercised
# where there is no GPU.
set_tests_properties(test_cuda_ops PROPERTIES LABELS gpu)
add_test(NAME test_cuda_ops_harness COMMAND test_cuda_ops)
set_tests_properties(test_cuda_ops_harness PROPERTIES LABELS strict TIMEOUT 600
  ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_TEST_BACKEND=cpu-strict")
# The linear cases again with every bias added by a kernel after a plain GEMM
# (VOLT_CUBLASLT_EPILOGUE=0): the path core/cuda/gemm.c takes where cuBLASLt's heuristic has no
# algorithm with the bias epilogue for a type, layout or alignment
add_test(NAME test_cuda_ops_bias_kernel COMMAND test_cuda_ops)
set_tests_properties(test_cuda_ops_bias_kernel PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_CUBLASLT_EPILOGUE=0;VOLT_TEST_ONLY=linear")

# NCCL (tests/test_nccl.c, docs/NCCL.md): on a GPU the NCCL checks at world size 1 (label gpu;
# 77 without a device; scripts/device-check.sh runs it under mpirun -n 1). What needs no GPU
# runs everywhere: the registry row, the errors for a device NCCL cannot serve and for bad
# settings (test_nccl_nogpu), and the error naming the library when it cannot be loaded
# (test_nccl_missing, VOLT_NCCL pointing at no file).
set_tests_properties(test_nccl PROPERTIES LABELS gpu TIMEOUT 120)
# NCCL inside a captured CUDA graph (tests/test_nccl_graph.c: replayed collectives, drain's
# deadline, host buffers refused) at world size 1: the one-GPU part of compile over several
# processes (docs/NCCL.md)
set_tests_properties(test_nccl_graph PROPERTIES LABELS gpu TIMEOUT 120)
add_test(NAME test_nccl_nogpu COMMAND test_nccl nogpu)
add_test(NAME test_nccl_missing COMMAND test_nccl missing)
set_tests_properties(test_nccl_nogpu test_nccl_missing PROPERTIES TIMEOUT 60)
set_tests_properties(test_nccl_missing PROPERTIES ENVIRONMENT "VOLT_NCCL=/nonexistent/libnccl.so.2")

# One DistilBERT training step, cuda vs cpu (tests/test_cuda_distilbert.c): logits and every
# gradient, at 32-true and bf16-mixed, dropout on. Label gpu (77 without a device).
set_tests_properties(test_cuda_distilbert PROPERTIES LABELS gpu)

# The device memory high-water bench/gpu/run.sh reports (tests/test_cuda_memstat.c, core/cuda/memstat.c).
set_tests_properties(test_cuda_memstat PROPERTIES LABELS gpu)
# DeviceStatsMonitor on the GPU (tests/test_callback_device_stats.c cuda): the device's memory
# stats at the logged steps, volt_trainer_device_memory
if(TEST test_callback_device_stats)
  add_test(NAME test_callback_device_stats_cuda COMMAND test_callback_device_stats cuda)
  set_tests_properties(test_callback_device_stats_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_callback_device_stats_cuda")
endif()
# SpikeDetection under compile on the GPU (tests/test_spike_detection.c cuda): a captured and
# replayed step's loss reaches volt_trainer_step_loss with its logged values
if(TEST test_spike_detection)
  add_test(NAME test_spike_detection_cuda COMMAND test_spike_detection cuda)
  set_tests_properties(test_spike_detection_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_spike_detection_cuda")
endif()
