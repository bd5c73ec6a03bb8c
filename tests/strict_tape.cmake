# The step, the tape and the kernels on "cpu-strict" (device memory unreadable from host
# code outside backend calls: a host dereference of an activation, grad or scratch faults).
# test_core_strict checks that its step really runs there (VOLT_TEST_EXPECT_DEVICE);
# test_tape_distilbert runs DistilBERT forward/backward on cpu-strict itself and compares it
# bit for bit with cpu.
add_test(NAME test_core_strict COMMAND test_core)
set_tests_properties(test_core_strict PROPERTIES LABELS strict TIMEOUT 600
  ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_ACCELERATOR=cpu-strict;VOLT_TEST_EXPECT_DEVICE=cpu-strict")
set_tests_properties(test_tape_distilbert PROPERTIES LABELS strict)
