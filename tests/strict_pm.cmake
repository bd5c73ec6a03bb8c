# The parameter-math area's suites on the "cpu-strict" backend (device memory unreadable
# outside backend calls): unit buffers, optimizer states and the grad scaler are touched
# only through the backend. Each test prints and checks the device it runs on.
foreach(t test_params test_optim test_precision)
  add_test(NAME ${t}_strict COMMAND ${t})
  set_tests_properties(${t}_strict PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS strict
    ENVIRONMENT "VOLT_ACCELERATOR=cpu-strict;OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_${t}_strict")
endforeach()
