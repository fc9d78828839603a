#pragma once
// The one way tnt includes Boost.Asio. Boost 1.74's asio/awaitable.hpp uses std::exchange
// without including <utility>, which breaks under C++20 unless <utility> comes first.
#include <utility>

#include <boost/asio.hpp>
