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

# CUDA: detected now, used by the CUDA backend when it lands (no GPU code is built yet).
set(VOLT_HAVE_CUDA OFF)
if(NOT VOLT_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(VOLT_HAVE_CUDA ON)
  elseif(VOLT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VOLT_CUDA=ON but the CUDA toolkit was not found")
  endif()
endif()
message(STATUS "volt: CUDA toolkit ${VOLT_HAVE_CUDA} ${CUDAToolkit_VERSION}")
