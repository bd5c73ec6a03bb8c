# volt_cli and what it brings to the apps (issue 14): the apps' command line, subcommands,
# predict, --pretrained config.json, self-launch (tests/app_cli.sh); the TensorBoard event
# file read back with protoc against the published schema (tests/tensorboard_check.sh); the
# plots rendered with rsvg-convert (tests/plot_check.sh). The last two skip (77) without
# protoc / rsvg-convert (scripts/setup.sh installs them).
add_test(NAME app_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/app_cli.sh $<TARGET_FILE:volt-text-classification>
    $<TARGET_FILE:volt-fashion-mnist> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_cli
    ${CMAKE_CURRENT_SOURCE_DIR}/../seed.json ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/distilbert_tiny.safetensors
    $<TARGET_FILE:volt-plot>)
set_tests_properties(app_cli PROPERTIES PASS_REGULAR_EXPRESSION "app_cli: ok" TIMEOUT 300 LABELS cli
  ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
set_tests_properties(test_cli PROPERTIES LABELS cli)   # ctest -L cli: the parser and the apps' command line
add_test(NAME tensorboard_events
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tensorboard_check.sh $<TARGET_FILE:volt-fashion-mnist>
    ${CMAKE_CURRENT_BINARY_DIR}/tmp_tensorboard ${CMAKE_CURRENT_SOURCE_DIR}/tensorboard)
set_tests_properties(tensorboard_events PROPERTIES PASS_REGULAR_EXPRESSION "tensorboard_check: ok" SKIP_RETURN_CODE 77
  TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
add_test(NAME volt_plot
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/plot_check.sh $<TARGET_FILE:volt-plot> ${CMAKE_CURRENT_BINARY_DIR}/tmp_volt_plot)
set_tests_properties(volt_plot PROPERTIES PASS_REGULAR_EXPRESSION "plot_check: ok" SKIP_RETURN_CODE 77 TIMEOUT 300)

# Counted metrics across ranks: tests/test_metrics.c under mpirun, ddp and fsdp on 2 ranks
# give bitwise the single-process val_acc / F1 / confusion matrix.
find_program(VOLT_CLI_MPIRUN NAMES mpirun mpiexec)
if(VOLT_HAVE_MPI AND VOLT_CLI_MPIRUN)
  foreach(strategy ddp fsdp)
    add_test(NAME test_metrics_${strategy}_np2
      COMMAND ${VOLT_CLI_MPIRUN} --oversubscribe -np 2 $<TARGET_FILE:test_metrics> ${strategy})
    set_tests_properties(test_metrics_${strategy}_np2 PROPERTIES TIMEOUT 120 PROCESSORS 2 LABELS "mpi"
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;VOLT_COMM_TIMEOUT=60;ASAN_OPTIONS=detect_leaks=0")
  endforeach()
endif()
