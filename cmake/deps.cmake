# Dependencies: OpenBLAS, oneDNN, OpenMP, zlib, cJSON, libm are required; MPI and CUDA optional.
find_package(OpenMP REQUIRED COMPONENTS C)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
# Prefer the OpenMP build of OpenBLAS (one thread pool with our OpenMP loops; the same
# flavour the PyTorch peer uses). Debian installs it beside the pthread build.
foreach(dir /usr/lib/x86_64-linux-gnu/openblas-openmp/pkgconfig /usr/lib/aarch64-linux-gnu/openblas-openmp/pkgconfig)
  if(EXISTS ${dir}/openblas.pc)
    set(ENV{PKG_CONFIG_PATH} "${dir}:$ENV{PKG_CONFIG_PATH}")
  endif()
endforeach()
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
# oneDNN (Debian libdnnl-dev): the CPU GEMMs (core/cpu/gemm.c). pkg-config where the
# distribution ships dnnl.pc, else the header and library (Debian 12's CMake package needs
# OpenCL, for oneDNN's GPU runtime).
pkg_check_modules(DNNL QUIET IMPORTED_TARGET dnnl)
if(DNNL_FOUND)
  set(VOLT_DNNL_TARGET PkgConfig::DNNL)
else()
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h)
  find_library(DNNL_LIBRARY dnnl)
  if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
    message(FATAL_ERROR "oneDNN not found (apt-get install libdnnl-dev, or scripts/setup.sh)")
  endif()
  # A plain path, not a target, so the installed package (voltTargets) can carry it.
  set(VOLT_DNNL_TARGET ${DNNL_LIBRARY})
  set(VOLT_DNNL_INCLUDE ${DNNL_INCLUDE_DIR})
endif()
message(STATUS "volt: oneDNN ${DNNL_LIBRARY}${DNNL_LINK_LIBRARIES}")

add_library(volt_deps INTERFACE)
if(VOLT_DNNL_INCLUDE)
  target_include_directories(volt_deps INTERFACE $<BUILD_INTERFACE:${VOLT_DNNL_INCLUDE}>)
endif()
target_link_libraries(volt_deps INTERFACE PkgConfig::OPENBLAS ${VOLT_DNNL_TARGET} PkgConfig::CJSON
  OpenMP::OpenMP_C ZLIB::ZLIB Threads::Threads m)

