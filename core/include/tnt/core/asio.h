#pragma once
// The one way tnt includes Boost.Asio. Boost 1.74's asio/awaitable.hpp uses std::exchange
// without including <utility>, which breaks under C++20 unless <utility> comes first.
#include <utility>

// Boost 1.74 turns co_await on for clang only with libc++'s <experimental/coroutine>; clang
// (the sanitizer and fuzz builds, fuzz/README.md) with libstdc++'s <coroutine> works as GCC does.
#if defined(__clang__) && !defined(BOOST_ASIO_HAS_CO_AWAIT) && defined(__cpp_impl_coroutine) && __has_include(<coroutine>)
#define BOOST_ASIO_HAS_CO_AWAIT 1
#endif

#include <boost/asio.hpp>
