#include "agent/pipeline_bundle_sink.h"

namespace tunefarm {
namespace {

class PipelineBundleSink : public BundleSink {
 public:
  PipelineBundleSink(std::unique_ptr<PipelineSender> sender,
                     absl::Duration timeout)
      : sender_(std::move(sender)), timeout_(timeout) {}

  absl::Status Publish(const v1::ProfileBundle& bundle) override {
    v1::PipelineMessage msg;
    msg.set_version(1);
    *msg.mutable_bundle() = bundle;
    return sender_->Send(msg, timeout_);
  }

 private:
  std::unique_ptr<PipelineSender> sender_;
  absl::Duration timeout_;
};

}  // namespace

std::unique_ptr<BundleSink> NewPipelineBundleSink(
    std::unique_ptr<PipelineSender> sender, absl::Duration send_timeout) {
  return std::make_unique<PipelineBundleSink>(std::move(sender), send_timeout);
}

}  // namespace tunefarm
