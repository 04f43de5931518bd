// module_match: module names against the patterns of quantization configs (module_match.hpp).
#include "module_match.hpp"

#include <cstring>

namespace fkv::config_detail {
namespace {

// Bounds on what a pattern may build: a config's pattern is data, and its automaton is built
// once per read.
constexpr std::size_t kMaxPatternBytes = 1024;
constexpr std::size_t kMaxStates = 20000;
constexpr int kMaxRepeat = 1000;

using State = ModuleRegex::State;

// The parsed pattern, before it is compiled to states.
struct Node {
  enum Kind { Empty, Char, Begin, End, Concat, Alt, Repeat } kind = Empty;
  bool set[256] = {};
  std::vector<Node> children;
  int min = 0, max = 0;  // Repeat; max -1 = unbounded
};

[[noreturn]] void unsupported(const std::string& what) { throw std::invalid_argument(what); }

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  Node parse() {
    Node n = alternation();
    if (i_ < p_.size()) unsupported("unbalanced ')' at offset " + std::to_string(i_));
    return n;
  }

 private:
  bool at_end() const { return i_ >= p_.size(); }
  char peek() const { return p_[i_]; }

  Node alternation() {
    Node first = concatenation();
    if (at_end() || peek() != '|') return first;
    Node alt;
    alt.kind = Node::Alt;
    alt.children.push_back(std::move(first));
    while (!at_end() && peek() == '|') {
      ++i_;
      alt.children.push_back(concatenation());
    }
    return alt;
  }

  Node concatenation() {
    Node seq;
    seq.kind = Node::Concat;
    while (!at_end() && peek() != '|' && peek() != ')') seq.children.push_back(repetition());
    return seq;
  }

