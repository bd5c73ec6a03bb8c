# Rules of the tree, checked on every ctest run: the layer rule (scripts/check-layers.sh).
add_test(NAME layers COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/../scripts/check-layers.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(layers PROPERTIES LABELS lint)
# libvolt.so exports exactly the public API (scripts/check-exports.sh): every exported name is a
# VOLT_API declaration of include/volt/, and every such declaration is exported.
add_test(NAME exports COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/../scripts/check-exports.sh ${PROJECT_SOURCE_DIR}
         $<TARGET_FILE:volt_shared>)
set_tests_properties(exports PROPERTIES LABELS lint)
# scripts/setup.sh finds the missing packages with one dpkg-query (tests/setup_check.sh).
add_test(NAME setup_check COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/setup_check.sh ${PROJECT_SOURCE_DIR}/scripts/setup.sh)
set_tests_properties(setup_check PROPERTIES LABELS lint SKIP_RETURN_CODE 77)
