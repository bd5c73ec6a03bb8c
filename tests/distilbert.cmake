# test_distilbert reads its PyTorch reference values from tests/fixtures (made by
# tests/fixtures/make_distilbert_fixture.py; the test itself needs no Python).
if(TARGET test_distilbert)
  target_compile_definitions(test_distilbert PRIVATE VOLT_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures")
endif()
# test_strategies_bert checks one SGD step with clipping of every strategy against the same
# fixture's gradients.
if(TARGET test_strategies_bert)
  target_compile_definitions(test_strategies_bert PRIVATE VOLT_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures")
endif()
