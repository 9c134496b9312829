#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collect/params.h"

namespace servecast::collect {

// A small predicate language over case parameters, used by plan `where:` filters,
// skips.yaml and op requirements. Examples:
//   m * n < 2147483648
//   gemm_dtype == "bfloat16" && (n < 128 || k < 128)
//   batch_size * isl <= 65536 and num_heads != num_key_value_heads
// Operators: || or, && and, ! not, == != < <= > >=, + - * / %, parentheses.
// Literals: integers, decimals (1.5, 2e9), strings in double or single quotes.
// Identifiers name parameters. Integer arithmetic stays exact in int64: a result
// (or an integer literal) outside int64 is an error, as is a zero divisor of / or %.
// Nesting is limited to kExprMaxDepth levels (parentheses, unary operators and
// chained binary operators each count one); deeper text is refused at parse time.
inline constexpr int kExprMaxDepth = 256;

class Expr {
 public:
  // Throws Error with the column of the problem when the text does not parse.
  static Expr Parse(const std::string& text);

  // True when the expression is non-zero / a non-empty string. Throws Error
  // naming the identifier when a parameter is missing.
  bool Test(const Params& params) const;
  Value Evaluate(const Params& params) const;

  const std::string& text() const { return text_; }
  // Parameter names the expression reads.
  std::vector<std::string> Identifiers() const;

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace servecast::collect
