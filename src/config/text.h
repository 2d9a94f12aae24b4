// Small text helpers of the config module (internal; not for other modules).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace magnetar::config {

// Strips spaces, tabs, CR and LF at both ends.
std::string_view trim(std::string_view s);
// Splits on `sep`, trims each part and drops empty parts.
std::vector<std::string> splitTrimmed(std::string_view s, char sep);
bool equalsIgnoreCase(std::string_view a, std::string_view b);
// Shortest text that reads back as d, always with a '.' or exponent ("1.0", "0.16", "1e+20").
std::string formatDouble(double d);

}  // namespace magnetar::config
