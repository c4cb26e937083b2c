# Writes build_info.h (the version and the commit `kiln version` prints) at every build, not only
# when CMake configures: a build of a later commit in the same build folder must not report the
# commit the folder was configured at. configure_file leaves the file untouched when nothing
# changed, so nothing recompiles then.
#   cmake -DSOURCE_DIR=... -DIN=build_info.h.in -DOUT=build_info.h -DPROJECT_VERSION=... -P build_info.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE KILN_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT KILN_GIT_COMMIT)
  set(KILN_GIT_COMMIT "unknown")
endif()
configure_file(${IN} ${OUT} @ONLY)
