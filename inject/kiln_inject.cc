// libkiln_inject.so: records the GPU time of every kernel a program runs, for `kiln profile`.
//
// How it works: the CUDA driver dlopen()s the library named by CUDA_INJECTION64_PATH when a process
// initialises CUDA (cuInit) and calls its InitializeInjection(). That enables CUPTI's Activity API
// for CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (which, unlike KIND_KERNEL, does not serialise
// kernels), hands CUPTI buffers, and appends one JSON line per kernel to
// $KILN_PROFILE_DIR/kiln-trace-<pid>-<ns>.jsonl each time CUPTI returns a buffer. The file opens
// with a "process" line and, when the process exits normally, ends with an "end" line (atexit +
// a forced cuptiActivityFlushAll); evaluator/profile/trace.cc reads it (format in docs/profile.md).
// Child processes inherit the environment, so every process of a program that forks and execs
// writes its own file.
//
// Hazards:
// - A process killed by SIGKILL (kiln's own sandbox children end that way) never runs atexit. To
//   lose as little as possible, a callback on the synchronising API calls (device/stream/event
//   synchronise, device-to-host copies) wakes a flusher thread that delivers every buffer whose
//   records are complete; after a synchronisation, that is every kernel launched before it.
// - fork() without exec copies CUPTI's state but none of its threads: a forked child never
//   writes (pthread_atfork), so records of the parent are not written twice.
// - One CUPTI client per process: a program that uses CUPTI itself (torch.profiler) takes the
//   activity callbacks over; do not run both at once.
// - The entry point and atexit take no argument, so the state is one object per process, never
//   destroyed (static destructors run after atexit handlers and would race CUPTI's threads).
#include <cupti.h>
#include <cxxabi.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace {

constexpr int kTraceFormatVersion = 1;
constexpr size_t kBufferBytes = 1 << 20;  // CUPTI fills it with ~4,000 kernel records
constexpr auto kMinFlushInterval = std::chrono::milliseconds(2);

struct Injection {
  std::string dir;
  pid_t pid = 0;
  std::atomic<bool> forked_child{false};  // set in a child of fork(): write nothing

  std::mutex file_mutex;  // guards everything below it up to the flusher's
  int fd = -1;
  bool file_failed = false;
  std::string path;
  uint64_t kernels = 0;
  uint64_t dropped = 0;
  std::unordered_map<std::string, std::string> demangled;  // mangled -> readable

  std::mutex flush_mutex;
  std::condition_variable flush_cv;
  bool flush_wanted = false;
  bool stopping = false;
  std::thread flusher;
};

Injection* g_state = nullptr;  // set once by InitializeInjection; see the hazards above

void warn(const std::string& message) {
  std::fprintf(stderr, "kiln inject (pid %d): %s\n", static_cast<int>(getpid()), message.c_str());
}

std::string cupti_error(CUptiResult r) {
  const char* text = nullptr;
  if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown error";
  return std::string(text) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

// JSON string body: quotes, backslashes and every byte outside printable ASCII escaped, so a line
// is valid JSON whatever bytes a kernel name holds.
void append_escaped(std::string& out, const char* s) {
  static const char kHex[] = "0123456789abcdef";
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s); *p; ++p) {
    if (*p == '"' || *p == '\\') {
      out += '\\';
      out += static_cast<char>(*p);
    } else if (*p < 0x20 || *p >= 0x7f) {
      out += "\\u00";
      out += kHex[*p >> 4];
      out += kHex[*p & 15];
    } else {
      out += static_cast<char>(*p);
    }
  }
}

