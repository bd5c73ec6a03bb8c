# Dependencies: OpenBLAS, OpenMP, zlib, cJSON, libm are required; MPI and CUDA optional.
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

add_library(volt_deps INTERFACE)
target_link_libraries(volt_deps INTERFACE PkgConfig::OPENBLAS PkgConfig::CJSON
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
