# compile = true on the cuda backend (tests/test_cuda_compile.c): eager vs CUDA graph replay,
# bit for bit, over 20 steps of an MLP and a small DistilBERT at 32-true and bf16-mixed with
# dropout on. Needs a GPU: label gpu (ctest -L gpu, scripts/device-check.sh), exit 77 without
# one. The capture logic itself runs in CI through test_compile's recording backend.
if(TEST test_cuda_compile)
  set_tests_properties(test_cuda_compile PROPERTIES LABELS gpu)
endif()
