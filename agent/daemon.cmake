# The agent daemon: lease loop, gRPC client, ZeroMQ bundle sink.
add_library(tunefarm_agent STATIC agent.cc grpc_coordinator_client.cc
  pipeline_bundle_sink.cc)
target_link_libraries(tunefarm_agent PUBLIC
  tunefarm_board tunefarm_pipeline tunefarm_grpc_util tunefarm_proto)

add_executable(tunefarm-agent main.cc)
target_link_libraries(tunefarm-agent PRIVATE tunefarm_agent tunefarm_metrics
  tunefarm_cuda_board tunefarm_ascend_board tunefarm_replay_board
  CLI11::CLI11)
add_dependencies(tunefarm-agent tunefarm-variant-runner)
target_compile_definitions(tunefarm-agent PRIVATE
  TUNEFARM_DEFAULT_OPS_DIR="${CMAKE_SOURCE_DIR}/ops")
set_target_properties(tunefarm-agent PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
