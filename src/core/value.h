#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace servecast {

// A typed cell: table cells, case parameters and expression values.
using Value = std::variant<std::int64_t, double, std::string>;

enum class ValueType { kInt64, kDouble, kString };

ValueType TypeOf(const Value& v);
const char* TypeName(ValueType t);
// Canonical text: integers in decimal, doubles with the shortest round-trip form,
// strings as they are.
std::string ToString(const Value& v);
// Numeric view (int64 or double); throws Error for strings.
double AsDouble(const Value& v);
bool IsNumeric(const Value& v);

// The whole text as an integer / a number, as the CSV reader takes cells
// (ParseNumber: from_chars, else strtod's forms: a leading '+', hex floats, inf,
// nan); false for anything else, the empty text included.
bool ParseInt64(std::string_view s, std::int64_t& out);
bool ParseNumber(std::string_view s, double& out);

// Formats a double with the shortest representation that parses back to the
// same value ("0.1", "1e-05", "3").
std::string FormatDouble(double d);
// Six significant digits (printf "%.6g"), for numbers in messages and details.
std::string FormatG6(double d);

}  // namespace servecast
