# Shared warning and sanitizer flags for every paralab target.
add_library(paralab_warnings INTERFACE)
target_compile_options(paralab_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter>)

if(PARALAB_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${PARALAB_SANITIZE}> $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=${PARALAB_SANITIZE})
endif()

# paralab_library(NAME SOURCES... DEPS ...): one library target per folder.
function(paralab_library name)
  cmake_parse_arguments(PL "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${PL_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${PL_DEPS} PRIVATE paralab_warnings ${PL_PRIVATE_DEPS})
endfunction()
