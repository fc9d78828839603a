#pragma once
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>;
// every tnt file includes Asio through this header so that C++20 builds work.
#include <utility>

// Boost 1.74 turns co_await on for clang only with libc++'s <experimental/coroutine>; clang
// (the sanitizer and fuzz builds, fuzz/README.md) with libstdc++'s <coroutine> works as GCC does.
#if defined(__clang__) && !defined(BOOST_ASIO_HAS_CO_AWAIT) && defined(__cpp_impl_coroutine) && __has_include(<coroutine>)
#define BOOST_ASIO_HAS_CO_AWAIT 1
#endif

#include <boost/asio.hpp>
