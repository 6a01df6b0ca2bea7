# Shared warning and sanitizer flags for every paralab target.
add_library(paralab_warnings INTERFACE)
target_compile_options(paralab_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter>)
# gcc 12 warns -Wrestrict inside libstdc++'s own string copies (operator+ with a literal,
# insert, assign) at -O2: a false positive, GCC bugs 105329 and 105651 (a gcc 12 regression).
# It fired at 10 call sites here (exec/, ir/, sim/), none of them overlapping copies.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12 AND
   CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(paralab_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()

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
