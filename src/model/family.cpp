#include "model/family.h"

#include <mutex>

#include "core/error.h"
#include "model/op_builder.h"

namespace servecast::model {

// The built-in families, one line each (family_<name>.cpp).
std::unique_ptr<ModelFamily> MakeDenseFamily();
std::unique_ptr<ModelFamily> MakeMoeFamily();
std::unique_ptr<ModelFamily> MakeDeepSeekFamily();
std::unique_ptr<ModelFamily> MakeDsaFamily();
std::unique_ptr<ModelFamily> MakeQwen35Family();
std::unique_ptr<ModelFamily> MakeQwen35MoeFamily();
std::unique_ptr<ModelFamily> MakeNemotronHFamily();

namespace {

struct Entry {
  std::unique_ptr<ModelFamily> family;
  std::vector<Architecture> architectures;
};

struct Registry {
  std::vector<Entry> entries;
  std::vector<const ModelFamily*> families;

  void Add(std::unique_ptr<ModelFamily> f) {
    for (const Entry& e : entries)
      if (std::string_view(e.family->Name()) == f->Name())
        throw Error(std::string("model family '") + f->Name() + "' is already registered");
    std::vector<Architecture> archs = f->Architectures();
    for (const Architecture& a : archs)
      for (const Entry& e : entries)
        for (const Architecture& b : e.architectures)
          if (a.name == b.name || (!a.model_type.empty() && a.model_type == b.model_type))
            throw Error("architecture '" + a.name + "' (model_type '" + a.model_type + "') of family '" + f->Name() +
                        "' is already accepted by family '" + e.family->Name() + "'");
    families.push_back(f.get());
    entries.push_back({std::move(f), std::move(archs)});
  }
};

Registry& TheRegistry() {
  static Registry r = [] {
    Registry reg;
    reg.Add(MakeDenseFamily());
    reg.Add(MakeMoeFamily());
    reg.Add(MakeDeepSeekFamily());
    reg.Add(MakeDsaFamily());
    reg.Add(MakeQwen35Family());
    reg.Add(MakeQwen35MoeFamily());
    reg.Add(MakeNemotronHFamily());
    return reg;
  }();
  return r;
}

}  // namespace

double ModelFamily::KvElemsPerToken(const ModelConfig& m, const ParallelConfig& p) const {
  return static_cast<double>(CeilDiv(m.num_kv_heads, p.tp)) * static_cast<double>(m.head_dim) *
         static_cast<double>(m.num_layers) * 2.0;
}

const std::vector<const ModelFamily*>& Families() {
  return TheRegistry().families;
}

const ModelFamily& FindFamily(std::string_view name) {
  for (const ModelFamily* f : Families())
    if (name == f->Name()) return *f;
  std::string known;
  for (const ModelFamily* f : Families()) known += (known.empty() ? "" : ", ") + std::string(f->Name());
  throw Error("unknown model family '" + std::string(name) + "' (registered: " + known + ")");
}

ArchitectureMatch FindArchitecture(std::string_view architecture) {
  for (const Entry& e : TheRegistry().entries)
    for (const Architecture& a : e.architectures)
      if (a.name == architecture) return {e.family.get(), &a};
  return {};
}

ArchitectureMatch FindModelType(std::string_view model_type) {
  if (model_type.empty()) return {};
  for (const Entry& e : TheRegistry().entries)
    for (const Architecture& a : e.architectures)
      if (a.model_type == model_type) return {e.family.get(), &a};
  return {};
}

std::string AcceptedArchitectures() {
  std::string out;
  for (const Entry& e : TheRegistry().entries)
    for (const Architecture& a : e.architectures) out += (out.empty() ? "" : ", ") + a.name;
  return out;
}

void AddFamily(std::unique_ptr<ModelFamily> family) {
  TheRegistry().Add(std::move(family));
}

}  // namespace servecast::model
