# Ctrl-C / SIGTERM on a self-launched job and on scripts/volt-run (tests/launch_signal.sh): the
# ranks get the signal, save on_exception.safetensors, and the launcher exits 130 / 143.
find_program(VOLT_LS_MPIRUN NAMES mpirun mpiexec)
if(NOT VOLT_HAVE_MPI OR NOT VOLT_LS_MPIRUN)
  return()
endif()
add_test(NAME app_launch_signal COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launch_signal.sh
  $<TARGET_FILE:volt-text-classification> ${CMAKE_SOURCE_DIR}/scripts/volt-run ${CMAKE_CURRENT_BINARY_DIR}/tmp_launch_signal)
set_tests_properties(app_launch_signal PROPERTIES TIMEOUT 180 PROCESSORS 2 LABELS "mpi;cli"
  ENVIRONMENT "OMP_NUM_THREADS=1;OMP_WAIT_POLICY=PASSIVE")
