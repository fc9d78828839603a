#pragma once
// The one way tnt includes Boost.Asio. Boost 1.74's asio/awaitable.hpp uses std::exchange
// without including <utility>, which breaks under C++20 unless <utility> comes first.
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
