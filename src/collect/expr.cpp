#include "collect/expr.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "core/error.h"

namespace servecast::collect {

struct Expr::Node {
  enum class Kind { kLiteral, kIdent, kUnary, kBinary } kind;
  Value literal;
  std::string name;  // identifier or operator
  std::shared_ptr<const Node> lhs, rhs;
  int depth = 0;  // operator levels from this node down (0 for a literal or identifier)
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;

// The expression as error messages quote it: in full, or its start when long
// (a message that repeats a 10,000-character expression helps no one).
std::string Quoted(const std::string& text) {
  constexpr std::size_t kShown = 80;
  if (text.size() <= 2 * kShown) return "'" + text + "'";
  return "'" + text.substr(0, kShown) + "...' (" + std::to_string(text.size()) + " characters)";
}

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  NodePtr ParseAll() {
    NodePtr n = ParseOr();
    SkipSpace();
    if (i_ != s_.size()) Fail("unexpected '" + s_.substr(i_, 1) + "'");
    return n;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw Error("expression " + Quoted(s_) + ": " + what + " at column " + std::to_string(i_ + 1) +
                "; expected e.g. `m * n < 2147483648 && gemm_dtype == \"fp8\"`");
  }

  // Parsing and evaluation recurse once per level: past the limit the stack of
  // the parser, of Eval and of the tree's destructor would overflow (10,000
  // parentheses crashed), so deeper nesting is refused with the limit named.
  [[noreturn]] void FailDepth() const {
    throw Error("expression " + Quoted(s_) + ": nested deeper than " + std::to_string(kExprMaxDepth) +
                " levels at column " + std::to_string(i_ + 1) +
                " (each parenthesis, unary operator and chained binary operator is a level); split it into "
                "several conditions");
  }

  // One level of parser recursion (a parenthesis or a unary operator), for the
  // scope of the guard.
  class Level {
   public:
    explicit Level(Parser& p) : p_(p) {
      if (++p_.depth_ > kExprMaxDepth) p_.FailDepth();
    }
    ~Level() { --p_.depth_; }
    Level(const Level&) = delete;
    Level& operator=(const Level&) = delete;

   private:
    Parser& p_;
  };

  void SkipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }

  bool Accept(const std::string& tok) {
    SkipSpace();
    if (s_.compare(i_, tok.size(), tok) != 0) return false;
    bool word = std::isalpha(static_cast<unsigned char>(tok[0]));
    if (word && i_ + tok.size() < s_.size()) {
      char next = s_[i_ + tok.size()];
      if (std::isalnum(static_cast<unsigned char>(next)) || next == '_') return false;
    }
    // Do not read "<" out of "<=", "=" out of "==", "!" out of "!=".
    if ((tok == "<" || tok == ">" || tok == "!") && i_ + 1 < s_.size() && s_[i_ + 1] == '=') return false;
    i_ += tok.size();
    return true;
  }

  NodePtr Binary(std::string op, NodePtr a, NodePtr b) const {
    auto n = std::make_shared<Expr::Node>();
    n->kind = Expr::Node::Kind::kBinary;
    n->name = std::move(op);
    n->depth = 1 + std::max(a->depth, b->depth);
    if (n->depth > kExprMaxDepth) FailDepth();  // a chain `1 + 1 + ... + 1` nests to the left
    n->lhs = std::move(a);
    n->rhs = std::move(b);
    return n;
  }

  NodePtr Unary(std::string op, NodePtr a) const {
    auto n = std::make_shared<Expr::Node>();
    n->kind = Expr::Node::Kind::kUnary;
    n->name = std::move(op);
    n->depth = 1 + a->depth;
    if (n->depth > kExprMaxDepth) FailDepth();
    n->lhs = std::move(a);
    return n;
  }

