// BundleOutbox: the agent's side of the reliable profile pipeline. Every
// bundle handed to Add() is written to a file in the outbox folder first and
// deleted only when an analyzer acks it, which the analyzer does once the
// coordinator has made the bundle's diagnosis durable. A bundle with no ack
// after `ack_timeout` is sent again (most likely to another analyzer: the
// PipelineSender spreads messages round-robin), and a restarted agent
// re-sends what its outbox still holds. The coordinator records one
// diagnosis per round, so a re-sent bundle is never stored twice.
//
// Held bundles: an agent keeps a bundle in the outbox (Add with hold)
// before it reports the round's result, so a crash between the two cannot
// lose the diagnosis, and releases it (Release) once the coordinator answered
// the report, whatever the answer: a bundle is sent only after its result, so
// a diagnosis does not overtake the result it belongs to. Bundles loaded by
// Open() (left by a run that died) are sent at once: their reports were
// answered or never will be by that run.
//
// Back-pressure: at most `window` bundles are in flight (sent, not yet
// acked); when the outbox holds `capacity` bundles, AcceptingWork() turns
// false so that the agent takes no new leases until it drains. Add() itself
// never drops a bundle: rounds already running still land in the outbox.
//
// Threading: thread-safe. The outbox owns one background thread, which alone
// uses the socket; Add() only writes the file and wakes it.
#ifndef TUNEFARM_PIPELINE_BUNDLE_OUTBOX_H_
#define TUNEFARM_PIPELINE_BUNDLE_OUTBOX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "pipeline/transport.h"
#include "tunefarm/v1/pipeline.pb.h"

namespace tunefarm {

class BundleOutbox {
 public:
  struct Options {
    std::vector<std::string> endpoints;  // analyzer workers
    PipelineSecurity security;           // CURVE to the analyzers, or none
    std::string dir;                     // created when missing
    // A bundle sent this long ago without an ack is sent again.
    absl::Duration ack_timeout = absl::Seconds(30);
    int window = 8;     // bundles in flight at once
    int capacity = 64;  // bundles held before AcceptingWork() says no
    // How long the background thread waits for acks between sends.
    absl::Duration poll_interval = absl::Milliseconds(20);
    Clock* clock = nullptr;  // SystemClock() when null; not owned
  };

  // Counters since Open() (monotonic), plus what is held now.
  struct Stats {
    int64_t sends = 0;         // first sends and re-sends
    int64_t redeliveries = 0;  // re-sends after an ack timeout
    int64_t acked = 0;
    int64_t acks_taken = 0;  // every ack received, stray and repeated ones too
    int64_t unreadable = 0;  // outbox files set aside as *.bad
    int64_t held = 0;        // bundles in the outbox now
    int64_t in_flight = 0;
  };

  // Creates the folder, loads the bundles a previous run left there (they
  // are re-sent first, in their original order), connects to the endpoints
  // and starts the background thread.
  static absl::StatusOr<std::unique_ptr<BundleOutbox>> Open(Options options);

  // Stops the background thread; unacked bundles stay on disk.
  ~BundleOutbox();

  // Persists `bundle` (fsynced) and queues it for sending; with `hold` it
  // is kept unsent until Release(). OK without a second copy when a bundle
  // with that id is already held; INVALID_ARGUMENT without a bundle_id; the
  // file-system error when it cannot be written.
  absl::Status Add(const v1::ProfileBundle& bundle, bool hold = false);

  // Lets a bundle added with `hold` be sent. A no-op for an unknown id.
  void Release(const std::string& bundle_id);

  // False while the outbox holds `capacity` bundles or more.
  bool AcceptingWork() const;

  // Waits until every bundle is acked; false on timeout.
  bool WaitDrained(absl::Duration timeout) const;

  Stats stats() const;

 private:
  struct Entry {
    std::string bundle_id;
    std::string path;
    uint32_t attempts = 0;
    bool in_flight = false;
    bool held = false;  // added with hold, not yet released
    absl::Time sent_at;
  };

  BundleOutbox(Options options, std::unique_ptr<PipelineSender> sender);
  absl::Status Load();
  void Pump();
  // Sends what is due (new bundles and timed-out ones) within the window.
  void SendDue();
  // Waits up to poll_interval for acks and takes every one that came.
  void TakeAcks();
  void SetAside(uint64_t seq, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  Clock& clock_;
  std::unique_ptr<PipelineSender> sender_;  // used by the Pump thread only

  mutable absl::Mutex mu_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by sequence
  absl::flat_hash_map<std::string, uint64_t> by_id_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread pump_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_PIPELINE_BUNDLE_OUTBOX_H_
