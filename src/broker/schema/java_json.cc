#include "broker/schema/internal/java_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

namespace magnetar::broker {

namespace {

// Java's decimal layout of digits d1d2...dn x 10^exp10 (value d1.d2...dn x 10^exp10).
std::string javaLayout(std::string digits, int exp10) {
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int point = exp10 + 1;  // digits before the decimal point
  if (point > 0 && point <= 7) {
    if (static_cast<int>(digits.size()) <= point) {
      return digits + std::string(point - digits.size(), '0') + ".0";
    }
    return digits.substr(0, point) + "." + digits.substr(point);
  }
  if (point <= 0 && point > -3) return "0." + std::string(-point, '0') + digits;
  return digits.substr(0, 1) + "." + (digits.size() > 1 ? digits.substr(1) : "0") + "E" +
         std::to_string(exp10);
}

// FloatingDecimal's count of decimal digits below a double's precision, by the power of two past
// it (its insignificantDigitsForPow2 table, floor(p * log10(2)) for the p < 9 used here).
int insignificantDigits(int p2) {
  if (p2 <= 1 || p2 >= 64) return 0;
  return static_cast<int>(std::floor(p2 * 0.30102999566398119521));
}

// An integer-valued double below 2^63 as FloatingDecimal prints it (its developLongDigits path):
// the exact value, the digits below the precision rounded half up. nullopt for other values.
std::optional<std::pair<std::string, int>> longDigits(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  const int binExp = biased - 1023;
  if (biased == 0 || binExp < 0 || binExp > 62) return std::nullopt;
  const uint64_t fraction = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int significantBits = 53 - __builtin_ctzll(fraction);
  if (significantBits > binExp + 1) return std::nullopt;  // not an integer
  uint64_t value = binExp >= 52 ? fraction << (binExp - 52) : fraction >> (52 - binExp);
  const int drop = binExp > 53 ? insignificantDigits(binExp - 53 - 1) : 0;
  if (drop > 0) {
    uint64_t pow10 = 1;
    for (int i = 0; i < drop; ++i) pow10 *= 10;
    const uint64_t residue = value % pow10;
    value /= pow10;
    if (residue >= pow10 / 2) ++value;
  }
  std::string digits = std::to_string(value);
  const int exp10 = drop + static_cast<int>(digits.size()) - 1;
  return std::make_pair(std::move(digits), exp10);
}

void appendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// A strict JSON reader that writes what it reads in a Java library's style.
class JsonRewriter {
 public:
  JsonRewriter(std::string_view in, JavaJsonStyle style) : in_(in), style_(style) {}

  bool value(std::string* out) {
    skipSpace();
    if (pos_ >= in_.size() || ++depth_ > kMaxDepth) return false;
    bool ok;
    switch (in_[pos_]) {
      case '{': {
        std::vector<std::pair<std::string, std::string>> members;
        ok = object(&members);
        if (ok) {
          out->push_back('{');
          for (size_t i = 0; i < members.size(); ++i) {
            if (i > 0) out->push_back(',');
            quote(members[i].first, out);
            out->push_back(':');
            out->append(members[i].second);
          }
          out->push_back('}');
        }
        break;
      }
      case '[':
        ok = array(out);
        break;
      case '"': {
        std::string s;
        ok = string(&s);
        if (ok) quote(s, out);
        break;
      }
      case 't':
        ok = literal("true", out);
        break;
      case 'f':
        ok = literal("false", out);
        break;
      case 'n':
        ok = literal("null", out);
        break;
      default:
        ok = number(out);
    }
    --depth_;
    return ok;
  }

  // An object's members: names decoded, values written; a repeated name keeps its first place.
  bool object(std::vector<std::pair<std::string, std::string>>* members) {
    skipSpace();
    if (!consume('{')) return false;
    skipSpace();
    if (consume('}')) return true;
    while (true) {
      skipSpace();
      std::string name;
      if (!string(&name)) return false;
      skipSpace();
      if (!consume(':')) return false;
      std::string v;
      if (!value(&v)) return false;
      auto it = members->begin();
      while (it != members->end() && it->first != name) ++it;
      if (it == members->end()) {
        members->emplace_back(std::move(name), std::move(v));
      } else {
        it->second = std::move(v);
      }
      skipSpace();
      if (consume('}')) return true;
      if (!consume(',')) return false;
    }
  }

 private:
  static constexpr int kMaxDepth = 512;

