# Strategy parity on the simulated GPU over the simulated NCCL at 2 ranks (2 processes):
# mpirun -np 2 test_strategies parity <s> with VOLT_ACCELERATOR=cuda, the cudasim runtime,
# cuBLASLt and NCCL (tests/cudasim/README.md; the ranks meet in a shared-memory segment,
# docs/NCCL.md "NCCL simulator"). These run the nccl comm backend at world size > 1, where the
# rank offsets of reduce-scatter / all-gather and the fsdp shards are not all 0. test_strategies
# checks that its comm's device is $VOLT_ACCELERATOR; the wrapper also checks that rank 0 said
# "comm nccl on device cuda" (no fallback to another comm). Labels "cudasim;mpi".
# (this file is included before tests/strategies.cmake, whose find_program a fresh configure has
# not run yet: look for mpirun here too)
find_program(VOLT_MPIRUN NAMES mpirun mpiexec)
if(NOT (VOLT_CUDA_SIM AND VOLT_HAVE_MPI AND VOLT_MPIRUN) OR NOT TARGET test_strategies OR NOT TARGET volt_cudasim_nccl)
  return()
endif()
# CUDASIM_VMM_GRANULE_KB=16: the test models' unit buffers (tens of KiB to 1 MiB) become VMM
# blocks of many granules, so fsdp's give-back / recommit really unmaps and maps them here
# (core/cuda/vmm.c) and parity is checked across it.
set(_volt_sim_nccl_env
  "CUDASIM_VMM_GRANULE_KB=16"
  "VOLT_ACCELERATOR=cuda"
  "VOLT_CUBLASLT=$<TARGET_FILE:volt_cudasim_cublasLt>" "VOLT_NCCL=$<TARGET_FILE:volt_cudasim_nccl>"
  "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" "OMP_NUM_THREADS=1"
  "VOLT_COMM_TIMEOUT=60" "ASAN_OPTIONS=detect_leaks=0"
  "VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_strategies_sim_nccl")
# volt_sim_nccl_test(NAME NP GREP ARGS...): mpirun -np NP test_strategies ARGS, passing when it
# exits 0 and its output has a line matching GREP (the proof that the comm was nccl).
function(volt_sim_nccl_test name np grep)
  volt_sim_nccl_test_exe(${name} ${np} ${grep} $<TARGET_FILE:test_strategies> ${ARGN})
endfunction()
# volt_sim_nccl_test_exe(NAME NP GREP EXE ARGS...): the same with another test program.
function(volt_sim_nccl_test_exe name np grep exe)
  add_test(NAME ${name} COMMAND sh -c
    "np=$1; pat=$2; exe=$3; shift 3; out=$(\"$0\" --oversubscribe -np $np \"$exe\" \"$@\" 2>&1); rc=$?; \
printf '%s\\n' \"$out\"; [ $rc -eq 0 ] || exit $rc; printf '%s\\n' \"$out\" | grep -q \"$pat\" || \
{ echo \"FAIL: no line matching '$pat' (was the comm nccl on cuda?)\"; exit 1; }"
    ${VOLT_MPIRUN} ${np} ${grep} ${exe} ${ARGN})
  # one simulated GPU per rank on the node (comm_nccl.c refuses more ranks than visible GPUs)
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "CUDASIM_DEVICES=${np};${_volt_sim_nccl_env}" PROCESSORS ${np}
    TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "cudasim;mpi")
endfunction()
foreach(s ddp zero1 zero2 fsdp fsdp_shard_grad_op)
  volt_sim_nccl_test(test_${s}_np2_sim_nccl 2 "^comm nccl on device cuda" parity ${s})
endforeach()
foreach(s zero2 fsdp)   # 3 ranks: uneven shards
  volt_sim_nccl_test(test_${s}_np3_sim_nccl 3 "^comm nccl on device cuda" parity ${s})
