// Must not compile (target broker_forbidden_upward_include, not built by default): a topic
// source including the service part above it.
#include "broker/service/broker_service.h"
