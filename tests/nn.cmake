# test_nn reads its PyTorch reference values from tests/fixtures/nn_layers.safetensors (made by
# tests/fixtures/make_nn_fixture.py with torch.nn; the test itself needs no Python).
if(TARGET test_nn)
  target_compile_definitions(test_nn PRIVATE VOLT_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures")
endif()
