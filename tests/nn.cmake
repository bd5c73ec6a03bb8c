# test_nn reads its PyTorch reference values from tests/fixtures/nn_layers.safetensors (made by
# tests/fixtures/make_nn_fixture.py with torch.nn; the test itself needs no Python).
if(TARGET test_nn)
  target_compile_definitions(test_nn PRIVATE VOLT_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures")
endif()
# test_readme_mlp checks that README.md shows its module code verbatim.
if(TARGET test_readme_mlp)
  target_compile_definitions(test_readme_mlp PRIVATE VOLT_README="${CMAKE_SOURCE_DIR}/README.md")
endif()
