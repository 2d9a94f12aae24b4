// Must not compile (target broker_forbidden_private_include, not built by default): a service
// source reaching into the topic part's internal/ headers.
#include "broker/topic/internal/key_shared_state.h"
