#include "core/version.h"

#include <cctype>

#include "core/error.h"

namespace servecast {
namespace {

bool ReadNumber(const std::string& s, std::size_t& i, long long& out) {
  std::size_t start = i;
  out = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    out = out * 10 + (s[i] - '0');
    ++i;
  }
  return i > start;
}

bool ConsumeWord(const std::string& s, std::size_t& i, const char* word) {
  std::size_t n = std::char_traits<char>::length(word);
  if (s.compare(i, n, word) == 0) {
    i += n;
    return true;
  }
  return false;
}

// Skips one optional separator (".", "-", "_") before a suffix.
void SkipSep(const std::string& s, std::size_t& i) {
  if (i < s.size() && (s[i] == '.' || s[i] == '-' || s[i] == '_')) ++i;
}

}  // namespace

std::optional<Version> Version::TryParse(const std::string& text) {
  Version v;
  v.text_ = text;
  std::string s;
  for (char c : text) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::size_t i = 0;
  if (i < s.size() && s[i] == 'v') ++i;
  long long num = 0;
  if (!ReadNumber(s, i, num)) return std::nullopt;
  v.release_.push_back(num);
  while (i + 1 < s.size() && s[i] == '.' && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
    ++i;
    ReadNumber(s, i, num);
    v.release_.push_back(num);
  }
  while (i < s.size()) {
    if (s[i] == '+') {
      v.local_ = s.substr(i + 1);
      if (v.local_.empty()) return std::nullopt;
      break;
    }
    std::size_t save = i;
    SkipSep(s, i);
    if (ConsumeWord(s, i, "rc") || ConsumeWord(s, i, "c")) {
      v.pre_kind_ = 2;
    } else if (ConsumeWord(s, i, "alpha") || ConsumeWord(s, i, "a")) {
      v.pre_kind_ = 0;
    } else if (ConsumeWord(s, i, "beta") || ConsumeWord(s, i, "b")) {
      v.pre_kind_ = 1;
    } else if (ConsumeWord(s, i, "post")) {
      SkipSep(s, i);
      if (!ReadNumber(s, i, v.post_)) v.post_ = 0;
      continue;
    } else if (ConsumeWord(s, i, "dev")) {
      SkipSep(s, i);
      if (!ReadNumber(s, i, v.dev_)) v.dev_ = 0;
      continue;
    } else if (save < i && std::isdigit(static_cast<unsigned char>(s[i]))) {
      // "2.28.3-1": a numeric suffix after "-" is a post release (Debian revision style).
      ReadNumber(s, i, v.post_);
      continue;
    } else {
      return std::nullopt;
    }
    SkipSep(s, i);
    if (!ReadNumber(s, i, v.pre_num_)) v.pre_num_ = 0;
  }
  return v;
}

Version Version::Parse(const std::string& text) {
  auto v = TryParse(text);
  if (!v)
    throw Error("'" + text + "' is not a version; expected N[.N...][aN|bN|rcN][.postN][.devN][+local]");
  return *v;
}

std::strong_ordering Version::operator<=>(const Version& o) const {
  std::size_t n = std::max(release_.size(), o.release_.size());
  for (std::size_t i = 0; i < n; ++i) {
    long long a = i < release_.size() ? release_[i] : 0;
    long long b = i < o.release_.size() ? o.release_[i] : 0;
    if (a != b) return a <=> b;
  }
  // A dev release of a final version sorts before its pre-releases.
  auto pre_key = [](const Version& v) {
    if (v.pre_kind_ == 3 && v.post_ < 0 && v.dev_ >= 0) return std::pair<int, long long>{-1, 0};
    return std::pair<int, long long>{v.pre_kind_, v.pre_num_};
  };
  if (auto c = pre_key(*this) <=> pre_key(o); c != 0) return c;
  if (auto c = post_ <=> o.post_; c != 0) return c;
  // No dev sorts after any dev of the same release.
  long long da = dev_ < 0 ? (1LL << 62) : dev_;
  long long db = o.dev_ < 0 ? (1LL << 62) : o.dev_;
  if (auto c = da <=> db; c != 0) return c;
  return local_ <=> o.local_;
}

}  // namespace servecast
