#include "admin/prometheus.h"

#include <fmt/format.h>

#include <cmath>

namespace magnetar::admin {

namespace {

// v with backslash and newline escaped (\\, \n), and with `quotes` the double quote (\").
std::string escaped(std::string_view v, bool quotes) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

const char* typeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kSummary:
      return "summary";
    case MetricType::kGauge:
      break;
  }
  return "gauge";
}

}  // namespace

std::string escapeLabelValue(std::string_view v) { return escaped(v, true); }

std::string escapeHelp(std::string_view v) { return escaped(v, false); }

std::string formatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

void PrometheusWriter::family(const std::string& name, MetricType type, std::string_view help) {
  auto [it, added] = families_.try_emplace(name);
  if (!added) return;
  it->second.type = type;
  it->second.help = std::string(help);
  order_.push_back(name);
}

void PrometheusWriter::sample(const std::string& name, const Labels& labels, double value) {
  sampleIn(name, name, labels, value);
}

void PrometheusWriter::sampleIn(const std::string& familyName, std::string_view name,
                                const Labels& labels, double value) {
  if (!families_.count(familyName)) family(familyName, MetricType::kGauge, "");
  std::string line(name);
  if (!labels.empty()) {
    line += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) line += ',';
      line += labels[i].first;
      line += "=\"";
      line += escapeLabelValue(labels[i].second);
      line += '"';
    }
    line += '}';
  }
  line += ' ';
  line += formatValue(value);
  families_[familyName].lines.push_back(std::move(line));
}

std::string PrometheusWriter::render() const {
  std::string out;
  for (const auto& name : order_) {
    const Family& f = families_.at(name);
    if (f.lines.empty()) continue;
    if (!f.help.empty()) out += fmt::format("# HELP {} {}\n", name, escapeHelp(f.help));
    out += fmt::format("# TYPE {} {}\n", name, typeName(f.type));
    for (const auto& l : f.lines) {
      out += l;
      out += '\n';
    }
  }
  return out;
}

}  // namespace magnetar::admin
