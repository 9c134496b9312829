#include "collect/registry.h"

#include "core/error.h"

namespace servecast::collect {

std::string MakeCaseId(const std::string& op, const Params& params) { return op + ":" + params.Canonical(); }

void Registry::AddBackend(std::unique_ptr<Backend> backend) {
  std::string n = backend->name();
  if (backends_.count(n)) throw Error("backend '" + n + "' registered twice");
  backends_[n] = std::move(backend);
}

void Registry::AddOp(const std::string& backend, std::unique_ptr<Op> op) {
  std::string n = op->name();
  auto& ops = ops_[backend];
  if (ops.count(n)) throw Error("op '" + n + "' registered twice for backend '" + backend + "'");
  ops[n] = std::move(op);
}

std::string Backend::DeviceProblem(int device) const {
  (void)device;
  return "";
}

std::string Backend::NewGroupId() const {
  throw Error("backend '" + name() + "' has no multi-process ops: it cannot start a group of ranks");
}

const Backend* Registry::FindBackend(const std::string& name) const {
  auto it = backends_.find(name);
  return it == backends_.end() ? nullptr : it->second.get();
}

Op* Registry::FindOp(const std::string& backend, const std::string& op) const {
  auto b = ops_.find(backend);
  if (b == ops_.end()) return nullptr;
  auto o = b->second.find(op);
  return o == b->second.end() ? nullptr : o->second.get();
}

std::vector<std::string> Registry::BackendNames() const {
  std::vector<std::string> out;
  for (const auto& [k, _] : backends_) out.push_back(k);
  return out;
}

std::vector<std::string> Registry::OpNames(const std::string& backend) const {
  std::vector<std::string> out;
  auto b = ops_.find(backend);
  if (b != ops_.end())
    for (const auto& [k, _] : b->second) out.push_back(k);
  return out;
}

}  // namespace servecast::collect
