// SeedSeq: the standard's seed sequence algorithm ([rand.util.seedseq]),
// fills exactly what std::seed_seq fills for the same values, so a
// generator seeded through either draws the same numbers. It is written
// without libstdc++'s modulo on every index, which made seeding a
// std::mt19937_64 cost ~15 us: the strategies seed one per proposal (from
// the sweep's seed and the history's length, so a restarted coordinator
// draws the same), and that was a tenth of the control loop's time.
//
// A value type; thread-compatible.
#ifndef TUNEFARM_COORDINATOR_SEED_SEQ_H_
#define TUNEFARM_COORDINATOR_SEED_SEQ_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace tunefarm {

class SeedSeq {
 public:
  using result_type = uint32_t;

  SeedSeq(std::initializer_list<uint32_t> values) : v_(values) {}
  explicit SeedSeq(std::vector<uint32_t> values) : v_(std::move(values)) {}

  size_t size() const { return v_.size(); }
  template <typename Out>
  void param(Out out) const {
    std::copy(v_.begin(), v_.end(), out);
  }

  // Fills [begin, end) with 32-bit values as std::seed_seq::generate does.
  template <typename RandomIt>
  void generate(RandomIt begin, RandomIt end) const {
    if (begin == end) return;
    const size_t n = static_cast<size_t>(end - begin);
    const size_t s = v_.size();
    const size_t t = n >= 623  ? 11
                     : n >= 68 ? 7
                     : n >= 39 ? 5
                     : n >= 7  ? 3
                               : (n - 1) / 2;
    const size_t p = (n - t) / 2;
    const size_t q = p + t;
    const size_t m = std::max(s + 1, n);
    std::fill(begin, end, 0x8b8b8b8bu);
    RandomIt b = begin;
    const auto mix = [](uint32_t x) { return x ^ (x >> 27); };
    // k % n, (k + p) % n, (k + q) % n and (k - 1) % n, moved along with k.
    size_t k0 = 0, kp = p % n, kq = q % n, km = n - 1;
    const auto step = [n](size_t& i) {
      if (++i == n) i = 0;
    };
    for (size_t k = 0; k < m; ++k) {
      const uint32_t r1 = 1664525u * mix(b[k0] ^ b[kp] ^ b[km]);
      uint32_t r2 = r1 + static_cast<uint32_t>(k0);
      if (k == 0) {
        r2 = r1 + static_cast<uint32_t>(s);
      } else if (k <= s) {
        r2 += v_[k - 1];
      }
      b[kp] += r1;
      b[kq] += r2;
      b[k0] = r2;
      step(k0), step(kp), step(kq), step(km);
    }
    for (size_t k = m; k < m + n; ++k) {
      const uint32_t r3 = 1566083941u * mix(b[k0] + b[kp] + b[km]);
      const uint32_t r4 = r3 - static_cast<uint32_t>(k0);
      b[kp] ^= r3;
      b[kq] ^= r4;
      b[k0] = r4;
      step(k0), step(kp), step(kq), step(km);
    }
  }

 private:
  std::vector<uint32_t> v_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_SEED_SEQ_H_
