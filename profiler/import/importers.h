// importers.h: the three importers behind import_file() (import.cpp). Each reads
// sink.input() and writes through the sink; the caller finishes the sink.
#pragma once

#include "profiler/import/import_sink.h"

namespace ember::importing {

void import_kineto_json(ImportSink& sink);      // kineto_importer.cpp
void import_chrome_json(ImportSink& sink);      // chrome_importer.cpp
void import_nsys_sqlite(ImportSink& sink);      // nsys_importer.cpp
void import_nvprof_sqlite(ImportSink& sink);    // nvprof_importer.cpp
void import_memory_snapshot(ImportSink& sink);  // memory_snapshot_importer.cpp

}  // namespace ember::importing
