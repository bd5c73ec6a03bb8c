# Callbacks across ranks (tests/test_mpi_callbacks.c), label "mpi": the collectives for
# callbacks (any / all with the ranks disagreeing, rank 0's broadcast, a rank that never calls:
# a timeout, not a hang) and ModelCheckpoint's train_time_interval with the ranks' clocks apart
# (every rank saves at rank 0's steps; under fsdp the save is collective, so a disagreement
# would hang until VOLT_COMM_TIMEOUT); SIGTERM on rank 1 alone stops every rank at the same step
# and the on-exception checkpoint resumes to the uninterrupted weights; SIGTERM on rank 1 inside a
# validation (and sanity check) of fit, or a standalone validate / test / predict, stops every rank
# after the same batch, well within the comm's timeout; ThroughputMonitor's global
# keys at 2 ranks whose clocks run at other speeds; evaluation datasets of other lengths per
# rank (0 / 2 / 5 batches, and 2 + 3r): fit with its sanity check, validate, test and predict
# end at once with the epoch means of every rank's batches (under fsdp with a model of two units,
# whose forwards would gather), SIGTERM on rank 1 stops them all and rank 0 says so; a checkpoint
# or log folder the writing rank cannot write (unwritable) fails every rank at fit start with the
# same message, well within the comm's timeout (ddp: rank 0 writes; fsdp: every rank writes its
# shard, so a folder rank 1 does not see fails too); a ModelCheckpoint save point (top-k and last,
# sync and async) costs two agreements (agreements); a loss spike on rank 1 alone ends every rank at
# that batch with the same words, rank 0 writing the skip list (spike); a failure on one rank alone
# (an on_fit_start before a Timer, a finder's checkpoint header on a resume, a datamodule's
# load_state_dict) ends every rank at once in the same words, and a Timer's limit stops every rank
# at one step, and one rank's skip of the rest of an epoch is every rank's (one_rank). Without MPI or mpirun, tests/strategies.cmake's
# placeholder stands for these too.
find_program(VOLT_CB_MPIRUN NAMES mpirun mpiexec)
if(NOT VOLT_HAVE_MPI OR NOT VOLT_CB_MPIRUN OR NOT TARGET test_mpi_callbacks)
  return()
endif()
set(_volt_cb_env "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" "OMP_NUM_THREADS=1"
  "VOLT_COMM_TIMEOUT=20" "ASAN_OPTIONS=detect_leaks=0"
  "VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_mpi_callbacks")
foreach(run "collective;ddp;2" "collective;ddp;3" "time_interval;ddp;2" "time_interval;fsdp;3" "interrupt;ddp;2"
    "interrupt;fsdp;3" "interrupt_eval;ddp;2" "interrupt_eval;fsdp;3" "throughput;ddp;2" "uneven;ddp;2" "uneven;ddp;3"
    "uneven;fsdp;3" "uneven;fsdp_shard_grad_op;2" "save_fails;ddp;2" "save_fails;fsdp;2" "discard;fsdp;2"
    "agreements;ddp;2" "agreements;fsdp;2" "spike;ddp;2" "spike;fsdp;2" "one_rank;ddp;2" "one_rank;fsdp;2")
  list(GET run 0 mode)
  list(GET run 1 s)
  list(GET run 2 np)
  add_test(NAME test_callbacks_${mode}_${s}_np${np}
    COMMAND ${VOLT_CB_MPIRUN} --oversubscribe -np ${np} $<TARGET_FILE:test_mpi_callbacks> ${mode} ${s})
  set_tests_properties(test_callbacks_${mode}_${s}_np${np} PROPERTIES ENVIRONMENT "${_volt_cb_env}" PROCESSORS ${np}
    TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "mpi")
endforeach()
# fails fast or not at all: a rank left waiting would take the comm's timeout (20 s) per case
foreach(s ddp fsdp)
  add_test(NAME test_callbacks_unwritable_${s}_np2
    COMMAND ${VOLT_CB_MPIRUN} --oversubscribe -np 2 $<TARGET_FILE:test_mpi_callbacks> unwritable ${s})
  set_tests_properties(test_callbacks_unwritable_${s}_np2 PROPERTIES ENVIRONMENT "${_volt_cb_env}" PROCESSORS 2
    TIMEOUT 40 SKIP_RETURN_CODE 77 LABELS "mpi")
endforeach()
