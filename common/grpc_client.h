// How our gRPC clients (the CLI, agents, tests) reach the coordinator: TLS
// when a CA is given (mutual TLS when a client certificate is too), and a
// bearer token added to every call's metadata. Thread-safe (pure functions;
// the returned channel is thread-safe).
#ifndef TUNEFARM_COMMON_GRPC_CLIENT_H_
#define TUNEFARM_COMMON_GRPC_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace tunefarm {

// The largest message our clients and the coordinator send or accept. List
// RPCs page well below it (coordinator/queries.h); reports of long sweeps
// are the largest single messages.
inline constexpr int kMaxGrpcMessageBytes = 32 << 20;
// Limits on the small files a client reads (docs/security.md).
inline constexpr int64_t kMaxTokenFileBytes = 64 << 10;
inline constexpr int64_t kMaxPemFileBytes = 1 << 20;

struct ClientSecurity {
  std::string token;          // "" = send no credentials
  std::string tls_ca_file;    // "" = plaintext
  std::string tls_cert_file;  // client certificate for mutual TLS
  std::string tls_key_file;
};

// A channel whose messages may be up to kMaxGrpcMessageBytes either way.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& target, const ClientSecurity& security);

// Adds "authorization: Bearer <token>" when a token is set.
void AddCredentials(grpc::ClientContext* context,
                    const ClientSecurity& security);

// A token file's content, whitespace trimmed; INVALID_ARGUMENT when empty.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_GRPC_CLIENT_H_