const std::string& demangle(Injection& st, const char* mangled) {
  auto it = st.demangled.find(mangled);
  if (it != st.demangled.end()) return it->second;
  int status = 0;
  char* readable = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = (status == 0 && readable != nullptr) ? readable : mangled;
  std::free(readable);
  return st.demangled.emplace(mangled, std::move(name)).first->second;
}

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string exe_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Writes `text` to the trace file, opening it (with its "process" line) on first use. Caller holds
// file_mutex. A failure is reported once on stderr; the program itself is never disturbed.
void write_locked(Injection& st, const std::string& text) {
  if (st.fd < 0 && !st.file_failed) {
    st.path = st.dir + "/kiln-trace-" + std::to_string(st.pid) + "-" +
              std::to_string(realtime_ns()) + ".jsonl";
    st.fd = open(st.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (st.fd < 0) {
      st.file_failed = true;
      warn("cannot write " + st.path + ": " + std::strerror(errno) + "; no trace for this process");
      return;
    }
    uint32_t cupti_version = 0;
    cuptiGetVersion(&cupti_version);
    std::string head = "{\"kind\":\"process\",\"version\":" + std::to_string(kTraceFormatVersion) +
                       ",\"pid\":" + std::to_string(st.pid) + ",\"ppid\":" +
                       std::to_string(getppid()) + ",\"exe\":\"";
    append_escaped(head, exe_path().c_str());
    head += "\",\"cupti_version\":" + std::to_string(cupti_version) +
            ",\"time_ns\":" + std::to_string(realtime_ns()) + "}\n";
    write_locked(st, head);
  }
  if (st.fd < 0) return;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(st.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      warn("writing " + st.path + ": " + std::strerror(errno) + "; the trace is incomplete");
      close(st.fd);
      st.fd = -1;
      st.file_failed = true;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

void append_kernel(Injection& st, const CUpti_ActivityKernel10& k, std::string& out) {
  const char* mangled = k.name != nullptr ? k.name : "<unnamed>";
  const std::string& name = demangle(st, mangled);
  auto u = [](uint64_t v) { return std::to_string(v); };
  auto i = [](int64_t v) { return std::to_string(v); };
  out += "{\"kind\":\"kernel\",\"name\":\"";
  append_escaped(out, name.c_str());
  out += '"';
  if (name != mangled) {
    out += ",\"mangled\":\"";
    append_escaped(out, mangled);
    out += '"';
  }
  out += ",\"start_ns\":" + u(k.start) + ",\"end_ns\":" + u(k.end) + ",\"device\":" +
         u(k.deviceId) + ",\"context\":" + u(k.contextId) + ",\"stream\":" + u(k.streamId) +
         ",\"correlation\":" + u(k.correlationId) + ",\"grid\":[" + i(k.gridX) + "," +
         i(k.gridY) + "," + i(k.gridZ) + "],\"block\":[" + i(k.blockX) + "," + i(k.blockY) + "," +
         i(k.blockZ) + "],\"registers\":" + u(k.registersPerThread) + ",\"shared_bytes\":" +
         i(static_cast<int64_t>(k.staticSharedMemory) + k.dynamicSharedMemory) + "}\n";
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // CUPTI wants 8-byte alignment; aligned_alloc needs the size to be a multiple of it.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                               size_t valid_size) {
  Injection& st = *g_state;
  if (!st.forked_child.load()) {
    std::lock_guard<std::mutex> lock(st.file_mutex);
    std::string lines;
    uint64_t count = 0;
    CUpti_Activity* record = nullptr;
    while (valid_size > 0 &&
           cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
          record->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
        continue;
      }
      // Kernel records only ever grow at their end across CUPTI versions: the fields read here
      // sit at the same offsets in every version a CUDA 13 driver delivers.
      append_kernel(st, *reinterpret_cast<const CUpti_ActivityKernel10*>(record), lines);
      ++count;
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS &&
        dropped > 0) {
      lines += "{\"kind\":\"dropped\",\"records\":" + std::to_string(dropped) + "}\n";
      st.dropped += dropped;
    }
    st.kernels += count;
    if (!lines.empty()) write_locked(st, lines);
  }
  std::free(buffer);
}

// Runs on the flusher thread: a default flush delivers every buffer whose records are complete.
void flusher_main(Injection* st) {
  std::unique_lock<std::mutex> lock(st->flush_mutex);
  while (true) {
    st->flush_cv.wait(lock, [st] { return st->flush_wanted || st->stopping; });
    if (st->stopping) return;
    st->flush_wanted = false;
    lock.unlock();
    cuptiActivityFlushAll(0);
    std::this_thread::sleep_for(kMinFlushInterval);  // bounds the cost of a synchronise loop
    lock.lock();
  }
}

// API callback at the exit of a synchronising call: ask the flusher for a flush. Only a lock and
// a notify, so the program's thread is not held up.
void CUPTIAPI on_sync(void* userdata, CUpti_CallbackDomain, CUpti_CallbackId, const void* cbdata) {
  auto* st = static_cast<Injection*>(userdata);
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  if (data->callbackSite != CUPTI_API_EXIT || st->forked_child.load()) return;
  {
    std::lock_guard<std::mutex> lock(st->flush_mutex);
    st->flush_wanted = true;
  }
  st->flush_cv.notify_one();
}

void subscribe_sync_callbacks(Injection& st) {
  CUpti_SubscriberHandle subscriber{};
  CUptiResult r = cuptiSubscribe(&subscriber, on_sync, &st);
  if (r != CUPTI_SUCCESS) {
    warn("no flush at synchronisations (" + cupti_error(r) +
         "); a process killed before it exits may lose its last kernels");
    return;
  }
  const CUpti_CallbackId driver_ids[] = {
      CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
      CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,  CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2};
  const CUpti_CallbackId runtime_ids[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020};
  for (CUpti_CallbackId id : driver_ids) cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : runtime_ids) cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
}

void on_fork_child() {
  if (g_state != nullptr) g_state->forked_child.store(true);
}

void at_exit() {
  Injection& st = *g_state;
  if (st.forked_child.load()) return;
  {
    std::lock_guard<std::mutex> lock(st.flush_mutex);
    st.stopping = true;
  }
  st.flush_cv.notify_one();
  if (st.flusher.joinable()) st.flusher.join();
  if (CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS) {
    warn("cuptiActivityFlushAll: " + cupti_error(r));
  }
  std::lock_guard<std::mutex> lock(st.file_mutex);
  write_locked(st, "{\"kind\":\"end\",\"kernels\":" + std::to_string(st.kernels) +
                       ",\"dropped\":" + std::to_string(st.dropped) + "}\n");
  if (st.fd >= 0) close(st.fd);
  st.fd = -1;
  st.file_failed = true;  // nothing more is written after the end line
}

}  // namespace

// The CUDA injection entry point: called once per process from cuInit. Returns 1 in every case so
// that profiling never stops the program; what went wrong goes to stderr and into the trace.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (g_state != nullptr) return 1;
  const char* dir = std::getenv("KILN_PROFILE_DIR");
  if (dir == nullptr || *dir == '\0') {
    warn("KILN_PROFILE_DIR is not set; not profiling (run the program through `kiln profile`)");
    return 1;
  }
  auto* st = new Injection();  // never deleted: see the hazards at the top
  st->dir = dir;
  st->pid = getpid();
  g_state = st;
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    const std::string why = "CUPTI kernel activity unavailable: " + cupti_error(r);
    warn(why + "; this process is not profiled");
    std::lock_guard<std::mutex> lock(st->file_mutex);
    std::string line = "{\"kind\":\"error\",\"message\":\"";
    append_escaped(line, why.c_str());
    write_locked(*st, line + "\"}\n");
    return 1;
  }
  subscribe_sync_callbacks(*st);
  st->flusher = std::thread(flusher_main, st);
  pthread_atfork(nullptr, nullptr, on_fork_child);
  std::atexit(at_exit);
  return 1;
}
