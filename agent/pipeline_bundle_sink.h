// A BundleSink that hands profile bundles to a BundleOutbox
// (pipeline/bundle_outbox.h): each bundle is kept on disk until an analyzer
// acks that its diagnosis is durable, and the agent takes no new leases
// while the outbox is full. Thread-safe as BundleOutbox is; owns the outbox.
#ifndef TUNEFARM_AGENT_PIPELINE_BUNDLE_SINK_H_
#define TUNEFARM_AGENT_PIPELINE_BUNDLE_SINK_H_

#include <memory>

#include "agent/agent.h"
#include "pipeline/bundle_outbox.h"

namespace tunefarm {

std::unique_ptr<BundleSink> NewPipelineBundleSink(
    std::unique_ptr<BundleOutbox> outbox);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_PIPELINE_BUNDLE_SINK_H_
