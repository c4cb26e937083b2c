// One coordinator per run. `kiln run` and `kiln coordinator` hold a lease in the run's Redis
// (kiln:lease, "HOST PID TOKEN", a 15 s expiry renewed every 2 s) from before they read the run
// until they end: a second coordinator on the same Redis (a --resume while the first still runs,
// two Jobs sharing one Redis) would hand out the run's tasks a second time and write its state
// over the first's. The --out folder's lock covers one machine; the lease covers a shared Redis.
#pragma once

#include <chrono>
#include <string>

#include "shared/redis_client.h"
#include "shared/status.h"

namespace kiln::cli {

class RunLease {
 public:
  static constexpr std::chrono::milliseconds kTtl{15000};
  static constexpr std::chrono::milliseconds kRenewEvery{2000};

  // Takes the lease: at once when it is free or its holder was a process of this host that is
  // gone (a coordinator killed and started again); else waits for the holder to stop renewing
  // it, at most kTtl. FAILED_PRECONDITION naming the holder when it is alive. `who` prefixes the
  // line said while waiting.
  static Result<RunLease> acquire(redis::RedisClient& client, const std::string& who);

  RunLease(RunLease&&) noexcept;
  RunLease& operator=(RunLease&&) = delete;
  ~RunLease() = default;  // not released here: Redis may be the reason the run ends (it lapses)

  // Gives it back, if still ours: the next coordinator need not wait for it to lapse.
  void release();

  // Renews it when kRenewEvery has passed. FAILED_PRECONDITION when another coordinator holds it
  // now (ours expired while this one stalled); OK on a Redis error (the run's own commands wait
  // out an outage, and the next renewal takes the lease again if it is free).
  Status renew();

 private:
  RunLease(redis::RedisClient& client, std::string holder);
  redis::RedisClient* client_;
  std::string holder_;  // "HOST PID TOKEN"; empty once moved from
  std::chrono::steady_clock::time_point renewed_;
};

}  // namespace kiln::cli
