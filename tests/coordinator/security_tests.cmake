# Issue 16's bounded-input checks on sweep specs (included from
# tests/coordinator/CMakeLists.txt).
add_executable(spec_limits_test ${CMAKE_CURRENT_LIST_DIR}/spec_limits_test.cc)
target_link_libraries(spec_limits_test PRIVATE tunefarm_search tunefarm_ops
  GTest::gtest GTest::gmock GTest::gtest_main)
gtest_discover_tests(spec_limits_test DISCOVERY_TIMEOUT 60)
