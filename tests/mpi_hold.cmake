# The hold of an uneven evaluation given back when the loop ends (tests/test_mpi_hold.c), label
# "mpi": under fsdp / fsdp_shard_grad_op, evaluations whose ranks run other numbers of batches
# (the sanity check, the validation inside fit, validate / test / predict) leave no more
# parameter memory resident than even ones, and the training and evaluation that follow give
# the same bits. "load": a checkpoint load (validate(ckpt), a resumed fit) leaves each rank its
# shard resident, not the whole model, with the same val_loss and final weights. "setup": so does
# set-up itself (a fresh trainer's validate, on_fit_start, the sanity check, the first training
# batch), with ddp's val_loss and first loss. The simulated-
# GPU launch (VMM granules) is in tests/gpu_sim_nccl.cmake, the cpu-strict ones (host staging)
# in tests/strict_strat.cmake. Without MPI or mpirun,
# tests/strategies.cmake's placeholder stands for these too.
find_program(VOLT_HOLD_MPIRUN NAMES mpirun mpiexec)
if(NOT VOLT_HAVE_MPI OR NOT VOLT_HOLD_MPIRUN OR NOT TARGET test_mpi_hold)
  return()
endif()
# one mode of test_mpi_hold at each "strategy:np" run: tests NAME_<strategy>_np<np>
function(volt_hold_runs name mode tmp)
  foreach(spec ${ARGN})
    string(REPLACE ":" ";" run "${spec}")
    list(GET run 0 s)
    list(GET run 1 np)
    add_test(NAME ${name}_${s}_np${np} COMMAND ${VOLT_HOLD_MPIRUN} --oversubscribe -np ${np} $<TARGET_FILE:test_mpi_hold> ${mode} ${s})
    set_tests_properties(${name}_${s}_np${np} PROPERTIES PROCESSORS ${np} TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "mpi"
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;VOLT_COMM_TIMEOUT=60;ASAN_OPTIONS=detect_leaks=0;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/${tmp}")
  endforeach()
endfunction()
volt_hold_runs(test_hold hold tmp_test_mpi_hold fsdp:2 fsdp:3 fsdp_shard_grad_op:2)
volt_hold_runs(test_load_shard load tmp_test_mpi_load fsdp:2 fsdp:3 fsdp_shard_grad_op:2)
volt_hold_runs(test_setup_shard setup tmp_test_mpi_setup fsdp:2 fsdp:3 fsdp_shard_grad_op:2 fsdp_shard_grad_op:3)
