#include "common/digest.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace tunefarm {

FieldHasher::FieldHasher() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
}

FieldHasher::~FieldHasher() { EVP_MD_CTX_free(ctx_); }

void FieldHasher::Add(absl::string_view tag, absl::string_view data) {
  const std::string head = absl::StrCat(tag, ":", data.size(), ":");
  EVP_DigestUpdate(ctx_, head.data(), head.size());
  EVP_DigestUpdate(ctx_, data.data(), data.size());
}

std::string FieldHasher::Hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_, md, &len);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(md), len));
}

std::string FieldsDigest(
    const std::vector<std::pair<std::string, std::string>>& fields) {
  FieldHasher h;
  for (const auto& [tag, data] : fields) h.Add(tag, data);
  return h.Hex();
}

std::string MessageDigest(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return FieldsDigest({{message.GetTypeName(), std::move(bytes)}});
}

}  // namespace tunefarm
