# A step that fails on one rank inside an evaluation loop (tests/test_mpi_eval_fail.c), label
# "mpi": rank 1 alone fails validation_step / test_step / predict_step at batch 2 (the validation
# inside fit, also at its batch 0; validate, test, predict; handle_signals on and off); every
# rank returns its error ("(rank 1 of N; every rank stops)") within 5 s of a 20 s comm timeout,
# and a clean validate after it agrees on every rank. Strategies whose evaluation step makes no collective (ddp,
# deepspeed_stage_2); under fsdp a failure inside the forward still costs the comm's timeout.
# Without MPI or mpirun, tests/strategies.cmake's placeholder stands for these too.
find_program(VOLT_EF_MPIRUN NAMES mpirun mpiexec)
if(NOT VOLT_HAVE_MPI OR NOT VOLT_EF_MPIRUN OR NOT TARGET test_mpi_eval_fail)
  return()
endif()
foreach(run "ddp;2" "ddp;3" "deepspeed_stage_2;2" "deepspeed_stage_2;3")
  list(GET run 0 s)
  list(GET run 1 np)
  add_test(NAME test_eval_fail_${s}_np${np}
    COMMAND ${VOLT_EF_MPIRUN} --oversubscribe -np ${np} $<TARGET_FILE:test_mpi_eval_fail> step_fails ${s})
  set_tests_properties(test_eval_fail_${s}_np${np} PROPERTIES PROCESSORS ${np} TIMEOUT 90 SKIP_RETURN_CODE 77
    LABELS "mpi" ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;VOLT_COMM_TIMEOUT=20;ASAN_OPTIONS=detect_leaks=0;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_mpi_eval_fail")
endforeach()
