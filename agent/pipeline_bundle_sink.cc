#include "agent/pipeline_bundle_sink.h"

#include <utility>

namespace tunefarm {
namespace {

class PipelineBundleSink : public BundleSink {
 public:
  explicit PipelineBundleSink(std::unique_ptr<BundleOutbox> outbox)
      : outbox_(std::move(outbox)) {}

  absl::Status Publish(const v1::ProfileBundle& bundle) override {
    return outbox_->Add(bundle);
  }

  bool AcceptingWork() const override { return outbox_->AcceptingWork(); }

 private:
  std::unique_ptr<BundleOutbox> outbox_;
};

}  // namespace

std::unique_ptr<BundleSink> NewPipelineBundleSink(
    std::unique_ptr<BundleOutbox> outbox) {
  return std::make_unique<PipelineBundleSink>(std::move(outbox));
}

}  // namespace tunefarm