  void skipSpace() {
    while (pos_ < in_.size() &&
           (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\n' || in_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(char c) {
    if (pos_ < in_.size() && in_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool literal(std::string_view word, std::string* out) {
    if (in_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    out->append(word);
    return true;
  }

  bool array(std::string* out) {
    consume('[');
    out->push_back('[');
    skipSpace();
    if (consume(']')) {
      out->push_back(']');
      return true;
    }
    while (true) {
      if (!value(out)) return false;
      skipSpace();
      if (consume(']')) {
        out->push_back(']');
        return true;
      }
      if (!consume(',')) return false;
      out->push_back(',');
    }
  }

  bool digits() {
    size_t start = pos_;
    while (pos_ < in_.size() && in_[pos_] >= '0' && in_[pos_] <= '9') ++pos_;
    return pos_ > start;
  }

  bool number(std::string* out) {
    const size_t start = pos_;
    consume('-');
    if (consume('0')) {
      if (pos_ < in_.size() && in_[pos_] >= '0' && in_[pos_] <= '9') return false;
    } else if (!digits()) {
      return false;
    }
    bool integer = true;
    if (consume('.')) {
      integer = false;
      if (!digits()) return false;
    }
    if (consume('e') || consume('E')) {
      integer = false;
      if (!consume('+')) consume('-');
      if (!digits()) return false;
    }
    std::string_view text = in_.substr(start, pos_ - start);
    if (style_ == JavaJsonStyle::kGson) {
      out->append(text);  // LazilyParsedNumber keeps the text
    } else if (integer) {
      out->append(text == "-0" ? "0" : text);  // IntNode / LongNode / BigIntegerNode
    } else {
      const double d = std::strtod(std::string(text).c_str(), nullptr);  // DoubleNode
      if (std::isinf(d)) {
        out->append(d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
      } else {
        out->append(javaDoubleToString(d));
      }
    }
    return true;
  }

  bool hex4(uint32_t* cp) {
    if (pos_ + 4 > in_.size()) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = in_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        v |= c - 'A' + 10;
      } else {
        return false;
      }
    }
    *cp = v;
    return true;
  }

  // A string's content as UTF-8 (raw bytes copied; escapes decoded).
  bool string(std::string* s) {
    if (!consume('"')) return false;
    while (pos_ < in_.size()) {
      char c = in_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        s->push_back(c);
        continue;
      }
      if (pos_ >= in_.size()) return false;
      char e = in_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          s->push_back(e);
          break;
        case 'b':
          s->push_back('\b');
          break;
        case 'f':
          s->push_back('\f');
          break;
        case 'n':
          s->push_back('\n');
          break;
        case 'r':
          s->push_back('\r');
          break;
        case 't':
          s->push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (!hex4(&cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00 && in_.substr(pos_, 2) == "\\u") {
            size_t save = pos_;
            pos_ += 2;
            uint32_t low;
            if (!hex4(&low)) return false;
            if (low >= 0xdc00 && low < 0xe000) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            } else {
              pos_ = save;  // the next escape stands alone
            }
          }
          if (cp >= 0xd800 && cp < 0xe000) {
            s->push_back('?');
          } else {
            appendUtf8(cp, s);
          }
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  void quote(std::string_view s, std::string* out) const {
    static const char kUpper[] = "0123456789ABCDEF";
    static const char kLower[] = "0123456789abcdef";
    const char* hex = style_ == JavaJsonStyle::kJackson ? kUpper : kLower;
    out->push_back('"');
    for (size_t i = 0; i < s.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      switch (c) {
        case '"':
          out->append("\\\"");
          continue;
        case '\\':
          out->append("\\\\");
          continue;
        case '\b':
          out->append("\\b");
          continue;
        case '\t':
          out->append("\\t");
          continue;
        case '\n':
          out->append("\\n");
          continue;
        case '\f':
          out->append("\\f");
          continue;
        case '\r':
          out->append("\\r");
          continue;
        default:
          break;
      }
      if (c < 0x20) {
        out->append("\\u00");
        out->push_back(hex[c >> 4]);
        out->push_back(hex[c & 0xf]);
      } else if (style_ == JavaJsonStyle::kGson && c == 0xe2 && i + 2 < s.size() &&
                 static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                 (static_cast<unsigned char>(s[i + 2]) == 0xa8 ||
                  static_cast<unsigned char>(s[i + 2]) == 0xa9)) {
        out->append(static_cast<unsigned char>(s[i + 2]) == 0xa8 ? "\\u2028" : "\\u2029");
        i += 2;
      } else {
        out->push_back(static_cast<char>(c));
      }
    }
    out->push_back('"');
  }

  std::string_view in_;
  JavaJsonStyle style_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::string javaDoubleToString(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  const std::string sign = std::signbit(v) ? "-" : "";
  if (auto exact = longDigits(v)) return sign + javaLayout(exact->first, exact->second);
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific);
  std::string_view sci(buf, r.ptr - buf);  // d.ddde[+-]xx, the shortest that reads back
  const size_t e = sci.find('e');
  std::string digits(sci.substr(0, 1));
  if (e > 2) digits.append(sci.substr(2, e - 2));
  int exp10 = 0;
  std::string_view expText = sci.substr(e + 1);
  if (!expText.empty() && expText[0] == '+') expText.remove_prefix(1);
  std::from_chars(expText.data(), expText.data() + expText.size(), exp10);
  return sign + javaLayout(std::move(digits), exp10);
}

Result<std::string> rewriteJsonAsJava(std::string_view text, JavaJsonStyle style) {
  std::string out;
  JsonRewriter rewriter(text, style);
  if (!rewriter.value(&out)) return Status::invalidArgument("not JSON");
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> rewriteJsonObjectMembersAsJava(
    std::string_view text, JavaJsonStyle style) {
  std::vector<std::pair<std::string, std::string>> members;
  JsonRewriter rewriter(text, style);
  if (!rewriter.object(&members)) return Status::invalidArgument("not a JSON object");
  return members;
}

}  // namespace magnetar::broker
