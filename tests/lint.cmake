# Rules of the tree, checked on every ctest run: the layer rule (scripts/check-layers.sh).
add_test(NAME layers COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/../scripts/check-layers.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(layers PROPERTIES LABELS lint)
