# Sweep specs, search strategies, the keep rule and multi-workload scoring
# (included from coordinator/CMakeLists.txt).
add_library(tunefarm_search STATIC
  ${CMAKE_CURRENT_LIST_DIR}/spec.cc
  ${CMAKE_CURRENT_LIST_DIR}/keep_rule.cc
  ${CMAKE_CURRENT_LIST_DIR}/workloads.cc
  ${CMAKE_CURRENT_LIST_DIR}/saturation.cc
  ${CMAKE_CURRENT_LIST_DIR}/strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/strategy_util.cc
  ${CMAKE_CURRENT_LIST_DIR}/guided_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/hybrid_strategy.cc)
target_link_libraries(tunefarm_search PUBLIC
  tunefarm_ops tunefarm_tuning_db tunefarm_proto tunefarm_common absl::status absl::statusor
  absl::strings absl::str_format absl::flat_hash_set absl::flat_hash_map
  absl::inlined_vector)
