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
// writes its own file. With NVTX_INJECTION64_PATH naming this library too, NVTX is handed to
// CUPTI (InitializeInjectionNvtx2) and each kernel line carries the innermost NVTX range open on
// the thread that launched it (PyTorch's operator and input sizes: evaluator/profile/op_shapes.h).
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
#include <dlfcn.h>
#include <fcntl.h>
#include <generated_nvtx_meta.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

constexpr int kTraceFormatVersion = 1;
constexpr size_t kBufferBytes = 1 << 20;  // CUPTI fills it with ~4,000 kernel records
constexpr auto kMinFlushInterval = std::chrono::milliseconds(2);
// Launches whose NVTX range waits for their kernel record, newest kept. A kernel's record comes
// within a buffer (~4,000 records) of its launch, so older entries are ids no record will claim:
// a runtime launch is noted under both its runtime and its driver call's id.
constexpr size_t kMaxPendingRanges = size_t{1} << 16;

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

  // Launch correlation id -> the innermost NVTX range open on the launching thread, from the
  // launch callback until the kernel's record is written.
  std::mutex range_mutex;
  std::unordered_map<uint32_t, std::string> range_of;
  std::deque<uint32_t> range_order;  // ids in the order noted, for dropping the oldest

  std::mutex flush_mutex;
  std::condition_variable flush_cv;
  bool flush_wanted = false;
  bool stopping = false;
  std::thread flusher;
};

Injection* g_state = nullptr;  // set once by InitializeInjection; see the hazards above

// The NVTX ranges open on this thread, innermost last (NVTX push and pop callbacks).
thread_local std::vector<std::string> t_ranges;

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
  out +=
      ",\"start_ns\":" + u(k.start) + ",\"end_ns\":" + u(k.end) + ",\"device\":" + u(k.deviceId) +
      ",\"context\":" + u(k.contextId) + ",\"stream\":" + u(k.streamId) +
      ",\"correlation\":" + u(k.correlationId) + ",\"grid\":[" + i(k.gridX) + "," + i(k.gridY) +
      "," + i(k.gridZ) + "],\"block\":[" + i(k.blockX) + "," + i(k.blockY) + "," + i(k.blockZ) +
      "],\"registers\":" + u(k.registersPerThread) +
      ",\"shared_bytes\":" + i(static_cast<int64_t>(k.staticSharedMemory) + k.dynamicSharedMemory);
  std::string range;
  {
    std::lock_guard<std::mutex> lock(st.range_mutex);
    auto it = st.range_of.find(k.correlationId);
    if (it != st.range_of.end()) {
      range = std::move(it->second);
      st.range_of.erase(it);
    }
  }
  if (!range.empty()) {
    out += ",\"range\":\"";
    append_escaped(out, range.c_str());
    out += '"';
  }
  out += "}\n";
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

// NVTX push and pop on the calling thread (CUpti_NvtxData; one callback per call). A range pushed
// with a non-ASCII message is kept as "" so that pops stay paired.
void on_nvtx(CUpti_CallbackId id, const void* cbdata) {
  const auto* data = static_cast<const CUpti_NvtxData*>(cbdata);
  if (id == CUPTI_CBID_NVTX_nvtxRangePushA) {
    const auto* p = static_cast<const nvtxRangePushA_params*>(data->functionParams);
    t_ranges.emplace_back(p != nullptr && p->message != nullptr ? p->message : "");
  } else if (id == CUPTI_CBID_NVTX_nvtxRangePushEx) {
    const auto* p = static_cast<const nvtxRangePushEx_params*>(data->functionParams);
    const nvtxEventAttributes_t* a = p != nullptr ? p->eventAttrib : nullptr;
    const bool ascii =
        a != nullptr && a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii != nullptr;
    t_ranges.emplace_back(ascii ? a->message.ascii : "");
  } else if (id == CUPTI_CBID_NVTX_nvtxRangePop && !t_ranges.empty()) {
    t_ranges.pop_back();
  }
}

// The API calls that launch kernels, and those that synchronise (after which completed buffers
// are flushed), per domain: the subscriber enables these and tells them apart.
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000};
constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};
constexpr CUpti_CallbackId kRuntimeSyncs[] = {CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020};
constexpr CUpti_CallbackId kDriverSyncs[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,  CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2};

