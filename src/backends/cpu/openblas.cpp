#include "backends/cpu/openblas.h"

#include <dlfcn.h>

#include <string>

#include "core/error.h"

namespace servecast::cpu {

namespace {

OpenBlas Open() {
  void* handle = nullptr;
  std::string errors;
  for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle) break;
    const char* e = dlerror();
    errors += std::string(errors.empty() ? "" : "; ") + (e ? e : name);
  }
  if (!handle) throw StartupError("cpu backend: cannot open OpenBLAS (" + errors + ")");
  auto need = [&](const char* symbol) {
    void* p = dlsym(handle, symbol);
    if (!p) throw StartupError(std::string("cpu backend: the loaded OpenBLAS has no ") + symbol);
    return p;
  };
  OpenBlas b;
  b.sgemm = reinterpret_cast<OpenBlas::SgemmFn>(need("cblas_sgemm"));
  b.get_config = reinterpret_cast<const char* (*)()>(need("openblas_get_config"));
  b.set_num_threads = reinterpret_cast<void (*)(int)>(need("openblas_set_num_threads"));
  b.get_num_threads = reinterpret_cast<int (*)()>(need("openblas_get_num_threads"));
  b.sbgemm = reinterpret_cast<OpenBlas::SbgemmFn>(dlsym(handle, "cblas_sbgemm"));
  b.get_corename = reinterpret_cast<char* (*)()>(dlsym(handle, "openblas_get_corename"));
  return b;  // the handle stays open for the life of the process
}

}  // namespace

const OpenBlas& LoadOpenBlas() {
  static const OpenBlas blas = Open();
  return blas;
}

}  // namespace servecast::cpu
