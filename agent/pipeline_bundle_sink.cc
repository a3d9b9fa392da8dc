#include "agent/pipeline_bundle_sink.h"

#include <utility>

namespace tunefarm {
namespace {

class PipelineBundleSink : public BundleSink {
 public:
  explicit PipelineBundleSink(std::unique_ptr<BundleOutbox> outbox)
      : outbox_(std::move(outbox)) {}

  absl::Status Keep(const v1::ProfileBundle& bundle) override {
    return outbox_->Add(bundle, /*hold=*/true);
  }

  void Release(const std::string& bundle_id) override {
    outbox_->Release(bundle_id);
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