endforeach()
# async_save under fsdp from device memory: each rank's snapshot copies its shard off the
# simulated GPU, its thread writes it, the next save point commits (test_strategies async_ckpt).
volt_sim_nccl_test(test_async_ckpt_fsdp_np2_sim_nccl 2 "^comm nccl on device cuda" async_ckpt fsdp)
# A rank leaves: the other's collective times out (VOLT_COMM_TIMEOUT=5) and comm_nccl.c aborts
# the communicator, which must release the simulated collective waiting in its barrier.
volt_sim_nccl_test(test_fault_timeout_ddp_np2_sim_nccl 2 "NCCL communicator aborted" fault ddp)
volt_sim_nccl_test(test_fault_timeout_fsdp_np2_sim_nccl 2 "NCCL communicator aborted" fault fsdp 3)
set_tests_properties(test_fault_timeout_ddp_np2_sim_nccl test_fault_timeout_fsdp_np2_sim_nccl PROPERTIES TIMEOUT 60)
set_property(TEST test_fault_timeout_ddp_np2_sim_nccl test_fault_timeout_fsdp_np2_sim_nccl APPEND PROPERTY
  ENVIRONMENT "VOLT_COMM_TIMEOUT=5")
# A rank that fails alone and ends (tests/fault_stepfail.sh): its leave notice reaches the other
# rank's NCCL wait, which aborts the communicator and fails in seconds naming it (not at the
# 60 s timeout).
if(TARGET fault_run)
  add_test(NAME test_fault_stepfail_ddp_np2_sim_nccl COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault_stepfail.sh
    ${VOLT_MPIRUN} $<TARGET_FILE:fault_run> ddp ${CMAKE_CURRENT_BINARY_DIR}/tmp_faults_sim/stepfail_ddp train
    "NCCL communicator aborted")
  set_tests_properties(test_fault_stepfail_ddp_np2_sim_nccl PROPERTIES PROCESSORS 2 TIMEOUT 120 LABELS "cudasim;mpi;fault"
    ENVIRONMENT "CUDASIM_DEVICES=2;${_volt_sim_nccl_env};OMP_WAIT_POLICY=PASSIVE")
endif()
# compile over 2 ranks (tests/test_mpi_compile.c; docs/NCCL.md, "compile over several
# processes"): the step's collectives captured into its graph. Eager == compiled bit for bit
# under ddp and deepspeed_stage_1, at 32-true and 16-mixed (whose inf/NaN vote is summed over
# ranks on the device), and with gradient accumulation; zero2 / fsdp / the mpi comm refused; a rank that leaves ends the
# other's graph launch at the deadline (VOLT_COMM_TIMEOUT=5), not in a hang.
if(TARGET test_mpi_compile)
  foreach(s ddp zero1)
    foreach(p 32-true 16-mixed)
      volt_sim_nccl_test_exe(test_compile_${s}_${p}_np2_sim_nccl 2 "^compile .*eager == compiled"
        $<TARGET_FILE:test_mpi_compile> parity ${s} ${p})
    endforeach()
  endforeach()
  # accumulate_grad_batches 4 over 3 epochs of 6 batches (windows [0 1 2 3] [4 5]): a graph per
  # kind of micro-step, the ones inside a window without collectives
  volt_sim_nccl_test_exe(test_compile_ddp_32-true_accum4_np2_sim_nccl 2 "^compile .*accumulate 4: eager == compiled"
    $<TARGET_FILE:test_mpi_compile> parity ddp 32-true 4)
  volt_sim_nccl_test_exe(test_compile_zero1_16-mixed_accum4_np2_sim_nccl 2 "^compile .*accumulate 4: eager == compiled"
    $<TARGET_FILE:test_mpi_compile> parity zero1 16-mixed 4)
  volt_sim_nccl_test_exe(test_compile_refuse_np2_sim_nccl 2 "^refused ddp .*over mpi"
    $<TARGET_FILE:test_mpi_compile> refuse)
  volt_sim_nccl_test_exe(test_compile_fault_np2_sim_nccl 2 "NCCL communicator aborted"
    $<TARGET_FILE:test_mpi_compile> fault)
  set_tests_properties(test_compile_fault_np2_sim_nccl PROPERTIES TIMEOUT 90)
  set_property(TEST test_compile_fault_np2_sim_nccl APPEND PROPERTY ENVIRONMENT "VOLT_COMM_TIMEOUT=5")
