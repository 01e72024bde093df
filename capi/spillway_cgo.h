// The public header as the Go side of the C ABI sees it, so that every prototype cgo generates for
// an export is checked against the header's when the library is compiled. cgo cannot write const,
// so the functions taking const pointers are declared here under other names (their Go
// signatures differ from the header's by const alone).
#ifndef SPILLWAY_CGO_H
#define SPILLWAY_CGO_H

#define spillway_configure_format spillway_configure_format_as_declared
#define spillway_plan_create spillway_plan_create_as_declared
#define spillway_local_dirs_register spillway_local_dirs_register_as_declared
#define spillway_spill_file_write spillway_spill_file_write_as_declared
#define spillway_stats_describe spillway_stats_describe_as_declared
#define spillway_stats_value spillway_stats_value_as_declared
#include "spillway.h"
#undef spillway_configure_format
#undef spillway_plan_create
#undef spillway_local_dirs_register
#undef spillway_spill_file_write
#undef spillway_stats_describe
#undef spillway_stats_value

#include <string.h>

#endif
