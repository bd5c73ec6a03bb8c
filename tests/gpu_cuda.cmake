# The cuda backend's tests (docs/CUDA.md). test_cuda_ops compares every op the backend
# implements, the parameter math and the memory table with the cpu backend; without a CUDA
# device it checks the registration and exits 77 (skipped). Label gpu: `ctest -L gpu` is
# what a GPU machine runs first. test_cuda_ops_harness runs the same comparisons against
# cpu-strict, on every machine, so the test's own comparisons and messages are exercised
# where there is no GPU.
set_tests_properties(test_cuda_ops PROPERTIES LABELS gpu)
add_test(NAME test_cuda_ops_harness COMMAND test_cuda_ops)
set_tests_properties(test_cuda_ops_harness PROPERTIES LABELS strict TIMEOUT 600
  ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_TEST_BACKEND=cpu-strict")