endif()

# Device memory that really shrinks (issue 12): the memory report's resident bytes of the unit
# buffers on the simulated GPU, where they are VMM blocks mapped 2 MiB granule by granule
# (core/cuda/vmm.c): zero2/fsdp grads and fsdp params are given back (unmapped), ddp/zero1 hold
# everything. The simulator's granule is cut to 16 KiB (CUDASIM_VMM_GRANULE_KB) so the test's
# 512x512 units (1 MiB) span 64 granules each without the simulator's cost of 2 MiB units.
volt_sim_nccl_test(test_memory_held_np2_sim_nccl 2 "^comm nccl on device cuda" memory)
set_property(TEST test_memory_held_np2_sim_nccl APPEND PROPERTY
  ENVIRONMENT "VOLT_TEST_MEM_GRANULE=16384")
# An uneven evaluation's hold given back on the simulated GPU (tests/test_mpi_hold.c,
# tests/mpi_hold.cmake): the granules fsdp gathered for the loop are unmapped when it ends, as
# after a unit's use, and the memory report's resident bytes show it (units of 256 KiB: 16
# granules of 16 KiB each).
if(TARGET test_mpi_hold)
  foreach(s fsdp fsdp_shard_grad_op)
    volt_sim_nccl_test_exe(test_hold_${s}_np2_sim_nccl 2 "^comm nccl on device cuda" $<TARGET_FILE:test_mpi_hold> hold ${s})
    # and a checkpoint load's give-back: the granules outside each rank's slice unmapped as each
    # unit is written, mapped again by the first forward's gathers
    volt_sim_nccl_test_exe(test_load_shard_${s}_np2_sim_nccl 2 "^comm nccl on device cuda" $<TARGET_FILE:test_mpi_hold> load ${s})
    # and set-up's: the granules outside each rank's slice unmapped as each unit's broadcast
    # completes, mapped again by the first forward's gathers
    volt_sim_nccl_test_exe(test_setup_shard_${s}_np2_sim_nccl 2 "^comm nccl on device cuda" $<TARGET_FILE:test_mpi_hold> setup ${s})
    set_property(TEST test_hold_${s}_np2_sim_nccl test_load_shard_${s}_np2_sim_nccl test_setup_shard_${s}_np2_sim_nccl APPEND PROPERTY
      ENVIRONMENT "VOLT_TEST_MEM_GRANULE=16384")
  endforeach()
endif()

# ---- Sharded checkpoints across the simulated GPUs and the CPU (issue 12 item 5; docs/NCCL.md,
# "Sharded checkpoints across cuda and cpu runs"). Each save runs on one device, each resume or
# load on the other; the wrapper greps the line that proves where each end ran ("comm nccl on
# device cuda", "comm mpi on device cpu", "params on device ..."), so a run that fell back to
# another device or comm fails.
#   GPU -> CPU: fsdp on 2 simulated GPUs over nccl saves mid-epoch (test_strategies reshard_save);
#     ddp on 2 and 3 cpu ranks over mpi and single on the cpu resume it and must reach the
#     uninterrupted single run's final weights (the CPU resharding tests' tolerance, 1e-5
#     relative + 1e-7). test_checkpoint shard_save / shard_load: the cpu load of the GPU shards
#     is bitwise the GPU run's export (weights) and its shards' optimizer slices.
#   CPU -> GPU: fsdp on 3 cpu ranks saves; ddp and zero2 on 2 simulated GPUs over nccl and
#     single on one simulated GPU resume it; test_checkpoint: fsdp on 2 cpu ranks, loaded on the
#     simulated GPU, bitwise.
set(_volt_xd "${CMAKE_CURRENT_BINARY_DIR}/tmp_reshard_sim_nccl")
file(MAKE_DIRECTORY "${_volt_xd}")
set(_volt_cpu_env "VOLT_ACCELERATOR=cpu" "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" "OMP_NUM_THREADS=1"
  "VOLT_COMM_TIMEOUT=60" "ASAN_OPTIONS=detect_leaks=0" "VOLT_TEST_TMP=${_volt_xd}")
