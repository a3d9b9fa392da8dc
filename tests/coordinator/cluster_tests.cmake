# A farm shared by teams: reservations, re-admit, drain (core and over
# real gRPC with a real agent and sim board).
add_executable(cluster_test ${CMAKE_CURRENT_LIST_DIR}/cluster_test.cc)
target_link_libraries(cluster_test PRIVATE coordinator_test_harness
  tunefarm_agent_grpc tunefarm_grpc_util GTest::gtest_main GTest::gmock)
add_dependencies(cluster_test tunefarm-sim-matmul)
target_compile_definitions(cluster_test PRIVATE
  SIM_MATMUL_BIN="$<TARGET_FILE:tunefarm-sim-matmul>")
gtest_discover_tests(cluster_test DISCOVERY_TIMEOUT 60)