set(VOLT_HAVE_MPI OFF)
if(NOT VOLT_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(VOLT_HAVE_MPI ON)
    target_link_libraries(volt_deps INTERFACE MPI::MPI_C)
    target_compile_definitions(volt_deps INTERFACE VOLT_HAVE_MPI=1)
  elseif(VOLT_MPI STREQUAL "ON")
    message(FATAL_ERROR "VOLT_MPI=ON but MPI was not found (apt-get install libopenmpi-dev)")
  endif()
endif()
message(STATUS "volt: MPI ${VOLT_HAVE_MPI}")

# CUDA (core/cuda/, docs/CUDA.md): the "cuda" backend is compiled whenever the toolkit is
# found (AUTO) or required (ON); no GPU is needed to compile it. sm_90 code plus compute_90
# PTX (newer GPUs JIT it). The runtime is linked statically and cuBLASLt is loaded when a
# GPU is opened, so a binary starts with nothing of the toolkit installed. The fuzz build
# (clang, every target a file parser) leaves it out under AUTO.
set(VOLT_HAVE_CUDA OFF)
set(_volt_cuda_want ${VOLT_CUDA})
if(_volt_cuda_want STREQUAL "AUTO" AND VOLT_FUZZ)
  set(_volt_cuda_want OFF)
endif()
# VOLT_CUDA_SIM=ON: the "cuda" backend built against the CUDA simulator (tests/cudasim/: the
# runtime, cuBLASLt and NCCL on the CPU) instead of cudart; the kernels compile as C++. Only
# the toolkit's headers are needed. The gpu tests then run on any machine (the CI's ASan build).
option(VOLT_CUDA_SIM "Build the cuda backend against the CPU simulator in tests/cudasim" OFF)
if(VOLT_CUDA_SIM)
  find_package(CUDAToolkit QUIET)
  find_path(VOLT_CUBLASLT_INCLUDE cublasLt.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  if(NOT VOLT_CUBLASLT_INCLUDE)
    message(FATAL_ERROR "VOLT_CUDA_SIM=ON needs the CUDA toolkit's headers (cuda_runtime_api.h, cublasLt.h)")
  endif()
  enable_language(CXX)
  set(CMAKE_CXX_STANDARD 17)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  set(VOLT_HAVE_CUDA ON)
  set(_volt_cuda_want OFF)
  target_include_directories(volt_deps INTERFACE ${VOLT_CUBLASLT_INCLUDE})
  target_link_libraries(volt_deps INTERFACE volt_cudasim stdc++ ${CMAKE_DL_LIBS})
  target_compile_definitions(volt_deps INTERFACE VOLT_HAVE_CUDA=1 VOLT_CUDA_SIM=1)
  set(CUDAToolkit_INCLUDE_DIRS ${VOLT_CUBLASLT_INCLUDE})
  set(VOLT_CUDA_LIBDIR "/nonexistent")
endif()
if(NOT _volt_cuda_want STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_path(VOLT_CUBLASLT_INCLUDE cublasLt.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  endif()
  if(CUDAToolkit_FOUND AND TARGET CUDA::cudart_static AND VOLT_CUBLASLT_INCLUDE)
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(VOLT_HAVE_CUDA ON)
    # cuBLASLt is loaded at run time (core/cuda/gemm.c): only its headers at build time
    target_link_libraries(volt_deps INTERFACE CUDA::cudart_static ${CMAKE_DL_LIBS})
    # the toolkit's own include dir, or where -DVOLT_CUBLASLT_INCLUDE points (a wheel's headers)
    target_include_directories(volt_deps INTERFACE $<BUILD_INTERFACE:${VOLT_CUBLASLT_INCLUDE}>)
    target_compile_definitions(volt_deps INTERFACE VOLT_HAVE_CUDA=1)
    set(VOLT_CUDA_LIBDIR "${CUDAToolkit_LIBRARY_DIR}")
  elseif(_volt_cuda_want STREQUAL "ON")
    message(FATAL_ERROR "VOLT_CUDA=ON but the CUDA toolkit (nvcc, cudart_static, cublasLt.h) was not found")
  endif()
endif()
message(STATUS "volt: CUDA ${VOLT_HAVE_CUDA} ${CUDAToolkit_VERSION} ${CMAKE_CUDA_ARCHITECTURES}")

# NCCL (strategies/comm/nccl/, docs/NCCL.md): the "nccl" comm backend needs CUDA (its streams
# and events) and nccl.h at build time only; libnccl.so.2 is loaded at run time, so a binary
# starts without NCCL installed. Several ranks need MPI too (the unique id is broadcast over
# it); without MPI a process is a world of one (what scripts/device-check.sh builds).
set(VOLT_HAVE_NCCL OFF)
if(VOLT_HAVE_CUDA)
  find_path(VOLT_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
  if(VOLT_NCCL_INCLUDE)
    set(VOLT_HAVE_NCCL ON)
    target_compile_definitions(volt_deps INTERFACE VOLT_HAVE_NCCL=1)
    target_include_directories(volt_deps INTERFACE $<BUILD_INTERFACE:${VOLT_NCCL_INCLUDE}>)   # -DVOLT_NCCL_INCLUDE: elsewhere
    find_library(VOLT_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
    if(VOLT_NCCL_LIBRARY)
      get_filename_component(VOLT_NCCL_LIBDIR "${VOLT_NCCL_LIBRARY}" DIRECTORY)
    else()
      set(VOLT_NCCL_LIBDIR "${CUDAToolkit_LIBRARY_DIR}")
    endif()
  endif()
endif()
message(STATUS "volt: NCCL ${VOLT_HAVE_NCCL} ${VOLT_NCCL_INCLUDE} (libnccl.so.2 loaded at run time from ${VOLT_NCCL_LIBDIR} or the loader's path)")