# volt_xdev_test(NAME ACC NP GREP EXE ARGS...): EXE ARGS under mpirun -np NP (NP 0: EXE alone, no
# MPI) on ACC (cuda: the simulated GPUs, one per rank, nccl; cpu: mpi); passes when it exits 0
# and its output has a line matching GREP. VOLT_TEST_TMP is the folder of the checkpoints (the
# tests make it: a configure-time folder may have been removed since).
function(volt_xdev_test name acc np grep exe)
  add_test(NAME ${name} COMMAND sh -c
    "np=$1; pat=$2; exe=$3; shift 3; if [ $np -gt 0 ]; then out=$(\"$0\" --oversubscribe -np $np \"$exe\" \"$@\" 2>&1); \
else out=$(\"$exe\" \"$@\" 2>&1); fi; rc=$?; printf '%s\\n' \"$out\"; [ $rc -eq 0 ] || exit $rc; \
printf '%s\\n' \"$out\" | grep -q \"$pat\" || { echo \"FAIL: no line matching '$pat' (did it run on the device it was told?)\"; exit 1; }"
    ${VOLT_MPIRUN} ${np} ${grep} ${exe} ${ARGN})
  set(procs ${np})
  if(np EQUAL 0)
    set(procs 1)
  endif()
  if(acc STREQUAL "cuda")
    set(env "CUDASIM_DEVICES=${procs}" ${_volt_sim_nccl_env})
    list(FILTER env EXCLUDE REGEX "^VOLT_TEST_TMP=")
    list(APPEND env "VOLT_TEST_TMP=${_volt_xd}")
  else()
    set(env ${_volt_cpu_env})
  endif()
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${env}" PROCESSORS ${procs} TIMEOUT 300
    SKIP_RETURN_CODE 77 LABELS "cudasim;mpi")
endfunction()
set(_volt_ts_exe $<TARGET_FILE:test_strategies>)
set(_volt_tc_exe $<TARGET_FILE:test_checkpoint>)
# GPU -> CPU
set(_p "${_volt_xd}/fsdp2_cuda.safetensors")
volt_xdev_test(test_reshard_save_fsdp_np2_sim_nccl cuda 2 "^comm nccl on device cuda" ${_volt_ts_exe} reshard_save fsdp ${_p})
volt_xdev_test(test_reshard_cuda_to_cpu_ddp_np2 cpu 2 "^comm mpi on device cpu" ${_volt_ts_exe} reshard_resume ddp ${_p})
volt_xdev_test(test_reshard_cuda_to_cpu_ddp_np3 cpu 3 "^comm mpi on device cpu" ${_volt_ts_exe} reshard_resume ddp ${_p})
volt_xdev_test(test_reshard_cuda_to_cpu_single cpu 0 "^params on device cpu" ${_volt_ts_exe} reshard_resume single ${_p})
set_tests_properties(test_reshard_save_fsdp_np2_sim_nccl PROPERTIES FIXTURES_SETUP volt_xdev_ts_cuda)
set_tests_properties(test_reshard_cuda_to_cpu_ddp_np2 test_reshard_cuda_to_cpu_ddp_np3 test_reshard_cuda_to_cpu_single
  PROPERTIES FIXTURES_REQUIRED volt_xdev_ts_cuda)
