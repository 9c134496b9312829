#include "core/params.h"

#include "core/error.h"

namespace servecast {

Params::Params(std::initializer_list<Item> items) {
  for (const auto& it : items) Set(it.first, it.second);
}

const Value* Params::Find(std::string_view name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}

const Value& Params::Get(std::string_view name) const {
  const Value* v = Find(name);
  if (!v) {
    std::string have;
    for (const auto& [k, _] : items_) have += (have.empty() ? "" : ", ") + k;
    throw Error("missing parameter '" + std::string(name) + "' (have: " + have + ")");
  }
  return *v;
}

std::int64_t Params::Int(std::string_view name) const {
  const Value& v = Get(name);
  if (auto* i = std::get_if<std::int64_t>(&v)) return *i;
  throw Error("parameter '" + std::string(name) + "' is " + TypeName(TypeOf(v)) + " '" + ToString(v) +
              "'; expected an integer");
}

double Params::Num(std::string_view name) const {
  const Value& v = Get(name);
  if (!IsNumeric(v))
    throw Error("parameter '" + std::string(name) + "' is the string '" + ToString(v) + "'; expected a number");
  return AsDouble(v);
}

const std::string& Params::Str(std::string_view name) const {
  const Value& v = Get(name);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  throw Error("parameter '" + std::string(name) + "' is " + TypeName(TypeOf(v)) + " '" + ToString(v) +
              "'; expected a string");
}

void Params::Set(std::string_view name, Value v) {
  for (auto& [k, old] : items_) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  items_.emplace_back(std::string(name), std::move(v));
}

std::string Params::Canonical() const {
  std::string out;
  for (const auto& [k, v] : items_) {
    if (!out.empty()) out += ',';
    out += k;
    out += '=';
    out += ToString(v);
  }
  return out;
}

}  // namespace servecast
