# Fault tests (docs/RELIABILITY.md), label "fault": tests/tools/fault_run is the job,
# tests/fault_kill.sh the kill -9 / resume / compare driver.
add_executable(fault_run tools/fault_run.c)
target_include_directories(fault_run PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(fault_run PRIVATE volt_static)
set(_volt_fault_tmp "${CMAKE_CURRENT_BINARY_DIR}/tmp_faults")
set(_volt_fault_env "OMP_NUM_THREADS=1" "OMP_WAIT_POLICY=PASSIVE" "OMPI_ALLOW_RUN_AS_ROOT=1"
  "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" "ASAN_OPTIONS=detect_leaks=0")
# kill -9 at seeded random times and at seeded fsyncs (inside saves), resume, compare bitwise
add_test(NAME test_fault_kill_single COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_kill.sh
  $<TARGET_FILE:fault_run> single 1 ${_volt_fault_tmp}/kill_single 6 2026)
set_tests_properties(test_fault_kill_single PROPERTIES TIMEOUT 120 LABELS "fault" ENVIRONMENT "${_volt_fault_env}")
if(VOLT_HAVE_MPI)
  find_program(VOLT_MPIRUN_F NAMES mpirun mpiexec)
endif()
if(VOLT_HAVE_MPI AND VOLT_MPIRUN_F)
  add_test(NAME test_fault_kill_fsdp_np2 COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_kill.sh
    $<TARGET_FILE:fault_run> fsdp 2 ${_volt_fault_tmp}/kill_fsdp 4 2027 ${VOLT_MPIRUN_F})
  set_tests_properties(test_fault_kill_fsdp_np2 PROPERTIES TIMEOUT 180 LABELS "fault;mpi" PROCESSORS 2
    ENVIRONMENT "${_volt_fault_env}")
  # a hung rank (SIGSTOP): the job ends with an error within VOLT_COMM_TIMEOUT + 5 s
  foreach(s ddp fsdp)
    add_test(NAME test_fault_hang_${s}_np2 COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_hang.sh
      ${VOLT_MPIRUN_F} $<TARGET_FILE:fault_run> ${s} ${_volt_fault_tmp}/hang_${s})
    set_tests_properties(test_fault_hang_${s}_np2 PROPERTIES TIMEOUT 90 LABELS "fault;mpi" PROCESSORS 2
      ENVIRONMENT "${_volt_fault_env};VOLT_COMM_TIMEOUT=3")
  endforeach()
  # a rank that fails alone and ends: its leave notice ends the others within seconds, naming it
  foreach(run "ddp;train" "fsdp;train" "fsdp;val")
    list(GET run 0 s)
    list(GET run 1 in)
    add_test(NAME test_fault_stepfail_${s}_${in}_np2 COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_stepfail.sh
      ${VOLT_MPIRUN_F} $<TARGET_FILE:fault_run> ${s} ${_volt_fault_tmp}/stepfail_${s}_${in} ${in})
    set_tests_properties(test_fault_stepfail_${s}_${in}_np2 PROPERTIES TIMEOUT 90 LABELS "fault;mpi" PROCESSORS 2
      ENVIRONMENT "${_volt_fault_env};VOLT_COMM_TIMEOUT=20")
  endforeach()
  # disk full on rank 1 in the middle of a sharded save: an error, the previous checkpoint loads
  add_test(NAME test_fault_diskfull_fsdp_np2 COMMAND ${VOLT_MPIRUN_F} --oversubscribe -np 2
    $<TARGET_FILE:fault_run> diskfull ${_volt_fault_tmp}/diskfull fsdp)
  set_tests_properties(test_fault_diskfull_fsdp_np2 PROPERTIES TIMEOUT 90 LABELS "fault;mpi" PROCESSORS 2
    ENVIRONMENT "${_volt_fault_env};VOLT_COMM_TIMEOUT=20")
endif()
