# The library as a user installs and consumes it: cmake --install into a fresh prefix, then
# an out-of-tree program built with find_package, pkg-config (shared, --static) and
# add_subdirectory, and run (tests/consumer/run.sh). The exported-symbols check reads
# libvolt.so's dynamic symbols against the public headers (scripts/check-exports.sh).
if(NOT VOLT_SANITIZE)   # a sanitized libvolt.a cannot link into the plain consumer
add_test(NAME install_consumer
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/tmp_install_consumer)
set_tests_properties(install_consumer PROPERTIES TIMEOUT 900 LABELS install
  ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE")
endif()
