// A BundleSink that PUSHes profile bundles to analyzer workers over the
// ZeroMQ pipeline (analyzer/pipeline.h). Thread-safe as PipelineSender is.
#ifndef TUNEFARM_AGENT_PIPELINE_BUNDLE_SINK_H_
#define TUNEFARM_AGENT_PIPELINE_BUNDLE_SINK_H_

#include <memory>

#include "agent/agent.h"
#include "analyzer/pipeline.h"

namespace tunefarm {

std::unique_ptr<BundleSink> NewPipelineBundleSink(
    std::unique_ptr<PipelineSender> sender, absl::Duration send_timeout);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_PIPELINE_BUNDLE_SINK_H_
