# Sweep spec and strategy tests (included from tests/coordinator/CMakeLists.txt).
add_executable(search_test
  ${CMAKE_CURRENT_LIST_DIR}/spec_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/strategy_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/hybrid_strategy_test.cc)
target_link_libraries(search_test PRIVATE tunefarm_search GTest::gmock GTest::gtest_main)
gtest_discover_tests(search_test DISCOVERY_TIMEOUT 60)
