#include "common/digest.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace tunefarm {

std::string Sha256Hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &size, EVP_sha256(),
                 nullptr) != 1) {
    return std::string();  // OpenSSL without SHA-256: no digest, no match
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(md), size));
}

std::string MessageDigest(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return Sha256Hex(bytes);
}

}  // namespace tunefarm
