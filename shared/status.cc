// Status formatting and the invariant-failure handler.
#include "shared/status.h"

#include "shared/fatal.h"

namespace kiln {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

Status Status::with_context(std::string_view context) const& {
  if (is_ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

Status Status::with_context(std::string_view context) && {
  if (is_ok()) return std::move(*this);
  message_.insert(0, std::string(context) + ": ");
  return std::move(*this);
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

void check_failed(const char* file, int line, const char* expr, std::string_view msg) {
  // Through report_fatal, so that a --log-file says why the process aborted.
  report_fatal("kiln: invariant failed at " + std::string(file) + ":" + std::to_string(line) +
               ": " + expr + " -- " + std::string(msg));
  std::abort();
}

}  // namespace kiln
