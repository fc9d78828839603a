#include "tnt/transport/rendezvous.h"

#include <unistd.h>

#include <optional>

#include "auth.h"
#include "rendezvous/control_plane.h"
#include "rendezvous/joining_side.h"
#include "rendezvous/master_side.h"

namespace tnt::transport {
namespace detail {

std::string local_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

std::string seconds(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

}  // namespace detail

// Joining is done by one side (the master's, or a joining rank's), which then hands its
// connections to the control plane; Note [Rendezvous phases] in control_plane.h has the life
// cycle. Members that coroutines refer to outlive them: the destructor closes every socket and
// waits for the TaskCount before any member goes.
class Rendezvous::Impl {
 public:
  Impl(EventLoop& loop, const JobEnvironment& env, RendezvousOptions options)
      : loop_(loop),
        env_(env),
        options_(std::move(options)),
        auth_{env.job_id, env.job_token},
        tasks_(loop),
        control_(loop, env_, tasks_) {}

  ~Impl() {
    loop_.call([this] {
      if (master_) master_->close_acceptor();
      control_.stop();
    });
    tasks_.wait_for_none();
  }

  std::vector<PeerAddress> join(const detail::DataAddressFor& data_address_for) {
    detail::Joined joined;
    if (env_.rank == 0) {
      master_.emplace(loop_, env_, options_, auth_, tasks_);
      joined = loop_.run(master_->run(data_address_for));
    } else {
      joined = loop_.run(detail::join_master(loop_, env_, options_, auth_, tasks_, data_address_for));
    }
    std::vector<PeerAddress> book = joined.book;
    loop_.call([&] { control_.start(std::move(joined)); });
    return book;
  }

  detail::ControlPlane& control() { return control_; }
  EventLoop& loop() { return loop_; }

 private:
  EventLoop& loop_;
  JobEnvironment env_;
  RendezvousOptions options_;
  AuthContext auth_;
  detail::TaskCount tasks_;
  std::optional<detail::MasterSide> master_;
  detail::ControlPlane control_;
};

Rendezvous::Rendezvous(EventLoop& loop, const JobEnvironment& env, RendezvousOptions options)
    : impl_(std::make_unique<Impl>(loop, env, std::move(options))) {}

Rendezvous::~Rendezvous() = default;

std::vector<PeerAddress> Rendezvous::join(const std::function<std::string(const std::string&)>& data_address_for) {
  return impl_->join(data_address_for);
}

void Rendezvous::set_failure_handler(FailureHandler handler) {
  boost::asio::dispatch(impl_->loop().strand(), [this, handler = std::move(handler)]() mutable {
    impl_->control().set_failure_handler(std::move(handler));
  });
}

void Rendezvous::set_progress_source(ProgressSource source) {
  // Before join(): the control plane, which reads it, does not run yet.
  impl_->control().set_progress_source(std::move(source));
}

void Rendezvous::report_peer_lost(int rank, const std::string& reason) {
  impl_->control().report_peer_lost(rank, reason);
}

void Rendezvous::finish() { impl_->control().finish(); }

void Rendezvous::abort(const std::string& reason) {
  auto& control = impl_->control();
  impl_->loop().call([&] { control.abort(reason); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  const auto ended = [&] {
    const auto phase = control.phase();
    return phase == detail::Phase::failed || phase == detail::Phase::finished || phase == detail::Phase::stopped;
  };
  // The master's verdict (an Abort naming this rank), unless the master is gone or stopped.
  impl_->loop().wait_until(ended, deadline);
  impl_->loop().call([&] { control.fail_here("this rank failed: " + reason); });
  impl_->loop().wait_until([&] { return control.flushed(); }, deadline);
}

void Rendezvous::progress_changed() { impl_->control().progress_changed(); }

}  // namespace tnt::transport
