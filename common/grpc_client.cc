#include "common/grpc_client.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace tunefarm {
namespace {

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  return args;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& target, const ClientSecurity& security) {
  if (security.tls_ca_file.empty()) {
    if (!security.tls_cert_file.empty()) {
      return absl::InvalidArgumentError(
          "a client certificate needs --tls_ca as well");
    }
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                     ChannelArgs());
  }
  grpc::SslCredentialsOptions ssl;
  TF_ASSIGN_OR_RETURN(
      ssl.pem_root_certs,
      ReadFileUpTo(security.tls_ca_file, kMaxPemFileBytes, "a PEM file"));
  if (!security.tls_cert_file.empty() || !security.tls_key_file.empty()) {
    TF_ASSIGN_OR_RETURN(
        ssl.pem_cert_chain,
        ReadFileUpTo(security.tls_cert_file, kMaxPemFileBytes, "a PEM file"));
    TF_ASSIGN_OR_RETURN(
        ssl.pem_private_key,
        ReadFileUpTo(security.tls_key_file, kMaxPemFileBytes, "a PEM file"));
  }
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl),
                                   ChannelArgs());
}

void AddCredentials(grpc::ClientContext* context,
                    const ClientSecurity& security) {
  if (!security.token.empty()) {
    context->AddMetadata("authorization",
                         absl::StrCat("Bearer ", security.token));
  }
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  TF_ASSIGN_OR_RETURN(std::string text,
                      ReadFileUpTo(path, kMaxTokenFileBytes, "a token file"));
  std::string token(absl::StripAsciiWhitespace(text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": empty token"));
  }
  return token;
}

}  // namespace tunefarm
