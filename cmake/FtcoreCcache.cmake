# Use ccache when present. Precompiled headers need the sloppiness below for
# ccache to cache objects built with them; CCACHE_BASEDIR makes paths inside
# the source tree relative, so a fresh clone in another folder (CI) hits the
# cache its predecessors filled.
find_program(FTCORE_CCACHE ccache)
if(FTCORE_CCACHE)
  set(_ccache_launcher ${CMAKE_COMMAND} -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}" "CCACHE_NOHASHDIR=true"
      ${FTCORE_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_ccache_launcher})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${_ccache_launcher})
  message(STATUS "ftcore: using ccache ${FTCORE_CCACHE}")
endif()
