// nvtx_static_injection.cpp: compiled into every program that links
// ember::collector (an INTERFACE source of the target). NVTX v3 looks, after the
// NVTX_INJECTION64_PATH variable, for a strong definition of the weak symbol
// InitializeInjectionNvtx2_fnptr in the program; this is that definition, so the
// program's NVTX calls reach the collector with no environment variable. A program
// run under another NVTX tool (Nsight Systems sets NVTX_INJECTION64_PATH) still
// goes to that tool: the variable comes first in NVTX's search.
// NVTX's headers are not included: they would define the weak default next to
// this strong one. The signature is NvtxInitializeInjectionNvtxFunc_t.
#include <cstdint>

extern "C" {
typedef const void* (*EmberNvtxGetExportTable)(std::uint32_t export_table_id);
typedef int (*EmberNvtxInitializeInjection)(EmberNvtxGetExportTable get_export_table);
int InitializeInjectionNvtx2(EmberNvtxGetExportTable get_export_table);
__attribute__((visibility("default"))) EmberNvtxInitializeInjection InitializeInjectionNvtx2_fnptr =
    InitializeInjectionNvtx2;
// Extensions (the memory extension: nvtxMemHeapRegister, ...) look for their own hook,
// InitializeInjectionNvtxExtension_fnptr (NvtxExtInitializeInjectionFunc_t).
struct nvtxExtModuleInfo_t;
typedef int (*EmberNvtxInitializeExtension)(nvtxExtModuleInfo_t* module);
int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* module);
__attribute__((visibility("default"))) EmberNvtxInitializeExtension InitializeInjectionNvtxExtension_fnptr =
    InitializeInjectionNvtxExtension;
}
