// The one mapping from Magnetar's Status codes to the protocol's ServerError; ServerError names.
#pragma once

#include <string_view>

#include "base/status.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::protocol {

// What the failed operation was; picks between ServerErrors that share a StatusCode.
enum class ErrorContext {
  kGeneric,
  kProducer,      // PRODUCER (create producer)
  kConsumer,      // SUBSCRIBE
  kLookup,        // LOOKUP, PARTITIONED_METADATA, GET_TOPICS_OF_NAMESPACE: topic names
  kSubscription,  // UNSUBSCRIBE, SEEK, ... on an existing subscription
  kSend,          // SEND (answered with SEND_ERROR)
};

// Maps a failed Status to the ServerError the peer gets, following what Pulsar's broker answers:
//   kNotFound        -> TopicNotFound (kSubscription: SubscriptionNotFound)
//   kAlreadyExists   -> ProducerBusy (kProducer) / ConsumerBusy (kConsumer) / MetadataError
//   kBusy            -> ProducerBusy (kProducer) / ConsumerBusy (kConsumer) /
//                       TooManyRequests (kLookup) / ServiceNotReady
//   kIoError, kNoSpace, kCorruption -> PersistenceError
//   kCorruption in kSend -> ChecksumError (a SEND whose checksum did not verify)
//   kNotAllowed, kTooLarge, kUnsupported -> NotAllowedError
//   kInvalidArgument -> InvalidTopicName (kLookup, kProducer, kConsumer) / MetadataError
//   kClosed, kTimeout -> ServiceNotReady (the client retries, with a new lookup)
//   anything else (kInternal, kOk) -> UnknownError
proto::ServerError toServerError(StatusCode code, ErrorContext ctx = ErrorContext::kGeneric);
inline proto::ServerError toServerError(const Status& s,
                                        ErrorContext ctx = ErrorContext::kGeneric) {
  return toServerError(s.code(), ctx);
}

// Pulsar's name of a ServerError ("ProducerBusy", ...); "UnknownError" for values out of range.
std::string_view serverErrorName(proto::ServerError e);

}  // namespace magnetar::protocol