set(_p "${_volt_xd}/ckpt_fsdp2_cuda.safetensors")
volt_xdev_test(test_checkpoint_shard_save_sim_nccl cuda 2 "^comm nccl on device cuda" ${_volt_tc_exe} shard_save ${_p})
volt_xdev_test(test_checkpoint_shard_load_cuda_to_cpu cpu 0 "^parameters live on the 'cpu' device" ${_volt_tc_exe} shard_load ${_p})
set_tests_properties(test_checkpoint_shard_save_sim_nccl PROPERTIES FIXTURES_SETUP volt_xdev_tc_cuda)
set_tests_properties(test_checkpoint_shard_load_cuda_to_cpu PROPERTIES FIXTURES_REQUIRED volt_xdev_tc_cuda)
# CPU -> GPU
set(_p "${_volt_xd}/fsdp3_cpu.safetensors")
volt_xdev_test(test_reshard_save_fsdp_np3_for_sim cpu 3 "^comm mpi on device cpu" ${_volt_ts_exe} reshard_save fsdp ${_p})
volt_xdev_test(test_reshard_cpu_to_cuda_ddp_np2_sim_nccl cuda 2 "^comm nccl on device cuda" ${_volt_ts_exe} reshard_resume ddp ${_p})
volt_xdev_test(test_reshard_cpu_to_cuda_zero2_np2_sim_nccl cuda 2 "^comm nccl on device cuda" ${_volt_ts_exe} reshard_resume zero2 ${_p})
volt_xdev_test(test_reshard_cpu_to_cuda_single_sim cuda 0 "^params on device cuda" ${_volt_ts_exe} reshard_resume single ${_p})
set_tests_properties(test_reshard_save_fsdp_np3_for_sim PROPERTIES FIXTURES_SETUP volt_xdev_ts_cpu)
set_tests_properties(test_reshard_cpu_to_cuda_ddp_np2_sim_nccl test_reshard_cpu_to_cuda_zero2_np2_sim_nccl
  test_reshard_cpu_to_cuda_single_sim PROPERTIES FIXTURES_REQUIRED volt_xdev_ts_cpu)
set(_p "${_volt_xd}/ckpt_fsdp2_cpu.safetensors")
volt_xdev_test(test_checkpoint_shard_save_for_sim cpu 2 "^comm mpi on device cpu" ${_volt_tc_exe} shard_save ${_p})
volt_xdev_test(test_checkpoint_shard_load_cpu_to_cuda_sim cuda 0 "^parameters live on the 'cuda' device" ${_volt_tc_exe} shard_load ${_p})
set_tests_properties(test_checkpoint_shard_save_for_sim PROPERTIES FIXTURES_SETUP volt_xdev_tc_cpu)
set_tests_properties(test_checkpoint_shard_load_cpu_to_cuda_sim PROPERTIES FIXTURES_REQUIRED volt_xdev_tc_cpu)

# Ranks in different calls over the simulated NCCL (tests/test_mpi_consistency.c): the control
# collectives from host memory carry the envelope (strategies/comm/comm.h), so f64 all-reduces of
# one size from different call sites fail on every rank naming the mismatch (sites; the simulator
# alone sees nothing wrong there), and a sharded save_checkpoint or snapshot_checkpoint on rank 0
# alone fails every rank saying the ranks called different collectives.
if(TARGET test_mpi_consistency)
  foreach(np 2 3)
    volt_sim_nccl_test_exe(test_consistency_sites_nccl_np${np}_sim_nccl ${np} "^comm nccl on device cuda"
      $<TARGET_FILE:test_mpi_consistency> sites nccl)
  endforeach()
  foreach(mode save_one snapshot_one)
    volt_sim_nccl_test_exe(test_consistency_${mode}_fsdp_np2_sim_nccl 2 "^comm nccl on device cuda"
      $<TARGET_FILE:test_mpi_consistency> ${mode} fsdp)
  endforeach()
endif()

# Comms built on the groups of an MPI_Comm_split (volt_comm_config.mpi_comm; docs/NCCL.md
# "Launching on N GPUs"): 4 ranks, each NCCL comm's unique id broadcast over its own group's
# communicator — two groups at once, one group without world rank 0 alone (must not wait for
# it), and four worlds of one; each group's all-reduce sums exactly its members.
if(TARGET test_nccl)
  volt_xdev_test(test_nccl_split_np4_sim_nccl cuda 4 "^nccl: split: ok" $<TARGET_FILE:test_nccl> split)
  set_tests_properties(test_nccl_split_np4_sim_nccl PROPERTIES TIMEOUT 120)
endif()
