# Ranks that disagree (tests/test_mpi_consistency.c), label "mpi": a ckpt_path on some ranks only
# or another per rank, a sharded save_checkpoint or snapshot_checkpoint on rank 0 only, models or
# settings that differ per rank, a ckpt_path naming another file on one rank, a sharded
# checkpoint whose shards were swapped or whose index has overlapping parameters or ranges out of
# rank order, control collectives from different call sites on a comm alone (sites): every rank
# fails with an error naming the difference (never a crash, a hang or a silent mix). The sites,
# save_one and snapshot_one modes also run over the simulated NCCL (tests/gpu_sim_nccl.cmake).
find_program(VOLT_CONS_MPIRUN NAMES mpirun mpiexec)
if(NOT VOLT_HAVE_MPI OR NOT VOLT_CONS_MPIRUN OR NOT TARGET test_mpi_consistency)
  return()
endif()
foreach(run "ckpt_path;ddp;2" "ckpt_path;fsdp;3" "save_one;deepspeed_stage_2;2" "save_one;fsdp;2" "save_one;fsdp;3"
            "snapshot_one;fsdp;2" "snapshot_one;deepspeed_stage_2;3"
            "model;ddp;2" "model;deepspeed_stage_2;2" "model;fsdp;3" "other_file;ddp;2" "other_file;fsdp;2"
            "shards;fsdp;2" "shards;deepspeed_stage_2;3" "sites;mpi;2" "sites;mpi;3")
  list(GET run 0 mode)
  list(GET run 1 s)
  list(GET run 2 np)
  add_test(NAME test_consistency_${mode}_${s}_np${np}
    COMMAND ${VOLT_CONS_MPIRUN} --oversubscribe -np ${np} $<TARGET_FILE:test_mpi_consistency> ${mode} ${s})
  set_tests_properties(test_consistency_${mode}_${s}_np${np} PROPERTIES PROCESSORS ${np} TIMEOUT 120 SKIP_RETURN_CODE 77
    LABELS "mpi" ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;VOLT_COMM_TIMEOUT=60;ASAN_OPTIONS=detect_leaks=0;VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_mpi_consistency")
endforeach()
