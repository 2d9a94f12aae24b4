#include "config/text.h"

#include <fmt/format.h>

#include <cctype>

namespace magnetar::config {

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

std::vector<std::string> splitTrimmed(std::string_view s, char sep) {
  std::vector<std::string> out;
  while (true) {
    size_t pos = s.find(sep);
    std::string_view part = trim(s.substr(0, pos));
    if (!part.empty()) out.emplace_back(part);
    if (pos == std::string_view::npos) break;
    s.remove_prefix(pos + 1);
  }
  return out;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string formatDouble(double d) {
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

}  // namespace magnetar::config
