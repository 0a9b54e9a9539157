"""Float64 NumPy reference of the DeepSeek V4 Flash target model (test-only; not installed).

`dsv4_ref` holds the hyperparameters, weights, sublayer functions and the streaming model;
`lowp` the FP8/FP4 simulations and the Hadamard rotation; `tiny` tiny random test models."""
