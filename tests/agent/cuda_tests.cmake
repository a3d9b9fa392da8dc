# cuda_board_test: the cuda board (agent/cuda_board.h) on any machine with a
# stand-in nvcc/ncu/nvidia-smi, and on the real shipped kernels where an
# NVIDIA GPU is present (those tests skip, saying why, elsewhere).
add_executable(cuda_fake_tool cuda_fake_tool.cc)
add_executable(cuda_board_test cuda_board_test.cc)
target_link_libraries(cuda_board_test PRIVATE
  tunefarm_cuda_board tunefarm_board tunefarm_analyzer tunefarm_ops
  tunefarm_common tunefarm_proto GTest::gtest GTest::gtest_main)
add_dependencies(cuda_board_test cuda_fake_tool)
target_compile_definitions(cuda_board_test PRIVATE
  FAKE_TOOL="$<TARGET_FILE:cuda_fake_tool>")
gtest_discover_tests(cuda_board_test DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 600)
