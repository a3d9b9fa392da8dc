# Tuning report: model from a real store, JSON, golden renderings, report
# folder, live status board (included from tests/coordinator/CMakeLists.txt).
add_executable(report_test ${CMAKE_CURRENT_LIST_DIR}/report_test.cc)
target_link_libraries(report_test PRIVATE
  tunefarm_coordinator tunefarm_storage tunefarm_cli GTest::gtest_main GTest::gmock)
gtest_discover_tests(report_test DISCOVERY_TIMEOUT 60)
