# The CUDA simulator build (-DVOLT_CUDA_SIM=ON, tests/cudasim/README.md): the gpu tests run
# against the simulator's runtime, cuBLASLt and NCCL (the backend loads the last two from
# VOLT_CUBLASLT / VOLT_NCCL), and the simulator's own checks run too.
if(VOLT_CUDA_SIM)
  set(_sim_env "CUDASIM=1")
  if(TARGET volt_cudasim_cublasLt)
    list(APPEND _sim_env "VOLT_CUBLASLT=$<TARGET_FILE:volt_cudasim_cublasLt>")
  endif()
  if(TARGET volt_cudasim_nccl)
    list(APPEND _sim_env "VOLT_NCCL=$<TARGET_FILE:volt_cudasim_nccl>")
  endif()
  foreach(t test_cuda_ops test_cuda_ops_bias_kernel test_cuda_attention test_cuda_compile test_cuda_distilbert test_cuda_memstat
            test_callback_device_stats_cuda test_spike_detection_cuda test_nccl test_nccl_graph)
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT ${_sim_env})
      set_property(TEST ${t} APPEND PROPERTY LABELS cudasim)
    endif()
  endforeach()
  # compile's eager-vs-replay runs: 8 steps each on the simulator (still both graphs and 4
  # replays; CI's ASan build spends minutes per simulated step), the full 20 on a GPU, and
  # DistilBERT at 32-true and bf16-mixed on a GPU only (VOLT_TEST_COMPILE_GPU_ONLY, CI time). With
  # given-back memory poisoned (VOLT_POISON_GRADS): a replay that reads a released tensor's
  # block after an earlier node reused it (an H2D re-issued before the graph into pool
  # memory did) turns into NaN, not a near miss
  if(TEST test_cuda_compile)
    set_property(TEST test_cuda_compile APPEND PROPERTY ENVIRONMENT
      "VOLT_TEST_COMPILE_STEPS=8;VOLT_POISON_GRADS=1;VOLT_TEST_COMPILE_GPU_ONLY=1")
    # the gradient accumulation cases (12 to 24 micro-steps each) took it to ~8 min on a loaded
    # 2-core machine: past the default 600 s with little to spare
    set_tests_properties(test_cuda_compile PROPERTIES TIMEOUT 900)
  endif()
  # The fallback found on its own: the simulated heuristic offers no algorithm with an epilogue
  # (CUDASIM_LT_NO_EPILOGUE, as a real cuBLASLt may for some type or layout), so each linear's
  # plan drops the bias epilogue and adds the bias with a kernel; without the fallback every
  # linear with a bias fails ("cuBLASLt cannot run this GEMM")
  if(TEST test_cuda_ops)
    add_test(NAME test_cuda_ops_lt_no_epilogue COMMAND test_cuda_ops)
    set_tests_properties(test_cuda_ops_lt_no_epilogue PROPERTIES LABELS cudasim SKIP_RETURN_CODE 77 TIMEOUT 600
      ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;CUDASIM_LT_NO_EPILOGUE=1;VOLT_TEST_ONLY=linear;${_sim_env}")
  endif()
  # A device without virtual memory management (CUDASIM_VMM_UNSUPPORTED: cuMemCreate says
  # CUDA_ERROR_NOT_SUPPORTED): the backend finds out at open, advertises no GIVE_BACK, and its
  # unit buffers come from the pool, give_back zeroing (core/cuda/vmm.c)
  if(TEST test_cuda_ops)
    add_test(NAME test_cuda_ops_no_vmm COMMAND test_cuda_ops)
    set_tests_properties(test_cuda_ops_no_vmm PROPERTIES LABELS cudasim SKIP_RETURN_CODE 77 TIMEOUT 300
      ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;CUDASIM_VMM_UNSUPPORTED=1;VOLT_TEST_MEMORY_ONLY=1;${_sim_env}")
  endif()
  # The same with every stream operation 300 us late (CUDASIM_DELAY_US): the host runs far
  # ahead, so a missing synchronization or cross-stream wait gives wrong data, not luck
  foreach(t test_cuda_distilbert test_nccl)
    if(TARGET ${t})
      add_test(NAME ${t}_delayed COMMAND ${t})
      set_tests_properties(${t}_delayed PROPERTIES LABELS cudasim TIMEOUT 600 SKIP_RETURN_CODE 77
        ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;CUDASIM_DELAY_US=300;${_sim_env};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;ASAN_OPTIONS=detect_leaks=0;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_${t}_delayed")
    endif()
  endforeach()
  if(TEST test_nccl)   # Open MPI (the id broadcast) keeps allocations until exit, as in strategies.cmake
    set_property(TEST test_nccl APPEND PROPERTY ENVIRONMENT
      "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;ASAN_OPTIONS=detect_leaks=0")
  endif()
  # The text app on the simulated GPU: bf16-mixed + compile, exact resume, the checkpoint
  # tested on the CPU (tests/app_text_classification.sh cuda)
  add_test(NAME app_text_classification_cuda
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/app_text_classification.sh cuda
      $<TARGET_FILE:volt-text-classification> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_text_classification_cuda ""
      $<TARGET_FILE:app_check>)
  set_tests_properties(app_text_classification_cuda PROPERTIES TIMEOUT 900 LABELS "gpu;cudasim"
    ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive;${_sim_env}")
  # The batch size finder on a simulated GPU of 100 MiB: cudaMallocAsync runs out at some
  # batch size (tests/test_batch_size_finder.c cuda). Not label gpu: a real GPU has no such cap
  add_test(NAME test_batch_size_finder_cuda COMMAND test_batch_size_finder cuda)
  set_tests_properties(test_batch_size_finder_cuda PROPERTIES LABELS cudasim TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "VOLT_ACCELERATOR=cuda;CUDASIM_MEM_MB=100;OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;${_sim_env};VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_batch_size_finder_cuda")
  add_test(NAME test_cudasim COMMAND test_cudasim)
  add_test(NAME test_cudasim_deadlock COMMAND test_cudasim deadlock)
  add_test(NAME test_cudasim_misaligned COMMAND test_cudasim misaligned)
  set_tests_properties(test_cudasim test_cudasim_deadlock test_cudasim_misaligned PROPERTIES LABELS cudasim TIMEOUT 120
    ENVIRONMENT "CUDASIM=1")
  # Virtual memory management (tests/cudasim/test_cudasim_vmm.cu): each mode that ends in a
  # sticky error or a fault is a process of its own
  add_test(NAME test_cudasim_vmm COMMAND test_cudasim_vmm)
  set(_vmm_tests test_cudasim_vmm)
  foreach(_m unmapped_copy noaccess_memset "unmap_pending memset" "unmap_pending kernel"
             "unmap_pending graph" "fault unmapped"
             "fault noaccess")
    string(REPLACE " " "_" _n "${_m}")
    separate_arguments(_args UNIX_COMMAND "${_m}")
    add_test(NAME test_cudasim_vmm_${_n} COMMAND test_cudasim_vmm ${_args})
    list(APPEND _vmm_tests test_cudasim_vmm_${_n})
  endforeach()
  set_tests_properties(${_vmm_tests} PROPERTIES LABELS cudasim TIMEOUT 120 ENVIRONMENT "CUDASIM=1")
  if(TARGET test_cublaslt_sim)
    add_test(NAME test_cublaslt_sim COMMAND test_cublaslt_sim)
    set_tests_properties(test_cublaslt_sim PROPERTIES LABELS cudasim TIMEOUT 300)
  endif()
  if(TARGET test_nccl_sim)
    add_test(NAME test_nccl_sim COMMAND test_nccl_sim)
    set_tests_properties(test_nccl_sim PROPERTIES LABELS cudasim TIMEOUT 300)
  endif()
endif()
