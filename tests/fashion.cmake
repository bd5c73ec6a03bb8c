# Fashion-MNIST app on the real data (Debian's dataset-fashion-mnist, installed by
# scripts/setup.sh), checked by values, every run's exit status included (tests/app_fashion.sh):
# resume = 3 epochs of 100 batches uninterrupted vs 2 + --resume to 3: the resumed run continues
# at the saved step, logs the same losses and ends with a bit-identical last checkpoint (~30 s).
# The full run's accuracy is in docs/FASHION_MNIST.md.
add_test(NAME app_fashion_mnist_resume
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/app_fashion.sh resume $<TARGET_FILE:volt-fashion-mnist>
    $<TARGET_FILE:app_check> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_fashion_mnist)
set_tests_properties(app_fashion_mnist_resume PROPERTIES TIMEOUT 600
  ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")

# The same app under the one-line strategy change, on 2 MPI ranks, 100 steps: the exported
# weights against a single run on the same global batch (np2_ref, the fixture), to 1e-4.
if(VOLT_HAVE_MPI)
  foreach(mode np2_ref ddp fsdp)
    add_test(NAME app_fashion_mnist_${mode}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/app_fashion.sh ${mode} $<TARGET_FILE:volt-fashion-mnist>
        $<TARGET_FILE:app_check> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_fashion_np2 ${CMAKE_SOURCE_DIR}/scripts/volt-run)
    set_tests_properties(app_fashion_mnist_${mode} PROPERTIES TIMEOUT 300 LABELS "mpi"
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMP_WAIT_POLICY=passive;VOLT_COMM_TIMEOUT=60;ASAN_OPTIONS=detect_leaks=0")
    if(mode STREQUAL "np2_ref")
      set_tests_properties(app_fashion_mnist_np2_ref PROPERTIES FIXTURES_SETUP app_fashion_np2_ref)
    else()
      set_tests_properties(app_fashion_mnist_${mode} PROPERTIES FIXTURES_REQUIRED app_fashion_np2_ref PROCESSORS 2)
    endif()
  endforeach()
endif()

# --memory-report and --export-full under every strategy (tests/app_fashion_dist.sh): the
# "ref" test runs single and ddp on 2 ranks; each sharded strategy's run is checked against
# them: its lines printed once (rank 0), one table row per rank, the optimizer state half of
# ddp's, and the exported weights equal to single's (same seed and global batch) to 1e-5.
# Each run is 12 steps of the MLP: a few seconds per test on two cores.
if(VOLT_HAVE_MPI)
  set(_fashion_dist_env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMP_WAIT_POLICY=passive;VOLT_COMM_TIMEOUT=60;ASAN_OPTIONS=detect_leaks=0")
  foreach(mode ref deepspeed_stage_1 deepspeed_stage_2 fsdp fsdp_shard_grad_op)
    add_test(NAME app_fashion_mnist_dist_${mode}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/app_fashion_dist.sh ${mode} ${CMAKE_SOURCE_DIR}/scripts/volt-run
        $<TARGET_FILE:volt-fashion-mnist> $<TARGET_FILE:app_check> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_fashion_dist)
    set_tests_properties(app_fashion_mnist_dist_${mode} PROPERTIES TIMEOUT 120 PROCESSORS 2
      LABELS "mpi" ENVIRONMENT "${_fashion_dist_env}")
    if(mode STREQUAL "ref")
      set_tests_properties(app_fashion_mnist_dist_ref PROPERTIES FIXTURES_SETUP app_fashion_dist_ref)
    else()
      set_tests_properties(app_fashion_mnist_dist_${mode} PROPERTIES FIXTURES_REQUIRED app_fashion_dist_ref)
    endif()
  endforeach()
endif()
