#pragma once
// The master's side of joining: it listens on TNT_MASTER_ADDR:TNT_MASTER_PORT, authenticates
// every connection, checks each rank's Hello against its own, and answers all of them with the
// address book once every rank is in, or with a refusal that says why.
#include <optional>
#include <string>

#include "auth.h"
#include "rendezvous_parts.h"
#include "tnt/transport/environment.h"
#include "tnt/transport/rendezvous.h"
#include "wire.capnp.h"

namespace tnt::transport::detail {

class MasterSide {
 public:
  MasterSide(EventLoop& loop, const JobEnvironment& env, const RendezvousOptions& options, const AuthContext& auth,
             TaskCount& tasks);

  // Runs on the loop's strand until every rank has joined; throws tnt::JobError (or ConfigError
  // for an address it cannot listen on) after refusing every rank that did join.
  boost::asio::awaitable<Joined> run(DataAddressFor data_address_for);
  // On the strand: stops accepting (the owner is going away).
  void close_acceptor();

 private:
  void listen();
  void arm_deadline(boost::asio::steady_timer& deadline);
  boost::asio::awaitable<void> accept_all();
  boost::asio::awaitable<void> admit(std::unique_ptr<ControlLink> link);
  boost::asio::awaitable<bool> read_hello(ControlLink& link, int authenticated_rank);
  std::string check_hello(wire::Hello::Reader hello, int authenticated_rank) const;
  boost::asio::awaitable<void> refuse(ControlLink& link, const std::string& reason);
  void reject(const std::string& reason);
  void fail_rendezvous(const std::string& reason);
  void answer_with_address_book();

  EventLoop& loop_;
  const JobEnvironment& env_;
  const RendezvousOptions& options_;
  const AuthContext& auth_;
  TaskCount& tasks_;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
  Joined joined_;
  int ranks_in_ = 0;
  int pending_admissions_ = 0;
  int rejections_ = 0;
  std::string rendezvous_error_;
  std::string last_rejection_;
};

}  // namespace tnt::transport::detail
