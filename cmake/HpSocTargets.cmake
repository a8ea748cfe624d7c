# Reads native/common/soc_targets.tsv, the one table of SoC targets (its header says the columns),
# into the including directory's scope:
#   HP_SOC_TARGETS            the cpu-kind targets, narrowest first
#   HP_SOC_DEFAULT_TARGETS    those built by default
#   HP_SOC_FLAGS_<name>       a target's compiler flags (a list)
#   HP_SOC_REQUIRES_<name>    the CPU features it needs (a list)
set(HP_SOC_TABLE "${PROJECT_SOURCE_DIR}/native/common/soc_targets.tsv")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${HP_SOC_TABLE}")
file(STRINGS "${HP_SOC_TABLE}" hp_soc_rows REGEX "^[^#]")
set(HP_SOC_TARGETS "")
set(HP_SOC_DEFAULT_TARGETS "")
foreach(hp_soc_row IN LISTS hp_soc_rows)
  string(REPLACE "\t" ";" hp_soc_fields "${hp_soc_row}")
  list(LENGTH hp_soc_fields hp_soc_field_count)
  if(NOT hp_soc_field_count EQUAL 6)
    message(FATAL_ERROR "${HP_SOC_TABLE}: '${hp_soc_row}' has ${hp_soc_field_count} tab-separated fields, expected 6")
  endif()
  list(GET hp_soc_fields 0 hp_soc_name)
  list(GET hp_soc_fields 1 hp_soc_kind)
  list(GET hp_soc_fields 2 hp_soc_default)
  list(GET hp_soc_fields 3 hp_soc_requires)
  list(GET hp_soc_fields 4 hp_soc_flags)
  if(NOT hp_soc_kind STREQUAL "cpu")
    continue()
  endif()
  list(APPEND HP_SOC_TARGETS "${hp_soc_name}")
  if(hp_soc_default STREQUAL "yes")
    list(APPEND HP_SOC_DEFAULT_TARGETS "${hp_soc_name}")
  endif()
  string(REPLACE "," ";" HP_SOC_REQUIRES_${hp_soc_name} "${hp_soc_requires}")
  separate_arguments(HP_SOC_FLAGS_${hp_soc_name} UNIX_COMMAND "${hp_soc_flags}")
endforeach()

# hp_write_soc_target_header(<path>): the C++ view of the table (soc_targets.cpp and
# settings.cpp include it): HP_SOC_TARGET_NAMES ("a|b|c") and HP_SOC_TARGET_LIST(X), which
# expands X(name, "feature", ...) once per target, narrowest first.
function(hp_write_soc_target_header path)
  set(names "")
  set(rows "")
  foreach(name IN LISTS HP_SOC_TARGETS)
    list(APPEND names "${name}")
    list(JOIN HP_SOC_REQUIRES_${name} "\", \"" features)
    string(APPEND rows " \\\n  X(${name}, \"${features}\")")
  endforeach()
  list(JOIN names "|" names)
  file(CONFIGURE OUTPUT "${path}" CONTENT
"// Generated from native/common/soc_targets.tsv by cmake/HpSocTargets.cmake: edit the table.
#define HP_SOC_TARGET_NAMES \"${names}\"
#define HP_SOC_TARGET_LIST(X)${rows}
")
endfunction()