  NodePtr ParseOr() {
    NodePtr n = ParseAnd();
    while (Accept("||") || Accept("or")) n = Binary("||", n, ParseAnd());
    return n;
  }
  NodePtr ParseAnd() {
    NodePtr n = ParseCmp();
    while (Accept("&&") || Accept("and")) n = Binary("&&", n, ParseCmp());
    return n;
  }
  NodePtr ParseCmp() {
    NodePtr n = ParseAdd();
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (Accept(op)) return Binary(op, n, ParseAdd());
    }
    return n;
  }
  NodePtr ParseAdd() {
    NodePtr n = ParseMul();
    for (;;) {
      if (Accept("+")) n = Binary("+", n, ParseMul());
      else if (Accept("-")) n = Binary("-", n, ParseMul());
      else return n;
    }
  }
  NodePtr ParseMul() {
    NodePtr n = ParseUnary();
    for (;;) {
      if (Accept("*")) n = Binary("*", n, ParseUnary());
      else if (Accept("/")) n = Binary("/", n, ParseUnary());
      else if (Accept("%")) n = Binary("%", n, ParseUnary());
      else return n;
    }
  }
  NodePtr ParseUnary() {
    if (Accept("!") || Accept("not")) {
      Level level(*this);
      return Unary("!", ParseUnary());
    }
    if (Accept("-")) {
      Level level(*this);
      return Unary("-", ParseUnary());
    }
    return ParsePrimary();
  }
  NodePtr ParsePrimary() {
    SkipSpace();
    if (i_ >= s_.size()) Fail("unexpected end");
    char c = s_[i_];
    auto n = std::make_shared<Expr::Node>();
    if (Accept("(")) {
      Level level(*this);
      NodePtr inner = ParseOr();
      if (!Accept(")")) Fail("missing ')'");
      return inner;
    }
    if (c == '"' || c == '\'') {
      std::size_t end = s_.find(c, i_ + 1);
      if (end == std::string::npos) Fail("unterminated string");
      n->kind = Expr::Node::Kind::kLiteral;
      n->literal = s_.substr(i_ + 1, end - i_ - 1);
      i_ = end + 1;
      return n;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      std::size_t start = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                                ((s_[i_] == '+' || s_[i_] == '-') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E'))))
        ++i_;
      std::string tok = s_.substr(start, i_ - start);
      n->kind = Expr::Node::Kind::kLiteral;
      char* end = nullptr;
      errno = 0;
      long long iv = std::strtoll(tok.c_str(), &end, 10);
      if (end && *end == '\0') {
        // strtoll saturates: refuse instead of reading 99999999999999999999 as INT64_MAX.
        if (errno == ERANGE)
          Fail("integer literal '" + tok + "' does not fit in int64 (at most " +
               std::to_string(std::numeric_limits<std::int64_t>::max()) + "); write a decimal such as 1e20 for an "
               "approximate value");
        n->literal = static_cast<std::int64_t>(iv);
      } else {
        double dv = std::strtod(tok.c_str(), &end);
        if (!end || *end != '\0') Fail("bad number '" + tok + "'");
        if (std::isinf(dv)) Fail("number '" + tok + "' is out of the range of a double");
        if (std::floor(dv) == dv && std::fabs(dv) < 9.2e18) n->literal = static_cast<std::int64_t>(dv);
        else n->literal = dv;
      }
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t start = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
      n->kind = Expr::Node::Kind::kIdent;
      n->name = s_.substr(start, i_ - start);
      return n;
    }
    Fail("unexpected '" + std::string(1, c) + "'");
  }

  const std::string& s_;
  std::size_t i_ = 0;
  int depth_ = 0;  // parser recursion: open parentheses and unary operators
};

bool Truthy(const Value& v) {
  if (auto* s = std::get_if<std::string>(&v)) return !s->empty();
  return AsDouble(v) != 0;
}

[[noreturn]] void FailOverflow(const std::string& text, const std::string& what) {
  throw Error("expression " + Quoted(text) + ": integer overflow in " + what + " (int64 holds " +
              std::to_string(std::numeric_limits<std::int64_t>::min()) + " to " +
              std::to_string(std::numeric_limits<std::int64_t>::max()) + ")");
}

Value Arith(const std::string& op, const Value& a, const Value& b, const std::string& text) {
  if (!IsNumeric(a) || !IsNumeric(b))
    throw Error("expression " + Quoted(text) + ": '" + op + "' needs numbers, got '" + ToString(a) + "' and '" +
                ToString(b) + "'");
  // A zero divisor is an error for / as for %, integer or not (not inf or nan).
  if ((op == "/" || op == "%") && AsDouble(b) == 0)
    throw Error("expression " + Quoted(text) + ": " + (op == "/" ? "division" : "modulo") + " by zero (" +
                ToString(a) + " " + op + " " + ToString(b) + ")");
  auto* ia = std::get_if<std::int64_t>(&a);
  auto* ib = std::get_if<std::int64_t>(&b);
  if (ia && ib && op != "/") {
    // Exact in int64, or an error: never a wrapped (undefined) result.
    std::int64_t r = 0;
    bool overflow = (op == "+" && __builtin_add_overflow(*ia, *ib, &r)) ||
                    (op == "-" && __builtin_sub_overflow(*ia, *ib, &r)) ||
                    (op == "*" && __builtin_mul_overflow(*ia, *ib, &r));
    if (overflow) FailOverflow(text, std::to_string(*ia) + " " + op + " " + std::to_string(*ib));
    if (op == "%") r = *ib == -1 ? 0 : *ia % *ib;  // INT64_MIN % -1 traps; the remainder is 0
    return r;
  }
  double x = AsDouble(a), y = AsDouble(b);
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "/") return x / y;
  return std::fmod(x, y);
}