bool is_launch(CUpti_CallbackDomain domain, CUpti_CallbackId id) {
  auto in = [id](const auto& ids) {
    return std::find(std::begin(ids), std::end(ids), id) != std::end(ids);
  };
  return domain == CUPTI_CB_DOMAIN_RUNTIME_API
             ? in(kRuntimeLaunches)
             : domain == CUPTI_CB_DOMAIN_DRIVER_API && in(kDriverLaunches);
}

// The one CUPTI subscriber (a process may have only one): NVTX ranges; at a launch's entry, the
// innermost open range under the launch's correlation id (the kernel record carries the id of the
// API call that launched it, runtime or driver, so both are noted); at the exit of a
// synchronising call, a flush request to the flusher (only a lock and a notify, so the program's
// thread is not held up).
void CUPTIAPI on_api(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                     const void* cbdata) {
  auto* st = static_cast<Injection*>(userdata);
  if (st->forked_child.load()) return;
  if (domain == CUPTI_CB_DOMAIN_NVTX) {
    on_nvtx(id, cbdata);
    return;
  }
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  if (is_launch(domain, id)) {
    if (data->callbackSite != CUPTI_API_ENTER || t_ranges.empty() || t_ranges.back().empty())
      return;
    std::lock_guard<std::mutex> lock(st->range_mutex);
    st->range_of[data->correlationId] = t_ranges.back();
    st->range_order.push_back(data->correlationId);
    while (st->range_order.size() > kMaxPendingRanges) {
      st->range_of.erase(st->range_order.front());
      st->range_order.pop_front();
    }
    return;
  }
  if (data->callbackSite != CUPTI_API_EXIT) return;
  {
    std::lock_guard<std::mutex> lock(st->flush_mutex);
    st->flush_wanted = true;
  }
  st->flush_cv.notify_one();
}

void subscribe_api_callbacks(Injection& st) {
  CUpti_SubscriberHandle subscriber{};
  CUptiResult r = cuptiSubscribe(&subscriber, on_api, &st);
  if (r != CUPTI_SUCCESS) {
    warn("no API callbacks (" + cupti_error(r) +
         "): no flush at synchronisations (a process killed before it exits may lose its last "
         "kernels) and no NVTX ranges");
    return;
  }
  auto enable = [&](CUpti_CallbackDomain domain, const auto& ids) {
    for (CUpti_CallbackId id : ids) cuptiEnableCallback(1, subscriber, domain, id);
  };
  enable(CUPTI_CB_DOMAIN_DRIVER_API, kDriverSyncs);
  enable(CUPTI_CB_DOMAIN_DRIVER_API, kDriverLaunches);
  enable(CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeSyncs);
  enable(CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeLaunches);
  // Delivered only where NVTX was handed to CUPTI (NVTX_INJECTION64_PATH:
  // InitializeInjectionNvtx2).
  for (CUpti_CallbackId id : {CUPTI_CBID_NVTX_nvtxRangePushA, CUPTI_CBID_NVTX_nvtxRangePushEx,
                              CUPTI_CBID_NVTX_nvtxRangePop}) {
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_NVTX, id);
  }
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
  subscribe_api_callbacks(*st);
  st->flusher = std::thread(flusher_main, st);
  pthread_atfork(nullptr, nullptr, on_fork_child);
  std::atexit(at_exit);
  return 1;
}

// The NVTX injection entry point (NVTX_INJECTION64_PATH names this library; `kiln profile` sets
// it): NVTX calls it once, at a process's first NVTX call, to find who receives the calls. They
// go to CUPTI (its own entry point, in the libcupti this library links), so that the NVTX
// callbacks above see each push and pop. 0 (NVTX calls do nothing) when CUPTI's cannot be found.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    void* get_export_table) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiSubscribe), &info) == 0 || info.dli_fname == nullptr) {
    warn("NVTX: cannot find libcupti; no NVTX ranges in the trace");
    return 0;
  }
  void* cupti = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  using Entry = int (*)(void*);
  auto entry = cupti != nullptr ? reinterpret_cast<Entry>(dlsym(cupti, "InitializeInjectionNvtx2"))
                                : nullptr;
  if (entry == nullptr) {
    warn(std::string("NVTX: ") + info.dli_fname +
         " has no InitializeInjectionNvtx2; no NVTX ranges in the trace");
    return 0;
  }
  return entry(get_export_table);
}
