#include "protocol/server_error.h"

#include <gtest/gtest.h>

namespace magnetar::protocol {
namespace {

TEST(ServerErrorTest, ContextPicksBusyVariant) {
  EXPECT_EQ(toServerError(Status::busy("x"), ErrorContext::kProducer), proto::ProducerBusy);
  EXPECT_EQ(toServerError(Status::busy("x"), ErrorContext::kConsumer), proto::ConsumerBusy);
  EXPECT_EQ(toServerError(Status::alreadyExists("x"), ErrorContext::kProducer),
            proto::ProducerBusy);
  EXPECT_EQ(toServerError(Status::busy("x"), ErrorContext::kLookup), proto::TooManyRequests);
  EXPECT_EQ(toServerError(Status::busy("x")), proto::ServiceNotReady);
}

TEST(ServerErrorTest, StorageAndLookupErrors) {
  EXPECT_EQ(toServerError(Status::ioError("disk")), proto::PersistenceError);
  EXPECT_EQ(toServerError(Status::noSpace("full")), proto::PersistenceError);
  EXPECT_EQ(toServerError(Status::notFound("t")), proto::TopicNotFound);
  EXPECT_EQ(toServerError(Status::notFound("s"), ErrorContext::kSubscription),
            proto::SubscriptionNotFound);
  EXPECT_EQ(toServerError(Status::invalidArgument("bad"), ErrorContext::kLookup),
            proto::InvalidTopicName);
  EXPECT_EQ(toServerError(Status::invalidArgument("bad")), proto::MetadataError);
  EXPECT_EQ(toServerError(Status::notAllowed("no")), proto::NotAllowedError);
  EXPECT_EQ(toServerError(Status::tooLarge("big")), proto::NotAllowedError);
  EXPECT_EQ(toServerError(Status::corruption("crc"), ErrorContext::kSend), proto::ChecksumError);
  EXPECT_EQ(toServerError(Status::corruption("crc")), proto::PersistenceError);
  EXPECT_EQ(toServerError(Status::closed("fenced")), proto::ServiceNotReady);
  EXPECT_EQ(toServerError(Status::internal("bug")), proto::UnknownError);
}

TEST(ServerErrorTest, NamesArePulsars) {
  EXPECT_EQ(serverErrorName(proto::ProducerBusy), "ProducerBusy");
  EXPECT_EQ(serverErrorName(proto::ProducerBlockedQuotaExceededException),
            "ProducerBlockedQuotaExceededException");
  EXPECT_EQ(serverErrorName(proto::ProducerFenced), "ProducerFenced");
  EXPECT_EQ(serverErrorName(static_cast<proto::ServerError>(999)), "UnknownError");
}

}  // namespace
}  // namespace magnetar::protocol
