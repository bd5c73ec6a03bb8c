# The parameter-math area's suites on the "cpu-strict" backend (device memory unreadable
# outside backend calls): unit buffers, optimizer states and the grad scaler are touched
# only through the backend. Each test prints and checks the device it runs on.
foreach(t test_params test_optim test_precision)
  add_test(NAME ${t}_strict COMMAND ${t})
  set_tests_properties(${t}_strict PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS strict
    ENVIRONMENT "VOLT_ACCELERATOR=cpu-strict;OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_${t}_strict")
endforeach()
# The batch size finder on real allocations: cpu-strict's device is a reserve of 96 MiB, so a
# wide MLP's step runs out of it at some batch size (tests/test_batch_size_finder.c memory)
add_test(NAME test_batch_size_finder_memory COMMAND test_batch_size_finder memory)
set_tests_properties(test_batch_size_finder_memory PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS strict
  ENVIRONMENT "VOLT_ACCELERATOR=cpu-strict;VOLT_STRICT_RESERVE=100663296;OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_batch_size_finder_memory")
