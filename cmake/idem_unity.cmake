# idem_unity_build(): with IDEM_UNITY_BUILD, every target in the build
# compiles its C++ files eight to a compiler run. Each unit is a source in
# the build tree, <target>_unity_<n>.cc, that includes eight of the target's
# files by their path relative to the checkout (#include "engine/store.cc";
# the checkout is on each unit's include path). CMake's own UNITY_BUILD
# includes them by absolute path, so a clone in another folder would
# compile every unit again instead of finding it in the compiler cache
# (scripts/compiler-cache.sh). Call it once, after every target exists.

# The targets defined in `dir` and in the directories below it.
function(idem_unity_targets_below dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    idem_unity_targets_below("${subdir}" below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Replaces `target`'s .cc files inside the checkout with units of eight.
function(idem_unity_target target)
  get_target_property(type ${target} TYPE)
  if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY|MODULE_LIBRARY)$")
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(kept)
  set(merged)
  foreach(source IN LISTS sources)
    if(source MATCHES "\\$<")  # a generator expression: kept as it is
      list(APPEND kept "${source}")
      continue()
    endif()
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY "${source_dir}"
               OUTPUT_VARIABLE absolute)
    cmake_path(IS_PREFIX PROJECT_SOURCE_DIR "${absolute}" NORMALIZE inside)
    if(inside AND absolute MATCHES "\\.cc$")
      cmake_path(RELATIVE_PATH absolute BASE_DIRECTORY "${PROJECT_SOURCE_DIR}"
                 OUTPUT_VARIABLE relative)
      list(APPEND merged "${relative}")
    else()
      list(APPEND kept "${absolute}")
    endif()
  endforeach()
  list(LENGTH merged count)
  if(count LESS 2)
    return()
  endif()
  get_target_property(binary_dir ${target} BINARY_DIR)
  math(EXPR last "${count} - 1")
  set(unit 0)
  foreach(first RANGE 0 ${last} 8)
    list(SUBLIST merged ${first} 8 files)
    list(TRANSFORM files REPLACE "^(.+)$" "#include \"\\1\"\n")
    string(JOIN "" content ${files})
    set(file "${binary_dir}/${target}_unity_${unit}.cc")
    file(CONFIGURE OUTPUT "${file}" CONTENT "${content}")
    list(APPEND kept "${file}")
    math(EXPR unit "${unit} + 1")
  endforeach()
  set_property(TARGET ${target} PROPERTY SOURCES ${kept})
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}")
endfunction()

function(idem_unity_build)
  idem_unity_targets_below("${PROJECT_SOURCE_DIR}" targets)
  foreach(target IN LISTS targets)
    idem_unity_target(${target})
  endforeach()
endfunction()
