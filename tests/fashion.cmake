# Fashion-MNIST app, short: a few hundred batches of the real data (Debian's
# dataset-fashion-mnist, installed by scripts/setup.sh), checkpoint by val_acc, resume,
# test with the best checkpoint. The full run's accuracy is in docs/FASHION_MNIST.md.
add_test(NAME app_fashion_mnist_short
  COMMAND bash -c "rm -rf \"$1\" && \"$0\" --model mlp --epochs 2 --limit-train-batches 150 --limit-val-batches 20 --limit-test-batches 40 --root \"$1\" --no-progress && \"$0\" --model mlp --epochs 3 --limit-train-batches 150 --limit-val-batches 20 --limit-test-batches 40 --root \"$1\" --no-progress --resume"
    $<TARGET_FILE:volt-fashion-mnist> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_fashion_mnist)
set_tests_properties(app_fashion_mnist_short PROPERTIES
  PASS_REGULAR_EXPRESSION "Test accuracy 0\\.(7[5-9]|8|9)" TIMEOUT 600
  ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")

# The same app under the one-line strategy change, on 2 MPI ranks.
if(VOLT_HAVE_MPI)
  foreach(strategy ddp fsdp)
    add_test(NAME app_fashion_mnist_${strategy}_np2
      COMMAND bash -c "rm -rf \"$2\" && \"$0\" -n 2 \"$1\" --model mlp --epochs 1 --limit-train-batches 100 --limit-val-batches 10 --limit-test-batches 20 --root \"$2\" --no-progress --strategy ${strategy}"
        ${CMAKE_SOURCE_DIR}/scripts/volt-run $<TARGET_FILE:volt-fashion-mnist> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_fashion_${strategy})
    set_tests_properties(app_fashion_mnist_${strategy}_np2 PROPERTIES
      PASS_REGULAR_EXPRESSION "Test accuracy 0\\.(7[5-9]|8|9)" FAIL_REGULAR_EXPRESSION "failed|error" TIMEOUT 300
      LABELS "mpi" ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;ASAN_OPTIONS=detect_leaks=0")
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
      COMMAND bash -c "\"$0\" ${mode} \"$1\" \"$2\" \"$3\" \"$4\""
        ${CMAKE_CURRENT_SOURCE_DIR}/app_fashion_dist.sh ${CMAKE_SOURCE_DIR}/scripts/volt-run
        $<TARGET_FILE:volt-fashion-mnist> $<TARGET_FILE:app_check> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_fashion_dist)
    set_tests_properties(app_fashion_mnist_dist_${mode} PROPERTIES
      PASS_REGULAR_EXPRESSION "app_fashion_dist ${mode}: ok" TIMEOUT 120 PROCESSORS 2
      LABELS "mpi" ENVIRONMENT "${_fashion_dist_env}")
    if(mode STREQUAL "ref")
      set_tests_properties(app_fashion_mnist_dist_ref PROPERTIES FIXTURES_SETUP app_fashion_dist_ref)
    else()
      set_tests_properties(app_fashion_mnist_dist_${mode} PROPERTIES FIXTURES_REQUIRED app_fashion_dist_ref)
    endif()
  endforeach()
endif()
