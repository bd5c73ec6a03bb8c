# Rules of the tree, checked on every ctest run: the layer rule (scripts/check-layers.sh).
add_test(NAME layers COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/../scripts/check-layers.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(layers PROPERTIES LABELS lint)
# libvolt.so exports exactly the public API (scripts/check-exports.sh): every exported name is a
# VOLT_API declaration of include/volt/, and every such declaration is exported.
add_test(NAME exports COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/../scripts/check-exports.sh ${PROJECT_SOURCE_DIR}
         $<TARGET_FILE:volt_shared>)
set_tests_properties(exports PROPERTIES LABELS lint)
