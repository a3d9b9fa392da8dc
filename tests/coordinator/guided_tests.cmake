# Guided strategy tests (included from tests/coordinator/CMakeLists.txt).
add_executable(guided_test ${CMAKE_CURRENT_LIST_DIR}/guided_test.cc)
target_link_libraries(guided_test PRIVATE tunefarm_search GTest::gmock GTest::gtest_main)
gtest_discover_tests(guided_test DISCOVERY_TIMEOUT 60)
