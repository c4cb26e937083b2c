# Finds kiln's dependencies: Debian/Ubuntu packages (scripts/bootstrap installs them) plus the CUDA
# toolkit's headers when present. The CUDA driver and NVRTC are never linked: they are loaded at run
# time, so one binary starts on machines with and without a GPU.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)            # SHA-256 content hashes
find_package(nlohmann_json 3.10 REQUIRED) # config files, JSON output
find_package(spdlog REQUIRED)             # logging
# msgpack-cxx is header-only; its CMake packages differ between Debian 12 and Ubuntu 24.04 and
# drag in Boost, so kiln uses the headers directly with MSGPACK_NO_BOOST.
find_path(MSGPACK_INCLUDE_DIR msgpack.hpp REQUIRED)
find_package(CLI11 REQUIRED)              # command-line parsing and --help
find_package(CURL REQUIRED)               # LLM proposers over HTTP
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
pkg_check_modules(MUPARSER REQUIRED IMPORTED_TARGET muparser)  # shape/bytes/flops expressions
find_path(CPPZMQ_INCLUDE_DIR zmq.hpp REQUIRED)

# CUDA headers only (cuda.h, nvrtc.h); libraries are dlopen'ed by evaluator/cuda.
set(KILN_CUDA_FOUND OFF)
if(NOT KILN_WITH_CUDA STREQUAL "OFF")
  find_path(KILN_CUDA_INCLUDE_DIR NAMES cuda.h
    HINTS $ENV{CUDA_HOME}/include $ENV{CUDA_PATH}/include /usr/local/cuda/include)
  if(KILN_CUDA_INCLUDE_DIR AND EXISTS "${KILN_CUDA_INCLUDE_DIR}/nvrtc.h")
    set(KILN_CUDA_FOUND ON)
    message(STATUS "kiln: CUDA backend ON (headers in ${KILN_CUDA_INCLUDE_DIR})")
  elseif(KILN_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KILN_WITH_CUDA=ON but cuda.h/nvrtc.h were not found; set CUDA_HOME")
  else()
    message(STATUS "kiln: CUDA toolkit not found -- building WITHOUT the CUDA backend "
                   "(the cpu backend still works; install the toolkit and re-run cmake to add it)")
  endif()
endif()

# The bundle (scripts/bundle) relies on RPATH (not RUNPATH) so that carried libraries' own
# dependencies resolve too (libzmq -> libsodium); see ../docs/gpu.md.
set(CMAKE_BUILD_RPATH_USE_ORIGIN ON)
