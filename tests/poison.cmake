# The STORE contract (core/internal.h: a backward kernel given a fresh grad writes every
# element of it) checked with VOLT_POISON_GRADS=1: every grad the tape allocates starts as
# NaN bytes, so an element a kernel leaves unwritten turns into NaN and fails the suite's
# comparisons (without poison the grad pool's stale values hide it on lucky runs).
foreach(name test_ops_act test_ops_attention test_ops_basic test_ops_conv test_ops_shape test_nn test_distilbert)
  add_test(NAME ${name}_poison COMMAND ${name})
  set_tests_properties(${name}_poison PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS poison
    ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_POISON_GRADS=1;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_${name}_poison")
endforeach()
