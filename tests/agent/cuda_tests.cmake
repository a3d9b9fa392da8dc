# cuda_board_test: the cuda board (agent/cuda_board.h) on any machine with a
# stand-in nvcc/ncu/nvidia-smi, and on the real shipped kernels where an
# NVIDIA GPU is present (those tests skip, saying why, elsewhere).
add_executable(cuda_fake_tool cuda_fake_tool.cc)
# The same program as a runner variant (what the fake nvcc writes for -shared).
add_library(cuda_fake_variant SHARED cuda_fake_tool.cc)
target_compile_definitions(cuda_fake_variant PRIVATE TF_VARIANT_SHARED
  main=tf_variant_main)
add_dependencies(cuda_fake_tool cuda_fake_variant)
target_compile_definitions(cuda_fake_tool PRIVATE
  FAKE_VARIANT_SO="$<TARGET_FILE:cuda_fake_variant>")
add_executable(cuda_board_test cuda_board_test.cc)
target_link_libraries(cuda_board_test PRIVATE
  tunefarm_cuda_board tunefarm_board tunefarm_analyzer tunefarm_ops
  tunefarm_common tunefarm_proto GTest::gtest GTest::gtest_main)
add_dependencies(cuda_board_test cuda_fake_tool tunefarm-variant-runner)
target_compile_definitions(cuda_board_test PRIVATE
  FAKE_TOOL="$<TARGET_FILE:cuda_fake_tool>"
  VARIANT_RUNNER_BIN="$<TARGET_FILE:tunefarm-variant-runner>")
gtest_discover_tests(cuda_board_test DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 600)
