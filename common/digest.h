// Content digests: SHA-256 (hex) over length-prefixed (tag, data) fields,
// so that no two different inputs hash alike. The agent's build keys and
// reference cache keys use them, and the coordinator names operator
// manifests by them.
// FieldHasher: one per digest, not thread-safe; the functions are.
#ifndef TUNEFARM_COMMON_DIGEST_H_
#define TUNEFARM_COMMON_DIGEST_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"

// OpenSSL's digest context, kept out of this header.
struct evp_md_ctx_st;

namespace tunefarm {

// Incremental: Add fields, then Hex once.
class FieldHasher {
 public:
  FieldHasher();
  ~FieldHasher();
  FieldHasher(const FieldHasher&) = delete;
  FieldHasher& operator=(const FieldHasher&) = delete;

  void Add(absl::string_view tag, absl::string_view data);
  // 64 lowercase hex digits.
  std::string Hex();

 private:
  evp_md_ctx_st* ctx_;
};

// FieldHasher over `fields`.
std::string FieldsDigest(
    const std::vector<std::pair<std::string, std::string>>& fields);

// FieldsDigest of `message` serialized deterministically (map entries in
// key order), so that the same message gives the same digest in every
// process of one build.
std::string MessageDigest(const google::protobuf::MessageLite& message);

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_DIGEST_H_
