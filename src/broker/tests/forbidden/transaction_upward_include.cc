// Must not compile (target broker_forbidden_transaction_include, not built by default): a
// transaction source including the topic part, which it does not link (the coordinator reaches
// topics only through TransactionBufferClient).
#include "broker/topic/topic.h"
