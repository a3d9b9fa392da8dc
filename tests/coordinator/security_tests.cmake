# Issue 16's bounded-input checks on sweep specs (included from
# tests/coordinator/CMakeLists.txt).
add_executable(spec_limits_test ${CMAKE_CURRENT_LIST_DIR}/spec_limits_test.cc)
target_link_libraries(spec_limits_test PRIVATE tunefarm_search tunefarm_ops
  GTest::gtest GTest::gmock GTest::gtest_main)
gtest_discover_tests(spec_limits_test DISCOVERY_TIMEOUT 60)

# A diagnosis lands only for the round, epoch and bundle id leased out.
add_executable(diagnosis_guard_test
  ${CMAKE_CURRENT_LIST_DIR}/diagnosis_guard_test.cc)
target_link_libraries(diagnosis_guard_test PRIVATE coordinator_test_harness
  GTest::gtest_main)
gtest_discover_tests(diagnosis_guard_test DISCOVERY_TIMEOUT 60)
