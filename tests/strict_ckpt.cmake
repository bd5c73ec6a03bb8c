# Checkpoints through device copies on the strict backend (issue 10; docs/CHECKPOINTS.md):
# with VOLT_ACCELERATOR=cpu-strict device memory faults on any host dereference, so these
# runs show that save, load, exact resume, export_full, damaged-file errors, and the sharded
# save of fsdp on 2 ranks loaded on 1 (resharding) touch unit buffers, grads and optimizer
# states only through copies. test_checkpoint checks that its parameters live on the
# accelerator named (it fails when they do not). test_safetensors has no strict variant: it
# is file I/O on host memory only. Label "strict".
set(_volt_strict_env "OMP_NUM_THREADS=2" "VOLT_ACCELERATOR=cpu-strict"
  "VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_checkpoint_strict")
add_test(NAME test_checkpoint_strict COMMAND test_checkpoint)
add_test(NAME test_reliability_strict COMMAND test_reliability)
set_tests_properties(test_checkpoint_strict test_reliability_strict PROPERTIES
  ENVIRONMENT "${_volt_strict_env}" LABELS strict TIMEOUT 600 SKIP_RETURN_CODE 77)
set_tests_properties(test_reliability_strict PROPERTIES
  ENVIRONMENT "OMP_NUM_THREADS=2;VOLT_ACCELERATOR=cpu-strict;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_reliability_strict")

# Sharded: fsdp on 2 ranks saves mid-epoch (and exports); one rank loads the shards.
if(VOLT_HAVE_MPI AND VOLT_MPIRUN)
  set(_volt_sck "${CMAKE_CURRENT_BINARY_DIR}/tmp_test_checkpoint_shards/fsdp2.safetensors")
  file(MAKE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/tmp_test_checkpoint_shards")
  foreach(acc cpu cpu-strict)
    set(_sfx "")
    set(_labels "mpi")
    if(acc STREQUAL "cpu-strict")
      set(_sfx "_strict")
      set(_labels "mpi;strict")
    endif()
    set(_env "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" "OMP_NUM_THREADS=1" "VOLT_COMM_TIMEOUT=60"
      "ASAN_OPTIONS=detect_leaks=0" "VOLT_ACCELERATOR=${acc}" "VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_checkpoint_shards")
    add_test(NAME test_checkpoint_shard_save${_sfx} COMMAND ${VOLT_MPIRUN} --oversubscribe -np 2 $<TARGET_FILE:test_checkpoint>
      shard_save "${_volt_sck}${_sfx}")
    add_test(NAME test_checkpoint_shard_load${_sfx} COMMAND test_checkpoint shard_load "${_volt_sck}${_sfx}")
    set_tests_properties(test_checkpoint_shard_save${_sfx} test_checkpoint_shard_load${_sfx} PROPERTIES
      ENVIRONMENT "${_env}" TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "${_labels}")
    set_tests_properties(test_checkpoint_shard_save${_sfx} PROPERTIES PROCESSORS 2 FIXTURES_SETUP volt_ckpt_shards${_sfx})
    set_tests_properties(test_checkpoint_shard_load${_sfx} PROPERTIES FIXTURES_REQUIRED volt_ckpt_shards${_sfx})
  endforeach()
endif()
