// Early-return helpers for Status / Result<T> (engine-internal).
#pragma once

#include <vkflash/result.hpp>

#define VKF_CONCAT_INNER(a, b) a##b
#define VKF_CONCAT(a, b) VKF_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function if it is an error.
#define VKF_RETURN_IF_ERROR(expr)                  \
  do {                                             \
    ::vkflash::Status vkf_status_ = (expr);        \
    if (!vkf_status_.ok()) return vkf_status_;     \
  } while (0)

// `lhs = value of expr` (a Result<T>), or returns its Status from the enclosing function.
#define VKF_ASSIGN_OR_RETURN(lhs, expr) VKF_ASSIGN_OR_RETURN_IMPL(VKF_CONCAT(vkf_result_, __LINE__), lhs, expr)
#define VKF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
