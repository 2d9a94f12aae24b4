#include "mqtt/topic_mapping.h"

#include <vector>

namespace magnetar::mqtt {
namespace {

std::vector<std::string_view> levels(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t slash = s.find('/', start);
    if (slash == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, slash - start));
    start = slash + 1;
  }
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string urlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
        c == '-' || c == '*' || c == '_') {
      out.push_back(ch);
    } else if (c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0x0F]);
    }
  }
  return out;
}

Result<std::string> urlDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) {
        return Status::invalidArgument("incomplete %-escape in '" + std::string(s) + "'");
      }
      int hi = hexValue(s[i + 1]);
      int lo = hexValue(s[i + 2]);
      if (hi < 0 || lo < 0) {
        return Status::invalidArgument("bad %-escape in '" + std::string(s) + "'");
      }
      out.push_back(static_cast<char>(hi << 4 | lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

Result<std::string> pulsarTopicName(std::string_view mqttTopic, std::string_view tenant,
                                    std::string_view ns, std::string_view domain) {
  for (std::string_view scheme : {"persistent://", "non-persistent://"}) {
    if (mqttTopic.substr(0, scheme.size()) != scheme) continue;
    std::string_view rest = mqttTopic.substr(scheme.size());
    size_t a = rest.find('/');
    size_t b = a == std::string_view::npos ? a : rest.find('/', a + 1);
    if (b == std::string_view::npos || a == 0 || b == a + 1 || b + 1 >= rest.size()) {
      return Status::invalidArgument("Invalid topic name: " + std::string(mqttTopic));
    }
    return std::string(scheme) + std::string(rest.substr(0, b + 1)) + urlEncode(rest.substr(b + 1));
  }
  return std::string(domain) + "://" + std::string(tenant) + "/" + std::string(ns) + "/" +
         urlEncode(mqttTopic);
}

bool validTopicFilter(std::string_view filter) {
  if (filter.empty()) return false;
  auto ls = levels(filter);
  for (size_t i = 0; i < ls.size(); i++) {
    std::string_view l = ls[i];
    if (l.find('#') != std::string_view::npos && (l != "#" || i + 1 != ls.size())) return false;
    if (l.find('+') != std::string_view::npos && l != "+") return false;
  }
  return true;
}

bool isWildcardFilter(std::string_view filter) {
  return filter.find_first_of("+#") != std::string_view::npos;
}

bool topicMatches(std::string_view filter, std::string_view topic) {
  if (!topic.empty() && topic[0] == '$' && !filter.empty() &&
      (filter[0] == '+' || filter[0] == '#')) {
    return false;
  }
  auto f = levels(filter);
  auto t = levels(topic);
  for (size_t i = 0; i < f.size(); i++) {
    if (f[i] == "#") return true;  // this level and below, including none (a/# matches a)
    if (i >= t.size()) return false;
    if (f[i] != "+" && f[i] != t[i]) return false;
  }
  return f.size() == t.size();
}

Result<std::optional<SharedFilter>> parseSharedFilter(std::string_view f) {
  constexpr std::string_view kPrefix = "$share/";
  if (f.substr(0, kPrefix.size()) != kPrefix) return std::optional<SharedFilter>();
  std::string_view rest = f.substr(kPrefix.size());
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0) {
    return Status::invalidArgument("shared subscription '" + std::string(f) +
                                   "' needs $share/{ShareName}/{topic filter}");
  }
  std::string_view group = rest.substr(0, slash);
  std::string_view filter = rest.substr(slash + 1);
  if (group.find_first_of("+#") != std::string_view::npos) {
    return Status::invalidArgument("shared subscription '" + std::string(f) +
                                   "': the ShareName has '+' or '#'");
  }
  if (!validTopicFilter(filter)) {
    return Status::invalidArgument("shared subscription '" + std::string(f) +
                                   "': its topic filter is not valid");
  }
  return std::optional<SharedFilter>(SharedFilter{std::string(group), std::string(filter)});
}

std::string_view selectingFilter(std::string_view f) {
  auto s = parseSharedFilter(f);
  if (!s.isOk() || !*s) return f;
  return f.substr(f.size() - (*s)->filter.size());
}

}  // namespace magnetar::mqtt
