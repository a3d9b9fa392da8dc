# Noise-aware keep / roll back end to end: real coordinator core + real sim
# boards with injected noise (included from tests/coordinator/CMakeLists.txt).
add_executable(noise_sweep_test ${CMAKE_CURRENT_LIST_DIR}/noise_sweep_test.cc)
target_link_libraries(noise_sweep_test PRIVATE
  coordinator_test_harness tunefarm_board tunefarm_sim_model GTest::gtest_main)
add_dependencies(noise_sweep_test tunefarm-sim-matmul)
target_compile_definitions(noise_sweep_test PRIVATE
  SIM_MATMUL_BIN="$<TARGET_FILE:tunefarm-sim-matmul>")
gtest_discover_tests(noise_sweep_test DISCOVERY_TIMEOUT 60)
