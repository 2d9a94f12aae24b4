// Answers of the transaction coordinator (PIP-31) to TC_CLIENT_CONNECT, NEW_TXN,
// ADD_PARTITION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN and END_TXN (the requests: commands_client.cc).
#include "protocol/commands.h"

namespace magnetar::protocol {

namespace {

proto::BaseCommand make(proto::BaseCommand::Type type) {
  proto::BaseCommand cmd;
  cmd.set_type(type);
  return cmd;
}

// request_id and the txn id of a response, error and message when failed.
template <typename Response>
void fillTxnResponse(Response* r, uint64_t requestId, uint64_t least, uint64_t most,
                     std::optional<proto::ServerError> error, std::string_view message) {
  r->set_request_id(requestId);
  r->set_txnid_least_bits(least);
  r->set_txnid_most_bits(most);
  if (error) {
    r->set_error(*error);
    r->set_message(std::string(message));
  }
}

}  // namespace

Buffer Commands::newTcClientConnectResponse(uint64_t requestId,
                                            std::optional<proto::ServerError> error,
                                            std::string_view message) {
  auto cmd = make(proto::BaseCommand::TC_CLIENT_CONNECT_RESPONSE);
  auto* r = cmd.mutable_tcclientconnectresponse();
  r->set_request_id(requestId);
  if (error) {
    r->set_error(*error);
    r->set_message(std::string(message));
  }
  return serialize(cmd);
}

Buffer Commands::newNewTxnResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                   uint64_t txnidMostBits) {
  auto cmd = make(proto::BaseCommand::NEW_TXN_RESPONSE);
  fillTxnResponse(cmd.mutable_newtxnresponse(), requestId, txnidLeastBits, txnidMostBits,
                  std::nullopt, {});
  return serialize(cmd);
}

Buffer Commands::newNewTxnErrorResponse(uint64_t requestId, uint64_t tcId, proto::ServerError error,
                                        std::string_view message) {
  auto cmd = make(proto::BaseCommand::NEW_TXN_RESPONSE);
  auto* r = cmd.mutable_newtxnresponse();
  r->set_request_id(requestId);
  r->set_txnid_most_bits(tcId);
  r->set_error(error);
  r->set_message(std::string(message));
  return serialize(cmd);
}

Buffer Commands::newAddPartitionToTxnResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                              uint64_t txnidMostBits,
                                              std::optional<proto::ServerError> error,
                                              std::string_view message) {
  auto cmd = make(proto::BaseCommand::ADD_PARTITION_TO_TXN_RESPONSE);
  fillTxnResponse(cmd.mutable_addpartitiontotxnresponse(), requestId, txnidLeastBits, txnidMostBits,
                  error, message);
  return serialize(cmd);
}

Buffer Commands::newAddSubscriptionToTxnResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                                 uint64_t txnidMostBits,
                                                 std::optional<proto::ServerError> error,
                                                 std::string_view message) {
  auto cmd = make(proto::BaseCommand::ADD_SUBSCRIPTION_TO_TXN_RESPONSE);
  fillTxnResponse(cmd.mutable_addsubscriptiontotxnresponse(), requestId, txnidLeastBits,
                  txnidMostBits, error, message);
  return serialize(cmd);
}

Buffer Commands::newEndTxnResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                   uint64_t txnidMostBits, std::optional<proto::ServerError> error,
                                   std::string_view message) {
  auto cmd = make(proto::BaseCommand::END_TXN_RESPONSE);
  fillTxnResponse(cmd.mutable_endtxnresponse(), requestId, txnidLeastBits, txnidMostBits, error,
                  message);
  return serialize(cmd);
}

}  // namespace magnetar::protocol
