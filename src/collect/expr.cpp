#include "collect/expr.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/error.h"

namespace servecast::collect {

struct Expr::Node {
  enum class Kind { kLiteral, kIdent, kUnary, kBinary } kind;
  Value literal;
  std::string name;  // identifier or operator
  std::shared_ptr<const Node> lhs, rhs;
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;

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
    throw Error("expression '" + s_ + "': " + what + " at column " + std::to_string(i_ + 1) +
                "; expected e.g. `m * n < 2147483648 && gemm_dtype == \"fp8\"`");
  }

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

  static NodePtr Binary(std::string op, NodePtr a, NodePtr b) {
    auto n = std::make_shared<Expr::Node>();
    n->kind = Expr::Node::Kind::kBinary;
    n->name = std::move(op);
    n->lhs = std::move(a);
    n->rhs = std::move(b);
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
      auto n = std::make_shared<Expr::Node>();
      n->kind = Expr::Node::Kind::kUnary;
      n->name = "!";
      n->lhs = ParseUnary();
      return n;
    }
    if (Accept("-")) {
      auto n = std::make_shared<Expr::Node>();
      n->kind = Expr::Node::Kind::kUnary;
      n->name = "-";
      n->lhs = ParseUnary();
      return n;
    }
    return ParsePrimary();
  }
  NodePtr ParsePrimary() {
    SkipSpace();
    if (i_ >= s_.size()) Fail("unexpected end");
    char c = s_[i_];
    auto n = std::make_shared<Expr::Node>();
    if (Accept("(")) {
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
      long long iv = std::strtoll(tok.c_str(), &end, 10);
      if (end && *end == '\0') {
        n->literal = static_cast<std::int64_t>(iv);
      } else {
        double dv = std::strtod(tok.c_str(), &end);
        if (!end || *end != '\0') Fail("bad number '" + tok + "'");
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
};

bool Truthy(const Value& v) {
  if (auto* s = std::get_if<std::string>(&v)) return !s->empty();
  return AsDouble(v) != 0;
}

Value Arith(const std::string& op, const Value& a, const Value& b, const std::string& text) {
  if (!IsNumeric(a) || !IsNumeric(b))
    throw Error("expression '" + text + "': '" + op + "' needs numbers, got '" + ToString(a) + "' and '" +
                ToString(b) + "'");
  auto* ia = std::get_if<std::int64_t>(&a);
  auto* ib = std::get_if<std::int64_t>(&b);
  if (ia && ib && op != "/") {
    if (op == "+") return *ia + *ib;
    if (op == "-") return *ia - *ib;
    if (op == "*") return *ia * *ib;
    if (op == "%") {
      if (*ib == 0) throw Error("expression '" + text + "': modulo by zero");
      return *ia % *ib;
    }
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
    throw Error("expression '" + text + "': cannot order '" + ToString(a) + "' against '" + ToString(b) + "'");
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
        throw Error("expression '" + text + "': unknown parameter '" + n.name + "' (the case has: " + have + ")");
      }
      return *v;
    }
    case Expr::Node::Kind::kUnary: {
      Value v = Eval(*n.lhs, p, text);
      if (n.name == "!") return std::int64_t{Truthy(v) ? 0 : 1};
      if (auto* i = std::get_if<std::int64_t>(&v)) return -*i;
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
