#pragma once
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>;
// every tnt file includes Asio through this header so that C++20 builds work.
#include <utility>

#include <boost/asio.hpp>
