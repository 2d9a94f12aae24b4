#include "protocol/server_error.h"

namespace magnetar::protocol {

proto::ServerError toServerError(StatusCode code, ErrorContext ctx) {
  using E = proto::ServerError;
  switch (code) {
    case StatusCode::kNotFound:
      return ctx == ErrorContext::kSubscription ? E::SubscriptionNotFound : E::TopicNotFound;
    case StatusCode::kAlreadyExists:
    case StatusCode::kBusy:
      if (ctx == ErrorContext::kProducer) return E::ProducerBusy;
      if (ctx == ErrorContext::kConsumer) return E::ConsumerBusy;
      if (code == StatusCode::kAlreadyExists) return E::MetadataError;
      return ctx == ErrorContext::kLookup ? E::TooManyRequests : E::ServiceNotReady;
    case StatusCode::kCorruption:
      return ctx == ErrorContext::kSend ? E::ChecksumError : E::PersistenceError;
    case StatusCode::kIoError:
    case StatusCode::kNoSpace:
      return E::PersistenceError;
    case StatusCode::kNotAllowed:
    case StatusCode::kTooLarge:
    case StatusCode::kUnsupported:
      return E::NotAllowedError;
    case StatusCode::kInvalidArgument:
      if (ctx == ErrorContext::kLookup || ctx == ErrorContext::kProducer ||
          ctx == ErrorContext::kConsumer) {
        return E::InvalidTopicName;
      }
      return E::MetadataError;
    case StatusCode::kBadVersion:
      return E::MetadataError;
    case StatusCode::kClosed:
    case StatusCode::kTimeout:
    case StatusCode::kFenced:  // the topic moved to another owner: the client looks it up again
      return E::ServiceNotReady;
    case StatusCode::kOk:
    case StatusCode::kInternal:
      return E::UnknownError;
  }
  return E::UnknownError;
}

std::string_view serverErrorName(proto::ServerError e) {
  if (!proto::ServerError_IsValid(e)) return "UnknownError";
  return proto::ServerError_Name(e);
}

}  // namespace magnetar::protocol