Value Compare(const std::string& op, const Value& a, const Value& b, const std::string& text) {
  int c = 0;
  auto* ia = std::get_if<std::int64_t>(&a);
  auto* ib = std::get_if<std::int64_t>(&b);
  if (ia && ib) {
    c = *ia < *ib ? -1 : (*ia > *ib ? 1 : 0);  // exact beyond 2^53
  } else if (IsNumeric(a) && IsNumeric(b)) {
    double x = AsDouble(a), y = AsDouble(b);
    c = x < y ? -1 : (x > y ? 1 : 0);
  } else if (!IsNumeric(a) && !IsNumeric(b)) {
    int r = std::get<std::string>(a).compare(std::get<std::string>(b));
    c = r < 0 ? -1 : (r > 0 ? 1 : 0);
  } else {
    if (op == "==") return std::int64_t{0};
    if (op == "!=") return std::int64_t{1};
    throw Error("expression " + Quoted(text) + ": cannot order '" + ToString(a) + "' against '" + ToString(b) + "'");
  }
  bool r = op == "==" ? c == 0 : op == "!=" ? c != 0 : op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
  return std::int64_t{r ? 1 : 0};
}

Value Eval(const Expr::Node& n, const Params& p, const std::string& text) {
  switch (n.kind) {
    case Expr::Node::Kind::kLiteral: return n.literal;
    case Expr::Node::Kind::kIdent: {
      const Value* v = p.Find(n.name);
      if (!v) {
        std::string have;
        for (const auto& [k, _] : p.items()) have += (have.empty() ? "" : ", ") + k;
        throw Error("expression " + Quoted(text) + ": unknown parameter '" + n.name + "' (the case has: " + have + ")");
      }
      return *v;
    }
    case Expr::Node::Kind::kUnary: {
      Value v = Eval(*n.lhs, p, text);
      if (n.name == "!") return std::int64_t{Truthy(v) ? 0 : 1};
      if (auto* i = std::get_if<std::int64_t>(&v)) {
        if (*i == std::numeric_limits<std::int64_t>::min()) FailOverflow(text, "-(" + std::to_string(*i) + ")");
        return -*i;
      }
      return -AsDouble(v);
    }
    case Expr::Node::Kind::kBinary: {
      if (n.name == "&&") return std::int64_t{Truthy(Eval(*n.lhs, p, text)) && Truthy(Eval(*n.rhs, p, text))};
      if (n.name == "||") return std::int64_t{Truthy(Eval(*n.lhs, p, text)) || Truthy(Eval(*n.rhs, p, text))};
      Value a = Eval(*n.lhs, p, text), b = Eval(*n.rhs, p, text);
      if (n.name == "==" || n.name == "!=" || n.name[0] == '<' || n.name[0] == '>') return Compare(n.name, a, b, text);
      return Arith(n.name, a, b, text);
    }
  }
  return std::int64_t{0};
}

void CollectIdents(const Expr::Node& n, std::set<std::string>& out) {
  if (n.kind == Expr::Node::Kind::kIdent) out.insert(n.name);
  if (n.lhs) CollectIdents(*n.lhs, out);
  if (n.rhs) CollectIdents(*n.rhs, out);
}

}  // namespace

Expr Expr::Parse(const std::string& text) {
  Expr e;
  e.text_ = text;
  Parser parser(e.text_);
  e.root_ = parser.ParseAll();
  return e;
}

Value Expr::Evaluate(const Params& params) const { return Eval(*root_, params, text_); }

bool Expr::Test(const Params& params) const { return Truthy(Evaluate(params)); }

std::vector<std::string> Expr::Identifiers() const {
  std::set<std::string> ids;
  CollectIdents(*root_, ids);
  return {ids.begin(), ids.end()};
}

}  // namespace servecast::collect
