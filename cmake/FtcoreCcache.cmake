# Use ccache when present. Precompiled headers need the sloppiness below for
# ccache to cache objects built with them.
find_program(FTCORE_CCACHE ccache)
if(FTCORE_CCACHE)
  set(_ccache_launcher ${CMAKE_COMMAND} -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      ${FTCORE_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_ccache_launcher})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${_ccache_launcher})
  message(STATUS "ftcore: using ccache ${FTCORE_CCACHE}")
endif()
