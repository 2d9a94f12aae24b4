// A small writer of the Prometheus text exposition format (version 0.0.4): metric families with
// HELP and TYPE, samples with escaped label values. (prometheus-cpp is not packaged in Debian 12.)
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace magnetar::admin {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kGauge, kCounter, kSummary };

// Collects samples by family and renders them; every family's samples are printed together under
// one HELP and one TYPE line, families in the order they were first declared.
// Thread: one owner (build, then render).
class PrometheusWriter {
 public:
  // Declares a family (first declaration wins; later ones only add samples).
  void family(const std::string& name, MetricType type, std::string_view help);
  // Adds a sample to a declared family (undeclared names are declared as untyped gauges).
  void sample(const std::string& name, const Labels& labels, double value);
  // Adds a sample called `name` to `family`'s block (a summary's quantile lines, _count, _sum;
  // a counter family `x` with its sample `x_total`, as Prometheus' Java client prints them).
  void sampleIn(const std::string& family, std::string_view name, const Labels& labels,
                double value);
  // The exposition text, each line ending in '\n'.
  std::string render() const;

 private:
  struct Family {
    MetricType type = MetricType::kGauge;
    std::string help;
    std::vector<std::string> lines;  // "name{labels} value"
  };
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

// Escapes a label value: backslash, double quote and newline (\\, \", \n).
std::string escapeLabelValue(std::string_view v);
// Escapes HELP text: backslash and newline.
std::string escapeHelp(std::string_view v);
// A sample value as Prometheus reads it (integers without a fraction; NaN, +Inf, -Inf).
std::string formatValue(double v);

// The content type of the exposition.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace magnetar::admin
