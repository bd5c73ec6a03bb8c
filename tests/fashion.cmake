# Fashion-MNIST app, short: a few hundred batches of the real data (Debian's
# dataset-fashion-mnist, installed by scripts/setup.sh), checkpoint by val_acc, resume,
# test with the best checkpoint. The full run's accuracy is in docs/FASHION_MNIST.md.
add_test(NAME app_fashion_mnist_short
  COMMAND bash -c "rm -rf \"$1\" && \"$0\" --model mlp --epochs 2 --limit-train-batches 150 --limit-val-batches 20 --limit-test-batches 40 --root \"$1\" --no-progress && \"$0\" --model mlp --epochs 3 --limit-train-batches 150 --limit-val-batches 20 --limit-test-batches 40 --root \"$1\" --no-progress --resume"
    $<TARGET_FILE:volt-fashion-mnist> ${CMAKE_CURRENT_BINARY_DIR}/tmp_app_fashion_mnist)
set_tests_properties(app_fashion_mnist_short PROPERTIES
  PASS_REGULAR_EXPRESSION "test_acc: 0\\.(7[5-9]|8|9)" TIMEOUT 600
  ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
