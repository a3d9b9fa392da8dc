# The agent daemon: the lease loop (core: no gRPC, no ZeroMQ), and the two
# seams the executable wires in: the gRPC coordinator client and the bundle
# sink over the pipeline's outbox.
add_library(tunefarm_agent STATIC agent.cc manifest_cache.cc)
target_link_libraries(tunefarm_agent PUBLIC tunefarm_board tunefarm_proto
  tunefarm_common absl::flat_hash_map absl::status absl::synchronization
  absl::time)

add_library(tunefarm_agent_grpc STATIC grpc_coordinator_client.cc)
target_link_libraries(tunefarm_agent_grpc PUBLIC tunefarm_agent
  tunefarm_grpc_util tunefarm_proto_grpc)

add_library(tunefarm_agent_pipeline STATIC pipeline_bundle_sink.cc)
target_link_libraries(tunefarm_agent_pipeline PUBLIC tunefarm_agent
  tunefarm_bundle_outbox)

add_executable(tunefarm-agent main.cc)
target_link_libraries(tunefarm-agent PRIVATE tunefarm_agent
  tunefarm_agent_grpc tunefarm_agent_pipeline tunefarm_metrics
  tunefarm_cuda_board tunefarm_ascend_board tunefarm_replay_board
  CLI11::CLI11)
add_dependencies(tunefarm-agent tunefarm-variant-runner)
target_compile_definitions(tunefarm-agent PRIVATE
  TUNEFARM_DEFAULT_OPS_DIR="${CMAKE_SOURCE_DIR}/ops")
set_target_properties(tunefarm-agent PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
