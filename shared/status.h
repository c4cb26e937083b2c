// Status and Result<T>: kiln's one way to report recoverable failures (Redis, ZeroMQ, CUDA driver,
// bad messages, bad files, LLM output). Expected outcomes (a compile error, a wrong answer) are
// result values of their own; broken invariants abort through KILN_CHECK.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kiln {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller's input is wrong (bad file, bad message, bad flag)
  kNotFound,           // a named thing does not exist
  kAlreadyExists,      // a write-once thing was written before
  kFailedPrecondition, // the system is not in a state where this can run
  kOutOfRange,         // a value outside the limits (e.g. a message over the size limit)
  kUnavailable,        // a peer or service cannot be reached now; retrying may help
  kDeadlineExceeded,   // a timeout passed
  kResourceExhausted,  // out of memory, disk, credits
  kUnimplemented,      // not supported by this build or backend
  kDataLoss,           // stored data is corrupt or truncated
  kCancelled,          // stopped on request
  kInternal,           // a library failed in a way we did not expect
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context as the error travels up: "loading run.json: field 'redis.port': expected int".
  Status with_context(std::string_view context) const&;
  Status with_context(std::string_view context) &&;

  // "INVALID_ARGUMENT: message" (or "OK").
  std::string to_string() const;

  // Marks a status as deliberately ignored.
  void ignore() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status deadline_exceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }

[[noreturn]] void check_failed(const char* file, int line, const char* expr, std::string_view msg);

// Result<T>: a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                   // NOLINT(implicit)
  Result(Status status) : v_(std::move(status)) {               // NOLINT(implicit)
    if (std::get<Status>(v_).is_ok()) check_failed(__FILE__, __LINE__, "!status.is_ok()",
                                                   "Result built from an OK status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  // The error; OK when the result holds a value.
  Status status() const { return is_ok() ? Status() : std::get<Status>(v_); }

  T& value() & { require(); return std::get<T>(v_); }
  const T& value() const& { require(); return std::get<T>(v_); }
  T&& value() && { require(); return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return is_ok() ? std::get<T>(v_) : std::move(fallback); }

 private:
  void require() const {
    if (!is_ok()) check_failed(__FILE__, __LINE__, "result.is_ok()", std::get<Status>(v_).to_string());
  }
  std::variant<T, Status> v_;
};

}  // namespace kiln

// Aborts with file and line when an invariant is broken. Never use it on untrusted input.
#define KILN_CHECK(cond, msg)                                                  \
  do {                                                                         \
    if (!(cond)) ::kiln::check_failed(__FILE__, __LINE__, #cond, (msg));       \
  } while (0)

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when it is not OK.
#define KILN_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::kiln::Status kiln_status_ = (expr);          \
    if (!kiln_status_.is_ok()) return kiln_status_; \
  } while (0)

// KILN_ASSIGN_OR_RETURN(auto x, make_x()); -- declares x or returns the error.
#define KILN_ASSIGN_OR_RETURN(decl, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_result_, __LINE__), decl, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return tmp.status();            \
  decl = std::move(tmp).value()
