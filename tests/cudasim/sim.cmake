# tests/cudasim/sim.cmake — the CUDA simulator build (-DVOLT_CUDA_SIM=ON; README.md here).
# Included from the top-level CMakeLists (the kernels' generated sources must be made in the
# directory of the target that compiles them). Sets VOLT_CUDASIM_KERNEL_SOURCES.
set(_sim ${CMAKE_CURRENT_SOURCE_DIR}/tests/cudasim)
set(_sim_out ${CMAKE_CURRENT_BINARY_DIR}/cudasim)
file(MAKE_DIRECTORY ${_sim_out})
set(_sim_cxx_flags -fPIC -I${_sim}/include)
if(VOLT_SANITIZE)
  # -fno-sanitize-recover: a UBSan finding in a kernel ends the test, as in the C code. With it
  # the ASan/UBSan build catches what a GPU faults on and x86 forgives: a float4 / uint2 load or
  # store at an address not aligned to the type (cuda's vector types carry their alignment).
  list(APPEND _sim_cxx_flags -fsanitize=${VOLT_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
endif()
list(APPEND _sim_cxx_flags -O2)   # in the Debug (ASan) build too: kernels run thread by thread
list(APPEND _sim_cxx_flags -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas)
if(VOLT_WERROR)
  list(APPEND _sim_cxx_flags -Werror)
endif()

# The runtime (cudart on the CPU), and the cuBLASLt and NCCL the backend loads at run time
# (VOLT_CUBLASLT / VOLT_NCCL name them in the gpu tests' environment: tests/gpu_sim.cmake).
find_package(Threads REQUIRED)
add_library(volt_cudasim SHARED ${_sim}/runtime.cc ${_sim}/runtime_kernels.cc ${_sim}/runtime_api.cc
  ${_sim}/runtime_vmm.cc)
target_include_directories(volt_cudasim PRIVATE ${_sim}/include ${VOLT_CUBLASLT_INCLUDE})
target_compile_options(volt_cudasim PRIVATE ${_sim_cxx_flags})
target_link_libraries(volt_cudasim PRIVATE Threads::Threads)
foreach(_lib cublasLt nccl)
  string(TOLOWER ${_lib} _src)
  file(GLOB _lib_src CONFIGURE_DEPENDS ${_sim}/${_src}*.cc)   # cublaslt.cc, cublaslt_*.cc
  if(_lib_src)
    add_library(volt_cudasim_${_lib} SHARED ${_lib_src})
    target_include_directories(volt_cudasim_${_lib} PRIVATE ${_sim}/include ${VOLT_CUBLASLT_INCLUDE})
    target_compile_options(volt_cudasim_${_lib} PRIVATE ${_sim_cxx_flags})
    target_link_libraries(volt_cudasim_${_lib} PRIVATE volt_cudasim Threads::Threads)
  endif()
endforeach()

# core/cuda/*.cu -> build/cudasim/*.cc (tests/cudasim/transform.cmake), compiled as C++
# with cudasim_device.h first.
set(VOLT_CUDASIM_KERNEL_SOURCES)
file(GLOB _sim_cu CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/core/cuda/*.cu)
foreach(_cu ${_sim_cu})
  get_filename_component(_name ${_cu} NAME_WE)
  set(_cc ${_sim_out}/${_name}.cc)
  add_custom_command(OUTPUT ${_cc}
    COMMAND ${CMAKE_COMMAND} -DIN=${_cu} -DOUT=${_cc} -P ${_sim}/transform.cmake
    DEPENDS ${_cu} ${_sim}/transform.cmake VERBATIM)
  set(_opts ${_sim_cxx_flags} -include cudasim_device.h)
  if(_name STREQUAL "param_math")   # as nvcc -fmad=false: no contraction
    list(APPEND _opts -ffp-contract=off)
  endif()
  set_source_files_properties(${_cc} PROPERTIES COMPILE_OPTIONS "${_opts}" OBJECT_DEPENDS
    "${_sim}/include/cudasim_device.h;${_sim}/include/cudasim_mma.h")
  list(APPEND VOLT_CUDASIM_KERNEL_SOURCES ${_cc})
endforeach()
# libvolt links the simulator in this build, so an install carries it (cmake/install.cmake).
install(TARGETS volt_cudasim EXPORT voltTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# The simulator's own checks (tests/cudasim/test_cudasim*.cu; registered in tests/gpu_sim.cmake).
foreach(_t test_cudasim test_cudasim_vmm)
  add_custom_command(OUTPUT ${_sim_out}/${_t}.cc
    COMMAND ${CMAKE_COMMAND} -DIN=${_sim}/${_t}.cu -DOUT=${_sim_out}/${_t}.cc -P ${_sim}/transform.cmake
    DEPENDS ${_sim}/${_t}.cu ${_sim}/transform.cmake VERBATIM)
  add_executable(${_t} ${_sim_out}/${_t}.cc)
  target_include_directories(${_t} PRIVATE ${_sim}/include ${VOLT_CUBLASLT_INCLUDE})
  target_compile_options(${_t} PRIVATE ${_sim_cxx_flags} -include cudasim_device.h)
  target_link_libraries(${_t} PRIVATE volt_cudasim)
endforeach()
# The NCCL simulator's unit test: nccl.cc with its own queueing stand-ins for the runtime.
if(EXISTS ${_sim}/test_nccl_sim.cc)
  file(GLOB _nccl_test CONFIGURE_DEPENDS ${_sim}/test_nccl_sim*.cc ${_sim}/nccl*.cc)
  add_executable(test_nccl_sim ${_nccl_test})
  target_include_directories(test_nccl_sim PRIVATE ${_sim}/include ${VOLT_CUBLASLT_INCLUDE} ${VOLT_NCCL_INCLUDE})
  target_compile_options(test_nccl_sim PRIVATE ${_sim_cxx_flags})
  target_link_libraries(test_nccl_sim PRIVATE Threads::Threads)
endif()
# The cuBLASLt simulator's unit test: the library with the test's own runtime stand-ins
# (exported from the executable, so they win over libvolt_cudasim's in the library's lookups).
if(EXISTS ${_sim}/test_cublaslt_sim.cc AND TARGET volt_cudasim_cublasLt)
  file(GLOB _lt_test CONFIGURE_DEPENDS ${_sim}/test_cublaslt_sim*.cc)
  add_executable(test_cublaslt_sim ${_lt_test})
  target_include_directories(test_cublaslt_sim PRIVATE ${_sim} ${_sim}/include ${VOLT_CUBLASLT_INCLUDE})
  target_compile_options(test_cublaslt_sim PRIVATE ${_sim_cxx_flags})
  set_target_properties(test_cublaslt_sim PROPERTIES ENABLE_EXPORTS ON)
  target_link_libraries(test_cublaslt_sim PRIVATE volt_cudasim_cublasLt Threads::Threads ${CMAKE_DL_LIBS})
endif()
