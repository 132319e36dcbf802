// reader.cpp: TraceReader (implementation in progress).
#include "profiler/store/reader.h"
#include "profiler/store/schema.h"
