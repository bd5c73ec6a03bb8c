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
set(_volt_sim_nccl_env
  "VOLT_ACCELERATOR=cuda"
  "VOLT_CUBLASLT=$<TARGET_FILE:volt_cudasim_cublasLt>" "VOLT_NCCL=$<TARGET_FILE:volt_cudasim_nccl>"
  "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" "OMP_NUM_THREADS=1"
  "VOLT_COMM_TIMEOUT=60" "ASAN_OPTIONS=detect_leaks=0"
  "VOLT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp_test_strategies_sim_nccl")
# volt_sim_nccl_test(NAME NP GREP ARGS...): mpirun -np NP test_strategies ARGS, passing when it
# exits 0 and its output has a line matching GREP (the proof that the comm was nccl).
function(volt_sim_nccl_test name np grep)
  add_test(NAME ${name} COMMAND sh -c
    "np=$1; pat=$2; exe=$3; shift 3; out=$(\"$0\" --oversubscribe -np $np \"$exe\" \"$@\" 2>&1); rc=$?; \
printf '%s\\n' \"$out\"; [ $rc -eq 0 ] || exit $rc; printf '%s\\n' \"$out\" | grep -q \"$pat\" || \
{ echo \"FAIL: no line matching '$pat' (was the comm nccl on cuda?)\"; exit 1; }"
    ${VOLT_MPIRUN} ${np} ${grep} $<TARGET_FILE:test_strategies> ${ARGN})
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
# A rank leaves: the other's collective times out (VOLT_COMM_TIMEOUT=5) and comm_nccl.c aborts
# the communicator, which must release the simulated collective waiting in its barrier.
volt_sim_nccl_test(test_fault_timeout_ddp_np2_sim_nccl 2 "NCCL communicator aborted" fault ddp)
volt_sim_nccl_test(test_fault_timeout_fsdp_np2_sim_nccl 2 "NCCL communicator aborted" fault fsdp 3)
set_tests_properties(test_fault_timeout_ddp_np2_sim_nccl test_fault_timeout_fsdp_np2_sim_nccl PROPERTIES TIMEOUT 60)
set_property(TEST test_fault_timeout_ddp_np2_sim_nccl test_fault_timeout_fsdp_np2_sim_nccl APPEND PROPERTY
  ENVIRONMENT "VOLT_COMM_TIMEOUT=5")
# Device memory that really shrinks (issue 12): the memory report's resident bytes of the unit
# buffers on the simulated GPU, where they are VMM blocks mapped 2 MiB granule by granule
# (core/cuda/vmm.c): zero2/fsdp grads and fsdp params are given back (unmapped), ddp/zero1 hold
# everything. Units of 4096x4096 so each spans 32 granules.
volt_sim_nccl_test(test_memory_held_np2_sim_nccl 2 "^comm nccl on device cuda" memory)
set_property(TEST test_memory_held_np2_sim_nccl APPEND PROPERTY
  ENVIRONMENT "VOLT_TEST_MEM_WIDTH=4096" "VOLT_TEST_MEM_GRANULE=2097152")
