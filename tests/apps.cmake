# App smoke runs: each app on tiny data written by a helper script (tests/app_*.sh), which
# prints "<name> <mode>: ok" only when the app exited as expected and printed what it must.
# (The apps/ targets are defined after tests/; generator expressions resolve at generate time.)
# ctest reads the script's exit status (no PASS_REGULAR_EXPRESSION: it would hide it).
foreach(mode smoke errors fingerprint accents)
  add_test(NAME app_text_classification_${mode}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/app_text_classification.sh ${mode}
      $<TARGET_FILE:volt-text-classification>
      ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_text_classification_${mode} "" $<TARGET_FILE:app_check>)
  set_tests_properties(app_text_classification_${mode} PROPERTIES
    TIMEOUT 600 ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
endforeach()

# The text app on 2 ranks (fsdp) with --memory-report and --export-full: informational lines
# once (rank 0), one memory-table row per rank, the export's weights and the logged losses
# equal to a ddp run's on 2 ranks (1e-5), names and shapes as single's
# (app_text_classification.sh dist; ~5 s).
if(VOLT_HAVE_MPI)
  add_test(NAME app_text_classification_dist
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/app_text_classification.sh dist
      $<TARGET_FILE:volt-text-classification>
      ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_text_classification_dist
      ${CMAKE_SOURCE_DIR}/scripts/volt-run $<TARGET_FILE:app_check>)
  set_tests_properties(app_text_classification_dist PROPERTIES TIMEOUT 120 PROCESSORS 2 LABELS "mpi"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMP_WAIT_POLICY=passive;VOLT_COMM_TIMEOUT=60;ASAN_OPTIONS=detect_leaks=0")
endif()

# volt-fashion-mnist on IDX files that are not Fashion-MNIST's (written by the test; no real
# data needed): refused naming the file, before any trainer exists (app_fashion.sh errors).
add_test(NAME app_fashion_mnist_errors
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/app_fashion.sh errors $<TARGET_FILE:volt-fashion-mnist>
    $<TARGET_FILE:app_check> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_fashion_errors)
set_tests_properties(app_fashion_mnist_errors PROPERTIES TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
