# The Ascend NPU board backend (agent/ascend_board.h): npu-smi discovery,
# message classification and the board. Included by agent/CMakeLists.txt
# (one line: include(${CMAKE_CURRENT_SOURCE_DIR}/ascend.cmake OPTIONAL)) and,
# until that line lands, by tests/agent/CMakeLists.txt; the guard makes a
# second include a no-op. Paths are absolute for that reason.
if(NOT TARGET tunefarm_ascend_board)
  add_library(tunefarm_ascend_board STATIC
    ${CMAKE_SOURCE_DIR}/agent/npu_smi.cc
    ${CMAKE_SOURCE_DIR}/agent/ascend_errors.cc
    ${CMAKE_SOURCE_DIR}/agent/ascend_board.cc)
  target_include_directories(tunefarm_ascend_board PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(tunefarm_ascend_board PUBLIC
    tunefarm_board tunefarm_proto tunefarm_common
    absl::status absl::statusor absl::strings absl::time)
endif()
