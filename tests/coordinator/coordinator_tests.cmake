# Coordinator domain-core tests (included from tests/coordinator/CMakeLists.txt).
add_executable(coordinator_test ${CMAKE_CURRENT_LIST_DIR}/coordinator_test.cc)
target_link_libraries(coordinator_test PRIVATE
  tunefarm_coordinator GTest::gtest_main GTest::gmock)
gtest_discover_tests(coordinator_test DISCOVERY_TIMEOUT 60)
