# The cuda backend's attention and dropout against the CPU backend (tests/test_cuda_attention.c):
# needs a GPU, so it carries the gpu label (ctest -L gpu; scripts/device-check.sh runs it) and
# exits 77 (skipped) without one. tests/test_cuda_philox.c (host-side, no label) runs everywhere.
if(TEST test_cuda_attention)
  set_tests_properties(test_cuda_attention PROPERTIES LABELS gpu)
endif()
# The same comparisons against cpu-strict on every machine: the test's own checks run in CI.
if(TEST test_cuda_attention)
  add_test(NAME test_cuda_attention_harness COMMAND test_cuda_attention)
  set_tests_properties(test_cuda_attention_harness PROPERTIES LABELS strict TIMEOUT 600
    ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_TEST_AGAINST=cpu-strict")
endif()
