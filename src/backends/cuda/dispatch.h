#pragma once

// A runtime integer to the kernel instantiation for it: DispatchConstant<Lo, Hi>(v, f)
// calls f(std::integral_constant<int, v>) when Lo <= v <= Hi and returns whether it did
// (the caller says what the valid range is when it did not).

#include <cstdint>
#include <type_traits>

namespace servecast::cuda {

template <int Lo, int Hi, class F>
bool DispatchConstant(std::int64_t v, F&& f) {
  if constexpr (Lo > Hi) {
    return false;
  } else {
    if (v == Lo) {
      f(std::integral_constant<int, Lo>{});
      return true;
    }
    return DispatchConstant<Lo + 1, Hi>(v, f);
  }
}

}  // namespace servecast::cuda
