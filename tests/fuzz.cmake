# libFuzzer targets (tests/fuzz/, docs/RELIABILITY.md): built only with -DVOLT_FUZZ=ON and
# clang, the whole library instrumented (scripts/fuzz.sh configures build-fuzz:
# CC=clang, VOLT_SANITIZE=address,undefined, -fsanitize=fuzzer-no-link). `volt_fuzz` builds
# them all. They are not ctests: scripts/fuzz.sh runs each for a fixed time and replays
# tests/fuzz/regressions/.
option(VOLT_FUZZ "Build the libFuzzer targets in tests/fuzz (clang)" OFF)
if(VOLT_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "VOLT_FUZZ needs clang (CC=clang): libFuzzer is part of clang")
  endif()
  add_custom_target(volt_fuzz)
  foreach(t safetensors checkpoint idx text mail wordpiece vocab token_cache imdb cli)
    add_executable(fuzz_${t} EXCLUDE_FROM_ALL ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${t}.c)
    target_include_directories(fuzz_${t} PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(fuzz_${t} PRIVATE volt_static)
    target_compile_definitions(fuzz_${t} PRIVATE _GNU_SOURCE)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    add_dependencies(volt_fuzz fuzz_${t})
  endforeach()
endif()
