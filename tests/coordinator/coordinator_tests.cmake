# Coordinator domain-core tests (included from tests/coordinator/CMakeLists.txt).
add_executable(coordinator_test ${CMAKE_CURRENT_LIST_DIR}/coordinator_test.cc)
target_link_libraries(coordinator_test PRIVATE
  coordinator_test_harness GTest::gtest_main GTest::gmock)
gtest_discover_tests(coordinator_test DISCOVERY_TIMEOUT 60)

# Identity, authorisation, quotas, fair share and TLS over real gRPC.
add_executable(auth_test ${CMAKE_CURRENT_LIST_DIR}/auth_test.cc)
target_link_libraries(auth_test PRIVATE coordinator_test_harness
  tunefarm_grpc_util GTest::gtest_main)
gtest_discover_tests(auth_test DISCOVERY_TIMEOUT 60)

# Issue 4's termination reasons and guided stage transitions (domain core).
add_executable(termination_test ${CMAKE_CURRENT_LIST_DIR}/termination_test.cc)
target_link_libraries(termination_test PRIVATE
  coordinator_test_harness GTest::gtest_main GTest::gmock)
gtest_discover_tests(termination_test DISCOVERY_TIMEOUT 60)

# Stage, commit, then apply: every mutating call against a store that fails
# its commit (FaultInjectingStore), a full data disk (tmpfs), and liveness
# under slow commits.
add_executable(durability_test
  ${CMAKE_CURRENT_LIST_DIR}/durability_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/disk_full_coordinator_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/liveness_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/group_commit_test.cc)
target_link_libraries(durability_test PRIVATE
  coordinator_test_harness GTest::gtest_main GTest::gmock)
gtest_discover_tests(durability_test DISCOVERY_TIMEOUT 60)

# Paging of every list RPC over loopback gRPC, and `tunefarm rounds` at
# 5,000 rounds.
add_executable(paging_test ${CMAKE_CURRENT_LIST_DIR}/paging_test.cc)
target_link_libraries(paging_test PRIVATE
  coordinator_test_harness tunefarm_cli GTest::gtest_main)
gtest_discover_tests(paging_test DISCOVERY_TIMEOUT 60)

# Issue 17: multi-workload sweeps (per_workload, one_config), their recovery
# and their spec errors (domain core).
add_executable(multi_workload_test
  ${CMAKE_CURRENT_LIST_DIR}/multi_workload_test.cc)
target_link_libraries(multi_workload_test PRIVATE
  coordinator_test_harness GTest::gtest_main GTest::gmock)
gtest_discover_tests(multi_workload_test DISCOVERY_TIMEOUT 60)

# WatchSweep streams park without a thread (callback API) and get every
# event once.
add_executable(watch_test ${CMAKE_CURRENT_LIST_DIR}/watch_test.cc)
target_link_libraries(watch_test PRIVATE
  coordinator_test_harness GTest::gtest_main)
gtest_discover_tests(watch_test DISCOVERY_TIMEOUT 60)

# Pipelined group commit: the next batch runs while the last is synced; a
# failed sync undoes the batch built on it, unwritten.
add_executable(pipelined_commit_test
  ${CMAKE_CURRENT_LIST_DIR}/pipelined_commit_test.cc)
target_link_libraries(pipelined_commit_test PRIVATE
  coordinator_test_harness GTest::gtest_main)
gtest_discover_tests(pipelined_commit_test DISCOVERY_TIMEOUT 60)

# The coordinator's parts on their own: lease ids, the lease table, the
# decider, placement, health checks, the sweep book, the board registry.
add_executable(coordinator_parts_test
  ${CMAKE_CURRENT_LIST_DIR}/board_registry_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/decider_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/health_checker_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/lease_id_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/lease_table_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/placement_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sweep_book_test.cc)
target_link_libraries(coordinator_parts_test PRIVATE
  tunefarm_coordinator GTest::gtest_main)
gtest_discover_tests(coordinator_parts_test DISCOVERY_TIMEOUT 60)
