// RemoteMonitor: each epoch's logs POSTed as JSON over HTTP (Boost.Beast), with a bounded time
// for the whole exchange. A failed post is a warning: monitoring never fails a run.
#include "tnt/core/asio.h"
// (asio first: tnt/core/asio.h is the one way tnt includes it)
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cctype>
#include <chrono>
#include <cmath>
#include <regex>

#include "tnt/core/error.h"
#include "tnt/trainer/callbacks.h"

namespace tnt::trainer {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

std::string json_number(double x) {
  if (std::isnan(x)) return "NaN";  // as Python's json.dumps writes them
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return fmt::format("{:.17g}", x);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string form_encode(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned>(u));
    }
  }
  return out;
}

// One POST; an empty string when it succeeded with a 2xx status, else what went wrong.
std::string post(const std::string& host, const std::string& port, const std::string& target,
                 const std::string& content_type, const std::string& body, std::chrono::milliseconds timeout) {
  boost::asio::io_context io;
  tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  http::request<http::string_body> request{http::verb::post, target, 11};
  request.set(http::field::host, host + ":" + port);
  request.set(http::field::user_agent, "tnt RemoteMonitor");
  request.set(http::field::content_type, content_type);
  request.body() = body;
  request.prepare_payload();
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  std::string failure;
  auto fail = [&](const char* what, beast::error_code e) {
    failure = e == beast::error::timeout ? fmt::format("no answer within {} ms (at {})", timeout.count(), what)
                                         : fmt::format("{}: {}", what, e.message());
  };
  stream.expires_after(timeout);
  resolver.async_resolve(host, port, [&](beast::error_code resolved, tcp::resolver::results_type endpoints) {
    if (resolved) return fail("resolve", resolved);
    stream.async_connect(endpoints, [&](beast::error_code connected, const tcp::endpoint&) {
      if (connected) return fail("connect", connected);
      http::async_write(stream, request, [&](beast::error_code sent, std::size_t) {
        if (sent) return fail("send", sent);
        http::async_read(stream, buffer, response, [&](beast::error_code received, std::size_t) {
          if (received) return fail("receive", received);
          if (response.result_int() / 100 != 2) failure = fmt::format("HTTP status {}", response.result_int());
          beast::error_code ignored;
          stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        });
      });
    });
  });
  // The stream's expiry bounds connect, send and receive; this bounds the resolver too.
  io.run_for(timeout + std::chrono::milliseconds(100));
  if (!io.stopped()) {
    // Cancelled handlers run (with operation_aborted) before the objects they use are gone.
    resolver.cancel();
    stream.close();
    io.restart();
    io.run_for(std::chrono::seconds(1));
    failure = fmt::format("no answer within {} ms", timeout.count());
  }
  return failure;
}

}  // namespace

std::string logs_json(std::size_t epoch, const Logs& logs) {
  std::string out = fmt::format("{{\"epoch\": {}", epoch);
  for (const auto& [key, value] : logs) out += fmt::format(", {}: {}", json_string(key), json_number(value));
  return out + "}";
}

RemoteMonitor::RemoteMonitor(RemoteMonitorOptions options) : options_(std::move(options)) {
  static const std::regex url(R"(^http://(\[[0-9A-Fa-f:.]+\]|[^/:\[\]]+)(?::([0-9]{1,5}))?(/.*)?$)");
  std::smatch m;
  if (!std::regex_match(options_.url, m, url)) {
    throw ConfigError(fmt::format(
        "RemoteMonitor: url '{}': expected http://HOST[:PORT][/PATH] (https is not supported)", options_.url));
  }
  host_ = m[1].str();
  if (host_.front() == '[') host_ = host_.substr(1, host_.size() - 2);
  port_ = m[2].matched ? m[2].str() : "80";
  target_ = m[3].matched ? m[3].str() : "/";
  if (!(options_.timeout_seconds > 0 && options_.timeout_seconds <= 600)) {
    throw ConfigError(
        fmt::format("RemoteMonitor: timeout must be in (0, 600] seconds, got {}", options_.timeout_seconds));
  }
  if (!options_.send_as_json && options_.field.empty()) {
    throw ConfigError("RemoteMonitor: field is empty (it names the form field that holds the JSON)");
  }
}

void RemoteMonitor::on_epoch_end(std::size_t epoch, const Logs& logs) {
  if (run().rank() != 0) return;
  const std::string json = logs_json(epoch, logs);
  const std::string failure =
      options_.send_as_json
          ? post(host_, port_, target_, "application/json", json,
                 std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_seconds * 1000)))
          : post(host_, port_, target_, "application/x-www-form-urlencoded", options_.field + "=" + form_encode(json),
                 std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_seconds * 1000)));
  if (failure.empty()) {
    ++posted_;
  } else {
    spdlog::warn("RemoteMonitor: could not post epoch {}'s logs to {}: {} (training goes on)", epoch + 1, options_.url,
                 failure);
  }
}

}  // namespace tnt::trainer
