# tunefarm_include_root(<dir>...)
#
# Every library defined under the given source directories (recursively)
# gets the repository root as its own PUBLIC include directory: components
# include one another as "component/header.h", and a target sees the headers
# of the libraries it links, each carrying its own path rather than
# inheriting it from tunefarm_proto (whose include directory is only its
# generated code).

function(_tunefarm_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _tunefarm_targets_under(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()

function(tunefarm_include_root)
  foreach(dir IN LISTS ARGN)
    _tunefarm_targets_under(${CMAKE_SOURCE_DIR}/${dir} targets)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(target STREQUAL "tunefarm_proto" OR
         NOT type MATCHES "^(STATIC|SHARED|OBJECT)_LIBRARY$")
        continue()
      endif()
      target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
    endforeach()
  endforeach()
endfunction()
