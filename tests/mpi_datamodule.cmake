# Datamodules across ranks (tests/test_mpi_datamodule.c), label "mpi": prepare_data on rank 0
# alone, the other ranks' setup after it (a slow "download" whose file they read), every stage
# (fit, validate, test, predict) through the datamodule; rank 0's prepare_data failing ends
# every rank at once with the error. Without MPI or mpirun, tests/strategies.cmake's placeholder
# stands for these too.
find_program(VOLT_DM_MPIRUN NAMES mpirun mpiexec)
if(NOT VOLT_HAVE_MPI OR NOT VOLT_DM_MPIRUN OR NOT TARGET test_mpi_datamodule)
  return()
endif()
foreach(run "ok;ddp;2" "ok;fsdp;3" "fail;ddp;2" "fail;deepspeed_stage_2;3")
  list(GET run 0 mode)
  list(GET run 1 s)
  list(GET run 2 np)
  add_test(NAME test_datamodule_${mode}_${s}_np${np}
    COMMAND ${VOLT_DM_MPIRUN} --oversubscribe -np ${np} $<TARGET_FILE:test_mpi_datamodule> ${mode} ${s})
  set_tests_properties(test_datamodule_${mode}_${s}_np${np} PROPERTIES PROCESSORS ${np} TIMEOUT 120
    SKIP_RETURN_CODE 77 LABELS "mpi"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;VOLT_COMM_TIMEOUT=20;ASAN_OPTIONS=detect_leaks=0;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_mpi_datamodule")
endforeach()
