# WeightAveraging across ranks (tests/test_mpi_weight_averaging.c), label "mpi": a fit stopped
# inside a validation (SIGTERM on rank 1 alone, every rank stops after the same batch) with the
# average swapped in leaves the current weights in the model on every rank with no collective
# (each rank its own slice; fsdp / ZeRO gather the rest on next use): the exported weights and a
# validate's val_loss are those of the same run without the callback, and a later fit on the
# trainer starts from them; no rank waits for the comm's timeout. Without MPI or mpirun,
# tests/strategies.cmake's placeholder stands for these too.
find_program(VOLT_WA_MPIRUN NAMES mpirun mpiexec)
if(NOT VOLT_HAVE_MPI OR NOT VOLT_WA_MPIRUN OR NOT TARGET test_mpi_weight_averaging)
  return()
endif()
foreach(run "ddp;2" "fsdp;2" "fsdp_shard_grad_op;2" "deepspeed_stage_2;2" "fsdp;3")
  list(GET run 0 s)
  list(GET run 1 np)
  add_test(NAME test_average_failed_val_${s}_np${np}
    COMMAND ${VOLT_WA_MPIRUN} --oversubscribe -np ${np} $<TARGET_FILE:test_mpi_weight_averaging> failed_val ${s})
  set_tests_properties(test_average_failed_val_${s}_np${np} PROPERTIES PROCESSORS ${np} TIMEOUT 90 SKIP_RETURN_CODE 77
    LABELS "mpi" ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;VOLT_COMM_TIMEOUT=20;ASAN_OPTIONS=detect_leaks=0;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_mpi_weight_averaging")
endforeach()
