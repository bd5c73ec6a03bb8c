# A module's checkpoint extras across ranks (tests/test_checkpoint_extras.c, mode sharded), label
# "mpi": the extras in rank 0's index of a sharded checkpoint read by every rank, and a rejection
# on rank 1 alone failing every rank with its reason, no rank's weights changed.
find_program(VOLT_CX_MPIRUN NAMES mpirun mpiexec)
if(NOT VOLT_HAVE_MPI OR NOT VOLT_CX_MPIRUN OR NOT TARGET test_checkpoint_extras)
  return()
endif()
foreach(s fsdp deepspeed_stage_2)
  add_test(NAME test_checkpoint_extras_${s}_np2
    COMMAND ${VOLT_CX_MPIRUN} --oversubscribe -np 2 $<TARGET_FILE:test_checkpoint_extras> sharded ${s})
  set_tests_properties(test_checkpoint_extras_${s}_np2 PROPERTIES PROCESSORS 2 TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "mpi"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;VOLT_COMM_TIMEOUT=20;ASAN_OPTIONS=detect_leaks=0;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_checkpoint_extras")
endforeach()
