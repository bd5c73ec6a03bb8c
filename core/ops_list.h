/* The op table: one X(ID, "name") per op. Backends fill a volt_kernel per entry
 * (core/backend.h); front-ends in core/ops_*.c check shapes and record nodes. */
#ifndef VOLT_OPS_LIST_H
#define VOLT_OPS_LIST_H
#define VOLT_OPS(X) \
    X(MATMUL, "matmul") X(LINEAR, "linear") \
    X(ADD, "add") X(MUL, "mul") X(SCALE, "scale") \
    X(RELU, "relu") X(GELU, "gelu") X(GELU_TANH, "gelu_tanh") X(TANH, "tanh") X(SIGMOID, "sigmoid") \
    X(SOFTMAX, "softmax") X(LOG_SOFTMAX, "log_softmax") \
    X(CROSS_ENTROPY, "cross_entropy") X(MSE, "mse") \
    X(LAYERNORM, "layernorm") X(EMBEDDING, "embedding") X(DROPOUT, "dropout") \
    X(ATTENTION, "attention") \
    X(RESHAPE, "reshape") X(PERMUTE, "permute") X(SLICE, "slice") X(CONCAT, "concat") \
    X(SUM, "sum") X(MEAN, "mean") \
    X(CONV2D, "conv2d") X(MAX_POOL2D, "max_pool2d") \
    X(CAST, "cast") X(ARANGE, "arange") \
    X(ARGMAX, "argmax") X(ACCURACY, "accuracy")

typedef enum volt_op_id {
#define VOLT_OP_ENUM_(id, name) VOLT_OP_##id,
    VOLT_OPS(VOLT_OP_ENUM_)
#undef VOLT_OP_ENUM_
    VOLT_OP_COUNT
} volt_op_id;
#endif
