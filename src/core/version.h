#pragma once

#include <compare>
#include <optional>
#include <string>
#include <vector>

namespace servecast {

// A library or framework version with PEP 440 ordering:
//   1.0.dev1 < 1.0a1 < 1.0b2 < 1.0rc1 < 1.0 < 1.0.post1 < 1.0.post1+local
// Also accepts the forms vendors print: a leading "v", "13.0.88", "2.28.3-1",
// "9.14.0", "1.3.0rc20". Trailing zero release segments do not matter (1.0 == 1.0.0).
class Version {
 public:
  // Throws Error naming the text when it is not a version.
  static Version Parse(const std::string& text);
  static std::optional<Version> TryParse(const std::string& text);

  const std::vector<long long>& release() const { return release_; }
  std::string ToString() const { return text_; }

  std::strong_ordering operator<=>(const Version& other) const;
  bool operator==(const Version& other) const { return (*this <=> other) == 0; }

 private:
  std::string text_;
  std::vector<long long> release_;
  int pre_kind_ = 3;  // 0 a, 1 b, 2 rc, 3 none (a final release sorts after its pre-releases)
  long long pre_num_ = 0;
  long long post_ = -1;  // -1: none
  long long dev_ = -1;   // -1: none
  std::string local_;
};

}  // namespace servecast
