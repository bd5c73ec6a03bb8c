# tests/cudasim/transform.cmake — cmake -DIN=file.cu -DOUT=file.cc -P transform.cmake
# Rewrites what only nvcc parses into what cudasim_device.h defines (tests/cudasim/README.md):
#   k<<<grid, block[, smem[, stream]]>>>(args)   ->  CUDASIM_LAUNCH(k, grid, block...)(args)
#   extern __shared__ [__align__(n)] T name[];   ->  CUDASIM_DYN_SMEM(T, name);
#   #include <mma.h>                            ->  #include "cudasim_mma.h"
# A #line keeps compiler messages pointing into the .cu file.
file(READ "${IN}" s)
string(REGEX REPLACE "extern __shared__ __align__\\([0-9]+\\) " "extern __shared__ " s "${s}")
string(REGEX REPLACE "extern __shared__ ([^;\\[]*[^A-Za-z0-9_;\\[])([A-Za-z_][A-Za-z0-9_]*)\\[\\];"
       "CUDASIM_DYN_SMEM(\\1, \\2);" s "${s}")
string(REGEX REPLACE "([A-Za-z_][A-Za-z0-9_]*(<[A-Za-z0-9_ ,:]*>)?)[ ]*<<<(([^>]|->)*)>>>" "CUDASIM_LAUNCH(\\1, \\3)"
       s "${s}")
string(REPLACE "#include <mma.h>" "#include \"cudasim_mma.h\"" s "${s}")
if(s MATCHES "<<<|extern __shared__")
  message(FATAL_ERROR "cudasim: ${IN}: a launch or dynamic shared memory declaration the transform does not know")
endif()
file(WRITE "${OUT}.tmp" "#line 1 \"${IN}\"\n${s}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
