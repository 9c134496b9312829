#include "backends/cpu/attention_common.h"

#include "backends/cpu/op_support.h"
#include "core/error.h"

namespace servecast::cpu {

AttentionParams ParseAttentionParams(const collect::Params& p, AttentionPhase phase) {
  const std::string op = phase == AttentionPhase::kContext ? "attention_context" : "attention_generation";
  AttentionParams out;
  AttentionShape& s = out.shape;
  std::int64_t beam_width = 0;
  std::string attn_dtype, kv_dtype;
  try {
    s.batch = PositiveInt(p, "batch_size");
    s.isl = PositiveInt(p, "isl");
    s.num_heads = PositiveInt(p, "num_heads");
    s.num_kv_heads = NonNegativeInt(p, "num_key_value_heads");
    s.head_dim = PositiveInt(p, "head_dim");
    s.window = NonNegativeInt(p, "window_size");
    s.step = NonNegativeInt(p, "step");
    beam_width = PositiveInt(p, "beam_width");
    attn_dtype = p.Str("attn_dtype");
    kv_dtype = p.Str("kv_cache_dtype");
  } catch (const Error& e) {
    out.failure = InvalidParams(op, e.what());
    return out;
  }
  if (s.num_kv_heads == 0) s.num_kv_heads = s.num_heads;  // AIC's tables write 0 for MHA
  if (s.num_heads % s.num_kv_heads != 0) {
    out.failure = InvalidParams(op, "num_heads " + std::to_string(s.num_heads) +
                                        " is not a multiple of num_key_value_heads " + std::to_string(s.num_kv_heads));
    return out;
  }
  if (auto bad = CheckDtype("attn_dtype", attn_dtype, {"float32"})) {
    out.failure = std::move(bad);
    return out;
  }
  if (auto bad = CheckDtype("kv_cache_dtype", kv_dtype, {"float32"})) {
    out.failure = std::move(bad);
    return out;
  }
  if (beam_width != 1) {
    out.failure = NotSupported("UnsupportedConfig", op + ": beam_width " + std::to_string(beam_width) +
                                                        " is not supported on the cpu backend (only 1)");
    return out;
  }
  if (phase == AttentionPhase::kContext && s.step != 0) {
    out.failure = NotSupported("UnsupportedConfig", op + ": step " + std::to_string(s.step) +
                                                        " (prefill over a cached prefix) is not supported; "
                                                        "context attention runs with step 0");
    return out;
  }
  if (phase == AttentionPhase::kGeneration && s.isl != 1) {
    out.failure = NotSupported("UnsupportedConfig", op + ": isl " + std::to_string(s.isl) +
                                                        " is not supported; generation attention runs one "
                                                        "query token per sequence (isl 1)");
    return out;
  }
  bool has_kernel = false;
  for (int h : kAttentionHeadDims) has_kernel |= h == s.head_dim;
  if (!has_kernel) {
    std::string list;
    for (int h : kAttentionHeadDims) list += (list.empty() ? "" : ", ") + std::to_string(h);
    out.failure = NotSupported("UnsupportedHeadDim", op + ": head_dim " + std::to_string(s.head_dim) +
                                                         " has no kernel instantiation (have " + list + ")");
    return out;
  }
  return out;
}

}  // namespace servecast::cpu
