# Bit-for-bit golden runs (tests/golden.sh): the exported weights of six short runs (MLP in
# 32-true / bf16-mixed / bf16-true, fsdp on 2 ranks, DistilBERT small with dropout in 32-true
# and 16-mixed) against tests/fixtures/golden.sha256, taken on this machine kind before the
# device-ready core refactor. Release builds only (the sanitizers' flags change rounding).
if(CMAKE_BUILD_TYPE STREQUAL "Release" AND NOT VOLT_SANITIZE)
  if(VOLT_HAVE_MPI)
    set(_golden_run ${CMAKE_SOURCE_DIR}/scripts/volt-run)
  else()
    set(_golden_run "")
  endif()
  add_test(NAME golden
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/golden.sh check
      $<TARGET_FILE:volt-fashion-mnist> $<TARGET_FILE:volt-text-classification> "${_golden_run}"
      ${CMAKE_CURRENT_BINARY_DIR}/tmp_golden ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/golden.sha256)
  set_tests_properties(golden PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 PROCESSORS 2 LABELS "mpi"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;VOLT_COMM_TIMEOUT=60")
endif()
