# The cuda board (agent/cuda_board.h): GPU discovery through nvidia-smi,
# Nsight Compute command construction, and the board itself. Plain C++: it
# runs nvcc, nvidia-smi and ncu as child processes, so building it needs no
# CUDA toolkit (machines without one get boards that fail discovery cleanly).
add_library(tunefarm_cuda_board STATIC
  cuda_board.cc
  gpu_discovery.cc
  ncu.cc)
target_link_libraries(tunefarm_cuda_board PUBLIC
  tunefarm_board tunefarm_proto tunefarm_common
  absl::status absl::statusor absl::strings absl::str_format absl::time
  nlohmann_json::nlohmann_json spdlog::spdlog Threads::Threads)
