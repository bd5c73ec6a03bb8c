# The cuda backend's attention and dropout against the CPU backend (tests/test_cuda_attention.c):
# needs a GPU, so it carries the gpu label (ctest -L gpu; scripts/device-check.sh runs it) and
# exits 77 (skipped) without one. tests/test_cuda_philox.c (host-side, no label) runs everywhere.
if(TEST test_cuda_attention)
  set_tests_properties(test_cuda_attention PROPERTIES LABELS gpu)
endif()
