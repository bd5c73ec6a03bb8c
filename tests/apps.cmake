# App smoke runs: each app on tiny data written by a helper script (tests/app_*.sh), which
# prints "<name> <mode>: ok" only when the app exited as expected and printed what it must.
# (The apps/ targets are defined after tests/; generator expressions resolve at generate time.)
foreach(mode smoke errors)
  add_test(NAME app_text_classification_${mode}
    COMMAND bash -c "\"$0\" ${mode} \"$1\" \"$2\""
      ${CMAKE_CURRENT_SOURCE_DIR}/app_text_classification.sh
      $<TARGET_FILE:volt-text-classification>
      ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_text_classification_${mode})
  set_tests_properties(app_text_classification_${mode} PROPERTIES
    PASS_REGULAR_EXPRESSION "app_text_classification ${mode}: ok"
    TIMEOUT 600 ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
endforeach()