  // A quantifier at i_ ("*", "+", "?", "{m}", "{m,}", "{m,n}"); false (i_ unchanged) if none.
  bool quantifier(int& min, int& max) {
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
      ++i_;
      return true;
    }
    if (c != '{') return false;
    std::size_t j = i_ + 1;
    auto number = [&](int& out) {
      const std::size_t from = j;
      long v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
        v = v * 10 + (p_[j++] - '0');
        if (v > kMaxRepeat) v = kMaxRepeat + 1;  // saturated: refused below
      }
      out = static_cast<int>(v);
      return j > from;
    };
    int lo = 0, hi = 0;
    const bool has_lo = number(lo);
    if (j < p_.size() && p_[j] == '}') {
      if (!has_lo) return false;  // "{}": a literal in Python
      hi = lo;
    } else if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(hi)) hi = -1;
      if (j >= p_.size() || p_[j] != '}') return false;
    } else {
      return false;  // not a quantifier: "{" is a literal
    }
    if (lo > kMaxRepeat || hi > kMaxRepeat)
      unsupported("a repeat count above " + std::to_string(kMaxRepeat));
    if (hi != -1 && hi < lo) unsupported("a repeat {m,n} with n < m");
    min = lo;
    max = hi;
    i_ = j + 1;
    return true;
  }

  Node repetition() {
    Node atom_node = atom();
    int min = 0, max = 0;
    if (at_end() || !quantifier(min, max)) return atom_node;
    // Lazy (x*?) and possessive (x*+) forms take the same names.
    if (!at_end() && (peek() == '?' || peek() == '+')) ++i_;
    int dummy_min = 0, dummy_max = 0;
    if (!at_end() && quantifier(dummy_min, dummy_max)) unsupported("a repeated repeat");
    if (atom_node.kind == Node::Begin || atom_node.kind == Node::End)
      unsupported("a repeated anchor");
    Node r;
    r.kind = Node::Repeat;
    r.min = min;
    r.max = max;
    r.children.push_back(std::move(atom_node));
    return r;
  }

  static Node chars(const char* bytes) {
    Node n;
    n.kind = Node::Char;
    for (const char* b = bytes; *b; ++b) n.set[static_cast<unsigned char>(*b)] = true;
    return n;
  }

  static void add_range(Node& n, int lo, int hi) {
    for (int c = lo; c <= hi; ++c) n.set[c] = true;
  }

  // \d, \w, \s and their complements into `n`; false for another letter.
  static bool class_escape(char e, Node& n) {
    Node s;
    switch (e) {
      case 'd':
      case 'D':
        add_range(s, '0', '9');
        break;
      case 'w':
      case 'W':
        add_range(s, '0', '9');
        add_range(s, 'a', 'z');
        add_range(s, 'A', 'Z');
        s.set[static_cast<unsigned char>('_')] = true;
        break;
      case 's':
      case 'S':
        for (char c : std::string(" \t\n\r\f\v")) s.set[static_cast<unsigned char>(c)] = true;
        break;
      default:
        return false;
    }
    const bool negate = e == 'D' || e == 'W' || e == 'S';
    for (int c = 0; c < 256; ++c)
      if (s.set[c] != negate) n.set[c] = true;
    return true;
  }

  // The byte an escape stands for (after the backslash), for escapes that name one byte.
  int escaped_byte() {
    if (at_end()) unsupported("a trailing backslash");
    const char e = p_[i_++];
    switch (e) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      case '0':
        return 0;
      case 'x': {
        if (i_ + 2 > p_.size()) unsupported("a short \\x escape");
        int v = 0;
        for (int k = 0; k < 2; ++k) {
          const char h = p_[i_++];
          v = v * 16 + (h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1000);
        }
        if (v < 0) unsupported("a malformed \\x escape");
        return v;
      }
      default:
        break;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9'))
      unsupported(std::string("the escape \\") + e +
                  (e >= '1' && e <= '9'   ? " (a backreference)"
                   : e == 'b' || e == 'B' ? " (a word boundary)"
                                          : ""));
    return static_cast<unsigned char>(e);  // \. \- \/ ...: the character itself
  }

  Node character_class() {
    Node n;
    n.kind = Node::Char;
    bool negate = false;
    if (!at_end() && peek() == '^') {
      negate = true;
      ++i_;
    }
    bool first = true;
    for (;;) {
      if (at_end()) unsupported("an unterminated [");
      char c = p_[i_];
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      ++i_;
      int lo;
      if (c == '\\') {
        if (!at_end() && class_escape(peek(), n)) {
          ++i_;
          continue;
        }
        lo = escaped_byte();
      } else {
        lo = static_cast<unsigned char>(c);
      }
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        const char h = p_[i_++];
        int hi = static_cast<unsigned char>(h);
        if (h == '\\') hi = escaped_byte();
        if (hi < lo) unsupported("a bad character range");
        add_range(n, lo, hi);
      } else {
        n.set[lo] = true;
      }
    }
    if (negate)
      for (bool& b : n.set) b = !b;
    return n;
  }

  Node atom() {
    const char c = p_[i_++];
    switch (c) {
      case '(': {
        if (!at_end() && peek() == '?') {
          if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
            i_ += 2;
          } else if (i_ + 2 < p_.size() && p_[i_ + 1] == 'P' && p_[i_ + 2] == '<') {
            const std::size_t close = p_.find('>', i_);
            if (close == std::string_view::npos) unsupported("an unterminated group name");
            i_ = close + 1;
          } else {
            unsupported("a lookaround, inline flag or other (?...) group");
          }
        }
        Node inner = alternation();
        if (at_end() || peek() != ')') unsupported("a missing ')'");
        ++i_;
        return inner;
      }
      case '[':
        return character_class();
      case '.': {
        Node n = chars("");
        for (int b = 0; b < 256; ++b) n.set[b] = b != '\n';
        return n;
      }
      case '^': {
        Node n;
        n.kind = Node::Begin;
        return n;
      }
      case '$': {
        Node n;
        n.kind = Node::End;
        return n;
      }
      case '*':
      case '+':
      case '?':
        unsupported(std::string("nothing to repeat before '") + c + "'");
      case '\\': {
        Node n;
        n.kind = Node::Char;
        if (!at_end() && class_escape(peek(), n)) {
          ++i_;
          return n;
        }
        if (!at_end() && (peek() == 'A' || peek() == 'Z')) {
          n.kind = peek() == 'A' ? Node::Begin : Node::End;
          ++i_;
          return n;
        }
        n.set[escaped_byte()] = true;
        return n;
      }
      default: {
        Node n;
        n.kind = Node::Char;
        n.set[static_cast<unsigned char>(c)] = true;
        return n;
      }
    }
  }

  std::string_view p_;
  std::size_t i_ = 0;
};

class Compiler {
 public:
  explicit Compiler(std::vector<State>& states) : s_(states) {}

