// Content digests: SHA-256 in hex, of bytes or of a protobuf message's
// deterministic serialization (map entries in key order), so that the same
// message gives the same digest in every process of one build.
// Stateless functions; thread-safe.
#ifndef TUNEFARM_COMMON_DIGEST_H_
#define TUNEFARM_COMMON_DIGEST_H_

#include <string>
#include <string_view>

#include "google/protobuf/message_lite.h"

namespace tunefarm {

// 64 lowercase hex digits.
std::string Sha256Hex(std::string_view bytes);

// Sha256Hex of `message` serialized deterministically.
std::string MessageDigest(const google::protobuf::MessageLite& message);

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_DIGEST_H_
