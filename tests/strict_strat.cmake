# Strict variants of the strategy tests: the same commands with VOLT_ACCELERATOR=cpu-strict
# (device memory unreadable by host code outside backend calls: core/cpu/strict.c). The
# tests check that the run's device really is cpu-strict (no silent fallback to cpu); under
# MPI the comm is then "staged" (mpi takes host buffers, cpu-strict memory is not
# host-addressable), so these also run the host-staging path of strategies/parallel/.
# Label "strict" (and "mpi" for the multi-rank ones).
# (test_strategies_bert's strict run at one rank is left out for CI time: DistilBERT runs on
# cpu-strict under ddp at 2 ranks and fsdp at 3 below, and test_distilbert_strict alone)
foreach(t test_strategies)
  if(TARGET ${t})
    add_test(NAME ${t}_strict COMMAND ${t})
    set_tests_properties(${t}_strict PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "strict"
      ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=PASSIVE;VOLT_ACCELERATOR=cpu-strict;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_${t}_strict")
  endif()
endforeach()
if(NOT VOLT_HAVE_MPI OR NOT VOLT_MPIRUN)
  return()   # tests/strategies.cmake registers the placeholder that says why
endif()
set(_volt_strict_env
  "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" "OMP_NUM_THREADS=1"
  "VOLT_COMM_TIMEOUT=60" "ASAN_OPTIONS=detect_leaks=0" "VOLT_ACCELERATOR=cpu-strict"
  "VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_strategies_strict_mpi")
function(volt_strict_mpi_test name np timeout exe)
  add_test(NAME ${name} COMMAND ${VOLT_MPIRUN} --oversubscribe -np ${np} $<TARGET_FILE:${exe}> ${ARGN})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${_volt_strict_env}" PROCESSORS ${np}
    TIMEOUT ${timeout} SKIP_RETURN_CODE 77 LABELS "strict;mpi")
endfunction()
foreach(np 2 3)
  foreach(s ddp zero1 zero2 fsdp fsdp_shard_grad_op)
    volt_strict_mpi_test(test_${s}_np${np}_strict ${np} 120 test_strategies parity ${s})
  endforeach()
endforeach()
# DistilBERT small (CI time): ddp at 2 ranks, and fsdp at 3, the most sharded and unevenly
# (the plain cpu runs all of ddp / fsdp at 2 and 3: tests/strategies.cmake)
volt_strict_mpi_test(test_bert_ddp_np2_strict 2 300 test_strategies_bert parity ddp)
volt_strict_mpi_test(test_bert_fsdp_np3_strict 3 300 test_strategies_bert parity fsdp)
volt_strict_mpi_test(test_memory_held_np3_strict 3 120 test_strategies memory)
# an uneven evaluation's hold given back, and the units a checkpoint load gave back gathered,
# through the staged gathers (tests/mpi_hold.cmake)
if(TARGET test_mpi_hold)
  volt_strict_mpi_test(test_hold_fsdp_np2_strict 2 120 test_mpi_hold hold fsdp)
  volt_strict_mpi_test(test_load_shard_fsdp_np2_strict 2 120 test_mpi_hold load fsdp)
  volt_strict_mpi_test(test_setup_shard_fsdp_np2_strict 2 120 test_mpi_hold setup fsdp)
endif()
# WeightAveraging's swap back after a failed validation: the parts outside the owned slices
# gathered again on next use through the staged gathers (tests/mpi_weight_averaging.cmake)
if(TARGET test_mpi_weight_averaging)
  foreach(s fsdp deepspeed_stage_2)
    volt_strict_mpi_test(test_average_failed_val_${s}_np2_strict 2 90 test_mpi_weight_averaging failed_val ${s})
  endforeach()
endif()
# ZeRO's gathers after the step land through the host staging buffers here (as on cuda
# without NCCL): a checkpoint right after a step must wait for them or the params it leaves
# are the other ranks' slices from before the step
foreach(s zero1 zero2)
  volt_strict_mpi_test(test_${s}_ckpt_after_step_np2_strict 2 90 test_strategies zero_ckpt ${s})
endforeach()
# Weight averaging's swaps and re-gathers through the staging path (validation, train end, a
# sharded checkpoint and its resume)
foreach(s zero2 fsdp)
  volt_strict_mpi_test(test_ema_${s}_np2_strict 2 90 test_strategies ema ${s})
  volt_strict_mpi_test(test_ema_resume_${s}_np2_strict 2 90 test_strategies ema_resume ${s})
endforeach()
# bf16 gradient reduction through the staging path (bf16 buckets copied D2H, reduced, H2D, widened)
volt_strict_mpi_test(test_reduce16_zero2_np2_strict 2 90 test_strategies reduce16 zero2)