  // The state that matches `n` and then goes on to `next`.
  int compile(const Node& n, int next) {
    switch (n.kind) {
      case Node::Empty:
        return next;
      case Node::Char: {
        const int id = add(State::Char, next);
        std::memcpy(s_[id].set, n.set, sizeof n.set);
        return id;
      }
      case Node::Begin:
        return add(State::Begin, next);
      case Node::End:
        return add(State::End, next);
      case Node::Concat:
        for (auto it = n.children.rbegin(); it != n.children.rend(); ++it)
          next = compile(*it, next);
        return next;
      case Node::Alt: {
        int s = compile(n.children.back(), next);
        for (std::size_t k = n.children.size() - 1; k-- > 0;) {
          const int branch = compile(n.children[k], next);
          s = add(State::Split, branch, s);
        }
        return s;
      }
      case Node::Repeat: {
        const Node& body = n.children.front();
        int s = next;
        if (n.max == -1) {
          const int loop = add(State::Split, -1, next);
          s_[loop].out = compile(body, loop);
          s = loop;
        } else {
          for (int k = 0; k < n.max - n.min; ++k) s = add(State::Split, compile(body, s), next);
        }
        for (int k = 0; k < n.min; ++k) s = compile(body, s);
        return s;
      }
    }
    return next;
  }

  int add(State::Kind kind, int out, int out1 = -1) {
    if (s_.size() >= kMaxStates)
      unsupported("a pattern that needs more than " + std::to_string(kMaxStates) + " states");
    State st;
    st.kind = kind;
    st.out = out;
    st.out1 = out1;
    s_.push_back(st);
    return static_cast<int>(s_.size() - 1);
  }

 private:
  std::vector<State>& s_;
};

}  // namespace

ModuleRegex::ModuleRegex(const std::string& pattern) {
  if (pattern.size() > kMaxPatternBytes)
    unsupported("a pattern longer than " + std::to_string(kMaxPatternBytes) + " bytes");
  const Node root = Parser(pattern).parse();
  Compiler c(states_);
  const int match = c.add(State::Match, -1);
  start_ = c.compile(root, match);
}

bool ModuleRegex::match(std::string_view name) const {
  // The set of states reached after each byte (Thompson's simulation): linear in the name.
  std::vector<int> current, following;
  std::vector<std::size_t> seen(states_.size(), static_cast<std::size_t>(-1));
  bool matched = false;
  auto add = [&](std::vector<int>& list, int start, std::size_t pos) {
    std::vector<int> stack{start};
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (id < 0 || seen[id] == pos) continue;
      seen[id] = pos;
      const State& st = states_[id];
      switch (st.kind) {
        case State::Match:
          matched = true;
          break;
        case State::Char:
          list.push_back(id);
          break;
        case State::Split:
          stack.push_back(st.out1);
          stack.push_back(st.out);
          break;
        case State::Begin:
          if (pos == 0) stack.push_back(st.out);
          break;
        case State::End:
          if (pos == name.size()) stack.push_back(st.out);
          break;
      }
    }
  };
  add(current, start_, 0);
  for (std::size_t pos = 0; pos < name.size() && !matched && !current.empty(); ++pos) {
    following.clear();
    const unsigned char c = static_cast<unsigned char>(name[pos]);
    for (int id : current)
      if (states_[id].set[c]) add(following, states_[id].out, pos + 1);
    current.swap(following);
  }
  return matched;
}

bool glob_match(std::string_view pattern, std::string_view name) {
  // Iterative wildcard matching with one backtrack point (linear space, no recursion).
  std::size_t p = 0, n = 0, star = std::string_view::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string_view> component_runs(std::string_view module) {
  std::vector<std::string_view> runs;
  for (std::size_t b = 0; b <= module.size();) {
    for (std::size_t e = module.find('.', b);; e = module.find('.', e + 1)) {
      runs.push_back(module.substr(b, (e == std::string_view::npos ? module.size() : e) - b));
      if (e == std::string_view::npos) break;
    }
    const std::size_t dot = module.find('.', b);
    if (dot == std::string_view::npos) break;
    b = dot + 1;
  }
  return runs;
}

bool excludes_module(std::string_view entry, std::string_view module) {
  if (entry.empty()) return false;
  const bool wildcard = entry.find_first_of("*?") != std::string_view::npos;
  for (std::string_view run : component_runs(module))
    if (wildcard ? glob_match(entry, run) : run == entry) return true;
  return false;
}

}  // namespace fkv::config_detail
