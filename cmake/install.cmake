# Install rules: headers in include/volt/, libvolt.so.MAJOR (+ the dev symlink) and
# libvolt.a in lib/, volt.pc, lib/cmake/volt/ (voltConfig.cmake, version file, targets
# volt::volt and volt::volt_static), the apps and volt-run in bin/, the docs.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/volt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

# volt_deps is the interface target that carries the dependencies (OpenBLAS, cJSON,
# OpenMP, zlib, threads, libm, MPI when built with it) to static consumers.
install(TARGETS volt_shared volt_static volt_deps EXPORT voltTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT voltTargets NAMESPACE volt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/volt)

configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/voltConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/voltConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/volt)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/voltConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/voltConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/voltConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/volt)

# pkg-config: shared by default; `pkg-config --static volt` adds what libvolt.a needs.
set(VOLT_PC_REQUIRES_PRIVATE "openblas libcjson zlib")
if(VOLT_HAVE_MPI)
  string(APPEND VOLT_PC_REQUIRES_PRIVATE " ompi-c")
endif()
set(VOLT_PC_LIBS_PRIVATE "-ldnnl -lgomp -lpthread -lm")
if(VOLT_HAVE_CUDA)
  string(PREPEND VOLT_PC_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt ")
endif()
# Relocatable: the prefix is found from the .pc file's own folder, so
# `cmake --install build --prefix P` works for any P.
set(VOLT_PC_PREFIX "\${pcfiledir}")
string(REPLACE "/" ";" _volt_libdir_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
foreach(_p ${_volt_libdir_parts})
  string(APPEND VOLT_PC_PREFIX "/..")
endforeach()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/volt.pc.in ${CMAKE_CURRENT_BINARY_DIR}/volt.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/volt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(VOLT_BUILD_APPS)
  install(TARGETS volt-fashion-mnist volt-text-classification volt-plot RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(PROGRAMS ${CMAKE_CURRENT_SOURCE_DIR}/scripts/volt-run DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")
