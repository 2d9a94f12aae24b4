// Renders the registry as conf/broker.conf and as the settings table of docs/configuration.md.
#pragma once

#include <string>
#include <string_view>

namespace magnetar::config {

// The full text of conf/broker.conf: every setting, grouped by category, with its doc (or notes)
// as '#' comments, its type and bounds, and `key=<default>`.
std::string renderBrokerConf();

// Markers around the generated table in docs/configuration.md.
inline constexpr std::string_view kDocsTableBegin =
    "<!-- BEGIN GENERATED SETTINGS TABLE: magnetar config docs --format markdown -->";
inline constexpr std::string_view kDocsTableEnd = "<!-- END GENERATED SETTINGS TABLE -->";

// The Markdown tables (one per category: key, type, default, dynamic, doc) that go between the
// markers. Does not include the markers.
std::string renderDocsTable();

// "int, 0..65535, dynamic": type, bounds or allowed values, and "dynamic" when it is.
std::string describeType(std::string_view key);

}  // namespace magnetar::config
