// nvtx_injection.h: the collector's NVTX tool. NVTX (the v3 header-only library
// compiled into every program that annotates) calls InitializeInjectionNvtx2 once
// per NVTX instance, found either through NVTX_INJECTION64_PATH (`ember record`) or
// through the static hook InitializeInjectionNvtx2_fnptr that linking
// ember::collector compiles into the program (nvtx_static_injection.cpp). The tool
// fills NVTX's callback tables with the handlers in nvtx_injection.cpp, which turn
// ranges, marks, payloads, registered strings, thread, category and CUDA stream
// names into trace events; NVTX's memory extension (heaps, regions) into memory events.
#pragma once

#include <nvtx3/nvToolsExt.h>

struct nvtxExtModuleInfo_t;

namespace ember::collector {
class Session;
// Writes what NVTX named before `session` opened (category names) into its file.
void nvtx_session_started(Session& session);
}  // namespace ember::collector

extern "C" {
// The NVTX tool entry point (exported from libember_collector.so). Returns 1: the
// handlers stay installed for the life of the process, recording only while a
// session captures.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);
// The entry point of NVTX extensions (found the same two ways, the static hook being
// InitializeInjectionNvtxExtension_fnptr): installs the memory extension's handlers
// (heaps and regions -> memory_events). Returns 1.
__attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* module);
}
