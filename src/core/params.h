#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/value.h"

namespace servecast {

// Ordered name → value pairs: the parameters of a case, or the cells of a row.
// Order is significant (it fixes case IDs and column order) and names are unique.
class Params {
 public:
  using Item = std::pair<std::string, Value>;

  Params() = default;
  Params(std::initializer_list<Item> items);

  const std::vector<Item>& items() const { return items_; }
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

  const Value* Find(std::string_view name) const;
  bool Has(std::string_view name) const { return Find(name) != nullptr; }
  // Typed getters; throw Error naming the parameter when it is missing or of
  // another type.
  const Value& Get(std::string_view name) const;
  std::int64_t Int(std::string_view name) const;
  double Num(std::string_view name) const;  // int or double
  const std::string& Str(std::string_view name) const;

  // Replaces the value if the name exists, else appends.
  void Set(std::string_view name, Value v);

  // "name=value,name=value" in order; used in case IDs.
  std::string Canonical() const;

  bool operator==(const Params&) const = default;

 private:
  std::vector<Item> items_;
};

}  // namespace servecast
