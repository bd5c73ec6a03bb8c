# test_distilbert reads its PyTorch reference values from tests/fixtures (made by
# tests/fixtures/make_distilbert_fixture.py; the test itself needs no Python).
if(TARGET test_distilbert)
  target_compile_definitions(test_distilbert PRIVATE VOLT_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures")
endif()
